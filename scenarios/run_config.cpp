#include "scenarios/run_config.h"

#include <fmt/format.h>

#include <filesystem>
#include <optional>
#include <vector>

#include "calibrate/profile.h"
#include "scenarios/presets.h"
#include "sim/core/error.h"

namespace trainsim::scen {

namespace {

// The keys a layout check's key is checked against (sim/plan/layout.cpp): a problem named on the
// first may be caused by any of them.
std::vector<const char*> related_keys(const std::string& key) {
  if (key == "training.global_batch") {
    return {"training.micro_batch", "training.global_batch_tokens", "parallel.dp", "parallel.tp",
            "parallel.pp", "parallel.cp", "parallel.vpp", "parallel.schedule", "cluster.gpus"};
  }
  if (key == "parallel.vpp" || key == "parallel.pp") {
    return {"parallel.pp", "parallel.vpp", "model.layers", "parallel.schedule",
            "parallel.first_stage_layers", "parallel.last_stage_layers"};
  }
  if (key == "parallel.ep") return {"model.experts", "parallel.dp", "parallel.tp", "cluster.gpus"};
  if (key == "parallel.cp") return {"model.seq_len"};
  if (key == "parallel.tp") return {"model.heads", "model.kv_heads", "model.hidden"};
  return {};
}

}  // namespace

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

calib::Profile datasheet_profile_for(const topo::GpuSpec& gpu) {
  const std::string& base = gpu.base.empty() ? gpu.name : gpu.base;
  calib::Profile p = calib::builtin_profile(base);
  if (gpu.name == base) return p;
  // A GPU described by cluster.gpu_spec.* on its architecture's preset. What the profile states
  // as a fraction (of a tensor-core peak, of the HBM bandwidth, of a NIC's line rate) carries over
  // at the new GPU's datasheet numbers; the NVLink bus bandwidths are absolute rates, measured on
  // the preset's NVLink, and keep their fraction of it: they scale with the NVLink rate. Launch
  // overheads, latencies and the data loader are the architecture's and stay.
  const std::optional<topo::GpuSpec> preset = gpu_preset(base);
  const double nvlink_ratio =
      preset && preset->nvlink_Bps > 0 ? gpu.nvlink_Bps / preset->nvlink_Bps : 1.0;
  p.nvlink.busbw_Bps *= nvlink_ratio;
  p.nvls_busbw_Bps *= nvlink_ratio;
  p.gpu = gpu.name;
  p.name += "~" + gpu.name;
  p.provenance += fmt::format(
      "; for `{}` (cluster.gpu_spec on the {} preset): efficiencies kept as fractions of its "
      "datasheet peaks, NVLink bus bandwidths x {:.4g} with its NVLink rate",
      gpu.name, base, nvlink_ratio);
  return p;
}

exec::RunConfig make_run_config(const Scenario& s) {
  exec::RunConfig cfg = run_config_without_profile(s);
  if (s.calibration_profile.empty() || s.calibration_profile == "datasheet") {
    try {
      cfg.profile = datasheet_profile_for(s.cluster.gpu);
    } catch (const Error& e) {
      throw Error(e.kind(), e.message(), origin_of(s, "calibration.profile"), e.hint());
    }
  } else if (s.calibration_profile.rfind("datasheet-", 0) == 0 &&
             !std::filesystem::exists(s.calibration_profile)) {
    // A built-in profile by the name `trainsim info` lists (datasheet-h100-sxm), when no file
    // of that name is here.
    try {
      cfg.profile = calib::builtin_profile(s.calibration_profile.substr(10));
    } catch (const Error&) {
      throw_input(fmt::format("no built-in profile `{}`", s.calibration_profile),
                  origin_of(s, "calibration.profile"),
                  "built-in: " + calib::builtin_profile_names() +
                      "; or `datasheet` for the cluster GPU's, or a profile JSON's path");
    }
  } else {
    cfg.profile = calib::load_profile(s.calibration_profile);
  }
  if (cfg.profile.gpu != s.cluster.gpu.name) {
    // Named by the file it came from, where it came from one (the profile's own name may be
    // another file's).
    const bool file = s.calibration_profile != "datasheet" && !s.calibration_profile.empty() &&
                      std::filesystem::exists(s.calibration_profile);
    throw_input("profile `" + cfg.profile.name + "`" +
                    (file ? " (" + s.calibration_profile + ")" : std::string()) +
                    " was made for GPU `" + cfg.profile.gpu + "`, the cluster has `" +
                    s.cluster.gpu.name + "`",
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
    throw_input("stragglers and jitter need an event-driven fidelity (`schedule`, `flow` or "
                "`packet`)",
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
      // A problem between keys (the layout's checks name one of them) is blamed on the one the
      // command line set, when the named key came from the file or a default: `--set
      // training.micro_batch=64` on a file of global batch 6144 is the --set's problem.
      if (where.file != "--set") {
        for (const char* other : related_keys(where.field)) {
          const auto o = s.origin.find(other);
          if (o != s.origin.end() && o->second == "--set") {
            where = origin_of(s, other);
            break;
          }
        }
      }
    } else {
      where.file = s.source;
    }
    throw Error(e.kind(), e.message(), where, e.hint());
  }
}

}  // namespace trainsim::scen
