#include "topology/stats.h"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

namespace trainsim::topo {
namespace {

// Report order of a link: GPU side first, then up the tiers, each up class before its down class.
std::tuple<int, int, int> class_key(const ClusterGraph& g, LinkId l) {
  const NodeInfo& a = g.node(g.link_src(l));
  const NodeInfo& b = g.node(g.link_dst(l));
  switch (g.link_kind(l)) {
    case LinkKind::kNvlink:
      return {0, a.kind == NodeKind::kGpu ? 0 : 1, 0};
    case LinkKind::kPcie:
      return {1, a.kind == NodeKind::kGpu ? 0 : 1, 0};
    case LinkKind::kNicUp:
      return {2, 0, b.tier * 2};
    case LinkKind::kNicDown:
      return {2, 0, a.tier * 2 + 1};
    case LinkKind::kUp:
      return {3, a.tier, b.tier * 2};
    case LinkKind::kDown:
      return {3, b.tier, a.tier * 2 + 1};
  }
  return {4, 0, 0};
}

std::string endpoint_name(const ClusterGraph& g, NodeId n) {
  switch (g.node(n).kind) {
    case NodeKind::kGpu:
      return "gpu";
    case NodeKind::kNvSwitch:
      return "nvs";
    case NodeKind::kNic:
      return "nic";
    case NodeKind::kSwitch:
      break;
  }
  return g.tier_name(g.node(n).tier);
}

}  // namespace

std::vector<LinkClassLoad> link_class_loads(const ClusterGraph& g,
                                            const std::vector<double>& per_link) {
  std::map<std::tuple<int, int, int>, std::size_t> index;
  for (LinkId l = 0; l < g.link_count(); ++l) index.emplace(class_key(g, l), 0);
  std::size_t i = 0;
  for (auto& [key, at] : index) at = i++;
  std::vector<LinkClassLoad> classes(index.size());
  for (LinkId l = 0; l < g.link_count(); ++l) {
    LinkClassLoad& c = classes[index.at(class_key(g, l))];
    if (c.name.empty()) c.name = link_class_name(g, l);
    const double x = per_link[static_cast<std::size_t>(l)];
    ++c.links;
    if (x > 0) ++c.used;
    c.max = std::max(c.max, x);
    c.mean += x;
  }
  for (LinkClassLoad& c : classes) {
    // Summing equal loads can round the mean a last bit above them; a mean is never above the max.
    c.mean = std::min(c.mean / c.links, c.max);
    c.max_over_mean = c.mean > 0 ? c.max / c.mean : 0;
  }
  return classes;
}

std::string link_class_name(const ClusterGraph& g, LinkId l) {
  return endpoint_name(g, g.link_src(l)) + "->" + endpoint_name(g, g.link_dst(l));
}

FabricSummary summarize_fabric(const ClusterGraph& g, const FailureSet* failures) {
  FabricSummary s;
  s.description = g.description();
  s.gpus = g.gpu_count();
  s.servers = g.server_count();
  s.nics = g.nic_count();
  s.nodes = g.node_count();
  s.links = g.link_count();
  for (int t = 1; t <= g.tiers(); ++t) {
    TierSummary tier;
    tier.tier = t;
    tier.name = g.tier_name(t);
    tier.switches = g.switches_per_tier()[static_cast<std::size_t>(t - 1)];
    s.tiers.push_back(tier);
  }
  std::map<std::tuple<int, int, int>, std::size_t> cable_index;
  // Per NIC: what its GPUs can hand it (PCIe cables) and what it can send into the fabric (its
  // live switch cables). A NIC injects the lesser: a dual-homed NIC of 2 x 200 G behind a 200 G
  // GPU cable injects 200 G, not 400 G.
  std::map<NodeId, std::pair<double, double>> nic_in_out;
  for (LinkId l = 0; l < g.link_count(); l += 2) {
    // Cables are named from their lower end: "nic-tor", "tor-agg".
    const LinkKind k = g.link_kind(l);
    const bool downward =
        k == LinkKind::kNicDown || k == LinkKind::kDown ||
        (k == LinkKind::kNvlink && g.node(g.link_src(l)).kind != NodeKind::kGpu) ||
        (k == LinkKind::kPcie && g.node(g.link_src(l)).kind != NodeKind::kGpu);
    const LinkId up = downward ? ClusterGraph::reverse(l) : l;
    const auto key = class_key(g, up);
    auto it = cable_index.find(key);
    if (it == cable_index.end()) {
      it = cable_index.emplace(key, s.cables.size()).first;
      s.cables.push_back(
          {endpoint_name(g, g.link_src(up)) + "-" + endpoint_name(g, g.link_dst(up)), 0, 0});
    }
    CableSummary& c = s.cables[it->second];
    ++c.cables;
    c.Bps = std::max(c.Bps, g.link_capacity_Bps(up));
    const bool down = failures != nullptr && failures->link_down(up);
    if (down && (k == LinkKind::kUp || k == LinkKind::kDown || k == LinkKind::kNicUp ||
                 k == LinkKind::kNicDown)) {
      ++s.failed_cables;
    }
    const double Bps = down ? 0.0 : g.link_capacity_Bps(up);
    if (k == LinkKind::kPcie) {
      // `up` runs GPU -> NIC.
      nic_in_out[g.link_dst(up)].first += failures != nullptr && failures->link_down(up)
                                              ? 0.0
                                              : g.link_capacity_Bps(up);
    } else if (k == LinkKind::kNicUp || k == LinkKind::kNicDown) {
      TierSummary& tor = s.tiers[static_cast<std::size_t>(g.node(g.link_dst(up)).tier - 1)];
      ++tor.down_cables;
      tor.down_Bps += Bps;
      nic_in_out[g.link_src(up)].second += Bps;
    } else if (k == LinkKind::kUp || k == LinkKind::kDown) {
      TierSummary& lower = s.tiers[static_cast<std::size_t>(g.node(g.link_src(up)).tier - 1)];
      TierSummary& upper = s.tiers[static_cast<std::size_t>(g.node(g.link_dst(up)).tier - 1)];
      ++lower.up_cables;
      lower.up_Bps += Bps;
      ++upper.down_cables;
      upper.down_Bps += Bps;
    }
  }
  // Order cables like the load classes (GPU side, then up the tiers).
  std::vector<std::pair<std::tuple<int, int, int>, CableSummary>> ordered;
  for (const auto& [key, i] : cable_index) ordered.emplace_back(key, s.cables[i]);
  s.cables.clear();
  for (auto& [key, c] : ordered) s.cables.push_back(std::move(c));

  for (const auto& [nic, in_out] : nic_in_out) {
    // A NIC with no GPU cable (a fabric file may have one) injects nothing.
    s.injection_Bps += std::min(in_out.first, in_out.second);
  }
  double narrowest = s.injection_Bps;
  for (TierSummary& t : s.tiers) {
    // A tier with uplinks bounds the bisection by what they carry, 0 when every one has failed
    // (the fabric is then cut in two; its oversubscription is unbounded). The top tier has none.
    if (t.up_cables > 0) {
      t.oversubscription = t.up_Bps > 0 ? t.down_Bps / t.up_Bps
                                        : std::numeric_limits<double>::infinity();
      narrowest = std::min(narrowest, t.up_Bps);
    }
  }
  s.bisection_Bps = narrowest / 2;
  return s;
}

LoadSummary measure_load(Router& router, const TrafficSpec& traffic, int qps, int top) {
  const ClusterGraph& g = router.graph();
  LoadSummary out;
  out.link_flows.assign(static_cast<std::size_t>(g.link_count()), 0.0);
  std::vector<LinkShare> shares;
  std::vector<LinkId> path;
  const bool spray = router.config().mode == RoutingMode::kSpray;
  for_each_connection(traffic, g.gpu_count(), [&](GpuId s, GpuId d) {
    ++out.connections;
    for (int q = 0; q < qps; ++q) {
      const Flow f{s, d, q};
      ++out.flows;
      bool ok = false;
      if (spray) {
        ok = router.route_shares(f, shares);
        if (ok) {
          for (const LinkShare& x : shares)
            out.link_flows[static_cast<std::size_t>(x.link)] += x.share;
        }
      } else {
        ok = router.route(f, path);
        if (ok) {
          for (const LinkId l : path) out.link_flows[static_cast<std::size_t>(l)] += 1.0;
        }
      }
      if (!ok) out.unrouted.push_back(f);
    }
  });

  out.classes = link_class_loads(g, out.link_flows);

  std::vector<LinkId> order;
  for (LinkId l = 0; l < g.link_count(); ++l) {
    if (out.link_flows[static_cast<std::size_t>(l)] > 0) order.push_back(l);
  }
  const auto keep = std::min<std::size_t>(static_cast<std::size_t>(std::max(top, 0)), order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                    [&](LinkId a, LinkId b) {
                      const double x = out.link_flows[static_cast<std::size_t>(a)];
                      const double y = out.link_flows[static_cast<std::size_t>(b)];
                      return x != y ? x > y : a < b;
                    });
  for (std::size_t k = 0; k < keep; ++k) {
    out.busiest.emplace_back(order[k], out.link_flows[static_cast<std::size_t>(order[k])]);
  }
  return out;
}

}  // namespace trainsim::topo
