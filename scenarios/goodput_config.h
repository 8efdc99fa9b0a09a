// Turns a scenario into the goodput model's inputs (sim/goodput): the `reliability.*` keys, the
// job's component counts (GPUs, hosts, NICs, and the switches and cables of its fabric plan), the
// iteration time and tokens/s of the scenario at its fidelity, the start-up time of communicator
// initialization (sim/collective/comm_init.h through the scenario's optimizations.fast_comm_init),
// the checkpoint's size from the memory model and its costs, and, when slow hosts can occur, the
// iteration slow-down one slow host causes (the straggler model of the schedule fidelity).
//
// Errors are trainsim::Error(kInput) naming the `reliability.*` key and where it was given.
#pragma once

#include <string>
#include <vector>

#include "scenarios/scenario.h"
#include "sim/goodput/goodput.h"

namespace trainsim::scen {

struct GoodputSetup {
  goodput::Params params;
  std::vector<std::string> class_keys;  // the rate key of each of params.classes
  goodput::CheckpointSpec checkpoint;
  goodput::CheckpointCosts checkpoint_costs;
  bool interval_auto = false;           // reliability.checkpoint.interval was `auto` (Daly)
  double iteration_time_s = 0;
  double tokens_per_s = 0;
  std::string fidelity;
  std::string comm_init_store;          // "tcpstore" or "redis"
  bool fast_comm_init = false;
  double slow_host_slowdown = 1;        // reliability.slow_node.slowdown (compute of one host)
  std::vector<std::string> notes;
};

/// Reads the scenario for a run of `days` days, seeded with simulation.seed.
GoodputSetup goodput_setup(const Scenario& s, double days);

/// The `reliability.*` key that a goodput::check field name stands for ("interval_s" ->
/// "reliability.checkpoint.interval"); the field itself when none.
std::string reliability_key_of(const std::string& field);

}  // namespace trainsim::scen
