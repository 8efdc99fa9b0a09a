// `trainsim topo`: build a cluster's fabric and show what it is made of and how a traffic pattern
// loads it under the configured routing, before any training run is simulated.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace trainsim::cli {

struct TopoArgs {
  std::string scenario;  // scenario file; empty = the default scenario
  std::string cluster;   // cluster preset over the default scenario
  int gpus = 0;          // 0 = the scenario's cluster.gpus
  std::vector<std::string> sets;
  int fat_tree = -1;          // k of a k-ary fat tree instead of the scenario's cluster (-1: none)
  std::string topology_file;  // GraphML / GraphViz fabric instead of the scenario's cluster
  std::string traffic;        // ring | dp-ring | permutation | all-to-all | incast; empty = none
  int group = 0;
  int qps = 0;       // 0 = network.routing.qps_per_connection
  std::string mode;  // overrides network.routing.mode
  std::string hash;  // overrides network.routing.hash
  int fail_links = 0;
  std::vector<std::string> fail_switches;
  std::vector<std::string> fail_nics;
  std::uint64_t seed = 1;  // traffic permutation and failed links
  int top = 10;
  std::string export_format;  // dot | json: write the graph instead of the summary
  std::string output;
  std::string format = "text";
  bool force = false;  // go beyond the work limits of docs/reliability.md
};

CLI::App* add_topo_command(CLI::App& app, TopoArgs& args);
int run_topo_command(const TopoArgs& args);

}  // namespace trainsim::cli
