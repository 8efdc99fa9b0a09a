// `trainsim calibrate fit-runs RUNS.csv --fit KEY... [--out PROFILE.json]`: fits a declared set
// of constants to published (or a planner's own) runs (scenarios/validation_fit.h).
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace trainsim::cli {

struct FitRunsArgs {
  CLI::App* cmd = nullptr;
  std::string csv;
  std::vector<std::string> keys;
  std::string out;
  std::string fidelity = "analytic";
  std::string format = "text";
};

void add_fit_runs_command(CLI::App* calibrate, FitRunsArgs& args);
int run_fit_runs_command(const FitRunsArgs& args);

}  // namespace trainsim::cli
