#include "cli/fit_runs_command.h"

#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "calibrate/profile.h"
#include "cli/output.h"
#include "scenarios/validation_fit.h"
#include "scenarios/validation_runs.h"
#include "sim/core/error.h"

namespace trainsim::cli {

void add_fit_runs_command(CLI::App* calibrate, FitRunsArgs& a) {
  a.cmd = calibrate->add_subcommand(
      "fit-runs",
      "Fit declared constants (<gpu>:<profile constant> or a float scenario key) to published "
      "runs by least squares on MFU, with their standard errors");
  a.cmd->add_option("RUNS", a.csv, "CSV in the format of scenarios/validation/published-runs.csv")
      ->required()
      ->check(CLI::ExistingFile);
  a.cmd->add_option("--fit", a.keys, "Constants to fit, e.g. h100-sxm:gemm_peak_efficiency")
      ->required();
  a.cmd->add_option("--out", a.out,
                    "Write the GPU's built-in profile with the fitted profile constants")
                        ->check(output_file());
  a.cmd->add_option("--fidelity", a.fidelity, "analytic | schedule (default analytic)")
      ->check(CLI::IsMember({"analytic", "schedule"}));
  a.cmd->add_option("--format", a.format, "text | json")->check(CLI::IsMember({"text", "json"}));
}

int run_fit_runs_command(const FitRunsArgs& a) {
  std::ifstream in(a.csv);
  if (!in) throw_input("cannot open the runs file", {a.csv, 0, ""});
  std::stringstream ss;
  ss << in.rdbuf();
  const scen::FitResult fit = scen::fit_runs(ss.str(), a.csv, a.keys, a.fidelity);
  if (fit.rows == 0) {
    throw_input("no row of the file constrains these constants (no simulated row with a "
                "published figure on their GPU)",
                {a.csv, 0, "--fit"});
  }

  std::string gpu;
  for (const scen::FitParameter& p : fit.parameters) {
    const auto colon = p.key.find(':');
    if (colon == std::string::npos) continue;
    if (!gpu.empty() && gpu != p.key.substr(0, colon)) {
      throw_input("--out writes one GPU's profile; the constants name two GPUs", {"", 0, "--fit"});
    }
    gpu = p.key.substr(0, colon);
  }
  if (!a.out.empty()) {
    if (gpu.empty()) {
      throw_input("--out needs a profile constant (<gpu>:<field>) among --fit", {"", 0, "--out"});
    }
    calib::Profile p = calib::builtin_profile(gpu);
    std::string fitted;
    for (const scen::FitParameter& f : fit.parameters) {
      if (f.key.rfind(gpu + ":", 0) != 0) continue;
      scen::apply_profile_override(p, f.key.substr(gpu.size() + 1), f.value);
      fitted += fmt::format("{}{} = {:.4g} ± {:.2g}", fitted.empty() ? "" : ", ",
                            f.key.substr(gpu.size() + 1), f.value, f.stderr_);
    }
    p.name += "-fit";
    p.provenance = fmt::format("{}; fitted by `trainsim calibrate fit-runs` to {} rows of {}: {}",
                               p.provenance, fit.rows, a.csv, fitted);
    write_output(calib::profile_to_json(p), a.out);
  }

  if (a.format == "json") {
    nlohmann::ordered_json j;
    j["rows"] = fit.rows;
    j["rms_mfu_err_pts_before"] = fit.rms_before_pts;
    j["rms_mfu_err_pts_after"] = fit.rms_after_pts;
    j["iterations"] = fit.iterations;
    for (const scen::FitParameter& p : fit.parameters) {
      j["parameters"].push_back({{"key", p.key},
                                 {"initial", p.initial},
                                 {"value", p.value},
                                 {"stderr", p.stderr_},
                                 {"rows", p.rows}});
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::string o = fmt::format("fit of {} constant(s) to {} rows of {} ({} fidelity)\n",
                              fit.parameters.size(), fit.rows, a.csv, a.fidelity);
  o += fmt::format("  {:<36} {:>10} {:>10} {:>10} {:>6}\n", "constant", "initial", "fitted",
                   "std err", "rows");
  for (const scen::FitParameter& p : fit.parameters) {
    o += fmt::format("  {:<36} {:>10.4g} {:>10.4g} {:>10.2g} {:>6}\n", p.key, p.initial, p.value,
                     p.stderr_, p.rows);
  }
  o += fmt::format("RMS MFU error {:.2f} -> {:.2f} points\n", fit.rms_before_pts,
                   fit.rms_after_pts);
  if (!a.out.empty()) o += "wrote " + a.out + "\n";
  std::cout << o;
  return 0;
}

}  // namespace trainsim::cli
