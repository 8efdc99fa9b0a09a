// Activation offloading (training.cpu_offload_layers): the stalls of Transformer Engine's default
// offload schedule (sim/exec/offload.h), derived by hand; what the memory model keeps on the GPU;
// and the same stalls at the analytic and the schedule fidelity.
#include <gtest/gtest.h>

#include <vector>

#include "sim/exec/offload.h"
#include "sim/plan/layout.h"
#include "sim/plan/memory.h"
#include "tests/support/models.h"

namespace trainsim::exec {
namespace {

// 4 layers, 2 offloaded (2 activation sets on the GPU at once), forward 1, backward 2, copies 3.
// Forward: layer 0 runs 0–1, its copy 1–4; layer 1 runs 1–2 (sets: copy 0 and itself), its copy
// 4–7; layer 2 would make three sets at 2: waits for copy 0 until 4, runs 4–5; layer 3 at 5
// holds layer 2 and copy 1 still running: waits until 7, runs 7–8. Stall 2 + 2 = 4.
// Backward from 8: layer 3 runs 8–10 and frees the first slot: reload of layer 1 10–13; layer 2
// runs 10–12: reload of layer 0 13–16; layer 1 waits 12–13, runs 13–15; layer 0 waits 15–16.
// Stall 1 + 1 = 2.
TEST(Offload, StallsOfTheDefaultScheduleByHand) {
  const std::vector<double> f(4, 1.0), b(4, 2.0);
  const OffloadStalls s = offload_stalls(f, b, 2, 3.0);
  EXPECT_DOUBLE_EQ(s.forward, 4.0);
  EXPECT_DOUBLE_EQ(s.backward, 2.0);
}

// L − 1 layers offloaded leave one set on the GPU: compute and copies cannot overlap (the
// guide's warning). 3 layers, 2 offloaded, every time 1: forward 0–1, copy 1–2, layer 1 waits
// to 2, runs 2–3, copy 3–4, layer 2 waits to 4, runs 4–5 (stall 2); backward: layer 2 5–6,
// reload of layer 1 6–7, layer 1 waits to 7, runs 7–8, reload of layer 0 8–9, layer 0 waits to
// 9 (stall 2).
TEST(Offload, OneSetOnTheGpuSerialisesCopiesAndCompute) {
  const std::vector<double> one(3, 1.0);
  const OffloadStalls s = offload_stalls(one, one, 2, 1.0);
  EXPECT_DOUBLE_EQ(s.forward, 2.0);
  EXPECT_DOUBLE_EQ(s.backward, 2.0);
}

// Copies no longer than a layer's forward, with two sets or more on the GPU, are hidden; no
// offloading, no stall.
TEST(Offload, CopiesShorterThanComputeAreHidden) {
  const std::vector<double> f(80, 0.010), b(80, 0.020);
  for (int n : {1, 20, 40, 78}) {
    const OffloadStalls s = offload_stalls(f, b, n, 0.010);
    EXPECT_DOUBLE_EQ(s.forward, 0.0) << n;
    EXPECT_DOUBLE_EQ(s.backward, 0.0) << n;
  }
  EXPECT_DOUBLE_EQ(offload_stalls(f, b, 0, 1.0).forward, 0.0);
}

// The memory model keeps layers − N layers' activations: exactly N · per_layer_full fewer, and
// those bytes are counted in host memory.
TEST(Offload, MemoryKeepsTheLayersNotOffloaded) {
  const model::ModelConfig m = testing::gpt(8, 1024, 16, 1000, 512);
  plan::TrainingConfig t;
  t.global_batch = 8;
  plan::ParallelConfig p;
  p.dp = 8;
  topo::GpuSpec gpu;
  gpu.hbm_bytes = 80e9;
  topo::ClusterSpec c;
  c.gpus = 8;
  const plan::Layout L = plan::make_layout(m, c, p, t);
  const plan::MemoryUsage plain = plan::memory_per_gpu(m, L, t, true, gpu);
  t.cpu_offload_layers = 5;
  const plan::MemoryUsage off = plan::memory_per_gpu(m, L, t, true, gpu);
  const double layer = plan::stage_inventory(m, L, t, true, 0).per_layer_full;
  EXPECT_GT(layer, 0);
  EXPECT_NEAR(plain.activations_bytes - off.activations_bytes, 5 * layer, 1e-6 * layer);
  EXPECT_NEAR(off.host_offload_bytes, 5 * layer, 1e-6 * layer);
  EXPECT_LT(off.peak_bytes, plain.peak_bytes);
}

}  // namespace
}  // namespace trainsim::exec
