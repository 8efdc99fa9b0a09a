// sim/plan: layout (placement, feasibility) and the memory model against Korthikanti et al. 2022.
#include <gtest/gtest.h>

#include "sim/core/error.h"
#include "sim/plan/layout.h"
#include "sim/plan/memory.h"

namespace trainsim::plan {
namespace {

model::ModelConfig gpt(int l, int h, int a, int V = 51200, int s = 2048) {
  model::ModelConfig m;
  m.layers = l;
  m.hidden = h;
  m.heads = a;
  m.kv_heads = a;
  m.ffn_hidden = 4 * h;
  m.vocab = V;
  m.seq_len = s;
  return m;
}

topo::ClusterSpec cluster(int gpus) {
  topo::ClusterSpec c;
  c.gpus = gpus;
  c.gpus_per_node = 8;
  c.gpu.hbm_bytes = 80e9;
  return c;
}

// Megatron order (TP fastest, then CP, DP, PP) on 8-GPU servers.
TEST(Layout, GroupShapes) {
  ParallelConfig p;
  p.tp = 2;
  p.pp = 4;
  p.dp = 16;
  TrainingConfig t;
  t.global_batch = 64;
  const Layout L = make_layout(gpt(8, 1024, 16), cluster(128), p, t);
  EXPECT_EQ(L.tp.per_node, 2);
  EXPECT_EQ(L.tp.nodes, 1);
  EXPECT_EQ(L.dp.per_node, 4);  // stride 2 → 4 DP peers per server
  EXPECT_EQ(L.dp.nodes, 4);
  EXPECT_EQ(L.pp.per_node, 1);  // stride 32 → one stage per server
  EXPECT_EQ(L.pp.nodes, 4);
  EXPECT_EQ(L.microbatches, 4);
  EXPECT_EQ(L.layers_first_stage, 2);
}

void expect_infeasible(const ParallelConfig& p, const TrainingConfig& t, int gpus,
                       const std::string& field, const std::string& fragment) {
  try {
    make_layout(gpt(8, 1024, 16), cluster(gpus), p, t);
    FAIL() << "expected an infeasible error on " << field;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInfeasible);
    EXPECT_EQ(e.where().field, field);
    EXPECT_NE(e.message().find(fragment), std::string::npos) << e.message();
  }
}

TEST(Layout, InfeasibleConfigurations) {
  TrainingConfig t;
  t.global_batch = 64;
  ParallelConfig p;
  p.tp = 3;
  p.dp = 1;
  expect_infeasible(p, t, 3, "parallel.tp", "does not divide the 16 attention heads");
  p.tp = 2;
  p.dp = 3;
  expect_infeasible(p, t, 8, "cluster.gpus", "8 GPUs is not TP×PP×DP×CP = 2×1×3×1 = 6");
  p.dp = 4;
  t.global_batch = 10;
  expect_infeasible(p, t, 8, "training.global_batch", "not a multiple of micro_batch × DP");
  t.global_batch = 64;
  p.pp = 16;
  p.dp = 1;
  expect_infeasible(p, t, 32, "parallel.pp", "model chunks for only 8 layers");
  p.pp = 2;
  p.vpp = 2;
  p.dp = 4;
  expect_infeasible(p, t, 16, "parallel.vpp", "needs the interleaved schedule");
}

// Korthikanti et al. 2022, Table 2: activations per layer, 16-bit, no recompute:
// no parallelism 34·sbh + 5·as²b; TP t without SP sbh(10 + 24/t + 5as/ht); with SP sbh/t(34 +
// 5as/h); selective recompute with SP 34·sbh/t; full recompute 2·sbh (/t with SP).
TEST(Memory, KorthikantiActivationFormulas) {
  const model::ModelConfig m = gpt(4, 1024, 16, 1000, 512);
  const double s = 512, b = 2, h = 1024, a = 16;
  ParallelConfig p;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, p, 2, model::Recompute::kNone, false),
                   34 * s * b * h + 5 * a * s * s * b);
  p.tp = 4;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, p, 2, model::Recompute::kNone, false),
                   s * b * h * (10 + 24.0 / 4 + 5 * a * s / (h * 4)));
  p.sp = true;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, p, 2, model::Recompute::kNone, false),
                   s * b * h / 4 * (34 + 5 * a * s / h));
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, p, 2, model::Recompute::kSelective, false),
                   34 * s * b * h / 4);
  // FlashAttention keeps no s² scores: same as selective.
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, p, 2, model::Recompute::kNone, true),
                   34 * s * b * h / 4);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, p, 2, model::Recompute::kFull, false),
                   2 * s * b * h / 4);
}

// Model states: 2 B weights, 4 B fp32 gradients, 12 B optimizer; ZeRO shards them over DP.
TEST(Memory, ZeroStagesShardModelStates) {
  const model::ModelConfig m = gpt(4, 1024, 16, 1000, 512);
  TrainingConfig t;
  t.global_batch = 8;
  t.recompute = model::Recompute::kFull;
  ParallelConfig p;
  p.dp = 8;
  topo::GpuSpec gpu;
  gpu.hbm_bytes = 80e9;
  const double P = model::count_parameters(m).total;
  for (int zero = 0; zero <= 3; ++zero) {
    p.zero = zero;
    const Layout L = make_layout(m, cluster(8), p, t);
    const MemoryUsage u = memory_per_gpu(m, L, t, false, gpu);
    EXPECT_DOUBLE_EQ(u.optimizer_bytes, zero >= 1 ? 12 * P / 8 : 12 * P) << zero;
    EXPECT_DOUBLE_EQ(u.gradients_bytes, zero >= 2 ? 4 * P / 8 : 4 * P) << zero;
    const double layer_buffers = zero >= 3 ? 2.0 * P / 4 * 2 : 0.0;
    EXPECT_DOUBLE_EQ(u.weights_bytes, (zero >= 3 ? 2 * P / 8 : 2 * P) + layer_buffers) << zero;
    EXPECT_DOUBLE_EQ(u.peak_bytes, u.weights_bytes + u.gradients_bytes + u.optimizer_bytes +
                                       u.activations_bytes + u.comm_buffers_bytes +
                                       u.runtime_reserved_bytes);
  }
}

// In-flight micro-batches on the first stage: 1F1B p, interleaved p·(1 + (p−1)/(p·v)), GPipe m.
TEST(Memory, PipelineInFlightMicrobatches) {
  const model::ModelConfig m = gpt(16, 1024, 16, 1000, 512);
  TrainingConfig t;
  t.global_batch = 32;
  topo::GpuSpec gpu;
  gpu.hbm_bytes = 80e9;
  ParallelConfig p;
  p.pp = 4;
  p.dp = 1;
  p.schedule = Schedule::k1F1B;
  EXPECT_DOUBLE_EQ(memory_per_gpu(m, make_layout(m, cluster(4), p, t), t, false, gpu)
                       .in_flight_microbatches, 4);
  p.schedule = Schedule::kInterleaved;
  p.vpp = 2;
  EXPECT_DOUBLE_EQ(memory_per_gpu(m, make_layout(m, cluster(4), p, t), t, false, gpu)
                       .in_flight_microbatches, 4 * (1 + 3.0 / 8));
  p.schedule = Schedule::kGpipe;
  p.vpp = 1;
  EXPECT_DOUBLE_EQ(memory_per_gpu(m, make_layout(m, cluster(4), p, t), t, false, gpu)
                       .in_flight_microbatches, 32);
}

}  // namespace
}  // namespace trainsim::plan
