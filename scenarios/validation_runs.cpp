#include "scenarios/validation_runs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>

#include "scenarios/frameworks.h"
#include "scenarios/presets.h"
#include "scenarios/recompute_search.h"
#include "scenarios/run_config.h"
#include "scenarios/scenario.h"
#include "scenarios/schema.h"
#include "sim/core/error.h"
#include "sim/core/limits.h"
#include "sim/core/parse.h"
#include "sim/core/units.h"
#include "sim/model/transformer.h"
#include "sim/plan/memory.h"
#include "calibrate/profile.h"

namespace trainsim::scen {
namespace {

const std::vector<std::string> kColumns = {
    "id",     "source", "gpu",       "precision", "cluster", "gpus",     "layers",    "hidden",
    "heads",  "kv_heads", "ffn",     "seq",       "vocab",   "tp",       "pp",        "dp",
    "vpp",    "cp",     "ep",        "mbs",       "gbs",     "zero",     "recompute", "system",
    "iter_s", "tokens_s", "mfu",     "tflops_gpu", "notes"};

// RFC 4180 fields: commas inside double quotes, "" for a literal quote.
std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (quoted) {
      if (ch == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (ch == '"') {
        quoted = false;
      } else {
        cur += ch;
      }
    } else if (ch == '"') {
      quoted = true;
    } else if (ch == ',') {
      out.push_back(cur);
      cur.clear();
    } else if (ch != '\r') {
      cur += ch;
    }
  }
  out.push_back(cur);
  return out;
}

// One CSV record: a line, or (RFC 4180) several, while a quoted cell holds line breaks. The
// record's first line goes to `first_line` and the count of lines read to `line_no`; a quote
// that never closes is an error naming the line it opened on.
bool read_record(std::istream& in, std::string& record, int& line_no, int& first_line,
                 const std::string& file) {
  std::string line;
  if (!std::getline(in, line)) return false;
  ++line_no;
  first_line = line_no;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  record = line;
  // Quotes pair up ("" is two), so an odd count leaves a cell open.
  auto open = [](const std::string& text) {
    return std::count(text.begin(), text.end(), '"') % 2 != 0;
  };
  while (open(record)) {
    if (!std::getline(in, line)) {
      throw_input("a quoted cell opens on this line and never closes", {file, first_line, ""},
                  "close the quote, or write a literal quote as \"\"");
    }
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    record += '\n';
    record += line;
  }
  return true;
}

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t");
  const auto e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// The vpp cell `auto` (any case): interleaved with an unpublished number of virtual stages.
bool vpp_auto(const std::string& text) {
  std::string t = text;
  for (char& ch : t) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return t == "auto";
}

constexpr double kMaxCell = 1e15;

std::optional<double> number(const std::string& text, const std::string& file, int line,
                             const std::string& column) {
  if (text.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  const bool range = errno == ERANGE;
  if (end != text.c_str() + text.size() || std::isspace(static_cast<unsigned char>(text[0])) ||
      std::isnan(v)) {
    throw_input("`" + text + "` is not a number", {file, line, column});
  }
  // Every column holds a count, a time, a rate or a fraction of a real run: magnitudes beyond
  // 1e15 (or below 1e-300) are typos, and an infinite published figure would reach the report.
  if (!std::isfinite(v) || std::abs(v) > kMaxCell || (range && std::abs(v) < 1)) {
    throw_input("`" + text + "` is out of range for a measured value (magnitude at most 1e15" +
                    (range && std::abs(v) < 1 ? std::string(", and not below 1e-300)") : ")"),
                {file, line, column});
  }
  return v;
}

}  // namespace

const std::vector<std::string>& validation_columns() { return kColumns; }

const std::vector<std::string>& optional_validation_columns() {
  static const std::vector<std::string> kOptional = {"framework", "flops_convention", "experts",
                                                     "top_k", "moe_every", "head_dim", "set"};
  return kOptional;
}

std::optional<model::FlopsConvention> parse_flops_convention(const std::string& text) {
  if (text == "megatron") return model::FlopsConvention::kMegatron;
  if (text == "megatron-recompute") return model::FlopsConvention::kMegatronRecompute;
  if (text == "causal") return model::FlopsConvention::kCausal;
  if (text == "6n") return model::FlopsConvention::k6N;
  return std::nullopt;
}

bool apply_profile_override(calib::Profile& p, const std::string& field, double value) {
  // An attention constant carries the profile's curve at head dimension 64 with it, in
  // proportion (a fitted rate is the kernel's, at every head dimension; the charts' ratio
  // between the two curves stays), or takes the value where the old one was 0.
  const auto attention = [&](double& at128, double& at64, double v) {
    if (p.attention_hd64.fwd > 0) at64 = at128 > 0 ? at64 * v / at128 : v;
    at128 = v;
  };
  if (field == "gemm_peak_efficiency") p.gemm_peak_efficiency = value;
  else if (field == "gemm_half_dim") p.gemm_half_dim = value;
  else if (field == "attention_fwd_efficiency")
    attention(p.attention_fwd_efficiency, p.attention_hd64.fwd, value);
  else if (field == "attention_bwd_efficiency")
    attention(p.attention_bwd_efficiency, p.attention_hd64.bwd, value);
  else if (field == "attention_fwd_overhead_keys")
    attention(p.attention_fwd_overhead_keys, p.attention_hd64.fwd_overhead_keys, value);
  else if (field == "attention_bwd_overhead_keys")
    attention(p.attention_bwd_overhead_keys, p.attention_hd64.bwd_overhead_keys, value);
  else if (field == "memory_bw_efficiency") p.memory_bw_efficiency = value;
  else if (field == "kernel_overhead_s") p.kernel_overhead_s = value;
  else if (field == "nic_efficiency") p.nic_efficiency = value;
  else if (field == "data_loading_s") p.data_loading_s = value;
  else return false;
  return true;
}

std::vector<ValidationRow> validate_runs(const std::string& csv_path, const std::string& fidelity,
                                         const ValidationOptions& options) {
  return validate_runs_text(read_input_file(csv_path, "runs file", limits::kMaxCsvBytes), csv_path,
                            fidelity, options);
}

std::vector<ValidationRow> validate_runs_text(const std::string& text_in, const std::string& file,
                                              const std::string& fidelity,
                                              const ValidationOptions& options) {
  // A UTF-8 byte-order mark is accepted, as in every other input.
  std::string_view text_view = text_in;
  if (text_view.substr(0, 3) == "\xEF\xBB\xBF") text_view.remove_prefix(3);
  std::istringstream in{std::string(text_view)};
  std::string line;
  int line_no = 0;
  std::vector<std::string> header;
  int physical_lines = 0;  // line_no: the first line of the current record
  while (header.empty() && read_record(in, line, physical_lines, line_no, file)) {
    if (trim(line).empty()) continue;
    header = split_csv_line(line);
    for (auto& h : header) h = trim(h);
  }
  if (header.empty()) throw_input("empty file: expected a header row", {file, 0, ""});
  std::map<std::string, size_t> col;
  const auto& optional = optional_validation_columns();
  for (size_t i = 0; i < header.size(); ++i) {
    const bool known = std::find(kColumns.begin(), kColumns.end(), header[i]) != kColumns.end() ||
                       std::find(optional.begin(), optional.end(), header[i]) != optional.end();
    if (!known) {
      std::vector<std::string> all = kColumns;
      all.insert(all.end(), optional.begin(), optional.end());
      const std::string hint = did_you_mean(header[i], all);
      throw_input("unknown column `" + header[i] + "`", {file, line_no, header[i]}, hint);
    }
    if (col.count(header[i])) {
      throw_input("column `" + header[i] + "` is given twice (columns " +
                      std::to_string(col[header[i]] + 1) + " and " + std::to_string(i + 1) + ")",
                  {file, line_no, header[i]});
    }
    col[header[i]] = i;
  }
  for (const auto& c : kColumns) {
    if (!col.count(c)) throw_input("missing column `" + c + "`", {file, line_no, c});
  }

  std::vector<ValidationRow> rows;
  std::map<std::string, int> id_lines;  // an id names one run: the tables, groups and report key on it
  while (read_record(in, line, physical_lines, line_no, file)) {
    if (trim(line).empty() || trim(line)[0] == '#') continue;
    std::vector<std::string> cells = split_csv_line(line);
    if (cells.size() != header.size()) {
      throw_input("row has " + std::to_string(cells.size()) + " cells, the header has " +
                      std::to_string(header.size()),
                  {file, line_no, ""});
    }
    auto cell = [&](const std::string& c) {
      const auto it = col.find(c);
      return it == col.end() ? std::string() : trim(cells[it->second]);
    };
    ValidationRow row;
    row.id = cell("id");
    row.source = cell("source");
    row.gpu = cell("gpu");
    row.line = line_no;
    if (row.id.empty()) throw_input("empty id", {file, line_no, "id"});
    if (const auto [at, fresh] = id_lines.emplace(row.id, line_no); !fresh) {
      throw_input("`" + clip_name(row.id) + "` is already the id of line " +
                      std::to_string(at->second),
                  {file, line_no, "id"}, "give each run its own id");
    }
    for (const auto& [name, i] : col) row.cells[name] = trim(cells[i]);

    // Published figures (numbers checked even when the row cannot be simulated): positive.
    auto published = [&](const char* c) {
      const auto v = number(cell(c), file, line_no, c);
      if (v && *v <= 0) throw_input("`" + cell(c) + "` must be positive", {file, line_no, c});
      return v;
    };
    const auto pub_iter = published("iter_s");
    const auto pub_tokens = published("tokens_s");
    const auto pub_mfu = published("mfu");
    const auto pub_tflops = published("tflops_gpu");
    if (pub_mfu && *pub_mfu > 1) {
      throw_input("MFU " + cell("mfu") + " is above 1 (write it as a fraction, e.g. 0.53)",
                  {file, line_no, "mfu"});
    }
    // Whole-number columns: integers within what a cluster can have.
    for (const char* c : {"gpus", "layers", "hidden", "heads", "kv_heads", "ffn", "seq", "vocab",
                          "tp", "pp", "dp", "vpp", "cp", "ep", "mbs", "gbs", "zero", "experts",
                          "top_k", "moe_every", "head_dim"}) {
      if (std::string_view(c) == "vpp" && vpp_auto(cell(c))) continue;  // searched below
      const auto v = number(cell(c), file, line_no, c);
      if (v && (*v != std::floor(*v) || *v < 0 || *v > 2147483647.0)) {
        throw_input("`" + cell(c) + "` is not a whole number from 0 to 2147483647",
                    {file, line_no, c});
      }
      // The model's sizes and the GPU count have no default here (0 would mean "from the
      // preset" once it reaches the scenario, and a row names no preset; kv_heads 0 would
      // silently change the inferred architecture): leave the cell blank to say unknown.
      static const std::set<std::string_view> kPositive = {"gpus", "layers", "hidden", "heads",
                                                            "kv_heads", "ffn", "seq", "vocab"};
      if (v && *v == 0 && kPositive.contains(c)) {
        throw_input("`0` is not a size: " + std::string(c) +
                        " must be at least 1 (leave the cell blank when it is not known)",
                    {file, line_no, c});
      }
    }
    std::optional<model::FlopsConvention> convention;
    if (!cell("flops_convention").empty()) {
      convention = parse_flops_convention(cell("flops_convention"));
      if (!convention) {
        throw_input("unknown FLOP convention `" + cell("flops_convention") + "`",
                    {file, line_no, "flops_convention"},
                    "one of megatron, megatron-recompute, causal, 6n");
      }
    }
    // `system` names an optimizations.system preset; anything else was an internal error
    // (map::at, exit 4) before the scenario was built (found by fuzz_validation_csv).
    // The cell may also name a framework preset ("megatron-core-2023"), a framework family
    // ("torchtitan") or a framework by its repository name ("Megatron-LM"), in any case.
    std::string system_cell = cell("system");
    std::string framework_of_system;
    if (!system_cell.empty()) {
      const std::vector<std::string>& systems = find_key("optimizations.system")->choices;
      std::string lower;
      for (char c : system_cell) {
        lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c == '_' ? '-' : c)));
      }
      if (lower == "megatron-lm" || lower == "megatron-core" || lower == "mcore") lower = "megatron";
      // Megatron-DeepSpeed (BLOOM, MT-NLG: DeepSpeed's pipeline engine and ZeRO with Megatron's
      // tensor slicing) is what the deepspeed preset models; NeMo Megatron is NeMo.
      if (lower == "megatron-deepspeed" || lower == "deepspeed-megatron") lower = "deepspeed";
      if (lower == "nemo-megatron") lower = "nemo";
      if (std::find(systems.begin(), systems.end(), lower) != systems.end()) {
        system_cell = lower;
      } else if (const std::string fw = lower == "torchtitan"    ? "torchtitan-2024"
                                        : lower == "llm-foundry" || lower == "composer" ||
                                                  lower == "mosaicml"
                                            ? "llm-foundry-2023"
                                            : lower;
                 find_framework(fw) != nullptr) {
        framework_of_system = fw;
        const std::string family = find_framework(fw)->system;
        system_cell =
            std::find(systems.begin(), systems.end(), family) != systems.end() ? family : "none";
      } else {
        std::vector<std::string> names = systems;
        for (const std::string& f : framework_names()) names.push_back(f);
        throw_input("unknown system `" + clip_name(cell("system")) + "`",
                    {file, line_no, "system"}, did_you_mean(cell("system"), names));
      }
    }
    if (!cell("framework").empty() && find_framework(cell("framework")) == nullptr) {
      throw_input("unknown framework preset `" + cell("framework") + "`",
                  {file, line_no, "framework"}, did_you_mean(cell("framework"), framework_names()));
    }

    // Columns no rule can fill: the row is reported, not guessed.
    std::string missing;
    for (const char* c : {"gpu", "gpus", "layers", "hidden", "heads", "ffn", "seq", "vocab", "tp",
                          "pp", "gbs"}) {
      if (cell(c).empty()) missing += (missing.empty() ? "" : ", ") + std::string(c);
    }
    if (!missing.empty()) {
      row.error_message = file + ":" + std::to_string(line_no) + ": blank " + missing +
                          ": these columns have no stated default";
      row.published = {pub_iter, pub_tokens, pub_mfu, pub_tflops, std::nullopt};
      rows.push_back(std::move(row));
      continue;
    }

    // Scenario keys from the columns; blanks filled by the rules below and recorded.
    std::map<std::string, std::string> v;
    std::string gpu = cell("gpu");
    if (const std::string named = canonical_gpu(gpu); !named.empty() && named != gpu) {
      row.assumed["gpu"] = named + " (the preset `" + gpu + "` names)";
      gpu = named;
    }
    std::string system = system_cell;
    if (!framework_of_system.empty() && cell("framework").empty()) {
      row.assumed["framework"] = framework_of_system + " (the `system` cell names it)";
    }
    if (system.empty() && !cell("framework").empty()) {
      // The framework cell names the software; its preset sets every lever, so the system is
      // only its family's name (it said "megatron (blank: the plain Megatron-LM baseline)" beside
      // a torchtitan or LLM Foundry framework).
      const FrameworkPreset* named = find_framework(cell("framework"));
      const std::vector<std::string>& systems = find_key("optimizations.system")->choices;
      system = named != nullptr && std::find(systems.begin(), systems.end(), named->system) !=
                                       systems.end()
                   ? named->system
                   : "none";
      row.assumed["system"] =
          system == "none"
              ? "none (blank: the `framework` cell's " + cell("framework") + " sets the levers)"
              : system + " (blank: the family of the `framework` cell's " + cell("framework") +
                    ")";
    } else if (system.empty()) {
      system = "megatron";
      row.assumed["system"] = "megatron (blank: the plain Megatron-LM baseline)";
    }
    // A blank framework is the software of the source's era (framework_for_run); a blank FLOP
    // convention is how that framework's own throughput log counts (FrameworkPreset).
    std::string framework = cell("framework");
    if (framework.empty()) framework = framework_of_system;
    if (framework.empty()) {
      std::string why;
      FrameworkNeeds needs;
      needs.selective_recompute = cell("recompute") == "selective";
      const auto zero_n = number(cell("zero"), file, line_no, "zero");
      const auto cp_n = number(cell("cp"), file, line_no, "cp");
      needs.sharded_optimizer = zero_n && *zero_n >= 1;
      needs.parameter_sharding = zero_n && *zero_n >= 3;
      needs.context_parallel = cp_n && *cp_n > 1;
      // The blocks the row's shape implies (as the block rule below reads them).
      {
        const bool row_gqa = !cell("kv_heads").empty() && cell("kv_heads") != cell("heads");
        const auto h = number(cell("hidden"), file, line_no, "hidden");
        const auto f = number(cell("ffn"), file, line_no, "ffn");
        needs.gated_mlp = h && f && *f != 4.0 * *h;
        needs.gqa = row_gqa;
        needs.rotary = row_gqa;
        needs.rmsnorm = row_gqa;
        // ... and the `set` cell's (a Llama 2 row states RoPE there; checked below).
        const std::string text = cell("set");
        for (std::size_t at = 0; at <= text.size();) {
          const std::size_t end = std::min(text.find(';', at), text.size());
          const std::string item = trim(text.substr(at, end - at));
          at = end + 1;
          const std::size_t eq = item.find('=');
          if (eq == std::string::npos) continue;
          const std::string key = trim(item.substr(0, eq));
          const std::string value = trim(item.substr(eq + 1));
          if (key == "model.position") needs.rotary = value == "rope";
          if (key == "model.mlp") needs.gated_mlp = value == "swiglu";
          if (key == "model.norm") needs.rmsnorm = value == "rmsnorm";
        }
      }
      framework = framework_for_run(system, row.source, &why, needs);
      row.assumed["framework"] = why;
    }
    if (!convention) {
      const FrameworkPreset* logged = find_framework(framework);
      convention = parse_flops_convention(logged->logged_tflops);
      row.assumed["flops_convention"] =
          logged->logged_tflops + " (blank: what " + framework + "'s throughput log counts" +
          (*convention == model::FlopsConvention::kMegatronRecompute
               ? ": model FLOPs plus the recompute forward pass)"
           : *convention == model::FlopsConvention::kCausal
               ? ": model FLOPs, causal attention over half the s×s scores, no recompute)"
               : ": model FLOPs, full s×s attention, no recompute)");
    }
    row.flops_convention = model::to_string(*convention);
    row.tflops_counts_recompute = *convention == model::FlopsConvention::kMegatronRecompute;
    v["cluster.preset"] = cell("cluster");
    if (v["cluster.preset"].empty()) {
      v["cluster.preset"] = default_cluster_for_gpu(gpu);
      row.assumed["cluster"] = v["cluster.preset"] + " (blank: the GPU's default cluster)";
    }
    v["cluster.gpu"] = gpu;
    v["cluster.gpus"] = cell("gpus");
    v["model.layers"] = cell("layers");
    v["model.hidden"] = cell("hidden");
    v["model.heads"] = cell("heads");
    v["model.kv_heads"] = cell("kv_heads");
    v["model.ffn_hidden"] = cell("ffn");
    v["model.seq_len"] = cell("seq");
    v["model.vocab"] = cell("vocab");
    // The block: a GQA model (kv_heads < heads) is of the post-2023 kind (RMSNorm, RoPE, no
    // biases, no dropout, untied embeddings). Its MLP is read from the FFN width, not guessed
    // from GQA: a gated MLP (SwiGLU) has three matrices and is sized near 8/3·hidden to keep a
    // 4·hidden two-matrix MLP's parameters (Llama 3 405B: 3.25·h; Llama 2 70B: 3.5·h), while
    // two-matrix MLPs (GeLU, squared ReLU) keep exactly 4·hidden (GPT-3, BLOOM, Falcon 180B with
    // GQA, Nemotron-4 340B with GQA and squared ReLU).
    const bool gqa = !cell("kv_heads").empty() && cell("kv_heads") != cell("heads");
    const auto hidden_n = number(cell("hidden"), file, line_no, "hidden");
    const auto ffn_n = number(cell("ffn"), file, line_no, "ffn");
    const bool four_h = hidden_n && ffn_n && *ffn_n == 4.0 * *hidden_n;
    const bool gated = hidden_n && ffn_n && !four_h;
    if (gqa || gated) {
      v["model.mlp"] = gated ? "swiglu" : "gelu";
      if (gqa) {
        v["model.norm"] = "rmsnorm";
        v["model.position"] = "rope";
        v["model.bias"] = "false";
        v["model.tied_embeddings"] = "false";
        v["model.dropout"] = "false";
      }
      row.assumed["model"] =
          std::string(gated ? "SwiGLU MLP because ffn is not 4 x hidden"
                            : "two-matrix MLP because ffn is 4 x hidden") +
          (gqa ? "; RMSNorm, RoPE, no biases, no dropout because kv_heads < heads" : "");
    }
    for (const char* c : {"tp", "pp", "dp", "cp", "ep"}) {
      v[std::string("parallel.") + c] = cell(c);
    }
    // The width of one head (optional column): blank is hidden / heads.
    if (!cell("head_dim").empty() && cell("head_dim") != "0") v["model.head_dim"] = cell("head_dim");
    // Mixture of experts (optional columns): experts per MoE layer, experts per token, every
    // n-th layer MoE; each expert is an MLP of the `ffn` width. Blank: a dense model.
    if (!cell("experts").empty() && cell("experts") != "0") {
      v["model.experts"] = cell("experts");
      v["model.top_k"] = cell("top_k").empty() ? "1" : cell("top_k");
      v["model.moe_every"] = cell("moe_every").empty() ? "1" : cell("moe_every");
      if (cell("top_k").empty()) row.assumed["top_k"] = "1 (blank: one expert per token)";
      if (cell("moe_every").empty()) row.assumed["moe_every"] = "1 (blank: every layer MoE)";
    } else if (!cell("top_k").empty() || !cell("moe_every").empty()) {
      throw_input("top_k or moe_every given without experts", {file, line_no, "experts"},
                  "give the experts per MoE layer, or leave all three blank for a dense model");
    }
    // vpp: blank is not interleaved (the format's definition, ../shared/validation/README.md);
    // `auto` (an interleaved run whose virtual-stage count is unpublished) is searched below.
    if (!vpp_auto(cell("vpp"))) v["parallel.vpp"] = cell("vpp").empty() ? "1" : cell("vpp");
    if (cell("vpp").empty() && number(cell("pp"), file, line_no, "pp").value_or(1) > 1) {
      row.assumed["vpp"] = "1 (blank: not interleaved, as the format defines it)";
    }
    if (v["parallel.dp"].empty()) {
      v["parallel.dp"] = "auto";
      row.assumed["dp"] = "gpus / (tp·pp·cp)";
    }
    if (v["parallel.cp"].empty()) v["parallel.cp"] = "1";
    if (v["parallel.ep"].empty()) v["parallel.ep"] = "1";
    // A blank micro-batch is searched below (the fastest that fits); 1 meanwhile.
    v["training.micro_batch"] = cell("mbs").empty() ? "1" : cell("mbs");
    v["training.global_batch"] = cell("gbs");
    // fp8 with its scaling recipe: `fp8-cs` is current scaling, as NeMo's tables label it;
    // `fp8` alone is Transformer Engine's default, delayed scaling. A block-scaled format makes
    // the row not simulable, naming the column; anything else is refused as a typo.
    const std::string precision = cell("precision");
    std::string precision_error;
    if (precision == "fp8-cs" || precision == "fp8-current") {
      v["training.precision"] = "fp8";
      v["training.fp8_recipe"] = "current";
    } else if (precision == "fp8-delayed" || precision == "fp8-ds") {
      v["training.precision"] = "fp8";
      v["training.fp8_recipe"] = "delayed";
    } else {
      v["training.precision"] = precision.empty() ? "bf16" : precision;
      if (!precision.empty() && precision != "fp16" && precision != "bf16" && precision != "fp8") {
        std::string lower;
        for (char c : precision) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        const bool block_scaled = lower.find("mx") != std::string::npos ||
                                  lower.find("fp4") != std::string::npos ||
                                  lower.find("block") != std::string::npos;
        // A block-scaled format is a real run the model cannot price: its row is left out, with
        // the reason. Anything else is a typo in the file (`BF16`): it stops the file.
        if (!block_scaled) {
          throw_input("`" + precision +
                          "` is not a precision: write bf16, fp16, fp8 (delayed scaling), fp8-cs "
                          "or fp8-current (current scaling), or fp8-delayed",
                      {file, line_no, "precision"});
        }
        precision_error =
            "`" + precision +
            "` is a block-scaled format (MXFP8, NVFP4, 128x128 blocks), which the model does not "
            "price: its GEMMs and casts have no sourced cost here; the per-tensor recipes are "
            "bf16, fp16, fp8 (delayed scaling), fp8-cs or fp8-current (current scaling), "
            "fp8-delayed";
      }
      if (precision == "fp8") {
        row.assumed["fp8_recipe"] = "delayed (Transformer Engine's default; fp8-cs is current scaling)";
      }
    }
    if (precision.empty()) row.assumed["precision"] = "bf16";
    // ZeRO and SP: given, or the framework preset's (it states whether the software had them).
    v["parallel.zero"] = cell("zero");
    const FrameworkPreset* fw = find_framework(framework);
    // The `none` preset states no ZeRO stage nor SP: the schema's defaults apply.
    const auto preset_value = [&](const std::string& key) {
      const auto it = fw->values.find(key);
      if (it != fw->values.end()) return it->second + " (the " + framework + " preset)";
      return find_key(key)->default_value + " (the schema default; the " + framework +
             " preset states none)";
    };
    if (cell("zero").empty()) row.assumed["zero"] = preset_value("parallel.zero");
    row.assumed["sp"] = preset_value("parallel.sp");
    v["optimizations.system"] = system;
    v["framework.preset"] = framework;
    v["simulation.fidelity"] = "analytic";
    // `set` (optional column): scenario keys the source states that no column holds, as
    // `key=value` pairs separated by `;` (BLOOM's `framework.grad_accumulation=add-fp32`). A key
    // that has a column of its own is refused there, so that a row says each thing once; a
    // `--set` of the command still wins (a what-if over every row).
    std::map<std::string, std::string> row_set;
    {
      static const std::set<std::string> kColumnKeys = {
          "cluster.preset", "cluster.gpu", "cluster.gpus", "model.layers", "model.hidden",
          "model.heads", "model.kv_heads", "model.ffn_hidden", "model.seq_len", "model.vocab",
          "model.experts", "model.top_k", "model.moe_every", "model.head_dim", "parallel.tp",
          "parallel.pp", "parallel.dp", "parallel.vpp", "parallel.cp", "parallel.ep",
          "parallel.zero", "training.micro_batch", "training.global_batch", "training.recompute",
          "training.precision", "optimizations.system", "framework.preset"};
      std::string text = cell("set");
      std::size_t start = 0;
      while (start <= text.size()) {
        const std::size_t end = std::min(text.find(';', start), text.size());
        const std::string item = trim(text.substr(start, end - start));
        start = end + 1;
        if (item.empty()) continue;
        const std::size_t eq = item.find('=');
        const std::string key = trim(item.substr(0, eq));
        if (eq == std::string::npos || key.empty() || trim(item.substr(eq + 1)).empty()) {
          throw_input("`" + clip_name(item) + "` is not key=value", {file, line_no, "set"},
                      "scenario keys as key=value pairs separated by ;");
        }
        if (find_key(key) == nullptr) {
          throw_input("unknown scenario key `" + clip_name(key) + "`", {file, line_no, "set"},
                      suggest_key(key));
        }
        if (kColumnKeys.count(key) != 0) {
          throw_input("`" + key + "` has a column of its own", {file, line_no, "set"},
                      "give it in that column");
        }
        if (key == "simulation.fidelity") {
          throw_input("`simulation.fidelity` is the command's, not a row's", {file, line_no, "set"},
                      "validate --fidelity schedule|flow runs every row at that fidelity");
        }
        if (!row_set.emplace(key, trim(item.substr(eq + 1))).second) {
          throw_input("`" + key + "` is given twice", {file, line_no, "set"},
                      "give each key once");
        }
      }
    }
    for (const auto& [key, value] : row_set) v[key] = value;
    for (const auto& [key, value] : options.set) v[key] = value;

    // `full:N`: full recompute of N layers of each stage, the rest keep everything (Megatron's
    // --recompute-method block --recompute-num-layers N, as recipes state it).
    std::string recompute = cell("recompute");
    if (recompute.rfind("full:", 0) == 0) {
      const auto layers = number(recompute.substr(5), file, line_no, "recompute");
      if (!layers || *layers < 1 || *layers != std::floor(*layers)) {
        throw_input("`" + recompute + "`: full:N takes a whole number of layers N ≥ 1",
                    {file, line_no, "recompute"});
      }
      const auto model_layers = number(cell("layers"), file, line_no, "layers");
      if (model_layers && *layers > *model_layers) {
        throw_input("`" + recompute + "`: the model has " + cell("layers") + " layers",
                    {file, line_no, "recompute"},
                    "full:N recomputes N layers of each stage; `full` recomputes every layer");
      }
      v["training.recompute_layers"] = recompute.substr(5);
      recompute = "full";
    }
    v["training.recompute"] = recompute;
    for (auto it = v.begin(); it != v.end();) {
      it = it->second.empty() ? v.erase(it) : std::next(it);
    }
    try {
      if (!precision_error.empty()) throw_input(precision_error, {file, line_no, "precision"});
      // One candidate setup: the scenario, its run configuration with the profile overrides,
      // and (blank `recompute`) the least recompute that fits.
      struct Setup {
        Scenario scenario;
        exec::RunConfig cfg;
        std::string recompute_text;
        std::map<std::string, std::string> keys;  // the scenario keys it was built from
      };
      const std::string where = file + ":" + std::to_string(line_no);
      const auto set_up = [&](const std::map<std::string, std::string>& keys) {
        Setup su{build_scenario(keys, where), {}, {}, keys};
        su.cfg = make_run_config(su.scenario);
        for (const auto& [key, value] : options.profile_overrides) {
          const auto colon = key.find(':');
          if (colon == std::string::npos || key.substr(0, colon) != su.cfg.profile.gpu) continue;
          apply_profile_override(su.cfg.profile, key.substr(colon + 1), value);
        }
        if (recompute.empty()) su.cfg = choose_recompute(su.cfg, &su.recompute_text);
        su.scenario.training = su.cfg.training;
        return su;
      };
      exec::AnalyticOptions opts;
      opts.enforce_memory = true;
      // A `vpp` of `auto` on a pipelined row (interleaved, the count unpublished) is searched,
      // as a blank recompute is: the number of virtual stages is a tuning choice the source did
      // not state, and the run that was published is the tuned one. Candidates are the
      // virtual-stage counts the layout accepts; the fastest that fits in memory (analytic) is
      // kept. A preset without interleaving keeps vpp 1. A blank `mbs` is searched the same way
      // (jointly with such a vpp): the powers of two up to 16 that the layout accepts (the
      // batch per replica a multiple of them, and of pp micro-batches when interleaved).
      const bool search_vpp = vpp_auto(cell("vpp")) && v.count("parallel.vpp") == 0 &&
                              number(cell("pp"), file, line_no, "pp").value_or(1) > 1 &&
                              fw->interleaved_pp;
      const bool search_mbs = cell("mbs").empty() && options.set.count("training.micro_batch") == 0;
      int ends = 0;
      // A given interleaving whose model chunks the layers do not fill evenly (Megatron-Bridge's
      // Llama 3.1 405B: 126 layers, PP 8, VP 8, with the embedding and the loss each counted as
      // a layer of the first and the last chunk) takes the same end-stage rule as a searched one.
      int given_vpp = 0;  // a whole number given for vpp (0: searched or `auto`)
      if (!search_vpp) {
        const std::string vpp_text = v.count("parallel.vpp") ? v["parallel.vpp"] : "1";
        if (!vpp_text.empty() && vpp_text.size() <= 9 &&
            std::all_of(vpp_text.begin(), vpp_text.end(), [](unsigned char c) { return std::isdigit(c); })) {
          given_vpp = std::stoi(vpp_text);
        }
      }
      const int layers_n = static_cast<int>(number(cell("layers"), file, line_no, "layers").value_or(0));
      const int pp_n = static_cast<int>(number(cell("pp"), file, line_no, "pp").value_or(1));
      const bool uneven_given = given_vpp > 1 && layers_n > 0 && layers_n % (pp_n * given_vpp) != 0;
      if (search_vpp || uneven_given) {
        const int layers = layers_n;
        const int pp = pp_n;
        // Layers that do not divide into the stages: the first and the last stage take fewer,
        // the middle ones an equal share (Llama 3 §3.3.2: 126 = 7 + 14 × 8 + 7; Megatron-Core's
        // --decoder-first/last-pipeline-num-layers), which the interleaved layout needs stated.
        if ((layers % pp != 0 || uneven_given) && pp > 2 &&
            v.count("parallel.first_stage_layers") == 0 &&
            v.count("parallel.last_stage_layers") == 0) {
          for (int k = layers / pp; k >= 1 && ends == 0; --k) {
            if ((layers - 2 * k) % (pp - 2) == 0 && (layers - 2 * k) / (pp - 2) >= k) ends = k;
          }
        }
        if (uneven_given && ends > 0) {
          v["parallel.first_stage_layers"] = std::to_string(ends);
          v["parallel.last_stage_layers"] = std::to_string(ends);
          row.assumed["stage_layers"] =
              std::to_string(ends) + " on the first and the last stage, " +
              std::to_string((layers - 2 * ends) / (pp - 2)) + " on the others (" +
              std::to_string(layers) + " layers do not fill " + std::to_string(pp) + " × " +
              std::to_string(given_vpp) + " model chunks evenly)";
        }
      }
      std::optional<Setup> best;
      double best_t = 0;
      std::string vpp_tried, mbs_tried;
      const auto consider = [&](const std::map<std::string, std::string>& keys) {
        try {
          Setup su = set_up(keys);
          su.scenario.fidelity = "analytic";
          const double t = run_scenario(su.scenario, su.cfg, opts).iteration_time_s;
          if (!best || t < best_t) {
            best_t = t;
            best = std::move(su);
          }
          return true;
        } catch (const Error& e) {
          // A count the layout refuses (layers not divisible, micro-batches not a multiple of
          // pp or of the batch) or one that does not fit: not a candidate. A malformed cell is
          // no candidate's fault: it stops the file (below).
          if (e.kind() == ErrorKind::kInput) throw;
          return false;
        }
      };
      std::vector<std::string> mbs_values;
      if (search_mbs) {
        for (int m = 1; m <= 16; m *= 2) mbs_values.push_back(std::to_string(m));
      } else {
        mbs_values.push_back(v["training.micro_batch"]);
      }
      for (const std::string& mbs : mbs_values) {
        std::map<std::string, std::string> with_mbs = v;
        with_mbs["training.micro_batch"] = mbs;
        bool any = false;
        if (search_vpp) {
          const int layers = static_cast<int>(*number(cell("layers"), file, line_no, "layers"));
          const int pp = static_cast<int>(*number(cell("pp"), file, line_no, "pp"));
          // With a layer fewer on each end stage, their end chunks may hold only the embedding
          // and only the output layer (Llama 3 §3.3.2: 16 stages × 8 chunks for 126 layers).
          for (int vpp = 1; vpp * pp <= layers + (ends > 0 ? 2 : 0); ++vpp) {
            std::map<std::string, std::string> keys = with_mbs;
            keys["parallel.vpp"] = std::to_string(vpp);
            if (ends > 0 && vpp > 1) {
              keys["parallel.first_stage_layers"] = std::to_string(ends);
              keys["parallel.last_stage_layers"] = std::to_string(ends);
            }
            if (consider(keys)) {
              any = true;
              if (mbs_values.size() == 1 || mbs == "1") {
                vpp_tried += (vpp_tried.empty() ? "" : ", ") + std::to_string(vpp);
              }
            }
          }
        } else if (search_mbs) {
          if (v.count("parallel.vpp") == 0) with_mbs["parallel.vpp"] = "1";
          any = consider(with_mbs);
        }
        if (any && search_mbs) mbs_tried += (mbs_tried.empty() ? "" : ", ") + mbs;
      }
      if (best && search_vpp) {
        row.assumed["vpp"] = std::to_string(best->scenario.parallel.vpp) +
                             " (auto: the fastest that fits of vpp " + vpp_tried + ")";
        if (ends > 0 && best->scenario.parallel.vpp > 1) {
          const int layers = static_cast<int>(*number(cell("layers"), file, line_no, "layers"));
          const int pp = static_cast<int>(*number(cell("pp"), file, line_no, "pp"));
          row.assumed["stage_layers"] =
              std::to_string(ends) + " on the first and the last stage, " +
              std::to_string((layers - 2 * ends) / (pp - 2)) + " on the others (" +
              std::to_string(layers) + " layers do not divide into " + std::to_string(pp) +
              " stages)";
        }
      }
      if (best && !search_vpp && v.count("parallel.vpp") == 0) {
        row.assumed["vpp"] = "1 (auto: no interleaved count applies or fits)";
      }
      if (best && search_mbs) {
        row.assumed["mbs"] = std::to_string(best->scenario.training.micro_batch) +
                             " (blank: the fastest that fits of mbs " + mbs_tried + ")";
      }
      if (!best) {
        // No candidate: the plain setup (mbs 1 when blank), whose error the row reports.
        if (search_mbs) {
          v["training.micro_batch"] = "1";
          row.assumed["mbs"] =
              "1 (blank: no micro-batch searched gives a setup that runs; the smallest, whose "
              "error the row reports)";
        }
        if (v.count("parallel.vpp") == 0) {
          v["parallel.vpp"] = "1";
          row.assumed["vpp"] = "1 (auto: no interleaved count applies or fits)";
        }
        best = set_up(v);
      }
      Scenario chosen = std::move(best->scenario);
      exec::RunConfig cfg = std::move(best->cfg);
      // The keys as simulated: the searched recompute as chosen, the fidelity of the command.
      {
        std::map<std::string, std::string> keys = best->keys;
        keys["training.recompute"] = model::to_string(cfg.training.recompute);
        keys["training.recompute_layers"] = std::to_string(cfg.training.recompute_layers);
        keys["simulation.fidelity"] = fidelity;
        for (const auto& [key, value] : keys) row.scenario_set.push_back(key + "=" + value);
      }
      if (recompute.empty()) {
        row.assumed["recompute"] = best->recompute_text + " (blank: the least recompute that fits)";
      }
      chosen.fidelity = fidelity;
      // A published run whose micro-batch, interleaving and recompute the row states did fit:
      // when the model refuses it for memory only by the caching allocator's fragmentation
      // reserve (plan::kAllocatorFragmentation, a [D] share of the activations), which is an
      // estimate of what PyTorch loses and not an inventory, the row is simulated as published
      // and warns. Anything beyond that reserve is still refused, and searched cells (blank
      // mbs, `auto` vpp, blank recompute) still choose only what fits with it.
      const bool stated = !search_mbs && !search_vpp && !recompute.empty();
      exec::Result res;
      try {
        res = run_scenario(chosen, cfg, opts);
      } catch (const Error&) {
        if (!stated) throw;
        exec::AnalyticOptions loose = opts;
        loose.enforce_memory = false;
        exec::Result r = run_scenario(chosen, cfg, loose);
        const plan::MemoryUsage& u = r.memory;
        const double fragmentation = plan::kAllocatorFragmentation * u.activations_bytes;
        if (u.peak_bytes <= u.capacity_bytes || u.peak_bytes - fragmentation > u.capacity_bytes) {
          throw;  // not a memory refusal, or one beyond the reserve
        }
        row.warnings.push_back(fmt::format(
            "the model puts this run {:.1f} GiB over the GPU's {:.1f} GiB, less than its "
            "allocator-fragmentation reserve ({:.1f} GiB, {:.0f} % of the activations, an "
            "estimate); simulated as published, which ran",
            (u.peak_bytes - u.capacity_bytes) / kGiB, u.capacity_bytes / kGiB,
            fragmentation / kGiB, 100 * plan::kAllocatorFragmentation));
        res = std::move(r);
      }

      // What the row asks of a framework version that did not have it is simulated as asked
      // (Scenario's capability notes); a validation row says so where it is read.
      for (const std::string& n : chosen.notes) {
        if (n.rfind("framework.preset ", 0) == 0 && n.find(" had no ") != std::string::npos) {
          row.warnings.push_back(n);
        }
      }

      const double tokens_per_iter = std::stod(v["training.global_batch"]) * chosen.model.seq_len;
      const double gpus = chosen.cluster.gpus;
      const double peak = res.peak_flops_per_gpu;
      // FLOPs per iteration in the row's convention (what its published TFLOP/s and MFU count).
      const double conv_flops =
          *convention == model::FlopsConvention::kMegatronRecompute
              ? res.hardware_flops_per_iteration
              : model::flops_per_token(chosen.model, *convention, cfg.training.recompute) *
                    tokens_per_iter;
      row.predicted.iter_s = res.iteration_time_s;
      row.predicted.tokens_s = res.tokens_per_s;
      row.predicted.mfu = res.mfu;
      row.predicted.hfu = res.hfu;
      row.predicted_breakdown = res.breakdown;
      row.predicted.tflops_gpu = conv_flops / (res.iteration_time_s * gpus) / kTera;

      // Published figures, and the iteration time they imply under the row's convention.
      row.published.iter_s = pub_iter;
      row.published.tokens_s = pub_tokens;
      row.published.mfu = std::nullopt;
      row.published.tflops_gpu = pub_tflops;
      if (!row.published.iter_s && pub_tokens) {
        row.published.iter_s = tokens_per_iter / *pub_tokens;
        row.derived.push_back("iter_s = gbs·seq / tokens_s");
      }
      if (!row.published.iter_s && pub_mfu) {
        row.published.iter_s = conv_flops / (*pub_mfu * gpus * peak);
        row.derived.push_back(std::string("iter_s = ") + row.flops_convention +
                              " FLOPs per iteration / (mfu · gpus · peak)");
      }
      if (!row.published.iter_s && pub_tflops) {
        row.published.iter_s = conv_flops / (*pub_tflops * kTera * gpus);
        row.derived.push_back(std::string("iter_s = ") + row.flops_convention +
                              " FLOPs per iteration / (tflops_gpu · gpus)");
      }
      // A published time and a published FLOP rate imply the FLOPs per iteration the source
      // counted: when they are more than 3 % from the row's convention, say so and name the
      // convention they fit (the NeMo 25.x tables count causal attention, docs/validation.md).
      const std::optional<double> pub_time =
          pub_iter ? pub_iter : pub_tokens ? std::optional<double>(tokens_per_iter / *pub_tokens)
                                           : std::nullopt;
      if (pub_time && (pub_tflops || pub_mfu)) {
        const double implied = pub_tflops ? *pub_tflops * kTera * gpus * *pub_time
                                          : *pub_mfu * peak * gpus * *pub_time;
        const char* figure = pub_tflops ? "tflops_gpu" : "mfu";
        const char* time = pub_iter ? "iter_s" : "tokens_s";
        if (std::fabs(implied / conv_flops - 1) > 0.03) {
          std::string best;
          double best_gap = 1e300;
          for (const model::FlopsConvention c :
               {model::FlopsConvention::kMegatron, model::FlopsConvention::kCausal,
                model::FlopsConvention::kMegatronRecompute, model::FlopsConvention::k6N}) {
            const double f = c == model::FlopsConvention::kMegatronRecompute
                                 ? res.hardware_flops_per_iteration
                                 : model::flops_per_token(chosen.model, c, cfg.training.recompute) *
                                       tokens_per_iter;
            const double gap = std::fabs(implied / f - 1);
            if (gap < best_gap) {
              best_gap = gap;
              best = model::to_string(c);
            }
          }
          row.warnings.push_back(fmt::format(
              "published {} and {} imply {:.4g} FLOPs per iteration, {:+.1f} % from the {} count; "
              "the {} convention is within {:.1f} % (set flops_convention, or the framework)",
              figure, time, implied, 100 * (implied / conv_flops - 1), row.flops_convention, best,
              100 * best_gap));
        }
      }
      if (!row.published.tokens_s && row.published.iter_s) {
        row.published.tokens_s = tokens_per_iter / *row.published.iter_s;
      }
      // MFU is compared under one convention (Megatron's model FLOPs): a published MFU in
      // another convention is converted through the iteration time it implies.
      if (pub_mfu && *convention == model::FlopsConvention::kMegatron) {
        row.published.mfu = pub_mfu;
      } else if (row.published.iter_s) {
        row.published.mfu = res.model_flops_per_iteration / (*row.published.iter_s * gpus * peak);
        row.derived.push_back("mfu = Megatron model FLOPs per iteration / (iter_s · gpus · peak)");
      }
      if (row.published.iter_s) {
        row.published.hfu =
            res.hardware_flops_per_iteration / (*row.published.iter_s * gpus * peak);
      }
      // Figures no training run can have: above the peak, or under 1 % of it (a per-GPU
      // tokens/s in the whole job's column is the common slip; say what it would give).
      if (row.published.mfu && (*row.published.mfu > 1.0 || *row.published.mfu < 0.01)) {
        std::string hint;
        if (pub_tokens && !pub_iter && !pub_mfu && !pub_tflops) {
          const double per_gpu = *row.published.mfu * gpus;
          if (per_gpu >= 0.01 && per_gpu <= 1.0) {
            hint = fmt::format("; read as tokens per second per GPU it gives {:.1f} %",
                               100 * per_gpu);
          }
        }
        row.warnings.push_back(fmt::format(
            "the published figures imply an MFU of {:.3g} %, {} (tokens_s is the whole job's "
            "tokens per second, tflops_gpu per GPU, iter_s one iteration){}",
            100 * *row.published.mfu,
            *row.published.mfu > 1.0 ? "above the GPUs' peak" : "below any training run's",
            hint));
      }
      if (row.tflops_counts_recompute) {
        row.assumed["tflops_gpu"] =
            "compared with predicted TFLOP/s counting recompute (Megatron-LM SC21 Eq. 3)";
      }
      if (row.published.mfu) row.mfu_err_pts = 100.0 * (res.mfu - *row.published.mfu);
      if (row.published.iter_s) {
        row.iter_err_pct = 100.0 * (res.iteration_time_s - *row.published.iter_s) /
                           *row.published.iter_s;
      }
      if (row.published.tflops_gpu) {
        row.tflops_err_pct = 100.0 * (*row.predicted.tflops_gpu - *row.published.tflops_gpu) /
                             *row.published.tflops_gpu;
      }
    } catch (const Error& e) {
      // A cell the scenario refuses as malformed (`BF16`, `ful`, `4096.0`) is a typo in the
      // file, not a run the model cannot simulate: it stops the file with exit 2, naming the row
      // and the key, so that a typo cannot quietly change the summary. A precision the model
      // does not simulate (block-scaled fp8, fp4) leaves its row out, with its reason.
      // A GPU no preset holds (a PCIe or NVL card, a memory size no preset has) is a real run
      // the model has no GPU for: its row is left out, with the reason, as docs/validation.md
      // says.
      if (e.kind() == ErrorKind::kInput && precision_error.empty() &&
          e.where().field != "cluster.gpu") {
        throw;
      }
      // Every reason names the row's place in the file (the recompute search's refusal came
      // without one).
      row.error_message = e.where().file.empty()
                              ? file + ":" + std::to_string(line_no) + ": " + e.what()
                              : std::string(e.what());
      row.published.iter_s = pub_iter;
      row.published.tokens_s = pub_tokens;
      row.published.mfu = pub_mfu;
      row.published.tflops_gpu = pub_tflops;
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

ValidationSummary summarize(const std::vector<ValidationRow>& rows) {
  ValidationSummary s;
  s.rows = static_cast<int>(rows.size());
  std::vector<double> mfu_errs;
  double ape_sum = 0;
  for (const auto& r : rows) {
    if (!r.error_message.empty()) continue;
    ++s.simulated;
    if (r.mfu_err_pts) mfu_errs.push_back(std::fabs(*r.mfu_err_pts));
    if (r.iter_err_pct) {
      ape_sum += std::fabs(*r.iter_err_pct);
      ++s.iter_rows;
    }
  }
  s.mfu_rows = static_cast<int>(mfu_errs.size());
  if (!mfu_errs.empty()) {
    std::sort(mfu_errs.begin(), mfu_errs.end());
    const size_t n = mfu_errs.size();
    s.median_abs_mfu_err_pts =
        n % 2 ? mfu_errs[n / 2] : 0.5 * (mfu_errs[n / 2 - 1] + mfu_errs[n / 2]);
    s.max_abs_mfu_err_pts = mfu_errs.back();
  }
  if (s.iter_rows > 0) s.iter_time_mape = ape_sum / s.iter_rows;
  return s;
}

std::vector<GroupColumn> parse_group_by(const std::string& spec) {
  std::vector<std::string> known = kColumns;
  for (const auto& c : optional_validation_columns()) known.push_back(c);
  std::vector<GroupColumn> out;
  std::stringstream items(spec);
  std::string item;
  while (std::getline(items, item, ',')) {
    item = trim(item);
    std::stringstream parts(item);
    std::string part;
    GroupColumn g;
    std::getline(parts, g.column, ':');
    g.column = trim(g.column);
    if (std::find(known.begin(), known.end(), g.column) == known.end()) {
      throw_input("`" + g.column + "` is not a column of the runs format", {"", 0, "--group-by"},
                  did_you_mean(g.column, known));
    }
    for (const auto& other : out) {
      if (other.column == g.column) {
        throw_input("column `" + g.column + "` is given twice", {"", 0, "--group-by"});
      }
    }
    while (std::getline(parts, part, ':')) {
      const NumberResult v = to_double(trim(part));
      if (v.problem != NumberProblem::kNone || (!g.cuts.empty() && v.value <= g.cuts.back())) {
        throw_input("cut `" + part + "` of `" + g.column +
                        "` is not a number above the one before it",
                    {"", 0, "--group-by"}, "e.g. seq:2048:8192 (up to 2048, to 8192, above)");
      }
      g.cuts.push_back(v.value);
    }
    out.push_back(std::move(g));
  }
  if (out.empty()) {
    throw_input("no column given", {"", 0, "--group-by"}, "e.g. --group-by gpu,seq:2048:8192");
  }
  return out;
}

namespace {

std::string cut_label(const std::vector<double>& cuts, std::size_t bin) {
  if (bin == 0) return fmt::format("<={:g}", cuts.front());
  if (bin == cuts.size()) return fmt::format(">{:g}", cuts.back());
  return fmt::format("({:g},{:g}]", cuts[bin - 1], cuts[bin]);
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

std::vector<ValidationGroup> group_rows(const std::vector<ValidationRow>& rows,
                                        const std::vector<GroupColumn>& by) {
  // Sort key per column: the range's index for a cut column (so ranges come in order), the cell
  // itself otherwise.
  using Key = std::vector<std::pair<std::size_t, std::string>>;
  std::map<Key, std::vector<const ValidationRow*>> groups;
  for (const ValidationRow& r : rows) {
    Key key;
    for (const GroupColumn& g : by) {
      const auto it = r.cells.find(g.column);
      const std::string cell = it == r.cells.end() ? std::string() : it->second;
      if (g.cuts.empty()) {
        key.emplace_back(0, cell.empty() ? "(blank)" : cell);
        continue;
      }
      if (cell.empty()) {
        key.emplace_back(g.cuts.size() + 1, "(blank)");
        continue;
      }
      const NumberResult v = to_double(cell);
      if (v.problem != NumberProblem::kNone) {
        throw_input(fmt::format("row `{}` (line {}): `{}` is not a number to cut", r.id, r.line,
                                cell),
                    {"", r.line, g.column});
      }
      const std::size_t bin = static_cast<std::size_t>(
          std::lower_bound(g.cuts.begin(), g.cuts.end(), v.value) - g.cuts.begin());
      key.emplace_back(bin, cut_label(g.cuts, bin));
    }
    groups[key].push_back(&r);
  }
  std::vector<ValidationGroup> out;
  for (const auto& [key, members] : groups) {
    ValidationGroup g;
    for (const auto& k : key) g.key.push_back(k.second);
    g.rows = static_cast<int>(members.size());
    std::vector<double> errs, abs_errs;
    double ape = 0;
    for (const ValidationRow* r : members) {
      if (!r->error_message.empty()) continue;
      if (r->mfu_err_pts) {
        errs.push_back(*r->mfu_err_pts);
        abs_errs.push_back(std::fabs(*r->mfu_err_pts));
      }
      if (r->iter_err_pct) {
        ape += std::fabs(*r->iter_err_pct);
        ++g.iter_rows;
      }
    }
    g.mfu_rows = static_cast<int>(errs.size());
    if (!errs.empty()) {
      g.median_mfu_err_pts = median_of(errs);
      g.min_mfu_err_pts = *std::min_element(errs.begin(), errs.end());
      g.max_mfu_err_pts = *std::max_element(errs.begin(), errs.end());
      g.median_abs_mfu_err_pts = median_of(abs_errs);
    }
    if (g.iter_rows > 0) g.iter_time_mape = ape / g.iter_rows;
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace trainsim::scen
