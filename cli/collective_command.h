// `trainsim collective`: an nccl-tests-style benchmark of one collective on a simulated cluster.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace trainsim::cli {

struct CollectiveArgs {
  std::string scenario;
  std::string cluster;
  std::string op = "all_reduce";
  int ranks = 8;
  bool ranks_given = false;  // --ranks on the command line (sendrecv takes only 2)
  int groups = 1;  // concurrent copies (e.g. the 8 DP rings of a server's GPUs)
  std::string placement = "packed";
  std::string sizes = "8:8G";
  std::string dtype = "float";
  std::string algorithm;
  std::string protocol;
  std::string fidelity = "analytic";
  std::string format = "text";
  std::vector<std::string> sets;
};

CLI::App* add_collective_command(CLI::App& app, CollectiveArgs& args);
int run_collective_command(const CollectiveArgs& args);

}  // namespace trainsim::cli
