// Framework presets (scenarios/frameworks.h): dated capability sets, their aliases, what they set
// and that keys a scenario gives win; the least-recompute search; the Llama 3 405B run fits.
#include "scenarios/frameworks.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "scenarios/recompute_search.h"
#include "scenarios/run_config.h"
#include "scenarios/scenario.h"
#include "scenarios/schema.h"
#include "sim/core/error.h"
#include "sim/exec/analytic.h"
#include "sim/model/transformer.h"
#include "sim/plan/memory.h"

namespace trainsim::scen {
namespace {

TEST(Frameworks, SystemNamesAreAliases) {
  EXPECT_EQ(framework_for_system("megatron"), "megatron-lm-2023");
  EXPECT_EQ(framework_for_system("megascale"), "megascale-2024");
  EXPECT_EQ(framework_for_system("nemo"), "nemo-2024");
  EXPECT_EQ(framework_for_system("deepspeed"), "deepspeed-2023");
  EXPECT_EQ(framework_for_system("none"), "none");
  for (const char* s : {"megatron", "megascale", "nemo", "deepspeed", "none"}) {
    EXPECT_NE(find_framework(framework_for_system(s)), nullptr) << s;
  }
}

// Megatron-LM of 2021 had neither SP nor the distributed optimizer; that of 2023 had both but no
// overlap; Megatron-Core shards over DP·CP with TE's cuDNN attention.
TEST(Frameworks, CapabilitiesFollowTheVersion) {
  const Scenario sc21 = load_scenario_string("", "t", {"framework.preset=megatron-lm-2021"});
  EXPECT_FALSE(sc21.parallel.sp);
  EXPECT_EQ(sc21.parallel.zero, 0);
  EXPECT_EQ(sc21.training.recompute, model::Recompute::kFull);
  EXPECT_FALSE(sc21.opt.tp_overlap);
  EXPECT_EQ(sc21.opt.attention_kernel, model::AttentionKernel::kUnfused);

  const Scenario meg = load_scenario_string("", "t", {"optimizations.system=megatron"});
  EXPECT_EQ(meg.framework, "megatron-lm-2023");
  EXPECT_TRUE(meg.parallel.sp);
  EXPECT_EQ(meg.parallel.zero, 1);
  EXPECT_FALSE(meg.parallel.shard_over_cp);
  EXPECT_FALSE(meg.opt.dp_overlap);
  EXPECT_EQ(meg.opt.dp_buckets, plan::BucketRule::kFixed40M);

  const Scenario core = load_scenario_string("", "t", {"framework.preset=megatron-core-2023"});
  EXPECT_TRUE(core.parallel.shard_over_cp);
  EXPECT_TRUE(core.opt.tp_overlap);
  EXPECT_TRUE(core.opt.tp_overlap_decomposed);
  EXPECT_EQ(core.opt.attention_kernel, model::AttentionKernel::kCudnn);

  const Scenario titan = load_scenario_string("", "t", {"framework.preset=torchtitan-2024"});
  EXPECT_EQ(titan.parallel.zero, 2);
  EXPECT_EQ(titan.training.recompute, model::Recompute::kNone);
  EXPECT_EQ(titan.opt.attention_kernel, model::AttentionKernel::kFlash2);

  // Gradient accumulation: autograd's 16-bit add before Megatron-LM fused it into the weight-
  // gradient GEMM (2022-02-13) and in DeepSpeed's engine; FSDP2's fp32 accumulator (Llama 3).
  EXPECT_EQ(sc21.opt.grad_accumulation, plan::GradAccumulation::kAdd16);
  EXPECT_EQ(meg.opt.grad_accumulation, plan::GradAccumulation::kInGemm);
  EXPECT_EQ(core.opt.grad_accumulation, plan::GradAccumulation::kInGemm);
  EXPECT_EQ(titan.opt.grad_accumulation, plan::GradAccumulation::kAddFp32);
  const Scenario ds = load_scenario_string("", "t", {"framework.preset=deepspeed-2023"});
  EXPECT_EQ(ds.opt.grad_accumulation, plan::GradAccumulation::kAdd16);
  for (const FrameworkPreset& p : framework_presets()) {
    if (p.system != "megatron" && p.system != "nemo" && p.system != "megascale") continue;
    const auto it = p.values.find("framework.grad_accumulation");
    ASSERT_NE(it, p.values.end()) << p.name;
    // Every Megatron-LM-based preset dated after the fusion has it.
    EXPECT_EQ(it->second == "in-gemm", p.date >= "2022-02") << p.name;
  }
  const Scenario given = load_scenario_string(
      "", "t", {"framework.preset=megatron-lm-2021", "framework.grad_accumulation=in-gemm"});
  EXPECT_EQ(given.opt.grad_accumulation, plan::GradAccumulation::kInGemm);
}

// Megatron-Bridge's performance scripts (the source of the nemo-2025 tables) reduce gradients in
// bf16 (`cfg.ddp.grad_reduce_in_fp32 = False`); the 2024 recipes kept fp32. With TP filling the
// server and no pipeline, only the distributed optimizer's traffic leaves it: a reduce-scatter
// of the gradients (4 or 2 B per parameter) and an all-gather of the bf16 parameters (2 B), both
// at (dp − 1)/dp, so the NIC bytes per GPU fall by (4 + 2) → (2 + 2): a ratio of exactly 2/3.
TEST(Frameworks, Nemo2025ReducesGradientsInBf16AndFusesTheLoss) {
  const std::vector<std::string> common = {"model.preset=gpt3-6.7b", "cluster.preset=dgx-h100-superpod",
                                           "cluster.gpus=64", "parallel.tp=8", "parallel.pp=1",
                                           "parallel.vpp=1", "training.global_batch=64"};
  auto with_preset = [&](const std::string& preset, const std::string& extra = "") {
    std::vector<std::string> sets = common;
    sets.push_back("framework.preset=" + preset);
    if (!extra.empty()) sets.push_back(extra);
    return load_scenario_string("", "t", sets);
  };
  const Scenario n24 = with_preset("nemo-2024");
  const Scenario n25 = with_preset("nemo-2025");
  EXPECT_EQ(n24.training.grad_reduce, Precision::kFp32);
  EXPECT_EQ(n25.training.grad_reduce, Precision::kBf16);
  EXPECT_EQ(n25.origin.at("training.grad_reduce_dtype"), "framework nemo-2025");
  const Scenario given = with_preset("nemo-2025", "training.grad_reduce_dtype=fp32");
  EXPECT_EQ(given.training.grad_reduce, Precision::kFp32);
  // The same scripts run Transformer Engine's fused cross-entropy (overrides.py); earlier
  // presets run Megatron's unfused one, and the key given wins.
  EXPECT_EQ(n25.opt.cross_entropy, model::CrossEntropyKernel::kTe);
  EXPECT_EQ(n24.opt.cross_entropy, model::CrossEntropyKernel::kUnfused);
  EXPECT_EQ(with_preset("nemo-2025", "framework.cross_entropy=native").opt.cross_entropy,
            model::CrossEntropyKernel::kNative);
  const double b24 = exec::run_analytic(make_run_config(n24)).network.nic_bytes_per_gpu;
  const double b25 = exec::run_analytic(make_run_config(n25)).network.nic_bytes_per_gpu;
  ASSERT_GT(b24, 0);
  EXPECT_NEAR(b25 / b24, 2.0 / 3.0, 1e-9);
}

// LLM Foundry on Composer (its MPT benchmarks): FSDP FULL_SHARD (ZeRO-3), no SP, fp32 gradient
// reduction (Composer's mixed precision DEFAULT); a PURE run reduces in bf16. Under ZeRO-3 with
// no TP or PP every parameter byte leaves the server three times per step, two all-gathers of
// the bf16 parameters (forward, and backward after the forward's reshard) and one
// reduce-scatter of the gradients, each at the same (dp − 1)/dp and the same split across the
// server's NICs, so the NIC bytes per GPU go from 2 + 2 + 4 to 2 + 2 + 2 B per parameter: 3/4.
TEST(Frameworks, LlmFoundryShardsFullyAndReducesInFp32) {
  const std::vector<std::string> common = {
      "model.preset=gpt3-6.7b", "cluster.preset=dgx-h100-superpod", "cluster.gpus=64",
      "parallel.tp=1",          "parallel.pp=1",                     "parallel.vpp=1",
      "training.global_batch=64", "framework.preset=llm-foundry-2023"};
  const Scenario d = load_scenario_string("", "t", common);
  EXPECT_EQ(d.parallel.zero, 3);
  EXPECT_FALSE(d.parallel.sp);
  EXPECT_EQ(d.training.grad_reduce, Precision::kFp32);
  // MPT's attn_impl triton: FlashAttention's Triton kernel, slower on H100 than cuDNN's.
  EXPECT_EQ(d.opt.attention_kernel, model::AttentionKernel::kTriton);
  std::vector<std::string> cudnn = common;
  cudnn.push_back("framework.attention_kernel=cudnn");
  const Scenario c = load_scenario_string("", "t", cudnn);
  EXPECT_GT(exec::run_analytic(make_run_config(d)).iteration_time_s,
            exec::run_analytic(make_run_config(c)).iteration_time_s);
  std::vector<std::string> pure = common;
  pure.push_back("training.grad_reduce_dtype=bf16");
  const Scenario p = load_scenario_string("", "t", pure);
  const double fp32 = exec::run_analytic(make_run_config(d)).network.nic_bytes_per_gpu;
  const double bf16 = exec::run_analytic(make_run_config(p)).network.nic_bytes_per_gpu;
  ASSERT_GT(fp32, 0);
  EXPECT_NEAR(bf16 / fp32, 3.0 / 4.0, 1e-9);
}

// How each version runs RoPE, SwiGLU's activation and GQA's keys and values (framework.rope,
// .activation, .gqa_kv; docs/presets.md): Megatron's fusions became defaults on 2024-01-18
// (de9428a701), so Megatron-Core of 2023-12 runs them as PyTorch ops and NeMo of 2024 fused;
// TorchTitan of April 2024 is eager (compile = false): Meta's complex RoPE, F.silu then the
// product, repeat_kv. A record made before the keys existed is read as it ran then: no RoPE op.
TEST(Frameworks, ElementwiseWorkFollowsTheVersion) {
  const auto load = [](const std::string& fw, std::vector<std::string> more = {}) {
    more.push_back("framework.preset=" + fw);
    return load_scenario_string("", "t", more);
  };
  const Scenario core = load("megatron-core-2023");
  EXPECT_EQ(core.opt.rope, model::RopeKernel::kUnfused);
  EXPECT_TRUE(core.parallel.activation_unfused);
  EXPECT_FALSE(core.parallel.gqa_kv_repeated);
  for (const char* fw :
       {"megatron-core-2024", "nemo-2024", "nemo-2025", "megascale-2024", "torchtitan-2024"}) {
    const Scenario f = load(fw);
    EXPECT_EQ(f.opt.rope, model::RopeKernel::kFused) << fw;
    EXPECT_FALSE(f.parallel.activation_unfused) << fw;
    EXPECT_FALSE(f.parallel.gqa_kv_repeated) << fw;
  }
  // Megatron-Core of mid 2024 is the 2023 version with the fusions on and DP buckets that grow
  // with DP (core_v0.7.0), and what a blank framework of a 2025 report takes.
  const Scenario core24 = load("megatron-core-2024");
  EXPECT_EQ(core24.opt.dp_buckets, plan::BucketRule::kScaledWithDp);
  EXPECT_EQ(core.opt.dp_buckets, plan::BucketRule::kFixed40M);
  EXPECT_EQ(core24.opt.attention_kernel, core.opt.attention_kernel);
  EXPECT_EQ(core24.parallel.zero, 1);
  const Scenario eager = load("torchtitan-2024-04");
  EXPECT_EQ(eager.opt.rope, model::RopeKernel::kComplex);
  EXPECT_TRUE(eager.parallel.activation_unfused);
  EXPECT_TRUE(eager.parallel.gqa_kv_repeated);
  EXPECT_EQ(eager.parallel.zero, 3);
  // FSDP2 (both TorchTitan versions) copies each gather out into the unsharded parameters; the
  // other stacks' parameters are views of the gathered buffer.
  EXPECT_TRUE(eager.opt.fsdp_copy_out);
  EXPECT_TRUE(load("torchtitan-2024").opt.fsdp_copy_out);
  for (const char* fw : {"llm-foundry-2023", "deepspeed-2023", "megatron-core-2023", "nemo-2025"}) {
    EXPECT_FALSE(load(fw).opt.fsdp_copy_out) << fw;
  }
  EXPECT_EQ(values_before_key_existed().at("framework.fsdp_copy_out"), "false");
  // ...and copies each reduce-scatter's gradients in first (FSDP1's flat parameter and
  // Megatron's grad buffer are reduced in place).
  EXPECT_TRUE(eager.opt.fsdp_copy_in);
  EXPECT_TRUE(load("torchtitan-2024").opt.fsdp_copy_in);
  for (const char* fw : {"llm-foundry-2023", "deepspeed-2023", "megatron-core-2023", "nemo-2025"}) {
    EXPECT_FALSE(load(fw).opt.fsdp_copy_in) << fw;
  }
  EXPECT_EQ(values_before_key_existed().at("framework.fsdp_copy_in"), "false");
  // Megatron scales each bucket by 1/DP in a pass of its own before the collective, until
  // average_in_collective (Megatron-Core 2024-06), which NeMo 2's recipes turn on.
  for (const char* fw : {"megatron-lm-2023", "megatron-core-2023", "megatron-core-2024",
                         "nemo-2024", "megascale-2024"}) {
    EXPECT_TRUE(load(fw).opt.grad_scale_pass) << fw;
  }
  for (const char* fw : {"nemo-2025", "torchtitan-2024", "torchtitan-2024-04",
                         "llm-foundry-2023", "deepspeed-2023", "megatron-lm-2021"}) {
    EXPECT_FALSE(load(fw).opt.grad_scale_pass) << fw;
  }
  EXPECT_EQ(values_before_key_existed().at("framework.grad_scale_pass"), "false");
  EXPECT_EQ(find_key("framework.rope")->default_value, "fused");
  EXPECT_EQ(values_before_key_existed().at("framework.rope"), "none");

  // End to end, one GPU, two Llama 3 8B layers, recompute none: the iteration grows by the
  // rotation's forward and backward per layer, at the profile's memory efficiency, no more.
  const std::vector<std::string> one = {
      "model.preset=llama3-8b", "model.layers=2", "cluster.preset=dgx-h100-superpod",
      "cluster.gpus=1", "parallel.tp=1", "parallel.pp=1", "parallel.vpp=1",
      "training.global_batch=1", "training.micro_batch=1", "training.recompute=none",
      "scale.gpu_speed_sigma=0"};
  std::vector<std::string> with_none = one;
  with_none.push_back("framework.rope=none");
  const exec::RunConfig fused = make_run_config(load("nemo-2024", one));
  const double t_fused = exec::run_analytic(fused).iteration_time_s;
  const double t_none = exec::run_analytic(make_run_config(load("nemo-2024", with_none))).iteration_time_s;
  const double rotated = 8192.0 * (4096 + 1024);  // tokens · (q + kv)
  const double per_layer = 2 * (4 * rotated / (fused.cluster.gpu.hbm_Bps *
                                               fused.profile.memory_bw_efficiency) +
                                2 * fused.profile.kernel_overhead_s);
  EXPECT_NEAR(t_fused - t_none, 2 * per_layer, 1e-9 * t_fused);
}

// Keys the scenario gives win over the preset; the attention kernel follows efficient operators
// unless it is given.
TEST(Frameworks, GivenKeysWin) {
  const Scenario s = load_scenario_string(
      "", "t",
      {"framework.preset=nemo-2024", "parallel.zero=0", "optimizations.efficient_operators=false"});
  EXPECT_EQ(s.parallel.zero, 0);
  EXPECT_EQ(s.opt.attention_kernel, model::AttentionKernel::kUnfused);
  EXPECT_EQ(s.origin.at("parallel.sp"), "framework nemo-2024");
  const Scenario k = load_scenario_string(
      "", "t", {"optimizations.system=megatron", "framework.attention_kernel=flash3"});
  EXPECT_EQ(k.opt.attention_kernel, model::AttentionKernel::kFlash3);
  const Scenario e = load_scenario_string(
      "", "t", {"optimizations.system=megatron", "optimizations.efficient_operators=true"});
  EXPECT_EQ(e.opt.attention_kernel, model::AttentionKernel::kFlash2);
}

// What a scenario asks of a framework version that it did not have runs as asked, with a note
// (zero 3 on a Megatron-LM preset was silent): ZeRO-3 before Megatron FSDP, a sharded optimizer
// or selective recompute on SC21's Megatron-LM, context parallelism before Megatron-Core 2023-10.
TEST(Frameworks, WhatAVersionLackedIsNoted) {
  const auto notes_with = [](const Scenario& s, const std::string& part) {
    int n = 0;
    for (const std::string& note : s.notes) n += note.find(part) != std::string::npos;
    return n;
  };
  const Scenario z3 = load_scenario_string(
      "", "t", {"framework.preset=megatron-core-2023", "parallel.zero=3"});
  EXPECT_EQ(z3.parallel.zero, 3);
  EXPECT_EQ(notes_with(z3, "framework.preset megatron-core-2023 (2023-12) had no ZeRO-3"), 1);
  const Scenario sc21 = load_scenario_string(
      "", "t",
      {"framework.preset=megatron-lm-2021", "parallel.zero=1", "training.recompute=selective",
       "parallel.cp=2", "parallel.sp=true"});
  EXPECT_EQ(notes_with(sc21, "had no sharded optimizer"), 1);
  EXPECT_EQ(notes_with(sc21, "had no selective recompute"), 1);
  EXPECT_EQ(notes_with(sc21, "had no context parallelism"), 1);
  EXPECT_EQ(notes_with(sc21, "had no ZeRO-"), 0);  // the sharded-optimizer note says it
  // A model block the version could not build: Llama 3's on the January 2023 code (RoPE
  // 2023-03-31, SwiGLU 2023-04-01, GQA 2023-06-05, RMSNorm 2023-07-31); GPT-3's blocks are fine.
  const Scenario llama = load_scenario_string(
      "", "t", {"framework.preset=megatron-lm-2023", "model.preset=llama3-8b"});
  EXPECT_EQ(notes_with(llama, "megatron-lm-2023 (2023-01) had no rotary positions, a SwiGLU "
                              "MLP, grouped-query attention, RMSNorm"),
            1);
  EXPECT_EQ(notes_with(load_scenario_string("", "t", {"framework.preset=megatron-core-2023",
                                                      "model.preset=llama3-8b"}),
                       "had no"),
            0);
  EXPECT_EQ(notes_with(load_scenario_string("", "t", {"framework.preset=megatron-lm-2023"}),
                       "rotary"),
            0);
  // TorchTitan's selective checkpointing is per op or per layer: Megatron's attention-core mode
  // is noted, naming its own (selective-op), which is not.
  for (const char* fw : {"torchtitan-2024", "torchtitan-2024-04"}) {
    const Scenario sel = load_scenario_string(
        "", "t", {std::string("framework.preset=") + fw, "training.recompute=selective"});
    EXPECT_EQ(notes_with(sel, "had no selective recompute"), 1) << fw;
    EXPECT_EQ(notes_with(sel, "training.recompute selective-op"), 1) << fw;
    const Scenario op = load_scenario_string(
        "", "t", {std::string("framework.preset=") + fw, "training.recompute=selective-op",
                  "parallel.tp=1", "parallel.cp=1"});
    EXPECT_EQ(notes_with(op, "had no"), 0) << fw;
  }
  // What each version had says nothing.
  for (const char* fw : {"deepspeed-2023", "torchtitan-2024", "llm-foundry-2023", "nemo-2025"}) {
    const Scenario ok = load_scenario_string(
        "", "t", {std::string("framework.preset=") + fw, "parallel.zero=3"});
    EXPECT_EQ(notes_with(ok, "had no"), 0) << fw;
  }
  EXPECT_EQ(notes_with(load_scenario_string("", "t", {"framework.preset=megatron-core-2023"}),
                       "had no"),
            0);
}

// Llama 3 405B (Dubey et al. 2024, Table 4 and §3.3.2): TP 8, PP 16, 8K sequences on 80 GB
// H100s, one layer fewer on the first and last stage, FSDP as ZeRO-2, trained without
// activation recompute. The least recompute that fits is none.
TEST(Frameworks, Llama3_405bFitsWithoutRecompute) {
  const Scenario s = load_scenario_string(
      "", "t",
      {"model.preset=llama3-405b", "cluster.preset=meta-h100-roce", "cluster.gpus=8192",
       "parallel.tp=8", "parallel.pp=16", "parallel.vpp=1", "parallel.first_stage_layers=7",
       "parallel.last_stage_layers=7", "training.global_batch=2048", "training.recompute=auto",
       "framework.preset=torchtitan-2024"});
  exec::RunConfig cfg = make_run_config(s);
  std::string chosen;
  cfg = choose_recompute(cfg, &chosen);
  EXPECT_EQ(chosen, "none");
  const plan::Layout L = plan::make_layout(cfg.model, cfg.cluster, cfg.parallel, cfg.training);
  const plan::MemoryUsage u =
      plan::memory_per_gpu(cfg.model, L, cfg.training, cfg.opt.fused_attention(), cfg.cluster.gpu);
  EXPECT_TRUE(u.fits()) << u.peak_bytes / (1 << 30) << " GiB";
  // The example scenario is that run at 16,384 GPUs and fits as it stands, without recompute.
  const Scenario ex = load_scenario_file("scenarios/examples/llama3-405b-16384.yaml");
  const exec::RunConfig ec = make_run_config(ex);
  EXPECT_EQ(ec.training.recompute, model::Recompute::kNone);
  const plan::Layout EL = plan::make_layout(ec.model, ec.cluster, ec.parallel, ec.training);
  EXPECT_EQ(EL.stage_layers.front(), 7);
  EXPECT_EQ(EL.stage_layers.back(), 7);
  EXPECT_TRUE(plan::memory_per_gpu(ec.model, EL, ec.training, ec.opt.fused_attention(),
                                   ec.cluster.gpu)
                  .fits());
  // The same run on the SC21 software (no SP, no sharding, unfused attention) does not fit even
  // with full recompute: 16 bytes of unsharded model state per parameter.
  const Scenario old = load_scenario_string(
      "", "t",
      {"model.preset=llama3-405b", "cluster.preset=meta-h100-roce", "cluster.gpus=8192",
       "parallel.tp=8", "parallel.pp=16", "parallel.vpp=1", "training.global_batch=2048",
       "training.recompute=auto", "framework.preset=megatron-lm-2021"});
  try {
    choose_recompute(make_run_config(old));
    ADD_FAILURE() << "the 2021 software should not fit Llama 3 405B on 80 GB";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInfeasible);
    EXPECT_NE(e.message().find("does not fit"), std::string::npos) << e.message();
  }
}

// training.recompute: auto is resolved when the scenario is built, so every command (run, sweep,
// goodput) runs the least recompute that fits; it used to run as `none`. MegaScale's 175B at TP 2
// (micro-batch 2) holds 63 GiB of model state per GPU: only full recompute fits.
TEST(Frameworks, AutoRecomputeIsResolvedWhenTheScenarioIsBuilt) {
  const Scenario s = load_scenario_string(
      "", "t",
      {"cluster.gpus=512", "training.global_batch=1024", "parallel.tp=2",
       "training.micro_batch=2", "training.recompute=auto"});
  EXPECT_EQ(s.training.recompute, model::Recompute::kFull);
  // recompute_layers 0 is every layer of the stage.
  const int n = s.training.recompute_layers;
  bool noted = false;
  for (const std::string& note : s.notes) noted |= note.find("auto: the least") != std::string::npos;
  EXPECT_TRUE(noted);
  exec::RunConfig cfg = make_run_config(s);
  const plan::Layout L = plan::make_layout(cfg.model, cfg.cluster, cfg.parallel, cfg.training);
  const auto mem = [&](model::Recompute r, int layers) {
    cfg.training.recompute = r;
    cfg.training.recompute_layers = layers;
    return plan::memory_per_gpu(cfg.model, L, cfg.training, cfg.opt.fused_attention(),
                                cfg.cluster.gpu);
  };
  EXPECT_TRUE(mem(model::Recompute::kFull, n).fits());
  EXPECT_FALSE(mem(model::Recompute::kNone, 0).fits());
  // recompute_layers counts per model chunk: the search stops short of every layer of a chunk.
  const int v = std::max(1, L.par.vpp);
  const int layers = n == 0 ? (L.layers_max_stage + v - 1) / v : n;
  if (layers > 1) {
    EXPECT_FALSE(mem(model::Recompute::kFull, layers - 1).fits()) << layers;
  }
  // A run that fits without recompute keeps none.
  const Scenario small = load_scenario_string("", "t", {"training.recompute=auto"});
  EXPECT_EQ(small.training.recompute, model::Recompute::kNone);
}

// parallel.vpp: auto takes the fastest virtual-stage count that fits, found by running every
// count the layout accepts: the default 175B (96 layers, PP 8) accepts 1, 2, 3, 4, 6 and 12;
// each is run here on its own and the chosen one is the fastest of them (ties: the smaller).
// A flat schedule or a single stage keeps 1; the choice is noted.
// training.micro_batch: auto, by hand: the default scenario (32 sequences per replica, vpp 6 on 8
// stages) accepts micro-batches of 1, 2 and 4 (8 and 16 leave 4 and 2 micro-batches, not a
// multiple of the 8 stages the interleaved schedule needs); the fastest that fits is chosen and
// said. With parallel.vpp auto too, each micro-batch gets its fastest count.
TEST(Frameworks, AutoMicroBatchIsTheFastestThatFits) {
  const Scenario s = load_scenario_string("", "t", {"training.micro_batch=auto"});
  double best_t = 0;
  int best = 0;
  for (int m : {1, 2, 4, 8, 16}) {
    exec::Result r;
    try {
      r = exec::run_analytic(make_run_config(load_scenario_string(
          "", "t", {"training.micro_batch=" + std::to_string(m)})));
    } catch (const Error&) {
      EXPECT_TRUE(m == 8 || m == 16) << m;
      continue;
    }
    if (best == 0 || r.iteration_time_s < best_t) {
      best = m;
      best_t = r.iteration_time_s;
    }
  }
  EXPECT_EQ(s.training.micro_batch, best);
  EXPECT_EQ(exec::run_analytic(make_run_config(s)).iteration_time_s, best_t);
  bool noted = false;
  for (const std::string& note : s.notes) {
    noted |= note.find("(auto: the fastest that fits of mbs 1, 2, 4)") != std::string::npos;
  }
  EXPECT_TRUE(noted);
  // Jointly with vpp auto (1,024 GPUs, 48 sequences per replica): no pair of the two searches
  // is faster than the one chosen.
  const std::vector<std::string> small = {"cluster.gpus=1024", "training.global_batch=768"};
  std::vector<std::string> both = small;
  both.push_back("training.micro_batch=auto");
  both.push_back("parallel.vpp=auto");
  const Scenario j = load_scenario_string("", "t", both);
  const double chosen = exec::run_analytic(make_run_config(j)).iteration_time_s;
  for (int m : {1, 2, 4, 8, 16}) {
    std::vector<std::string> keys = small;
    keys.push_back("training.micro_batch=" + std::to_string(m));
    keys.push_back("parallel.vpp=auto");
    const Scenario c = load_scenario_string("", "t", keys);
    EXPECT_GE(exec::run_analytic(make_run_config(c)).iteration_time_s, chosen) << m;
  }
  // A word other than auto is refused, naming the key.
  try {
    load_scenario_string("", "t", {"training.micro_batch=many"});
    ADD_FAILURE() << "micro_batch=many was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, "training.micro_batch");
  }
}

TEST(Frameworks, AutoVppIsTheFastestThatFits) {
  const Scenario s = load_scenario_string("", "t", {"parallel.vpp=auto"});
  double best_t = 0;
  int best = 0;
  for (int vpp : {1, 2, 3, 4, 5, 6, 7, 8, 12}) {
    exec::Result r;
    try {
      r = exec::run_analytic(make_run_config(load_scenario_string(
          "", "t", {"parallel.vpp=" + std::to_string(vpp)})));
    } catch (const Error&) {
      EXPECT_TRUE(vpp == 5 || vpp == 7 || vpp == 8) << vpp;  // 12 layers a stage: no 5, 7, 8 chunks
      continue;
    }
    if (best == 0 || r.iteration_time_s < best_t) {
      best = vpp;
      best_t = r.iteration_time_s;
    }
  }
  EXPECT_EQ(s.parallel.vpp, best);
  EXPECT_EQ(s.parallel.schedule, best > 1 ? plan::Schedule::kInterleaved : plan::Schedule::k1F1B);
  EXPECT_EQ(exec::run_analytic(make_run_config(s)).iteration_time_s, best_t);
  bool noted = false;
  for (const std::string& note : s.notes) {
    noted |= note.find("(auto: the fastest that fits of vpp 1, 2, 3, 4, 6, 12)") != std::string::npos;
  }
  EXPECT_TRUE(noted);
  EXPECT_EQ(load_scenario_string("", "t", {"parallel.vpp=auto", "parallel.schedule=1f1b"})
                .parallel.vpp,
            1);
  EXPECT_EQ(load_scenario_string("", "t", {"parallel.vpp=auto", "parallel.pp=1",
                                           "cluster.gpus=1536", "parallel.dp=auto"})
                .parallel.vpp,
            1);
  // A word other than auto is still refused, naming the key.
  try {
    load_scenario_string("", "t", {"parallel.vpp=many"});
    ADD_FAILURE() << "vpp=many was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, "parallel.vpp");
  }
}

}  // namespace
}  // namespace trainsim::scen

namespace trainsim::scen {
namespace {

// MegaScale's ablation (Jiang et al., NSDI'24 Table 3: 175B, 256 GPUs, batch 256), lever by lever
// in the paper's order from scenarios/examples/megascale-175b-256-ablation.yaml. The paper's MFU
// rises at every step (47.7 → 65.3 %); no lever may lower the simulated MFU, at analytic and at
// schedule fidelity.
const std::vector<std::vector<std::string>>& ablation_steps() {
  static const std::vector<std::vector<std::string>> kSteps = {
      {},
      {"optimizations.parallel_block=true"},
      {"optimizations.sliding_window=true"},
      {"optimizations.tp_overlap=true", "framework.tp_overlap_method=decomposed"},
      {"optimizations.pp_overlap=true"},
      {"optimizations.dp_overlap=true"},
      {"optimizations.efficient_operators=true"},
      {"optimizations.async_data_pipeline=true"},
      {"optimizations.lamb=true", "training.global_batch=768"},
  };
  return kSteps;
}

double ablation_mfu(std::size_t upto, const std::string& fidelity) {
  std::vector<std::string> sets = {"simulation.fidelity=" + fidelity};
  for (std::size_t i = 0; i <= upto; ++i) {
    for (const std::string& s : ablation_steps()[i]) sets.push_back(s);
  }
  const Scenario s = load_scenario_file(
      std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/examples/megascale-175b-256-ablation.yaml",
      sets);
  return run_scenario(s, make_run_config(s)).mfu;
}

class AblationLever : public ::testing::TestWithParam<std::size_t> {};

TEST_P(AblationLever, NeverLowersMfu) {
  const std::size_t step = GetParam();
  for (const char* fidelity : {"analytic", "schedule"}) {
    const double before = ablation_mfu(step - 1, fidelity);
    const double after = ablation_mfu(step, fidelity);
    EXPECT_GE(after, before - 1e-9) << ablation_steps()[step].front() << " at " << fidelity;
    // Every lever but the sliding window prices something here, so each must gain: a lever
    // that silently does nothing (as TP overlap did on the Megatron-LM 2023 base's bulk method)
    // fails. The window gains nothing on the baseline's unfused attention, which computes every
    // score (docs/validation.md).
    if (ablation_steps()[step].front() != "optimizations.sliding_window=true") {
      EXPECT_GT(after, before + 1e-4) << ablation_steps()[step].front() << " at " << fidelity;
    }
  }
}

// The same lever on the Megatron-LM 2023 base as that version had it (a bulk overlap of the
// backward, which its asynchronous backward communication already runs) hides nothing, and the
// run says so; MegaScale's decomposed overlap hides most of the forward's collectives.
TEST(AblationLever, BulkTpOverlapOnMegatron2023IsNotedNotSilent) {
  const std::string file =
      std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/examples/megascale-175b-256-ablation.yaml";
  const Scenario off = load_scenario_file(file, {});
  const Scenario bulk = load_scenario_file(file, {"optimizations.tp_overlap=true"});
  const Scenario decomposed = load_scenario_file(
      file, {"optimizations.tp_overlap=true", "framework.tp_overlap_method=decomposed"});
  const auto noted = [](const Scenario& s) {
    return std::any_of(s.notes.begin(), s.notes.end(), [](const std::string& n) {
      return n.find("optimizations.tp_overlap adds nothing here") != std::string::npos;
    });
  };
  EXPECT_FALSE(noted(off));
  EXPECT_TRUE(noted(bulk));
  EXPECT_FALSE(noted(decomposed));
  const exec::Result r_off = run_scenario(off, make_run_config(off));
  const exec::Result r_bulk = run_scenario(bulk, make_run_config(bulk));
  const exec::Result r_dec = run_scenario(decomposed, make_run_config(decomposed));
  EXPECT_EQ(r_bulk.mfu, r_off.mfu);
  // Decomposed: of each forward collective only its first of TP 8 pieces stays exposed, so the
  // exposed TP time falls by well over half (the backward's was hidden already).
  EXPECT_LT(r_dec.breakdown.exposed_tp_s, 0.5 * r_off.breakdown.exposed_tp_s);
  EXPECT_GT(r_dec.mfu, r_off.mfu);
}

INSTANTIATE_TEST_SUITE_P(MegaScaleTable3, AblationLever, ::testing::Range<std::size_t>(1, 9),
                         [](const ::testing::TestParamInfo<std::size_t>& info) {
                           std::string name = ablation_steps()[info.param].front();
                           name = name.substr(name.find('.') + 1);
                           name = name.substr(0, name.find('='));
                           return name;
                         });

// TorchTitan's per-op checkpointing (training.recompute selective-op) on Llama 2 70B, FSDP over
// 64 A100 80GB at 4,096 tokens: its docs/performance.md (1ea476e9f) ran it at local batch 1 and
// notes that batch 2 "will cause an OOM error when selective activation checkpointing is used";
// the memory model agrees (what the policy keeps: 125,184 bytes a token and layer, 80 layers).
// TorchTitan's Llama 2 70B run (docs/performance.md at 1ea476e9f): FSDP over 64 A100 80GB,
// 4,096 tokens, local batch 1, with the recompute given.
std::vector<std::string> torchtitan_70b(const std::string& recompute) {
  return {"model.preset=llama3-70b", "model.seq_len=4096", "model.vocab=32000",
          "cluster.preset=selene-a100", "cluster.gpus=64", "parallel.tp=1", "parallel.pp=1",
          "parallel.dp=64", "training.global_batch=64", "training.micro_batch=1",
          "training.recompute=" + recompute, "framework.preset=torchtitan-2024-04"};
}

TEST(Frameworks, TorchtitanSelectiveOpFitsAsPublished) {
  const std::vector<std::string> sets = torchtitan_70b("selective-op");
  const auto usage = [](const Scenario& s) {
    const exec::RunConfig cfg = make_run_config(s);
    const plan::Layout L = plan::make_layout(cfg.model, cfg.cluster, cfg.parallel, cfg.training);
    return plan::memory_per_gpu(cfg.model, L, cfg.training, cfg.opt.fused_attention(),
                                cfg.cluster.gpu);
  };
  const plan::MemoryUsage one = usage(load_scenario_string("", "t", sets));
  EXPECT_TRUE(one.fits()) << one.peak_bytes / (1 << 30) << " GiB";
  std::vector<std::string> two = sets;
  two.push_back("training.micro_batch=2");
  two.push_back("training.global_batch=128");
  const plan::MemoryUsage batch2 = usage(load_scenario_string("", "t", two));
  EXPECT_FALSE(batch2.fits()) << batch2.peak_bytes / (1 << 30) << " GiB";
  // The policy's bytes a layer keeps: 2·8192 (input) + 2·8192 (wq) + 2·1024 (wv) + 2·8192 (SDPA
  // output) + 4·64 (its log-sum-exp) + 2·28672 (w1) + 2·8192 (w2) per token.
  const exec::RunConfig cfg = make_run_config(load_scenario_string("", "t", sets));
  EXPECT_DOUBLE_EQ(plan::layer_activation_bytes(cfg.model, cfg.parallel, 1,
                                                model::Recompute::kSelectiveOp, true),
                   125184.0 * 4096);
}

// training.recompute: auto searches the framework's own selective recompute. Under TorchTitan it
// is the per-op policy, placed among full recompute of n layers by its replayed FLOPs: Llama 2 70B
// (h 8192, 64 query and 8 key/value heads of 128, SwiGLU 28672) replays wk, wo and w3 of each
// layer, 8192·1024 + 8192·8192 + 8192·28672 = 310,378,496 of the layer's 855,638,016 dense
// weights (0.36274); at 4,096 tokens a layer's forward is 2·855,638,016 = 1,711,276,032 dense and
// 4·4096·8192 = 134,217,728 attention FLOPs a token, so selective-op replays 0.36274 ·
// 1,711,276,032 / 1,845,493,760 = 0.33636 of what full recompute replays: between full of 26 and
// of 27 of the 80 layers. TorchTitan ran this model at local batch 1 with it (docs/performance.md
// at 1ea476e9f), and it is what auto picks; whatever is picked is the least replay that fits.
TEST(Frameworks, AutoRecomputeTriesTheFrameworksSelective) {
  const std::vector<std::string> sets = torchtitan_70b("auto");
  const Scenario s = load_scenario_string("", "t", sets);
  EXPECT_EQ(s.values.at("framework.selective_recompute"), "op");
  EXPECT_EQ(s.training.recompute, model::Recompute::kSelectiveOp);
  EXPECT_EQ(s.training.recompute_layers, 0);

  exec::RunConfig cfg = make_run_config(s);
  const model::ModelConfig& m = cfg.model;
  const double none = model::hardware_flops_per_token(m, model::Recompute::kNone, true);
  const double op_share =
      (model::hardware_flops_per_token(m, model::Recompute::kSelectiveOp, true) - none) /
      (model::hardware_flops_per_token(m, model::Recompute::kFull, true) - none);
  EXPECT_NEAR(op_share, 310378496.0 / 855638016.0 * 1711276032.0 / 1845493760.0, 1e-9);
  // The invariant: among none, selective-op and full of n layers (share n/80), the chosen one is
  // the least replay that fits.
  const plan::Layout L = plan::make_layout(cfg.model, cfg.cluster, cfg.parallel, cfg.training);
  const auto fits = [&](model::Recompute r, int n) {
    plan::TrainingConfig t = cfg.training;
    t.recompute = r;
    t.recompute_layers = n;
    return plan::memory_per_gpu(m, L, t, true, cfg.cluster.gpu).fits();
  };
  EXPECT_FALSE(fits(model::Recompute::kNone, 0));
  EXPECT_TRUE(fits(model::Recompute::kSelectiveOp, 0));
  for (int n = 1; n <= 26; ++n) EXPECT_FALSE(fits(model::Recompute::kFull, n)) << n;
  std::string chosen;
  choose_recompute(cfg, &chosen);
  EXPECT_EQ(chosen, "selective-op");

  // At batch 2, where TorchTitan notes selective op runs out of memory, it is full of some layers.
  std::vector<std::string> two = sets;
  two.push_back("training.micro_batch=2");
  two.push_back("training.global_batch=128");
  EXPECT_EQ(load_scenario_string("", "t", two).training.recompute, model::Recompute::kFull);

  // Megatron's presets search their attention-core selective (never selective-op); a framework
  // without a selective mode skips it, and a scenario may say which its framework has.
  EXPECT_EQ(load_scenario_string("", "t", {"framework.preset=megatron-lm-2023"})
                .values.at("framework.selective_recompute"),
            "attention");
  for (const char* fw : {"megatron-lm-2021", "deepspeed-2023", "llm-foundry-2023"}) {
    EXPECT_EQ(load_scenario_string("", "t", {std::string("framework.preset=") + fw})
                  .values.at("framework.selective_recompute"),
              "none")
        << fw;
  }
  std::vector<std::string> megatron = sets;
  megatron.back() = "framework.preset=megatron-lm-2023";
  megatron.push_back("parallel.zero=1");
  EXPECT_NE(load_scenario_string("", "t", megatron).training.recompute,
            model::Recompute::kSelectiveOp);
  std::vector<std::string> told = sets;
  told.push_back("framework.selective_recompute=none");
  EXPECT_EQ(load_scenario_string("", "t", told).training.recompute, model::Recompute::kFull);
}

}  // namespace
}  // namespace trainsim::scen

namespace trainsim::scen {
namespace {

// Llama 3's rank order ([TP, CP, PP, DP], §3.3.2; parallel.order tp-cp-pp-dp) on its own fabric
// (meta-h100-roce: pods of 3,072 GPUs joined at 1:7): a pipeline's 16 stages are neighbouring
// servers, so its sends never cross the 1:7 tier and the exposed PP is what it is with that tier
// at 1:1; in Megatron's order the stages are 1,024 GPUs apart and the tier slows them. With the
// sends inside a pod, `vpp: auto` takes Llama 3's own 8 one-layer chunks (vpp 4 in Megatron's
// order, where the 8 chunks' doubled sends cross the thin tier).
TEST(RankOrder, Llama3OrderKeepsThePipelineInsideAPod) {
  const auto run = [](const std::string& order, const std::string& above, const std::string& vpp) {
    const Scenario s = load_scenario_file(
        "scenarios/examples/llama3-405b-16384.yaml",
        {"parallel.order=" + order, "cluster.fabric.above_pod_oversubscription=" + above,
         "parallel.vpp=" + vpp});
    return std::make_pair(exec::run_analytic(make_run_config(s)), s.parallel.vpp);
  };
  const auto [llama, llama_vpp] = run("tp-cp-pp-dp", "7", "8");
  const auto [llama_flat, unused1] = run("tp-cp-pp-dp", "1", "8");
  EXPECT_EQ(llama.breakdown.exposed_pp_s, llama_flat.breakdown.exposed_pp_s);
  const auto [megatron, unused2] = run("tp-cp-dp-pp", "7", "8");
  const auto [megatron_flat, unused3] = run("tp-cp-dp-pp", "1", "8");
  EXPECT_GT(megatron.breakdown.exposed_pp_s, 2 * megatron_flat.breakdown.exposed_pp_s);
  EXPECT_LT(llama.iteration_time_s, megatron.iteration_time_s);
  EXPECT_EQ(run("tp-cp-pp-dp", "7", "auto").second, 8);
  EXPECT_EQ(run("tp-cp-dp-pp", "7", "auto").second, 4);
}

}  // namespace
}  // namespace trainsim::scen
