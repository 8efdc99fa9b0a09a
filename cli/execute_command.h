// `trainsim execute SCENARIO`: run the scenario's Program for real on GPUs and write the same
// result document (and trace) as `trainsim run`, measured instead of simulated; `trainsim
// compare` then puts the two side by side. See docs/execute.md.
//
// Exit codes: 2 bad arguments or scenario, 3 a Program that this machine cannot hold (more GPUs
// than it has, ranks that do not divide over the processes), 4 no CUDA device (or a build without
// CUDA/NCCL) and any CUDA/NCCL failure or timeout while running.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace trainsim::cli {

struct ExecuteArgs {
  std::string scenario;  // empty = the built-in default scenario
  std::vector<std::string> sets;
  int iterations = 5;
  int warmup = 2;
  double timeout_s = 300;
  std::string format = "json";  // json (the document `compare` reads) | text (the run summary)
  std::string output;           // result; empty or "-" = stdout
  std::string trace;            // Chrome/Perfetto trace file
  std::string trace_ranks;      // "0,1,8-15"; empty = every rank
  // "cuda", or "fake": the recording fake GPU of the tests (every op takes 1 µs; no GPU needed)
  // on `fake_gpus` devices (0: as many as the Program needs).
  std::string backend = "cuda";
  int fake_gpus = 0;
  bool force = false;  // go beyond the work limit (docs/reliability.md)
};

CLI::App* add_execute_command(CLI::App& app, ExecuteArgs& args);
int run_execute_command(const ExecuteArgs& args);

/// "0,1,8-11" → {0, 1, 8, 9, 10, 11}. Throws Error(kInput) naming `field`.
std::vector<int> parse_rank_list(const std::string& list, const std::string& field);

}  // namespace trainsim::cli
