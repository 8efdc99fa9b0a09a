// Speed of the topology: the 12,288-GPU megascale-ampere graph must build in under 1 s and
// 1M flows must route in under 1 s (issue: topology). Results are recorded in
// docs/performance.md.
#include <benchmark/benchmark.h>

#include <vector>

#include "scenarios/presets.h"
#include "topology/clos.h"
#include "topology/routing.h"

namespace {

using namespace trainsim;

topo::ClusterSpec megascale_12288() {
  const auto preset = scen::cluster_preset("megascale-ampere");
  topo::ClusterSpec c = preset->cluster;
  c.gpu = *scen::gpu_preset(preset->gpu);
  c.gpus = 12288;
  return c;
}

// 1M flows over the 12,288 GPUs: GPU i % G to a spread-out destination, one QP number per
// round, so nearly every flow leaves its server and two thirds leave their pod.
std::vector<topo::Flow> million_flows(int gpus) {
  std::vector<topo::Flow> flows;
  constexpr int kFlows = 1 << 20;
  flows.reserve(kFlows);
  for (int i = 0; i < kFlows; ++i) {
    const int src = i % gpus;
    const int round = i / gpus;
    const int dst = static_cast<int>((static_cast<long>(src) * 7919 + 1 + round * 104729L) % gpus);
    flows.push_back({src, dst == src ? (dst + 1) % gpus : dst, round});
  }
  return flows;
}

// Plan, nodes, cables, CSR adjacency and the Boost.Graph copy.
void BM_BuildMegaScale12288(benchmark::State& state) {
  const topo::ClusterSpec c = megascale_12288();
  for (auto _ : state) {
    topo::ClusterGraph g = topo::build_cluster_graph(c);
    benchmark::DoNotOptimize(g.link_count());
  }
}
BENCHMARK(BM_BuildMegaScale12288)->Unit(benchmark::kMillisecond);

// The router's up/down tables (one per destination ToR) and per-switch hash settings.
void BM_RouterTables12288(benchmark::State& state) {
  const topo::ClusterGraph g = topo::build_cluster_graph(megascale_12288());
  for (auto _ : state) {
    topo::Router r(g, topo::RoutingConfig{});
    benchmark::DoNotOptimize(&r);
  }
}
BENCHMARK(BM_RouterTables12288)->Unit(benchmark::kMillisecond);

// 1M ECMP routes, one at a time into a reused path (what a flow solver does per flow), with the
// hash given by the argument: 0 crc32, 1 xor-fold, 2 toeplitz.
void BM_Route1MFlows(benchmark::State& state) {
  const topo::ClusterGraph g = topo::build_cluster_graph(megascale_12288());
  topo::RoutingConfig cfg;
  cfg.hash = static_cast<topo::HashKind>(state.range(0));
  topo::Router r(g, cfg);
  const std::vector<topo::Flow> flows = million_flows(g.gpu_count());
  std::vector<topo::LinkId> path;
  for (auto _ : state) {
    std::size_t links = 0;
    for (const topo::Flow& f : flows) {
      r.route(f, path);
      links += path.size();
    }
    benchmark::DoNotOptimize(links);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(flows.size()));
}
BENCHMARK(BM_Route1MFlows)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

// 1M routes stored in one flat Routes array (offsets + links), as route_all gives them.
void BM_RouteAll1MFlows(benchmark::State& state) {
  const topo::ClusterGraph g = topo::build_cluster_graph(megascale_12288());
  topo::Router r(g, topo::RoutingConfig{});
  const std::vector<topo::Flow> flows = million_flows(g.gpu_count());
  for (auto _ : state) {
    const topo::Routes routes = r.route_all(flows);
    benchmark::DoNotOptimize(routes.links.data());
  }
}
BENCHMARK(BM_RouteAll1MFlows)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
