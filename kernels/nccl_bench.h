// NCCL on the GPUs of this process (`trainsim calibrate nccl`): one communicator per local GPU
// (ncclCommInitAll) and one host thread per GPU launching the collectives, timed like nccl-tests
// (out-of-place, median of repeats per size, the slowest rank counts) and returned in the form the
// nccl-tests importer produces, so the same α–β fit (calibrate/nccl_tests.h) turns them into
// `collectives_measured`. Without NCCL in the build every call throws trainsim::Error(kRuntime).
#pragma once

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

/// "2.27.7" of the linked NCCL, "" when this build has none.
std::string nccl_version();

/// True when this build links NCCL.
bool nccl_built();

/// One-rank self-check used by the GPU tests: an all-reduce (sum) of `values` over a communicator
/// of `devices` GPUs where every rank contributes `values`; returns rank 0's result.
std::vector<float> nccl_all_reduce_check(const std::vector<float>& values, int devices);

}  // namespace trainsim::kernels
