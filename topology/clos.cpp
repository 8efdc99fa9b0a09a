#include "topology/clos.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "sim/core/error.h"

namespace trainsim::topo {
namespace {

constexpr double kEps = 1e-9;

// Down:up ratio of the switches of a tier (1 = ToR). The pod tier takes the ratio above the pods.
double ratio_at(const FabricSpec& f, int tier) {
  if (f.pod_gpus > 0 && tier == 2) return std::max(1.0, f.above_pod_oversubscription);
  const auto i = static_cast<std::size_t>(tier - 1);
  if (i < f.oversubscription.size() && f.oversubscription[i] > 0) return f.oversubscription[i];
  return 1.0;
}

int radix_at(const FabricSpec& f, int tier) {
  return tier == 1 || f.spine_radix <= 0 ? f.switch_radix : f.spine_radix;
}

int down_ports_max(int radix, double ratio) {
  return static_cast<int>(std::floor(radix * ratio / (1.0 + ratio) + kEps));
}

// Uplinks provisioned for `down_Gbps` of down bandwidth at ratio `ratio`.
int uplinks_for(double down_Gbps, double ratio, double port_Gbps) {
  return std::max(1, static_cast<int>(std::lround(down_Gbps / (ratio * port_Gbps))));
}

// Largest block a non-top tier holds with one link to each child's switch: n down links plus the
// uplinks they need must fit the radix.
int max_children(int radix, double ratio) {
  int n = down_ports_max(radix, ratio);
  while (n > 0 && n + uplinks_for(n, ratio, 1.0) > radix) --n;
  return n;
}

// Smallest divisor c of `uplinks` such that a switch with `children` children, each sending it
// uplinks/c links, fits `radix` ports (with the uplinks of its own at `ratio`; ratio 0 = top tier,
// no uplinks). 0 when none fits.
int fewest_per_plane(int uplinks, int children, int radix, double ratio) {
  for (int c = 1; c <= uplinks; ++c) {
    if (uplinks % c != 0) continue;
    const std::int64_t down = static_cast<std::int64_t>(children) * (uplinks / c);
    const std::int64_t up = ratio > 0 ? uplinks_for(static_cast<double>(down), ratio, 1.0) : 0;
    if (down + up <= radix) return c;
  }
  return 0;
}

std::string ratio_text(double r) { return fmt::format("{}:1", r); }

// The ToR tier's shape, shared by the planner and the capacity rule.
struct TorShape {
  int servers_per_block = 0;  // servers under one ToR (one ToR group when rail-optimized)
  int nic_ports = 0;          // NIC ports used per ToR in a full block
  int down_ports = 0;         // native ports those use
  int up_ports = 0;
};

TorShape tor_shape(const ClusterSpec& c, bool rail) {
  const FabricSpec& f = c.fabric;
  const double ratio = ratio_at(f, 1);
  TorShape s;
  const int nic_ports_max = down_ports_max(f.switch_radix, ratio) * f.port_split;
  if (rail) {
    s.servers_per_block = f.servers_per_tor > 0 ? f.servers_per_tor : nic_ports_max;
    s.nic_ports = s.servers_per_block;
  } else {
    s.servers_per_block =
        f.servers_per_tor > 0 ? f.servers_per_tor : nic_ports_max / c.nics_per_node;
    s.nic_ports = s.servers_per_block * c.nics_per_node;
  }
  s.down_ports = (s.nic_ports + f.port_split - 1) / f.port_split;
  s.up_ports = uplinks_for(s.nic_ports * c.nic_Gbps, ratio, f.switch_port_Gbps);
  return s;
}

bool is_rail(const ClusterSpec& c) { return c.fabric.rail_optimized && c.nics_per_node > 1; }

// Servers a single ToR holds when it is the whole fabric (every port down).
int single_tor_servers(const ClusterSpec& c) {
  const FabricSpec& f = c.fabric;
  if (f.servers_per_tor > 0) return f.servers_per_tor;
  return f.switch_radix * f.port_split / c.nics_per_node;
}

// Throws for a spec no fabric can have. `links_too`: also the checks on link speeds (the
// capacity rule, which only counts ports, skips them so that the builder can name the problem).
void check_spec(const ClusterSpec& c, bool links_too) {
  const FabricSpec& f = c.fabric;
  const auto bad = [](const std::string& what, const char* field, const std::string& hint = {}) {
    throw_input(what, {"", 0, field}, hint);
  };
  if (c.gpus <= 0) bad(fmt::format("needs at least one GPU, got {}", c.gpus), "cluster.gpus");
  if (c.gpus_per_node <= 0) bad("must be positive", "cluster.gpus_per_node");
  if (c.nics_per_node <= 0) bad("must be positive", "cluster.nics_per_node");
  if (!(c.nic_Gbps > 0)) bad("must be positive", "cluster.nic_gbps");
  if (f.tiers < 1 || f.tiers > 5) {
    bad(fmt::format("must be 1 to 5, got {}", f.tiers), "cluster.fabric.tiers");
  }
  if (f.switch_radix < 2) {
    bad(fmt::format("must be at least 2, got {}", f.switch_radix), "cluster.fabric.switch_radix");
  }
  if (f.port_split < 1) bad("must be at least 1", "cluster.fabric.port_split");
  if (!(f.switch_port_Gbps > 0)) bad("must be positive", "cluster.fabric.switch_port_gbps");
  if (links_too && c.nic_Gbps > f.switch_port_Gbps / f.port_split + kEps) {
    bad(fmt::format("a {} Gb/s NIC does not fit a {} Gb/s ToR port split {} ways", c.nic_Gbps,
                    f.switch_port_Gbps, f.port_split),
        "cluster.nic_gbps", "lower cluster.fabric.port_split or the NIC speed");
  }
  if (links_too && c.gpus_per_node > 1 && !(c.gpu.nvlink_Bps > 0)) {
    bad(fmt::format("GPU `{}` has no NVLink bandwidth to join the {} GPUs of a server", c.gpu.name,
                    c.gpus_per_node),
        "cluster.gpu");
  }
  if (f.tiers == 1 && is_rail(c)) {
    bad("a rail-optimized fabric needs a tier above its ToRs to join the rails",
        "cluster.fabric.tiers", "set cluster.fabric.tiers to 2 or more");
  }
  const TorShape tor = tor_shape(c, is_rail(c));
  if (tor.servers_per_block < 1) {
    throw_infeasible(fmt::format("a radix-{} ToR at {} cannot hold the {} NICs of one server",
                                 f.switch_radix, ratio_text(ratio_at(f, 1)), c.nics_per_node),
                     {"", 0, "cluster.fabric.switch_radix"});
  }
  if (f.servers_per_tor > 0 && f.tiers > 1 && tor.down_ports + tor.up_ports > f.switch_radix) {
    throw_infeasible(fmt::format("{} servers per ToR need {} down and {} up ports, more than "
                                 "the radix {}",
                                 f.servers_per_tor, tor.down_ports, tor.up_ports, f.switch_radix),
                     {"", 0, "cluster.fabric.servers_per_tor"});
  }
}

// GPUs under one ToR block's worth of servers, for pod sizing.
int gpus_per_tor_block(const ClusterSpec& c, const TorShape& tor) {
  return tor.servers_per_block * c.gpus_per_node;
}

// ToRs per pod when pod_gpus is given (throws when the pod is not a whole number of ToR blocks).
int tors_per_pod(const ClusterSpec& c, const TorShape& tor, int rails) {
  const int per_block = gpus_per_tor_block(c, tor);
  if (c.fabric.pod_gpus % per_block != 0) {
    throw_input(fmt::format("{} GPUs is not a whole number of ToR {} ({} GPUs each)",
                            c.fabric.pod_gpus, rails > 1 ? "groups" : "switches", per_block),
                {"", 0, "cluster.fabric.pod_gpus"});
  }
  return c.fabric.pod_gpus / per_block * rails;
}

}  // namespace

std::int64_t fabric_capacity_gpus(const ClusterSpec& spec) {
  ClusterSpec c = spec;
  c.gpus = 1;
  try {
    check_spec(c, false);
  } catch (const Error&) {
    return 0;
  }
  const FabricSpec& f = c.fabric;
  if (f.pod_gpus > 0 && f.pods > 0) return static_cast<std::int64_t>(f.pod_gpus) * f.pods;
  const bool rail = is_rail(c);
  const int rails = rail ? c.nics_per_node : 1;
  if (f.tiers == 1) return static_cast<std::int64_t>(single_tor_servers(c)) * c.gpus_per_node;

  const TorShape tor = tor_shape(c, rail);
  double tors = 1;
  int uplinks = tor.up_ports;
  for (int t = 2; t < f.tiers; ++t) {
    const double ratio = ratio_at(f, t);
    int children = max_children(radix_at(f, t), ratio);
    int per_plane = uplinks;
    if (t == 2 && f.pod_gpus > 0) {
      try {
        children = tors_per_pod(c, tor, rails);
      } catch (const Error&) {
        return 0;
      }
      per_plane = fewest_per_plane(uplinks, children, radix_at(f, t), ratio);
      if (per_plane == 0) return 0;
    }
    if (children < 1) return 0;
    tors *= children;
    uplinks = uplinks_for(static_cast<double>(children) * (uplinks / per_plane), ratio, 1.0);
  }
  tors *= radix_at(f, f.tiers);  // the top holds one child per port
  if (f.pod_gpus > 0 && f.tiers == 2) {
    tors = std::min(tors, static_cast<double>(f.pod_gpus / gpus_per_tor_block(c, tor) * rails));
  }
  const double servers = std::floor(tors / rails) * tor.servers_per_block;
  return static_cast<std::int64_t>(servers) * c.gpus_per_node;
}

FabricPlan plan_fabric(const ClusterSpec& c) {
  check_spec(c, true);
  const FabricSpec& f = c.fabric;
  FabricPlan plan;
  plan.gpus = c.gpus;
  plan.servers = (c.gpus + c.gpus_per_node - 1) / c.gpus_per_node;
  const bool rail = is_rail(c);
  plan.rails = rail ? c.nics_per_node : 1;

  const auto too_small = [&](const std::string& why) {
    const std::int64_t cap = fabric_capacity_gpus(c);
    throw_infeasible(fmt::format("{}: a {}-tier Clos of radix-{} switches holds at most {} GPUs, "
                                 "not {}",
                                 why, f.tiers, f.switch_radix, cap, c.gpus),
                     {"", 0, "cluster.fabric.switch_radix"},
                     "add a tier (cluster.fabric.tiers), use a larger radix, or use fewer GPUs");
  };

  // Tier 1. One ToR that holds every server is the whole fabric.
  TierPlan tor;
  tor.tier = 1;
  tor.radix = f.switch_radix;
  tor.down_Gbps = c.nic_Gbps;
  tor.up_Gbps = f.switch_port_Gbps;
  tor.switches_per_block = 1;
  if (!rail && plan.servers <= single_tor_servers(c)) {
    tor.top = true;
    tor.children_per_block = single_tor_servers(c);
    tor.down_ports = plan.servers * c.nics_per_node;
    tor.blocks = tor.switches = 1;
    plan.tiers.push_back(tor);
    return plan;
  }
  if (f.tiers == 1) too_small("the servers need more than one switch");
  const TorShape shape = tor_shape(c, rail);
  tor.children_per_block = shape.servers_per_block;
  tor.down_ports = shape.nic_ports;
  tor.up_ports = shape.up_ports;
  const int groups = (plan.servers + shape.servers_per_block - 1) / shape.servers_per_block;
  tor.switches = tor.blocks = groups * plan.rails;
  plan.tiers.push_back(tor);

  for (int t = 2;; ++t) {
    const TierPlan& below = plan.tiers.back();
    const int children = below.blocks;
    const int radix = radix_at(f, t);
    const double ratio = ratio_at(f, t);
    TierPlan tp;
    tp.tier = t;
    tp.radix = radix;
    tp.down_Gbps = tp.up_Gbps = f.switch_port_Gbps;

    const bool pod_tier = t == 2 && f.pod_gpus > 0;
    const int pod_tors = pod_tier ? tors_per_pod(c, shape, plan.rails) : 0;
    const int top_plane = fewest_per_plane(below.up_ports, children, radix, 0.0);
    const bool fits_one_block = pod_tier ? children <= pod_tors : true;
    if (top_plane > 0 && fits_one_block) {
      tp.top = true;
      tp.children_per_block = children;
      tp.switches_per_plane = top_plane;
      tp.links_per_pair = below.up_ports / top_plane;
      tp.down_ports = children * tp.links_per_pair;
      tp.switches_per_block = below.switches_per_block * top_plane;
      tp.blocks = 1;
      tp.switches = tp.switches_per_block;
      plan.tiers.push_back(tp);
      return plan;
    }
    if (t >= f.tiers) {
      too_small(
          pod_tier && children <= pod_tors
              ? fmt::format("a pod of {} ToRs does not fit radix-{} switches", children, radix)
              : fmt::format("{} tier-{} blocks do not fit under one tier-{} block", children, t - 1,
                            t));
    }
    if (pod_tier) {
      tp.children_per_block = pod_tors;
      tp.switches_per_plane = fewest_per_plane(below.up_ports, pod_tors, radix, ratio);
      if (tp.switches_per_plane == 0) {
        throw_infeasible(
            fmt::format("a pod of {} GPUs ({} ToRs with {} uplinks each) does not "
                        "fit radix-{} switches at {}",
                        f.pod_gpus, pod_tors, below.up_ports, radix, ratio_text(ratio)),
            {"", 0, "cluster.fabric.pod_gpus"},
            "use smaller pods or a larger cluster.fabric.spine_radix");
      }
    } else {
      tp.children_per_block = max_children(radix, ratio);
      tp.switches_per_plane = below.up_ports;
      if (tp.children_per_block < 2) too_small(fmt::format("tier {} cannot join two blocks", t));
    }
    tp.links_per_pair = below.up_ports / tp.switches_per_plane;
    tp.down_ports = tp.children_per_block * tp.links_per_pair;
    tp.up_ports = uplinks_for(tp.down_ports, ratio, 1.0);
    tp.switches_per_block = below.switches_per_block * tp.switches_per_plane;
    tp.blocks = (children + tp.children_per_block - 1) / tp.children_per_block;
    tp.switches = tp.blocks * tp.switches_per_block;
    plan.tiers.push_back(tp);
  }
}

ClusterGraph build_cluster_graph(const ClusterSpec& c) {
  const FabricPlan plan = plan_fabric(c);
  const int g = c.gpus_per_node;
  const int n = c.nics_per_node;
  GraphBuilder b(c.nic_latency_s, c.switch_latency_s);

  // GPUs first, so that GpuId and NodeId coincide; then NVSwitch domains, NICs, switches.
  std::vector<NodeId> gpus(static_cast<std::size_t>(c.gpus));
  for (int i = 0; i < c.gpus; ++i) gpus[static_cast<std::size_t>(i)] = b.add_gpu(i / g);
  std::vector<NodeId> nvswitch;
  if (g > 1) {
    for (int s = 0; s < plan.servers; ++s) nvswitch.push_back(b.add_nvswitch(s));
  }
  std::vector<NodeId> nics;
  for (int s = 0; s < plan.servers; ++s) {
    for (int i = 0; i < n; ++i) nics.push_back(b.add_nic(s));
  }
  std::vector<std::vector<NodeId>> switches;
  for (const TierPlan& tp : plan.tiers) {
    std::vector<NodeId> tier_nodes;
    for (int i = 0; i < tp.switches; ++i) tier_nodes.push_back(b.add_switch(tp.tier));
    switches.push_back(std::move(tier_nodes));
  }

  const double nic_Bps = c.nic_Bps();
  for (int i = 0; i < c.gpus; ++i) {
    const int server = i / g;
    const int local = i % g;
    if (g > 1)
      b.add_cable(gpus[static_cast<std::size_t>(i)], nvswitch[static_cast<std::size_t>(server)],
                  c.gpu.nvlink_Bps);
    // GPUDirect RDMA crosses the server's PCIe switch; the NIC's line rate is the narrower of
    // the two in every preset (200 G NIC on PCIe 4 x16, 400 G on PCIe 5 x16).
    const int nic = server * n + local * n / g;
    b.add_cable(gpus[static_cast<std::size_t>(i)], nics[static_cast<std::size_t>(nic)], nic_Bps);
  }

  const TierPlan& tor = plan.tiers.front();
  for (int s = 0; s < plan.servers; ++s) {
    for (int i = 0; i < n; ++i) {
      const int t = plan.rails > 1 ? (s / tor.children_per_block) * plan.rails + i
                                   : s / tor.children_per_block;
      b.add_cable(nics[static_cast<std::size_t>(s * n + i)],
                  switches[0][static_cast<std::size_t>(t)], nic_Bps);
    }
  }

  // Tier t: the j-th switch of a tier-(t-1) block connects to plane j of its tier-t block.
  const double port_Bps = c.fabric.switch_port_Gbps * 1e9 / 8.0;
  for (std::size_t t = 1; t < plan.tiers.size(); ++t) {
    const TierPlan& below = plan.tiers[t - 1];
    const TierPlan& tp = plan.tiers[t];
    for (int x = 0; x < below.switches; ++x) {
      const int child_block = x / below.switches_per_block;
      const int plane = x % below.switches_per_block;
      const int block = child_block / tp.children_per_block;
      for (int i = 0; i < tp.switches_per_plane; ++i) {
        const int up = block * tp.switches_per_block + plane * tp.switches_per_plane + i;
        for (int m = 0; m < tp.links_per_pair; ++m) {
          b.add_cable(switches[t - 1][static_cast<std::size_t>(x)],
                      switches[t][static_cast<std::size_t>(up)], port_Bps);
        }
      }
    }
  }

  std::string description =
      fmt::format("{}-tier {}Clos", plan.tiers.size(), plan.rails > 1 ? "rail-optimized " : "");
  std::vector<std::string> ratios;
  for (const TierPlan& tp : plan.tiers) {
    if (!tp.top) ratios.push_back(ratio_text(ratio_at(c.fabric, tp.tier)));
  }
  if (!ratios.empty()) description += fmt::format(" ({})", fmt::join(ratios, ", "));
  if (c.fabric.port_split > 1) {
    description += fmt::format(", ToR ports split {} ways", c.fabric.port_split);
  }
  return b.finish(c, description);
}

ClusterGraph build_fat_tree(int k, double link_Gbps) {
  // k = 2 would be 2 hosts under one switch of 2 ports: no three tiers to build (the tree's
  // 2 edge, 2 aggregation and 1 core switches join 2 hosts that one switch joins).
  if (k < 4 || k % 2 != 0) {
    throw_input(fmt::format("a k-ary fat tree needs an even k of at least 4, got {}", k),
                {"", 0, "k"}, "use k = 4, 6, 8, ...");
  }
  ClusterSpec c;
  c.name = fmt::format("fat-tree-k{}", k);
  c.gpu.name = "host";
  c.gpus = k * k * k / 4;
  c.gpus_per_node = 1;
  c.nics_per_node = 1;
  c.nic_Gbps = link_Gbps;
  c.fabric.tiers = 3;
  c.fabric.switch_radix = k;
  c.fabric.switch_port_Gbps = link_Gbps;
  c.fabric.port_split = 1;
  c.fabric.rail_optimized = false;
  return build_cluster_graph(c);
}

std::vector<std::string> oversubscription_notes(const ClusterSpec& spec) {
  std::vector<std::string> out;
  const FabricPlan plan = plan_fabric(spec);
  for (const TierPlan& t : plan.tiers) {
    if (t.top || t.up_ports <= 0) continue;
    const double asked = ratio_at(spec.fabric, t.tier);
    const double down_Gbps = t.tier == 1 ? spec.nic_Gbps : t.down_Gbps;
    const double built = t.down_ports * down_Gbps / (t.up_ports * t.up_Gbps);
    if (std::abs(built / asked - 1) <= 0.02) continue;
    const bool pod = t.tier == 2 && spec.fabric.pod_gpus > 0;
    out.push_back(fmt::format(
        "cluster.fabric.{} = {}: tier-{} switches are built at {:.2f}:1, {} down link{} of {} "
        "Gb/s over {} uplink{} of {} Gb/s (uplinks are whole cables, at least one per switch)",
        pod ? "above_pod_oversubscription" : "oversubscription", asked, t.tier, built,
        t.down_ports, t.down_ports == 1 ? "" : "s", down_Gbps, t.up_ports,
        t.up_ports == 1 ? "" : "s", t.up_Gbps));
  }
  return out;
}

}  // namespace trainsim::topo
