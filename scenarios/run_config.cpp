#include "scenarios/run_config.h"

#include "calibrate/profile.h"
#include "sim/core/error.h"

namespace trainsim::scen {

exec::RunConfig run_config_without_profile(const Scenario& s) {
  exec::RunConfig cfg;
  cfg.model = s.model;
  cfg.cluster = s.cluster;
  cfg.parallel = s.parallel;
  cfg.training = s.training;
  cfg.opt = s.opt;
  cfg.collectives = s.collectives;
  cfg.scale = s.scale;
  return cfg;
}

exec::RunConfig make_run_config(const Scenario& s) {
  exec::RunConfig cfg = run_config_without_profile(s);
  if (s.calibration_profile.empty() || s.calibration_profile == "datasheet") {
    try {
      cfg.profile = calib::builtin_profile(s.cluster.gpu.name);
    } catch (const Error& e) {
      throw Error(e.kind(), e.message(), origin_of(s, "calibration.profile"), e.hint());
    }
  } else {
    cfg.profile = calib::load_profile(s.calibration_profile);
  }
  if (cfg.profile.gpu != s.cluster.gpu.name) {
    throw_input("profile `" + cfg.profile.name + "` was made for GPU `" + cfg.profile.gpu +
                    "`, the cluster has `" + s.cluster.gpu.name + "`",
                origin_of(s, "calibration.profile"));
  }
  return cfg;
}

exec::ExecOptions exec_options(const Scenario& s) {
  exec::ExecOptions o;
  o.backend = s.fidelity == "flow"     ? exec::NetworkBackend::kFlow
              : s.fidelity == "packet" ? exec::NetworkBackend::kPacket
                                       : exec::NetworkBackend::kAnalytic;
  o.packet = s.packet;
  o.symmetry = s.simulation.symmetry;
  o.jitter = s.simulation.jitter;
  o.seed = s.seed;
  if (s.simulation.straggler_factor != 1.0 &&
      (s.simulation.straggler_rank >= 0 || s.simulation.straggler_host >= 0)) {
    o.stragglers.push_back({s.simulation.straggler_rank, s.simulation.straggler_host,
                            s.simulation.straggler_factor});
  }
  o.routing = s.routing;
  o.network = s.network;
  return o;
}

exec::Result run_scenario(const Scenario& s, const exec::RunConfig& cfg,
                          const exec::AnalyticOptions& options,
                          const std::vector<int>& trace_ranks,
                          const exec::ProgressFn& progress) {
  const bool event = s.fidelity == "schedule" || s.fidelity == "flow" || s.fidelity == "packet";
  if (!event && (s.simulation.jitter > 0 || s.simulation.straggler_rank >= 0 ||
                 s.simulation.straggler_host >= 0)) {
    throw_input("stragglers and jitter need an event-driven fidelity (`schedule` or `flow`)",
                origin_of(s, "simulation.fidelity"), "add --fidelity schedule");
  }
  try {
    if (!event) return exec::run_analytic(cfg, options);
    exec::ExecOptions o = exec_options(s);
    o.enforce_memory = options.enforce_memory;
    o.trace_ranks = trace_ranks;
    o.progress = progress;
    return exec::run_program(cfg, o);
  } catch (const Error& e) {
    if (!e.where().file.empty()) throw;
    // A key's problem is blamed on where its value came from (--set, a preset, a line of the
    // file), not on the scenario file as a whole.
    ErrorContext where = e.where();
    if (s.origin.count(where.field)) {
      where = origin_of(s, where.field);
    } else {
      where.file = s.source;
    }
    throw Error(e.kind(), e.message(), where, e.hint());
  }
}

}  // namespace trainsim::scen
