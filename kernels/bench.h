// The kernel microbenchmark driver of `trainsim calibrate kernels`: times each BenchItem
// (kernels/bench_plan.h) on one GPU with the launchers of kernels/launchers.h and kernels/gemm.h.
//
// Method: inputs are random (never zeros, which flatter power and some kernels); each item gets
// as many copies of its buffers as fill `rotate_bytes` (at least 4× a Hopper L2), and consecutive
// launches cycle through them so no launch finds its inputs in L2 from the one before. After
// `warmup` untimed launches, each of `repeats` launches is bracketed by CUDA events on one stream
// and the median of those times is the sample. Plain C++ interface; without CUDA it throws
// trainsim::Error(kRuntime).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "calibrate/profile.h"
#include "kernels/bench_plan.h"

namespace trainsim::kernels {

struct BenchOptions {
  int device = 0;                // CUDA device index
  int warmup = 5;                // untimed launches per item
  int repeats = 30;              // timed launches per item (the median is kept)
  double rotate_bytes = 256e6;   // buffer copies per item fill at least this much (cap 32 copies)
  double memory_fraction = 0.6;  // of the free device memory an item may use, copies included
};

struct BenchResult {
  std::vector<calib::MeasuredKernel> samples;
  std::vector<std::string> skipped;    // "label op: why" for items that could not run here
  calib::KernelProvenance provenance;  // GPU, driver, CUDA runtime, NCCL (date, command: caller)
};

/// Times `items` on `options.device`; `progress` (may be empty) sees each sample as it is taken.
/// Items the GPU cannot run (fp8 before sm_89, attention head dims other than 64/96/128, too large
/// for memory, no cuBLASLt algorithm) or that fail with a CUDA error are skipped with the reason,
/// so one bad shape does not lose the other samples. Throws trainsim::Error(kRuntime) only when
/// the device itself cannot be set up.
BenchResult run_kernel_bench(const std::vector<BenchItem>& items, const BenchOptions& options,
                             const std::function<void(const calib::MeasuredKernel&)>& progress);

}  // namespace trainsim::kernels
