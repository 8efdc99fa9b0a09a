// Turns a loaded scenario into the simulator's RunConfig (resolving the calibration profile).
#pragma once

#include "scenarios/scenario.h"
#include "sim/exec/analytic.h"

namespace trainsim::scen {

/// Resolves `calibration.profile` ("datasheet" = the GPU's built-in profile, else a JSON file
/// path, relative paths taken from the working directory) and copies the config structs.
exec::RunConfig make_run_config(const Scenario& s);

/// Runs the scenario at its fidelity. Errors without a file get the scenario's file attached.
exec::Result run_scenario(const Scenario& s, const exec::RunConfig& cfg,
                          const exec::AnalyticOptions& options = {});

}  // namespace trainsim::scen
