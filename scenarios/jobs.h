// Several jobs on one cluster (`jobs:` in a scenario; docs/network.md "Several jobs on one
// fabric"): where each job's servers are, and the jobs run together and alone.
//
// Placement (place_jobs) takes whole servers. Jobs with `hosts:` are placed first, on exactly
// those servers; the others then take free servers in the order the file lists them:
//   packed      the lowest-numbered free servers;
//   spread      free servers evenly spaced over all the free ones;
//   random      a uniformly random set of the free servers (seeded by `seed` and the job);
//   fragmented  what a busy scheduler leaves: the free servers are walked in order, taking a run
//               of 1-4 and skipping a run of 1-4 (lengths drawn from the seed), again and again,
//               so the job's servers lie in short runs scattered over the cluster.
// A job's ranks fill its servers in rank order (rank r on server hosts[r / gpus_per_node]), so
// its TP groups stay inside servers as Megatron-LM places them.
#pragma once

#include <vector>

#include "calibrate/profile.h"
#include "scenarios/scenario.h"
#include "sim/exec/program_exec.h"

namespace trainsim::scen {

/// Every job's servers, in rank order. Throws Error(kInput) naming the job's entry for jobs that
/// need more GPUs than the cluster has, servers outside the cluster, overlapping `hosts:` lists.
std::vector<std::vector<int>> place_jobs(const Scenario& s);

struct JobOutcome {
  const JobSpec* spec = nullptr;
  std::vector<int> hosts;  // its servers, in rank order
  exec::Result shared;     // run with every other job on the cluster
  exec::Result alone;      // the same job on the same servers of an otherwise idle cluster
  double slowdown = 1;     // shared / alone iteration time
};

struct JobsOutcome {
  std::vector<JobOutcome> jobs;
  exec::JobsResult run;  // the shared run: fabric statistics, makespan, counters
  calib::Profile profile;
};

/// Places and runs the jobs of `s` (s.jobs non-empty) at the scenario's fidelity: at schedule and
/// flow fidelity together on one event core and (flow) one fabric, then each alone for its
/// slowdown; at analytic fidelity each alone (the closed form has no shared network state).
/// `progress` follows the shared run (exec::ExecOptions::progress).
/// Throws as run_scenario, and Error(kInput) for what the jobs cannot use (stragglers, jitter).
JobsOutcome run_scenario_jobs(const Scenario& s, const exec::ProgressFn& progress = {});

}  // namespace trainsim::scen
