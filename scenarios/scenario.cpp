#include "scenarios/scenario.h"

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "scenarios/frameworks.h"
#include "scenarios/presets.h"
#include "scenarios/recompute_search.h"
#include "scenarios/run_config.h"
#include "scenarios/schema.h"
#include "scenarios/sizes.h"
#include "sim/core/error.h"
#include "sim/core/limits.h"
#include "sim/core/parse.h"
#include "topology/clos.h"

namespace trainsim::scen {
namespace {

// A value the scenario states itself (YAML, --set or a flattened row), already type-checked.
struct Given {
  std::string value;   // canonical text
  std::string origin;  // "<file>:<line>", "--set" or the row name
  ErrorContext where;
};
using GivenMap = std::map<std::string, Given>;

std::string text(double v) { return fmt::format("{}", v); }
std::string text(bool v) { return v ? "true" : "false"; }

// A preset's MHA head count and its ffn = 4·hidden are given as 0 ("follow heads / hidden"), so
// that `--set model.heads=...` or `model.hidden=...` on top of a preset keeps the model consistent
// instead of pairing new heads with the preset's KV heads or a new hidden with the old MLP size.
std::map<std::string, std::string> model_values(const model::ModelConfig& m) {
  const bool mha = m.kv_heads == m.heads;
  const bool ffn_4h = m.mlp == model::MlpKind::kGelu && m.ffn_hidden == 4 * m.hidden;
  return {{"model.layers", std::to_string(m.layers)},
          {"model.hidden", std::to_string(m.hidden)},
          {"model.heads", std::to_string(m.heads)},
          {"model.kv_heads", mha ? "0" : std::to_string(m.kv_heads)},
          {"model.ffn_hidden", ffn_4h ? "0" : std::to_string(m.ffn_hidden)},
          {"model.vocab", std::to_string(m.vocab)},
          {"model.seq_len", std::to_string(m.seq_len)},
          {"model.mlp", model::to_string(m.mlp)},
          {"model.norm", model::to_string(m.norm)},
          {"model.position", model::to_string(m.position)},
          {"model.bias", text(m.bias)},
          {"model.tied_embeddings", text(m.tied_embeddings)},
          {"model.attention_window", std::to_string(m.attention_window)},
          {"model.experts", std::to_string(m.experts)},
          {"model.top_k", std::to_string(m.top_k)},
          {"model.moe_every", std::to_string(m.moe_every)},
          {"model.head_dim", std::to_string(m.head_dim_given)},
          {"model.dropout", text(m.dropout)}};
}

// Presets describe the hardware only; cluster.gpus is the job's and never comes from a preset.
std::map<std::string, std::string> cluster_values(const ClusterPreset& p) {
  const topo::ClusterSpec& c = p.cluster;
  const topo::FabricSpec& f = c.fabric;
  return {{"cluster.gpu", p.gpu},
          {"cluster.gpus_per_node", std::to_string(c.gpus_per_node)},
          {"cluster.nics_per_node", std::to_string(c.nics_per_node)},
          {"cluster.nic_gbps", text(c.nic_Gbps)},
          {"cluster.fabric.tiers", std::to_string(f.tiers)},
          {"cluster.fabric.switch_radix", std::to_string(f.switch_radix)},
          {"cluster.fabric.switch_port_gbps", text(f.switch_port_Gbps)},
          {"cluster.fabric.port_split", std::to_string(f.port_split)},
          {"cluster.fabric.oversubscription",
           text(f.oversubscription.empty() ? 1.0 : f.oversubscription.front())},
          {"cluster.fabric.pod_gpus", std::to_string(f.pod_gpus)},
          {"cluster.fabric.pods", std::to_string(f.pods)},
          {"cluster.fabric.above_pod_oversubscription", text(f.above_pod_oversubscription)},
          {"cluster.fabric.rail_optimized", text(f.rail_optimized)},
          {"cluster.fabric.servers_per_tor", std::to_string(f.servers_per_tor)},
          {"cluster.fabric.spine_radix", std::to_string(f.spine_radix)}};
}

std::string describe_fabric(const topo::ClusterSpec& c) {
  const topo::FabricSpec& f = c.fabric;
  if (f.pod_gpus > 0 && f.pods > 0) return fmt::format("{} pods of {} GPUs", f.pods, f.pod_gpus);
  std::string out = fmt::format("{} tiers of radix-{} switches", f.tiers, f.switch_radix);
  if (f.port_split > 1) out += fmt::format(", ToR ports split {} ways", f.port_split);
  if (!f.oversubscription.empty()) {
    out += fmt::format(", {}:1 oversubscribed", f.oversubscription.front());
  }
  return out;
}

class Resolver {
 public:
  Resolver(const GivenMap& given, std::string name) : given_(given) {
    scenario_.source = std::move(name);
  }

  Scenario run() {
    // Given values go in first so that the presets and the system group they choose can fill
    // the keys around them; a key the scenario gives is never overwritten.
    for (const KeyDef& k : schema()) set(k.path, k.default_value, "default");
    for (const auto& [key, g] : given_) set(key, g.value, g.origin);
    apply_model_preset();
    apply_cluster_preset();
    apply_framework();

    resolve_optimizer();
    build_model();
    resolve_global_batch();
    build_cluster();
    build_parallel();
    build_training();
    build_routing();
    resolve_auto_micro_batch();
    resolve_auto_vpp();
    resolve_auto_recompute();
    note_recompute_layers();
    check_offload();
    check_tp_overlap();
    note_framework_capabilities();
    scenario_.system = get("optimizations.system");
    scenario_.framework = get("framework.preset");
    scenario_.calibration_profile = get("calibration.profile");
    scenario_.fidelity = get("simulation.fidelity");
    const std::string& seed = get("simulation.seed");
    std::from_chars(seed.data(), seed.data() + seed.size(), scenario_.seed);
    scenario_.simulation.symmetry = flag("simulation.symmetry");
    scenario_.simulation.jitter = real("simulation.jitter");
    scenario_.simulation.straggler_rank = integer("simulation.straggler_rank");
    scenario_.simulation.straggler_host = integer("simulation.straggler_host");
    scenario_.simulation.straggler_factor = real("simulation.straggler_factor");
    scenario_.values = values_;
    scenario_.origin = origin_;
    for (const auto& [key, g] : given_) scenario_.given[key] = g.value;
    return std::move(scenario_);
  }

 private:
  void set(const std::string& key, std::string value, std::string origin) {
    values_[key] = std::move(value);
    origin_[key] = std::move(origin);
  }
  void derive(const std::string& key, std::string value, const std::string& note) {
    set(key, std::move(value), "derived");
    if (!note.empty()) scenario_.notes.push_back(note);
  }
  bool given(const std::string& key) const { return given_.count(key) > 0; }
  const std::string& get(const std::string& key) const { return values_.at(key); }
  bool flag(const std::string& key) const { return get(key) == "true"; }
  // Values are canonical text already checked by normalize_value; the checked conversions
  // still name the key should a preset or a derived value ever be out of range.
  double real(const std::string& key) const { return parse_double(get(key), where(key)); }

  // Where a key's value came from, for messages: its line when the scenario gave it, `--set`,
  // or the preset, system group or default that set it (never the scenario file for a value
  // the file does not contain).
  ErrorContext where(const std::string& key) const {
    const auto it = given_.find(key);
    if (it != given_.end()) return it->second.where;
    const auto o = origin_.find(key);
    return origin_context(o == origin_.end() ? std::string("default") : o->second, key);
  }
  // Where a problem between several keys is blamed: the first of `keys` the command line set
  // (the value the user just changed), else `fallback`'s origin.
  ErrorContext blame(std::initializer_list<const char*> keys, const std::string& fallback) const {
    for (const char* key : keys) {
      const ErrorContext w = where(key);
      if (w.file == "--set") return w;
    }
    return where(fallback);
  }

  std::int64_t int64(const std::string& key) const {
    const std::string& s = get(key);
    const IntResult r = to_int64(s);
    return r.problem == NumberProblem::kNone ? r.value : parse_int64(s, where(key));
  }
  int integer(const std::string& key) const {
    const std::int64_t v = int64(key);
    if (v > std::numeric_limits<int>::max()) {
      throw_input(fmt::format("{} is too large (at most {})", v, std::numeric_limits<int>::max()),
                  where(key));
    }
    return static_cast<int>(v);
  }

  void apply_model_preset() {
    // A shape key given as 0 means "from model.preset" (its documented default), as if absent.
    const auto shape_given = [&](const std::string& key) {
      static const std::set<std::string> from_preset_when_0 = {
          "model.layers", "model.hidden", "model.heads", "model.vocab", "model.seq_len"};
      return given(key) && !(from_preset_when_0.count(key) > 0 && get(key) == "0");
    };
    std::string preset = get("model.preset");
    if (!given("model.preset") && (shape_given("model.layers") || shape_given("model.hidden") ||
                                   shape_given("model.heads"))) {
      preset = "none";
      derive("model.preset", preset,
             "model.preset = none (the model's shape is given without a preset)");
    }
    if (preset == "none") return;
    for (const auto& [key, value] : model_values(*model_preset(preset))) {
      if (!shape_given(key)) set(key, value, "preset " + preset);
    }
  }

  void apply_cluster_preset() {
    std::string preset = get("cluster.preset");
    if (!given("cluster.preset") && given("cluster.gpu")) {
      preset = default_cluster_for_gpu(get("cluster.gpu"));
      derive("cluster.preset", preset,
             fmt::format("cluster.preset = {} (the usual cluster of cluster.gpu {})", preset,
                         get("cluster.gpu")));
    }
    if (preset == "none") return;
    const auto values = cluster_values(*cluster_preset(preset));
    if (given("cluster.preset") && given("cluster.gpu") && values.count("cluster.gpu") > 0 &&
        values.at("cluster.gpu") != get("cluster.gpu")) {
      // A GPU on another GPU's cluster is allowed (the servers, NICs and fabric stay the
      // preset's), but never silently: `run --set cluster.gpu=gb200` on the built-in scenario,
      // which names megascale-ampere, put GB200s behind 8 x 200 Gb/s NICs without a word.
      const std::string usual = default_cluster_for_gpu(get("cluster.gpu"));
      scenario_.notes.push_back(fmt::format(
          "cluster.gpu = {} on the {} cluster preset, which is made for {}: its servers, NICs "
          "and fabric are kept{}",
          get("cluster.gpu"), preset, values.at("cluster.gpu"),
          usual != preset ? fmt::format(" ({}'s usual cluster is cluster.preset={})",
                                        get("cluster.gpu"), usual)
                          : std::string()));
    }
    for (const auto& [key, value] : values) {
      if (!given(key)) set(key, value, "preset " + preset);
    }
  }

  // The framework preset (scenarios/frameworks.h) fills the capability keys the scenario does
  // not give; `auto` follows optimizations.system, whose names are aliases of presets.
  void apply_framework() {
    std::string name = get("framework.preset");
    if (name == "auto") {
      name = framework_for_system(get("optimizations.system"));
      derive("framework.preset", name,
             given("optimizations.system")
                 ? fmt::format("framework.preset = {} (optimizations.system {} stands for it)", name,
                               get("optimizations.system"))
                 : "");
    }
    const FrameworkPreset* fw = find_framework(name);
    if (fw == nullptr) throw_input("unknown framework preset `" + name + "`", where("framework.preset"));
    for (const auto& [key, value] : fw->values) {
      if (!given(key)) set(key, value, "framework " + name);
    }
    if (!given("framework.selective_recompute")) {
      set("framework.selective_recompute",
          fw->op_recompute ? "op" : fw->selective_recompute ? "attention" : "none",
          "framework " + name);
    }
    fused_attention_kernel_ = fw->fused_attention;
  }

  // What the scenario asks of its framework version that the version did not have is simulated
  // as asked, with a note (the zero 3 of a run written on a Megatron-LM preset was silent).
  void note_framework_capabilities() {
    const FrameworkPreset* fw = find_framework(get("framework.preset"));
    if (fw == nullptr) return;
    for (std::string& n : capability_notes(
             *fw, scenario_.parallel.zero, scenario_.parallel.cp,
             scenario_.training.recompute == model::Recompute::kSelective, &scenario_.model)) {
      scenario_.notes.push_back(std::move(n));
    }
  }

  // LAMB is both a lever and an optimizer; the two keys must agree, and either decides the other.
  void resolve_optimizer() {
    const std::string optimizer = get("training.optimizer");
    const bool lamb = flag("optimizations.lamb");
    if (optimizer == "auto") {
      derive("training.optimizer", lamb ? "lamb" : "adam",
             lamb ? "training.optimizer = lamb (optimizations.lamb is true)" : "");
      return;
    }
    if ((optimizer == "lamb") == lamb) return;
    if (given("optimizations.lamb")) {
      const ErrorContext lever = where("optimizations.lamb");
      throw_input(
          fmt::format("`{}` conflicts with optimizations.lamb = {} ({}{})", optimizer, text(lamb),
                      lever.file, lever.line > 0 ? ":" + std::to_string(lever.line) : ""),
          where("training.optimizer"),
          "drop one of the two keys; optimizations.lamb chooses the optimizer");
    }
    derive(
        "optimizations.lamb", text(!lamb),
        fmt::format("optimizations.lamb = {} (training.optimizer is {})", text(!lamb), optimizer));
  }

  void build_model() {
    model::ModelConfig& m = scenario_.model;
    const std::string preset = get("model.preset");
    m.name = preset == "none" ? "custom" : preset;

    std::vector<std::string> missing;
    for (const char* key :
         {"model.layers", "model.hidden", "model.heads", "model.vocab", "model.seq_len"}) {
      if (int64(key) == 0) missing.push_back(key);
    }
    if (!missing.empty()) {
      throw_input(fmt::format("no model: model.preset is `none` and {} {} not set",
                              fmt::join(missing, ", "), missing.size() == 1 ? "is" : "are"),
                  where("model.preset"),
                  "name a model preset (trainsim --list-presets) or give model.layers, "
                  "model.hidden, model.heads, model.vocab and model.seq_len");
    }
    m.layers = integer("model.layers");
    m.hidden = integer("model.hidden");
    m.heads = integer("model.heads");
    m.vocab = integer("model.vocab");
    m.seq_len = integer("model.seq_len");
    m.mlp = get("model.mlp") == "swiglu" ? model::MlpKind::kSwiglu : model::MlpKind::kGelu;
    m.norm =
        get("model.norm") == "rmsnorm" ? model::NormKind::kRmsNorm : model::NormKind::kLayerNorm;
    m.position = get("model.position") == "rope" ? model::PositionKind::kRope
                                                 : model::PositionKind::kLearned;
    m.bias = flag("model.bias");
    m.tied_embeddings = flag("model.tied_embeddings");
    m.experts = integer("model.experts");
    m.top_k = integer("model.top_k");
    m.moe_every = integer("model.moe_every");
    m.head_dim_given = integer("model.head_dim");
    m.dropout = flag("model.dropout");

    if (int64("model.kv_heads") == 0) derive("model.kv_heads", get("model.heads"), "");
    m.kv_heads = integer("model.kv_heads");
    if (int64("model.ffn_hidden") == 0) {
      if (m.mlp == model::MlpKind::kSwiglu) {
        throw_input("a SwiGLU model needs its MLP size", where("model.ffn_hidden"),
                    "set model.ffn_hidden (4 x model.hidden is GeLU's convention)");
      }
      const std::int64_t ffn = 4 * static_cast<std::int64_t>(m.hidden);
      derive("model.ffn_hidden", std::to_string(ffn),
             fmt::format("model.ffn_hidden = {} (4 x model.hidden)", ffn));
    }
    m.ffn_hidden = integer("model.ffn_hidden");

    if (m.head_dim_given == 0 && m.hidden % m.heads != 0) {
      throw_input(
          fmt::format("model.hidden {} is not divisible by model.heads {}", m.hidden, m.heads),
          blame({"model.heads", "model.hidden"}, "model.heads"),
          "or give model.head_dim, the width of one head");
    }
    if (m.heads % m.kv_heads != 0) {
      throw_input(
          fmt::format("model.heads {} is not divisible by model.kv_heads {}", m.heads, m.kv_heads),
          blame({"model.kv_heads", "model.heads"}, "model.kv_heads"));
    }

    m.parallel_block = flag("optimizations.parallel_block");
    const int window = integer("model.attention_window");
    if (flag("optimizations.sliding_window")) {
      if (window == 0) {
        throw_input("optimizations.sliding_window is on but model.attention_window is 0",
                    where("optimizations.sliding_window"),
                    "set model.attention_window to the window in tokens");
      }
      m.attention_window = window;
    } else {
      m.attention_window = 0;
      if (window > 0) {
        scenario_.notes.push_back(fmt::format(
            "model.attention_window = {} is unused: optimizations.sliding_window is false",
            window));
      }
    }
    // Fine-grained MoE reads optimistic (docs/validation.md, the Qwen3-30B-A3B row): say so
    // where a planner reads the result, not only in the validation docs.
    if (m.experts > 0) {
      scenario_.notes.push_back(
          "MoE: the router's auxiliary work and the token dispatcher's host synchronisations "
          "are not modelled; a fine-grained MoE (Qwen3-30B-A3B, 128 experts) ran far slower "
          "than simulated (docs/validation.md, nemo-2025-moe-runs.csv)");
    }
  }

  void resolve_global_batch() {
    const std::int64_t tokens =
        parse_size(get("training.global_batch_tokens"), where("training.global_batch_tokens"));
    if (tokens == 0) return;
    // The command line overrides the file: a --set batch in sequences replaces the file's batch
    // in tokens (and a --set batch in tokens the file's in sequences, below), as any --set
    // replaces the key it names. Both from one place and disagreeing is an error.
    const bool batch_set = where("training.global_batch").file == "--set";
    const bool tokens_set = where("training.global_batch_tokens").file == "--set";
    if (given("training.global_batch") && batch_set && !tokens_set) {
      scenario_.notes.push_back(fmt::format(
          "training.global_batch {} (--set) replaces training.global_batch_tokens {} ({})",
          get("training.global_batch"), get("training.global_batch_tokens"),
          where("training.global_batch_tokens").file));
      set("training.global_batch_tokens", "0", "derived");  // unused, as the config says
      return;
    }
    const std::int64_t seq = scenario_.model.seq_len;
    if (tokens % seq != 0) {
      throw_input(fmt::format("{} tokens is not a whole number of {}-token sequences",
                              get("training.global_batch_tokens"), seq),
                  where("training.global_batch_tokens"));
    }
    const std::string batch = std::to_string(tokens / seq);
    if (given("training.global_batch") && tokens_set && !batch_set &&
        get("training.global_batch") != batch) {
      scenario_.notes.push_back(fmt::format(
          "training.global_batch_tokens {} (--set) replaces training.global_batch {} ({})",
          get("training.global_batch_tokens"), get("training.global_batch"),
          where("training.global_batch").file));
    } else if (given("training.global_batch") && get("training.global_batch") != batch) {
      throw_input(fmt::format("training.global_batch {} disagrees with "
                              "training.global_batch_tokens {} = {} sequences of {}",
                              get("training.global_batch"), get("training.global_batch_tokens"),
                              batch, seq),
                  where("training.global_batch"), "give only one of the two");
    }
    derive("training.global_batch", batch,
           fmt::format("training.global_batch = {} ({} tokens / {})", batch,
                       get("training.global_batch_tokens"), seq));
  }

  void build_cluster() {
    topo::ClusterSpec& c = scenario_.cluster;
    const std::string preset = get("cluster.preset");
    c.name = preset == "none" ? "custom" : preset;
    c.gpu = *gpu_preset(get("cluster.gpu"));
    apply_gpu_spec(c.gpu);
    c.gpus_per_node = integer("cluster.gpus_per_node");
    c.nics_per_node = integer("cluster.nics_per_node");
    c.nic_Gbps = real("cluster.nic_gbps");
    c.fabric.tiers = integer("cluster.fabric.tiers");
    c.fabric.switch_radix = integer("cluster.fabric.switch_radix");
    c.fabric.switch_port_Gbps = real("cluster.fabric.switch_port_gbps");
    c.fabric.port_split = integer("cluster.fabric.port_split");
    // One ratio for every tier that has uplinks: all but the top one.
    const double oversubscription = real("cluster.fabric.oversubscription");
    c.fabric.oversubscription.clear();
    if (oversubscription != 1.0) {
      c.fabric.oversubscription.assign(static_cast<std::size_t>(c.fabric.tiers - 1),
                                       oversubscription);
    }
    c.fabric.pod_gpus = integer("cluster.fabric.pod_gpus");
    c.fabric.pods = integer("cluster.fabric.pods");
    c.fabric.above_pod_oversubscription = real("cluster.fabric.above_pod_oversubscription");
    if (c.fabric.above_pod_oversubscription != 1.0 && c.fabric.pod_gpus == 0) {
      scenario_.notes.push_back(fmt::format(
          "cluster.fabric.above_pod_oversubscription = {} has no effect: without "
          "cluster.fabric.pod_gpus the whole fabric is one pod (set pod_gpus to the GPUs behind "
          "one full-bisection pod)",
          get("cluster.fabric.above_pod_oversubscription")));
    }
    c.fabric.rail_optimized = flag("cluster.fabric.rail_optimized");
    c.fabric.servers_per_tor = integer("cluster.fabric.servers_per_tor");
    c.fabric.spine_radix = integer("cluster.fabric.spine_radix");
    c.fabric.failed_cables = integer("cluster.fabric.failed_cables");
    c.fabric.failure_seed = static_cast<std::uint64_t>(int64("cluster.fabric.failure_seed"));
    c.fabric.failed_switches.clear();
    // Names split at commas, '+' (a --compare value holds no comma), ';' or white space.
    std::string name;
    const std::string switches = get("cluster.fabric.failed_switches");
    for (const char ch : (switches == "none" ? std::string() : switches) + ",") {
      if (ch == ',' || ch == '+' || ch == ';' || ch == ' ' || ch == '\t') {
        if (!name.empty()) c.fabric.failed_switches.push_back(name);
        name.clear();
      } else {
        name += ch;
      }
    }
    const std::string fabric_file = get("cluster.fabric.file");
    c.fabric.file = fabric_file == "none" ? std::string() : fabric_file;
    if (!c.fabric.file.empty()) {
      // Checked at every fidelity: a path that names nothing is a typo even where the file is
      // not read (it was accepted silently at analytic fidelity).
      std::error_code ec;
      if (!std::filesystem::exists(c.fabric.file, ec)) {
        throw_input("no file `" + c.fabric.file + "`", where("cluster.fabric.file"),
                    "a GraphML or GraphViz file of the fabric (`trainsim topo --export dot` "
                    "writes one); a relative path is read from the working folder");
      }
      if (std::filesystem::is_directory(c.fabric.file, ec)) {
        throw_input("`" + c.fabric.file + "` is a folder, not a fabric file",
                    where("cluster.fabric.file"));
      }
      scenario_.notes.push_back(
          "cluster.fabric.file = " + c.fabric.file +
          ": flow and packet fidelity run on this fabric (topo::cluster_graph); the analytic "
          "and schedule fidelities price collectives from the cluster's NICs and NVLink and do "
          "not read it");
      // Keys that describe the fabric, given beside a file that describes it too: the file wins
      // at flow and packet fidelity, which a user changing the key would not see.
      if (given("cluster.nic_gbps")) {
        scenario_.notes.push_back(
            "cluster.nic_gbps = " + get("cluster.nic_gbps") +
            " prices the analytic and schedule fidelities only: flow and packet fidelity take "
            "every cable's rate from " + c.fabric.file + " (edit its NIC cables' gbps instead)");
      }
      std::string shape;
      for (const char* k : {"cluster.fabric.tiers", "cluster.fabric.switch_radix",
                            "cluster.fabric.switch_port_gbps", "cluster.fabric.port_split",
                            "cluster.fabric.oversubscription", "cluster.fabric.pod_gpus",
                            "cluster.fabric.pods", "cluster.fabric.above_pod_oversubscription",
                            "cluster.fabric.rail_optimized", "cluster.fabric.servers_per_tor",
                            "cluster.fabric.spine_radix"}) {
        if (given(k)) shape += (shape.empty() ? "" : ", ") + std::string(k);
      }
      if (!shape.empty()) {
        scenario_.notes.push_back(
            shape + ": flow and packet fidelity run on the fabric " + c.fabric.file +
            " describes, not on the Clos these keys build");
      }
    }
    if (c.fabric.failed_cables > 0 || !c.fabric.failed_switches.empty()) {
      scenario_.notes.push_back(
          "cluster.fabric.failed_cables / failed_switches: flows route around the failed parts "
          "at flow and packet fidelity; the analytic and schedule fidelities price collectives "
          "in closed form and do not see them");
    }
  }

  // A GPU the presets do not hold: the cluster.gpu preset (its architecture) with the datasheet
  // numbers cluster.gpu_spec.* gives. Its datasheet calibration is the preset's, rescaled where a
  // rate is absolute (run_config.cpp: datasheet_profile_for).
  void apply_gpu_spec(topo::GpuSpec& g) {
    std::vector<std::string> changed;
    // `floor`: the least a real part has (0 keeps the preset's); below it a number is a slip of
    // units (1e-9 TFLOP/s ran, an 8.9e11-s iteration at "0 peak").
    const auto number = [&](const char* key, double scale, double& field, const char* what,
                            double floor) {
      const double v = real(key);
      if (v <= 0) return;
      if (v < floor) {
        throw_input(fmt::format("{} {} is below {} {}, less than any GPU has", get(key), what,
                                floor, what),
                    where(key), "0 keeps the cluster.gpu preset's");
      }
      field = v * scale;
      changed.push_back(fmt::format("{} {}", what, get(key)));
    };
    const double preset_bf16 = g.peak_dense_16bit_flops;
    number("cluster.gpu_spec.bf16_tflops", 1e12, g.peak_dense_16bit_flops, "bf16 TFLOP/s", 1);
    if (real("cluster.gpu_spec.fp8_tflops") > 0 && g.peak_dense_fp8_flops <= 0) {
      throw_input(fmt::format("cluster.gpu {} has no fp8 tensor cores to rate: describe an fp8 "
                              "GPU on a preset of an architecture that has them",
                              get("cluster.gpu")),
                  where("cluster.gpu_spec.fp8_tflops"),
                  "h100-sxm, h200-sxm, b200, ... (trainsim --list-presets)");
    }
    number("cluster.gpu_spec.fp8_tflops", 1e12, g.peak_dense_fp8_flops, "fp8 TFLOP/s", 1);
    if (real("cluster.gpu_spec.fp8_tflops") <= 0 && real("cluster.gpu_spec.bf16_tflops") > 0 &&
        g.peak_dense_fp8_flops > 0) {
      // A new 16-bit peak alone: the fp8 tensor cores keep the preset's ratio to it (they are
      // the same units at half the width), not the preset's absolute fp8 peak.
      g.peak_dense_fp8_flops *= g.peak_dense_16bit_flops / preset_bf16;
      changed.push_back(fmt::format("fp8 TFLOP/s {:.4g} (the preset's fp8:bf16 ratio)",
                                    g.peak_dense_fp8_flops / 1e12));
    }
    if (g.peak_dense_fp8_flops > 0 && g.peak_dense_fp8_flops < g.peak_dense_16bit_flops) {
      throw_input(fmt::format("an fp8 peak of {:.4g} TFLOP/s below the bf16 peak of {:.4g}: fp8 "
                              "tensor cores are at least as fast as 16-bit ones on every GPU "
                              "that has them",
                              g.peak_dense_fp8_flops / 1e12, g.peak_dense_16bit_flops / 1e12),
                  where(real("cluster.gpu_spec.fp8_tflops") > 0 ? "cluster.gpu_spec.fp8_tflops"
                                                                 : "cluster.gpu_spec.bf16_tflops"),
                  "give both cluster.gpu_spec.bf16_tflops and fp8_tflops from the datasheet");
    }
    number("cluster.gpu_spec.hbm_gib", 1024.0 * 1024.0 * 1024.0, g.hbm_bytes, "GiB", 1);
    number("cluster.gpu_spec.hbm_tb_per_s", 1e12, g.hbm_Bps, "HBM TB/s", 0.01);
    number("cluster.gpu_spec.nvlink_gb_per_s", 1e9, g.nvlink_Bps, "NVLink GB/s", 1);
    number("cluster.gpu_spec.host_link_gb_per_s", 1e9, g.host_link_Bps, "host link GB/s", 1);
    number("cluster.gpu_spec.host_memory_gb", 1e9, g.host_memory_bytes, "host memory GB", 1);
    if (integer("cluster.gpu_spec.sms") > 0) {
      g.sms = integer("cluster.gpu_spec.sms");
      changed.push_back(fmt::format("{} SMs", g.sms));
    }
    if (get("cluster.gpu_spec.nvls") == "true" && !g.has_nvls) {
      // Its datasheet calibration has no NVLS bandwidth to price it with (it changed nothing,
      // while the note said "with NVLS").
      throw_input(fmt::format("cluster.gpu {} has no NVLink SHARP, and its calibration no NVLS "
                              "bandwidth: describe an NVLS GPU on a preset that has it",
                              get("cluster.gpu")),
                  where("cluster.gpu_spec.nvls"), "h100-sxm, h200-sxm, b200, gb200, ...");
    }
    if (get("cluster.gpu_spec.nvls") != "preset") {
      g.has_nvls = get("cluster.gpu_spec.nvls") == "true";
      changed.push_back(g.has_nvls ? "NVLS" : "no NVLS");
    }
    const std::string name = get("cluster.gpu_spec.name");
    if (name != "none") {
      g.name = name;
    } else if (!changed.empty()) {
      g.name = g.base + "-custom";
    }
    if (g.name != g.base) {
      std::string numbers;
      for (const std::string& c : changed) numbers += (numbers.empty() ? "" : ", ") + c;
      scenario_.notes.push_back(fmt::format(
          "cluster.gpu_spec: GPU `{}` is the {} preset with {}; its datasheet calibration keeps "
          "the preset's efficiencies as fractions of the new peaks and scales the NVLink bus "
          "bandwidths with the NVLink rate (docs/calibration.md), and keeps the preset's NCCL "
          "channel count, which sets the SMs an overlapped collective takes (NCCL derives it from "
          "the server's NVLink wiring: collectives.comm_sms sets it where the GPU's differs); a "
          "profile measured on the GPU (trainsim calibrate) replaces them",
          g.name, g.base, numbers.empty() ? "its own numbers" : numbers));
    }
  }

  // The schema's choices are the names topology/ gives its enums, so every lookup succeeds.
  void build_routing() {
    topo::RoutingConfig& r = scenario_.routing;
    r.mode = *topo::routing_mode_from(get("network.routing.mode"));
    r.hash = *topo::hash_kind_from(get("network.routing.hash"));
    r.seed_scope = *topo::seed_scope_from(get("network.routing.seed_scope"));
    r.seed = static_cast<std::uint32_t>(int64("network.routing.seed"));
    r.qps_per_connection = integer("network.routing.qps_per_connection");
    net::NetworkConfig& n = scenario_.network;
    n.congestion_control = *net::parse_congestion_control(get("network.congestion_control"));
    n.ring_lockstep = flag("network.ring_lockstep");
    n.dcqcn.contended_efficiency = real("network.dcqcn.contended_efficiency");
    n.dcqcn.incast_penalty = real("network.dcqcn.incast_penalty");
    n.dcqcn.rate_increase_timer = TimePs::from_seconds(real("network.dcqcn.rate_increase_timer") * 1e-6);
    n.dcqcn.fast_recovery_steps = integer("network.dcqcn.fast_recovery_steps");
    n.dcqcn.rate_ai_Bps = real("network.dcqcn.rate_ai") * 1e6;
    n.dcqcn.rate_hai_Bps = real("network.dcqcn.rate_hai") * 1e6;
    net::PacketConfig& pk = scenario_.packet;
    pk.mtu_bytes = real("network.packet.mtu_bytes");
    pk.buffer_bytes = real("network.packet.buffer_bytes");
    pk.pfc = flag("network.packet.pfc");
    pk.pfc_xoff_bytes = real("network.packet.pfc_xoff_bytes");
    pk.pfc_xon_bytes = real("network.packet.pfc_xon_bytes");
    pk.kmin_bytes = real("network.packet.kmin_bytes");
    pk.kmax_bytes = real("network.packet.kmax_bytes");
    pk.pmax = real("network.packet.pmax");
    const auto us = [&](const char* key) { return TimePs::from_seconds(real(key) * 1e-6); };
    pk.dcqcn_g = real("network.packet.dcqcn_g");
    pk.alpha_timer = us("network.packet.alpha_timer");
    pk.cnp_interval = us("network.packet.cnp_interval");
    pk.byte_counter_bytes = real("network.packet.byte_counter_bytes");
    pk.dcqcn_clamp_target_always = flag("network.packet.dcqcn_clamp_target_always");
    pk.swift_beta = real("network.packet.swift_beta");
    pk.swift_max_mdf = real("network.packet.swift_max_mdf");
    pk.swift_hop_scale = us("network.packet.swift_hop_scale");
    pk.swift_fs_range = real("network.packet.swift_fs_range");
    pk.swift_fs_min_cwnd = real("network.packet.swift_fs_min_cwnd");
    pk.swift_fs_max_cwnd = real("network.packet.swift_fs_max_cwnd");
    pk.swift_min_cwnd = real("network.packet.swift_min_cwnd");
    pk.swift_max_cwnd = real("network.packet.swift_max_cwnd");
    pk.priority_classes = integer("network.packet.priority_classes");
    const std::string by = get("network.packet.priority_by");
    pk.priority_by = by == "job"         ? net::PacketConfig::PriorityBy::kJob
                     : by == "dimension" ? net::PacketConfig::PriorityBy::kDimension
                                         : net::PacketConfig::PriorityBy::kNone;
    pk.scheduling = get("network.packet.scheduling") == "ets"
                        ? net::PacketConfig::Scheduling::kEts
                        : net::PacketConfig::Scheduling::kStrict;
    {
      const std::string& text = get("network.packet.class_weights");
      std::size_t at = 0, c = 0;
      while (at <= text.size()) {
        const std::size_t comma = std::min(text.find(',', at), text.size());
        if (c >= pk.class_weights.size()) {
          throw_input("more than 8 class weights", where("network.packet.class_weights"));
        }
        pk.class_weights[c++] = parse_double(text.substr(at, comma - at),
                                             where("network.packet.class_weights"));
        at = comma + 1;
      }
    }
    try {
      net::validate(pk);
    } catch (const Error& e) {
      // A check between two keys is blamed on the one the scenario states, when the key it
      // names is a default (`--set network.packet.kmin_bytes=300000` said "built-in default:
      // network.packet.kmax_bytes").
      const std::string& field = e.where().field;
      static const std::map<std::string, std::vector<std::string>> kPairs = {
          {"network.packet.kmax_bytes", {"network.packet.kmin_bytes"}},
          {"network.packet.buffer_bytes", {"network.packet.mtu_bytes"}},
          {"network.packet.pfc_xoff_bytes",
           {"network.packet.buffer_bytes", "network.packet.mtu_bytes"}},
          {"network.packet.pfc_xon_bytes", {"network.packet.pfc_xoff_bytes"}}};
      ErrorContext at = where(field);
      const auto pair = kPairs.find(field);
      if (!given(field) && pair != kPairs.end()) {
        for (const std::string& other : pair->second) {
          if (given(other)) {
            at = where(other);
            break;
          }
        }
      }
      throw_input(e.message(), at);
    }
    n.swift.contended_efficiency = real("network.swift.contended_efficiency");
    n.swift.incast_penalty = real("network.swift.incast_penalty");
    n.swift.base_rtt = TimePs::from_seconds(real("network.swift.base_rtt") * 1e-6);
    n.swift.additive_increase_packets = real("network.swift.additive_increase");
    n.swift.mtu_bytes = real("network.swift.mtu_bytes");
    n.megascale.contended_efficiency = real("network.megascale.contended_efficiency");
    n.megascale.incast_penalty = real("network.megascale.incast_penalty");
    n.megascale.base_rtt = TimePs::from_seconds(real("network.megascale.base_rtt") * 1e-6);
    n.megascale.additive_increase_packets = real("network.megascale.additive_increase");
    n.megascale.mtu_bytes = real("network.megascale.mtu_bytes");
    n.retransmit.timeout = integer("network.retransmit.timeout");
    n.retransmit.retry_count = integer("network.retransmit.retry_count");
    // Validates the parameters together (e.g. efficiencies in (0, 1]) and names the key.
    try {
      net::CongestionModel check(n);
    } catch (const Error& e) {
      throw Error(e.kind(), e.message(), where(e.where().field), e.hint());
    }
    coll::Choice& c = scenario_.collectives;
    const std::string algo = get("collectives.algorithm");
    if (algo == "ring") c.algorithm = coll::Algorithm::kRing;
    if (algo == "tree") c.algorithm = coll::Algorithm::kTree;
    if (algo == "nvls") c.algorithm = coll::Algorithm::kNvls;
    const std::string proto = get("collectives.protocol");
    if (proto == "LL") c.protocol = coll::Protocol::kLL;
    if (proto == "LL128") c.protocol = coll::Protocol::kLL128;
    if (proto == "Simple") c.protocol = coll::Protocol::kSimple;
  }

  void build_parallel() {
    plan::ParallelConfig& p = scenario_.parallel;
    p.tp = integer("parallel.tp");
    p.pp = integer("parallel.pp");
    p.cp = integer("parallel.cp");
    p.ep = integer("parallel.ep");
    p.sp = flag("parallel.sp");
    p.zero = integer("parallel.zero");
    p.shard_over_cp = get("framework.shard_group") == "dp_cp";
    p.sp_saves_gathered_input = get("framework.sp_wgrad_input") == "saved";
    p.activation_unfused = get("framework.activation") == "unfused";
    p.gqa_kv_repeated = get("framework.gqa_kv") == "repeat";
    p.first_stage_layers = integer("parallel.first_stage_layers");
    p.last_stage_layers = integer("parallel.last_stage_layers");
    p.order = get("parallel.order") == "tp-cp-pp-dp" ? plan::RankOrder::kTpCpPpDp
                                                     : plan::RankOrder::kTpCpDpPp;
    // ZeRO-2/3 reduce-scatter gradients (and ZeRO-3 gathers parameters) over the group that
    // shards them, and with CP the gradients are reduced over DP·CP: sharding over DP alone
    // would need a second, CP-wide all-reduce that is not modelled (the collectives were priced
    // over DP·CP while the memory was sharded over DP: with DP 1 a ZeRO-3 run paid gathers of
    // nothing). Left to its default or a framework preset (of an era before CP), the shard
    // group follows the reduction; stated by the user, it is refused.
    if (p.zero >= 2 && p.cp > 1 && !p.shard_over_cp) {
      if (given("framework.shard_group")) {
        throw_input(fmt::format("ZeRO-{} with context parallelism shards over DP·CP; "
                                "framework.shard_group = dp with parallel.cp = {} is not modelled",
                                p.zero, p.cp),
                    where("framework.shard_group"),
                    "use framework.shard_group = dp_cp (Megatron-Core's and FSDP's choice), or "
                    "ZeRO-1");
      }
      derive("framework.shard_group", "dp_cp",
             fmt::format("framework.shard_group = dp_cp (ZeRO-{} with CP {} shards over the DP·CP "
                         "group whose gradients it reduces)",
                         p.zero, p.cp));
      p.shard_over_cp = true;
    }
    resolve_gpus();
    p.dp = integer("parallel.dp");
    scenario_.cluster.gpus = integer("cluster.gpus");

    const std::int64_t max_gpus = scenario_.cluster.max_gpus();
    if (scenario_.cluster.gpus > max_gpus) {
      throw_infeasible(fmt::format("the fabric of cluster `{}` ({}) holds at most {} GPUs, not {}",
                                   scenario_.cluster.name, describe_fabric(scenario_.cluster),
                                   max_gpus, scenario_.cluster.gpus),
                       where("cluster.gpus"),
                       "add switch tiers, use a larger radix, or run on fewer GPUs");
    }
    // A ratio the switches cannot be built at is built at the nearest whole number of uplinks:
    // say so, since results are read against the ratio asked. (A spec the builder refuses is
    // reported where the fabric is built.)
    try {
      for (std::string& n : topo::oversubscription_notes(scenario_.cluster)) {
        scenario_.notes.push_back(std::move(n));
      }
    } catch (const Error&) {
    }
    const topo::GpuSpec& gpu = scenario_.cluster.gpu;
    if (get("training.precision") == "fp8" && gpu.peak_dense_fp8_flops <= 0) {
      throw_infeasible(fmt::format("{} has no fp8 tensor cores", gpu.name),
                       where("training.precision"), "use bf16 or an fp8-capable GPU");
    }
    resolve_schedule();
  }

  // Multiplies parallel degrees (each at most INT_MAX, so no step overflows int64); a product
  // beyond INT_MAX GPUs describes no real job.
  std::int64_t product(std::initializer_list<const char*> keys) const {
    std::int64_t result = 1;
    for (const char* key : keys) {
      result *= integer(key);
      if (result > std::numeric_limits<int>::max()) {
        throw_input("the parallel degrees multiply to more GPUs than any cluster has", where(key));
      }
    }
    return result;
  }

  // The GPU count and DP degree decide each other: tp·pp·dp·cp = GPUs.
  void resolve_gpus() {
    const std::int64_t tp = integer("parallel.tp");
    const std::int64_t pp = integer("parallel.pp");
    const std::int64_t cp = integer("parallel.cp");
    const std::int64_t gpus = int64("cluster.gpus");
    const std::int64_t replica = product({"parallel.tp", "parallel.pp", "parallel.cp"});
    if (get("parallel.dp") == "auto") {
      if (gpus == 0) {
        throw_input("parallel.dp is auto but the GPU count is unknown", where("parallel.dp"),
                    "set cluster.gpus or parallel.dp");
      }
      if (gpus % replica != 0) {
        // Blame the value the command line changed, if one of the factors came from --set: the
        // user never wrote the file's `dp: auto` (nor, for the built-in default, the file).
        const ErrorContext at =
            blame({"parallel.tp", "parallel.pp", "parallel.cp", "cluster.gpus"}, "parallel.dp");
        throw_infeasible(fmt::format("parallel.dp is auto but {} GPUs do not split into "
                                     "replicas of tp {} · pp {} · cp {} = {} GPUs",
                                     gpus, tp, pp, cp, replica),
                         at, fmt::format("use a multiple of {} GPUs or set parallel.dp", replica));
      }
      const std::int64_t dp = gpus / replica;
      derive("parallel.dp", std::to_string(dp),
             fmt::format("parallel.dp = {} (auto: {} GPUs / (tp {} · pp {} · cp {}))", dp, gpus, tp,
                         pp, cp));
      return;
    }
    const std::int64_t dp = integer("parallel.dp");
    const std::int64_t world =
        product({"parallel.tp", "parallel.pp", "parallel.dp", "parallel.cp"});
    if (!given("cluster.gpus") || gpus == 0) {
      derive(
          "cluster.gpus", std::to_string(world),
          fmt::format("cluster.gpus = {} (tp {} · pp {} · dp {} · cp {})", world, tp, pp, dp, cp));
      return;
    }
    if (gpus != world) {
      throw_infeasible(
          fmt::format("{} GPUs is not TP×PP×DP×CP = {}×{}×{}×{} = {}", gpus, tp, pp, dp, cp, world),
          where("cluster.gpus"), "set parallel.dp to auto to derive it from the GPU count");
    }
  }

  void resolve_schedule() {
    plan::ParallelConfig& p = scenario_.parallel;
    std::string schedule = get("parallel.schedule");
    const bool explicit_flat = schedule == "gpipe" || schedule == "1f1b";
    if (get("parallel.vpp") == "auto") {
      // Chosen by resolve_auto_vpp once the training keys are known; one chunk meanwhile.
      vpp_auto_ = true;
      p.vpp = 1;
      p.schedule = schedule == "gpipe" ? plan::Schedule::kGpipe : plan::Schedule::k1F1B;
      return;
    }
    // A scenario file's vpp is for its own pipeline: when the command line cuts it to one stage
    // (--set parallel.pp=1), that stage has nothing to interleave. A vpp the command line gives
    // itself, or a file that says pp 1 with its own vpp, is kept as written.
    const bool vpp_from_set = given("parallel.vpp") && where("parallel.vpp").file == "--set";
    const bool pp_from_set = given("parallel.pp") && where("parallel.pp").file == "--set";
    if (int64("parallel.vpp") > 1 &&
        (!given("parallel.vpp") ? (p.pp == 1 || explicit_flat)
                                : (p.pp == 1 && pp_from_set && !vpp_from_set))) {
      derive("parallel.vpp", "1",
             p.pp == 1
                 ? "parallel.vpp = 1 (one pipeline stage has nothing to interleave" +
                       (given("parallel.vpp") ? "; not " + get("parallel.vpp") + " as " +
                                                    where("parallel.vpp").file + " says)"
                                              : std::string(")"))
                 : "parallel.vpp = 1 (parallel.schedule " + schedule + " does not interleave)");
    }
    p.vpp = integer("parallel.vpp");
    if (schedule == "auto") {
      schedule = p.vpp > 1 ? "interleaved" : "1f1b";
      derive("parallel.schedule", schedule,
             fmt::format("parallel.schedule = {} (auto: parallel.vpp {})", schedule, p.vpp));
    }
    if (schedule == "interleaved" && p.vpp == 1) {
      throw_input("the interleaved schedule needs parallel.vpp > 1", where("parallel.schedule"),
                  "set parallel.vpp to the virtual stages per GPU, or use 1f1b");
    }
    if (schedule != "interleaved" && p.vpp > 1) {
      throw_input(
          fmt::format("parallel.vpp {} needs the interleaved schedule, not {}", p.vpp, schedule),
          where("parallel.vpp"), "set parallel.vpp to 1 or the schedule to interleaved");
    }
    p.schedule = schedule == "interleaved" ? plan::Schedule::kInterleaved
                 : schedule == "gpipe"     ? plan::Schedule::kGpipe
                                           : plan::Schedule::k1F1B;
  }

  // parallel.vpp: auto is the fastest virtual-stage count that fits in memory (analytic, with
  // training.recompute: auto chosen per candidate), as `validate` searches a vpp cell of `auto`:
  // the number of chunks is a tuning choice and a tuned run takes the fastest. Candidates are
  // the counts the layout accepts (layers divide into pp·vpp chunks, micro-batches a multiple
  // of pp); none that fits: 1, and the memory check reports it. A flat schedule (1f1b, gpipe)
  // or one stage keeps 1.
  void resolve_auto_vpp() {
    if (!vpp_auto_) return;
    plan::ParallelConfig& p = scenario_.parallel;
    const std::string schedule = get("parallel.schedule");
    const auto settle = [&](int vpp, const std::string& why) {
      p.vpp = vpp;
      const bool interleaved = vpp > 1;
      p.schedule = interleaved ? plan::Schedule::kInterleaved
                   : schedule == "gpipe" ? plan::Schedule::kGpipe
                                         : plan::Schedule::k1F1B;
      derive("parallel.vpp", std::to_string(vpp), "parallel.vpp = " + std::to_string(vpp) + " (auto: " + why + ")");
      if (schedule == "auto") {
        derive("parallel.schedule", interleaved ? "interleaved" : "1f1b", "");
      }
    };
    if (p.pp == 1 || schedule == "1f1b" || schedule == "gpipe") {
      settle(1, p.pp == 1 ? "one pipeline stage has nothing to interleave"
                          : "parallel.schedule " + schedule + " does not interleave");
      return;
    }
    if (searched_vpp_) {  // already searched for the chosen micro-batch
      settle(searched_vpp_->first, "the fastest that fits of vpp " + searched_vpp_->second);
      return;
    }
    std::string tried;
    const std::optional<std::pair<int, double>> best = fastest_vpp(scenario_, &tried);
    if (!best) {
      settle(1, "no count fits in memory; the memory check reports it");
      return;
    }
    settle(best->first, "the fastest that fits of vpp " + tried);
  }

  // The analytic iteration time of a candidate (training.recompute auto chosen for it), or
  // nothing when it does not fit in memory or the layout refuses it.
  std::optional<double> candidate_time(Scenario candidate, bool layout_may_refuse) const {
    candidate.calibration_profile = get("calibration.profile");
    try {
      exec::RunConfig cfg = make_run_config(candidate);  // timings need the profile
      if (scenario_.recompute_auto) cfg = choose_recompute(cfg);
      exec::AnalyticOptions opts;
      opts.enforce_memory = true;
      exec::Result r;
      plan::Infeasibility why;
      if (!exec::try_run_analytic(cfg, opts, r, why)) return std::nullopt;
      return r.iteration_time_s;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kInfeasible && !layout_may_refuse) throw;
      return std::nullopt;
    }
  }

  // The fastest virtual-stage count of `base` that fits, and its time; `tried` lists the counts
  // that fit.
  std::optional<std::pair<int, double>> fastest_vpp(const Scenario& base, std::string* tried) const {
    const plan::ParallelConfig& p = base.parallel;
    const std::string schedule = get("parallel.schedule");
    std::optional<std::pair<int, double>> best;
    // With stage layers given, the end stages may leave their end chunks only the embedding and
    // the output layer (plan::make_layout decides), so those count as chunks too.
    const int empty_ends = p.pp > 1 && (p.first_stage_layers > 0 || p.last_stage_layers > 0) ? 2 : 0;
    for (int vpp = schedule == "interleaved" ? 2 : 1; vpp * p.pp <= base.model.layers + empty_ends;
         ++vpp) {
      Scenario candidate = base;
      candidate.parallel.vpp = vpp;
      candidate.parallel.schedule = vpp > 1 ? plan::Schedule::kInterleaved : plan::Schedule::k1F1B;
      const std::optional<double> t = candidate_time(candidate, /*layout_may_refuse=*/false);
      if (!t) continue;
      if (tried != nullptr) *tried += (tried->empty() ? "" : ", ") + std::to_string(vpp);
      if (!best || *t < best->second) best = std::make_pair(vpp, *t);
    }
    return best;
  }

  // training.micro_batch: auto is the fastest micro-batch of 1, 2, 4, 8, 16 that fits (analytic,
  // training.recompute auto per candidate, the vpp search per candidate when parallel.vpp is
  // auto): like the virtual-stage count, a tuning choice that a tuned run makes for speed.
  // Candidates the layout refuses (the batch per replica not a multiple of it, or an interleaved
  // schedule's micro-batches not a multiple of pp) are skipped; none that fits: 1, and the memory
  // check reports it.
  void resolve_auto_micro_batch() {
    if (!mbs_auto_) return;
    const plan::ParallelConfig& p = scenario_.parallel;
    std::optional<std::pair<int, double>> best;
    std::string tried;
    const bool search_vpp = vpp_auto_ && p.pp > 1 && get("parallel.schedule") != "1f1b" &&
                            get("parallel.schedule") != "gpipe";
    for (int m = 1; m <= 16; m *= 2) {
      Scenario candidate = scenario_;
      candidate.training.micro_batch = m;
      std::optional<double> t;
      std::optional<std::pair<int, double>> v;
      std::string vpp_tried;
      if (search_vpp) {
        try {
          v = fastest_vpp(candidate, &vpp_tried);
          if (v) t = v->second;
        } catch (const Error&) {
          // The layout refuses this micro-batch for every count.
        }
      } else {
        t = candidate_time(candidate, /*layout_may_refuse=*/true);
      }
      if (!t) continue;
      tried += (tried.empty() ? "" : ", ") + std::to_string(m);
      if (!best || *t < best->second) {
        best = std::make_pair(m, *t);
        // The chosen micro-batch's own vpp search, which resolve_auto_vpp then settles.
        if (v) searched_vpp_ = std::make_pair(v->first, vpp_tried);
      }
    }
    const int chosen = best ? best->first : 1;
    scenario_.training.micro_batch = chosen;
    derive("training.micro_batch", std::to_string(chosen),
           "training.micro_batch = " + std::to_string(chosen) +
               (best ? " (auto: the fastest that fits of mbs " + tried + ")"
                     : " (auto: none fits in memory; the memory check reports it)"));
  }

  // A training.recompute_layers that changes nothing is said, not silently dropped: under a
  // recompute other than full (Megatron refuses --recompute-method with selective granularity;
  // it is kept as a note, since a sweep varies the recompute of a base that states it), or of at
  // least every layer of the largest model chunk (Megatron's block method then recomputes them
  // all, as 0 does).
  void note_recompute_layers() {
    const plan::TrainingConfig& t = scenario_.training;
    if (t.recompute_layers <= 0) return;
    if (t.recompute != model::Recompute::kFull) {
      scenario_.notes.push_back(fmt::format(
          "training.recompute_layers = {} is for full recompute and does nothing under {}",
          t.recompute_layers, model::to_string(t.recompute)));
      return;
    }
    plan::Layout L;
    const exec::RunConfig cfg = run_config_without_profile(scenario_);
    if (!plan::try_make_layout(cfg.model, cfg.cluster, cfg.parallel, cfg.training, L, nullptr)) {
      return;  // the layout's own check reports what is wrong
    }
    const int v = std::max(1, L.par.vpp);
    const int chunk = (L.layers_max_stage + v - 1) / v;
    if (t.recompute_layers >= chunk) {
      scenario_.notes.push_back(fmt::format(
          "training.recompute_layers = {} covers every layer of a model chunk (at most {}): "
          "every layer is recomputed, as with 0",
          t.recompute_layers, chunk));
    }
  }

  // training.recompute: auto is the least recompute whose memory fits (choose_recompute); when
  // even full recompute does not fit, full, and the memory check reports the shortfall.
  void resolve_auto_recompute() {
    if (!scenario_.recompute_auto) return;
    if (scenario_.training.cpu_offload_layers > 0) {
      // Megatron-Core refuses activation recompute with CPU offloading: none is the only choice.
      scenario_.training.recompute = model::Recompute::kNone;
      scenario_.training.recompute_layers = 0;
      derive("training.recompute", "none",
             "training.recompute = none (auto: activation offloading runs without recompute)");
      derive("training.recompute_layers", "0", "");
      return;
    }
    exec::RunConfig cfg = run_config_without_profile(scenario_);
    std::string chosen = "full (nothing fits: the memory check reports it)";
    try {
      cfg = choose_recompute(cfg, &chosen);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kInfeasible) throw;
      cfg.training.recompute = model::Recompute::kFull;
      cfg.training.recompute_layers = 0;
    }
    scenario_.training.recompute = cfg.training.recompute;
    scenario_.training.recompute_layers = cfg.training.recompute_layers;
    const char* name = model::to_string(cfg.training.recompute);
    derive("training.recompute", name, "training.recompute = " + chosen + " (auto: the least that fits in memory)");
    derive("training.recompute_layers", std::to_string(cfg.training.recompute_layers), "");
  }

  // Activation offloading as Megatron-Core allows it (transformer_config.py: "Currently there is
  // no support for Pipeline parallelism with CPU offloading", "CPU offloading does not work when
  // activation recomputation is enabled", "CPU offloading can be done only for layers less than
  // num_layers"), on a GPU whose host link the preset knows.
  // TP overlap hides the sequence-parallel all-gathers and reduce-scatters behind the GEMMs
  // (Transformer Engine's userbuffers, MegaScale §3.2): without SP there are none to hide.
  // Megatron-LM refuses the pair ("Tensor parallel communication/GEMM overlap can happen only when
  // sequence parallelism is enabled", arguments.py); it ran here, 2.8 MFU points apart at the two
  // fidelities (2026-12-06).
  void check_tp_overlap() {
    // A bulk overlap runs a collective beside an independent GEMM, which only the backward has,
    // and Megatron's asynchronous backward communication already runs those collectives there:
    // the lever then hides nothing more. Said, so that a user switching MegaScale's TP overlap
    // (§3.2, decomposed) onto a Megatron-LM 2023 base does not read a silent no-op as a result.
    const plan::Optimizations& o = scenario_.opt;
    if (o.tp_overlap && !o.tp_overlap_decomposed && o.tp_async_backward &&
        scenario_.parallel.tp > 1 && scenario_.parallel.sp) {
      scenario_.notes.push_back(fmt::format(
          "optimizations.tp_overlap adds nothing here: framework.tp_overlap_method = bulk (the {} "
          "preset's) overlaps only the backward's TP collectives, which "
          "framework.tp_async_backward already runs beside the other GEMM; the forward's stay "
          "exposed. MegaScale's overlap (§3.2) and Transformer Engine's are "
          "framework.tp_overlap_method = decomposed",
          get("framework.preset")));
    }
    if (!scenario_.opt.tp_overlap || scenario_.parallel.tp <= 1 || scenario_.parallel.sp) return;
    throw_input(fmt::format("optimizations.tp_overlap needs sequence parallelism: it overlaps SP's "
                            "all-gathers and reduce-scatters with the GEMMs, and TP {} without SP "
                            "has none (Megatron-LM refuses the pair)",
                            scenario_.parallel.tp),
                blame({"parallel.sp", "optimizations.tp_overlap", "parallel.tp"},
                      "optimizations.tp_overlap"),
                "set parallel.sp true, or optimizations.tp_overlap false");
  }

  void check_offload() {
    const int n = scenario_.training.cpu_offload_layers;
    if (n == 0) return;
    const char* key = "training.cpu_offload_layers";
    if (scenario_.parallel.pp > 1) {
      throw_input(fmt::format("activation offloading needs parallel.pp 1 (is {}): Megatron-Core "
                              "has no CPU offloading with pipeline parallelism",
                              scenario_.parallel.pp),
                  where(key), "set parallel.pp 1, or training.cpu_offload_layers 0");
    }
    if (scenario_.training.recompute != model::Recompute::kNone) {
      throw_input("activation offloading does not work with activation recompute "
                  "(Megatron-Core refuses the two together)",
                  where(key), "set training.recompute none, or training.cpu_offload_layers 0");
    }
    if (n >= scenario_.model.layers) {
      throw_input(fmt::format("{} layers offloaded of {}: Megatron-Core offloads fewer than the "
                              "model's layers",
                              n, scenario_.model.layers),
                  where(key), fmt::format("at most {}", scenario_.model.layers - 1));
    }
    if (scenario_.cluster.gpu.host_link_Bps <= 0) {
      throw_input("activation offloading needs the GPU's host link bandwidth, which GPU `" +
                      scenario_.cluster.gpu.name + "` does not state",
                  where(key), "use a GPU preset");
    }
  }

  void build_training() {
    plan::TrainingConfig& t = scenario_.training;
    t.global_batch = integer("training.global_batch");
    mbs_auto_ = get("training.micro_batch") == "auto";
    t.micro_batch = mbs_auto_ ? 1 : integer("training.micro_batch");  // auto: chosen later
    const std::string precision = get("training.precision");
    t.precision = precision == "fp16"  ? Precision::kFp16
                  : precision == "fp8" ? Precision::kFp8
                                       : Precision::kBf16;
    t.fp8_recipe =
        get("training.fp8_recipe") == "current" ? Fp8Recipe::kCurrent : Fp8Recipe::kDelayed;
    const std::string recompute = get("training.recompute");
    t.recompute = recompute == "full"           ? model::Recompute::kFull
                  : recompute == "selective"    ? model::Recompute::kSelective
                  : recompute == "selective-op" ? model::Recompute::kSelectiveOp
                                                : model::Recompute::kNone;
    scenario_.recompute_auto = recompute == "auto";
    const std::string selective = get("framework.selective_recompute");
    t.selective_mode = selective == "op"     ? model::Recompute::kSelectiveOp
                       : selective == "none" ? model::Recompute::kNone
                                             : model::Recompute::kSelective;
    t.recompute_layers = integer("training.recompute_layers");
    t.cpu_offload_layers = integer("training.cpu_offload_layers");
    t.optimizer =
        get("training.optimizer") == "lamb" ? plan::Optimizer::kLamb : plan::Optimizer::kAdam;
    const std::string grad = get("training.grad_reduce_dtype");
    t.grad_reduce = grad == "bf16"   ? Precision::kBf16
                    : grad == "fp16" ? Precision::kFp16
                                     : Precision::kFp32;
    plan::Optimizations& o = scenario_.opt;
    o.tp_overlap = flag("optimizations.tp_overlap");
    o.pp_overlap = flag("optimizations.pp_overlap");
    o.dp_overlap = flag("optimizations.dp_overlap");
    o.efficient_operators = flag("optimizations.efficient_operators");
    o.async_data_pipeline = flag("optimizations.async_data_pipeline");
    o.lamb = flag("optimizations.lamb");
    o.sliding_window = flag("optimizations.sliding_window");
    o.parallel_block = flag("optimizations.parallel_block");
    o.fast_comm_init = flag("optimizations.fast_comm_init");
    // The attention kernel: given, or the framework's fused kernel when efficient operators are
    // on (FlashAttention is part of that lever), the unfused path otherwise.
    std::string kernel = get("framework.attention_kernel");
    if (kernel == "auto") {
      kernel = o.efficient_operators ? fused_attention_kernel_ : "unfused";
      derive("framework.attention_kernel", kernel, "");
    }
    o.attention_kernel = kernel == "flash2"   ? model::AttentionKernel::kFlash2
                         : kernel == "flash3" ? model::AttentionKernel::kFlash3
                         : kernel == "cudnn"  ? model::AttentionKernel::kCudnn
                         : kernel == "triton" ? model::AttentionKernel::kTriton
                                              : model::AttentionKernel::kUnfused;
    const std::string ce = get("framework.cross_entropy");
    o.cross_entropy = ce == "te"       ? model::CrossEntropyKernel::kTe
                      : ce == "native" ? model::CrossEntropyKernel::kNative
                                       : model::CrossEntropyKernel::kUnfused;
    const std::string rope = get("framework.rope");
    o.rope = rope == "unfused"   ? model::RopeKernel::kUnfused
             : rope == "complex" ? model::RopeKernel::kComplex
             : rope == "none"    ? model::RopeKernel::kNone
                                 : model::RopeKernel::kFused;
    o.tp_overlap_decomposed = get("framework.tp_overlap_method") == "decomposed";
    o.tp_async_backward = flag("framework.tp_async_backward");
    o.fsdp_copy_out = flag("framework.fsdp_copy_out");
    o.fsdp_copy_in = flag("framework.fsdp_copy_in");
    o.grad_scale_pass = flag("framework.grad_scale_pass");
    o.zero_grad_buffer = flag("framework.zero_grad_buffer");
    o.dp_buckets = get("framework.dp_buckets") == "fixed-40m" ? plan::BucketRule::kFixed40M
                                                              : plan::BucketRule::kScaledWithDp;
    o.pp_activation = get("framework.pp_activation") == "full" ? plan::PpActivation::kFull
                                                               : plan::PpActivation::kScatterGather;
    o.p2p_net_channels = integer("collectives.p2p_net_channels");
    o.comm_sms = integer("collectives.comm_sms");
    o.tp_overlap_sms = integer("framework.tp_overlap_sms");
    o.cp_all_gather = get("framework.cp_comm") == "all-gather";
    const std::string accumulation = get("framework.grad_accumulation");
    o.grad_accumulation = accumulation == "add-16bit"  ? plan::GradAccumulation::kAdd16
                          : accumulation == "add-fp32" ? plan::GradAccumulation::kAddFp32
                                                       : plan::GradAccumulation::kInGemm;
    scenario_.scale.gpu_speed_sigma = real("scale.gpu_speed_sigma");
    scenario_.scale.global_sync = flag("scale.global_sync");
  }

  const GivenMap& given_;
  std::string fused_attention_kernel_ = "flash2";
  bool vpp_auto_ = false;
  bool mbs_auto_ = false;
  // The vpp search of the micro-batch resolve_auto_micro_batch chose: (count, counts tried).
  std::optional<std::pair<int, std::string>> searched_vpp_;
  Scenario scenario_;
  std::map<std::string, std::string> values_;
  std::map<std::string, std::string> origin_;
};

std::string line_origin(const std::string& file, int line) {
  return file + ":" + std::to_string(line);
}

[[noreturn]] void not_a_key(const std::string& path, const ErrorContext& at) {
  ErrorContext where = at;
  where.field = clip_name(path);
  if (path.empty()) throw_input("an empty key", where, "write key.path=value");
  if (path.size() > limits::kMaxNameLength) {
    throw_input("unknown key (" + std::to_string(path.size()) + " characters; no key is longer than " +
                    std::to_string(limits::kMaxNameLength) + ")",
                where);
  }
  if (is_section(path)) {
    throw_input("is a section, not a key", where, "see `trainsim explain " + path + "`");
  }
  throw_input("unknown key", where, suggest_key(path));
}

// Walks the YAML mapping, turning nesting into dotted keys and checking each value on the way,
// so that every error can point at its line.
void flatten(const YAML::Node& map, const std::string& prefix, const std::string& file,
             GivenMap& out) {
  // yaml-cpp's iterators yield pairs by value: the loop variable keeps each pair alive, whereas a
  // reference to `it->first` would dangle.
  for (const auto& entry : map) {
    const YAML::Node& key_node = entry.first;
    const YAML::Node& value = entry.second;
    const int line = key_node.Mark().line + 1;
    if (!key_node.IsScalar()) {
      throw_input("a key must be a plain name", {file, line, prefix});
    }
    const std::string path = prefix.empty() ? key_node.Scalar() : prefix + "." + key_node.Scalar();
    const ErrorContext where{file, line, path};
    if (const KeyDef* key = find_key(path)) {
      if (value.IsMap() || value.IsSequence()) {
        throw_input(fmt::format("expected a single {} value, got a {}", to_string(key->type),
                                value.IsMap() ? "mapping" : "list"),
                    where);
      }
      if (value.IsNull()) throw_input("has no value", where);
      const auto previous = out.find(path);
      if (previous != out.end()) {
        throw_input("given twice", where, "first given at " + previous->second.origin);
      }
      out[path] = {normalize_value(*key, value.Scalar(), where), line_origin(file, line), where};
    } else if (is_section(path)) {
      if (value.IsNull()) continue;
      if (!value.IsMap()) {
        throw_input("is a section: write its keys nested under it", where,
                    "see `trainsim explain " + path + "`");
      }
      flatten(value, path, file, out);
    } else {
      not_a_key(path, where);
    }
  }
}

void apply_sets(const std::vector<std::string>& sets, GivenMap& out) {
  const auto trim = [](std::string_view s) {
    const std::size_t b = s.find_first_not_of(" \t");
    const std::size_t e = s.find_last_not_of(" \t");
    return b == std::string_view::npos ? std::string() : std::string(s.substr(b, e - b + 1));
  };
  for (const std::string& set : sets) {
    const std::size_t eq = set.find('=');
    if (eq == std::string::npos) {
      throw_input("`--set " + clip_name(set) + "` has no `=`", {"--set", 0, clip_name(trim(set))},
                  "write --set key.path=value, e.g. --set parallel.pp=8");
    }
    const std::string path = trim(std::string_view(set).substr(0, eq));
    const ErrorContext where{"--set", 0, path};
    const KeyDef* key = find_key(path);
    if (key == nullptr) not_a_key(path, where);
    out[path] = {normalize_value(*key, trim(std::string_view(set).substr(eq + 1)), where), "--set",
                 where};
  }
}

// The documents of a YAML stream, seen through the parser's events only (no node is built): where
// each starts and where its root is, or none when it is empty. YAML::LoadAll is not used: in
// yaml-cpp 0.7 a document whose root starts with a stray `,` (",", "--- ,", "!!str ,") leaves the
// token unread, so LoadAll returns one empty document after another, forever, and grows without
// bound (found by fuzz_scenario; docs/reliability.md).
class DocumentEvents final : public YAML::EventHandler {
 public:
  YAML::Mark start;
  bool has_root = false;  // the root is something other than null
  YAML::Mark root;

  void reset() {
    start = YAML::Mark();
    has_root = seen_root_ = false;
  }
  void OnDocumentStart(const YAML::Mark& mark) override { start = mark; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& /*mark*/, YAML::anchor_t /*anchor*/) override { seen_root_ = true; }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t /*anchor*/) override { node(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t /*anchor*/,
                const std::string& /*value*/) override {
    node(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string& /*tag*/,
                       YAML::anchor_t /*anchor*/, YAML::EmitterStyle::value /*style*/) override {
    node(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t /*anchor*/,
                  YAML::EmitterStyle::value /*style*/) override {
    node(mark);
  }
  void OnMapEnd() override {}

 private:
  bool seen_root_ = false;
  void node(const YAML::Mark& mark) {
    if (seen_root_) return;
    seen_root_ = has_root = true;
    root = mark;
  }
};

// The one document of a scenario text (null when empty). A second non-empty document is refused
// with its line, and so is a stream on which the parser makes no progress.
YAML::Node load_one_document(const std::string& text, const std::string& name) {
  {
    std::istringstream in(text);
    YAML::Parser parser(in);
    DocumentEvents doc;
    int documents = 0;
    int last_start = -1;
    while (true) {
      doc.reset();
      if (!parser.HandleNextDocument(doc)) break;
      ++documents;
      if (documents > 1 && doc.start.pos == last_start) {
        // The parser is stuck on a token it cannot start a document with.
        const std::size_t at = static_cast<std::size_t>(doc.start.pos);
        const unsigned char c = at < text.size() ? static_cast<unsigned char>(text[at]) : 0;
        const std::string what =
            c > 32 && c < 127 ? "`" + std::string(1, static_cast<char>(c)) + "`" : "this token";
        throw_input(fmt::format("not valid YAML: column {}: a document or value cannot start "
                                "with {}",
                                doc.start.column + 1, what),
                    {name, doc.start.line + 1, ""});
      }
      last_start = doc.start.pos;
      if (documents > 1 && doc.has_root) {
        throw_input("a scenario file holds one YAML document; this is a second one",
                    {name, doc.root.line + 1, ""},
                    "remove the `---` separator, or split the documents into files");
      }
    }
  }
  return YAML::Load(text);  // the first document, now known to end
}

// ---- Multi-job scenarios (`jobs:`) -------------------------------------------------------

// Sections that describe the shared cluster, its network and the simulation as a whole (the
// seed included): a job cannot have its own.
bool cluster_wide(const std::string& path) {
  for (const char* p : {"cluster.", "network.", "calibration.", "collectives.", "simulation."}) {
    if (path.rfind(p, 0) == 0) return true;
  }
  return false;
}

// `hosts:` as a list of servers and ranges (`[0, 1, 4-7]`) or one text of them (`"0-383,512"`).
std::vector<int> parse_hosts(const YAML::Node& node, const ErrorContext& where) {
  std::vector<int> out;
  const auto add_item = [&](std::string item) {
    const std::size_t b = item.find_first_not_of(" \t");
    const std::size_t e = item.find_last_not_of(" \t");
    item = b == std::string::npos ? std::string() : item.substr(b, e - b + 1);
    const std::size_t dash = item.find('-', 1);
    const std::int64_t max = limits::kMaxClusterGpus;
    const std::int64_t lo = parse_int64(item.substr(0, dash), where, 0, max);
    const std::int64_t hi =
        dash == std::string::npos ? lo : parse_int64(item.substr(dash + 1), where, 0, max);
    if (hi < lo) {
      throw_input("server range `" + clip_name(item) + "` runs backwards", where,
                  "write the lower server first, e.g. 4-7");
    }
    if (static_cast<std::int64_t>(out.size()) + (hi - lo + 1) > max) {
      throw_input("names more servers than any cluster has", where);
    }
    for (std::int64_t h = lo; h <= hi; ++h) out.push_back(static_cast<int>(h));
  };
  if (node.IsScalar()) {
    std::string text = node.Scalar();
    std::size_t pos = 0;
    while (true) {
      const std::size_t comma = text.find(',', pos);
      add_item(text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
  } else if (node.IsSequence()) {
    for (const YAML::Node& item : node) {
      if (!item.IsScalar()) throw_input("expected server numbers or ranges such as 4-7", where);
      add_item(item.Scalar());
    }
  } else {
    throw_input("expected a list of servers, e.g. [0, 1, 4-7]", where);
  }
  if (out.empty()) throw_input("names no server", where);
  std::vector<int> sorted = out;
  std::sort(sorted.begin(), sorted.end());
  const auto twice = std::adjacent_find(sorted.begin(), sorted.end());
  if (twice != sorted.end()) {
    throw_input(fmt::format("server {} is listed twice", *twice), where,
                "list each of the job's servers once");
  }
  return out;
}

// One entry of `jobs:`: its own keys, then the file's keys (`base`) with the entry's other keys
// over them, `--set` over both (cluster.gpus excepted: there it sizes the cluster), resolved as
// a scenario of the job's GPUs.
JobSpec load_job(const YAML::Node& entry, int index, const GivenMap& base,
                 const std::vector<std::string>& sets, int cluster_gpus_per_node,
                 const std::string& file) {
  JobSpec job;
  job.name = "job" + std::to_string(index);
  job.where = {file, entry.Mark().line + 1, fmt::format("jobs[{}]", index)};
  if (!entry.IsMap()) {
    throw_input("a job is a mapping (name:, gpus:, placement:, and the job's own keys)",
                job.where);
  }
  GivenMap own;
  std::optional<std::int64_t> gpus;
  ErrorContext gpus_where = job.where;
  bool placement_given = false;
  for (const auto& item : entry) {
    const YAML::Node& key_node = item.first;
    const YAML::Node& value = item.second;
    const int line = key_node.Mark().line + 1;
    if (!key_node.IsScalar()) throw_input("a key must be a plain name", {file, line, job.where.field});
    const std::string key = key_node.Scalar();
    const ErrorContext where{file, line, job.where.field + "." + clip_name(key)};
    const auto scalar = [&]() -> std::string {
      if (!value.IsScalar()) throw_input("expected a single value", where);
      return value.Scalar();
    };
    if (key == "name") {
      job.name = clip_name(scalar(), limits::kMaxNameLength);
    } else if (key == "gpus") {
      gpus = parse_int64(scalar(), where, 1, limits::kMaxClusterGpus);
      gpus_where = where;
    } else if (key == "placement") {
      job.placement = scalar();
      placement_given = true;
      const auto& names = kJobPlacements;
      if (std::find_if(std::begin(names), std::end(names), [&](const char* n) {
            return job.placement == n;
          }) == std::end(names)) {
        throw_input("unknown placement `" + clip_name(job.placement) + "`", where,
                    "one of packed, spread, random, fragmented, hosts");
      }
    } else if (key == "hosts") {
      job.hosts = parse_hosts(value, where);
    } else if (key == "start_s") {
      job.start_s = parse_double(scalar(), where, 0, limits::kMaxHostTime_s);
    } else if (key == "iterations") {
      job.iterations = parse_int(scalar(), where, 1, 1000);
    } else if (!is_section(key) && find_key(key) == nullptr) {
      // Neither an entry key nor a section of scenario keys: most likely a misspelt entry key.
      std::string hint = did_you_mean(key, {"name", "gpus", "placement", "hosts", "start_s",
                                            "iterations"});
      if (hint.empty()) hint = suggest_key(key);
      if (hint.empty()) {
        hint = "a job takes name, gpus, placement, hosts, start_s, iterations and the sections "
               "of its own keys (model, parallel, training, ...)";
      }
      throw_input("unknown key", where, hint);
    } else {
      YAML::Node one;
      one[key] = value;
      GivenMap part;
      // flatten() names the key's own line; the mapping built here has none, so errors are
      // re-located to the entry's line below, and named as keys of this entry.
      try {
        flatten(one, "", file, part);
      } catch (const Error& e) {
        ErrorContext at = e.where();
        if (at.line <= 0) at.line = line;
        at.field = job.where.field + "." + at.field;
        throw Error(e.kind(), e.message(), at, e.hint());
      }
      for (auto& [path, g] : part) {
        const ErrorContext at{file, g.where.line > 0 ? g.where.line : line,
                              job.where.field + "." + path};
        if (cluster_wide(path)) {
          throw_input("describes the shared cluster or the simulation, not one job", at,
                      "give `" + path + "` at the top level of the scenario, outside `jobs:`");
        }
        if (own.count(path) > 0) throw_input("given twice in this job", at);
        g.origin = line_origin(file, at.line);
        g.where = {file, at.line, path};
        own[path] = g;
      }
    }
  }
  if (!job.hosts.empty() && placement_given && job.placement != "hosts") {
    throw_input("`hosts:` lists the job's servers, so its placement is `hosts`", job.where,
                "remove `placement: " + job.placement + "` or `hosts:`");
  }
  if (!job.hosts.empty()) job.placement = "hosts";
  if (job.placement == "hosts" && job.hosts.empty()) {
    throw_input("placement `hosts` needs the list of servers", job.where, "add hosts: [0, 1, 4-7]");
  }
  const std::int64_t gpn = std::max(1, cluster_gpus_per_node);
  if (!gpus) {
    if (job.hosts.empty()) throw_input("has no `gpus:`", job.where, "give the job's GPU count");
    gpus = static_cast<std::int64_t>(job.hosts.size()) * gpn;
  }
  if (*gpus % gpn != 0) {
    throw_input(fmt::format("{} GPUs is not a whole number of {}-GPU servers", *gpus, gpn),
                gpus_where, "a job of a shared cluster takes whole servers");
  }
  if (!job.hosts.empty() && static_cast<std::int64_t>(job.hosts.size()) * gpn != *gpus) {
    throw_input(fmt::format("{} servers of {} GPUs hold {} GPUs, not the job's {}",
                            job.hosts.size(), gpn, job.hosts.size() * gpn, *gpus),
                gpus_where);
  }
  GivenMap given = base;
  for (auto& [path, g] : own) given[path] = g;
  std::vector<std::string> job_sets;
  for (const std::string& set : sets) {
    std::string path = set.substr(0, set.find('='));
    path.erase(0, path.find_first_not_of(" \t"));
    path.erase(path.find_last_not_of(" \t") + 1);
    if (path != "cluster.gpus") job_sets.push_back(set);
  }
  apply_sets(job_sets, given);
  given["cluster.gpus"] = {std::to_string(*gpus), gpus_where.line > 0 && gpus_where.file == file
                                                      ? line_origin(file, gpus_where.line)
                                                      : "derived",
                           gpus_where};
  // parallel.dp follows the job's GPUs unless the job gives it.
  if (own.count("parallel.dp") == 0) given.erase("parallel.dp");
  try {
    job.scenario = Resolver(given, file).run();
  } catch (const Error& e) {
    // A problem with a default or derived value is the job's: it is located at the job's entry.
    ErrorContext at = e.where();
    if (at.file != file && at.file != "--set") {
      at.file = file;
      at.line = job.where.line;
    }
    throw Error(e.kind(), fmt::format("job `{}`: {}", job.name, e.message()), at, e.hint());
  }
  return job;
}

}  // namespace

ErrorContext origin_context(const std::string& origin, const std::string& key) {
  // "<file>:<line>": the last colon followed by digits only.
  const std::size_t colon = origin.rfind(':');
  if (colon != std::string::npos && colon + 1 < origin.size() &&
      origin.find_first_not_of("0123456789", colon + 1) == std::string::npos) {
    const IntResult line = to_int64(std::string_view(origin).substr(colon + 1));
    if (line.problem == NumberProblem::kNone && line.value <= std::numeric_limits<int>::max()) {
      return {origin.substr(0, colon), static_cast<int>(line.value), key};
    }
  }
  if (origin == "default") return {"built-in default", 0, key};
  if (origin == "derived") return {"derived value", 0, key};
  return {origin, 0, key};  // "--set", "preset X", "system X", a row name
}

ErrorContext origin_of(const Scenario& s, const std::string& key) {
  const auto it = s.origin.find(key);
  if (it == s.origin.end()) return {s.source, 0, key};
  return origin_context(it->second, key);
}

Scenario load_scenario_string(std::string_view yaml, const std::string& name,
                              const std::vector<std::string>& sets) {
  YAML::Node root;
  try {
    // Every document is read: a second one would otherwise be ignored without a word.
    root = load_one_document(std::string(strip_bom(yaml)), name);
  } catch (const YAML::Exception& e) {
    throw_input("not valid YAML: " + e.msg, {name, e.mark.line + 1, ""});
  }
  GivenMap given;
  YAML::Node jobs;
  int jobs_line = 0;
  if (root.IsMap()) {
    // `jobs:` is a list of job entries, not a section of keys: it is taken out before the keys
    // are flattened.
    for (const auto& entry : root) {
      if (entry.first.IsScalar() && entry.first.Scalar() == "jobs") {
        jobs = entry.second;
        jobs_line = entry.first.Mark().line + 1;
      }
    }
    if (jobs_line > 0) root.remove("jobs");
    flatten(root, "", name, given);
  } else if (!root.IsNull()) {
    throw_input("a scenario is a mapping of sections (model:, cluster:, parallel:, ...)",
                {name, root.Mark().line + 1, ""});
  }
  const GivenMap file_given = given;
  apply_sets(sets, given);
  if (jobs_line > 0) {
    // The top level of a multi-job scenario describes the cluster; its parallel keys are the
    // jobs' defaults and need not divide the cluster's GPUs: the cluster resolves as one
    // replica per GPU.
    for (auto it = given.begin(); it != given.end();) {
      it = it->first.rfind("parallel.", 0) == 0 ? given.erase(it) : std::next(it);
    }
    for (const char* k : {"parallel.tp", "parallel.pp", "parallel.cp", "parallel.ep"}) {
      given[k] = {"1", "derived", {name, 0, k}};
    }
  }
  Scenario s = Resolver(given, name).run();
  if (jobs_line > 0) {
    // The cluster's own parallel layout (one replica per GPU) is no job's: notes about it
    // ("parallel.dp = 128 (auto: 128 GPUs / (tp 1 ...))" beside jobs of TP 8) would mislead.
    // Each job's notes are in its own result.
    std::erase_if(s.notes, [](const std::string& note) { return note.rfind("parallel.", 0) == 0; });
    if (!jobs.IsSequence() || jobs.size() == 0) {
      throw_input("expected a list of jobs", {name, jobs_line, "jobs"},
                  "jobs:\n  - {name: a, gpus: 64}\n  - {name: b, gpus: 64}");
    }
    if (jobs.size() > 4096) throw_input("more than 4,096 jobs", {name, jobs_line, "jobs"});
    int index = 0;
    for (const YAML::Node& entry : jobs) {
      s.jobs.push_back(load_job(entry, index++, file_given, sets, s.cluster.gpus_per_node, name));
      // Two jobs of one name would be two rows no one could tell apart.
      for (std::size_t k = 0; k + 1 < s.jobs.size(); ++k) {
        const JobSpec& other = s.jobs[k];
        const JobSpec& job = s.jobs.back();
        if (other.name != job.name) continue;
        ErrorContext at = job.where;
        at.field += ".name";
        throw_input(fmt::format("job name `{}` is also jobs[{}]'s (line {})", job.name, k,
                                other.where.line),
                    at, "give every job its own name");
      }
    }
  }
  return s;
}

Scenario load_scenario_file(const std::string& path, const std::vector<std::string>& sets) {
  const std::string text = read_input_file(path, "scenario file", limits::kMaxScenarioBytes);
  // A file without a single key (empty, blanks, comments, `---`) is a mistake, not a request for
  // the built-in default: it ran the 12,288-GPU default under the file's name. (Malformed YAML
  // is left to load_scenario_string, which names its line.)
  bool empty = false;
  try {
    empty = load_one_document(std::string(strip_bom(text)), path).IsNull();
  } catch (const YAML::Exception&) {
  }
  if (empty) {
    throw_input("the scenario file holds no keys (it is empty, or only comments)", {path, 0, ""},
                "give the keys that differ from the defaults (trainsim explain lists them), or "
                "omit SCENARIO to run the built-in default scenario");
  }
  return load_scenario_string(text, path, sets);
}

Scenario default_scenario() { return load_scenario_string("", "<default>"); }

void require_one_job(const Scenario& s, const std::string& command) {
  if (s.jobs.empty()) return;
  ErrorContext at = s.jobs.front().where;
  at.field = "jobs";
  throw_input(fmt::format("`trainsim {}` takes a scenario of one job; this one lists {} jobs",
                          command, s.jobs.size()),
              at, "run the jobs together with `trainsim run`, or give one job's keys at the top level");
}

Scenario build_scenario(const std::map<std::string, std::string>& flat_values,
                        const std::string& name) {
  GivenMap given;
  for (const auto& [path, value] : flat_values) {
    if (value.empty()) continue;
    const ErrorContext where{name, 0, path};
    const KeyDef* key = find_key(path);
    if (key == nullptr) not_a_key(path, where);
    given[path] = {normalize_value(*key, value, where), name, where};
  }
  return Resolver(given, name).run();
}

}  // namespace trainsim::scen
