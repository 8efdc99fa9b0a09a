// Tests of the HTML reports and sweep outputs (reports/html_report.h, reports/sweep_report.h):
// every chart a report promises is in the page, the page fetches nothing, the files are written,
// and the sweep's JSON and CSV list every point with its reason. (Rendering in a real browser is
// tests/reports/test_html_browser.cpp.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "reports/html_report.h"
#include "reports/sweep_report.h"
#include "scenarios/run_config.h"
#include "scenarios/scenario.h"
#include "scenarios/sweep.h"
#include "scenarios/validation_runs.h"

#ifndef TRAINSIM_SOURCE_DIR
#define TRAINSIM_SOURCE_DIR "."
#endif

namespace trainsim::reports {
namespace {

const std::string kRoot = TRAINSIM_SOURCE_DIR;

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// No address outside the page: the only URL-like text allowed is the SVG namespace name.
void expect_self_contained(const std::string& html) {
  EXPECT_TRUE(has(html, "Content-Security-Policy\" content=\"default-src 'none'"));
  std::string rest = html;
  for (std::size_t at = rest.find("http://www.w3.org/2000/svg"); at != std::string::npos;
       at = rest.find("http://www.w3.org/2000/svg")) {
    rest.erase(at, 26);
  }
  EXPECT_FALSE(has(rest, "http://")) << "the page names an address";
  EXPECT_FALSE(has(rest, "https://")) << "the page names an address";
  EXPECT_FALSE(has(rest, "<script")) << "the page runs a script";
  EXPECT_FALSE(has(rest, "src=")) << "the page loads a resource";
}

scen::SweepOutcome megascale_sweep() {
  const scen::Scenario base =
      scen::load_scenario_file(kRoot + "/scenarios/megascale-175b-12288.yaml");
  scen::SweepSpec spec;
  spec.axes = {scen::parse_vary("parallel.tp=3,4,8"), scen::parse_vary("parallel.pp=1,4,8"),
               scen::parse_vary("training.micro_batch=1,2")};
  spec.price = scen::parse_gpu_hour_price("2USD");
  scen::SweepOptions options;
  options.jobs = 2;
  scen::SweepTransport one;
  return scen::run_sweep(base, scen::plan_sweep(base, spec), spec, options, one);
}

TEST(HtmlReport, RunReportHasItsCharts) {
  const scen::Scenario s = scen::load_scenario_file(kRoot + "/scenarios/megascale-175b-12288.yaml");
  const exec::RunConfig cfg = scen::make_run_config(s);
  const exec::Result r = scen::run_scenario(s, cfg);
  const std::string html = run_report_html(r, s, cfg.profile);
  for (const char* chart :
       {"breakdown", "timeline", "timeline-start", "link-utilisation", "memory"}) {
    EXPECT_TRUE(has(html, std::string("data-chart=\"") + chart + "\"")) << chart;
  }
  EXPECT_TRUE(has(html, "data-report=\"run\""));
  EXPECT_TRUE(has(html, "not a per-rank simulation"));  // the timeline says what it is
  EXPECT_TRUE(has(html, "not modelled at analytic fidelity"));
  expect_self_contained(html);
  EXPECT_EQ(run_report_html(r, s, cfg.profile), html);  // no timestamps: same bytes

  const std::string dir = ::testing::TempDir() + std::to_string(::getpid()) + "_run_report";
  write_run_report(dir, r, s, cfg.profile);
  EXPECT_EQ(slurp(dir + "/index.html"), html);
  EXPECT_EQ(nlohmann::json::parse(slurp(dir + "/results.json"))["mfu"].get<double>(), r.mfu);
  EXPECT_TRUE(has(slurp(dir + "/results.csv"), "\nbreakdown.compute_s,"));
}

TEST(HtmlReport, SweepReportHasItsCharts) {
  const scen::SweepOutcome o = megascale_sweep();
  scen::PointEvaluator ev(o.plan);
  PointDetail best;
  best.point = o.order.front();
  ev.evaluate_full(best.point, best.scenario, best.result, best.profile);
  const std::string html = sweep_report_html(o, best, std::nullopt);
  for (const char* chart : {"sweep-top", "sweep-heatmap", "sweep-scatter", "sweep-breakdown",
                            "timeline", "link-utilisation"}) {
    EXPECT_TRUE(has(html, std::string("data-chart=\"") + chart + "\"")) << chart;
  }
  EXPECT_TRUE(has(html, "does not divide the 128 attention heads"));  // infeasible, with reason
  EXPECT_TRUE(has(html, "does not fit in memory"));
  expect_self_contained(html);
}

TEST(HtmlReport, SweepJsonAndCsvListEveryPoint) {
  const scen::SweepOutcome o = megascale_sweep();
  std::ostringstream json, csv;
  write_sweep_json(json, o);
  write_sweep_csv(csv, o);
  const auto doc = nlohmann::json::parse(json.str());
  ASSERT_EQ(doc["results"].size(), 18u);
  EXPECT_EQ(doc["summary"]["points"], 18);
  EXPECT_EQ(doc["gpu_hour_price"]["currency"], "USD");
  EXPECT_EQ(doc["base"]["rank"], *o.base_rank);
  int rank = 0;
  for (const auto& p : doc["results"]) {
    if (p["status"] == "ok") {
      EXPECT_EQ(p["rank"], ++rank);
      EXPECT_GT(p["cost_per_mtok"].get<double>(), 0);
    } else {
      EXPECT_TRUE(p["rank"].is_null());
      EXPECT_FALSE(p["reason"].get<std::string>().empty());
    }
  }
  EXPECT_EQ(rank, static_cast<int>(o.feasible));
  std::size_t lines = 0;
  for (const char c : csv.str()) lines += c == '\n';
  EXPECT_EQ(lines, 19u);
  EXPECT_TRUE(has(csv.str(), "rank,point,status,parallel.tp,parallel.pp,training.micro_batch,"));
  EXPECT_TRUE(has(csv.str(), ",cost_per_mtok_USD,field,reason\n"));
  // The text names the scenario's rank and groups the reasons.
  const std::string text = sweep_text(o, 5);
  EXPECT_TRUE(has(text, "base configuration (tp=8 pp=8 micro_batch=1): rank")) << text;
  EXPECT_TRUE(has(text, "`parallel.tp`: TP # does not divide the # attention heads")) << text;
}

TEST(HtmlReport, ValidationReportHasItsCharts) {
  const auto rows = scen::validate_runs(kRoot + "/scenarios/validation/published-runs.csv");
  const std::string html = validation_report_html(rows, scen::summarize(rows), "runs.csv");
  for (const char* chart :
       {"validate-mfu", "validate-iter", "validate-error", "validate-breakdown"}) {
    EXPECT_TRUE(has(html, std::string("data-chart=\"") + chart + "\"")) << chart;
  }
  EXPECT_TRUE(has(html, "predicted = published"));
  expect_self_contained(html);
  // The project's rows agree with their conventions: no warnings section. A row whose warning
  // is set shows it, escaped.
  EXPECT_FALSE(has(html, "Published figures that disagree"));
  auto warned = rows;
  warned.front().warnings.push_back("published tflops_gpu & tokens_s <disagree>");
  const std::string w = validation_report_html(warned, scen::summarize(warned), "runs.csv");
  EXPECT_TRUE(has(w, "Published figures that disagree"));
  EXPECT_TRUE(has(w, "published tflops_gpu &amp; tokens_s &lt;disagree&gt;")) << w.size();
}

// One block of the timeline chart: its tooltip "stage S · WHAT: A–B ms[ (D ms)]".
struct TimelineBlock {
  int stage = 0;
  std::string what;
  double start_ms = 0, end_ms = 0;
};

// The blocks of the chart with data-chart="`chart`", read back from their <title>s.
std::vector<TimelineBlock> timeline_blocks(const std::string& html, const std::string& chart) {
  const std::size_t from = html.find("data-chart=\"" + chart + "\"");
  EXPECT_NE(from, std::string::npos) << chart;
  if (from == std::string::npos) return {};
  const std::size_t to = html.find("</svg>", from);
  std::vector<TimelineBlock> out;
  const std::string open = "<title>stage ", close = "</title>";
  for (std::size_t at = html.find(open, from); at != std::string::npos && at < to;
       at = html.find(open, at + 1)) {
    const std::string t = html.substr(at + 7, html.find(close, at) - at - 7);
    TimelineBlock b;
    const std::string dot = " · ";
    const std::size_t d = t.find(dot);
    b.stage = std::stoi(t.substr(6, d - 6));
    const std::size_t colon = t.rfind(": ");
    b.what = t.substr(d + dot.size(), colon - d - dot.size());
    const std::string dash = "–";
    const std::size_t m = t.find(dash, colon);
    b.start_ms = std::stod(t.substr(colon + 2, m - colon - 2));
    b.end_ms = std::stod(t.substr(m + dash.size()));
    out.push_back(b);
  }
  return out;
}

// The timeline's parts are the breakdown's rows: the pipeline lasts compute + exposed TP/CP/EP/PP
// + bubble (less the PP charged outside the slots), and each other row with time follows it as a
// block as long as the row, so that the chart ends at the iteration time. Llama 3 405B with
// TorchTitan has pp_overlap on: the analytic fill and drain sends are exposed PP outside the
// slots, which the grey "after the pipeline" block used to absorb unnamed. At schedule fidelity
// the same holds for the executed rows, and the caption says which fidelity's times are drawn.
TEST(HtmlReport, TimelinePartsAreTheBreakdownRows) {
  struct Case {
    std::string scenario;
    std::vector<std::string> sets;
  };
  const std::vector<Case> cases = {
      {"/scenarios/examples/llama3-405b-16384.yaml", {}},
      {"/scenarios/examples/llama3-8b-64xh100.yaml",
       {"model.layers=8", "parallel.pp=2", "parallel.vpp=1", "simulation.fidelity=schedule"}}};
  for (const Case& c : cases) {
    const scen::Scenario s = scen::load_scenario_file(kRoot + c.scenario, c.sets);
    const exec::RunConfig cfg = scen::make_run_config(s);
    const exec::Result r = scen::run_scenario(s, cfg);
    const std::string html = run_report_html(r, s, cfg.profile);
    const exec::Breakdown& b = r.breakdown;
    const bool analytic = r.fidelity == "analytic";
    const double pp_outside = analytic ? r.pipeline.pp_outside_s : 0.0;
    if (analytic) {
      EXPECT_GT(pp_outside, 0) << "the scenario has pp_overlap on";
    } else {
      EXPECT_TRUE(has(html, "scaled to the schedule fidelity")) << c.scenario;
    }
    const double pipeline_ms = 1e3 * (b.compute_s + b.exposed_tp_s + b.exposed_cp_s +
                                      b.exposed_ep_s + b.exposed_pp_s - pp_outside +
                                      b.pipeline_bubble_s);
    const std::vector<std::pair<std::string, double>> rows = {
        {"exposed PP comm outside the slots (fill and drain sends)", pp_outside},
        {"exposed DP comm", b.exposed_dp_s},
        {"optimizer step", b.optimizer_s},
        {"data loading", b.data_loading_s},
        {"slowest-GPU pacing", b.gpu_variation_s},
        {"global sync", b.global_sync_s}};
    // The whole-iteration chart (the first), or the only one when there is no zoom.
    const std::vector<TimelineBlock> blocks = timeline_blocks(html, "timeline");
    ASSERT_FALSE(blocks.empty()) << c.scenario;
    double pipeline_end = 0;
    std::map<std::string, std::vector<const TimelineBlock*>> after;
    for (const TimelineBlock& bl : blocks) {
      if (bl.what.rfind("micro-batch", 0) == 0) {
        pipeline_end = std::max(pipeline_end, bl.end_ms);
      } else {
        after[bl.what].push_back(&bl);
      }
    }
    EXPECT_NEAR(pipeline_end, pipeline_ms, 2e-3) << c.scenario;  // titles round to 1 µs
    double at = pipeline_end;
    std::size_t named = 0;
    for (const auto& [name, seconds] : rows) {
      if (seconds <= 0) {
        EXPECT_EQ(after.count(name), 0u) << name;
        continue;
      }
      ++named;
      ASSERT_EQ(after.count(name), 1u) << c.scenario << ": no block for " << name;
      for (const TimelineBlock* bl : after[name]) {
        EXPECT_NEAR(bl->start_ms, at, 2e-3) << name;
        EXPECT_NEAR(bl->end_ms - bl->start_ms, 1e3 * seconds, 2e-3) << name;
      }
      at += 1e3 * seconds;
    }
    EXPECT_EQ(after.size(), named) << c.scenario << ": a block that is no breakdown row";
    EXPECT_NEAR(at, 1e3 * r.iteration_time_s, 4e-3) << c.scenario;
    EXPECT_FALSE(has(html, "after the pipeline: DP sync, optimizer, data"));
  }
}

// The configuration table names the framework preset the run used (as the text summary does),
// not optimizations.system: Llama 3 405B runs on torchtitan-2024.
TEST(HtmlReport, ConfigNamesTheFrameworkTheRunUsed) {
  const scen::Scenario s =
      scen::load_scenario_file(kRoot + "/scenarios/examples/llama3-405b-16384.yaml");
  const exec::RunConfig cfg = scen::make_run_config(s);
  const std::string html = run_report_html(scen::run_scenario(s, cfg), s, cfg.profile);
  EXPECT_TRUE(has(html, "<td>framework</td><td>torchtitan-2024</td>"));
  EXPECT_FALSE(has(html, "<td>system</td>"));
}

// The link chart's caption and labels follow the fidelity: at schedule fidelity the switch tiers
// are "not modelled at schedule fidelity"; at flow fidelity the caption says what the classes
// hold, gives the NVLink figure, and names the classes left out for carrying nothing.
TEST(HtmlReport, LinkCaptionsFollowTheFidelity) {
  for (const char* fidelity : {"schedule", "flow"}) {
    const scen::Scenario s = scen::load_scenario_file(
        kRoot + "/scenarios/examples/llama3-8b-64xh100.yaml",
        {"model.layers=4", std::string("simulation.fidelity=") + fidelity});
    const exec::RunConfig cfg = scen::make_run_config(s);
    const exec::Result r = scen::run_scenario(s, cfg);
    const std::string html = run_report_html(r, s, cfg.profile);
    EXPECT_FALSE(has(html, "The analytic fidelity routes no flows")) << fidelity;
    EXPECT_FALSE(has(html, "not modelled at analytic fidelity")) << fidelity;
    if (std::string(fidelity) == "schedule") {
      EXPECT_TRUE(has(html, "The schedule fidelity routes no flows"));
      EXPECT_TRUE(has(html, "not modelled at schedule fidelity"));
      continue;
    }
    EXPECT_TRUE(has(html, "At flow fidelity: every class of link the routed flows"));
    EXPECT_TRUE(has(html, fmt::format("all NVLink traffic per GPU is {:.1f} %",
                                      100 * r.network.nvlink_utilization)));
    std::vector<std::string> idle;
    for (const auto& l : r.network.link_classes) {
      if (l.used == 0) idle.push_back(l.name);
    }
    if (idle.empty()) {
      EXPECT_TRUE(has(html, "Every class carried some traffic."));
    } else {
      std::string names;
      for (const std::string& n : idle) names += (names.empty() ? "" : ", ") + n;
      std::string escaped;
      for (const char ch : names) escaped += ch == '>' ? std::string("&gt;") : std::string(1, ch);
      EXPECT_TRUE(has(html, "Left out, having carried nothing: " + escaped + ".")) << escaped;
    }
  }
}

}  // namespace
}  // namespace trainsim::reports
