// Loading a scenario: YAML, `--set` overrides and presets into the plain config structs.
//
// A scenario is a set of keys from the schema (schema.h). Each key's value comes from, in rising
// precedence: the schema default, a preset (`model.preset` fills model.*, `cluster.preset` fills
// cluster.*), the `optimizations.system` group (fills the levers), the YAML file, `--set`. Then
// derived settings are resolved (parallel.dp auto, kv_heads and ffn_hidden 0, the schedule, the
// optimizer) and the whole is checked for what a scenario alone can decide: known keys, types,
// model sanity, the GPU count against the parallel layout and the fabric. What needs the planner
// (TP dividing heads, batch divisibility, memory) is left to it.
//
// The schema defaults describe the project's default run (MegaScale 175B on 12,288 GPUs), so an
// empty scenario is that run. A default gives way where it would contradict what a scenario says:
// model.preset when model.layers, model.hidden or model.heads is given; cluster.preset when
// cluster.gpu is given (the GPU's usual cluster then); cluster.gpus when parallel.dp is a number
// (tp·pp·dp·cp then); parallel.vpp when parallel.pp is 1 or the schedule is gpipe or 1f1b (1 then).
//
// Every problem throws trainsim::Error: kInput with file, 1-based line, key and a hint for what is
// malformed, kInfeasible for a well-formed layout that cannot run on the GPUs given.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/error.h"
#include "sim/model/transformer.h"
#include "sim/plan/config.h"
#include "topology/hardware.h"
#include "sim/collective/analytic.h"
#include "sim/exec/scale.h"
#include "sim/network/congestion.h"
#include "sim/network/packet_network.h"
#include "topology/routing.h"

namespace trainsim::scen {

/// The event-driven fidelities' options (`simulation.*`).
struct SimulationOptions {
  bool symmetry = true;
  double jitter = 0;
  int straggler_rank = -1;
  int straggler_host = -1;
  double straggler_factor = 1.0;
};

struct JobSpec;

struct Scenario {
  std::string source;  // file path, or the name given to the string loaders
  model::ModelConfig model;
  topo::ClusterSpec cluster;      // cluster.gpu filled from the GPU preset; gpus = the job's GPUs
  plan::ParallelConfig parallel;  // dp resolved (never "auto" here)
  plan::TrainingConfig training;
  plan::Optimizations opt;
  topo::RoutingConfig routing;  // network.routing.*
  net::NetworkConfig network;   // network.congestion_control and its parameters
  net::PacketConfig packet;     // network.packet.*: the packet level's ports, PFC and ECN
  coll::Choice collectives;     // collectives.algorithm / collectives.protocol (unset = auto)
  std::string system = "none";  // optimizations.system
  std::string framework;        // framework.preset, resolved (never "auto")
  bool recompute_auto = false;  // training.recompute: auto (choose_recompute picks it)
  exec::ScaleConfig scale;      // scale.*
  std::string calibration_profile = "datasheet";
  std::string fidelity = "analytic";
  std::uint64_t seed = 1;
  SimulationOptions simulation;
  // Every schema key -> its final value as canonical text (derived values resolved).
  std::map<std::string, std::string> values;
  // Key -> "default" | "preset <name>" | "system <name>" | "framework <name>" | "<file>:<line>" |
  // "--set" | "derived" (build_scenario: the name it was given).
  std::map<std::string, std::string> origin;
  // The keys the scenario states itself (its file, --set, or build_scenario's map), as it states
  // them (canonical text; `auto` stays `auto` where `values` holds what it resolved to): what a
  // sweep point inherits from its base, so that each point resolves its presets and its `auto`
  // keys for itself.
  std::map<std::string, std::string> given;
  // Derived settings worth telling the user, e.g.
  // "parallel.dp = 192 (auto: 12288 GPUs / (tp 8 · pp 8 · cp 1))".
  std::vector<std::string> notes;
  // A multi-job scenario (`jobs:`, docs/network.md "Several jobs on one fabric"): the jobs that
  // share this scenario's cluster. Empty for the usual one-job scenario. The scenario's own
  // model and parallel keys are then the jobs' defaults, and cluster.gpus is the cluster's size.
  std::vector<JobSpec> jobs;
};

/// One job of a multi-job scenario: its entry's own keys (`name`, `gpus`, `placement`, `hosts`,
/// `start_s`, `iterations`) and its scenario, which is the file's keys with the entry's other keys over them
/// (the file's cluster-wide sections, `cluster`, `network`, `calibration`, `collectives` and
/// `simulation` (the seed too), cannot be given per job), `--set` over both, and cluster.gpus the
/// job's GPUs.
struct JobSpec {
  std::string name;
  std::string placement = "packed";  // packed | spread | random | fragmented | hosts
  std::vector<int> hosts;            // the servers `hosts:` names, in rank order
  double start_s = 0;                // when its first iteration starts, seconds after time 0
  int iterations = 1;                // iterations back to back (its result: the mean one)
  ErrorContext where;                // the entry in the file (its first line)
  Scenario scenario;
};

/// Placements a job may ask for.
inline constexpr const char* kJobPlacements[] = {"packed", "spread", "random", "fragmented",
                                                 "hosts"};

/// Loads a YAML scenario file, then applies `sets` ("key.path=value", later ones win).
Scenario load_scenario_file(const std::string& path, const std::vector<std::string>& sets = {});

/// As load_scenario_file, for YAML text; `name` stands for the file in messages and origins.
Scenario load_scenario_string(std::string_view yaml, const std::string& name,
                              const std::vector<std::string>& sets = {});

/// The scenario of an empty YAML: the project's default run. Source "<default>".
Scenario default_scenario();

/// Where a key's value came from, as the location of an error about it: a value from the file
/// gives that file and line, `--set` gives "--set", a preset or system group gives "preset X" /
/// "system X", a default "built-in default", a derived value "derived value". Messages name what
/// the user wrote, never the scenario file for a value it does not contain.
ErrorContext origin_of(const Scenario& s, const std::string& key);
/// The same for one origin text as stored in Scenario::origin.
ErrorContext origin_context(const std::string& origin, const std::string& key);

/// Throws Error(kInput) at the first job's entry when `s` lists jobs: `command` takes one job
/// (`trainsim run` is the command for several).
void require_one_job(const Scenario& s, const std::string& command);

/// Builds from values already flattened to dotted keys (e.g. columns of published-runs.csv), with
/// the same rules and errors as the YAML loaders; `name` stands for the file in messages and is
/// the origin of every given value. An empty value means "not given" (a blank CSV cell).
Scenario build_scenario(const std::map<std::string, std::string>& flat_values,
                        const std::string& name);

}  // namespace trainsim::scen
