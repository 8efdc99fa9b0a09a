// `trainsim goodput`: a Monte Carlo of a whole training run (failures, checkpoints, restarts)
// on the scenario's cluster; docs/goodput.md. Trials split over threads and, under mpirun, over
// ranks (cli/sweep_transport.h), with the same output whatever the split.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace trainsim::cli {

struct GoodputArgs {
  std::string scenario;
  std::vector<std::string> sets;
  double days = 54;
  long trials = 1000;
  int jobs = 0;  // 0: the machine's cores divided by the ranks on this machine
  bool no_search = false;
  bool force = false;  // run past the work bound (goodput::kMaxFailureEvents)
  std::string format = "text";
  std::string output;
  std::string report;
};

/// Adds `goodput` to `app`; parsed values land in `args`, which must outlive the parse.
CLI::App* add_goodput_command(CLI::App& app, GoodputArgs& args);

/// Runs a parsed `goodput`. Returns the exit code; throws trainsim::Error like the other
/// commands (on rank 0 only: the other ranks of an MPI job return the code silently).
int run_goodput_command(const GoodputArgs& args);

}  // namespace trainsim::cli
