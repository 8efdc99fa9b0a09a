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

// A fabric file for `run` (cluster.fabric.file, issue 17's "fabric what-ifs"): the file `topo
// --export dot` writes of a scenario's own Clos gives the same iteration, bit for bit, at flow
// fidelity; the same file with every NIC cable at half speed is slower, and `--compare` puts the
// two side by side; a file without room for the job is refused naming the key.
TEST(FabricFile, RunOnAFabricFileAsOnTheClosItDescribes) {
  const std::string scen = "scenarios/examples/megatron-1.7b-32xa100.yaml";
  const std::string same = temp_path("fabric-same.dot");
  ASSERT_EQ(trainsim("topo " + scen + " --export dot -o " + same).code, 0);
  std::ifstream in(same);
  std::string half_text, line;
  int halved = 0;
  while (std::getline(in, line)) {
    // nicN->leafM [gbps=200, ...]: the NIC's cable at 100 Gb/s.
    if (line.rfind("nic", 0) == 0 && line.find("->leaf") != std::string::npos) {
      const std::size_t at = line.find("gbps=200");
      ASSERT_NE(at, std::string::npos) << line;
      line.replace(at, 8, "gbps=100");
      ++halved;
    }
    half_text += line + "\n";
  }
  ASSERT_EQ(halved, 32);
  const std::string half = temp_path("fabric-half.dot");
  std::ofstream(half) << half_text;

  const auto iteration = [&](const std::string& sets) {
    const CliRun r = trainsim("run " + scen + " --fidelity flow --format json " + sets);
    EXPECT_EQ(r.code, 0) << r.err;
    return r.code == 0 ? nlohmann::json::parse(r.out)["iteration_time_s"].get<double>() : -1.0;
  };
  const double built = iteration("");
  EXPECT_EQ(iteration("--set cluster.fabric.file=" + same), built);
  EXPECT_GT(iteration("--set cluster.fabric.file=" + half), built);

  const CliRun cmp = trainsim("run " + scen + " --fidelity flow --format json --compare "
                              "cluster.fabric.file=" + same + "," + half);
  ASSERT_EQ(cmp.code, 0) << cmp.err;
  const nlohmann::json variants = nlohmann::json::parse(cmp.out)["variants"];
  ASSERT_EQ(variants.size(), 2u) << cmp.out;
  EXPECT_EQ(variants[0]["result"]["iteration_time_s"].get<double>(), built);
  EXPECT_GT(variants[1]["result"]["iteration_time_s"].get<double>(), built);

  // 32 GPUs of fabric for 64: refused, naming the file and the key.
  const CliRun big = trainsim("run " + scen + " --fidelity flow --set cluster.gpus=64 --set parallel.dp=auto "
                              "--set cluster.fabric.file=" + same);
  EXPECT_EQ(big.code, 2) << big.err;
  EXPECT_TRUE(has(big.err, same + ": `cluster.fabric.file`: the fabric holds 32 GPUs")) << big.err;
}

}  // namespace
