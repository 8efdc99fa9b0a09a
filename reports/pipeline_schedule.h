// The pipeline schedule behind an analytic result, op by op, for drawing.
//
// The analytic fidelity does not simulate ranks: it assumes every stage runs at the pace of the
// slowest one and prices the iteration as (m + (p−1)/v) slots (docs/analytic-model.md §4). This
// lays out the schedule that assumption describes: each stage issues its forward (F) and backward
// (B) passes per micro-batch and model chunk in the order Megatron-LM does (GPipe: all F, then all
// B; 1F1B: p−s−1 warm-up forwards, then alternating; interleaved: 2(p−s−1)+(v−1)p warm-up
// forwards over the chunks), and an op starts when its stage is free and the op it depends on
// (the previous stage's F, the next stage's B) has finished. Every F takes the slot's forward
// time / v and every B its backward time / v, the exposed communication shared between them in
// proportion. The makespan then equals the analytic formula (checked in tests).
#pragma once

#include <span>
#include <vector>

#include "sim/model/transformer.h"
#include "sim/plan/layout.h"

#include "sim/exec/result.h"

namespace trainsim::reports {

struct ScheduleOp {
  int stage = 0;
  int microbatch = 0;
  int chunk = 0;
  bool forward = true;
  double start_s = 0;
  double end_s = 0;
};

/// Every op of every stage, grouped by stage in issue order. `chunk_weight` (empty: every op
/// alike) scales the ops of model chunk c on stage s by chunk_weight[s·chunks + c]: what that
/// chunk computes against the slowest stage's mean chunk (an end chunk holding only the
/// embedding, as in Llama 3's layout, is far shorter than a chunk of layers).
std::vector<ScheduleOp> analytic_pipeline_schedule(const exec::PipelineTiming& t,
                                                   std::span<const double> chunk_weight = {});

/// The chunk weights of a layout for analytic_pipeline_schedule: each chunk's forward FLOPs per
/// token (its layers, and the output layer on the last stage's last chunk) over the mean chunk of
/// the stage that computes the most. Empty when every chunk is alike.
std::vector<double> chunk_weights(const model::ModelConfig& m, const plan::Layout& layout);

/// The end of the last op.
double schedule_makespan(const std::vector<ScheduleOp>& ops);

}  // namespace trainsim::reports
