// The Program: one training iteration of one pipeline stage as tasks on streams with explicit
// dependencies (DESIGN.md §1). It is the contract between planning, the simulator (sim/exec) and
// the real executor (kernels/): both consume the same tasks, so every simulated op has a measured
// twin.
//
// Roles and ranks. Every rank of pipeline stage s runs the same task list, so a Program is stored
// once per stage (its *role*); virtual chunks of the interleaved schedule are tasks of the same
// role. A rank binds the role's collectives to its own groups through the layout (rank numbering
// of sim/plan/layout.h: TP fastest, then CP, then DP, then PP), so memory is
// O(stages × tasks + ranks), never O(ranks × tasks).
//
// Streams are in-order queues, like CUDA streams: a task starts when the task before it on its
// stream has finished and all of its dependencies (tasks of the same role, on any stream) have
// finished. A collective starts when every member of its group has reached it; a point-to-point
// send and the matching receive on the neighbouring stage (the k-th send of a direction pairs with
// the k-th receive of that direction) form one transfer that starts when both are posted.
//
// What changes the Program (each MegaScale lever of DESIGN.md §4 is a switch here, not a factor
// on the result):
//   tp_overlap   TP all-gather / reduce-scatter next to a GEMM split into `tp` chunks, chunk i of
//                the communication paired with chunk i of the GEMM (MegaScale §3.2); off: the
//                compute stream waits for every TP collective.
//   pp_overlap   sends no longer block the compute stream and receives are posted ahead (on their
//                own streams); off: Megatron's blocking send/recv pairs.
//   dp_overlap   gradients reduced bucket by bucket as the last micro-batch's backward produces
//                them, and parameters all-gathered bucket by bucket ahead of the forward that
//                needs them (prefetch); off: one reduction after the last backward, one gather
//                before the first forward.
//   efficient_operators, parallel_block, sliding_window   change the op list (sim/model/ops.h).
//   async_data_pipeline   removes the data-loading task from the compute stream.
//   lamb                  the optimizer task's memory traffic.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/collective/analytic.h"
#include "sim/model/ops.h"
#include "sim/model/transformer.h"
#include "sim/plan/config.h"
#include "sim/plan/layout.h"
#include "topology/hardware.h"

namespace trainsim::plan {

/// In-order queues of a rank. Communication of each parallel dimension has its own stream, as in
/// Megatron-LM/NCCL (one communicator, one stream); PP sends and receives have one stream per
/// direction so that forward activations and backward gradients never queue behind each other.
enum class Stream : std::uint8_t {
  kCompute,
  kTp,
  kCp,
  kEp,
  kDp,
  kPpSendNext,  // activations to the next stage
  kPpSendPrev,  // gradients to the previous stage
  kPpRecvPrev,  // activations from the previous stage
  kPpRecvNext,  // gradients from the next stage
};
inline constexpr int kStreamCount = 9;
const char* to_string(Stream s);

/// Which group a collective runs over (the rank's own group of that dimension).
enum class Dim : std::uint8_t { kNone, kTp, kCp, kEp, kDp, kExpertDp, kPp };
const char* to_string(Dim d);

enum class TaskType : std::uint8_t { kCompute, kCollective, kSend, kRecv };
const char* to_string(TaskType t);

/// What part of training a task belongs to.
enum class Pass : std::uint8_t { kData, kForward, kBackward, kRecompute, kOptimizer };
const char* to_string(Pass p);

/// The piece of a compute op a task runs.
enum class Part : std::uint8_t {
  kForward,   // the op's forward kernel(s)
  kBackward,  // backward of a non-GEMM op (one kernel reading the saved input and the gradient)
  kDgrad,     // GEMM backward: input gradient [m×n]·[n×k]
  kWgrad,     // GEMM backward: weight gradient [k×m]·[m×n]
  kWhole,     // an op priced as a whole (optimizer step, data loading)
};

struct Task {
  TaskType type = TaskType::kCompute;
  Stream stream = Stream::kCompute;
  Pass pass = Pass::kForward;
  Part part = Part::kForward;
  Dim dim = Dim::kNone;
  coll::Kind collective = coll::Kind::kAllReduce;  // kCollective
  std::int32_t op = -1;          // kCompute: index into Program::ops
  double fraction = 1.0;         // kCompute: share of the op (TP-overlap chunk, attention block)
  double bytes = 0;              // kCollective: buffer size S (nccl-tests convention);
                                 // kSend/kRecv: bytes of the transfer
  std::int32_t microbatch = -1;  // -1: not per micro-batch (optimizer, DP buckets, data)
  std::int16_t chunk = -1;       // virtual pipeline chunk (model chunk) on this stage
  std::int16_t piece = -1;       // chunk of a TP-overlapped pair, or DP bucket index
  std::int32_t layer = -1;       // global layer index, -1 for embedding/head/optimizer
  std::uint32_t dep_begin = 0;   // dependencies: Program::deps[dep_begin, dep_begin+dep_count)
  std::uint32_t dep_count = 0;
  std::uint32_t stream_pos = 0;  // position of the task in its stream (0-based)
};

/// One role: every task of one pipeline stage for one iteration.
struct Program {
  int stage = 0;
  // Ops referenced by compute tasks (forward description). Two ops are special: "data_loading"
  // (Pass::kData; its duration is the profile's host stall) and "optimizer" (Pass::kOptimizer; a
  // memory-bound op with m = parameters updated on this GPU and bytes = m × 34 for Adam, × 42 for
  // LAMB, in 10 kernels: ComputeModel::optimizer), followed under framework.zero_grad_buffer by
  // "zero_grad" (Pass::kOptimizer too: the gradient buffer's memset, m = its parameters).
  std::vector<model::Op> ops;
  std::vector<Task> tasks;            // in issue order; a task depends only on earlier tasks
  std::vector<std::uint32_t> deps;    // flattened dependency lists (task indices)
  std::uint32_t stream_tasks[kStreamCount] = {};  // tasks per stream

  /// "qkv fwd", "attention bwd", "all-gather tp", "send-next pp" ...: the label of traces.
  std::string task_name(const Task& t) const;
  /// Number of tasks of each type (for reports and benchmarks).
  std::size_t count(TaskType type) const;
};

/// Where a rank sits in the parallel layout (TP fastest, then CP, then DP and PP in
/// ParallelConfig::order: Megatron's DP before PP by default).
struct RankCoord {
  int tp = 0, cp = 0, dp = 0, pp = 0;
};

/// The Programs of a whole job plus the rank → group binding.
struct ProgramSet {
  Layout layout;
  model::ModelConfig model;
  TrainingConfig training;
  Optimizations opt;
  std::vector<Program> roles;  // index: pipeline stage

  int world() const { return layout.par.world(); }
  RankCoord coord(int rank) const;
  int rank_of(const RankCoord& c) const;
  /// Members of `rank`'s group of dimension `d`, in ring order (ranks of the same stage).
  std::vector<int> group(Dim d, int rank) const;
  /// The rank holding the same TP/CP/DP index on stage `stage`.
  int peer_on_stage(int rank, int stage) const;
  /// Stage that receives this stage's activations (interleaved chunks wrap to stage 0), or -1.
  int next_stage(int stage) const;
  int prev_stage(int stage) const;
};

/// Builds the Programs of one iteration. Throws trainsim::Error(kInfeasible) for configurations
/// that cannot run (the same checks as make_layout).
ProgramSet build_programs(const model::ModelConfig& model, const topo::ClusterSpec& cluster,
                          const ParallelConfig& par, const TrainingConfig& training,
                          const Optimizations& opt);

}  // namespace trainsim::plan
