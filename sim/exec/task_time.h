// What a compute task of the event-driven fidelities costs on one GPU: its profile-priced time
// (the same ComputeModel pricing as the analytic fidelity), times a rank's straggler slow-down,
// times a seeded per-task jitter. The executor (program_exec.cpp) applies them; nothing here
// knows streams or communication.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/core/rng.h"
#include "sim/exec/program_exec.h"
#include "sim/plan/program.h"

namespace trainsim::exec {

/// Every task's compute time in picoseconds, by task index (0 for communication tasks), before
/// stragglers and jitter.
std::vector<std::int64_t> compute_durations_ps(const RunConfig& cfg, const plan::Program& program);

/// Every rank's compute slow-down from `stragglers` (1 = none; factors of a rank and its server
/// multiply). Throws trainsim::Error(kInput) for a non-positive factor or a rank or server outside
/// the job.
std::vector<double> straggler_factors(std::span<const Straggler> stragglers, int world,
                                      int gpus_per_node);

/// A log-normal factor with mean 1 and spread `sigma`, drawn from `rng` (two uniforms).
double jitter_factor(Rng& rng, double sigma);

}  // namespace trainsim::exec
