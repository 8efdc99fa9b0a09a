// `trainsim sweep` and `--report`, run as the real executable: the MegaScale --auto sweep within a
// minute with the paper's configuration ranked, byte-identical results whatever the thread count,
// resuming, the report folders, and clear errors for bad input.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/support/cli_runner.h"
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace {

using trainsim::testing::CliRun;
using trainsim::testing::slurp;
using trainsim::testing::temp_path;
using trainsim::testing::trainsim;

bool has(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

const char* kMegascale = "scenarios/megascale-175b-12288.yaml";
const char* kSmall = "scenarios/examples/megatron-1.7b-32xa100.yaml";

// The acceptance run: every factorization of 12,288 GPUs at analytic fidelity in under a
// minute on two cores, MegaScale's own TP 8 · PP 8 · vpp 6 configuration listed with its rank,
// and the infeasible points grouped by reason.
TEST(SweepCli, MegascaleAutoRanksThePapersConfiguration) {
  const CliRun r = trainsim(std::string("sweep ") + kMegascale + " --auto --jobs 2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_LT(r.seconds, 60.0 * trainsim::testing::kWallClockScale);
  EXPECT_TRUE(has(r.out, "rank     MFU  tokens/s")) << r.out;
  EXPECT_TRUE(has(r.out, "(ranked at analytic fidelity: each collective on idle links, no ECMP; "
                         "--refine K re-runs the top K and the scenario's own configuration at "
                         "flow fidelity)"))
      << r.out;
  EXPECT_TRUE(has(r.out,
                  "base configuration (tp=8 pp=8 dp=192 cp=1 ep=1 vpp=6 "
                  "schedule=interleaved micro_batch=1 recompute=selective zero=1): rank "))
      << r.out;
  EXPECT_TRUE(has(r.out, "`parallel.tp`: TP # does not divide the # attention heads")) << r.out;
  EXPECT_TRUE(has(r.out, "does not fit in memory: needs # GiB of # GiB per GPU")) << r.out;
  EXPECT_TRUE(has(r.err, "points evaluated in")) << r.err;  // progress, on stderr
}

// The same --auto sweep, one thread and two: the same bytes (180 MB of JSON, compared on disk).
TEST(SweepCli, ByteIdenticalWhateverTheThreads) {
  const std::string one = temp_path("auto_j1.json"), two = temp_path("auto_j2.json");
  const std::string args = std::string("sweep ") + kMegascale + " --auto -q --format json -o ";
  ASSERT_EQ(trainsim(args + one + " --jobs 1").code, 0);
  ASSERT_EQ(trainsim(args + two + " --jobs 2").code, 0);
  EXPECT_GT(std::filesystem::file_size(one), 100'000'000u);
  EXPECT_EQ(std::system(("cmp -s " + one + " " + two).c_str()), 0)
      << "--jobs 1 and --jobs 2 wrote different results";
  std::filesystem::remove(one);
  std::filesystem::remove(two);
}

TEST(SweepCli, JsonListsEveryPoint) {
  const CliRun r = trainsim(std::string("sweep ") + kSmall + " --auto -q --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["summary"]["points"], 5796);
  EXPECT_EQ(doc["results"].size(), 5796u);
  EXPECT_EQ(doc["results"][0]["rank"], 1);
  EXPECT_EQ(doc["keys"][0], "parallel.tp");
}

// A sweep ranks every point it is given, also those the scenario's framework version could not
// run (MegaScale's megascale-2024 is Megatron-LM of 2023 underneath: its distributed optimizer is
// ZeRO-1 at most). Such a leader is named, with the best point within the framework (text; JSON
// gives the limits and best_rank). TP 16 · PP 1 at micro-batch 8 with ZeRO-2 led --auto until
// analytic-41 (rank 119 since: docs/sweeps.md); here its ZeRO-1 twin needs 99.8 GiB, and at
// micro-batch 1 both run.
TEST(SweepCli, NamesALeaderBeyondTheFramework) {
  const std::string vary = std::string("sweep ") + kMegascale +
                           " --vary parallel.tp=16 --vary parallel.pp=1 --vary parallel.vpp=1"
                           " --vary parallel.schedule=1f1b --vary training.recompute=none"
                           " --vary parallel.zero=1,2 -q";
  const CliRun j = trainsim(vary + " --vary training.micro_batch=1,8 --format json");
  ASSERT_EQ(j.code, 0) << j.err;
  const auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["framework"]["preset"], "megascale-2024");
  EXPECT_EQ(doc["framework"]["max_zero"], 1);
  EXPECT_EQ(doc["framework"]["context_parallel"], false);
  const auto& results = doc["results"];
  ASSERT_EQ(results[0]["config"]["parallel.zero"], "2");
  // best_rank: the first ranked point at ZeRO 1.
  int within = 0;
  for (const auto& x : results) {
    if (x["status"] == "ok" && x["config"]["parallel.zero"] == "1") {
      within = x["rank"].get<int>();
      break;
    }
  }
  ASSERT_GT(within, 1);
  EXPECT_EQ(doc["framework"]["best_rank"], within);
  const CliRun t = trainsim(vary + " --vary training.micro_batch=1,8");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_TRUE(has(t.out, "rank 1 asks what framework.preset megascale-2024 (2024-02) did not "
                         "have: ZeRO 2 (its highest is 1); the best it can run is rank " +
                             std::to_string(within) + " at "))
      << t.out;
  // The HTML report's summary names it too.
  const std::string dir = temp_path("beyond_framework_report");
  const CliRun rep = trainsim(vary + " --vary training.micro_batch=1,8 --report " + dir);
  ASSERT_EQ(rep.code, 0) << rep.err;
  const std::string html = slurp(dir + "/index.html");
  EXPECT_TRUE(has(html, "best within megascale-2024")) << html.substr(0, 2000);
  EXPECT_TRUE(has(html, "rank " + std::to_string(within) + " at ")) << html.substr(0, 2000);
  std::filesystem::remove_all(dir);
  // Micro-batch 8 alone: the ZeRO-1 point does not fit, so no point is within the framework.
  const CliRun none = trainsim(vary + " --vary training.micro_batch=8");
  ASSERT_EQ(none.code, 0) << none.err;
  EXPECT_TRUE(has(none.out, "ZeRO 2 (its highest is 1); no feasible point is within it"))
      << none.out;
  // A sweep over frameworks has no one set of limits: none is reported.
  const CliRun fw = trainsim(vary + " --vary training.micro_batch=8"
                                    " --vary framework.preset=megascale-2024,torchtitan-2024"
                                    " --format json");
  ASSERT_EQ(fw.code, 0) << fw.err;
  EXPECT_TRUE(nlohmann::json::parse(fw.out)["framework"].is_null());
}

TEST(SweepCli, VaryFormatsAndPrice) {
  const CliRun csv = trainsim(std::string("sweep ") + kMegascale +
                              " --vary parallel.pp=4:16:*2 --vary training.micro_batch=1,2 -q "
                              "--format csv --gpu-hour-price 2.5USD/h --rank-by cost");
  ASSERT_EQ(csv.code, 0) << csv.err;
  EXPECT_TRUE(has(csv.out, "rank,point,status,parallel.pp,training.micro_batch,")) << csv.out;
  EXPECT_TRUE(has(csv.out, "cost_per_mtok_USD")) << csv.out;
  const CliRun text = trainsim(std::string("sweep ") + kMegascale +
                               " --vary parallel.pp=4:16:*2 -q --gpu-hour-price 2.5USD");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_TRUE(has(text.out, "USD/Mtok")) << text.out;
  EXPECT_TRUE(has(text.out, "GPU-hour price 2.5 USD")) << text.out;
  // Each --vary takes one argument: the scenario may follow it.
  const CliRun after = trainsim(std::string("sweep --vary parallel.pp=4,8 ") + kMegascale + " -q");
  ASSERT_EQ(after.code, 0) << after.err;
  EXPECT_TRUE(has(after.out, "scenario  scenarios/megascale-175b-12288.yaml")) << after.out;
}

TEST(SweepCli, ResumesFromACheckpoint) {
  const std::string cp = temp_path("cli.checkpoint");
  std::filesystem::remove(cp);
  const std::string args =
      std::string("sweep ") + kSmall + " --auto --format json --checkpoint " + cp;
  const CliRun full = trainsim(args);
  ASSERT_EQ(full.code, 0) << full.err;
  // Keep the header and 1000 results, as if the first run had been killed.
  std::ifstream in(cp);
  std::string text, line;
  for (int i = 0; i < 1001 && std::getline(in, line); ++i) text += line + "\n";
  in.close();
  std::ofstream(cp, std::ios::trunc) << text;
  const CliRun resumed = trainsim(args);
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_TRUE(has(resumed.err, "1,000 of them from the checkpoint")) << resumed.err;
  EXPECT_EQ(resumed.out, full.out);
}

TEST(SweepCli, ReportsOnRunSweepValidate) {
  const std::string dir = temp_path("reports");
  std::filesystem::remove_all(dir);
  ASSERT_EQ(trainsim(std::string("run ") + kMegascale + " --report " + dir + "/run").code, 0);
  ASSERT_EQ(trainsim(std::string("sweep ") + kMegascale +
                     " --vary parallel.tp=4,8 --vary parallel.pp=4,8 -q --report " + dir + "/sweep")
                .code,
            0);
  ASSERT_EQ(
      trainsim("validate scenarios/validation/published-runs.csv --report " + dir + "/validate")
          .code,
      0);
  for (const char* kind : {"run", "sweep", "validate"}) {
    for (const char* file : {"index.html", "results.json", "results.csv"}) {
      const std::string path = dir + "/" + kind + "/" + file;
      EXPECT_GT(std::filesystem::file_size(path), 500u) << path;
    }
    EXPECT_TRUE(
        has(slurp(dir + "/" + kind + "/index.html"), std::string("data-report=\"") + kind + "\""));
  }
  EXPECT_NO_THROW(nlohmann::json::parse(slurp(dir + "/sweep/results.json")));
}

// sweep --goodput: MegaScale's levers and the checkpoint interval varied together, ranked by
// tokens per day over a 54-day run; the CSV carries every goodput column.
TEST(SweepCli, GoodputVariesCheckpointsSparesAndLevers) {
  const std::string csv = temp_path("goodput_sweep.csv");
  const CliRun r = trainsim(std::string("sweep ") + kMegascale +
                            " --vary reliability.checkpoint.interval=900,auto"
                            " --vary reliability.spares=16,auto"
                            " --vary optimizations.fast_comm_init=true,false"
                            " --rank-by goodput --trials 40 -q --format csv -o " + csv);
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream in(slurp(csv));
  std::string line;
  std::getline(in, line);
  EXPECT_TRUE(has(line, ",ettr,ettr_ci95,goodput_tokens_per_day,interruptions,")) << line;
  std::vector<std::vector<std::string>> rows;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ',');) cells.push_back(c);
    rows.push_back(cells);
  }
  ASSERT_EQ(rows.size(), 8u);
  // Columns: rank, point, status, the three keys, then the figures.
  std::vector<std::string> head;
  {
    std::stringstream ss(slurp(csv).substr(0, slurp(csv).find('\n')));
    for (std::string c; std::getline(ss, c, ',');) head.push_back(c);
  }
  const auto col = [&](const std::string& name) {
    return static_cast<std::size_t>(std::find(head.begin(), head.end(), name) - head.begin());
  };
  const std::size_t ettr = col("ettr"), tpd = col("goodput_tokens_per_day"),
                    fast = col("optimizations.fast_comm_init");
  ASSERT_LT(tpd, head.size());
  double previous = 1e300;
  for (const auto& row : rows) {
    ASSERT_EQ(row[2], "ok");
    const double g = std::stod(row[tpd]);
    EXPECT_LE(g, previous);  // ranked by goodput
    previous = g;
    EXPECT_GT(std::stod(row[ettr]), 0.0);
  }
  // MegaScale's fast communicator initialisation is worth more than anything else swept here:
  // every configuration with it ranks above every configuration without it.
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(rows[i][fast], "true") << i;
  std::filesystem::remove(csv);
}

// Ranked by MFU, the points that vary only the checkpoint interval tie, so the first listed
// (a day between checkpoints) leads; the scenario's own `auto` interval is rank 2 and delivers
// the most tokens/day. Its goodput line is compared with the most tokens/day of any point, and
// says so: it was "+N % from the best", against the MFU leader's fewer tokens/day.
TEST(SweepCli, GoodputLineComparesWithTheMostTokensPerDay) {
  const CliRun r = trainsim(std::string("sweep ") + kSmall +
                            " --vary reliability.checkpoint.interval=86400,auto --goodput"
                            " --days 10 --trials 20 -q");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "): rank 2 of 2 feasible")) << r.out;
  EXPECT_TRUE(has(r.out, "(+0.0 % from the most tokens/day of any point, ")) << r.out;
  EXPECT_TRUE(has(r.out, " at rank 2)")) << r.out;
  EXPECT_FALSE(has(r.out, "% from the best,")) << r.out;  // (MFU keeps "points from the best")
}

// sweep --refine: the analytic top K re-run at flow fidelity, each exactly what `trainsim run
// --fidelity flow` gives for that configuration, re-ranked, with progress on stderr.
TEST(SweepCli, RefineRerunsTheTopPointsAtFlowFidelity) {
  const std::string json = temp_path("refine.json");
  const CliRun r = trainsim(std::string("sweep ") + kSmall +
                            " --vary parallel.tp=1,2,4,8 --vary training.micro_batch=1,2"
                            " --refine 3 --format json -o " + json + " --report " +
                            temp_path("refine_report"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.err, "refine: 3/3 points at flow fidelity")) << r.err;
  const nlohmann::json j = nlohmann::json::parse(slurp(json));
  ASSERT_EQ(j["refine"]["fidelity"], "flow");
  const auto& points = j["refine"]["points"];
  ASSERT_EQ(points.size(), 3u);
  for (std::size_t k = 0; k < points.size(); ++k) {
    EXPECT_EQ(points[k]["refined_rank"], k + 1);
    if (k > 0) {
      EXPECT_GE(points[k - 1]["mfu"].get<double>(), points[k]["mfu"].get<double>());
    }
  }
  // The refined #1 against a plain flow run of the same configuration.
  const std::size_t point = points[0]["point"];
  nlohmann::json config;
  for (const auto& x : j["results"]) {
    if (x["point"] == point) config = x["config"];
  }
  ASSERT_FALSE(config.is_null());
  const CliRun run = trainsim(std::string("run ") + kSmall + " --fidelity flow --format json" +
                              " --set parallel.tp=" + config["parallel.tp"].get<std::string>() +
                              " --set training.micro_batch=" +
                              config["training.micro_batch"].get<std::string>());
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(nlohmann::json::parse(run.out)["mfu"].get<double>(), points[0]["mfu"].get<double>());
  // The report's best configuration is the re-ranking's first, with its flow-fidelity MFU.
  const std::string html = slurp(temp_path("refine_report") + "/index.html");
  EXPECT_TRUE(has(html, "Best configuration after re-ranking at flow fidelity")) << html.size();
  EXPECT_TRUE(has(html, ">analytic = flow</text>")) << html.size();  // the diagonal's label
  EXPECT_FALSE(has(html, "predicted = published")) << html.size();
  EXPECT_TRUE(has(html, fmt::format("{:.1f} %", 100 * points[0]["mfu"].get<double>())));
  std::filesystem::remove(json);
}

// sweep --refine K with the base configuration below the top K: it is re-run too, at the same
// fidelity, as the yardstick the refined leader is measured against (a plain `run --fidelity
// flow` of the scenario gives the same MFU), and ranked among the refined points.
TEST(SweepCli, RefineRerunsTheBaseConfigurationBesideTheTop) {
  const std::string args = std::string("sweep ") + kSmall +
                           " --vary parallel.tp=1,2,4,8 --vary training.micro_batch=1,2 --refine 1";
  const CliRun text = trainsim(args);
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_TRUE(has(text.err, "refine: 2/2 points at flow fidelity")) << text.err;
  EXPECT_TRUE(has(text.out, "refined   the top 1 and the base configuration (*) re-run at flow "
                            "fidelity and re-ranked by MFU:"))
      << text.out;
  EXPECT_TRUE(has(text.out, "    2*   2 base ")) << text.out;
  EXPECT_FALSE(has(text.out, "(ranked at analytic fidelity")) << text.out;
  EXPECT_TRUE(has(text.out, "the refined leader is +")) << text.out;
  EXPECT_TRUE(has(text.out, " MFU points from the base configuration (*) at flow fidelity (+"))
      << text.out;

  const std::string json = temp_path("refine-base.json");
  const CliRun r = trainsim(args + " --jobs 2 --format json -o " + json);
  ASSERT_EQ(r.code, 0) << r.err;
  // The two points ran on two threads: the same file as one after the other.
  const std::string serial = temp_path("refine-base-serial.json");
  const CliRun r1 = trainsim(args + " --jobs 1 --format json -o " + serial);
  ASSERT_EQ(r1.code, 0) << r1.err;
  EXPECT_EQ(slurp(serial), slurp(json));
  std::filesystem::remove(serial);
  const nlohmann::json j = nlohmann::json::parse(slurp(json));
  EXPECT_EQ(j["refine"]["top"], 1);
  const auto& points = j["refine"]["points"];
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0]["base"], false);
  EXPECT_EQ(points[0]["analytic_rank"], 1);
  EXPECT_EQ(points[1]["base"], true);
  EXPECT_EQ(points[1]["analytic_rank"], 2);
  EXPECT_EQ(points[1]["refined_rank"], 2);
  const CliRun run = trainsim(std::string("run ") + kSmall + " --fidelity flow --format json");
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(nlohmann::json::parse(run.out)["mfu"].get<double>(), points[1]["mfu"].get<double>());
  std::filesystem::remove(json);
}

TEST(SweepCli, BadInputIsAClearError) {
  const std::string base = std::string("sweep ") + kMegascale;
  const CliRun unknown = trainsim(base + " --vary parallel.ppp=1,2");
  EXPECT_EQ(unknown.code, 2);
  EXPECT_TRUE(has(unknown.err, "--vary: `parallel.ppp`: unknown key (did you mean `parallel.pp`?)"))
      << unknown.err;
  const CliRun empty = trainsim(base + " --vary parallel.pp=64:1");
  EXPECT_EQ(empty.code, 2);
  EXPECT_TRUE(has(empty.err, "empty range `64:1`")) << empty.err;
  const CliRun price = trainsim(base + " --vary parallel.pp=4,8 --gpu-hour-price 2.5");
  EXPECT_EQ(price.code, 2);
  EXPECT_TRUE(has(price.err, "`2.5` has no currency")) << price.err;
  EXPECT_TRUE(has(price.err, "e.g. 2.5USD")) << price.err;
  const CliRun refine = trainsim(base + " --vary parallel.pp=4,8 --refine 5 --refine-fidelity analytic");
  EXPECT_EQ(refine.code, 2);
  EXPECT_TRUE(has(refine.err, "--refine-fidelity")) << refine.err;
  const CliRun cost = trainsim(base + " --vary parallel.pp=4,8 --rank-by cost");
  EXPECT_EQ(cost.code, 2);
  EXPECT_TRUE(has(cost.err, "--gpu-hour-price")) << cost.err;
  const CliRun reliability = trainsim(base + " --vary reliability.spares=0,8");
  EXPECT_EQ(reliability.code, 2);
  EXPECT_TRUE(has(reliability.err, "`reliability.spares`: changes only the goodput")) << reliability.err;
  EXPECT_TRUE(has(reliability.err, "add --goodput")) << reliability.err;
  const CliRun days = trainsim(base + " --vary parallel.pp=4,8 --days 10");
  EXPECT_EQ(days.code, 2);
  EXPECT_TRUE(has(days.err, "--days: is used only by the goodput run")) << days.err;
  const CliRun trials = trainsim(base + " --vary parallel.pp=4,8 --goodput --trials 1");
  EXPECT_EQ(trials.code, 2);
  EXPECT_TRUE(has(trials.err, "--trials: at least 2 trials")) << trials.err;
  // Flow fidelity exists (--refine uses it); a sweep ranks at analytic fidelity.
  const CliRun flow = trainsim(base + " --vary parallel.pp=4,8 --set simulation.fidelity=flow");
  EXPECT_EQ(flow.code, 2);
  // The value came from --set, which the message names (it named the scenario file).
  EXPECT_TRUE(has(flow.err, "--set: `simulation.fidelity`")) << flow.err;
  EXPECT_TRUE(has(flow.err, "--refine K --refine-fidelity flow")) << flow.err;
  EXPECT_FALSE(has(flow.err, "not available")) << flow.err;
  const CliRun nothing = trainsim(base);
  EXPECT_EQ(nothing.code, 2);
  EXPECT_TRUE(has(nothing.err, "nothing to sweep")) << nothing.err;
  const CliRun both = trainsim(base + " --auto --vary parallel.tp=1,2");
  EXPECT_EQ(both.code, 2);
  EXPECT_TRUE(has(both.err, "is chosen by --auto")) << both.err;
}

}  // namespace
