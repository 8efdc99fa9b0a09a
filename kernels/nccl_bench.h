// NCCL on the GPUs of this process (`trainsim calibrate nccl`): one communicator per local GPU
// (ncclCommInitAll) and one host thread per GPU launching the collectives, timed like nccl-tests
// (out-of-place, median of repeats per size, the slowest rank counts) and returned in the form the
// nccl-tests importer produces, so the same α–β fit (calibrate/nccl_tests.h) turns them into
// `collectives_measured`. Without NCCL in the build every call throws trainsim::Error(kRuntime).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "calibrate/nccl_tests.h"

namespace trainsim::kernels {

struct NcclBenchOptions {
  std::vector<int> devices;  // empty: every visible GPU
  double min_bytes = 1 << 16;
  double max_bytes = 1 << 30;  // sizes double from min to max
  int warmup = 5;
  int repeats = 20;
  std::vector<std::string> ops = {"all_reduce", "all_gather", "reduce_scatter", "broadcast",
                                  "all_to_all"};
};

/// One run per op over the devices (at least 2). `path` of each run is "nccl:<op>".
std::vector<calib::NcclTestsRun> run_nccl_bench(const NcclBenchOptions& options);

/// The processes of an mpirun job as the benchmark sees them. kernels/ does not depend on MPI:
/// the CLI adapts kexec::ProcessGroup (kernels/exec/process_group.h) to this.
struct NcclBenchProcesses {
  int index = 0;  // this process, 0 .. count-1
  int count = 1;
  int nodes = 1;      // distinct hosts of the job (for the runs' `nodes`)
  std::string where;  // e.g. "mpirun: 2 processes on hosts a, b" (for the version line)
  /// Process 0's bytes to every process.
  std::function<void(std::string&)> broadcast;
  /// Every process's bytes, in process order, on every process (also used as a barrier).
  std::function<std::vector<std::string>(const std::string&)> allgather;
};

/// The same sweep over one communicator of every process's `options.devices` (the same number
/// on each): process p's i-th device is global rank p·L+i (L = devices per process). Process 0
/// makes the ncclUniqueId and broadcasts it; every process returns the same runs, each time the
/// slowest rank's (the max over all processes). A failure on one process leaves the others in
/// NCCL: the caller must end the job (ProcessGroup::abort).
std::vector<calib::NcclTestsRun> run_nccl_bench(const NcclBenchOptions& options,
                                                const NcclBenchProcesses& processes);

/// "2.27.7" of the linked NCCL, "" when this build has none.
std::string nccl_version();

/// True when this build links NCCL.
bool nccl_built();

/// One-rank self-check used by the GPU tests: an all-reduce (sum) of `values` over a communicator
/// of `devices` GPUs where every rank contributes `values`; returns rank 0's result.
std::vector<float> nccl_all_reduce_check(const std::vector<float>& values, int devices);

}  // namespace trainsim::kernels
