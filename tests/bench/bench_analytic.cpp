// Speed of the analytic fidelity: one 175B configuration must evaluate in well under 10 ms so that
// a sweep can try thousands (issue: foundation). Results are recorded in docs/performance.md.
#include <benchmark/benchmark.h>

#include "scenarios/run_config.h"
#include "scenarios/scenario.h"
#include "sim/exec/analytic.h"

namespace {

using namespace trainsim;

// The default MegaScale 175B scenario on 12,288 GPUs: evaluation only (scenario parsed once).
void BM_Analytic175B(benchmark::State& state) {
  const scen::Scenario s =
      scen::load_scenario_file(std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/megascale-175b-12288.yaml");
  const exec::RunConfig cfg = scen::make_run_config(s);
  for (auto _ : state) {
    exec::Result r = exec::run_analytic(cfg);
    benchmark::DoNotOptimize(r.mfu);
  }
}
BENCHMARK(BM_Analytic175B)->Unit(benchmark::kMicrosecond);

// The whole path a `--set` sweep point takes: scenario from YAML + overrides, profile, evaluation.
void BM_ScenarioAndAnalytic175B(benchmark::State& state) {
  const std::string path =
      std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/megascale-175b-12288.yaml";
  for (auto _ : state) {
    const scen::Scenario s = scen::load_scenario_file(path, {"training.micro_batch=2"});
    const exec::RunConfig cfg = scen::make_run_config(s);
    exec::Result r = exec::run_analytic(cfg);
    benchmark::DoNotOptimize(r.mfu);
  }
}
BENCHMARK(BM_ScenarioAndAnalytic175B)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
