// The HTML reports in a real browser: headless Chromium (the Debian package) opens each report
// from disk, and the test checks through the DevTools protocol that every chart rendered with a
// size and its marks, that nothing reached the console as an error or exception, and that the
// page requested nothing but itself. It saves a full-page screenshot of each report to
// $TRAINSIM_SCREENSHOT_DIR (default: <build>/tests/screenshots/); with
// TRAINSIM_SCREENSHOT_DIR=docs/images it refreshes the README's pictures.
//
// Chromium is driven over --remote-debugging-pipe (file descriptors 3 and 4, messages separated
// by NUL bytes), so no port is opened, and started with the flags that keep it off the network.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "reports/html_report.h"
#include "scenarios/run_config.h"
#include "scenarios/scenario.h"
#include "scenarios/sweep.h"
#include "scenarios/variants.h"
#include "reports/compare_report.h"
#include "reports/jobs_report.h"
#include "scenarios/validation_runs.h"

namespace trainsim::reports {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Tests run from the repository root, so that pages name scenarios as a user would.
const std::string kMegascale = "scenarios/megascale-175b-12288.yaml";

std::string chromium_path() {
  if (const char* env = std::getenv("TRAINSIM_CHROMIUM")) return env;
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return "";
}

fs::path screenshot_dir() {
  if (const char* env = std::getenv("TRAINSIM_SCREENSHOT_DIR")) return env;
  // TRAINSIM_BINARY is <build>/cli/trainsim.
  return fs::path(TRAINSIM_BINARY).parent_path().parent_path() / "tests" / "screenshots";
}

std::vector<unsigned char> base64_decode(const std::string& in) {
  std::vector<unsigned char> out;
  unsigned value = 0;
  int bits = 0;
  for (const char c : in) {
    int d;
    if (c >= 'A' && c <= 'Z') {
      d = c - 'A';
    } else if (c >= 'a' && c <= 'z') {
      d = c - 'a' + 26;
    } else if (c >= '0' && c <= '9') {
      d = c - '0' + 52;
    } else if (c == '+') {
      d = 62;
    } else if (c == '/') {
      d = 63;
    } else {
      continue;  // padding
    }
    value = (value << 6) | static_cast<unsigned>(d);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<unsigned char>((value >> bits) & 0xff));
    }
  }
  return out;
}

// One headless Chromium, spoken to over the DevTools pipe.
class Browser {
 public:
  explicit Browser(const std::string& exe) {
    char tmpl[] = "/tmp/trainsim-chromium-XXXXXX";
    profile_ = ::mkdtemp(tmpl);
    log_ = profile_ + ".log";
    int to_browser[2], from_browser[2];
    if (::pipe(to_browser) != 0 || ::pipe(from_browser) != 0) throw std::runtime_error("pipe");
    pid_ = ::fork();
    if (pid_ == 0) {
      // The pipe's ends must land on fds 3 (commands) and 4 (replies); move them out of the way
      // first in case they already sit there.
      const int in = ::fcntl(to_browser[0], F_DUPFD, 10);
      const int out = ::fcntl(from_browser[1], F_DUPFD, 10);
      ::dup2(in, 3);
      ::dup2(out, 4);
      const int log = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(log, 1);
      ::dup2(log, 2);
      for (int fd = 5; fd < 1024; ++fd) ::close(fd);
      const std::string user_dir = "--user-data-dir=" + profile_;
      std::vector<std::string> args = {exe,
                                       "--headless",
                                       "--no-sandbox",
                                       "--disable-gpu",
                                       "--disable-quic",
                                       "--no-first-run",
                                       "--disable-background-networking",
                                       "--disable-component-update",
                                       "--disable-sync",
                                       "--disable-dev-shm-usage",
                                       "--disable-extensions",
                                       "--disable-default-apps",
                                       "--mute-audio",
                                       "--hide-scrollbars",
                                       "--remote-debugging-pipe",
                                       user_dir,
                                       "about:blank"};
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(exe.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(to_browser[0]);
    ::close(from_browser[1]);
    write_fd_ = to_browser[1];
    read_fd_ = from_browser[0];
  }

  ~Browser() {
    if (pid_ > 0) {
      try {
        send("Browser.close", json::object(), "");
      } catch (const std::exception&) {
      }
      ::close(write_fd_);
      ::close(read_fd_);
      for (int i = 0; i < 50; ++i) {
        if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
          pid_ = -1;
          break;
        }
        ::usleep(100000);
      }
      if (pid_ > 0) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
      }
    }
    std::error_code ec;
    fs::remove_all(profile_, ec);
    fs::remove(log_, ec);
  }
  Browser(const Browser&) = delete;
  Browser& operator=(const Browser&) = delete;

  std::string log() const {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  /// Sends a command and waits for its reply; events that arrive meanwhile are kept.
  json call(const std::string& method, const json& params, const std::string& session) {
    const int id = send(method, params, session);
    while (true) {
      json m = next_message();
      if (m.contains("id") && m["id"] == id) {
        if (m.contains("error")) throw std::runtime_error(method + ": " + m["error"].dump());
        return m["result"];
      }
      events_.push_back(std::move(m));
    }
  }

  /// Waits for an event of `method` (already received or not).
  json wait_event(const std::string& method) {
    for (const json& e : events_) {
      if (e.value("method", "") == method) return e;
    }
    while (true) {
      json m = next_message();
      events_.push_back(m);
      if (m.value("method", "") == method) return m;
    }
  }

  std::vector<json>& events() { return events_; }

 private:
  int send(const std::string& method, const json& params, const std::string& session) {
    json m = {{"id", ++last_id_}, {"method", method}, {"params", params}};
    if (!session.empty()) m["sessionId"] = session;
    std::string text = m.dump();
    text.push_back('\0');
    for (std::size_t done = 0; done < text.size();) {
      const ssize_t n = ::write(write_fd_, text.data() + done, text.size() - done);
      if (n <= 0) throw std::runtime_error("cannot write to Chromium");
      done += static_cast<std::size_t>(n);
    }
    return last_id_;
  }

  json next_message() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (true) {
      const std::size_t nul = buffer_.find('\0');
      if (nul != std::string::npos) {
        json m = json::parse(buffer_.substr(0, nul));
        buffer_.erase(0, nul + 1);
        return m;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      if (left <= 0) throw std::runtime_error("Chromium did not answer within 60 s");
      pollfd p{read_fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char chunk[65536];
      const ssize_t n = ::read(read_fd_, chunk, sizeof chunk);
      if (n <= 0) throw std::runtime_error("Chromium closed the pipe:\n" + log());
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
  }

  pid_t pid_ = -1;
  int write_fd_ = -1, read_fd_ = -1;
  int last_id_ = 0;
  std::string profile_, log_, buffer_;
  std::vector<json> events_;
};

// Reads, inside the page, what rendered: each chart's size and number of marks.
const char* kProbe = R"js((() => {
  const charts = [...document.querySelectorAll('svg.chart')].map(s => {
    const r = s.getBoundingClientRect();
    return {id: s.dataset.chart, marks: s.querySelectorAll('rect, circle, path').length,
            width: r.width, height: r.height};
  });
  return {title: document.title, report: document.body.dataset.report, charts,
          sections: document.querySelectorAll('section').length};
})())js";

struct PageCheck {
  json probe;
  std::vector<std::string> errors;    // console errors, exceptions, failed loads
  std::vector<std::string> requests;  // URLs other than the page itself
  std::size_t png_bytes = 0;
};

PageCheck open_page(Browser& b, const fs::path& html, const fs::path& png) {
  const std::string target =
      b.call("Target.createTarget", {{"url", "about:blank"}}, "")["targetId"];
  const std::string session =
      b.call("Target.attachToTarget", {{"targetId", target}, {"flatten", true}}, "")["sessionId"];
  for (const char* domain : {"Runtime.enable", "Log.enable", "Network.enable", "Page.enable"}) {
    b.call(domain, json::object(), session);
  }
  b.call("Emulation.setDeviceMetricsOverride",
         {{"width", 1100}, {"height", 900}, {"deviceScaleFactor", 1}, {"mobile", false}}, session);
  b.events().clear();
  const std::string url = "file://" + fs::absolute(html).string();
  b.call("Page.navigate", {{"url", url}}, session);
  b.wait_event("Page.loadEventFired");
  PageCheck out;
  out.probe = b.call("Runtime.evaluate", {{"expression", kProbe}, {"returnByValue", true}},
                     session)["result"]["value"];
  const json metrics = b.call("Page.getLayoutMetrics", json::object(), session);
  const int height =
      std::min(20000, static_cast<int>(metrics["cssContentSize"]["height"].get<double>()) + 1);
  b.call("Emulation.setDeviceMetricsOverride",
         {{"width", 1100}, {"height", height}, {"deviceScaleFactor", 1}, {"mobile", false}},
         session);
  const std::string data =
      b.call("Page.captureScreenshot", {{"format", "png"}, {"captureBeyondViewport", true}},
             session)["data"];
  const std::vector<unsigned char> bytes = base64_decode(data);
  fs::create_directories(png.parent_path());
  std::ofstream(png, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  out.png_bytes = bytes.size();
  for (const json& e : b.events()) {
    const std::string m = e.value("method", "");
    const json& p = e.contains("params") ? e["params"] : json::object();
    if (m == "Runtime.exceptionThrown") out.errors.push_back("exception: " + p.dump());
    if (m == "Runtime.consoleAPICalled" && (p["type"] == "error" || p["type"] == "assert")) {
      out.errors.push_back("console: " + p.dump());
    }
    if (m == "Log.entryAdded" && p["entry"]["level"] == "error") {
      out.errors.push_back("log: " + p["entry"].dump());
    }
    if (m == "Network.loadingFailed") out.errors.push_back("load failed: " + p.dump());
    if (m == "Network.requestWillBeSent") {
      const std::string u = p["request"]["url"];
      if (u != url && u.rfind("data:", 0) != 0) out.requests.push_back(u);
    }
  }
  b.call("Target.closeTarget", {{"targetId", target}}, "");
  return out;
}

void expect_rendered(const PageCheck& c, const std::string& kind,
                     const std::vector<std::string>& charts) {
  EXPECT_EQ(c.probe["report"], kind);
  for (const std::string& id : charts) {
    bool found = false;
    for (const json& chart : c.probe["charts"]) {
      if (chart["id"] != id) continue;
      found = true;
      EXPECT_GT(chart["marks"].get<int>(), 0) << id;
      EXPECT_GT(chart["width"].get<double>(), 300) << id;
      EXPECT_GT(chart["height"].get<double>(), 40) << id;
    }
    EXPECT_TRUE(found) << kind << " report has no chart " << id << ": " << c.probe.dump();
  }
  for (const std::string& e : c.errors) ADD_FAILURE() << kind << ": " << e;
  for (const std::string& r : c.requests) ADD_FAILURE() << kind << " requested " << r;
  EXPECT_GT(c.png_bytes, 20000u) << kind << ": the screenshot is (nearly) empty";
}

class HtmlBrowser : public ::testing::Test {
 protected:
  void SetUp() override {
    exe_ = chromium_path();
    if (exe_.empty()) {
      GTEST_SKIP() << "Chromium not found at /usr/bin/chromium: install the Debian package "
                      "`chromium` (scripts/setup-deps.sh does) or set TRAINSIM_CHROMIUM";
    }
    dir_ = fs::path(::testing::TempDir()) / ("html_browser_" + std::to_string(::getpid()));
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string exe_;
  fs::path dir_;
};

TEST_F(HtmlBrowser, RunReportRenders) {
  const scen::Scenario s = scen::load_scenario_file(kMegascale);
  const exec::RunConfig cfg = scen::make_run_config(s);
  write_run_report((dir_ / "run").string(), scen::run_scenario(s, cfg), s, cfg.profile);
  Browser b(exe_);
  const PageCheck c =
      open_page(b, dir_ / "run" / "index.html", screenshot_dir() / "report-run.png");
  expect_rendered(c, "run",
                  {"breakdown", "timeline", "timeline-start", "link-utilisation", "memory"});
}

TEST_F(HtmlBrowser, SweepReportRenders) {
  const scen::Scenario base = scen::load_scenario_file(kMegascale);
  scen::SweepSpec spec;
  spec.axes = {scen::parse_vary("parallel.tp=2,4,8,16"), scen::parse_vary("parallel.pp=1:16:*2"),
               scen::parse_vary("training.micro_batch=1,2,4"),
               scen::parse_vary("training.recompute=selective,full")};
  scen::SweepOptions options;
  options.jobs = 2;
  scen::SweepTransport one;
  const scen::SweepOutcome o =
      scen::run_sweep(base, scen::plan_sweep(base, spec), spec, options, one);
  scen::PointEvaluator ev(o.plan);
  PointDetail best, own;
  best.point = o.order.front();
  ev.evaluate_full(best.point, best.scenario, best.result, best.profile);
  own.point = *o.plan.base_point;
  ev.evaluate_full(own.point, own.scenario, own.result, own.profile);
  write_sweep_report((dir_ / "sweep").string(), o, best, own);
  Browser b(exe_);
  const PageCheck c =
      open_page(b, dir_ / "sweep" / "index.html", screenshot_dir() / "report-sweep.png");
  expect_rendered(c, "sweep",
                  {"sweep-top", "sweep-heatmap", "sweep-scatter", "sweep-breakdown", "timeline",
                   "link-utilisation"});
}

// A sweep with the goodput run (sweep --goodput) and two points refined at schedule fidelity
// (--refine): the chart of where a whole run's time goes and the analytic-against-refined chart.
TEST_F(HtmlBrowser, GoodputSweepReportRenders) {
  const scen::Scenario base = scen::load_scenario_file(kMegascale);
  scen::SweepSpec spec;
  spec.axes = {scen::parse_vary("reliability.checkpoint.interval=600,1800,auto"),
               scen::parse_vary("optimizations.fast_comm_init=true,false")};
  spec.rank_by = scen::RankBy::kGoodput;
  spec.goodput = scen::GoodputSweep{54, 20};
  scen::SweepOptions options;
  scen::SweepTransport one;
  scen::SweepOutcome o = scen::run_sweep(base, scen::plan_sweep(base, spec), spec, options, one);
  scen::refine_sweep(o, 2, "schedule");  // and the --refine section
  scen::PointEvaluator ev(o.plan);
  PointDetail best;
  best.point = o.order.front();
  ev.evaluate_full(best.point, best.scenario, best.result, best.profile);
  write_sweep_report((dir_ / "sweep-goodput").string(), o, best, best);
  Browser b(exe_);
  const PageCheck c = open_page(b, dir_ / "sweep-goodput" / "index.html",
                                screenshot_dir() / "report-sweep-goodput.png");
  expect_rendered(c, "sweep",
                  {"sweep-goodput", "sweep-refine", "sweep-heatmap", "sweep-breakdown"});
}

// run --compare: the variants side by side at flow fidelity, with the link classes.
TEST_F(HtmlBrowser, CompareReportRenders) {
  const scen::VariantPlan plan =
      scen::plan_variants({"cluster.fabric.oversubscription=1,2", "training.micro_batch=1,2"});
  const auto variants = scen::run_variants(
      plan, "scenarios/examples/megatron-1.7b-32xa100.yaml", "", "", {"simulation.fidelity=flow"},
      {});
  write_compare_report((dir_ / "compare").string(), variants, plan.keys);
  Browser b(exe_);
  const PageCheck c =
      open_page(b, dir_ / "compare" / "index.html", screenshot_dir() / "report-compare.png");
  expect_rendered(c, "compare", {"compare-mfu", "compare-breakdown", "compare-links"});
}

// Several jobs on one fabric: each job together and alone, its breakdown, the fabric's load.
TEST_F(HtmlBrowser, JobsReportRenders) {
  const scen::Scenario s =
      scen::load_scenario_file("scenarios/examples/two-jobs-dumbbell.yaml");
  const scen::JobsOutcome o = scen::run_scenario_jobs(s);
  write_jobs_report((dir_ / "jobs").string(), o, s);
  Browser b(exe_);
  const PageCheck c =
      open_page(b, dir_ / "jobs" / "index.html", screenshot_dir() / "report-jobs.png");
  expect_rendered(c, "jobs", {"jobs-slowdown", "jobs-breakdown", "jobs-links"});
}

TEST_F(HtmlBrowser, ValidationReportRenders) {
  const auto rows = scen::validate_runs("scenarios/validation/published-runs.csv");
  write_validation_report((dir_ / "validate").string(), rows, scen::summarize(rows),
                          "scenarios/validation/published-runs.csv");
  Browser b(exe_);
  const PageCheck c =
      open_page(b, dir_ / "validate" / "index.html", screenshot_dir() / "report-validate.png");
  expect_rendered(c, "validate",
                  {"validate-mfu", "validate-iter", "validate-error", "validate-breakdown"});
}

// The check itself must catch a broken page: a script error, a console error and a fetch.
TEST_F(HtmlBrowser, CatchesErrorsAndRequests) {
  fs::create_directories(dir_);
  const fs::path bad = dir_ / "bad.html";
  std::ofstream(bad) << "<!DOCTYPE html><html><body data-report=\"bad\"><script>"
                        "console.error('broken'); undefined_function();</script>"
                        "<img src=\"missing.png\"></body></html>";
  Browser b(exe_);
  const PageCheck c = open_page(b, bad, dir_ / "bad.png");
  EXPECT_GE(c.errors.size(), 2u);
  bool fetched = false;
  for (const std::string& r : c.requests)
    fetched = fetched || r.find("missing.png") != std::string::npos;
  EXPECT_TRUE(fetched);
}

}  // namespace
}  // namespace trainsim::reports
