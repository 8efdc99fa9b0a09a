#include "scenarios/run_config.h"

#include "calibrate/profile.h"
#include "sim/core/error.h"

namespace trainsim::scen {

exec::RunConfig make_run_config(const Scenario& s) {
  exec::RunConfig cfg;
  cfg.model = s.model;
  cfg.cluster = s.cluster;
  cfg.parallel = s.parallel;
  cfg.training = s.training;
  cfg.opt = s.opt;
  cfg.collectives = s.collectives;
  if (s.calibration_profile.empty() || s.calibration_profile == "datasheet") {
    try {
      cfg.profile = calib::builtin_profile(s.cluster.gpu.name);
    } catch (const Error& e) {
      throw Error(e.kind(), e.message(), {s.source, 0, "calibration.profile"}, e.hint());
    }
  } else {
    cfg.profile = calib::load_profile(s.calibration_profile);
  }
  if (cfg.profile.gpu != s.cluster.gpu.name) {
    throw_input("profile `" + cfg.profile.name + "` was made for GPU `" + cfg.profile.gpu +
                    "`, the cluster has `" + s.cluster.gpu.name + "`",
                {s.source, 0, "calibration.profile"});
  }
  return cfg;
}

exec::Result run_scenario(const Scenario& s, const exec::RunConfig& cfg,
                          const exec::AnalyticOptions& options) {
  if (s.fidelity != "analytic") {
    throw_input("fidelity `" + s.fidelity + "` is not available in this build yet",
                {s.source, 0, "simulation.fidelity"}, "use `analytic`");
  }
  try {
    return exec::run_analytic(cfg, options);
  } catch (const Error& e) {
    if (!e.where().file.empty()) throw;
    ErrorContext where = e.where();
    where.file = s.source;
    throw Error(e.kind(), e.message(), where, e.hint());
  }
}

}  // namespace trainsim::scen
