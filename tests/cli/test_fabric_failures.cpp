// Failed cables and switches as scenario keys (cluster.fabric.failed_cables, failure_seed,
// failed_switches), so that `run --compare` can put a damaged fabric beside the intact one, run as
// the real executable:
//   * the keys fail exactly what `trainsim topo --fail-links K --seed S` and `--fail-switch` fail:
//     the same cables marked down and the same ECMP loads;
//   * at flow fidelity flows route around them: on a 2-tier Clos of 4 leaves and 2 spines that is
//     not rail-optimized, taking one spine out leaves every cross-leaf path on the other, so the
//     ECMP imbalance grows and the run is never faster; the
//     analytic fidelity prices collectives in closed form and reads the same time, with a note;
//   * `topo`'s summary counts the capacity of the cables that are up (bisection included);
//   * bad input: a switch the fabric lacks (exit 2, the key and its file:line named), more cables
//     than the fabric has (exit 2), a failed leaf that cuts a NIC off (exit 3, the NIC named).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/cli_runner.h"

namespace {

using trainsim::testing::CliRun;
using trainsim::testing::has;
using trainsim::testing::temp_path;
using trainsim::testing::trainsim;

const char* kSmall =
    "--set cluster.gpus=256 --set training.global_batch=256 "
    "--set cluster.fabric.rail_optimized=false";

TEST(FabricFailures, ScenarioKeysFailWhatTopoOptionsFail) {
  const CliRun keys = trainsim(std::string("topo ") + kSmall +
                               " --set cluster.fabric.failed_cables=20 "
                               "--set cluster.fabric.failure_seed=7 --seed 7 --traffic permutation "
                               "--format json");
  const CliRun opts = trainsim(std::string("topo ") + kSmall +
                               " --fail-links 20 --seed 7 --traffic permutation --format json");
  ASSERT_EQ(keys.code, 0) << keys.err;
  ASSERT_EQ(opts.code, 0) << opts.err;
  const nlohmann::json a = nlohmann::json::parse(keys.out), b = nlohmann::json::parse(opts.out);
  EXPECT_EQ(a["failures"], b["failures"]);
  EXPECT_EQ(a["failures"]["cables"].size(), 20u);
  EXPECT_EQ(a["traffic"], b["traffic"]);

  const CliRun sw = trainsim(std::string("topo ") + kSmall +
                             " --set cluster.fabric.failed_switches=spine1 --format json");
  const CliRun flag = trainsim(std::string("topo ") + kSmall + " --fail-switch spine1 --format json");
  ASSERT_EQ(sw.code, 0) << sw.err;
  ASSERT_EQ(flag.code, 0) << flag.err;
  EXPECT_EQ(nlohmann::json::parse(sw.out)["failures"]["nodes"], nlohmann::json::array({"spine1"}));
  EXPECT_EQ(nlohmann::json::parse(sw.out)["traffic"], nlohmann::json::parse(flag.out)["traffic"]);
}

// The summary counts the capacity of the cables that are up: the default fabric at 1,024 GPUs is
// 2 tiers with 512 leaf-spine cables of 400 Gb/s (204.8 Tb/s up, bisection 102.4 Tb/s); with 128
// of them down, 384 x 400 Gb/s = 153.6 Tb/s up and a bisection of 76.8 Tb/s (it read 102.4); a
// failed spine takes its 64 cables: 179.2 and 89.6 Tb/s.
TEST(FabricFailures, SummaryCountsTheCablesThatAreUp) {
  const auto fabric = [](const std::string& args) {
    const CliRun r = trainsim("topo --gpus 1024 " + args + " --format json");
    EXPECT_EQ(r.code, 0) << r.err;
    return r.code == 0 ? nlohmann::json::parse(r.out)["fabric"] : nlohmann::json::object();
  };
  const nlohmann::json intact = fabric("");
  EXPECT_DOUBLE_EQ(intact["bisection_Bps"].get<double>(), 512 * 400e9 / 8 / 2);
  EXPECT_EQ(intact["failed_cables"], 0);
  for (const std::string args : {"--fail-links 128", "--set cluster.fabric.failed_cables=128"}) {
    const nlohmann::json f = fabric(args);
    EXPECT_EQ(f["failed_cables"], 128) << args;
    EXPECT_DOUBLE_EQ(f["tiers"][0]["up_Bps"].get<double>(), 384 * 400e9 / 8) << args;
    EXPECT_DOUBLE_EQ(f["bisection_Bps"].get<double>(), 384 * 400e9 / 8 / 2) << args;
  }
  const nlohmann::json spine = fabric("--fail-switch spine0");
  EXPECT_EQ(spine["failed_cables"], 64);
  EXPECT_DOUBLE_EQ(spine["bisection_Bps"].get<double>(), 448 * 400e9 / 8 / 2);
}

TEST(FabricFailures, FlowsRouteAroundAFailedSpine) {
  const CliRun r = trainsim(std::string("run ") + kSmall +
                            " --fidelity flow --compare cluster.fabric.failed_switches=spine0,spine1"
                            " --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const CliRun intact = trainsim(std::string("run ") + kSmall + " --fidelity flow --format json");
  ASSERT_EQ(intact.code, 0) << intact.err;
  const nlohmann::json whole = nlohmann::json::parse(intact.out);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["variants"].size(), 2u);
  const double t0 = whole["iteration_time_s"];
  for (const auto& v : j["variants"]) {
    const nlohmann::json& res = v["result"];
    // One spine left for all cross-leaf paths: never faster, and the flows crowd its links.
    EXPECT_GE(res["iteration_time_s"].get<double>(), t0 * (1 - 1e-12)) << v["label"];
    EXPECT_GT(res["network"]["ecmp_imbalance"].get<double>(),
              whole["network"]["ecmp_imbalance"].get<double>())
        << v["label"];
  }
  // The analytic fidelity does not route: the same time, and a note that says so.
  const CliRun a0 = trainsim(std::string("run ") + kSmall + " --format json");
  const CliRun a1 = trainsim(std::string("run ") + kSmall +
                             " --set cluster.fabric.failed_switches=spine0 --format json");
  ASSERT_EQ(a0.code, 0) << a0.err;
  ASSERT_EQ(a1.code, 0) << a1.err;
  EXPECT_EQ(nlohmann::json::parse(a0.out)["iteration_time_s"],
            nlohmann::json::parse(a1.out)["iteration_time_s"]);
  EXPECT_TRUE(has(nlohmann::json::parse(a1.out)["notes"].dump(), "do not see them")) << a1.out;
}

TEST(FabricFailures, BadFailuresAreNamed) {
  const std::string yaml = temp_path("failures.yaml");
  std::ofstream(yaml) << "cluster:\n  gpus: 256\n  fabric:\n    rail_optimized: false\n"
                         "    failed_switches: spine0+spine9\ntraining:\n  global_batch: 256\n";
  CliRun r = trainsim("run " + yaml);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(has(r.err, "failures.yaml:5")) << r.err;
  EXPECT_TRUE(has(r.err, "cluster.fabric.failed_switches")) << r.err;
  EXPECT_TRUE(has(r.err, "no switch named `spine9`")) << r.err;

  r = trainsim(std::string("run ") + kSmall + " --set cluster.fabric.failed_cables=129");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(has(r.err, "cluster.fabric.failed_cables")) << r.err;
  EXPECT_TRUE(has(r.err, "128 switch-to-switch cables")) << r.err;

  // A leaf of a fabric that is not rail-optimized holds whole servers' NICs: without it they
  // reach nothing, which is an infeasible configuration, not a silently faster run.
  r = trainsim(std::string("run ") + kSmall +
               " --set cluster.fabric.failed_switches=leaf0 --fidelity flow");
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_TRUE(has(r.err, "to the fabric is down")) << r.err;
}

}  // namespace
