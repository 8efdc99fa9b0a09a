// The least activation recompute that fits in memory (training.recompute: auto, and blank
// `recompute` cells of published-runs.csv).
#pragma once

#include <string>

#include "sim/exec/analytic.h"

namespace trainsim::scen {

/// Tries, in order of added compute, none, the framework's selective recompute
/// (TrainingConfig::selective_mode): Megatron's selective only when the attention kernel stores
/// scores (a fused kernel stores none, so it saves nothing); TorchTitan's selective-op where the
/// configuration allows it (plan::selective_op_modelled), placed among the full-recompute steps
/// by its replayed FLOPs (model::hardware_flops_per_token) against n/(layers of the chunk)); full
/// recompute of 1, 2, ... layers per pipeline stage (Megatron's block method), and full
/// recompute of every layer, and returns `cfg` with the first that fits. `chosen` receives
/// "none", "selective", "selective-op", "full" or "full (N layers per stage)" or, interleaved,
/// "full (N layers per model chunk)". Throws trainsim::Error(kInfeasible) with the shortfall of
/// full recompute when nothing fits.
exec::RunConfig choose_recompute(exec::RunConfig cfg, std::string* chosen = nullptr);

}  // namespace trainsim::scen
