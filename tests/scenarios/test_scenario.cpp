// Tests of scenario loading (scenarios/scenario.h): defaults, presets, precedence, derived
// settings and every class of input error with its kind, file, line, field and hint.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "scenarios/presets.h"
#include "scenarios/scenario.h"
#include "sim/core/error.h"

#ifndef TRAINSIM_SOURCE_DIR
#define TRAINSIM_SOURCE_DIR "."
#endif

namespace trainsim::scen {
namespace {

const std::string kSourceDir = TRAINSIM_SOURCE_DIR;
const std::string kDefaultFile = kSourceDir + "/scenarios/megascale-175b-12288.yaml";

Error capture(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  return Error(ErrorKind::kRuntime, "no error was thrown");
}

Error load_error(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  return capture([&] { load_scenario_string(yaml, "t.yaml", sets); });
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

bool has_note(const Scenario& s, const std::string& note) {
  for (const std::string& n : s.notes) {
    if (n == note) return true;
  }
  return false;
}

// An MoE scenario carries the caveat of docs/validation.md's fine-grained MoE row; a dense one
// does not.
TEST(Scenario, MoeCarriesItsCaveat) {
  const auto moe_note = [](const Scenario& s) {
    for (const std::string& n : s.notes) {
      if (contains(n, "fine-grained MoE")) return true;
    }
    return false;
  };
  EXPECT_TRUE(moe_note(load_scenario_string("", "t", {"model.experts=8", "model.top_k=2"})));
  EXPECT_FALSE(moe_note(load_scenario_string("", "t", {})));
}

// The project's default run (MegaScale NSDI'24 §6): 12,288 GPUs with TP 8 and PP 8 leave
// DP = 12,288 / 64 = 192; vpp 6 makes the schedule interleaved; the megascale system turns on
// every lever but sliding-window attention, and LAMB makes the optimizer lamb; the model has
// MegaScale's 128 heads (not GPT-3's 96).
TEST(Scenario, DefaultFileLoads) {
  const Scenario s = load_scenario_file(kDefaultFile);
  EXPECT_EQ(s.source, kDefaultFile);
  EXPECT_EQ(s.model.name, "megascale-175b");
  EXPECT_EQ(s.model.layers, 96);
  EXPECT_EQ(s.model.hidden, 12288);
  EXPECT_EQ(s.model.heads, 128);
  EXPECT_EQ(s.model.kv_heads, 128);
  EXPECT_EQ(s.model.vocab, 64000);
  EXPECT_EQ(s.model.seq_len, 2048);
  EXPECT_TRUE(s.model.parallel_block);
  EXPECT_EQ(s.model.attention_window, 0);

  EXPECT_EQ(s.cluster.name, "megascale-ampere");
  EXPECT_EQ(s.cluster.gpu.name, "a100-80gb");
  EXPECT_EQ(s.cluster.gpus, 12288);
  EXPECT_EQ(s.cluster.fabric.port_split, 2);

  EXPECT_EQ(s.parallel.tp, 8);
  EXPECT_EQ(s.parallel.pp, 8);
  EXPECT_EQ(s.parallel.dp, 192);
  EXPECT_EQ(s.parallel.vpp, 6);
  EXPECT_EQ(s.parallel.cp, 1);
  EXPECT_TRUE(s.parallel.sp);
  EXPECT_EQ(s.parallel.zero, 1);
  EXPECT_EQ(s.parallel.schedule, plan::Schedule::kInterleaved);
  EXPECT_EQ(s.parallel.world(), 12288);

  EXPECT_EQ(s.training.global_batch, 6144);
  EXPECT_EQ(s.training.micro_batch, 1);
  EXPECT_EQ(s.training.precision, Precision::kBf16);
  EXPECT_EQ(s.training.recompute, model::Recompute::kSelective);
  EXPECT_EQ(s.training.optimizer, plan::Optimizer::kLamb);

  EXPECT_EQ(s.system, "megascale");
  EXPECT_TRUE(s.opt.tp_overlap);
  EXPECT_TRUE(s.opt.pp_overlap);
  EXPECT_TRUE(s.opt.dp_overlap);
  EXPECT_TRUE(s.opt.efficient_operators);
  EXPECT_TRUE(s.opt.async_data_pipeline);
  EXPECT_TRUE(s.opt.lamb);
  EXPECT_TRUE(s.opt.parallel_block);
  EXPECT_FALSE(s.opt.sliding_window);

  EXPECT_EQ(s.fidelity, "analytic");
  EXPECT_EQ(s.seed, 1u);
  EXPECT_EQ(s.calibration_profile, "datasheet");

  EXPECT_EQ(s.values.at("parallel.dp"), "192");
  EXPECT_EQ(s.origin.at("parallel.dp"), "derived");
  EXPECT_TRUE(has_note(s, "parallel.dp = 192 (auto: 12288 GPUs / (tp 8 · pp 8 · cp 1))"));
  EXPECT_EQ(s.origin.at("model.heads"), "preset megascale-175b");
  EXPECT_EQ(s.origin.at("optimizations.tp_overlap"), "framework megascale-2024");
  EXPECT_TRUE(contains(s.origin.at("parallel.tp"), kDefaultFile + ":"))
      << s.origin.at("parallel.tp");
}

// The schema defaults describe the same run, so an empty scenario gives the same values as the
// file that spells it out; every schema key has a value and an origin.
TEST(Scenario, DefaultScenarioIsTheDefaultFile) {
  const Scenario file = load_scenario_file(kDefaultFile);
  const Scenario empty = default_scenario();
  EXPECT_EQ(empty.source, "<default>");
  EXPECT_EQ(empty.values, file.values);
  EXPECT_EQ(empty.values.size(), empty.origin.size());
  EXPECT_EQ(empty.origin.at("cluster.gpus"), "default");
}

// `values` is complete and canonical: building from it again reproduces every value.
TEST(Scenario, ValuesRoundTrip) {
  const Scenario s = load_scenario_file(kDefaultFile, {"parallel.tp=4", "model.experts=0"});
  const Scenario again = build_scenario(s.values, "again");
  EXPECT_EQ(again.values, s.values);
  EXPECT_EQ(again.parallel.dp, 384);
}

// Each model preset survives the trip through the flat values into a ModelConfig unchanged, and
// each cluster preset into a ClusterSpec with its GPU preset (system none keeps the model's
// parallel_block and window as the preset has them).
TEST(Scenario, PresetsRoundTrip) {
  for (const std::string& name : preset_names(PresetKind::kModel)) {
    const Scenario s =
        load_scenario_string("", "t", {"model.preset=" + name, "optimizations.system=none"});
    const model::ModelConfig p = *model_preset(name);
    const model::ModelConfig& m = s.model;
    EXPECT_EQ(m.name, p.name);
    EXPECT_EQ(m.layers, p.layers) << name;
    EXPECT_EQ(m.hidden, p.hidden) << name;
    EXPECT_EQ(m.heads, p.heads) << name;
    EXPECT_EQ(m.kv_heads, p.kv_heads) << name;
    EXPECT_EQ(m.ffn_hidden, p.ffn_hidden) << name;
    EXPECT_EQ(m.vocab, p.vocab) << name;
    EXPECT_EQ(m.seq_len, p.seq_len) << name;
    EXPECT_EQ(m.mlp, p.mlp) << name;
    EXPECT_EQ(m.norm, p.norm) << name;
    EXPECT_EQ(m.position, p.position) << name;
    EXPECT_EQ(m.bias, p.bias) << name;
    EXPECT_EQ(m.tied_embeddings, p.tied_embeddings) << name;
    EXPECT_EQ(m.parallel_block, p.parallel_block) << name;
    EXPECT_EQ(m.attention_window, p.attention_window) << name;
    EXPECT_EQ(m.experts, p.experts) << name;
    EXPECT_EQ(s.origin.at("model.layers"), "preset " + name);
  }
  for (const std::string& name : preset_names(PresetKind::kCluster)) {
    const Scenario s = load_scenario_string("", "t", {"cluster.preset=" + name});
    const ClusterPreset p = *cluster_preset(name);
    const topo::ClusterSpec& c = s.cluster;
    EXPECT_EQ(c.name, name);
    EXPECT_EQ(c.gpu.name, p.gpu) << name;
    EXPECT_DOUBLE_EQ(c.gpu.peak_dense_16bit_flops, gpu_preset(p.gpu)->peak_dense_16bit_flops);
    EXPECT_EQ(c.gpus, 12288) << name;
    EXPECT_EQ(c.gpus_per_node, p.cluster.gpus_per_node) << name;
    EXPECT_EQ(c.nics_per_node, p.cluster.nics_per_node) << name;
    EXPECT_DOUBLE_EQ(c.nic_Gbps, p.cluster.nic_Gbps) << name;
    EXPECT_EQ(c.fabric.tiers, p.cluster.fabric.tiers) << name;
    EXPECT_EQ(c.fabric.switch_radix, p.cluster.fabric.switch_radix) << name;
    EXPECT_DOUBLE_EQ(c.fabric.switch_port_Gbps, p.cluster.fabric.switch_port_Gbps) << name;
    EXPECT_EQ(c.fabric.port_split, p.cluster.fabric.port_split) << name;
    EXPECT_EQ(c.fabric.oversubscription, p.cluster.fabric.oversubscription) << name;
    EXPECT_EQ(c.fabric.pod_gpus, p.cluster.fabric.pod_gpus) << name;
    EXPECT_EQ(c.fabric.pods, p.cluster.fabric.pods) << name;
    EXPECT_DOUBLE_EQ(c.fabric.above_pod_oversubscription,
                     p.cluster.fabric.above_pod_oversubscription)
        << name;
    EXPECT_EQ(c.fabric.rail_optimized, p.cluster.fabric.rail_optimized) << name;
    EXPECT_EQ(c.max_gpus(), p.cluster.max_gpus()) << name;
  }
}

// Precedence: schema default < preset < system group < YAML < --set. The preset gives hidden,
// the system gives pp_overlap, the YAML overrides a preset key (layers) and a system lever
// (tp_overlap), and --set overrides the YAML's layers.
TEST(Scenario, Precedence) {
  const std::string yaml =
      "model:\n"
      "  preset: megascale-175b\n"
      "  layers: 48\n"
      "optimizations:\n"
      "  system: megascale\n"
      "  tp_overlap: false\n";
  const Scenario yaml_only = load_scenario_string(yaml, "p.yaml");
  EXPECT_EQ(yaml_only.model.layers, 48);
  EXPECT_EQ(yaml_only.origin.at("model.layers"), "p.yaml:3");

  const Scenario s = load_scenario_string(yaml, "p.yaml", {"model.layers=24", "parallel.cp=2"});
  EXPECT_EQ(s.model.layers, 24);
  EXPECT_EQ(s.origin.at("model.layers"), "--set");
  EXPECT_EQ(s.model.hidden, 12288);
  EXPECT_EQ(s.origin.at("model.hidden"), "preset megascale-175b");
  EXPECT_FALSE(s.opt.tp_overlap);
  EXPECT_EQ(s.origin.at("optimizations.tp_overlap"), "p.yaml:6");
  EXPECT_TRUE(s.opt.pp_overlap);
  EXPECT_EQ(s.origin.at("optimizations.pp_overlap"), "framework megascale-2024");
  EXPECT_EQ(s.origin.at("simulation.seed"), "default");
  EXPECT_EQ(s.parallel.dp, 96);  // 12288 / (8 · 8 · 2)

  // A later --set of the same key wins; keys may also be written dotted at the top level.
  const Scenario twice =
      load_scenario_string("parallel.tp: 2\n", "d.yaml", {"parallel.tp=4", "parallel.tp=16"});
  EXPECT_EQ(twice.parallel.tp, 16);
}

// Each system group sets the levers as documented; the default `megascale` and explicit levers
// win over the group.
TEST(Scenario, SystemGroups) {
  const Scenario megatron = load_scenario_string("", "t", {"optimizations.system=megatron"});
  EXPECT_FALSE(megatron.opt.tp_overlap || megatron.opt.pp_overlap || megatron.opt.dp_overlap ||
               megatron.opt.efficient_operators || megatron.opt.async_data_pipeline ||
               megatron.opt.lamb || megatron.opt.sliding_window || megatron.opt.parallel_block);
  EXPECT_EQ(megatron.training.optimizer, plan::Optimizer::kAdam);
  EXPECT_FALSE(megatron.model.parallel_block);

  const Scenario nemo = load_scenario_string("", "t", {"optimizations.system=nemo"});
  EXPECT_TRUE(nemo.opt.tp_overlap && nemo.opt.pp_overlap && nemo.opt.dp_overlap &&
              nemo.opt.efficient_operators && nemo.opt.async_data_pipeline);
  EXPECT_FALSE(nemo.opt.lamb || nemo.opt.sliding_window || nemo.opt.parallel_block);

  const Scenario ds = load_scenario_string("", "t", {"optimizations.system=deepspeed"});
  EXPECT_TRUE(ds.opt.dp_overlap);
  EXPECT_FALSE(ds.opt.tp_overlap || ds.opt.pp_overlap || ds.opt.efficient_operators ||
               ds.opt.lamb || ds.opt.parallel_block);

  const Scenario lever = load_scenario_string(
      "", "t", {"optimizations.system=megatron", "optimizations.dp_overlap=on"});
  EXPECT_TRUE(lever.opt.dp_overlap);
  EXPECT_FALSE(lever.opt.tp_overlap);
}

// LAMB is a lever and an optimizer: an explicit adam under the megascale group turns the lever
// off; an explicit lamb lever with an explicit adam optimizer is a conflict naming both.
TEST(Scenario, OptimizerAndLamb) {
  const Scenario adam = load_scenario_string("training:\n  optimizer: adam\n", "t.yaml");
  EXPECT_EQ(adam.training.optimizer, plan::Optimizer::kAdam);
  EXPECT_FALSE(adam.opt.lamb);
  EXPECT_EQ(adam.origin.at("optimizations.lamb"), "derived");

  const Scenario lamb =
      load_scenario_string("", "t", {"optimizations.system=megatron", "training.optimizer=lamb"});
  EXPECT_TRUE(lamb.opt.lamb);

  const Error e = load_error(
      "optimizations:\n"
      "  lamb: true\n"
      "training:\n"
      "  optimizer: adam\n");
  EXPECT_EQ(e.kind(), ErrorKind::kInput);
  EXPECT_EQ(e.where().field, "training.optimizer");
  EXPECT_EQ(e.where().line, 4);
  EXPECT_TRUE(contains(e.message(), "optimizations.lamb")) << e.what();
  EXPECT_TRUE(contains(e.message(), "t.yaml:2")) << e.what();
}

// Sliding-window attention needs a window; the window is used only with the lever on; the
// parallel-block lever reaches the model.
TEST(Scenario, SlidingWindowAndParallelBlock) {
  const Error e = load_error("optimizations:\n  sliding_window: true\n");
  EXPECT_EQ(e.kind(), ErrorKind::kInput);
  EXPECT_EQ(e.where().field, "optimizations.sliding_window");
  EXPECT_EQ(e.where().line, 2);
  EXPECT_TRUE(contains(e.message(), "model.attention_window")) << e.what();

  const std::string yaml = "model:\n  attention_window: 4096\n";
  const Scenario on = load_scenario_string(yaml, "t", {"optimizations.sliding_window=true"});
  EXPECT_EQ(on.model.attention_window, 4096);
  EXPECT_TRUE(on.opt.sliding_window);
  const Scenario off = load_scenario_string(yaml, "t");
  EXPECT_EQ(off.model.attention_window, 0);
  EXPECT_EQ(off.values.at("model.attention_window"), "4096");

  const Scenario block = load_scenario_string(
      "", "t", {"optimizations.system=megatron", "optimizations.parallel_block=true"});
  EXPECT_TRUE(block.model.parallel_block);
}

// A model given by its shape alone: the default preset gives way, kv_heads 0 means MHA and the
// GeLU MLP is 4h = 8,192. A SwiGLU model has no such convention and must give its MLP size.
TEST(Scenario, CustomModel) {
  const std::string yaml =
      "model:\n"
      "  layers: 24\n"
      "  hidden: 2048\n"
      "  heads: 16\n"
      "  vocab: 50304\n"
      "  seq_len: 4096\n";
  const Scenario s = load_scenario_string(yaml, "t.yaml");
  EXPECT_EQ(s.model.name, "custom");
  EXPECT_EQ(s.values.at("model.preset"), "none");
  EXPECT_EQ(s.model.kv_heads, 16);
  EXPECT_EQ(s.model.ffn_hidden, 8192);
  EXPECT_EQ(s.origin.at("model.ffn_hidden"), "derived");
  EXPECT_TRUE(has_note(s, "model.ffn_hidden = 8192 (4 x model.hidden)"));

  const Error swiglu = load_error(yaml + "  mlp: swiglu\n");
  EXPECT_EQ(swiglu.kind(), ErrorKind::kInput);
  EXPECT_EQ(swiglu.where().field, "model.ffn_hidden");
}

// Model sanity: a shape without vocab names model.preset (no preset, missing keys); the hidden
// size must split into heads and heads into KV groups.
TEST(Scenario, ModelSanity) {
  const Error missing = load_error("model:\n  layers: 24\n  hidden: 2048\n  heads: 16\n");
  EXPECT_EQ(missing.kind(), ErrorKind::kInput);
  EXPECT_EQ(missing.where().field, "model.preset");
  EXPECT_TRUE(contains(missing.message(), "model.vocab")) << missing.what();
  EXPECT_TRUE(contains(missing.message(), "model.seq_len")) << missing.what();

  const Error none = load_error("model:\n  preset: none\n");
  EXPECT_EQ(none.kind(), ErrorKind::kInput);
  EXPECT_EQ(none.where().field, "model.preset");
  EXPECT_EQ(none.where().line, 2);

  const Error split = load_error("model:\n  preset: megascale-175b\n  heads: 100\n");
  EXPECT_EQ(split.kind(), ErrorKind::kInput);
  EXPECT_EQ(split.where().field, "model.heads");
  EXPECT_EQ(split.where().line, 3);

  const Error groups = load_error("model:\n  preset: llama3-8b\n  kv_heads: 5\n");
  EXPECT_EQ(groups.kind(), ErrorKind::kInput);
  EXPECT_EQ(groups.where().field, "model.kv_heads");
}

// Unknown keys are errors with the file, 1-based line, the key and a suggestion, at the top level
// and inside a section.
TEST(Scenario, UnknownKeys) {
  const Error top = load_error("model:\n  preset: megascale-175b\npipline_parallel: 8\n");
  EXPECT_EQ(top.kind(), ErrorKind::kInput);
  EXPECT_EQ(top.where().file, "t.yaml");
  EXPECT_EQ(top.where().line, 3);
  EXPECT_EQ(top.where().field, "pipline_parallel");
  EXPECT_EQ(top.hint(), "did you mean `parallel.pp`?");
  EXPECT_TRUE(contains(top.what(), "t.yaml:3")) << top.what();

  const Error nested = load_error("parallel: {pipline: 8}\n");
  EXPECT_EQ(nested.kind(), ErrorKind::kInput);
  EXPECT_EQ(nested.where().line, 1);
  EXPECT_EQ(nested.where().field, "parallel.pipline");
  EXPECT_EQ(nested.hint(), "did you mean `parallel.pp`?");

  const Error megatron = load_error("parallel:\n  tp: 8\n  tensor_model_parallel_size: 8\n");
  EXPECT_EQ(megatron.where().line, 3);
  EXPECT_EQ(megatron.hint(), "did you mean `parallel.tp`?");

  const Error network = load_error("network:\n  routing:\n    hash_algo: crc32\n");
  EXPECT_EQ(network.kind(), ErrorKind::kInput);
  EXPECT_EQ(network.where().line, 3);
  EXPECT_EQ(network.where().field, "network.routing.hash_algo");
  EXPECT_EQ(network.hint(), "did you mean `network.routing.hash`?");
}

// network.routing.* fill the topology's RoutingConfig; the defaults are NCCL's one QP per
// connection, CRC32 ECMP with a seed per switch.
TEST(Scenario, RoutingKeys) {
  const Scenario d = default_scenario();
  EXPECT_EQ(d.routing.mode, topo::RoutingMode::kEcmp);
  EXPECT_EQ(d.routing.hash, topo::HashKind::kCrc32);
  EXPECT_EQ(d.routing.seed_scope, topo::SeedScope::kPerSwitch);
  EXPECT_EQ(d.routing.seed, 0u);
  EXPECT_EQ(d.routing.qps_per_connection, 1);

  const Scenario s = load_scenario_string(
      "network:\n  routing:\n    mode: least-loaded\n    hash: toeplitz\n"
      "    qps_per_connection: 16\n    seed: 4294967295\n",
      "t.yaml", {"network.routing.seed_scope=global"});
  EXPECT_EQ(s.routing.mode, topo::RoutingMode::kLeastLoaded);
  EXPECT_EQ(s.routing.hash, topo::HashKind::kToeplitz);
  EXPECT_EQ(s.routing.seed_scope, topo::SeedScope::kGlobal);
  EXPECT_EQ(s.routing.seed, 4294967295u);
  EXPECT_EQ(s.routing.qps_per_connection, 16);
  EXPECT_EQ(s.origin.at("network.routing.hash"), "t.yaml:4");

  const Error bad = load_error("network:\n  routing:\n    hash: md5\n");
  EXPECT_EQ(bad.where().line, 3);
  EXPECT_TRUE(contains(bad.what(), "crc32|xor-fold|toeplitz")) << bad.what();
  const Error zero = load_error("network:\n  routing:\n    qps_per_connection: 0\n");
  EXPECT_EQ(zero.where().field, "network.routing.qps_per_connection");
}

// The Meta preset's racks hold two servers and its upper tiers are chassis switches.
TEST(Scenario, ClusterFabricShapeKeys) {
  const Scenario meta = load_scenario_string("", "t", {"cluster.preset=meta-h100-roce",
                                                        "cluster.gpus=24576"});
  EXPECT_EQ(meta.cluster.fabric.servers_per_tor, 2);
  EXPECT_EQ(meta.cluster.fabric.spine_radix, 576);
  const Scenario custom = load_scenario_string(
      "", "t", {"cluster.fabric.servers_per_tor=32", "cluster.fabric.spine_radix=128"});
  EXPECT_EQ(custom.cluster.fabric.servers_per_tor, 32);
  EXPECT_EQ(custom.cluster.fabric.spine_radix, 128);
}

// Wrong types name the file, line, key and the expected type: a word, a boolean, zero or a
// negative number for a count; a list or a mapping where a scalar goes; a scalar for a section;
// a value missing; a key given twice.
TEST(Scenario, WrongTypes) {
  for (const char* value : {"eight", "true", "0", "-4", "[8, 8]", "{a: 1}"}) {
    const Error e = load_error(std::string("model:\n  preset: megascale-175b\nparallel:\n  tp: ") +
                               value + "\n");
    EXPECT_EQ(e.kind(), ErrorKind::kInput) << value;
    EXPECT_EQ(e.where().file, "t.yaml") << value;
    EXPECT_EQ(e.where().line, 4) << value;
    EXPECT_EQ(e.where().field, "parallel.tp") << value;
    EXPECT_TRUE(contains(e.message(), "int")) << e.what();
  }
  EXPECT_TRUE(contains(load_error("parallel:\n  tp: [8]\n").message(), "list"));
  EXPECT_TRUE(contains(load_error("parallel:\n  tp: {x: 8}\n").message(), "mapping"));

  const Error section = load_error("parallel: 8\n");
  EXPECT_EQ(section.kind(), ErrorKind::kInput);
  EXPECT_EQ(section.where().field, "parallel");
  EXPECT_TRUE(contains(section.message(), "section")) << section.what();

  const Error empty = load_error("parallel:\n  tp:\n");
  EXPECT_EQ(empty.kind(), ErrorKind::kInput);
  EXPECT_EQ(empty.where().line, 2);

  const Error zero = load_error("parallel:\n  zero: 4\n");
  EXPECT_EQ(zero.kind(), ErrorKind::kInput);
  EXPECT_EQ(zero.where().field, "parallel.zero");

  const Error sp = load_error("parallel:\n  sp: maybe\n");
  EXPECT_EQ(sp.where().field, "parallel.sp");
  EXPECT_TRUE(contains(sp.message(), "boolean")) << sp.what();

  const Error twice = load_error("parallel:\n  tp: 8\nparallel.tp: 4\n");
  EXPECT_EQ(twice.kind(), ErrorKind::kInput);
  EXPECT_EQ(twice.where().line, 3);
  EXPECT_EQ(twice.hint(), "first given at t.yaml:2");

  const Error syntax = load_error("parallel:\n  tp: 8\n   pp: [\n");
  EXPECT_EQ(syntax.kind(), ErrorKind::kInput);
  EXPECT_GT(syntax.where().line, 0);

  const Error root = load_error("- 1\n- 2\n");
  EXPECT_EQ(root.kind(), ErrorKind::kInput);
}

// --set follows the same schema with file "--set"; a --set without `=` is an input error.
TEST(Scenario, SetErrors) {
  const Error no_eq = load_error("", {"parallel.tp"});
  EXPECT_EQ(no_eq.kind(), ErrorKind::kInput);
  EXPECT_EQ(no_eq.where().file, "--set");

  const Error unknown = load_error("", {"parallel.pipline=8"});
  EXPECT_EQ(unknown.kind(), ErrorKind::kInput);
  EXPECT_EQ(unknown.where().file, "--set");
  EXPECT_EQ(unknown.where().field, "parallel.pipline");
  EXPECT_EQ(unknown.hint(), "did you mean `parallel.pp`?");

  const Error type = load_error("", {"parallel.tp=eight"});
  EXPECT_EQ(type.kind(), ErrorKind::kInput);
  EXPECT_EQ(type.where().file, "--set");
  EXPECT_EQ(type.where().field, "parallel.tp");

  const Error section = load_error("", {"parallel=8"});
  EXPECT_EQ(section.kind(), ErrorKind::kInput);
  EXPECT_EQ(section.where().field, "parallel");

  const Scenario spaced = load_scenario_string("", "t", {" parallel.pp = 4 "});
  EXPECT_EQ(spaced.parallel.pp, 4);
}

// Preset names are checked with suggestions among the presets; a cluster needs a known GPU.
TEST(Scenario, UnknownPresets) {
  const Error model = load_error("model:\n  preset: megascale-175\n");
  EXPECT_EQ(model.kind(), ErrorKind::kInput);
  EXPECT_EQ(model.where().field, "model.preset");
  EXPECT_EQ(model.hint(), "did you mean `megascale-175b`?");

  const Error cluster = load_error("cluster:\n  preset: selene\n");
  EXPECT_EQ(cluster.kind(), ErrorKind::kInput);
  EXPECT_EQ(cluster.where().field, "cluster.preset");
  EXPECT_EQ(cluster.hint(), "did you mean `selene-a100`?");

  const Error gpu = load_error("cluster:\n  gpu: h100\n");
  EXPECT_EQ(gpu.kind(), ErrorKind::kInput);
  EXPECT_EQ(gpu.where().field, "cluster.gpu");
  EXPECT_EQ(gpu.hint().rfind("did you mean `h100-sxm`? ", 0), 0u) << gpu.hint();
  // A GPU no preset holds is described on its architecture's preset: the hint says how, and
  // a name whose digits run on into a preset's is another product, not that preset.
  EXPECT_NE(gpu.hint().find("cluster.gpu_spec.*"), std::string::npos) << gpu.hint();
  const Error h20 = load_error("cluster:\n  gpu: h20\n");
  EXPECT_EQ(h20.where().field, "cluster.gpu");
  EXPECT_EQ(h20.hint().find("h200-sxm"), std::string::npos) << h20.hint();
  EXPECT_NE(h20.hint().find("cluster.gpu_spec.*"), std::string::npos) << h20.hint();
}

// A GPU without a cluster brings its usual cluster; the explicit GPU stays.
TEST(Scenario, GpuPicksItsCluster) {
  const Scenario h100 = load_scenario_string("cluster:\n  gpu: h100-sxm\n", "t");
  EXPECT_EQ(h100.cluster.name, "dgx-h100-superpod");
  EXPECT_DOUBLE_EQ(h100.cluster.nic_Gbps, 400);
  EXPECT_EQ(h100.origin.at("cluster.preset"), "derived");

  const Scenario a800 = load_scenario_string("cluster:\n  gpu: a800\n", "t");
  EXPECT_EQ(a800.cluster.name, "megascale-ampere");
  EXPECT_EQ(a800.cluster.gpu.name, "a800");

  const Error fp8 = load_error("training:\n  precision: fp8\n");
  EXPECT_EQ(fp8.kind(), ErrorKind::kInfeasible);
  EXPECT_EQ(fp8.where().field, "training.precision");
  EXPECT_EQ(load_scenario_string("training:\n  precision: fp8\ncluster:\n  gpu: h100-sxm\n", "t")
                .training.precision,
            Precision::kFp8);
}

// GPU count and DP: a numeric dp without a GPU count gives 8·8·4·1 = 256 GPUs; with a count that
// disagrees (8·8·190·1 = 12,160 ≠ 12,288) it is infeasible; auto needs a count that splits into
// replicas of tp·pp·cp GPUs, and a count at all.
TEST(Scenario, GpuCountAndDp) {
  const Scenario derived = load_scenario_string("parallel:\n  dp: 4\n", "t.yaml");
  EXPECT_EQ(derived.cluster.gpus, 256);
  EXPECT_EQ(derived.origin.at("cluster.gpus"), "derived");
  EXPECT_TRUE(has_note(derived, "cluster.gpus = 256 (tp 8 · pp 8 · dp 4 · cp 1)"));

  const Error mismatch = load_error("cluster:\n  gpus: 12288\nparallel:\n  dp: 190\n");
  EXPECT_EQ(mismatch.kind(), ErrorKind::kInfeasible);
  EXPECT_EQ(mismatch.where().field, "cluster.gpus");
  EXPECT_EQ(mismatch.where().line, 2);
  EXPECT_EQ(mismatch.message(), "12288 GPUs is not TP×PP×DP×CP = 8×8×190×1 = 12160");

  const Scenario zero = load_scenario_string("cluster:\n  gpus: 0\nparallel:\n  dp: 2\n", "t");
  EXPECT_EQ(zero.cluster.gpus, 128);

  const Error split = load_error("cluster:\n  gpus: 1000\n");
  EXPECT_EQ(split.kind(), ErrorKind::kInfeasible);
  EXPECT_EQ(split.where().field, "parallel.dp");
  EXPECT_TRUE(contains(split.message(), "1000 GPUs")) << split.what();
  EXPECT_TRUE(contains(split.message(), "= 64")) << split.what();

  const Error huge = load_error("", {"parallel.dp=100000", "parallel.pp=100000"});
  EXPECT_EQ(huge.kind(), ErrorKind::kInput);

  const Error unknown = load_error("cluster:\n  gpus: 0\n");
  EXPECT_EQ(unknown.kind(), ErrorKind::kInput);
  EXPECT_EQ(unknown.where().field, "parallel.dp");
  EXPECT_EQ(unknown.hint(), "set cluster.gpus or parallel.dp");
}

// A fabric too small for the job: Selene's radix-40 switches in 2 tiers hold 2·20² = 800 NIC
// ports = 100 servers = 800 GPUs, fewer than 1,024.
TEST(Scenario, FabricTooSmall) {
  const Error e = load_error(
      "cluster:\n"
      "  preset: selene-a100\n"
      "  gpus: 1024\n"
      "  fabric:\n"
      "    tiers: 2\n");
  EXPECT_EQ(e.kind(), ErrorKind::kInfeasible);
  EXPECT_EQ(e.where().field, "cluster.gpus");
  EXPECT_EQ(e.where().line, 3);
  EXPECT_TRUE(contains(e.message(),
                       "the fabric of cluster `selene-a100` (2 tiers of radix-40 switches) holds "
                       "at most 800 GPUs"))
      << e.what();
  EXPECT_NO_THROW(load_scenario_string(
      "", "t", {"cluster.preset=selene-a100", "cluster.fabric.tiers=2", "cluster.gpus=768"}));
}

// Oversubscription is one ratio for every tier with uplinks (2 of 3).
TEST(Scenario, Oversubscription) {
  const Scenario s = load_scenario_string("", "t", {"cluster.fabric.oversubscription=3"});
  EXPECT_EQ(s.cluster.fabric.oversubscription, (std::vector<double>{3.0, 3.0}));
  EXPECT_EQ(s.values.at("cluster.fabric.oversubscription"), "3");
}

// Schedules: auto follows vpp; interleaved needs vpp > 1; a flat schedule or a single stage
// makes the default vpp give way, but an explicit vpp > 1 with 1f1b is a contradiction.
TEST(Scenario, Schedules) {
  const Scenario flat = load_scenario_string("", "t", {"parallel.vpp=1"});
  EXPECT_EQ(flat.parallel.schedule, plan::Schedule::k1F1B);

  const Error e = load_error("parallel:\n  vpp: 1\n  schedule: interleaved\n");
  EXPECT_EQ(e.kind(), ErrorKind::kInput);
  EXPECT_EQ(e.where().field, "parallel.schedule");
  EXPECT_EQ(e.where().line, 3);

  const Scenario gpipe = load_scenario_string("", "t", {"parallel.schedule=gpipe"});
  EXPECT_EQ(gpipe.parallel.schedule, plan::Schedule::kGpipe);
  EXPECT_EQ(gpipe.parallel.vpp, 1);

  const Scenario one_stage = load_scenario_string("", "t", {"parallel.pp=1"});
  EXPECT_EQ(one_stage.parallel.vpp, 1);
  EXPECT_EQ(one_stage.parallel.schedule, plan::Schedule::k1F1B);
  EXPECT_EQ(one_stage.parallel.dp, 1536);

  const Error both = load_error("parallel:\n  vpp: 6\n  schedule: 1f1b\n");
  EXPECT_EQ(both.kind(), ErrorKind::kInput);
  EXPECT_EQ(both.where().field, "parallel.vpp");

  // A file's vpp is for its pipeline: --set parallel.pp=1 on a file of vpp 6 (the built-in
  // scenario's) runs one stage without chunks and says so; it ran "PP 1 (vpp 6, interleaved)".
  const std::string file = "parallel:\n  pp: 8\n  vpp: 6\n";
  const Scenario cut = load_scenario_string(file, "t.yaml", {"parallel.pp=1"});
  EXPECT_EQ(cut.parallel.vpp, 1);
  EXPECT_EQ(cut.parallel.schedule, plan::Schedule::k1F1B);
  bool said = false;
  for (const std::string& n : cut.notes) {
    said = said || n == "parallel.vpp = 1 (one pipeline stage has nothing to interleave; not 6 "
                        "as t.yaml says)";
  }
  EXPECT_TRUE(said);
  // A vpp the command line gives itself is kept as asked.
  EXPECT_EQ(load_scenario_string(file, "t.yaml", {"parallel.pp=1", "parallel.vpp=2"}).parallel.vpp,
            2);
}

// Llama 3's 16M-token batch (2^24 tokens) is 2,048 sequences of 8,192 tokens; a token count that
// is not whole sequences, or that disagrees with an explicit batch, is an input error.
TEST(Scenario, GlobalBatchTokens) {
  const Scenario s = load_scenario_string(
      "model:\n  preset: llama3-405b\ntraining:\n  global_batch_tokens: 16M\n", "t");
  EXPECT_EQ(s.training.global_batch, 2048);
  EXPECT_TRUE(has_note(s, "training.global_batch = 2048 (16M tokens / 8192)"));

  const Error odd =
      load_error("model:\n  preset: llama3-405b\ntraining:\n  global_batch_tokens: 4K\n");
  EXPECT_EQ(odd.kind(), ErrorKind::kInput);
  EXPECT_EQ(odd.where().field, "training.global_batch_tokens");
  EXPECT_EQ(odd.where().line, 4);

  const Error clash =
      load_error("", {"training.global_batch_tokens=16M", "training.global_batch=5"});
  EXPECT_EQ(clash.kind(), ErrorKind::kInput);
  EXPECT_EQ(clash.where().field, "training.global_batch");
  // Both in the file, disagreeing: the file's error.
  const Error file_clash = load_error(
      "model:\n  preset: llama3-405b\ntraining:\n  global_batch_tokens: 16M\n  "
      "global_batch: 5\n");
  EXPECT_EQ(file_clash.where().field, "training.global_batch");
  EXPECT_EQ(file_clash.where().line, 5);
  // The command line replaces the file's other spelling of the batch, and says so ("give only
  // one of the two" could not be followed from the command line).
  const std::string tokens_file =
      "model:\n  preset: llama3-405b\ntraining:\n  global_batch_tokens: 16M\n";
  const Scenario by_set = load_scenario_string(tokens_file, "t.yaml", {"training.global_batch=64"});
  EXPECT_EQ(by_set.training.global_batch, 64);
  EXPECT_EQ(by_set.values.at("training.global_batch_tokens"), "0");
  EXPECT_TRUE(has_note(by_set, "training.global_batch 64 (--set) replaces "
                               "training.global_batch_tokens 16M (t.yaml)"));
  const std::string batch_file = "model:\n  preset: llama3-405b\ntraining:\n  global_batch: 64\n";
  const Scenario by_tokens =
      load_scenario_string(batch_file, "t.yaml", {"training.global_batch_tokens=8M"});
  EXPECT_EQ(by_tokens.training.global_batch, 1024);
  EXPECT_TRUE(has_note(by_tokens, "training.global_batch_tokens 8M (--set) replaces "
                                  "training.global_batch 64 (t.yaml)"));
}

// build_scenario takes flattened values (a published-runs.csv row) with the same rules; blank
// cells are "not given"; an unknown column is an input error naming the row.
TEST(Scenario, BuildFromFlatValues) {
  const std::map<std::string, std::string> row = {{"cluster.gpu", "a100-80gb"},
                                                  {"cluster.preset", "selene-a100"},
                                                  {"cluster.gpus", "32"},
                                                  {"model.layers", "24"},
                                                  {"model.hidden", "2304"},
                                                  {"model.heads", "24"},
                                                  {"model.kv_heads", "24"},
                                                  {"model.ffn_hidden", "9216"},
                                                  {"model.seq_len", "2048"},
                                                  {"model.vocab", "51200"},
                                                  {"parallel.tp", "1"},
                                                  {"parallel.pp", "1"},
                                                  {"parallel.dp", "32"},
                                                  {"parallel.vpp", ""},
                                                  {"training.global_batch", "512"},
                                                  {"training.precision", "fp16"},
                                                  {"training.recompute", "full"},
                                                  {"optimizations.system", "megatron"}};
  const Scenario s = build_scenario(row, "published-runs.csv:2");
  EXPECT_EQ(s.source, "published-runs.csv:2");
  EXPECT_EQ(s.model.name, "custom");
  EXPECT_EQ(s.model.layers, 24);
  EXPECT_EQ(s.cluster.name, "selene-a100");
  EXPECT_EQ(s.cluster.gpus, 32);
  EXPECT_EQ(s.parallel.dp, 32);
  EXPECT_EQ(s.parallel.vpp, 1);
  EXPECT_EQ(s.parallel.schedule, plan::Schedule::k1F1B);
  EXPECT_EQ(s.training.precision, Precision::kFp16);
  EXPECT_EQ(s.training.optimizer, plan::Optimizer::kAdam);
  EXPECT_EQ(s.origin.at("model.layers"), "published-runs.csv:2");

  auto bad = row;
  bad["parallel.pipeline"] = "2";
  const Error e = capture([&] { build_scenario(bad, "published-runs.csv:2"); });
  EXPECT_EQ(e.kind(), ErrorKind::kInput);
  EXPECT_EQ(e.where().file, "published-runs.csv:2");
  EXPECT_EQ(e.where().field, "parallel.pipeline");
  EXPECT_EQ(e.hint(), "did you mean `parallel.pp`?");
}

// A training.recompute_layers that changes nothing is said: one of at least a whole model chunk
// (32 layers on one stage: Megatron's block method then recomputes every layer, as 0 does), and
// one under a recompute other than full.
TEST(Scenario, RecomputeLayersThatDoNothingAreNoted) {
  const auto notes_with = [](const Scenario& s, const std::string& part) {
    int n = 0;
    for (const std::string& note : s.notes) n += note.find(part) != std::string::npos;
    return n;
  };
  const std::string file = kSourceDir + "/scenarios/examples/llama3-8b-64xh100.yaml";
  const Scenario all = load_scenario_file(file, {"training.recompute=full", "training.recompute_layers=1000"});
  EXPECT_EQ(notes_with(all, "training.recompute_layers = 1000 covers every layer of a model chunk (at most 32)"), 1);
  const Scenario some = load_scenario_file(file, {"training.recompute=full", "training.recompute_layers=31"});
  EXPECT_EQ(notes_with(some, "training.recompute_layers"), 0);
  const Scenario pp = load_scenario_file(
      file, {"training.recompute=full", "training.recompute_layers=8", "parallel.pp=4", "parallel.vpp=2"});
  EXPECT_EQ(notes_with(pp, "covers every layer of a model chunk (at most 4)"), 1);
  const Scenario sel = load_scenario_file(file, {"training.recompute=selective", "training.recompute_layers=4"});
  EXPECT_EQ(notes_with(sel, "training.recompute_layers = 4 is for full recompute and does nothing under selective"), 1);
}

// Every shipped scenario loads; a missing file is an input error naming it.
TEST(Scenario, ShippedFilesLoad) {
  int loaded = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(kSourceDir + "/scenarios/examples")) {
    if (entry.path().extension() != ".yaml") continue;
    EXPECT_NO_THROW(load_scenario_file(entry.path().string())) << entry.path();
    ++loaded;
  }
  EXPECT_GE(loaded, 2);

  const Scenario llama =
      load_scenario_file(kSourceDir + "/scenarios/examples/llama3-8b-64xh100.yaml");
  EXPECT_EQ(llama.parallel.dp, 32);
  EXPECT_EQ(llama.training.global_batch, 512);

  // TorchTitan's Llama 2 70B with recompute auto takes TorchTitan's own per-op checkpointing, as
  // the published run did (Frameworks.AutoRecomputeTriesTheFrameworksSelective derives why).
  const Scenario titan =
      load_scenario_file(kSourceDir + "/scenarios/examples/torchtitan-llama2-70b-64xa100.yaml");
  EXPECT_EQ(titan.training.recompute, model::Recompute::kSelectiveOp);
  EXPECT_EQ(titan.parallel.dp, 64);

  // The mixture-of-experts example: Mixtral's 8 experts, 2 a token, over EP 8 of the 16 DP ranks;
  // vpp auto picks an interleaving that splits 32 layers over 4 stages evenly.
  const Scenario mixtral =
      load_scenario_file(kSourceDir + "/scenarios/examples/mixtral-8x7b-64xh100.yaml");
  EXPECT_EQ(mixtral.model.experts, 8);
  EXPECT_EQ(mixtral.model.top_k, 2);
  EXPECT_EQ(mixtral.parallel.ep, 8);
  EXPECT_EQ(mixtral.parallel.dp, 16);
  EXPECT_EQ(32 % (mixtral.parallel.pp * mixtral.parallel.vpp), 0);

  const Error missing = capture([] { load_scenario_file("no/such/scenario.yaml"); });
  EXPECT_EQ(missing.kind(), ErrorKind::kInput);
  EXPECT_EQ(missing.where().file, "no/such/scenario.yaml");
}

}  // namespace
}  // namespace trainsim::scen
