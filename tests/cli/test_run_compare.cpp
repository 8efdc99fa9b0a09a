// `trainsim run SCENARIO --compare KEY=VALUES`, run as the real executable: one variant per value
// (every combination), each exactly the run that `--set KEY=VALUE` gives, the link utilisation
// per class at flow fidelity consistent with the NIC figure, the report, and clear errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "scenarios/variants.h"
#include "sim/core/error.h"
#include "tests/support/cli_runner.h"

namespace {

using trainsim::testing::CliRun;
using trainsim::testing::slurp;
using trainsim::testing::temp_path;
using trainsim::testing::trainsim;

const char* kSmall = "scenarios/examples/megatron-1.7b-32xa100.yaml";

bool has(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

TEST(RunCompare, PlanIsEveryCombinationFirstKeySlowest) {
  const trainsim::scen::VariantPlan p = trainsim::scen::plan_variants(
      {"cluster.fabric.oversubscription=1,2", "network.routing.qps_per_connection=1:4:x4"});
  ASSERT_EQ(p.configs.size(), 4u);
  EXPECT_EQ(p.configs[1][0].second, "1");
  EXPECT_EQ(p.configs[1][1].second, "4");
  EXPECT_EQ(p.configs[2][0].second, "2");
  EXPECT_EQ(p.configs[2][1].second, "1");
  try {
    trainsim::scen::plan_variants({"parallel.tp=1,2", "parallel.tp=4"});
    ADD_FAILURE() << "a key given twice was accepted";
  } catch (const trainsim::Error& e) {
    EXPECT_EQ(e.where().file, "--compare");
    EXPECT_EQ(e.where().field, "parallel.tp");
  }
  EXPECT_THROW(trainsim::scen::plan_variants({"parallel.tp=1:9", "parallel.pp=1:8"}, 64),
               trainsim::Error);  // 72 variants
}

// Each variant is the plain run of its values, bit for bit, and the NIC class of the link table
// averages the same links as the NIC utilisation figure.
TEST(RunCompare, EachVariantIsThePlainRun) {
  const std::string json = temp_path("compare.json"), report = temp_path("compare_report");
  const CliRun r = trainsim(std::string("run ") + kSmall +
                            " --fidelity flow --compare cluster.fabric.oversubscription=1,2"
                            " --compare training.micro_batch=1,2 --format json -o " + json +
                            " --report " + report);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");  // no progress when stderr is not a terminal
  const nlohmann::json j = nlohmann::json::parse(slurp(json));
  EXPECT_EQ(j["fidelity"], "flow");
  ASSERT_EQ(j["variants"].size(), 4u);
  EXPECT_EQ(j["variants"][3]["label"], "oversubscription=2 micro_batch=2");
  for (const auto& v : j["variants"]) {
    const CliRun plain = trainsim(
        std::string("run ") + kSmall + " --fidelity flow --format json --set " +
        "cluster.fabric.oversubscription=" + v["config"]["cluster.fabric.oversubscription"].get<std::string>() +
        " --set training.micro_batch=" + v["config"]["training.micro_batch"].get<std::string>());
    ASSERT_EQ(plain.code, 0) << plain.err;
    const nlohmann::json p = nlohmann::json::parse(plain.out);
    EXPECT_EQ(v["result"]["mfu"], p["mfu"]) << v["label"];
    EXPECT_EQ(v["result"]["iteration_time_s"], p["iteration_time_s"]);
    const auto& net = v["result"]["network"];
    ASSERT_TRUE(net.contains("link_classes")) << net.dump();
    bool nic = false;
    for (const auto& c : net["link_classes"]) {
      if (c["class"].get<std::string>().rfind("nic->", 0) == 0) {
        nic = true;
        EXPECT_DOUBLE_EQ(c["mean_utilization"].get<double>(), net["nic_utilization"].get<double>());
        EXPECT_GE(c["max_utilization"].get<double>(), c["mean_utilization"].get<double>());
      }
    }
    EXPECT_TRUE(nic);
  }
  EXPECT_TRUE(std::filesystem::exists(report + "/index.html"));
  EXPECT_TRUE(has(slurp(report + "/results.csv"), "oversubscription=2 micro_batch=1"));
  std::filesystem::remove(json);
  std::filesystem::remove_all(report);
}

TEST(RunCompare, TextTableListsEveryVariantAndTheLinkClasses) {
  const CliRun r = trainsim(std::string("run ") + kSmall +
                            " --fidelity flow --compare network.routing.qps_per_connection=1,4");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "variants  2: network.routing.qps_per_connection")) << r.out;
  EXPECT_TRUE(has(r.out, "qps_per_connection=4")) << r.out;
  EXPECT_TRUE(has(r.out, "link utilisation by class")) << r.out;
  const CliRun analytic =
      trainsim(std::string("run ") + kSmall + " --compare training.micro_batch=1,2");
  ASSERT_EQ(analytic.code, 0) << analytic.err;
  EXPECT_TRUE(has(analytic.out, "--fidelity flow for every tier")) << analytic.out;
}

TEST(RunCompare, BadInputIsAClearError) {
  const CliRun unknown =
      trainsim(std::string("run ") + kSmall + " --compare cluster.fabric.oversubscriptio=1,2");
  EXPECT_EQ(unknown.code, 2);
  EXPECT_TRUE(has(unknown.err, "--compare: `cluster.fabric.oversubscriptio`: unknown key"))
      << unknown.err;
  const CliRun bad = trainsim(std::string("run ") + kSmall + " --compare parallel.tp=eight");
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(has(bad.err, "--compare: `parallel.tp`")) << bad.err;
  const CliRun trace = trainsim(std::string("run ") + kSmall +
                                " --fidelity schedule --compare parallel.tp=1,2 --trace t.json");
  EXPECT_EQ(trace.code, 2);
  EXPECT_TRUE(has(trace.err, "--compare runs several")) << trace.err;
  // A variant that cannot run names itself.
  const CliRun variant = trainsim(std::string("run ") + kSmall + " --compare parallel.tp=1,7");
  EXPECT_EQ(variant.code, 3) << variant.err;
  EXPECT_TRUE(has(variant.err, "variant tp=7")) << variant.err;
  // ... at the flag that set its value (it said `--set`, which the variants are applied as).
  EXPECT_TRUE(has(variant.err, "--compare: `parallel.tp`: variant tp=7")) << variant.err;
}

}  // namespace
