// Routing (topology/routing.h): purity of ECMP, QP spreading, hash polarization, failures, and the
// alternative path policies. Fabrics:
// - fat tree k = 8: 128 hosts, 16 per pod, 4 per edge switch; 4 aggregation switches per pod,
//   16 cores in 4 groups; (k/2)^2 = 16 paths between pods.
// - "mini MegaScale": 8 rails, radix-16 switches 1:1, ToR ports split in two: 16 servers per ToR
//   group, pods of 8 ToRs (one group), 1,024 GPUs = 8 pods; the top tier has 8 planes of
//   c = 4 cores (8 pods x 8 uplinks / c <= 16): 64 ToRs, 64 aggregation switches, 32 cores.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "sim/core/error.h"
#include "topology/clos.h"
#include "topology/routing.h"
#include "topology/stats.h"
#include "topology/traffic.h"

namespace trainsim::topo {
namespace {

ClusterSpec mini_megascale(int gpus = 1024) {
  ClusterSpec c;
  c.name = "mini";
  c.gpu.name = "a100-80gb";
  c.gpu.nvlink_Bps = 300e9;
  c.gpus = gpus;
  c.gpus_per_node = 8;
  c.nics_per_node = 8;
  c.nic_Gbps = 200;
  c.fabric.tiers = 3;
  c.fabric.switch_radix = 16;
  c.fabric.switch_port_Gbps = 400;
  c.fabric.port_split = 2;
  return c;
}

TEST(MiniMegaScale, Shape) {
  const ClusterGraph g = build_cluster_graph(mini_megascale());
  EXPECT_EQ(g.switches_per_tier(), (std::vector<int>{64, 64, 32}));
}

// Same seed, same paths, byte for byte, whatever the order flows are routed in; another seed
// moves most flows.
TEST(Ecmp, SameSeedSamePathsByteForByte) {
  const ClusterGraph g = build_cluster_graph(mini_megascale());
  TrafficSpec t;
  t.pattern = TrafficPattern::kPermutation;
  t.seed = 7;
  const std::vector<Flow> flows = make_flows(t, g.gpu_count(), 4);
  RoutingConfig cfg;
  cfg.seed = 42;
  Router a(g, cfg);
  const Routes ra = a.route_all(flows);
  Router b(g, cfg);
  std::vector<Flow> reversed(flows.rbegin(), flows.rend());
  const Routes rb = b.route_all(reversed);
  ASSERT_EQ(ra.size(), flows.size());
  ASSERT_TRUE(ra.unrouted.empty());
  for (std::size_t i = 0; i < flows.size(); ++i) {
    const auto pa = ra.path(i);
    const auto pb = rb.path(flows.size() - 1 - i);
    ASSERT_TRUE(std::equal(pa.begin(), pa.end(), pb.begin(), pb.end())) << i;
  }
  EXPECT_EQ(a.route_all(flows).links, ra.links);  // and again, byte for byte

  cfg.seed = 43;
  Router c(g, cfg);
  const Routes rc = c.route_all(flows);
  std::size_t moved = 0;
  for (std::size_t i = 0; i < flows.size(); ++i) {
    const auto pa = ra.path(i);
    const auto pc = rc.path(i);
    moved += std::equal(pa.begin(), pa.end(), pc.begin(), pc.end()) ? 0 : 1;
  }
  EXPECT_GT(moved, flows.size() / 2);
}

// 16 QPs of one connection across pods (2,048 equal-cost paths): distinct UDP source ports and,
// hashed independently, nearly all on distinct paths; one QP always takes one path.
TEST(Ecmp, QpsOfAConnectionSpreadOverPaths) {
  const ClusterGraph g = build_cluster_graph(mini_megascale());
  RoutingConfig cfg;
  cfg.qps_per_connection = 16;
  Router r(g, cfg);
  const GpuId src = 0, dst = 1023;
  EXPECT_EQ(r.path_count(src, dst), 8u * 8u * 2u);  // 8 aggs x 8 uplinks x 2 parallel down links
  std::set<std::uint16_t> ports;
  std::set<std::vector<LinkId>> paths;
  std::vector<LinkId> path;
  for (int q = 0; q < 16; ++q) {
    const FiveTuple t = r.five_tuple({src, dst, q});
    EXPECT_EQ(t.dst_port, 4791);
    EXPECT_EQ(t.protocol, 17);
    EXPECT_EQ(t.src_ip, Router::nic_ip(0));
    EXPECT_EQ(t.dst_ip, Router::nic_ip(1023));
    ports.insert(t.src_port);
    ASSERT_TRUE(r.route({src, dst, q}, path));
    paths.insert(path);
  }
  EXPECT_EQ(ports.size(), 16u);
  // 16 independent throws onto 128 paths give 128 (1 - (127/128)^16) = 15.1 distinct paths on
  // average; 12 or fewer has probability below 1%.
  EXPECT_GE(paths.size(), 13u);
  std::vector<LinkId> again;
  ASSERT_TRUE(r.route({src, dst, 3}, again));
  ASSERT_TRUE(r.route({src, dst, 3}, path));
  EXPECT_EQ(again, path);
}

// Hash polarization: with one seed everywhere, an aggregation switch receives only the flows
// whose hash picked it at the edge switch (h mod 4 = j) and picks its core with the same h mod 4,
// so every flow through aggregation switch j takes core j of its group: 4 cores of 16 carry all
// the traffic from an edge switch. Seeds per tier or per switch use all 16.
TEST(Ecmp, EqualSeedsOnTwoTiersPolarize) {
  const ClusterGraph g = build_fat_tree(8);
  std::vector<Flow> flows;
  for (GpuId s = 0; s < 4; ++s) {                                 // the hosts of edge switch 0
    for (GpuId d = 16; d < 128; ++d) flows.push_back({s, d, 0});  // every host of other pods
  }
  const auto cores_used = [&](SeedScope scope) {
    RoutingConfig cfg;
    cfg.seed_scope = scope;
    cfg.seed = 5;
    Router r(g, cfg);
    std::set<NodeId> cores;
    std::set<std::pair<LinkId, LinkId>> up_paths;  // edge->agg, agg->core
    std::vector<LinkId> path;
    for (const Flow& f : flows) {
      EXPECT_TRUE(r.route(f, path));
      for (const LinkId l : path) {
        if (g.link_kind(l) == LinkKind::kUp && g.node(g.link_dst(l)).tier == 3) {
          cores.insert(g.link_dst(l));
        }
      }
      up_paths.emplace(path[2], path[3]);
    }
    return std::pair{cores.size(), up_paths.size()};
  };
  const auto global = cores_used(SeedScope::kGlobal);
  const auto tier = cores_used(SeedScope::kPerTier);
  const auto sw = cores_used(SeedScope::kPerSwitch);
  EXPECT_EQ(global.first, 4u);
  EXPECT_EQ(tier.first, 16u);
  EXPECT_EQ(sw.first, 16u);
  // Of the 16 distinct ways up (4 aggregation switches x 4 cores), polarized hashing uses 4.
  EXPECT_EQ(global.second, 4u);
  EXPECT_EQ(tier.second, 16u);
  EXPECT_EQ(sw.second, 16u);
  for (HashKind kind : {HashKind::kXorFold, HashKind::kToeplitz}) {
    RoutingConfig cfg;
    cfg.hash = kind;
    cfg.seed_scope = SeedScope::kGlobal;
    Router r(g, cfg);
    std::set<NodeId> cores;
    std::vector<LinkId> path;
    for (const Flow& f : flows) {
      ASSERT_TRUE(r.route(f, path));
      cores.insert(g.link_dst(path[3]));  // gpu->nic, nic->edge, edge->agg, agg->core
    }
    EXPECT_EQ(cores.size(), 4u) << to_string(kind);
  }
}

// Through the fabric: 1,000 flows leaving one leaf over its 16 uplinks (2-tier Clos, radix 32,
// one GPU per server). The max/mean over 100 seeds averages to the exact balls-into-bins
// expectation 1.2296 (test_hash.cpp) within 0.03.
TEST(Ecmp, BallsIntoBinsOnALeafsUplinks) {
  ClusterSpec c;
  c.gpu.name = "host";
  c.gpus = 64;
  c.gpus_per_node = 1;
  c.nics_per_node = 1;
  c.nic_Gbps = 100;
  c.fabric.tiers = 2;
  c.fabric.switch_radix = 32;
  c.fabric.switch_port_Gbps = 100;
  c.fabric.port_split = 1;
  c.fabric.rail_optimized = false;
  const ClusterGraph g = build_cluster_graph(c);
  ASSERT_EQ(g.switches_per_tier(), (std::vector<int>{4, 2}));
  std::vector<Flow> flows;
  for (int i = 0; i < 1000; ++i) flows.push_back({i % 16, 16 + (i / 16) % 48, i / 768});
  double sum = 0;
  const int trials = 100;
  for (int seed = 1; seed <= trials; ++seed) {
    RoutingConfig cfg;
    cfg.seed = static_cast<std::uint32_t>(seed);
    Router r(g, cfg);
    std::map<LinkId, int> up;
    std::vector<LinkId> path;
    for (const Flow& f : flows) {
      ASSERT_TRUE(r.route(f, path));
      ++up[path[2]];  // gpu->nic, nic->leaf, leaf->spine
    }
    ASSERT_EQ(up.size(), 16u);
    int most = 0;
    for (const auto& [l, n] : up) most = std::max(most, n);
    sum += most / 62.5;
  }
  std::printf("leaf uplinks: mean max/mean over %d seeds %.4f (exact 1.2296)\n", trials,
              sum / trials);
  EXPECT_NEAR(sum / trials, 1.2296, 0.03);
}

std::vector<std::vector<LinkId>> without(const std::vector<std::vector<LinkId>>& paths, LinkId l) {
  std::vector<std::vector<LinkId>> out;
  for (const auto& p : paths) {
    const bool through = std::find(p.begin(), p.end(), l) != p.end() ||
                         std::find(p.begin(), p.end(), ClusterGraph::reverse(l)) != p.end();
    if (!through) out.push_back(p);
  }
  return out;
}

// A failed cable removes exactly the paths through it, at every level of the tree.
TEST(Failures, AFailedLinkRemovesExactlyThePathsThroughIt) {
  const ClusterGraph g = build_fat_tree(8);
  const GpuId src = 0, dst = 127;
  const std::vector<std::vector<LinkId>> all = Router(g, RoutingConfig{}).paths(src, dst);
  ASSERT_EQ(all.size(), 16u);
  // Links 2..5 of a path: edge->agg, agg->core, core->agg, agg->edge.
  for (int hop = 2; hop <= 5; ++hop) {
    const LinkId l = all[5][static_cast<std::size_t>(hop)];
    FailureSet f(g);
    f.fail_cable(l);
    const auto left = Router(g, RoutingConfig{}, f).paths(src, dst);
    const auto expected = without(all, l);
    EXPECT_EQ(left, expected) << g.link_name(l);
    EXPECT_LT(left.size(), all.size()) << g.link_name(l);
  }
  // A failed aggregation switch of the source pod takes a quarter of the paths.
  FailureSet f(g);
  f.fail_node(g.link_dst(all[0][2]));
  EXPECT_EQ(Router(g, RoutingConfig{}, f).path_count(src, dst), 12u);
}

// Every uplink of ToR 0 (rail 0 of ToR group 0: GPU 0 of servers 0..15) fails. The rail rings
// (dp-ring with tp 8) then lose exactly the two hops that cross that ToR's uplinks:
// gpu120 -> gpu128 (out of the group) and gpu1016 -> gpu0 (into it).
TEST(Failures, AllUplinksOfAToRNameTheGpuPairsThatLostConnectivity) {
  const ClusterGraph g = build_cluster_graph(mini_megascale());
  FailureSet f(g);
  const NodeId tor = g.switch_node(1, 0);
  for (const LinkId l : g.out_links(tor)) {
    if (g.link_kind(l) == LinkKind::kUp) f.fail_cable(l);
  }
  Router r(g, RoutingConfig{}, f);
  TrafficSpec t;
  t.pattern = TrafficPattern::kDpRing;
  t.tp = 8;
  const std::vector<Flow> flows = make_flows(t, g.gpu_count(), 1);
  ASSERT_EQ(flows.size(), 1024u);
  EXPECT_TRUE(r.connected(0, 8));  // same ToR
  EXPECT_FALSE(r.connected(120, 128));
  EXPECT_EQ(r.why_unreachable(120, 128), "tor0 (the ToR of gpu120) has every uplink down");
  EXPECT_EQ(r.why_unreachable(1016, 0), "tor0 (the ToR of gpu0) has every uplink down");
  try {
    require_paths(r, flows);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInfeasible);
    const std::string m = e.what();
    EXPECT_NE(m.find("2 GPU pairs lost connectivity (2 of 1024 flows have no path)"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("tor0 (the ToR of gpu0) has every uplink down: gpu1016->gpu0"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("tor0 (the ToR of gpu120) has every uplink down: gpu120->gpu128"),
              std::string::npos)
        << m;
  }
  const Routes routes = r.route_all(flows);
  EXPECT_EQ(routes.unrouted.size(), 2u);
}

TEST(Failures, FailedNicAndNames) {
  const ClusterGraph g = build_cluster_graph(mini_megascale());
  FailureSet f(g);
  f.fail_node(g.nic_of_gpu(5));
  Router r(g, RoutingConfig{}, f);
  EXPECT_FALSE(r.connected(5, 900));
  EXPECT_FALSE(r.connected(900, 5));
  EXPECT_TRUE(r.connected(5, 6));  // NVLink
  EXPECT_EQ(r.why_unreachable(5, 900), "nic5 (gpu5's NIC) is down");
  std::vector<LinkId> path;
  EXPECT_FALSE(r.route({5, 900, 0}, path));
  EXPECT_TRUE(path.empty());
  EXPECT_EQ(f.failed_nodes(), (std::vector<NodeId>{g.nic_of_gpu(5)}));
}

TEST(Failures, RandomCablesAreSeededAndDistinct) {
  const ClusterGraph g = build_fat_tree(8);
  const auto a = pick_random_cables(g, 20, 3);
  EXPECT_EQ(a, pick_random_cables(g, 20, 3));
  EXPECT_NE(a, pick_random_cables(g, 20, 4));
  EXPECT_EQ(std::set<LinkId>(a.begin(), a.end()).size(), 20u);
  for (const LinkId l : a) {
    EXPECT_TRUE(g.link_kind(l) == LinkKind::kUp || g.link_kind(l) == LinkKind::kDown);
  }
  EXPECT_THROW(pick_random_cables(g, 1000, 1), Error);  // 256 fabric cables
}

// Ideal spraying across pods of the k = 8 fat tree: 1/4 on each edge uplink, 1/16 on each core
// link, the whole flow on the single links at both ends; per hop the shares add up to 1.
TEST(Modes, SprayingSplitsEvenlyOverThePathSet) {
  const ClusterGraph g = build_fat_tree(8);
  RoutingConfig cfg;
  cfg.mode = RoutingMode::kSpray;
  Router r(g, cfg);
  std::vector<LinkShare> shares;
  ASSERT_TRUE(r.route_shares({0, 127, 0}, shares));
  double total = 0;
  std::map<std::string, std::vector<double>> by_class;
  for (const LinkShare& s : shares) {
    total += s.share;
    by_class[link_class_name(g, s.link)].push_back(s.share);
  }
  EXPECT_NEAR(total, 8.0, 1e-12);
  EXPECT_EQ(by_class["tor->agg"], std::vector<double>(4, 0.25));
  EXPECT_EQ(by_class["agg->core"], std::vector<double>(16, 1.0 / 16));
  EXPECT_EQ(by_class["core->agg"], std::vector<double>(16, 1.0 / 16));
  EXPECT_EQ(by_class["agg->tor"], std::vector<double>(4, 0.25));
  std::vector<LinkId> path;
  EXPECT_THROW(r.route({0, 127, 0}, path), std::logic_error);
  const std::vector<Flow> flows{{0, 127, 0}, {0, 1, 0}};
  const Routes routes = r.route_all(flows);
  EXPECT_EQ(routes.shares.size(), routes.links.size());
}

// Least-loaded placement of a pod-to-pod permutation on the k = 4 fat tree: the 4 hosts of pod 0
// send to the 4 hosts of pod 1 over 4 core paths, so a perfect placement puts one flow per link.
TEST(Modes, LeastLoadedPlacementSpreadsAPermutation) {
  const ClusterGraph g = build_fat_tree(4);
  RoutingConfig cfg;
  cfg.mode = RoutingMode::kLeastLoaded;
  Router r(g, cfg);
  const std::vector<Flow> flows{{0, 4, 0}, {1, 5, 0}, {2, 6, 0}, {3, 7, 0}};
  const Routes routes = r.route_all(flows);
  ASSERT_TRUE(routes.unrouted.empty());
  double most = 0;
  for (const double x : r.placed_load()) most = std::max(most, x);
  EXPECT_EQ(most, 1.0);
  r.reset_load();
  for (const double x : r.placed_load()) EXPECT_EQ(x, 0.0);
}

// Path pinning: the next hop is a function of the destination alone, so every flow to one GPU
// from under one ToR takes the same ToR uplink, whatever its QP.
TEST(Modes, PinningFollowsTheDestination) {
  const ClusterGraph g = build_cluster_graph(mini_megascale());
  RoutingConfig cfg;
  cfg.mode = RoutingMode::kPinned;
  Router r(g, cfg);
  std::set<LinkId> uplinks;
  std::vector<LinkId> path;
  for (GpuId s = 0; s < 128; s += 8) {  // rail 0 of ToR group 0: all under tor0
    for (int q = 0; q < 4; ++q) {
      ASSERT_TRUE(r.route({s, 1000, q}, path));
      uplinks.insert(path[2]);
    }
  }
  EXPECT_EQ(uplinks.size(), 1u);
  // Different destinations under one ToR use different uplinks (their slices differ).
  std::set<LinkId> spread;
  for (GpuId d = 896; d < 1024; d += 8) {  // rail 0 of the last group: 16 slices of tor56
    ASSERT_TRUE(r.route({0, d, 0}, path));
    spread.insert(path[2]);
  }
  EXPECT_EQ(spread.size(), 8u);  // 16 slices over 8 uplinks
}

TEST(Modes, NamesRoundTrip) {
  for (RoutingMode m :
       {RoutingMode::kEcmp, RoutingMode::kPinned, RoutingMode::kSpray, RoutingMode::kLeastLoaded}) {
    EXPECT_EQ(routing_mode_from(to_string(m)), m);
  }
  for (SeedScope s : {SeedScope::kGlobal, SeedScope::kPerTier, SeedScope::kPerSwitch}) {
    EXPECT_EQ(seed_scope_from(to_string(s)), s);
  }
  EXPECT_FALSE(routing_mode_from("random").has_value());
}

TEST(Paths, LatencyAlongAPath) {
  ClusterSpec c = mini_megascale();
  c.nic_latency_s = 0.5e-6;
  c.switch_latency_s = 0.6e-6;
  const ClusterGraph g = build_cluster_graph(c);
  Router r(g, RoutingConfig{});
  std::vector<LinkId> path;
  ASSERT_TRUE(r.route({0, 1023, 0}, path));
  ASSERT_EQ(path.size(), 8u);
  // Entered: nic (0.5), tor, agg, core, agg, tor (5 x 0.6), nic (0.5), gpu (0): 4.0 us.
  TimePs total{0};
  for (const LinkId l : path) total += g.link_latency(l);
  EXPECT_EQ(total.ps, 4'000'000);
  ASSERT_TRUE(r.route({0, 1, 0}, path));
  EXPECT_EQ(path.size(), 2u);  // gpu->nvs->gpu
  EXPECT_EQ(g.link_kind(path[0]), LinkKind::kNvlink);
  ASSERT_TRUE(r.route({3, 3, 0}, path));
  EXPECT_TRUE(path.empty());
}

}  // namespace
}  // namespace trainsim::topo

namespace trainsim::topo {
namespace {

// dp-ring in both rank orders, TP 2 · PP 2 · DP 2 on 8 GPUs. Megatron's (TP, DP, PP): the DP
// group of stage p, TP rank r is {4p + 2d + r}; with PP before DP (parallel.order tp-cp-pp-dp,
// Llama 3's) it is {4d + 2p + r}.
TEST(Traffic, DpRingFollowsTheRankOrder) {
  TrafficSpec t;
  t.pattern = TrafficPattern::kDpRing;
  t.tp = 2;
  t.pp = 2;
  std::vector<std::pair<GpuId, GpuId>> got;
  const auto collect = [&](GpuId a, GpuId b) { got.emplace_back(a, b); };
  for_each_connection(t, 8, collect);
  EXPECT_EQ(got, (std::vector<std::pair<GpuId, GpuId>>{
                     {0, 2}, {2, 0}, {1, 3}, {3, 1}, {4, 6}, {6, 4}, {5, 7}, {7, 5}}));
  got.clear();
  t.pp_before_dp = true;
  for_each_connection(t, 8, collect);
  EXPECT_EQ(got, (std::vector<std::pair<GpuId, GpuId>>{
                     {0, 4}, {4, 0}, {1, 5}, {5, 1}, {2, 6}, {6, 2}, {3, 7}, {7, 3}}));
  // With CP 2 (TP 2 · CP 2 · PP 2 · DP 2, 16 GPUs) the gradient group is DP·CP: stage 0's TP
  // rank 0 holds ranks {0, 2} of replica 0 and {8, 10} of replica 1, as `run` groups them.
  got.clear();
  t.cp = 2;
  for_each_connection(t, 16, collect);
  ASSERT_EQ(got.size(), 16u);
  const std::vector<std::pair<GpuId, GpuId>> first_ring(got.begin(), got.begin() + 4);
  EXPECT_EQ(first_ring, (std::vector<std::pair<GpuId, GpuId>>{{0, 2}, {2, 8}, {8, 10}, {10, 0}}));
}

}  // namespace
}  // namespace trainsim::topo
