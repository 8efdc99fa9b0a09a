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

}  // namespace
}  // namespace trainsim::reports
