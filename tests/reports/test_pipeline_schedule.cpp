// Tests of the analytic pipeline schedule (reports/pipeline_schedule.h). With uniform forward F
// and backward B per model chunk, the analytic fidelity prices the pipeline at (m + (p−1)/v)
// slots of v·(F+B), i.e. (m·v + p − 1)·(F + B) (Narayanan et al. SC21 §2.2); the op-by-op
// schedule must end exactly there, run every op once, never overlap two ops on a stage and
// start an op only after the op it depends on.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "reports/pipeline_schedule.h"

namespace trainsim::reports {
namespace {

exec::PipelineTiming timing(int p, int v, int m, plan::Schedule schedule) {
  exec::PipelineTiming t;
  t.stages = p;
  t.chunks = v;
  t.microbatches = m;
  t.schedule = schedule;
  t.forward_s = 1.0 * v;   // F = 1 per chunk
  t.backward_s = 2.0 * v;  // B = 2 per chunk
  return t;
}

void check(const exec::PipelineTiming& t) {
  const std::vector<ScheduleOp> ops = analytic_pipeline_schedule(t);
  const int p = t.stages, v = t.chunks, m = t.microbatches;
  ASSERT_EQ(ops.size(), static_cast<std::size_t>(2 * p * v * m));
  EXPECT_NEAR(schedule_makespan(ops), (m * v + p - 1) * 3.0, 1e-9)
      << plan::to_string(t.schedule) << " p=" << p << " v=" << v << " m=" << m;
  std::map<std::tuple<int, int, int, bool>, const ScheduleOp*> by_key;
  for (const ScheduleOp& op : ops) {
    EXPECT_TRUE(
        by_key.emplace(std::make_tuple(op.stage, op.microbatch, op.chunk, op.forward), &op).second);
  }
  for (std::size_t i = 1; i < ops.size(); ++i) {
    if (ops[i].stage == ops[i - 1].stage) {
      EXPECT_GE(ops[i].start_s, ops[i - 1].end_s - 1e-12);
    }
  }
  for (const ScheduleOp& op : ops) {
    if (op.forward && op.stage > 0) {
      EXPECT_GE(op.start_s,
                by_key.at({op.stage - 1, op.microbatch, op.chunk, true})->end_s - 1e-12);
    }
    if (!op.forward) {
      EXPECT_GE(op.start_s, by_key.at({op.stage, op.microbatch, op.chunk, true})->end_s - 1e-12);
    }
  }
}

TEST(PipelineSchedule, MakespanIsTheAnalyticFormula) {
  check(timing(1, 1, 4, plan::Schedule::k1F1B));
  check(timing(4, 1, 8, plan::Schedule::k1F1B));
  check(timing(8, 1, 3, plan::Schedule::k1F1B));  // fewer micro-batches than stages
  check(timing(4, 1, 8, plan::Schedule::kGpipe));
  check(timing(4, 2, 8, plan::Schedule::kInterleaved));
  check(timing(8, 6, 32, plan::Schedule::kInterleaved));  // MegaScale 175B: 32 per pipeline
  check(timing(2, 3, 2, plan::Schedule::kInterleaved));   // m = p: all warm-up
}

// Exposed communication lengthens forward and backward in proportion to their compute.
TEST(PipelineSchedule, CommunicationIsSharedByCompute) {
  exec::PipelineTiming t = timing(2, 1, 2, plan::Schedule::k1F1B);
  t.exposed_comm_s = 3.0;  // F becomes 1 + 1, B 2 + 2
  const std::vector<ScheduleOp> ops = analytic_pipeline_schedule(t);
  EXPECT_NEAR(ops.front().end_s - ops.front().start_s, 2.0, 1e-12);
  EXPECT_NEAR(schedule_makespan(ops), (2 + 1) * 6.0, 1e-9);
}

// Chunk weights: Llama 3's layout on 4 stages of 2 chunks, 6 layers with one (vpp − 1) on each
// end stage: the first stage's first chunk holds no layer (the embedding only: its ops last
// nothing), the last stage's last chunk only the output layer; uniform weights give the
// unweighted schedule exactly.
TEST(PipelineSchedule, ChunksAreDrawnAtTheirShareOfTheWork) {
  model::ModelConfig m;
  m.layers = 6;
  m.hidden = 4096;  // the output layer (2·h·V) below a layer's 24·h² + 4·s·h
  m.heads = 32;
  m.kv_heads = 32;
  m.ffn_hidden = 16384;
  m.seq_len = 2048;
  m.vocab = 32000;
  plan::ParallelConfig par;
  par.pp = 4;
  par.vpp = 2;
  par.schedule = plan::Schedule::kInterleaved;
  par.first_stage_layers = 1;
  par.last_stage_layers = 1;
  topo::ClusterSpec c;
  c.gpus = 4;
  c.gpu.hbm_bytes = 80e9;
  plan::TrainingConfig tr;
  tr.global_batch = 8;
  const plan::Layout L = plan::make_layout(m, c, par, tr);
  ASSERT_EQ(L.chunk_layers(0, 0).second, 0);
  ASSERT_EQ(L.chunk_layers(3, 1).second, 0);
  const std::vector<double> w = chunk_weights(m, L);
  ASSERT_EQ(w.size(), 8u);
  EXPECT_EQ(w[0], 0.0);               // stage 0, chunk 0: the embedding only
  EXPECT_GT(w[7], 0.0);               // stage 3, chunk 1: the output layer
  EXPECT_LT(w[7], w[2]);              // ... less than a chunk of one layer here
  double heaviest = 0;
  for (int s = 0; s < 4; ++s) heaviest = std::max(heaviest, w[2 * s] + w[2 * s + 1]);
  EXPECT_NEAR(heaviest, 2.0, 1e-12);  // the heaviest stage's mean chunk is 1
  const exec::PipelineTiming t = timing(4, 2, 8, plan::Schedule::kInterleaved);
  for (const ScheduleOp& op : analytic_pipeline_schedule(t, w)) {
    EXPECT_NEAR(op.end_s - op.start_s, (op.forward ? 1.0 : 2.0) * w[2 * op.stage + op.chunk], 1e-12);
  }
  const std::vector<double> ones(8, 1.0);
  const std::vector<ScheduleOp> a = analytic_pipeline_schedule(t), b = analytic_pipeline_schedule(t, ones);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].end_s, b[i].end_s);
  // One stage of one chunk: nothing to tell apart, no weights.
  plan::ParallelConfig one;
  c.gpus = 1;
  EXPECT_TRUE(chunk_weights(m, plan::make_layout(m, c, one, tr)).empty());
}

}  // namespace
}  // namespace trainsim::reports
