// Turns a loaded scenario into the simulator's RunConfig (resolving the calibration profile).
#pragma once

#include "scenarios/scenario.h"
#include <vector>

#include "sim/exec/analytic.h"
#include "sim/exec/program_exec.h"

namespace trainsim::scen {

/// The scenario's model, cluster, parallel configuration, training, optimizations, collectives
/// and scale, without a calibration profile (what memory and layout need).
exec::RunConfig run_config_without_profile(const Scenario& s);

/// The built-in datasheet profile for `gpu`: its preset's, or for a GPU described by
/// cluster.gpu_spec.* its base preset's, with the NVLink bus bandwidths scaled to its NVLink rate
/// and the efficiencies kept as fractions of its own peaks (docs/calibration.md).
calib::Profile datasheet_profile_for(const topo::GpuSpec& gpu);

/// Resolves `calibration.profile` ("datasheet" = the GPU's built-in profile, else a JSON file
/// path, relative paths taken from the working directory) and copies the config structs.
exec::RunConfig make_run_config(const Scenario& s);

/// The event-driven executor's options from the scenario (`simulation.*`, `network.*`).
exec::ExecOptions exec_options(const Scenario& s);

/// Runs the scenario at its fidelity (analytic: closed form; schedule and flow: the Programs on
/// the event core). `progress` (event-driven fidelities) is called as the simulation advances
/// (exec::ExecOptions::progress). `trace_ranks` asks the event-driven fidelities for those ranks' task spans.
/// Errors without a file get the scenario's file attached.
exec::Result run_scenario(const Scenario& s, const exec::RunConfig& cfg,
                          const exec::AnalyticOptions& options = {},
                          const std::vector<int>& trace_ranks = {},
                          const exec::ProgressFn& progress = {});

}  // namespace trainsim::scen
