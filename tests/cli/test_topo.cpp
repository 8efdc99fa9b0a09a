// `trainsim topo`, the real executable: fabric summaries, ECMP load, failures, exports, errors.
// Exit codes (DESIGN.md §3): 0 ok, 2 input/usage, 3 infeasible configuration.
#include <gtest/gtest.h>

#include "tests/support/cli_runner.h"
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace {

using trainsim::testing::CliRun;
using trainsim::testing::slurp;
using trainsim::testing::temp_path;
using trainsim::testing::trainsim;

bool has(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

// megascale-ampere at 12,288 GPUs (docs/topology.md): 192 ToRs, 192 aggregation switches,
// 128 cores; 1:1 below the top; 12,288 NIC cables of 200 G.
TEST(TopoCli, MegaScaleSummaryAsJson) {
  const CliRun r = trainsim("topo --cluster megascale-ampere --gpus 12288 --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& tiers = j["fabric"]["tiers"];
  ASSERT_EQ(tiers.size(), 3u);
  EXPECT_EQ(tiers[0]["switches"], 192);
  EXPECT_EQ(tiers[1]["switches"], 192);
  EXPECT_EQ(tiers[2]["switches"], 128);
  EXPECT_EQ(tiers[0]["oversubscription"], 1.0);
  EXPECT_EQ(tiers[1]["oversubscription"], 1.0);
  EXPECT_TRUE(tiers[2]["oversubscription"].is_null());
  EXPECT_EQ(j["fabric"]["gpus"], 12288);
  EXPECT_EQ(j["fabric"]["servers"], 1536);
  bool nic_tor = false;
  for (const auto& c : j["fabric"]["cables"]) {
    if (c["name"] == "nic-tor") {
      nic_tor = true;
      EXPECT_EQ(c["cables"], 12288);
      EXPECT_EQ(c["Bps"], 25e9);
    }
  }
  EXPECT_TRUE(nic_tor);
  EXPECT_EQ(j["fabric"]["bisection_Bps"], 12288 * 25e9 / 2);
  EXPECT_EQ(j["routing"]["mode"], "ecmp");
  EXPECT_FALSE(j.contains("traffic"));
}

// A permutation's ECMP load: every class is reported with max, mean and their ratio; the
// output is byte-identical from run to run.
TEST(TopoCli, TrafficLoadIsDeterministic) {
  const std::string args =
      "topo --cluster dgx-h100-superpod --gpus 4096 --traffic permutation "
      "--qps 4 --seed 3 --format json";
  const CliRun r = trainsim(args);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& t = j["traffic"];
  EXPECT_EQ(t["pattern"], "permutation");
  EXPECT_EQ(t["connections"], 4096);
  EXPECT_EQ(t["flows"], 4 * 4096);
  EXPECT_EQ(t["unrouted"], 0);
  bool leaf_spine = false;
  for (const auto& c : t["classes"]) {
    if (c["name"] != "tor->agg") continue;
    leaf_spine = true;
    EXPECT_GT(c["max_over_mean"].get<double>(), 1.0);
    EXPECT_NEAR(c["max_flows"].get<double>() / c["mean_flows"].get<double>(),
                c["max_over_mean"].get<double>(), 1e-12);
  }
  EXPECT_TRUE(leaf_spine) << t["classes"].dump();
  EXPECT_EQ(t["busiest"].size(), 10u);
  EXPECT_EQ(trainsim(args).out, r.out);
}

TEST(TopoCli, TextSummaryWithTraffic) {
  const CliRun r = trainsim("topo --fat-tree 4 --traffic all-to-all --mode spray");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "fabric: 3-tier Clos (1:1, 1:1)")) << r.out;
  EXPECT_TRUE(has(r.out, "16 GPUs, 16 servers")) << r.out;
  EXPECT_TRUE(has(r.out, "routing: spray")) << r.out;
  EXPECT_TRUE(has(r.out, "traffic: all-to-all over 16 GPUs: 240 connections, 240 flows")) << r.out;
  EXPECT_TRUE(has(r.out, "busiest links:")) << r.out;
}

// A failed ToR in a ring: the report is printed, then the pairs that lost connectivity, exit 3.
TEST(TopoCli, LostConnectivityIsReported) {
  const CliRun r = trainsim("topo --fat-tree 4 --traffic ring --fail-switch tor0");
  EXPECT_EQ(r.code, 3);
  EXPECT_TRUE(has(r.out, "3 without a path")) << r.out;
  EXPECT_TRUE(has(r.err, "3 GPU pairs lost connectivity (3 of 16 flows have no path)")) << r.err;
  EXPECT_TRUE(has(r.err, "gpu1->gpu2")) << r.err;
  EXPECT_TRUE(has(r.err, "gpu15->gpu0")) << r.err;
}

TEST(TopoCli, FailedLinksAreListed) {
  const CliRun r = trainsim("topo --fat-tree 8 --fail-links 5 --seed 9 --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["failures"]["cables"].size(), 5u);
}

// Failing cables never raises the bisection: a k = 4 fat tree has 32 switch-to-switch cables
// (16 edge-aggregation, 16 aggregation-core) and a bisection of k³/8 · 100 G = 0.8 Tb/s; with
// every one failed the edge tier's uplinks carry nothing and the bisection is 0 (it read the
// intact 0.8 Tb/s again, the cut tier being taken for the top one).
TEST(TopoCli, FailingEveryCableCutsTheBisection) {
  const auto bisection = [](int k) {
    const CliRun r = trainsim("topo --fat-tree 4 --fail-links " + std::to_string(k) +
                              " --seed 7 --format json");
    EXPECT_EQ(r.code, 0) << r.err;
    return r.code == 0 ? nlohmann::json::parse(r.out)["fabric"]["bisection_Bps"].get<double>()
                       : -1.0;
  };
  double previous = bisection(0);
  EXPECT_EQ(previous, 0.8e12 / 8);
  for (int k : {8, 16, 24, 31, 32}) {
    const double b = bisection(k);
    EXPECT_LE(b, previous) << k;
    previous = b;
  }
  EXPECT_EQ(previous, 0.0);
  const CliRun text = trainsim("topo --fat-tree 4 --fail-links 32 --seed 7");
  EXPECT_TRUE(has(text.out, "cut (every uplink failed)")) << text.out;
}

// The GraphViz export reads back as a custom fabric with the same shape.
TEST(TopoCli, ExportDotReadsBack) {
  const std::string dot = temp_path("fabric.dot");
  const CliRun w = trainsim("topo --cluster megascale-ampere --gpus 1024 --export dot -o " + dot);
  ASSERT_EQ(w.code, 0) << w.err;
  const CliRun a = trainsim("topo --cluster megascale-ampere --gpus 1024 --format json");
  const CliRun b = trainsim("topo --topology-file " + dot + " --format json");
  ASSERT_EQ(b.code, 0) << b.err;
  const auto ja = nlohmann::json::parse(a.out)["fabric"];
  const auto jb = nlohmann::json::parse(b.out)["fabric"];
  EXPECT_EQ(ja["tiers"], jb["tiers"]);
  EXPECT_EQ(ja["cables"], jb["cables"]);
  EXPECT_EQ(ja["gpus"], jb["gpus"]);
}

TEST(TopoCli, ExportJson) {
  const CliRun r = trainsim("topo --fat-tree 4 --export json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["nodes"].size(), 16u + 16u + 20u);
  EXPECT_EQ(j["links"].size(), 128u);
  EXPECT_EQ(j["links"][0]["Bps"], 12.5e9);
}

TEST(TopoCli, CustomFabricExample) {
  const CliRun r =
      trainsim("topo --topology-file scenarios/examples/dual-plane-8gpu.graphml --traffic ring");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "8 GPUs, 4 servers, 8 NICs")) << r.out;
}

// The dot export cannot mark failed parts, so it refuses a fabric that has some (it wrote them
// as up, and the file read back whole); the JSON export marks each link's `up`.
TEST(TopoCli, DotExportRefusesFailedParts) {
  CliRun r = trainsim("topo --fat-tree 4 --fail-switch core0 --export dot");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(has(r.err, "cannot mark failed parts")) << r.err;
  EXPECT_TRUE(has(r.err, "--export json")) << r.err;
  r = trainsim("topo --fat-tree 4 --fail-links 2 --export dot");
  EXPECT_EQ(r.code, 2) << r.err;
  r = trainsim("topo --fat-tree 4 --fail-switch core0 --export json");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "\"up\": false")) << r.out.substr(0, 400);
  EXPECT_EQ(trainsim("topo --fat-tree 4 --export dot").code, 0);
}

TEST(TopoCli, BadInputIsAClearError) {
  CliRun r = trainsim("topo --fat-tree 5");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "--fat-tree: `5`: a k-ary fat tree needs an even k from 4 to")) << r.err;
  // k = 2 is refused the same way (its 2 hosts need one switch, not three tiers; it built one).
  for (const char* k : {"2", "1"}) {
    r = trainsim(std::string("topo --fat-tree ") + k);
    EXPECT_EQ(r.code, 2) << k;
    EXPECT_TRUE(has(r.err, std::string("--fat-tree: `") + k + "`: a k-ary fat tree needs an even k from 4"))
        << r.err;
  }
  r = trainsim("topo --cluster megascal");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "unknown cluster preset `megascal` (did you mean `megascale-ampere`?)"))
      << r.err;
  r = trainsim("topo --cluster megascale-ampere --set cluster.fabric.switch_radix=16");
  EXPECT_EQ(r.code, 3);
  EXPECT_TRUE(has(r.err, "holds at most 2048 GPUs, not 12288")) << r.err;
  r = trainsim("topo --fat-tree 4 --fail-switch tor99");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "no switch named `tor99`")) << r.err;
  r = trainsim("topo --topology-file scenarios/examples/no-such.graphml");
  EXPECT_EQ(r.code, 2);
  r = trainsim("topo --fat-tree 4 --cluster selene-a100");
  EXPECT_EQ(r.code, 2);  // excluded options
  r = trainsim("topo --fat-tree 6 --traffic dp-ring");
  EXPECT_EQ(r.code, 2);  // 54 GPUs do not split into TP 8 groups
  EXPECT_TRUE(has(r.err, "multiple of tp 8")) << r.err;
}

}  // namespace
