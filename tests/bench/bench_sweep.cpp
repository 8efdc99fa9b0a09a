// Sweep throughput (issue 20): `sweep --auto` on the default 12,288-GPU scenario (286,920
// points). The engine around the analytic core is timed against the core alone on the same
// points, so that what the sweep adds per point is visible. Results in docs/performance.md.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "scenarios/run_config.h"
#include "scenarios/scenario.h"
#include "scenarios/sweep.h"
#include "sim/core/error.h"
#include "sim/exec/analytic.h"

namespace {

using namespace trainsim;

const scen::Scenario& base() {
  static const scen::Scenario s = scen::load_scenario_file(
      std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/megascale-175b-12288.yaml");
  return s;
}

scen::SweepSpec auto_spec() {
  scen::SweepSpec spec;
  spec.auto_parallel = true;
  return spec;
}

const scen::SweepPlan& auto_plan() {
  static const scen::SweepPlan plan = scen::plan_sweep(base(), auto_spec());
  return plan;
}

// Planning: every --auto point of 12,288 GPUs.
void BM_SweepPlanAuto12288(benchmark::State& state) {
  std::size_t points = 0;
  for (auto _ : state) {
    const scen::SweepPlan plan = scen::plan_sweep(base(), auto_spec());
    points = plan.size();
    benchmark::DoNotOptimize(plan.cells.data());
  }
  state.counters["points"] = static_cast<double>(points);
  state.counters["points_per_s"] =
      benchmark::Counter(static_cast<double>(points), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_SweepPlanAuto12288)->Unit(benchmark::kMillisecond);

// The floor: exec::run_analytic alone on every range(0)-th point of the plan (configs made by
// setting the --auto keys on one copy of the base config; an infeasible point's exception
// included), one thread.
void BM_SweepCoreOnlyAuto12288(benchmark::State& state) {
  const scen::SweepPlan& plan = auto_plan();
  const std::size_t stride = static_cast<std::size_t>(state.range(0));
  exec::RunConfig cfg = scen::make_run_config(base());
  exec::AnalyticOptions options;
  options.enforce_memory = false;
  std::vector<std::size_t> points;
  for (std::size_t p = 0; p < plan.size(); p += stride) points.push_back(p);
  for (auto _ : state) {
    for (const std::size_t p : points) {
      cfg.parallel.tp = std::stoi(plan.value(p, 0));
      cfg.parallel.pp = std::stoi(plan.value(p, 1));
      cfg.parallel.dp = std::stoi(plan.value(p, 2));
      cfg.parallel.cp = std::stoi(plan.value(p, 3));
      cfg.parallel.ep = std::stoi(plan.value(p, 4));
      cfg.parallel.vpp = std::stoi(plan.value(p, 5));
      const std::string& sched = plan.value(p, 6);
      cfg.parallel.schedule = sched == "interleaved" ? plan::Schedule::kInterleaved
                              : sched == "gpipe"     ? plan::Schedule::kGpipe
                                                     : plan::Schedule::k1F1B;
      cfg.training.micro_batch = std::stoi(plan.value(p, 7));
      const std::string& rc = plan.value(p, 8);
      cfg.training.recompute = rc == "full"        ? model::Recompute::kFull
                               : rc == "selective" ? model::Recompute::kSelective
                                                   : model::Recompute::kNone;
      cfg.parallel.zero = std::stoi(plan.value(p, 9));
      try {
        const exec::Result r = exec::run_analytic(cfg, options);
        benchmark::DoNotOptimize(r.mfu);
      } catch (const Error& e) {
        benchmark::DoNotOptimize(e.kind());
      }
    }
  }
  state.counters["points_per_s"] = benchmark::Counter(
      static_cast<double>(points.size()), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_SweepCoreOnlyAuto12288)->Arg(16)->Unit(benchmark::kMillisecond);

// The engine's evaluation of the same points (PointEvaluator with the --auto shortcut and a
// reused run config), one thread.
void BM_SweepEvaluateAuto12288(benchmark::State& state) {
  const scen::SweepPlan& plan = auto_plan();
  const std::size_t stride = static_cast<std::size_t>(state.range(0));
  const scen::PointEvaluator evaluator(plan, base());
  exec::RunConfig scratch = evaluator.base_config();
  std::size_t n = 0;
  for (auto _ : state) {
    n = 0;
    for (std::size_t p = 0; p < plan.size(); p += stride, ++n) {
      const scen::PointResult r = evaluator.evaluate(p, scratch);
      benchmark::DoNotOptimize(r.mfu);
    }
  }
  state.counters["points_per_s"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_SweepEvaluateAuto12288)->Arg(16)->Arg(4096)->Unit(benchmark::kMillisecond);

// The whole sweep as `trainsim sweep --auto --jobs N` runs it (plan, evaluation on N threads,
// ranking; no output), wall time.
void BM_SweepRunAuto12288(benchmark::State& state) {
  scen::SweepOptions options;
  options.jobs = static_cast<int>(state.range(0));
  scen::SweepTransport one_process;
  std::size_t points = 0;
  for (auto _ : state) {
    scen::SweepOutcome o = scen::run_sweep(base(), scen::plan_sweep(base(), auto_spec()),
                                           auto_spec(), options, one_process);
    points = o.results.size();
    benchmark::DoNotOptimize(o.order.data());
  }
  state.counters["points_per_s"] = benchmark::Counter(
      static_cast<double>(points), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_SweepRunAuto12288)->Arg(1)->Arg(2)->Iterations(1)->UseRealTime()->Unit(
    benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
