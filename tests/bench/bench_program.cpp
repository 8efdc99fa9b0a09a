// Speed of the event-driven fidelities (issue: schedules): the default MegaScale 175B iteration
// at `schedule` and `flow` fidelity for a range of GPU counts (global batch scaled with DP so that
// every pipeline runs 32 micro-batches). Counters: Program tasks, task instances executed, flows
// started, events. docs/performance.md quotes the medians of a full run.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "scenarios/run_config.h"
#include "scenarios/scenario.h"
#include "sim/core/process_memory.h"
#include "sim/exec/program_exec.h"

namespace {

using namespace trainsim;

void run(benchmark::State& state, const char* fidelity, std::vector<std::string> extra = {}) {
  const int gpus = static_cast<int>(state.range(0));
  std::vector<std::string> sets = {"cluster.gpus=" + std::to_string(gpus),
                                   "training.global_batch=" + std::to_string(gpus / 2),
                                   std::string("simulation.fidelity=") + fidelity};
  sets.insert(sets.end(), extra.begin(), extra.end());
  const scen::Scenario s = scen::load_scenario_file(
      std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/megascale-175b-12288.yaml", sets);
  const exec::RunConfig cfg = scen::make_run_config(s);
  exec::Result r;
  for (auto _ : state) {
    r = scen::run_scenario(s, cfg);
    // Not DoNotOptimize(r.mfu): with GCC 12 and this Google Benchmark its register constraint
    // overwrote the double with a pointer (the counter read 0).
    benchmark::ClobberMemory();
  }
  state.counters["tasks_per_program"] = static_cast<double>(r.exec.tasks_per_role);
  state.counters["task_instances"] = static_cast<double>(r.exec.task_instances);
  state.counters["flows"] = static_cast<double>(r.exec.flows);
  state.counters["events"] = static_cast<double>(r.exec.events);
  state.counters["flow_solves"] = static_cast<double>(r.exec.solves);
  state.counters["partial_solves"] = static_cast<double>(r.exec.solves_partial);
  state.counters["flows_refilled"] = static_cast<double>(r.exec.flows_refilled);
  state.counters["mfu_pct"] = 100.0 * r.mfu;
}

void BM_Schedule175B(benchmark::State& state) { run(state, "schedule"); }
void BM_Flow175B(benchmark::State& state) { run(state, "flow"); }
// The analytic rank 1 of `sweep --auto` on the default scenario: TP 16 across two servers, whose
// ring collectives go through the NICs as one replayed component per copy (docs/performance.md,
// "Replays without per-flow work").
void BM_FlowTp16AcrossServers(benchmark::State& state) {
  run(state, "flow",
      {"parallel.tp=16", "parallel.pp=2", "parallel.vpp=48", "training.micro_batch=8",
       "training.recompute=none"});
}

// The same iteration under congestion control (issue 16: within 2x of BM_Flow175B at 12,288
// GPUs; docs/performance.md, "Congestion control at flow fidelity").
void BM_FlowDcqcn175B(benchmark::State& state) {
  run(state, "flow", {"network.congestion_control=dcqcn"});
}

// Every rank instead of the symmetry shortcut (issue 20: at 12,288 GPUs within 60 s; docs/
// performance.md, "Cost growth"): the executor runs every rank's Program and the network every
// rank's own transfer.
void BM_FlowEveryRank175B(benchmark::State& state) {
  run(state, "flow", {"simulation.symmetry=false"});
}

BENCHMARK(BM_Schedule175B)->Arg(256)->Arg(1536)->Arg(12288)->Arg(32768)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Flow175B)->Arg(256)->Arg(1536)->Arg(3072)->Arg(12288)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_FlowDcqcn175B)->Arg(3072)->Arg(12288)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_FlowEveryRank175B)->Arg(256)->Arg(1536)->Arg(3072)->Arg(12288)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_FlowTp16AcrossServers)->Arg(256)->Arg(1536)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

// As `trainsim` does for its event-driven runs: the heap advised to use huge pages
// (sim/core/process_memory.h), so that these figures are the CLI's; TRAINSIM_HUGE_PAGES=0 in the
// environment measures without.
int main(int argc, char** argv) {
  trainsim::advise_huge_pages_for_heap();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
