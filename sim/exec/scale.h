// Costs that grow with the number of GPUs at a fixed per-GPU load (docs/scale.md).
//
// A synchronous training step is as slow as its slowest participant and ends in global
// agreement. Each mechanism below is a named term of the breakdown with its source and a switch
// (`scale.*` keys); none is a fitted curve: the growth with N comes from order statistics and from
// collective latencies over N ranks.
//
//  gpu_variation  Persistent per-GPU speed differences (silicon, clocks, cooling): speeds are
//                 drawn as N(1, σ). Every TP group waits for its slowest member at each
//                 collective, every pipeline runs at its slowest stage, and the DP reduction and
//                 optimizer step wait for the slowest pipeline, so the compute of the step runs at
//                 the pace of the slowest of the N GPUs: (1 + σ·E[max of N standard normals]) on
//                 compute, bubble and optimizer time. E[max] by Blom's approximation
//                 Φ⁻¹((N − 0.375)/(N + 0.25)).
//  global_sync    Per-step agreement over every rank: the gradient-norm all-reduce of one fp32
//                 scalar over the whole world (Megatron with the distributed optimizer), the
//                 found-inf check of fp16 loss scaling, and the loss average over DP for logging;
//                 each a latency-bound all-reduce priced by the collective model over its group.
#pragma once

#include "sim/collective/analytic.h"
#include "sim/exec/result.h"
#include "sim/plan/config.h"
#include "sim/plan/layout.h"
#include "topology/hardware.h"

namespace trainsim::exec {

struct ScaleConfig {
  // Standard deviation of persistent per-GPU speed; 0 switches the mechanism off. The library
  // default is off (closed-form tests); the scenario keys scale.* default to on.
  double gpu_speed_sigma = 0;
  bool global_sync = false;
};

/// E[max of n independent standard normal draws] (Blom 1958); 0 for n ≤ 1.
double expected_max_standard_normal(double n);

/// Standard normal quantile Φ⁻¹(p), p in (0, 1) (Acklam's rational approximation, |error| < 1.2e-9).
double normal_quantile(double p);

/// The scale terms of one iteration, given the rest of the breakdown (compute, bubble and
/// optimizer already known).
struct ScaleCosts {
  double gpu_variation_s = 0;
  double global_sync_s = 0;
};
ScaleCosts scale_costs(const ScaleConfig& cfg, const Breakdown& b, const plan::Layout& L,
                       const topo::ClusterSpec& cluster, const coll::LinkModel& links,
                       Precision precision);

}  // namespace trainsim::exec
