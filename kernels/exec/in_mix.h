// Kernel samples measured in the mix: what `trainsim execute` timed per task kind, turned back
// into calibration samples (calib::MeasuredKernel) at the shapes the executor launched.
//
// `calibrate kernels` times each kernel alone, 10 times after 3 warm-ups. Such bursts run at the
// GPU's boost clock, while a training step that runs dense GEMMs back to back holds a
// power-capped GPU at its limit with a lower clock (the H200 record of 2026-12-04: 700 W, about
// 1,500 MHz against 1,965 MHz in the bursts; docs/validation/h200-2026-12-04/README.md). An
// execute record has every kernel's time in that regime. This is the inverse of the launch plan
// (launch_plan.h): for each task kind of the measured rank's Program ("qkv dgrad", "attention
// bwd", "norm_attn fwd", "optimizer"), the kernel the executor launched for it, with the mean
// measured time per task, labelled "exec:<task kind>" (calib::kInMixLabelPrefix) so that the fits (calibrate/gemm_fit.h)
// know it was timed in the mix.
//
// Pure C++: built and tested on any machine.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "calibrate/profile.h"
#include "sim/plan/program.h"

namespace trainsim::kexec {

/// One task kind of an execute record ("task_kinds" of its JSON): the tasks of that name on the
/// measured rank, and their total time per iteration.
struct MeasuredTaskKind {
  std::string name;
  long count = 0;
  double total_s = 0;
};

struct InMixSamples {
  std::vector<calib::MeasuredKernel> samples;
  // Task kinds that give no sample, each with the reason (communication, data loading, a kind
  // whose tasks launch different shapes, a kind the rank's Program does not have, ...).
  std::vector<std::string> skipped;
};

/// The samples of `kinds` measured on `rank` of `ps` over `iterations` iterations: one per
/// compute task kind whose tasks all launch one kernel of the same shape (kernel_launch of the
/// launch plan): a GEMM at its part's shape in the training precision; fused attention forward
/// (and recompute) and backward, the backward counted at twice the forward FLOPs as the
/// simulator prices it; a memory-bound launcher ("layernorm_bwd", "cross_entropy", "adam") with
/// the bytes that kernel moves (kernels::memory_kernel_bytes). Times are total_s / count.
InMixSamples in_mix_samples(const plan::ProgramSet& ps, int rank,
                            std::span<const MeasuredTaskKind> kinds, int iterations);

}  // namespace trainsim::kexec
