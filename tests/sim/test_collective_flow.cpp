// sim/collective/flow: collectives as flows on the cluster graph. On an idle, collision-free
// fabric they must agree with the analytic closed form; with ECMP collisions they must be slower
// with one QP per connection than with 16.
#include "sim/collective/flow.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "calibrate/profile.h"
#include "sim/core/error.h"
#include "scenarios/presets.h"
#include "sim/exec/analytic.h"
#include "sim/network/flow_network.h"
#include "sim/network/maxmin.h"
#include "sim/core/simulation.h"
#include "topology/clos.h"

namespace trainsim::coll {
namespace {

struct Fixture {
  topo::ClusterSpec spec;
  calib::Profile profile;
  topo::ClusterGraph graph;
  LinkModel links;
  std::vector<double> caps;

  Fixture(const std::string& preset, int gpus)
      : spec(make_spec(preset, gpus)),
        profile(calib::builtin_profile(spec.gpu.name)),
        graph(topo::build_cluster_graph(spec)),
        links(exec::link_model(spec, profile)),
        caps(calibrated_capacities(graph, profile.nvlink.busbw_Bps / spec.gpu.nvlink_Bps,
                                   profile.nic_efficiency)) {}

  static topo::ClusterSpec make_spec(const std::string& preset, int gpus) {
    auto p = scen::cluster_preset(preset);
    topo::ClusterSpec s = p->cluster;
    s.gpu = *scen::gpu_preset(p->gpu);
    s.gpus = gpus;
    return s;
  }

  FlowCollectiveResult run(Kind k, double bytes, const std::vector<topo::GpuId>& ranks, int qps,
                           topo::SeedScope scope = topo::SeedScope::kPerSwitch) {
    topo::RoutingConfig rc;
    rc.qps_per_connection = qps;
    rc.seed_scope = scope;
    topo::Router router(graph, rc);
    return collective_flow(k, bytes, ranks, graph, router, caps, links,
                           Choice{Algorithm::kRing, Protocol::kSimple}, {});
  }
  double analytic(Kind k, double bytes, GroupShape g) {
    return collective_cost(k, bytes, g, links, Choice{Algorithm::kRing, Protocol::kSimple}).time_s;
  }
};

std::vector<topo::GpuId> packed(int n) {
  std::vector<topo::GpuId> r(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) r[static_cast<std::size_t>(i)] = i;
  return r;
}

std::vector<topo::GpuId> one_per_server(int n, int gpn, bool spread) {
  std::vector<topo::GpuId> r;
  for (int k = 0; k < n; ++k) r.push_back(k * gpn + (spread ? k % gpn : 0));
  return r;
}

// Idle fabric, no collisions possible: inside one server, across servers with per-rail rings,
// and one rank per server on one rail. Within 2 % of the closed form for ≥ 1 MB.
TEST(CollectiveFlow, AgreesWithAnalyticOnIdleFabric) {
  Fixture f("dgx-h100-superpod", 256);
  for (double S : {1e6, 64e6, 1e9}) {
    const double a8 = f.analytic(Kind::kAllReduce, S, GroupShape{8, 8, 1, 1});
    EXPECT_NEAR(f.run(Kind::kAllReduce, S, packed(8), 1).cost.time_s / a8, 1.0, 0.02) << S;
    const double a32 = f.analytic(Kind::kAllGather, S, GroupShape{32, 8, 4, 1});
    EXPECT_NEAR(f.run(Kind::kAllGather, S, packed(32), 1).cost.time_s / a32, 1.0, 0.02) << S;
    const double rail = f.analytic(Kind::kReduceScatter, S, GroupShape{16, 1, 16, 1});
    EXPECT_NEAR(f.run(Kind::kReduceScatter, S, one_per_server(16, 8, false), 1).cost.time_s / rail,
                1.0, 0.02)
        << S;
  }
}

// Eight DP rings (one per local GPU index, as data parallelism runs them) laid out across rails:
// ring j takes GPU (j + k) mod 8 of server k, so every hop leaves its rail and crosses the
// aggregation tier, and every NIC of every ToR is busy. With one QP per connection ECMP hashing
// piles several flows on some uplinks (balls into bins); 16 QPs per connection average the load
// out and come close to the collision-free closed form.
TEST(CollectiveFlow, EcmpCollisionsSlowOneQpRings) {
  Fixture f("megascale-ampere", 1024);
  const int servers = 128;
  std::vector<FlowCollectiveRequest> rings;
  for (int j = 0; j < 8; ++j) {
    FlowCollectiveRequest r{Kind::kAllGather, 256e6, {}};
    for (int k = 0; k < servers; ++k) r.ranks.push_back(k * 8 + (j + k) % 8);
    rings.push_back(r);
  }
  auto run = [&](int qps) {
    topo::RoutingConfig rc;
    rc.qps_per_connection = qps;
    topo::Router router(f.graph, rc);
    double worst = 0;
    for (const auto& r : collective_flow_batch(rings, f.graph, router, f.caps, f.links,
                                               Choice{Algorithm::kRing, Protocol::kSimple}, {})) {
      worst = std::max(worst, r.cost.time_s);
    }
    return worst;
  };
  const double one = run(1), sixteen = run(16);
  const double ideal = f.analytic(Kind::kAllGather, 256e6, GroupShape{servers, 1, servers, 1});
  EXPECT_GT(one, 1.10 * sixteen) << one << " vs " << sixteen;
  std::printf("one QP %.3f ms, 16 QPs %.3f ms, collision-free %.3f ms\n", one * 1e3, sixteen * 1e3, ideal * 1e3);
  EXPECT_GE(sixteen, 0.99 * ideal);
  EXPECT_LT(sixteen, 1.5 * ideal);  // fully loaded uplinks keep a residual imbalance
}

TEST(CollectiveFlow, AllToAllAndErrors) {
  Fixture f("dgx-h100-superpod", 64);
  const double S = 64e6;
  const FlowCollectiveResult a2a = f.run(Kind::kAllToAll, S, packed(16), 1);
  EXPECT_EQ(a2a.flows, 16 * 15);
  EXPECT_GT(a2a.cost.time_s, 0);
  topo::Router router(f.graph, topo::RoutingConfig{});
  EXPECT_THROW(collective_flow(Kind::kAllReduce, S, packed(8), f.graph, router, f.caps, f.links,
                               Choice{Algorithm::kNvls, {}}, {}),
               Error);
}

// Implied links: on megascale-ampere (8 GPUs, 8 NICs per server, one uplink per NIC, PCIe above
// the NIC rate) every PCIe hop is implied by its NIC's uplink or downlink and nothing else is;
// with PCIe below the NIC rate, or two GPUs per NIC, none is.
TEST(CollectiveFlow, ImpliedLinksArePcieHopsBehindOneNicLink) {
  Fixture f("megascale-ampere", 64);
  const std::vector<std::uint8_t> implied = implied_links(f.graph, f.caps);
  int pcie = 0, flagged = 0;
  for (topo::LinkId l = 0; l < f.graph.link_count(); ++l) {
    const bool is_pcie = f.graph.link_kind(l) == topo::LinkKind::kPcie;
    pcie += is_pcie ? 1 : 0;
    flagged += implied[static_cast<std::size_t>(l)];
    if (!is_pcie) {
      EXPECT_EQ(implied[static_cast<std::size_t>(l)], 0) << f.graph.link_name(l);
    }
  }
  EXPECT_EQ(pcie, 2 * 64);
  EXPECT_EQ(flagged, pcie);

  std::vector<double> slow = f.caps;
  for (topo::LinkId l = 0; l < f.graph.link_count(); ++l) {
    if (f.graph.link_kind(l) == topo::LinkKind::kPcie) slow[static_cast<std::size_t>(l)] = 1e9;
  }
  const std::vector<std::uint8_t> none = implied_links(f.graph, slow);
  EXPECT_EQ(std::count(none.begin(), none.end(), 1), 0);

  topo::ClusterSpec shared = f.spec;
  shared.nics_per_node = 4;  // GPUs 2i and 2i+1 share NIC i
  const topo::ClusterGraph g2 = topo::build_cluster_graph(shared);
  const std::vector<std::uint8_t> none2 =
      implied_links(g2, calibrated_capacities(g2, 1.0, f.profile.nic_efficiency));
  EXPECT_EQ(std::count(none2.begin(), none2.end(), 1), 0);
}

// The fixture's capacities with the PCIe hops that `which` selects at exactly the NIC rate.
template <typename Which>
std::vector<double> pcie_at_nic_rate(const Fixture& f, Which which) {
  std::vector<double> caps = f.caps;
  double nic = 0;
  for (topo::LinkId l = 0; l < f.graph.link_count(); ++l) {
    if (f.graph.link_kind(l) == topo::LinkKind::kNicUp) nic = caps[static_cast<std::size_t>(l)];
  }
  for (topo::LinkId l = 0; l < f.graph.link_count(); ++l) {
    if (f.graph.link_kind(l) == topo::LinkKind::kPcie && which(l)) {
      caps[static_cast<std::size_t>(l)] = nic;
    }
  }
  return caps;
}

// Leaving the implied links out changes no rate: a random permutation of 512 GPUs, 2 QPs per
// pair, solved with full paths and with the implied hops removed.
TEST(CollectiveFlow, ImpliedLinksLeaveEveryRateUnchanged) {
  Fixture f("megascale-ampere", 512);
  // PCIe exactly at the NIC rate on half the servers: equality still implies.
  const std::vector<double> caps =
      pcie_at_nic_rate(f, [&](topo::LinkId l) { return f.graph.link_src(l) % 2 == 0; });
  const std::vector<std::uint8_t> implied = implied_links(f.graph, caps);
  topo::RoutingConfig rc;
  rc.qps_per_connection = 2;
  topo::Router router(f.graph, rc);
  net::MaxMinSolver full(caps), trimmed(caps);
  std::vector<topo::LinkId> path, cut;
  int dropped = 0;
  for (int g = 0; g < 512; ++g) {
    const int dst = (g * 301 + 17) % 512;
    if (dst / 8 == g / 8) continue;  // across servers only
    for (int q = 0; q < 2; ++q) {
      ASSERT_TRUE(router.route(topo::Flow{g, dst, q}, path));
      cut.clear();
      for (const topo::LinkId l : path) {
        if (implied[static_cast<std::size_t>(l)] == 0) cut.push_back(l);
      }
      dropped += static_cast<int>(path.size() - cut.size());
      full.add_flow(path);
      trimmed.add_flow(cut);
    }
  }
  EXPECT_GT(dropped, 0);
  full.solve();
  trimmed.solve();
  for (net::FlowIndex i = 0; i < full.flow_slots(); ++i) {
    ASSERT_NEAR(full.rate(i), trimmed.rate(i), 1e-12 * full.rate(i)) << i;
  }
}

// Congestion control acts at switch egress queues: NVLink ports, PCIe hops and a NIC's own
// egress are sender links, never derated. Inside one server (NVLink only) a DCQCN all-reduce is
// the ideal one to the last bit (it was 16 % slower when every link was derated by its flow
// count); across two servers the ToR → NIC downlinks carry two channels each, derated to η(2) =
// 0.95, so it is slower, by at most 1/0.95.
TEST(CollectiveFlow, CongestionControlDeratesSwitchEgressOnly) {
  Fixture f("megascale-ampere", 16);
  const std::vector<topo::LinkId> senders = sender_links(f.graph);
  std::vector<std::uint8_t> is_sender(static_cast<std::size_t>(f.graph.link_count()), 0);
  for (const topo::LinkId l : senders) is_sender[static_cast<std::size_t>(l)] = 1;
  for (topo::LinkId l = 0; l < f.graph.link_count(); ++l) {
    const topo::LinkKind k = f.graph.link_kind(l);
    const bool host = k == topo::LinkKind::kNvlink || k == topo::LinkKind::kPcie ||
                      k == topo::LinkKind::kNicUp;
    EXPECT_EQ(is_sender[static_cast<std::size_t>(l)], host ? 1 : 0) << f.graph.link_name(l);
  }
  const auto time_under = [&](net::CongestionControl cc, int gpus) {
    FlowCollectiveOptions o;
    o.network.congestion_control = cc;
    topo::Router router(f.graph, topo::RoutingConfig{});
    return collective_flow(Kind::kAllReduce, 64.0 * 1024 * 1024, packed(gpus), f.graph, router,
                           f.caps, f.links, Choice{Algorithm::kRing, Protocol::kSimple}, o)
        .cost.time_s;
  };
  EXPECT_EQ(time_under(net::CongestionControl::kDcqcn, 8),
            time_under(net::CongestionControl::kIdeal, 8));
  const double ideal = time_under(net::CongestionControl::kIdeal, 16);
  const double dcqcn = time_under(net::CongestionControl::kDcqcn, 16);
  EXPECT_GT(dcqcn, ideal * 1.001);
  EXPECT_LE(dcqcn, ideal / 0.95 * (1 + 1e-9));
}

// The implied PCIe hops stay implied under a derating congestion control once the PCIe hops and
// NIC egress are sender links: the same 512-GPU permutation under DCQCN, started with full paths
// and with the implied hops removed, ends every flow at the same picosecond.
TEST(CollectiveFlow, ImpliedLinksStayImpliedUnderDcqcn) {
  Fixture f("megascale-ampere", 512);
  // PCIe exactly at the NIC rate: a derated PCIe hop (η(2)·C with two queue pairs on it) would
  // bind before the NIC's link does.
  const std::vector<double> caps = pcie_at_nic_rate(f, [](topo::LinkId) { return true; });
  const std::vector<std::uint8_t> implied = implied_links(f.graph, caps);
  topo::RoutingConfig rc;
  rc.qps_per_connection = 2;
  topo::Router router(f.graph, rc);
  const auto ends = [&](bool trim) {
    Simulation sim;
    net::FlowNetworkOptions o;
    o.config.congestion_control = net::CongestionControl::kDcqcn;
    o.sender_links = sender_links(f.graph);
    o.check_invariants = true;
    net::FlowNetwork& net = sim.emplace<net::FlowNetwork>(caps, o);
    std::vector<TimePs> end;
    net.flow_done().subscribe([&](const net::FlowDone& d) {
      if (end.size() <= d.tag) end.resize(d.tag + 1);
      end[d.tag] = d.end;
    });
    std::vector<topo::LinkId> path, cut;
    std::uint64_t tag = 0;
    for (int g = 0; g < 512; ++g) {
      const int dst = (g * 301 + 17) % 512;
      if (dst / 8 == g / 8) continue;
      for (int q = 0; q < 2; ++q) {
        EXPECT_TRUE(router.route(topo::Flow{g, dst, q}, path));
        cut.clear();
        for (const topo::LinkId l : path) {
          if (!trim || implied[static_cast<std::size_t>(l)] == 0) cut.push_back(l);
        }
        // Sizes differ per pair, so that completions re-rate the links many times.
        net.start_flow({cut, 1'000'000 + 4096 * ((g * 7 + q) % 97), net::kUnlimited, tag++});
      }
    }
    sim.run();
    return end;
  };
  const std::vector<TimePs> full = ends(false), trimmed = ends(true);
  ASSERT_EQ(full.size(), trimmed.size());
  ASSERT_GT(full.size(), 900u);
  for (std::size_t i = 0; i < full.size(); ++i) EXPECT_EQ(full[i], trimmed[i]) << i;
}


// A group whose servers hold unequal numbers of its ranks (13 ranks packed on 8-GPU servers: 8
// and 5; a job whose last server is partly used). Each server's chain covers its own ranks, so
// in every channel each rank receives exactly once and each server sends exactly one edge to the
// next; the ring ends on an idle fabric (it read past the group and crashed until 2026-12-05).
TEST(CollectiveFlow, RingOverUnevenServersCoversEveryRankOnce) {
  Fixture f("dgx-h100-superpod", 64);
  for (const int n : {9, 11, 13}) {
    const std::vector<topo::GpuId> ranks = packed(n);
    const FlowCollectiveRequest req{Kind::kAllReduce, 64e6, ranks};
    const CollectiveFlows plan = plan_collective_flows(req, f.graph, f.links, {}, 0);
    ASSERT_TRUE(plan.ring);
    const int C = plan.result.channels;
    ASSERT_GT(C, 0);
    for (int c = 0; c < C; ++c) {
      std::vector<int> received(static_cast<std::size_t>(n), 0);
      int cross = 0;
      for (const FlowConnection& e : plan.conns) {
        if (e.qp_base != c) continue;
        ASSERT_GE(e.dst, 0);
        ASSERT_LT(e.dst, n) << "channel " << c;
        ASSERT_GE(e.src, 0);
        ASSERT_LT(e.src, n) << "channel " << c;
        ++received[static_cast<std::size_t>(e.dst)];
        if (e.src / 8 != e.dst / 8) ++cross;
      }
      for (int r = 0; r < n; ++r) EXPECT_EQ(received[static_cast<std::size_t>(r)], 1) << n << " " << c << " " << r;
      EXPECT_EQ(cross, 2) << n << " channel " << c;  // two servers: one edge each way
    }
    const FlowCollectiveResult done = f.run(Kind::kAllReduce, 64e6, ranks, 1);
    EXPECT_TRUE(done.routed);
    EXPECT_GT(done.cost.time_s, 0.0);
    EXPECT_TRUE(std::isfinite(done.cost.time_s));
  }
}

}  // namespace
}  // namespace trainsim::coll
