// `trainsim calibrate fit-cc`, run as the real executable: the flow level's contention efficiency
// refitted to packet-level incasts on the scenario's NICs and packet keys (docs/network.md,
// "Fitting the flow level"). The built-in defaults come back; other switch settings give another
// fit; bad input exits 2 naming the option.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "tests/support/cli_runner.h"

namespace {

using trainsim::testing::CliRun;
using trainsim::testing::trainsim;

nlohmann::json fit_json(const std::string& args) {
  const CliRun r = trainsim("calibrate fit-cc " + args + " --format json");
  EXPECT_EQ(r.code, 0) << r.err;
  return r.code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

TEST(FitCcCli, TheDefaultsComeBackAndOtherSwitchesFitOtherwise) {
  const nlohmann::json swift = fit_json("--cc swift");
  ASSERT_EQ(swift["points"].size(), 10u);  // 5 incast sizes x 2 message sizes
  EXPECT_EQ(swift["link_Bps"], 25e9);     // the default cluster's 200 Gb/s NICs
  EXPECT_GT(swift["network.swift.contended_efficiency"].get<double>(), 0.995);
  EXPECT_LT(swift["network.swift.incast_penalty"].get<double>(), 0.005);
  EXPECT_LT(swift["max_relative_error"].get<double>(), 0.05);
  for (const auto& p : swift["points"]) {
    EXPECT_NEAR(p["efficiency"].get<double>(),
                p["line_s"].get<double>() / p["cc_s"].get<double>(), 1e-12);
  }
  const nlohmann::json mega = fit_json("--cc megascale");
  const double e = mega["network.megascale.contended_efficiency"].get<double>();
  EXPECT_NEAR(e, 0.995, 0.005);  // the built-in default (sim/network/congestion.h)
  // ECN marking from 100 KB instead of 5 KB: fewer early cuts, a higher efficiency.
  const nlohmann::json late = fit_json(
      "--cc megascale --set network.packet.kmin_bytes=100000 --set network.packet.kmax_bytes=400000");
  EXPECT_GT(late["network.megascale.contended_efficiency"].get<double>(), e);
  // The text names the keys to set.
  const CliRun text = trainsim("calibrate fit-cc --cc swift --senders 2,4 --sizes 1M");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("--set network.swift.contended_efficiency="), std::string::npos)
      << text.out;
}

TEST(FitCcCli, BadInputNamesTheOption) {
  const std::pair<std::string, std::string> cases[] = {
      {"", "--cc"},  // the default scenario's `ideal`
      {"--cc swift --sizes 0", "--sizes"},
      {"--cc swift --senders 1", "--senders"},
      {"--cc dcqcn --set network.packet.kmin_bytes=-1", "network.packet.kmin_bytes"},
  };
  for (const auto& [args, named] : cases) {
    const CliRun r = trainsim("calibrate fit-cc " + args);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_NE(r.err.find(named), std::string::npos) << args << ": " << r.err;
  }
}

}  // namespace
