// `trainsim calibrate fit-cc`: fits the flow level's contention efficiency of a congestion-control
// algorithm (network.<cc>.contended_efficiency, .incast_penalty) to packet-level incasts on the
// scenario's NICs and packet parameters (sim/network/congestion_fit.h, docs/network.md).
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace trainsim::cli {

struct FitCcArgs {
  CLI::App* cmd = nullptr;
  std::string scenario;
  std::vector<std::string> sets;
  std::string cc;                       // default: the scenario's network.congestion_control
  std::vector<int> senders{2, 4, 8, 16, 32};
  std::vector<std::string> sizes{"4M", "16M"};
  double latency_us = 1.0;
  std::string format = "text";
};

void add_fit_cc_command(CLI::App* calibrate, FitCcArgs& args);
int run_fit_cc_command(const FitCcArgs& args);

}  // namespace trainsim::cli
