// Replays launch plans (kernels/exec/launch_plan.h) on devices (kernels/exec/device.h) and turns
// what they measured into the simulator's Result shape, so that `trainsim compare` can put the
// two side by side.
//
// Timing: each task is bracketed by two markers on its stream (CUDA events on a GPU), the first
// after the task's event waits, so a task's span runs from the moment its stream could start it
// to its end; a collective's span therefore includes waiting for the slowest member, as in the
// simulator. Iterations are timed from begin_iteration to the end of the last stream, the host
// synchronising between iterations; `warmup` iterations run first and are not measured.
//
// Threads: run_local_ranks runs one host thread per local GPU. A Device is used by its thread only.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "kernels/exec/device.h"
#include "kernels/exec/launch_plan.h"
#include "sim/exec/result.h"

namespace trainsim::kexec {

struct ExecuteOptions {
  int iterations = 5;      // measured iterations
  int warmup = 2;          // unmeasured iterations before them
  double timeout_s = 300;  // per iteration (and per communicator creation): a hang ends in an error
};

/// What one rank measured, averaged over the measured iterations.
struct RankMeasure {
  int rank = 0;
  std::vector<double> start_s, end_s;  // per Program task, seconds since the iteration began
  std::vector<double> iteration_s;     // per measured iteration
  MemoryMeasure memory;                // of the last measured iteration (zeros if not measured)
};

/// Data type of a collective: the DP gradient reduction in training.grad_reduce, the rest in
/// training.precision.
Precision collective_dtype(const plan::ProgramSet& ps, const plan::Task& t);

/// Creates the plan's streams, events and communicators on `dev` (ids[i] is the id of
/// CommTable group i), in CommTable order.
void setup_device(const LaunchPlan& lp, const CommTable& table, const std::vector<CommId>& ids,
                  Device& dev, int markers_per_task = 2);

/// Runs warmup + measured iterations of `lp` on `dev` (after setup_device).
RankMeasure run_plan(const plan::ProgramSet& ps, const LaunchPlan& lp, Device& dev,
                     const ExecuteOptions& opt);

using DeviceFactory = std::function<std::shared_ptr<Device>(int rank, int device)>;

/// Runs `ranks` of the job in this process, one thread and one device each (factory(rank,
/// devices[i]) for ranks[i]). `ids` holds one id per CommTable group (the same in every process).
/// The first error of any thread is rethrown after every thread has stopped.
std::vector<RankMeasure> run_local_ranks(const plan::ProgramSet& ps, const CommTable& table,
                                         const std::vector<CommId>& ids,
                                         const std::vector<int>& ranks,
                                         const std::vector<int>& devices,
                                         const DeviceFactory& factory, const ExecuteOptions& opt);

/// The measured side of a Result from every rank's measures (indexed by rank): iteration time
/// (mean over iterations of the slowest rank), task_kinds and breakdown of the critical rank (the
/// slowest), timeline of `trace_ranks`. The breakdown follows the simulator's rule: each gap in
/// the critical rank's compute stream is charged to what the next compute task waited for last (a
/// collective of dimension D → exposed D; a pipeline receive → exposed PP up to the transfer's
/// own time, the shorter of the send's and the receive's spans, the rest pipeline bubble; nothing
/// → bubble), and the tail after the last compute task is bubble.
exec::Result measured_result(const plan::ProgramSet& ps, const std::vector<RankMeasure>& ranks,
                             const std::vector<int>& trace_ranks);

/// Serialisation of a RankMeasure (for gathering over MPI).
std::vector<double> pack(const RankMeasure& m);
RankMeasure unpack(const std::vector<double>& v);

}  // namespace trainsim::kexec
