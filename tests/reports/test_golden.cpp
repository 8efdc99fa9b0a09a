// Golden whole-run outputs (STYLE.md habit 11): small scenarios whose full JSON result is checked
// in under tests/golden/ and compared field by field (numbers to 1e-9 relative). A change to the
// performance model changes these on purpose: regenerate with
//   TRAINSIM_UPDATE_GOLDEN=1 ctest -R Golden
// and bump exec::kAnalyticModelVersion when the numbers move.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "reports/summary.h"
#include "scenarios/run_config.h"
#include "scenarios/scenario.h"

namespace trainsim::reports {
namespace {

using nlohmann::json;

void compare(const json& want, const json& got, const std::string& path) {
  ASSERT_EQ(want.type(), got.type()) << path;
  if (want.is_object()) {
    ASSERT_EQ(want.size(), got.size()) << path << ": " << got.dump();
    for (auto it = want.begin(); it != want.end(); ++it) {
      ASSERT_TRUE(got.contains(it.key())) << path << "." << it.key();
      compare(it.value(), got[it.key()], path + "." + it.key());
    }
  } else if (want.is_array()) {
    ASSERT_EQ(want.size(), got.size()) << path;
    for (size_t i = 0; i < want.size(); ++i) compare(want[i], got[i], path + "[" + std::to_string(i) + "]");
  } else if (want.is_number_float() || got.is_number_float()) {
    const double a = want.get<double>(), b = got.get<double>();
    EXPECT_LE(std::fabs(a - b), 1e-9 * std::max(std::fabs(a), 1e-300)) << path;
  } else {
    EXPECT_EQ(want, got) << path;
  }
}

void check_golden(const std::string& scenario, const std::string& golden) {
  const std::string root = TRAINSIM_SOURCE_DIR;
  const scen::Scenario s = scen::load_scenario_file(scenario);
  const exec::RunConfig cfg = scen::make_run_config(s);
  const std::string text = result_json_text(scen::run_scenario(s, cfg), s, cfg.profile);
  const std::string path = root + "/tests/golden/" + golden;
  if (std::getenv("TRAINSIM_UPDATE_GOLDEN")) {
    std::ofstream(path) << text;
    GTEST_SKIP() << "rewrote " << path;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in) << "missing golden file " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  compare(json::parse(ss.str()), json::parse(text), "$");
}

// The packet line says how long switch ports held more than their buffer when they did (the
// packet level drops nothing; without PFC a queue outgrew its buffer silently), and nothing
// when they did not.
TEST(PacketsLine, SaysWhenPortsHeldMoreThanTheirBuffer) {
  exec::NetworkStats n;
  n.packets.packets = 10;
  EXPECT_EQ(packets_line(n).find("buffer_bytes"), std::string::npos) << packets_line(n);
  EXPECT_EQ(packets_json(n)["time_above_buffer_s"].get<double>(), 0.0);
  n.packets.time_above_buffer_s = 0.0125;
  EXPECT_NE(packets_line(n).find("held more than network.packet.buffer_bytes for 12.500 ms"),
            std::string::npos)
      << packets_line(n);
  EXPECT_EQ(packets_json(n)["time_above_buffer_s"].get<double>(), 0.0125);
}

TEST(Golden, Megatron17BOn32A100) {
  check_golden("scenarios/examples/megatron-1.7b-32xa100.yaml", "megatron-1.7b-32xa100.json");
}

TEST(Golden, Llama3_8BOn64H100) {
  check_golden("scenarios/examples/llama3-8b-64xh100.yaml", "llama3-8b-64xh100.json");
}

}  // namespace
}  // namespace trainsim::reports
