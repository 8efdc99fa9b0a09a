// Speed of the goodput Monte Carlo (issue 18): 1,000 trials of a 54-day run on 12,288 GPUs must
// take at most 5 s. Results are recorded in docs/performance.md.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "scenarios/goodput_config.h"
#include "scenarios/scenario.h"
#include "sim/goodput/goodput.h"

namespace {

using namespace trainsim;

goodput::Params megascale_params() {
  const scen::Scenario s = scen::load_scenario_file(std::string(TRAINSIM_SOURCE_DIR) +
                                                    "/scenarios/megascale-175b-12288.yaml");
  return scen::goodput_setup(s, 54).params;
}

// 1,000 trials of 54 days on one thread (the setup, one analytic iteration, is outside the loop).
void BM_Goodput1000Trials54Days12288(benchmark::State& state) {
  const goodput::Params p = megascale_params();
  double ettr = 0;
  for (auto _ : state) {
    const auto trials = goodput::run_trials(p, 0, 1000, static_cast<int>(state.range(0)));
    ettr = goodput::summarize(p, trials).ettr.mean;
    benchmark::DoNotOptimize(ettr);
  }
  state.counters["ettr"] = ettr;
  state.counters["trials/s"] =
      benchmark::Counter(1000.0 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Goodput1000Trials54Days12288)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

// What `trainsim goodput` runs by default: the configured interval and the 17-interval search.
void BM_GoodputWithIntervalSearch(benchmark::State& state) {
  const goodput::Params p = megascale_params();
  const double young = goodput::young_interval_s(p.checkpoint_blocking_s,
                                                 3600 / goodput::job_failure_rate_h(p));
  const std::vector<double> grid = goodput::interval_grid(young, p.interval_s);
  for (auto _ : state) {
    double best = 0;
    benchmark::DoNotOptimize(goodput::run_trials(p, 0, 1000, 1));
    for (const double tau : grid) {
      goodput::Params v = p;
      v.interval_s = tau;
      best = std::max(best, goodput::summarize(v, goodput::run_trials(v, 0, 1000, 1)).ettr.mean);
    }
    benchmark::DoNotOptimize(best);
  }
}
BENCHMARK(BM_GoodputWithIntervalSearch)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
