// kernels/exec/in_mix: the kernel samples an execute record's task kinds stand for.
//
// A tiny GPT (4 layers, hidden 256, 8 heads of 32, seq 128, vocab 1024, micro-batch 1) at
// TP 2 · PP 2 · DP 2, Megatron-LM 2023 (SP on, unfused attention) and with fused attention. The
// measured times are made up (kind i: i + 1 ms per task); expected, by hand from the model and
// the launch plan's contract (kernels/exec/launch_plan.h):
//   - qkv: [128 × 256]·[256 × 384] (3·256/2 columns): forward m n k = 128 384 256, dgrad
//     128 256 384, wgrad 256 384 128; FLOPs 2mnk; dtype bf16;
//   - fused attention: 4 heads per GPU, 128 queries × 128 keys (one 128-key tile: the causal
//     kernel computes it whole), head dim 32: forward 4·4·128·128·32 = 8,388,608 FLOPs, the
//     backward sample twice that (the simulator's convention, not FlashAttention's 2.5);
//   - a norm's backward: layernorm_bwd over the SP rows 128 / 2 = 64 × 256 in bf16:
//     3·64·256·2 + 256·2 + 8·64 + 8·256 = 101,376 bytes;
//   - time per task = total / count, repeats = count × iterations, label "exec:<kind>";
//   - communication kinds give no sample; a count or a kind the Program does not have is an
//     error (the record is of another configuration).
#include <gtest/gtest.h>

#include <map>

#include "kernels/exec/in_mix.h"
#include "scenarios/scenario.h"
#include "sim/core/error.h"

namespace trainsim::kexec {
namespace {

plan::ProgramSet tiny(bool fused) {
  const std::vector<std::string> sets = {"model.layers=4",        "model.hidden=256",
                                         "model.heads=8",         "model.seq_len=128",
                                         "model.vocab=1024",      "parallel.tp=2",
                                         "parallel.pp=2",         "parallel.dp=2",
                                         "parallel.vpp=1",        "training.global_batch=8",
                                         "training.micro_batch=1", "framework.preset=megatron-lm-2023",
                                         fused ? "framework.attention_kernel=flash2" : "framework.attention_kernel=unfused"};
  const scen::Scenario s = scen::load_scenario_string("", "tiny-gpt", sets);
  return plan::build_programs(s.model, s.cluster, s.parallel, s.training, s.opt);
}

// Every task kind of rank 0's Program with its count; kind i takes (i + 1) ms per task.
std::vector<MeasuredTaskKind> kinds_of(const plan::ProgramSet& ps) {
  std::map<std::string, long> count;
  const plan::Program& prog = ps.roles[static_cast<std::size_t>(ps.coord(0).pp)];
  for (const plan::Task& t : prog.tasks) ++count[prog.task_name(t)];
  std::vector<MeasuredTaskKind> out;
  for (const auto& [name, n] : count) {
    out.push_back({name, n, n * 1e-3 * static_cast<double>(out.size() + 1)});
  }
  return out;
}

const calib::MeasuredKernel& sample(const InMixSamples& s, const std::string& kind) {
  for (const calib::MeasuredKernel& k : s.samples) {
    if (k.label == "exec:" + kind) return k;
  }
  throw std::runtime_error("no sample for " + kind);
}

double time_of(const std::vector<MeasuredTaskKind>& kinds, const std::string& name) {
  for (const MeasuredTaskKind& k : kinds) {
    if (k.name == name) return k.total_s / static_cast<double>(k.count);
  }
  return -1;
}

TEST(InMix, SamplesAreTheLaunchedKernelsAtTheMeasuredTimes) {
  const plan::ProgramSet ps = tiny(true);
  const std::vector<MeasuredTaskKind> kinds = kinds_of(ps);
  const InMixSamples s = in_mix_samples(ps, 0, kinds, 3);

  const calib::MeasuredKernel& fwd = sample(s, "qkv fwd");
  EXPECT_EQ(fwd.op, "gemm");
  EXPECT_EQ(fwd.dtype, "bf16");
  EXPECT_EQ(fwd.m, 128);
  EXPECT_EQ(fwd.n, 384);
  EXPECT_EQ(fwd.k, 256);
  EXPECT_EQ(fwd.batch, 1);
  EXPECT_DOUBLE_EQ(fwd.flops, 2.0 * 128 * 384 * 256);
  EXPECT_DOUBLE_EQ(fwd.median_s, time_of(kinds, "qkv fwd"));
  EXPECT_TRUE(calib::timed_in_mix(fwd));
  const calib::MeasuredKernel& dgrad = sample(s, "qkv dgrad");
  EXPECT_EQ(dgrad.m, 128);
  EXPECT_EQ(dgrad.n, 256);
  EXPECT_EQ(dgrad.k, 384);
  const calib::MeasuredKernel& wgrad = sample(s, "qkv wgrad");
  EXPECT_EQ(wgrad.m, 256);
  EXPECT_EQ(wgrad.n, 384);
  EXPECT_EQ(wgrad.k, 128);

  const calib::MeasuredKernel& af = sample(s, "attention fwd");
  const calib::MeasuredKernel& ab = sample(s, "attention bwd");
  EXPECT_EQ(af.op, "attention_fwd");
  EXPECT_EQ(ab.op, "attention_bwd");
  EXPECT_DOUBLE_EQ(af.flops, 8388608.0);
  EXPECT_DOUBLE_EQ(ab.flops, 2 * 8388608.0);
  EXPECT_EQ(af.batch, 4);
  EXPECT_EQ(af.m, 128);
  EXPECT_EQ(af.k, 32);

  const calib::MeasuredKernel& nb = sample(s, "norm_attn bwd");
  EXPECT_EQ(nb.op, "layernorm_bwd");
  EXPECT_EQ(nb.m, 64);
  EXPECT_EQ(nb.n, 256);
  EXPECT_DOUBLE_EQ(nb.bytes, 101376.0);

  // Every sample stands for its kind's tasks over the record's 3 iterations.
  for (const MeasuredTaskKind& k : kinds) {
    for (const calib::MeasuredKernel& m : s.samples) {
      if (m.label == "exec:" + k.name) {
        EXPECT_EQ(m.repeats, k.count * 3) << k.name;
      }
    }
  }
  const calib::MeasuredKernel& opt = sample(s, "optimizer");
  EXPECT_EQ(opt.op, "adam");
  EXPECT_EQ(opt.dtype, "fp32");
  EXPECT_GT(opt.n, 0);
  EXPECT_DOUBLE_EQ(opt.bytes, 30 * opt.n);

  // Communication gives no sample, and says so.
  bool comm = false;
  for (const std::string& why : s.skipped) comm |= why.find("communication") != std::string::npos;
  EXPECT_TRUE(comm);
  for (const calib::MeasuredKernel& m : s.samples) EXPECT_EQ(m.label.find("exec:all_"), std::string::npos);
}

TEST(InMix, UnfusedAttentionGivesBatchedGemms) {
  const plan::ProgramSet ps = tiny(false);
  const InMixSamples s = in_mix_samples(ps, 0, kinds_of(ps), 1);
  // Scores Q·Kᵀ: 4 heads of [128 × 32]·[32 × 128], batched.
  const calib::MeasuredKernel& scores = sample(s, "attn_scores fwd");
  EXPECT_EQ(scores.op, "gemm");
  EXPECT_EQ(scores.batch, 4);
  EXPECT_EQ(scores.m, 128);
  EXPECT_EQ(scores.n, 128);
  EXPECT_EQ(scores.k, 32);
}

TEST(InMix, AnotherConfigurationIsAnError) {
  const plan::ProgramSet ps = tiny(true);
  std::vector<MeasuredTaskKind> kinds = kinds_of(ps);
  std::vector<MeasuredTaskKind> miscounted = kinds;
  miscounted.front().count += 1;
  EXPECT_THROW(in_mix_samples(ps, 0, miscounted, 1), Error);
  std::vector<MeasuredTaskKind> unknown = kinds;
  unknown.push_back({"mlp_gate fwd", 1, 1e-3});
  EXPECT_THROW(in_mix_samples(ps, 0, unknown, 1), Error);
  EXPECT_THROW(in_mix_samples(ps, 8, kinds, 1), Error);  // 8 ranks: 0–7
}

}  // namespace
}  // namespace trainsim::kexec
