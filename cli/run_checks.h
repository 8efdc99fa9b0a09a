// Checks every `run` (and `run --compare`) makes: the flow fidelity's work limit before a run, and
// the final guard that no NaN or infinite number reaches the output (docs/reliability.md).
#pragma once

#include "scenarios/scenario.h"
#include "sim/exec/result.h"

namespace trainsim::cli {

/// Throws Error(kInput), naming the key and its origin, when a flow-fidelity run's work (GPUs x
/// QPs per connection) is above limits::kMaxFlowWork and `force` is false.
void check_flow_work(const scen::Scenario& s, bool force);

/// Checks the fabric failures the scenario states (cluster.fabric.failed_cables, failed_switches)
/// against its fabric, at every fidelity (only flow and packet route around them, but a switch
/// name the fabric lacks is a typo whatever the fidelity); rethrows with the key's origin.
void check_fabric_failures(const scen::Scenario& s);

/// Throws an internal error (exit 4) naming the first output field that is not finite.
void require_finite_result(const exec::Result& r);

}  // namespace trainsim::cli
