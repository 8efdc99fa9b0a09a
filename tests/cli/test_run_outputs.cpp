// `trainsim run` outputs checked against the figures they are made of, through the real CLI: a
// utilisation is its bytes over capacity × the executed iteration, whatever the fidelity; the
// text names each figure's inputs; every output names its seed; a trace adds up to the breakdown.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/cli_runner.h"

namespace trainsim {
namespace {

using nlohmann::json;
using testing::CliRun;
using testing::trainsim;

// Llama 3 8B on 64 H100s (TP 2, DP 32: its TP all-gathers and reduce-scatters run on NVLink),
// with fewer layers to keep the event-driven runs short.
const std::string kLlama8b = "scenarios/examples/llama3-8b-64xh100.yaml --set model.layers=8";
constexpr double kH100NvlinkBps = 450e9;  // per direction (scenarios/presets.cpp)

json run_json(const std::string& args) {
  const CliRun r = trainsim("run " + args + " --format json");
  EXPECT_EQ(r.code, 0) << r.err;
  return r.code == 0 ? json::parse(r.out) : json::object();
}

// network.nvlink_utilization = nvlink_bytes_per_gpu / (NVLink bandwidth × iteration_time_s) at
// every fidelity: the flow fidelity used to keep the analytic run's figure, over the analytic
// iteration time.
TEST(RunOutputs, NvlinkUtilizationIsOverTheExecutedIteration) {
  for (const char* fidelity : {"analytic", "schedule", "flow"}) {
    const json j = run_json(kLlama8b + " --fidelity " + fidelity);
    ASSERT_TRUE(j.contains("network")) << fidelity;
    const double bytes = j["network"]["nvlink_bytes_per_gpu"].get<double>();
    const double iter = j["iteration_time_s"].get<double>();
    ASSERT_GT(bytes, 0) << fidelity;
    EXPECT_NEAR(j["network"]["nvlink_utilization"].get<double>(),
                bytes / (kH100NvlinkBps * iter), 1e-12)
        << fidelity << " fidelity, iteration " << iter << " s";
  }
}

}  // namespace
}  // namespace trainsim
