#include "cli/sweep_command.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <thread>

#include "cli/default_scenario.h"
#include "cli/output.h"
#include "cli/sweep_transport.h"
#include "reports/html_report.h"
#include "reports/sweep_report.h"
#include "scenarios/scenario.h"
#include "scenarios/sweep.h"
#include "sim/core/process_memory.h"
#include "sim/core/error.h"

namespace trainsim::cli {
namespace {

using reports::thousands;

std::string duration(double s) {
  if (s < 60) return fmt::format("{:.0f} s", s);
  if (s < 3600)
    return fmt::format("{}:{:02} min", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  return fmt::format("{:.1f} h", s / 3600);
}

// Progress on stderr: a bar redrawn in place on a terminal, a plain line every few seconds when
// stderr is a file or a pipe (CI logs, mpirun).
class ProgressPrinter {
 public:
  explicit ProgressPrinter(bool quiet) : quiet_(quiet), tty_(::isatty(STDERR_FILENO) == 1) {}

  void operator()(const scen::SweepProgress& p) {
    if (quiet_) return;
    const auto now = std::chrono::steady_clock::now();
    const bool last = p.done == p.total;
    if (!started_) {
      started_ = true;
      std::string line = fmt::format("sweep: {} points", thousands(p.total));
      if (p.resumed > 0)
        line += fmt::format(", {} of them from the checkpoint", thousands(p.resumed));
      std::cerr << line << "\n";
      shown_ = now;
      if (!last) return;
    }
    const double since = std::chrono::duration<double>(now - shown_).count();
    if (!last && since < (tty_ ? 0.1 : 5.0)) return;
    shown_ = now;
    const double fresh = static_cast<double>(p.done - p.resumed);
    const double rate = p.elapsed_s > 0 ? fresh / p.elapsed_s : 0;
    const double eta = rate > 0 ? static_cast<double>(p.total - p.done) / rate : 0;
    const double frac = p.total > 0 ? static_cast<double>(p.done) / p.total : 1.0;
    const std::string per_s = thousands(static_cast<std::size_t>(rate));
    if (tty_) {
      constexpr int kWidth = 30;
      const int filled = static_cast<int>(frac * kWidth);
      std::cerr << fmt::format("\rsweep [{}{}] {:5.1f} %  {}/{} points  {} points/s  ETA {}   ",
                               std::string(static_cast<std::size_t>(filled), '#'),
                               std::string(static_cast<std::size_t>(kWidth - filled), '-'),
                               100 * frac, thousands(p.done), thousands(p.total), per_s,
                               last ? std::string("0 s") : duration(eta));
      if (last) std::cerr << "\n";
    } else if (!last) {
      std::cerr << fmt::format("sweep: {}/{} points ({:.0f} %), {} points/s, ETA {}\n",
                               thousands(p.done), thousands(p.total), 100 * frac, per_s,
                               duration(eta));
    }
    if (last) {
      std::cerr << fmt::format("sweep: {} points evaluated in {:.1f} s ({} points/s)\n",
                               thousands(p.done - p.resumed), p.elapsed_s, per_s);
    }
    std::cerr.flush();
  }

 private:
  bool quiet_;
  bool tty_;
  bool started_ = false;
  std::chrono::steady_clock::time_point shown_{};
};

void write_result(const scen::SweepOutcome& o, const SweepArgs& a) {
  std::ofstream file;
  if (!a.output.empty() && a.output != "-") {
    file.open(a.output, std::ios::binary);
    if (!file) throw Error(ErrorKind::kRuntime, "cannot write the output file", {a.output, 0, ""});
  }
  std::ostream& out = file.is_open() ? file : std::cout;
  if (a.format == "json") {
    reports::write_sweep_json(out, o);
  } else if (a.format == "csv") {
    reports::write_sweep_csv(out, o);
  } else {
    out << reports::sweep_text(o, a.top);
  }
  out.flush();
  if (!out)
    throw Error(ErrorKind::kRuntime, "write failed",
                {a.output.empty() ? "stdout" : a.output, 0, ""});
}

void write_report(const scen::SweepOutcome& o, const SweepArgs& a) {
  scen::PointEvaluator ev(o.plan);
  auto detail = [&](std::size_t point) {
    reports::PointDetail d;
    d.point = point;
    ev.evaluate_full(point, d.scenario, d.result, d.profile);
    return d;
  };
  std::optional<reports::PointDetail> best, base;
  if (!o.refined.empty() && o.refined.front().full) {
    // Re-ranked: the best is the first refined point, as its finer-fidelity run saw it.
    const scen::RefinedPoint& r = o.refined.front();
    best = reports::PointDetail{r.point, *r.scenario, *r.full, *r.profile};
  } else if (o.feasible > 0) {
    best = detail(o.order.front());
  }
  if (o.base_rank) base = detail(*o.plan.base_point);
  reports::write_sweep_report(a.report, o, best, base);
}

int sweep(const SweepArgs& a, SweepGroup& group) {
  scen::SweepSpec spec;
  spec.auto_parallel = a.auto_parallel;
  for (const std::string& v : a.vary) spec.axes.push_back(scen::parse_vary(v));
  if (!a.price.empty()) spec.price = scen::parse_gpu_hour_price(a.price);
  spec.rank_by = a.rank_by == "cost"      ? scen::RankBy::kCost
                 : a.rank_by == "tokens"  ? scen::RankBy::kTokensPerS
                 : a.rank_by == "goodput" ? scen::RankBy::kGoodput
                                          : scen::RankBy::kMfu;
  if (a.goodput || spec.rank_by == scen::RankBy::kGoodput) {
    spec.goodput = scen::GoodputSweep{};
    if (a.days) spec.goodput->days = *a.days;
    if (a.trials) spec.goodput->trials = *a.trials;
  } else if (a.days || a.trials) {
    throw_input("is used only by the goodput run", {a.days ? "--days" : "--trials", 0, ""},
                "add --goodput (or --rank-by goodput)");
  }
  scen::check_goodput_spec(spec);
  if (spec.rank_by == scen::RankBy::kCost && !spec.price) {
    throw_input("ranking by cost needs a price", {"--rank-by", 0, ""},
                "give --gpu-hour-price, e.g. --gpu-hour-price 2.5USD");
  }
  const scen::Scenario base =
      a.scenario.empty()
          ? scen::load_scenario_string(kDefaultScenarioYaml, kDefaultScenarioName, a.sets)
          : scen::load_scenario_file(a.scenario, a.sets);
  scen::require_one_job(base, "sweep");
  scen::SweepPlan plan = scen::plan_sweep(base, spec);

  scen::SweepOptions options;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  options.jobs = a.jobs > 0 ? a.jobs : std::max(1, cores / local_ranks());
  options.checkpoint = a.checkpoint;
  options.shortcut = !a.no_shortcut;
  ProgressPrinter printer(a.quiet);
  options.progress = [&printer](const scen::SweepProgress& p) { printer(p); };
  scen::SweepOutcome o = scen::run_sweep(base, std::move(plan), spec, options, group);
  if (group.rank() != 0) return 0;
  if (a.refine > 0) {
    advise_huge_pages_for_heap();  // sim/core/process_memory.h: the refined runs are event-driven
    // On rank 0, --jobs points at once (the sweep's threads; each a simulation of its own: a
    // 12,288-GPU flow iteration takes seconds to minutes and up to a GiB).
    const auto start = std::chrono::steady_clock::now();
    const bool tty = ::isatty(STDERR_FILENO) == 1;
    scen::refine_sweep(o, static_cast<std::size_t>(a.refine), a.refine_fidelity,
                       [&](std::size_t done, std::size_t total) {
                         if (a.quiet) return;
                         const double s = std::chrono::duration<double>(
                                              std::chrono::steady_clock::now() - start)
                                              .count();
                         const double eta = s / static_cast<double>(done) *
                                            static_cast<double>(total - done);
                         std::cerr << fmt::format(
                             "{}refine: {}/{} points at {} fidelity, {:.0f} s, ETA {}{}",
                             tty ? "\r" : "", done, total, a.refine_fidelity, s,
                             done == total ? std::string("0 s") : duration(eta),
                             tty && done < total ? "   " : "\n");
                         std::cerr.flush();
                       },
                       options.jobs);
  }
  write_result(o, a);
  if (!a.report.empty()) write_report(o, a);
  return 0;
}

}  // namespace

CLI::App* add_sweep_command(CLI::App& app, SweepArgs& a) {
  CLI::App* cmd = app.add_subcommand(
      "sweep", "Evaluate many configurations of a scenario and rank them (docs/sweeps.md)");
  cmd->add_option("scenario", a.scenario,
                  "Scenario YAML file (default: the built-in MegaScale 175B on 12,288 GPUs)");
  // One value per flag, so that `--vary KEY=VALUES SCENARIO` leaves the scenario positional.
  cmd->add_option("--set", a.sets, "Override a key of the base scenario: key.path=value")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  cmd->add_option("--vary", a.vary,
                  "Sweep a key: key.path=v1,v2,... or a range A:B, A:B:STEP, A:B:xFACTOR "
                  "(repeatable; the points are every combination)")
      ->type_name("KEY=VALUES")
      ->allow_extra_args(false);
  cmd->add_flag("--auto", a.auto_parallel,
                "Every TP×PP×DP×CP×EP factorization of the GPU count, with micro-batch, vpp, "
                "recompute and ZeRO choices");
  cmd->add_option("--rank-by", a.rank_by,
                  "mfu | tokens | cost | goodput (cost needs --gpu-hour-price; goodput, tokens per "
                  "day over a whole run, implies --goodput)")
      ->check(CLI::IsMember({"mfu", "tokens", "cost", "goodput"}));
  cmd->add_flag("--goodput", a.goodput,
                "Also run the goodput Monte Carlo of `trainsim goodput` for every feasible point "
                "(ETTR, tokens per day); lets --vary take reliability.* keys");
  cmd->add_option("--days", a.days, "With --goodput: length of the run in days (default 54)");
  cmd->add_option("--trials", a.trials,
                  "With --goodput: Monte Carlo trials per point (default 1000)");
  cmd->add_option("--gpu-hour-price", a.price,
                  "Price of one GPU for one hour with its currency, e.g. 2.5USD or 2.5EUR/h: adds "
                  "the cost per million tokens");
  cmd->add_option("--refine", a.refine,
                  "Re-run the top K of the analytic ranking at --refine-fidelity and re-rank them")
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--refine-fidelity", a.refine_fidelity, "flow (default) | schedule")
      ->check(CLI::IsMember({"flow", "schedule"}));
  cmd->add_option("-j,--jobs", a.jobs, "Threads per process, 1 to 1024 (default: the cores)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--top", a.top, "Feasible points the text table lists (default 20)");
  cmd->add_option("--format", a.format, "text | json | csv (json and csv list every point)")
      ->check(CLI::IsMember({"text", "json", "csv"}));
  cmd->add_option("-o,--output", a.output, "Write the result to FILE instead of stdout")
      ->check(output_file());
  cmd->add_option("--report", a.report,
                  "Write an HTML report with charts, results.csv and results.json to DIR")
      ->check(report_folder());
  cmd->add_option("--checkpoint", a.checkpoint,
                  "Record finished points in FILE; an interrupted sweep given the same FILE "
                  "resumes where it stopped");
  cmd->add_flag("-q,--quiet", a.quiet, "No progress on stderr");
  cmd->add_flag("--no-shortcut", a.no_shortcut,
                "Build every --auto point through the scenario resolver (slower, same results)");
  return cmd;
}

int run_sweep_command(const SweepArgs& args) {
  return run_on_group([&args](SweepGroup& group) { return sweep(args, group); });
}

}  // namespace trainsim::cli
