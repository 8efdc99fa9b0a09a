#include "cli/goodput_command.h"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <cstring>
#include <iostream>
#include <memory>
#include <thread>

#include "cli/default_scenario.h"
#include "cli/output.h"
#include "cli/sweep_transport.h"
#include "reports/goodput_report.h"
#include "scenarios/goodput_config.h"
#include "scenarios/scenario.h"
#include "sim/core/error.h"
#include "sim/goodput/goodput.h"

namespace trainsim::cli {
namespace {

// A trial's result as bytes: the same on every rank of one machine type, read back exactly.
void put(std::string& out, const void* p, std::size_t n) {
  out.append(static_cast<const char*>(p), n);
}

void serialize(const goodput::TrialResult& t, std::string& out) {
  const goodput::TimeSplit& s = t.split;
  for (const double v : {s.training_s, s.lost_s, s.checkpoint_s, s.slow_s, s.detection_s,
                         s.diagnosis_s, s.repair_s, s.restart_s}) {
    put(out, &v, sizeof v);
  }
  put(out, &t.interruptions, sizeof t.interruptions);
  put(out, &t.checkpoints, sizeof t.checkpoints);
  for (const long c : t.by_class) put(out, &c, sizeof c);
}

goodput::TrialResult deserialize(const std::string& in, std::size_t& pos, std::size_t classes) {
  auto take = [&](void* p, std::size_t n) {
    if (pos + n > in.size()) {
      throw Error(ErrorKind::kRuntime, "a rank sent fewer trial results than expected");
    }
    std::memcpy(p, in.data() + pos, n);
    pos += n;
  };
  goodput::TrialResult t;
  goodput::TimeSplit& s = t.split;
  for (double* v : {&s.training_s, &s.lost_s, &s.checkpoint_s, &s.slow_s, &s.detection_s,
                    &s.diagnosis_s, &s.repair_s, &s.restart_s}) {
    take(v, sizeof *v);
  }
  take(&t.interruptions, sizeof t.interruptions);
  take(&t.checkpoints, sizeof t.checkpoints);
  t.by_class.resize(classes);
  for (long& c : t.by_class) take(&c, sizeof c);
  return t;
}

// Runs `trials` trials of every variant: this rank's contiguous share of the trial indices on
// `jobs` threads, gathered on rank 0 in rank order (= trial order). Other ranks get nothing.
// Progress on rank 0's terminal only (never in a pipe, a file or with JSON output): checkpoint
// intervals done, elapsed time and an ETA, after each interval's trials.
std::function<void(std::size_t, std::size_t)> goodput_progress(const std::string& format,
                                                               const SweepGroup& group) {
  if (format == "json" || group.rank() != 0 || ::isatty(STDERR_FILENO) != 1) return {};
  const auto start = std::chrono::steady_clock::now();
  return [start](std::size_t done, std::size_t total) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cerr << fmt::format("\rgoodput: {}/{} checkpoint intervals, {:.0f} s, ETA {:.0f} s   ",
                             done, total, s,
                             s / static_cast<double>(done) * static_cast<double>(total - done));
    if (done == total) std::cerr << "\r\033[K";
    std::cerr.flush();
  };
}

std::vector<std::vector<goodput::TrialResult>> run_distributed(
    const std::vector<goodput::Params>& variants, long trials, int jobs, SweepGroup& group,
    const std::function<void(std::size_t, std::size_t)>& progress) {
  const auto n = static_cast<std::uint64_t>(trials);
  const auto ranks = static_cast<std::uint64_t>(group.size());
  auto lo = [&](std::uint64_t r) { return n * r / ranks; };
  const auto me = static_cast<std::uint64_t>(group.rank());
  std::string mine;
  for (std::size_t v = 0; v < variants.size(); ++v) {
    for (const goodput::TrialResult& t :
         goodput::run_trials(variants[v], lo(me), lo(me + 1) - lo(me), jobs)) {
      serialize(t, mine);
    }
    if (progress) progress(v + 1, variants.size());
  }
  const std::vector<std::string> all = group.gather(mine);
  std::vector<std::vector<goodput::TrialResult>> out(variants.size());
  if (group.rank() != 0) return out;
  for (std::uint64_t r = 0; r < all.size(); ++r) {
    std::size_t pos = 0;
    for (std::size_t v = 0; v < variants.size(); ++v) {
      for (std::uint64_t i = lo(r); i < lo(r + 1); ++i) {
        out[v].push_back(deserialize(all[r], pos, variants[v].classes.size()));
      }
    }
  }
  return out;
}

int goodput_run(const GoodputArgs& a, SweepGroup& group) {
  goodput::check_request(a.trials, a.days, {"", 0, "--trials"}, {"", 0, "--days"});
  const scen::Scenario s =
      a.scenario.empty()
          ? scen::load_scenario_string(kDefaultScenarioYaml, kDefaultScenarioName, a.sets)
          : scen::load_scenario_file(a.scenario, a.sets);
  scen::require_one_job(s, "goodput");
  const scen::GoodputSetup setup = scen::goodput_setup(s, a.days);
  const goodput::Params& p = setup.params;

  // The configured interval first, then the search grid around Young's interval.
  std::vector<goodput::Params> variants = {p};
  std::vector<double> grid;
  const double rate_h = goodput::job_failure_rate_h(p);
  if (!a.no_search && rate_h > 0 && p.checkpoint_blocking_s > 0) {
    grid = goodput::interval_grid(
        goodput::young_interval_s(p.checkpoint_blocking_s, 3600 / rate_h), p.interval_s);
    for (const double tau : grid) {
      goodput::Params v = p;
      v.interval_s = tau;
      variants.push_back(v);
    }
  }
  // Every failure of every trial is simulated: a failure rate far above any real one (a typo
  // in a FIT value) would run for hours.
  const double events = rate_h * a.days * 24.0 * static_cast<double>(a.trials) *
                        static_cast<double>(variants.size());
  if (events > goodput::kMaxFailureEvents && !a.force) {
    throw_input(fmt::format("about {:.3g} failure events to simulate ({} trials x {} checkpoint "
                            "intervals x {:.3g} expected failures in {:g} days at {:.3g} per "
                            "hour); the limit is {:.0e} (--force runs it anyway)",
                            events, a.trials, variants.size(), rate_h * a.days * 24.0, a.days,
                            rate_h, goodput::kMaxFailureEvents),
                {"", 0, "reliability.rate"},
                "check the reliability.rate.* values (events per unit per 10^9 hours), or use "
                "fewer --trials, --days or --no-search");
  }
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int jobs = a.jobs > 0 ? a.jobs : std::max(1, cores / local_ranks());
  const auto results =
      run_distributed(variants, a.trials, jobs, group, goodput_progress(a.format, group));
  if (group.rank() != 0) return 0;

  reports::GoodputOutcome o;
  o.scenario = s.source;
  o.setup = setup;
  o.summary = goodput::summarize(p, results[0]);
  if (!grid.empty()) {
    std::vector<double> ettr;
    for (std::size_t v = 1; v < results.size(); ++v) {
      ettr.push_back(goodput::summarize(variants[v], results[v]).ettr.mean);
    }
    o.search = goodput::best_interval(grid, ettr);
    // The parabola's vertex is a candidate, not a result: simulate it on the same trials (rank
    // 0 alone, on its threads: one interval of the 19) and keep it only if it beats the best
    // node, so that the best ETTR reported is one a run at that interval gives.
    if (o.search->fit_s > 0) {
      goodput::Params v = p;
      v.interval_s = o.search->fit_s;
      const double fit_ettr =
          goodput::summarize(v, goodput::run_trials(v, 0, static_cast<std::uint64_t>(a.trials),
                                                    jobs))
              .ettr.mean;
      if (fit_ettr > o.search->best_ettr) {
        o.search->best_s = o.search->fit_s;
        o.search->best_ettr = fit_ettr;
      }
    }
  }
  write_output(a.format == "json" ? reports::goodput_json(o).dump(2) + "\n"
                                  : reports::goodput_text(o),
               a.output);
  if (!a.report.empty()) reports::write_goodput_report(a.report, o);
  return 0;
}

}  // namespace

CLI::App* add_goodput_command(CLI::App& app, GoodputArgs& a) {
  CLI::App* cmd = app.add_subcommand(
      "goodput", "Monte Carlo of a whole training run: failures, checkpoints, restarts, ETTR");
  cmd->add_option("scenario", a.scenario,
                  "Scenario YAML file (default: the built-in MegaScale 175B on 12,288 GPUs)");
  cmd->add_option("--set", a.sets, "Override a scenario key: key.path=value (repeatable)")
      ->type_name("KEY=VALUE");
  cmd->add_option("--days", a.days, "Length of the run in days (default 54)");
  cmd->add_option("--trials", a.trials, "Monte Carlo trials (default 1000)");
  cmd->add_option("-j,--jobs", a.jobs, "Threads per process, 1 to 1024 (default: the cores)")
      ->check(CLI::Range(1, 1024));
  cmd->add_flag("--force", a.force,
                "Run even when the trials would simulate more than 1e9 failure events");
  cmd->add_flag("--no-search", a.no_search,
                "Skip the search for the best checkpoint interval (17 intervals around Young's)");
  cmd->add_option("--format", a.format, "text | json")->check(CLI::IsMember({"text", "json"}));
  cmd->add_option("-o,--output", a.output, "Write the result to FILE instead of stdout")
      ->check(output_file());
  cmd->add_option("--report", a.report,
                  "Write an HTML report with charts, results.csv and results.json to DIR")
      ->check(report_folder());
  return cmd;
}

int run_goodput_command(const GoodputArgs& args) {
  return run_on_group([&args](SweepGroup& group) { return goodput_run(args, group); });
}

}  // namespace trainsim::cli
