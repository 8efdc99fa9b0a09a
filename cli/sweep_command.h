// `trainsim sweep`: registers the subcommand's options and runs it (see docs/sweeps.md).
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace trainsim::cli {

struct SweepArgs {
  std::string scenario;
  std::vector<std::string> sets;
  std::vector<std::string> vary;
  bool auto_parallel = false;
  std::string rank_by = "mfu";
  std::string price;
  int refine = 0;                     // --refine K: the top K again at refine_fidelity
  std::string refine_fidelity = "flow";
  int jobs = 0;  // 0: the machine's cores divided by the ranks on this machine
  std::size_t top = 20;
  std::string format = "text";
  std::string output;
  std::string report;
  std::string checkpoint;
  bool quiet = false;
  bool no_shortcut = false;
  bool goodput = false;  // --goodput (implied by --rank-by goodput)
  std::optional<double> days;  // with --goodput; default scen::GoodputSweep's
  std::optional<long> trials;
};

/// Adds `sweep` to `app`; parsed values land in `args`, which must outlive the parse.
CLI::App* add_sweep_command(CLI::App& app, SweepArgs& args);

/// Runs a parsed `sweep`. Returns the exit code; throws trainsim::Error like the other commands
/// (on rank 0 only: the other ranks of an MPI job return the code silently).
int run_sweep_command(const SweepArgs& args);

}  // namespace trainsim::cli
