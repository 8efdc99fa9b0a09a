// A role's Program (one pipeline stage × virtual chunk, sim/plan/program.h) indexed once for the
// executor: compute times before stragglers and jitter, the task order of every stream, and
// every task's kind (its name and report category), which the task-kind table and the trace of
// a rank are written from.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sim/exec/program_exec.h"
#include "sim/plan/program.h"

namespace trainsim::exec {

struct RoleIndex {
  const plan::Program* prog = nullptr;
  std::vector<std::int64_t> duration_ps;                    // compute tasks, 0 for communication
  std::vector<std::uint16_t> kind;                          // task → kind id (its name)
  std::vector<std::string> kind_names;
  std::vector<std::string> kind_category;
  std::vector<long> kind_tasks;                             // kind id → tasks of that kind
  // Per stream, in order: what the executor reads to start and complete a task, 16 bytes
  // instead of the 64-byte plan::Task (every-rank runs visit hundreds of millions of them).
  struct Step {
    std::uint32_t task;
    std::uint32_t dep_begin;  // into ready_deps
    std::uint16_t dep_count;
    std::uint16_t kind;
    plan::TaskType type;
    plan::Pass pass;
    // The streams with a task that depends on this one: when it completes, only their heads
    // (and the next task of its own stream) can have become ready.
    std::uint16_t waiters = 0;
  };
  static_assert(plan::kStreamCount <= 16, "Step::waiters has one bit per stream");
  std::vector<Step> steps[plan::kStreamCount];
  /// A dependency as its stream and position there: (stream << kPosBits) | position.
  static constexpr int kPosBits = 28;
  std::vector<std::uint32_t> ready_deps;
};

RoleIndex index_role(const RunConfig& cfg, const plan::Program& program);

/// Throws trainsim::Error(kRuntime) "the schedule deadlocked: rank R (stage S) stopped at `task`
/// on stream ... ; waiting for `dep` ..." when some stream of a rank (which has completed
/// `completed[s]` tasks of stream s) did not run all its tasks.
void check_finished(const RoleIndex& role, int rank, int stage,
                    std::span<const std::uint32_t> completed);

/// One executed task of a rank: when its work began and ended.
struct TaskSpan {
  std::uint32_t task;
  TimePs start, end;
  // A compute task: the time it lost to collectives holding SMs (charged to exposed
  // communication, not to its kind); its unslowed time is end − start − slowed_s.
  double slowed_s = 0;
};

/// The task-kind table of a rank: total time and count per kind (by kind id), longest first,
/// kinds that never ran left out.
std::vector<TaskKindTime> task_kind_times(const RoleIndex& role, std::span<const double> total_s,
                                          std::span<const long> count);

/// Appends rank `rank`'s executed `spans`, in start order, to `timeline`.
void append_trace(const RoleIndex& role, int rank, std::span<const TaskSpan> spans,
                  Timeline& timeline);

}  // namespace trainsim::exec
