// Placing the jobs of a multi-job scenario on the cluster's servers (scenarios/jobs.h): each
// placement's shape, determinism under the seed, explicit lists first, and the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "scenarios/jobs.h"
#include "scenarios/scenario.h"
#include "sim/core/error.h"

namespace {

using trainsim::scen::load_scenario_string;
using trainsim::scen::place_jobs;

// 64 servers of 8 GPUs; jobs of the 1.3B-class model at TP 8, PP 1.
std::string cluster_with(const std::string& jobs, int seed = 1) {
  return "cluster: {preset: dgx-h100-superpod, gpus: 512}\nmodel: {preset: gpt3-760m}\n"
         "parallel: {tp: 8, pp: 1}\ntraining: {global_batch: 64, micro_batch: 1}\n"
         "simulation: {seed: " +
         std::to_string(seed) + "}\njobs:\n" + jobs;
}

int runs(const std::vector<int>& hosts) {
  int n = 0;
  for (std::size_t i = 0; i < hosts.size(); ++i) n += i == 0 || hosts[i] != hosts[i - 1] + 1;
  return n;
}

TEST(Jobs, PlacementsTakeWholeDistinctServers) {
  const auto s = load_scenario_string(
      cluster_with("  - {name: pinned, hosts: \"0-3,60-63\"}\n"
                   "  - {name: p, gpus: 64, placement: packed}\n"
                   "  - {name: s, gpus: 64, placement: spread}\n"
                   "  - {name: r, gpus: 64, placement: random}\n"
                   "  - {name: f, gpus: 64, placement: fragmented}\n"),
      "jobs.yaml");
  ASSERT_EQ(s.jobs.size(), 5u);
  EXPECT_EQ(s.jobs[0].placement, "hosts");
  EXPECT_EQ(s.jobs[0].scenario.cluster.gpus, 64);
  EXPECT_EQ(s.jobs[1].scenario.parallel.dp, 8);  // dp follows the job's GPUs
  EXPECT_EQ(s.cluster.gpus, 512);
  const auto hosts = place_jobs(s);
  std::set<int> seen;
  for (const auto& h : hosts) {
    EXPECT_EQ(h.size(), 8u);
    EXPECT_TRUE(std::is_sorted(h.begin(), h.end()));
    for (int x : h) EXPECT_TRUE(seen.insert(x).second) << "server " << x << " placed twice";
  }
  EXPECT_EQ(hosts[0], (std::vector<int>{0, 1, 2, 3, 60, 61, 62, 63}));
  // Packed: the lowest free servers.
  EXPECT_EQ(hosts[1], (std::vector<int>{4, 5, 6, 7, 8, 9, 10, 11}));
  // Spread: evenly over the 48 free servers, every sixth.
  EXPECT_EQ(hosts[2], (std::vector<int>{12, 18, 24, 30, 36, 42, 48, 54}));
  EXPECT_GT(runs(hosts[3]), 1);
  // Fragmented: short runs (1-4 servers) with gaps between them.
  EXPECT_GE(runs(hosts[4]), 2);
  int run = 1;
  for (std::size_t i = 1; i < hosts[4].size(); ++i) {
    run = hosts[4][i] == hosts[4][i - 1] + 1 ? run + 1 : 1;
    EXPECT_LE(run, 4);
  }
  // The same seed places the same way; another seed differently.
  const auto again = place_jobs(load_scenario_string(
      cluster_with("  - {name: pinned, hosts: \"0-3,60-63\"}\n"
                   "  - {name: p, gpus: 64, placement: packed}\n"
                   "  - {name: s, gpus: 64, placement: spread}\n"
                   "  - {name: r, gpus: 64, placement: random}\n"
                   "  - {name: f, gpus: 64, placement: fragmented}\n"),
      "jobs.yaml"));
  EXPECT_EQ(again, hosts);
  const auto other = place_jobs(load_scenario_string(
      cluster_with("  - {name: r, gpus: 64, placement: random}\n", 7), "jobs.yaml"));
  const auto first = place_jobs(load_scenario_string(
      cluster_with("  - {name: r, gpus: 64, placement: random}\n", 1), "jobs.yaml"));
  EXPECT_NE(other[0], first[0]);
}

TEST(Jobs, AJobsOwnKeysOverrideTheFilesAndSetOverridesBoth) {
  const auto s = load_scenario_string(
      cluster_with("  - {name: a, gpus: 128, parallel: {pp: 2}, model: {preset: gpt3-2.7b}}\n"
                   "  - {name: b, gpus: 64}\n"),
      "jobs.yaml", {"training.global_batch=128"});
  EXPECT_EQ(s.jobs[0].scenario.parallel.pp, 2);
  EXPECT_EQ(s.jobs[0].scenario.parallel.dp, 8);
  EXPECT_EQ(s.jobs[0].scenario.model.layers, 32);
  EXPECT_EQ(s.jobs[1].scenario.parallel.pp, 1);
  EXPECT_EQ(s.jobs[1].scenario.model.layers, 24);
  EXPECT_EQ(s.jobs[0].scenario.training.global_batch, 128);
  EXPECT_EQ(s.jobs[1].scenario.training.global_batch, 128);
  // --set cluster.gpus sizes the cluster, not the jobs; --set cluster.gpus_per_node reaches both.
  const auto t = load_scenario_string(
      cluster_with("  - {name: a, gpus: 64}\n"), "jobs.yaml",
      {" cluster.gpus = 1024", "cluster.gpus_per_node=4", "cluster.nics_per_node=4"});
  EXPECT_EQ(t.cluster.gpus, 1024);
  EXPECT_EQ(t.jobs[0].scenario.cluster.gpus, 64);
  EXPECT_EQ(t.jobs[0].scenario.cluster.gpus_per_node, 4);
  // The job's key is located at its own line.
  EXPECT_EQ(s.jobs[0].scenario.origin.at("parallel.pp"), "jobs.yaml:7");
}

TEST(Jobs, ErrorsNameTheJobsEntry) {
  const auto expect_error = [](const std::string& jobs, const std::string& field,
                               const std::string& what) {
    try {
      place_jobs(load_scenario_string(cluster_with(jobs), "jobs.yaml"));
      ADD_FAILURE() << "accepted: " << jobs;
    } catch (const trainsim::Error& e) {
      EXPECT_EQ(e.kind(), trainsim::ErrorKind::kInput) << e.what();
      EXPECT_EQ(e.where().file, "jobs.yaml");
      EXPECT_EQ(e.where().field, field) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect_error("  - {name: a, gpus: 256}\n  - {name: b, gpus: 512}\n", "cluster.gpus",
               "the jobs need 768 GPUs");
  expect_error("  - {name: a, hosts: [1, 2]}\n  - {name: b, hosts: [2]}\n", "jobs[1].hosts",
               "server 2 is also in job `a`");
  expect_error("  - {name: a, gpus: 12}\n", "jobs[0].gpus", "not a whole number of 8-GPU servers");
  expect_error("  - {name: a, gpus: 16, hosts: [0]}\n", "jobs[0].gpus", "1 servers of 8 GPUs");
  expect_error("  - {name: a, gpus: 8, simulation: {seed: 3}}\n", "jobs[0].simulation.seed",
               "not one job");
  expect_error("  - {name: a, gpus: 8, placement: hosts}\n", "jobs[0]", "needs the list of servers");
}

}  // namespace
