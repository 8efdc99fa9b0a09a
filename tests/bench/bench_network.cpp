// Speed of the flow-level network on the 12,288-GPU megascale-ampere fabric (issue: event core and
// flow-level network). Results and the command are in docs/performance.md.
//
// The fabric is the `megascale-ampere` cluster preset built by topology/ (build_cluster_graph:
// MegaScale's 3-tier 1:1 Clos of 64 × 400 G switches, ToR downlinks split 2 × 200 G, 8 NICs per
// server on 8 rails); paths come from its ECMP router with the default routing settings (CRC32,
// per-switch seeds, one QP = one 5-tuple). A path lists every link GPU to GPU: GPU → NIC → ToR →
// … → ToR → NIC → GPU (8 links across the core).
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "scenarios/presets.h"
#include "sim/core/rng.h"
#include "sim/core/simulation.h"
#include "sim/network/flow_network.h"
#include "sim/network/maxmin.h"
#include "sim/network/packet_network.h"
#include "topology/clos.h"
#include "topology/graph.h"
#include "topology/routing.h"

namespace {

using namespace trainsim;
using namespace trainsim::net;
using topo::GpuId;
using topo::LinkId;

constexpr int kGpus = 12288;
constexpr int kRails = 8;

// The fabric, its router, and for every GPU the ToR its NIC hangs from and the GPUs under that
// ToR (the servers of its ToR group, same rail).
struct Fabric {
  topo::ClusterGraph graph;
  std::unique_ptr<topo::Router> router;
  std::vector<topo::NodeId> tor_of_gpu;
  std::map<topo::NodeId, std::vector<GpuId>> gpus_under_tor;
  double nic_Bps = 0;

  static const Fabric& get() {
    static const Fabric fabric;
    return fabric;
  }

 private:
  Fabric() : graph(build()) {
    router = std::make_unique<topo::Router>(graph, topo::RoutingConfig{});
    std::vector<topo::NodeId> tor_of_nic(static_cast<std::size_t>(graph.node_count()), -1);
    for (LinkId l = 0; l < graph.link_count(); ++l) {
      if (graph.link_kind(l) == topo::LinkKind::kNicUp) {
        tor_of_nic[static_cast<std::size_t>(graph.link_src(l))] = graph.link_dst(l);
        nic_Bps = graph.link_capacity_Bps()[static_cast<std::size_t>(l)];
      }
    }
    for (GpuId g = 0; g < kGpus; ++g) {
      const topo::NodeId tor = tor_of_nic[static_cast<std::size_t>(graph.nic_of_gpu(g))];
      tor_of_gpu.push_back(tor);
      gpus_under_tor[tor].push_back(g);
    }
  }

  static topo::ClusterGraph build() {
    topo::ClusterSpec spec = scen::cluster_preset("megascale-ampere")->cluster;
    spec.gpu = *scen::gpu_preset(scen::cluster_preset("megascale-ampere")->gpu);
    spec.gpus = kGpus;
    return topo::build_cluster_graph(spec);
  }
};

struct Flows {
  topo::Routes routes;
  std::vector<GpuId> src;

  std::size_t size() const { return routes.size(); }
  std::span<const LinkId> path(std::size_t i) const { return routes.path(i); }
};

Flows route(const std::vector<topo::Flow>& flows) {
  Flows out;
  out.routes = Fabric::get().router->route_all(flows);
  for (const topo::Flow& f : flows) out.src.push_back(f.src);
  return out;
}

// NCCL-style rings on each rail: GPU r of server s sends to GPU r of server s+1.
Flows rail_ring(int qps) {
  std::vector<topo::Flow> flows;
  for (GpuId g = 0; g < kGpus; ++g) {
    for (int q = 0; q < qps; ++q) flows.push_back({g, (g + kRails) % kGpus, q});
  }
  return route(flows);
}

// Rings among the GPUs under each ToR (rail-local: GPU → NIC → ToR → NIC → GPU).
Flows rail_local(int qps) {
  std::vector<topo::Flow> flows;
  for (const auto& [tor, gpus] : Fabric::get().gpus_under_tor) {
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      for (int q = 0; q < qps; ++q) flows.push_back({gpus[i], gpus[(i + 1) % gpus.size()], q});
    }
  }
  return route(flows);
}

// A random permutation of the GPUs without fixed points (a random cyclic order, each GPU sending
// to the next in it), `qps` QPs per pair: every GPU sends to one GPU and receives from one.
Flows random_permutation(int qps, std::uint64_t seed) {
  std::vector<GpuId> order(kGpus);
  for (GpuId g = 0; g < kGpus; ++g) order[static_cast<std::size_t>(g)] = g;
  Rng rng(seed);
  rng.shuffle(order.begin(), order.end());
  std::vector<topo::Flow> flows;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const GpuId src = order[i], dst = order[(i + 1) % order.size()];
    for (int q = 0; q < qps; ++q) flows.push_back({src, dst, q});
  }
  return route(flows);
}

// Per-GPU send rate (sum over its flows), min and mean, in GB/s.
void rate_counters(benchmark::State& state, const MaxMinSolver& s, const Flows& flows,
                   const std::vector<FlowIndex>& ids) {
  std::vector<double> per_gpu(kGpus, 0.0);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    per_gpu[static_cast<std::size_t>(flows.src[i])] += s.rate(ids[i]);
  }
  double sum = 0, low = per_gpu[0];
  for (const double r : per_gpu) {
    sum += r;
    low = std::min(low, r);
  }
  state.counters["gpu_GBps_min"] = low / 1e9;
  state.counters["gpu_GBps_mean"] = sum / kGpus / 1e9;
}

double peak_rss_MiB() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

// One full solve (all components from scratch) of a fixed set of flows.
void full_solve(benchmark::State& state, const Flows& flows) {
  MaxMinSolver s(Fabric::get().graph.link_capacity_Bps());
  std::vector<FlowIndex> ids;
  ids.reserve(flows.size());
  for (std::size_t i = 0; i < flows.size(); ++i) ids.push_back(s.add_flow(flows.path(i)));
  for (auto _ : state) {
    benchmark::DoNotOptimize(s.solve_all().size());
  }
  rate_counters(state, s, flows, ids);
  state.counters["flows"] = static_cast<double>(flows.size());
  state.counters["path_elements"] = static_cast<double>(flows.routes.links.size());
  state.counters["solver_MiB"] = static_cast<double>(s.memory_bytes()) / (1 << 20);
  state.counters["peak_rss_MiB"] = peak_rss_MiB();
}

void BM_FullSolveRailRing(benchmark::State& state) { full_solve(state, rail_ring(1)); }
BENCHMARK(BM_FullSolveRailRing)->Unit(benchmark::kMillisecond);

void BM_FullSolveRandomPermutation16Qp(benchmark::State& state) {
  full_solve(state, random_permutation(16, 1));
}
BENCHMARK(BM_FullSolveRandomPermutation16Qp)->Unit(benchmark::kMillisecond);

// Starting every flow of the 16-QP permutation in one batch through the FlowNetwork: adding the
// flows to the solver, one solve, every completion date into the heap.
void BM_NetworkStartRandomPermutation16Qp(benchmark::State& state) {
  const Flows flows = random_permutation(16, 1);
  // The process peak before any network exists: the fabric graph, its router and the routes.
  const double baseline_MiB = peak_rss_MiB();
  std::size_t bytes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto sim = std::make_unique<Simulation>();
    FlowNetwork& net = sim->emplace<FlowNetwork>(Fabric::get().graph.link_capacity_Bps());
    state.ResumeTiming();
    for (std::size_t i = 0; i < flows.size(); ++i) {
      net.start_flow({flows.path(i), 1'000'000'000, Fabric::get().nic_Bps, i});
    }
    sim->run_until(TimePs{0});
    benchmark::DoNotOptimize(net.stats().rate_changes);
    state.PauseTiming();
    bytes = net.memory_bytes();
    sim.reset();
    state.ResumeTiming();
  }
  state.counters["network_MiB"] = static_cast<double>(bytes) / (1 << 20);
  state.counters["peak_rss_before_MiB"] = baseline_MiB;
  state.counters["peak_rss_MiB"] = peak_rss_MiB();
}
BENCHMARK(BM_NetworkStartRandomPermutation16Qp)->Unit(benchmark::kMillisecond)->Iterations(3);

// One flow arriving into a running network: the timed part is start_flow plus the end-of-batch
// re-solve of the touched components and the completion-heap updates of the flows whose rate
// changed. The flow is then aborted (untimed) so that every iteration sees the same network.
void arrival(benchmark::State& state, const Flows& flows, bool cross_pod) {
  Simulation sim;
  FlowNetwork& net = sim.emplace<FlowNetwork>(Fabric::get().graph.link_capacity_Bps());
  for (std::size_t i = 0; i < flows.size(); ++i) {
    net.start_flow({flows.path(i), 1'000'000'000'000, Fabric::get().nic_Bps, i});
  }
  sim.run_until(TimePs{0});
  Rng rng(7);
  std::vector<LinkId> path;
  std::vector<double> times_us;
  std::int64_t resolved = 0;
  const Fabric& fabric = Fabric::get();
  for (auto _ : state) {
    const auto src = static_cast<GpuId>(rng.uniform_below(kGpus));
    GpuId dst;
    if (cross_pod) {
      // Half the cluster away: through the core.
      dst = (src + kGpus / 2 + kRails * static_cast<GpuId>(rng.uniform_below(64))) % kGpus;
    } else {
      // Another GPU under the same ToR (same rail, another server): the path stays below it.
      const std::vector<GpuId>& peers =
          fabric.gpus_under_tor.at(fabric.tor_of_gpu[static_cast<std::size_t>(src)]);
      do {
        dst = peers[rng.uniform_below(peers.size())];
      } while (dst == src);
    }
    fabric.router->route(topo::Flow{src, dst, 1000}, path);
    const std::int64_t before = net.stats().flows_resolved;
    const auto start = std::chrono::steady_clock::now();
    const FlowId f = net.start_flow({path, 1'000'000'000, Fabric::get().nic_Bps, 0});
    sim.run_until(sim.now());
    const auto stop = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(stop - start).count();
    state.SetIterationTime(seconds);
    times_us.push_back(seconds * 1e6);
    resolved += net.stats().flows_resolved - before;
    net.abort_flow(f);
    sim.run_until(sim.now());
  }
  std::sort(times_us.begin(), times_us.end());
  state.counters["p50_us"] = times_us[times_us.size() / 2];
  state.counters["p99_us"] = times_us[times_us.size() * 99 / 100];
  state.counters["flows"] = static_cast<double>(flows.size());
  state.counters["flows_resolved_per_arrival"] =
      static_cast<double>(resolved) / static_cast<double>(times_us.size());
}

void BM_ArrivalRailLocal100k(benchmark::State& state) { arrival(state, rail_local(8), false); }
BENCHMARK(BM_ArrivalRailLocal100k)->UseManualTime()->Unit(benchmark::kMicrosecond);

void BM_ArrivalGiantComponent(benchmark::State& state) {
  arrival(state, random_permutation(16, 1), true);
}
BENCHMARK(BM_ArrivalGiantComponent)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(20);

}  // namespace

// Packet level (issue 16): an 8 → 1 incast of 16 MB each over 25 GB/s links with 1 µs
// latency, line rate (arg 0), DCQCN (1), Swift (2) or MegaScale's hybrid (3); `events/s` counts
// the simulation's dispatched events per second of wall time, `packets` the packets sent.
// Departures beside lock-step rings (docs/network-model.md §2.2, verified partial re-fills):
// 64 rings, each one flow over 192 NIC links (its ranks'), every NIC also carrying 2 transfers
// held by private links of 1…8 (a pipeline exchange and the next), so a ring shares each NIC and
// is set by the tightest one. Each timed step removes the next transfer in turn and solves, then adds
// it back and solves (untimed): the departure's solve re-fills what it must. Argument 0: the
// level-restricted search; 1: verified partial re-fills. Same rates either way (tests).
void BM_DepartureBesideLockStepRings(benchmark::State& state) {
  const int rings = 64;
  const int ranks = 192;
  const int nics = rings * ranks / 8;  // 8 rings per NIC: the TP ranks' rings of a stage
  std::vector<double> capacity(static_cast<std::size_t>(nics), 25.0);
  const int transfers = 2 * nics;
  for (int t = 0; t < transfers; ++t) capacity.push_back(1.0 + static_cast<double>(t % 8));
  MaxMinSolver s(capacity);
  s.set_verified_refill(state.range(0) == 1);
  Rng rng(5);
  for (int r = 0; r < rings; ++r) {
    std::vector<LinkId> path;
    for (int k = 0; k < ranks; ++k) path.push_back(static_cast<LinkId>(rng.uniform_below(nics)));
    s.add_flow(path);
  }
  std::vector<std::vector<LinkId>> paths;
  std::vector<FlowIndex> ids;
  for (int t = 0; t < transfers; ++t) {
    paths.push_back({static_cast<LinkId>(t / 2), static_cast<LinkId>(nics + t)});
    ids.push_back(s.add_flow(paths.back()));
  }
  s.solve_all();
  std::size_t next = 0;
  for (auto _ : state) {
    const std::size_t t = next++ % ids.size();
    const auto start = std::chrono::steady_clock::now();
    s.remove_flow(ids[t]);
    benchmark::DoNotOptimize(s.solve().size());
    const auto stop = std::chrono::steady_clock::now();
    state.SetIterationTime(std::chrono::duration<double>(stop - start).count());
    ids[t] = s.add_flow(paths[t]);
    s.solve();
  }
  state.counters["verified"] = static_cast<double>(s.verified_solves());
  state.counters["fallbacks"] = static_cast<double>(s.verified_fallbacks());
}
BENCHMARK(BM_DepartureBesideLockStepRings)->DenseRange(0, 1)->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(2000);

void BM_PacketIncast8x16MB(benchmark::State& state) {
  const int n = 8;
  std::int64_t events = 0, packets = 0;
  for (auto _ : state) {
    Simulation sim(1);
    net::PacketNetworkOptions o;
    constexpr net::CongestionControl kCc[] = {net::CongestionControl::kIdeal,
                                              net::CongestionControl::kDcqcn,
                                              net::CongestionControl::kSwift,
                                              net::CongestionControl::kMegaScale};
    o.config.congestion_control = kCc[state.range(0)];
    net::PacketNetwork& pn = sim.emplace<net::PacketNetwork>(
        std::vector<double>(n + 1, 25e9), std::vector<TimePs>(n + 1, TimePs::from_us(1)), o);
    for (int i = 0; i < n; ++i) {
      const std::vector<topo::LinkId> path{i, n};
      pn.start_flow({path, 16 << 20, net::kUnlimited, static_cast<std::uint64_t>(i)});
    }
    sim.run();
    events += static_cast<std::int64_t>(sim.events_dispatched());
    packets += pn.stats().packets;
  }
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["packets"] = benchmark::Counter(static_cast<double>(packets), benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_PacketIncast8x16MB)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);

// The event queue alone, as an executor of identical ranks drives it: 768 ranks, each with one
// pending event; each pop schedules the rank's next event a step later, and three pops in five
// also move another rank's pending event (an SM hold changing a compute task's end). Arg 0: the
// steps come from 8 durations, so the pending events share few times (the every-rank run at
// 768 GPUs has 774 events over 22 times); arg 1: from a continuum, every time distinct (a
// packet-level run). Time per pop, with its push and reschedule.
void BM_EventQueueRanks(benchmark::State& state) {
  struct Sink : EventTarget {
    void on_event(std::uint64_t) override {}
  } sink;
  constexpr int kRanks = 768;
  const bool distinct = state.range(0) == 1;
  EventQueue q;
  Rng rng(5);
  std::vector<EventHandle> h(kRanks);
  auto step = [&] {
    return TimePs{distinct ? static_cast<std::int64_t>(rng.uniform_below(1'000'000'000)) + 1
                           : static_cast<std::int64_t>(1 + rng.uniform_below(8)) * 1'000'000};
  };
  for (int r = 0; r < kRanks; ++r) h[r] = q.push(step(), &sink, static_cast<std::uint64_t>(r));
  for (auto _ : state) {
    const EventQueue::Event e = q.pop();
    const auto r = static_cast<std::size_t>(e.tag);
    h[r] = q.push(e.time + step(), &sink, e.tag);
    if (rng.uniform_below(5) < 3) {
      const auto o = static_cast<std::size_t>(rng.uniform_below(kRanks));
      q.reschedule(h[o], e.time + step());
    }
    benchmark::DoNotOptimize(e);
  }
}
BENCHMARK(BM_EventQueueRanks)->DenseRange(0, 1)->Unit(benchmark::kNanosecond);

BENCHMARK_MAIN();
