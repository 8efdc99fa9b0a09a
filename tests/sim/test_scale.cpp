// sim/exec/scale and the overlap model: the costs that grow with N and concurrent kernels,
// checked against values derived by hand.
#include "sim/exec/scale.h"

#include <gtest/gtest.h>

#include <cmath>

#include "sim/exec/analytic.h"
#include "sim/exec/compute_model.h"

namespace trainsim::exec {
namespace {

// Φ⁻¹ at textbook points.
TEST(Scale, NormalQuantile) {
  EXPECT_NEAR(normal_quantile(0.5), 0.0, 1e-9);
  EXPECT_NEAR(normal_quantile(0.975), 1.959963985, 1e-8);
  EXPECT_NEAR(normal_quantile(0.001), -3.090232306, 1e-8);
}

// E[max of n standard normals]: exact values 1/√π = 0.5642 (n = 2), 1.5388 (10), 2.5076 (100),
// 3.2414 (1,000) (Harter 1961 tables); Blom's approximation is within 0.03 of them.
TEST(Scale, ExpectedMaximumOfNormals) {
  EXPECT_DOUBLE_EQ(expected_max_standard_normal(1), 0.0);
  EXPECT_NEAR(expected_max_standard_normal(2), 1 / std::sqrt(M_PI), 0.03);
  EXPECT_NEAR(expected_max_standard_normal(10), 1.5388, 0.03);
  EXPECT_NEAR(expected_max_standard_normal(100), 2.5076, 0.03);
  EXPECT_NEAR(expected_max_standard_normal(1000), 3.2414, 0.03);
  // It keeps growing with N: the slowest of 12,288 GPUs is slower than the slowest of 256.
  EXPECT_GT(expected_max_standard_normal(12288), expected_max_standard_normal(256) + 0.8);
}

plan::Layout layout(int tp, int pp, int dp, topo::ClusterSpec& c) {
  model::ModelConfig m;
  m.layers = 16;
  m.hidden = 1024;
  m.heads = 16;
  m.kv_heads = 16;
  m.ffn_hidden = 4096;
  m.vocab = 1000;
  m.seq_len = 1024;
  c.gpus = tp * pp * dp;
  c.gpus_per_node = 8;
  c.nics_per_node = 8;
  c.nic_Gbps = 200;
  plan::ParallelConfig p;
  p.tp = tp;
  p.pp = pp;
  p.dp = dp;
  plan::TrainingConfig t;
  t.global_batch = 8 * dp;
  return plan::make_layout(m, c, p, t);
}

// The slowest-GPU term is σ · E[max of N] of the paced time (compute + bubble + optimizer), and
// nothing when σ = 0; the global sync is the 4-byte all-reduce over the world plus one over DP.
TEST(Scale, CostsByHand) {
  topo::ClusterSpec c;
  const plan::Layout L = layout(8, 4, 32, c);
  Breakdown b;
  b.compute_s = 10;
  b.pipeline_bubble_s = 1;
  b.optimizer_s = 0.5;
  b.exposed_dp_s = 3;  // not paced by compute
  const calib::Profile prof = calib::builtin_profile("a100-80gb");
  const coll::LinkModel links = link_model(c, prof);
  ScaleConfig cfg;
  cfg.gpu_speed_sigma = 0.02;
  cfg.global_sync = true;
  const ScaleCosts s = scale_costs(cfg, b, L, c, links, Precision::kBf16);
  EXPECT_NEAR(s.gpu_variation_s, 11.5 * 0.02 * expected_max_standard_normal(1024), 1e-12);
  coll::Choice choice;
  const double world = coll::collective_cost(coll::Kind::kAllReduce, 4, plan::group_shape(1024, 1, c),
                                             links, choice).time_s;
  const double dp = coll::collective_cost(coll::Kind::kAllReduce, 4, L.dp, links, choice).time_s;
  EXPECT_NEAR(s.global_sync_s, world + dp, 1e-15);
  // fp16 adds the found-inf check over the world.
  EXPECT_NEAR(scale_costs(cfg, b, L, c, links, Precision::kFp16).global_sync_s, 2 * world + dp,
              1e-15);
  cfg.gpu_speed_sigma = 0;
  cfg.global_sync = false;
  const ScaleCosts off = scale_costs(cfg, b, L, c, links, Precision::kBf16);
  EXPECT_EQ(off.gpu_variation_s, 0);
  EXPECT_EQ(off.global_sync_s, 0);
}

// Concurrent kernels: a 10 ms GEMM beside a 4 ms collective holding 8 of 108 SMs ends at
// 10 + 4·8/108 ms; a 2 ms GEMM beside it ends with the collective (4 ms); a 3.9 ms GEMM slowed by
// the collective's SMs outlasts it: 3.9 + 4·8/108 = 4.196 ms.
TEST(Overlap, ConcurrentKernelsShareSms) {
  const double f = 8.0 / 108;
  EXPECT_NEAR(ComputeModel::concurrent(10e-3, 4e-3, f), 10e-3 + 4e-3 * f, 1e-15);
  EXPECT_NEAR(ComputeModel::concurrent(2e-3, 4e-3, f), 4e-3, 1e-15);
  EXPECT_NEAR(ComputeModel::concurrent(3.9e-3, 4e-3, f), 3.9e-3 + 4e-3 * f, 1e-15);
  // Never faster than either alone, never slower than both in sequence.
  for (double g : {1e-3, 5e-3, 20e-3}) {
    for (double comm : {0.5e-3, 5e-3, 50e-3}) {
      const double t = ComputeModel::concurrent(g, comm, f);
      EXPECT_GE(t, std::max(g, comm));
      EXPECT_LE(t, g + comm);
    }
  }
}

}  // namespace
}  // namespace trainsim::exec
