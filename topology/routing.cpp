#include "topology/routing.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <stdexcept>
#include <utility>

#include "sim/core/error.h"
#include "sim/core/rng.h"

namespace trainsim::topo {
namespace {

constexpr std::uint8_t kUnreachable = 255;
// A NIC with more uplinks than this is not a NIC of any fabric we model (dual-plane NICs have 2).
constexpr int kMaxNicUplinks = 16;

}  // namespace

const char* to_string(RoutingMode mode) {
  switch (mode) {
    case RoutingMode::kEcmp:
      return "ecmp";
    case RoutingMode::kPinned:
      return "pinned";
    case RoutingMode::kSpray:
      return "spray";
    case RoutingMode::kLeastLoaded:
      return "least-loaded";
  }
  return "?";
}

const char* to_string(SeedScope scope) {
  switch (scope) {
    case SeedScope::kGlobal:
      return "global";
    case SeedScope::kPerTier:
      return "per-tier";
    case SeedScope::kPerSwitch:
      return "per-switch";
  }
  return "?";
}

std::optional<RoutingMode> routing_mode_from(std::string_view name) {
  for (RoutingMode m :
       {RoutingMode::kEcmp, RoutingMode::kPinned, RoutingMode::kSpray, RoutingMode::kLeastLoaded}) {
    if (name == to_string(m)) return m;
  }
  return std::nullopt;
}

std::optional<SeedScope> seed_scope_from(std::string_view name) {
  for (SeedScope s : {SeedScope::kGlobal, SeedScope::kPerTier, SeedScope::kPerSwitch}) {
    if (name == to_string(s)) return s;
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Failures

FailureSet::FailureSet(const ClusterGraph& graph)
    : graph_(&graph),
      link_down_(static_cast<std::size_t>(graph.link_count()), 0),
      node_down_(static_cast<std::size_t>(graph.node_count()), 0) {}

void FailureSet::fail_cable(LinkId link) {
  const LinkId first = link & ~1;
  if (link_down_[static_cast<std::size_t>(first)]) return;
  link_down_[static_cast<std::size_t>(first)] = 1;
  link_down_[static_cast<std::size_t>(first) + 1] = 1;
  cables_.push_back(first);
}

void FailureSet::fail_node(NodeId node) {
  if (node_down_[static_cast<std::size_t>(node)]) return;
  node_down_[static_cast<std::size_t>(node)] = 1;
  nodes_.push_back(node);
  for (const LinkId l : graph_->out_links(node)) {
    link_down_[static_cast<std::size_t>(l)] = 1;
    link_down_[static_cast<std::size_t>(ClusterGraph::reverse(l))] = 1;
  }
}

std::vector<LinkId> pick_random_cables(const ClusterGraph& graph, int count, std::uint64_t seed) {
  std::vector<LinkId> fabric;
  for (LinkId l = 0; l < graph.link_count(); l += 2) {
    if (graph.link_kind(l) == LinkKind::kUp || graph.link_kind(l) == LinkKind::kDown) {
      fabric.push_back(l);
    }
  }
  if (count < 0 || static_cast<std::size_t>(count) > fabric.size()) {
    throw_input(fmt::format("cannot fail {} links: the fabric has {} switch-to-switch cables",
                            count, fabric.size()),
                {"", 0, "fail-links"});
  }
  // A partial Fisher-Yates shuffle on the "fail-links" stream of the seed.
  Rng rng(derive_stream_seed(seed, "fail-links"));
  for (std::size_t i = 0; i < static_cast<std::size_t>(count); ++i) {
    const auto j = i + static_cast<std::size_t>(rng.uniform_below(fabric.size() - i));
    std::swap(fabric[i], fabric[j]);
  }
  fabric.resize(static_cast<std::size_t>(count));
  return fabric;
}

void apply_fabric_failures(const ClusterGraph& graph, const FabricSpec& fabric,
                           FailureSet& failures) {
  if (fabric.failed_cables > 0) {
    int cables = 0;
    for (LinkId l = 0; l < graph.link_count(); l += 2) {
      if (graph.link_kind(l) == LinkKind::kUp || graph.link_kind(l) == LinkKind::kDown) ++cables;
    }
    if (fabric.failed_cables > cables) {
      throw_input(fmt::format("cannot fail {} cables: this fabric has {} switch-to-switch cables",
                              fabric.failed_cables, cables),
                  {"", 0, "cluster.fabric.failed_cables"});
    }
    for (const LinkId l : pick_random_cables(graph, fabric.failed_cables, fabric.failure_seed)) {
      failures.fail_cable(l);
    }
  }
  if (fabric.failed_switches.empty()) return;
  std::map<std::string, NodeId, std::less<>> by_name;
  for (NodeId n = 0; n < graph.node_count(); ++n) {
    if (graph.node(n).kind == NodeKind::kSwitch) by_name.emplace(graph.node_name(n), n);
  }
  for (const std::string& name : fabric.failed_switches) {
    const auto it = by_name.find(name);
    if (it == by_name.end()) {
      std::string hint = "name switches as `trainsim topo SCENARIO --export json` lists them";
      if (!by_name.empty()) {
        hint += fmt::format(" (here {} … {})", by_name.begin()->first, by_name.rbegin()->first);
      }
      throw_input(fmt::format("no switch named `{}` in this fabric", name),
                  {"", 0, "cluster.fabric.failed_switches"}, hint);
    }
    failures.fail_node(it->second);
  }
}

// ---------------------------------------------------------------------------------------------
// Routing tables

// Destinations are grouped into classes: the NICs attached (by live links) to the same set of
// switches share one class. For every class and switch the tables hold the up/down distance to
// the class's switches and the list of next-hop links on shortest paths.
struct Router::Tables {
  int switches = 0;
  std::vector<std::int32_t> sw_of_node;  // node -> switch number, -1 for other nodes
  std::vector<NodeId> sw_node;           // switch number -> node
  std::vector<std::uint8_t> link_up;     // per link
  std::vector<std::int32_t> nic_class;   // per NIC number; -1 = no live attachment
  // Per NIC number: its port index on its (first) ToR plus the ToR's number times the most ports
  // any ToR has: the destination key of path pinning.
  std::vector<std::uint32_t> nic_pin_key;
  std::vector<std::vector<std::int32_t>> class_switches;
  std::vector<std::uint8_t> dist;  // [class * switches + sw]
  std::vector<std::int32_t> hop;   // [class * switches + sw]: offset into pool, -1 = none
  std::vector<LinkId> pool;        // segments: count, then that many links
  std::vector<HashParams> hash;    // per node
  // Per GPU, what every route starting or ending there needs, read once.
  struct GpuEnds {
    std::int32_t server = -1;
    NodeId nvs = kNoNode;
    LinkId to_nvs = kNoLink, from_nvs = kNoLink;
    std::int32_t nic = -1;  // NIC number
    LinkId to_nic = kNoLink, from_nic = kNoLink;
  };
  std::vector<GpuEnds> gpu;
  // Per NIC, its live attachments to switches in neighbour order: nic_ports[nic_port_at[i] ..
  // nic_port_at[i+1]).
  struct NicPort {
    std::int32_t sw = -1;
    LinkId up = kNoLink, down = kNoLink;
  };
  std::vector<std::int32_t> nic_port_at;
  std::vector<NicPort> nic_ports;
  std::vector<NodeId> nic_node;

  std::uint8_t distance(int cls, int sw) const {
    return dist[static_cast<std::size_t>(cls) * static_cast<std::size_t>(switches) +
                static_cast<std::size_t>(sw)];
  }
  std::span<const LinkId> hops(int cls, int sw) const {
    const std::int32_t at = hop[static_cast<std::size_t>(cls) * static_cast<std::size_t>(switches) +
                                static_cast<std::size_t>(sw)];
    if (at < 0) return {};
    return {pool.data() + at + 1, static_cast<std::size_t>(pool[static_cast<std::size_t>(at)])};
  }
  bool up(LinkId l) const { return link_up[static_cast<std::size_t>(l)] != 0; }
  int sw(NodeId n) const { return sw_of_node[static_cast<std::size_t>(n)]; }
};

// The endpoints of a flow, resolved once.
struct Router::Ends {
  bool nvlink = false;                     // same server: GPU -> NVSwitch -> GPU
  LinkId first = kNoLink, last = kNoLink;  // GPU -> NIC (or NVSwitch) and NIC (NVSwitch) -> GPU
  int nic_a = -1, nic_b = -1;              // NIC numbers
  int cls = -1;
};

Router::Router(const ClusterGraph& graph, const RoutingConfig& config)
    : Router(graph, config, FailureSet(graph)) {}

Router::Router(Router&&) noexcept = default;
Router::~Router() = default;

Router::Router(const ClusterGraph& graph, const RoutingConfig& config, const FailureSet& failures)
    : graph_(&graph), config_(config), t_(std::make_unique<Tables>()) {
  if (config.qps_per_connection < 1) {
    throw_input(fmt::format("must be at least 1, got {}", config.qps_per_connection),
                {"", 0, "network.routing.qps_per_connection"});
  }
  Tables& t = *t_;
  const ClusterGraph& g = graph;
  const auto links = static_cast<std::size_t>(g.link_count());
  t.link_up.assign(links, 1);
  for (std::size_t l = 0; l < links; ++l) {
    const auto id = static_cast<LinkId>(l);
    if (failures.link_down(id) || failures.node_down(g.link_src(id)) ||
        failures.node_down(g.link_dst(id))) {
      t.link_up[l] = 0;
    }
  }

  // Switch numbering, in tier order so that one pass up and one pass down visit children first.
  t.sw_of_node.assign(static_cast<std::size_t>(g.node_count()), -1);
  for (NodeId n = 0; n < g.node_count(); ++n) {
    if (g.node(n).kind == NodeKind::kSwitch) t.sw_node.push_back(n);
  }
  std::stable_sort(t.sw_node.begin(), t.sw_node.end(),
                   [&](NodeId a, NodeId b) { return g.node(a).tier < g.node(b).tier; });
  t.switches = static_cast<int>(t.sw_node.size());
  for (int s = 0; s < t.switches; ++s)
    t.sw_of_node[static_cast<std::size_t>(t.sw_node[static_cast<std::size_t>(s)])] = s;

  // Hash settings per node.
  t.hash.resize(static_cast<std::size_t>(g.node_count()));
  for (NodeId n = 0; n < g.node_count(); ++n) {
    std::uint32_t seed = config.seed;
    if (config.seed_scope == SeedScope::kPerTier) {
      seed = mix32(config.seed, static_cast<std::uint64_t>(g.node(n).tier));
    } else if (config.seed_scope == SeedScope::kPerSwitch) {
      seed = mix32(config.seed, static_cast<std::uint64_t>(n) + 0x100);
    }
    t.hash[static_cast<std::size_t>(n)] = HashParams::from_seed(seed);
  }

  // Destination classes and each NIC's pinning key.
  std::map<std::vector<std::int32_t>, std::int32_t> classes;
  t.nic_class.assign(static_cast<std::size_t>(g.nic_count()), -1);
  std::vector<int> slice(static_cast<std::size_t>(g.nic_count()), 0);
  std::vector<int> first_tor(static_cast<std::size_t>(g.nic_count()), 0);
  std::vector<int> ports_seen(static_cast<std::size_t>(t.switches), 0);
  for (int i = 0; i < g.nic_count(); ++i) {
    const NodeId nic = g.nic_node(i);
    std::vector<std::int32_t> attached;
    int uplinks = 0;
    for (const LinkId l : g.out_links(nic)) {
      if (g.link_kind(l) != LinkKind::kNicUp) continue;
      ++uplinks;
      const int s = t.sw(g.link_dst(l));
      if (uplinks == 1) {
        first_tor[static_cast<std::size_t>(i)] = s;
        slice[static_cast<std::size_t>(i)] = ports_seen[static_cast<std::size_t>(s)]++;
      }
      if (t.up(l) && t.up(ClusterGraph::reverse(l))) attached.push_back(s);
    }
    if (uplinks > kMaxNicUplinks) {
      throw_input(fmt::format("{} has {} uplinks; a NIC may have at most {}", g.node_name(nic),
                              uplinks, kMaxNicUplinks));
    }
    if (attached.empty()) continue;
    std::sort(attached.begin(), attached.end());
    attached.erase(std::unique(attached.begin(), attached.end()), attached.end());
    const auto [it, fresh] = classes.emplace(attached, static_cast<std::int32_t>(classes.size()));
    if (fresh) t.class_switches.push_back(attached);
    t.nic_class[static_cast<std::size_t>(i)] = it->second;
  }
  const int most_ports =
      ports_seen.empty() ? 1 : std::max(1, *std::max_element(ports_seen.begin(), ports_seen.end()));
  for (std::size_t i = 0; i < slice.size(); ++i) {
    t.nic_pin_key.push_back(static_cast<std::uint32_t>(first_tor[i] * most_ports + slice[i]));
  }

  // Endpoints of every GPU.
  t.gpu.resize(static_cast<std::size_t>(g.gpu_count()));
  for (GpuId i = 0; i < g.gpu_count(); ++i) {
    Tables::GpuEnds& e = t.gpu[static_cast<std::size_t>(i)];
    const NodeId node = g.gpu_node(i);
    e.server = g.node(node).server;
    e.nvs = g.nvswitch_of_gpu(i);
    const NodeId nic = g.nic_of_gpu(i);
    if (nic != kNoNode) e.nic = g.node(nic).index;
    for (const LinkId l : g.out_links(node)) {
      if (g.link_dst(l) == e.nvs && e.to_nvs == kNoLink) {
        e.to_nvs = l;
        e.from_nvs = ClusterGraph::reverse(l);
      }
      if (g.link_dst(l) == nic && e.to_nic == kNoLink) {
        e.to_nic = l;
        e.from_nic = ClusterGraph::reverse(l);
      }
    }
  }
  // Live attachments of every NIC, in neighbour order.
  t.nic_port_at.assign(static_cast<std::size_t>(g.nic_count()) + 1, 0);
  for (int i = 0; i < g.nic_count(); ++i) {
    const NodeId nic = g.nic_node(i);
    t.nic_node.push_back(nic);
    const auto begin = static_cast<std::ptrdiff_t>(t.nic_ports.size());
    for (const LinkId l : g.out_links(nic)) {
      const LinkId back = ClusterGraph::reverse(l);
      if (g.link_kind(l) == LinkKind::kNicUp && t.up(l) && t.up(back)) {
        t.nic_ports.push_back({t.sw(g.link_dst(l)), l, back});
      }
    }
    std::sort(t.nic_ports.begin() + begin, t.nic_ports.end(),
              [](const Tables::NicPort& a, const Tables::NicPort& b) {
                return a.sw != b.sw ? a.sw < b.sw : a.up < b.up;
              });
    t.nic_port_at[static_cast<std::size_t>(i) + 1] = static_cast<std::int32_t>(t.nic_ports.size());
  }

  // Live switch-to-switch links of each switch, split into up and down.
  std::vector<std::vector<LinkId>> up_links(static_cast<std::size_t>(t.switches));
  std::vector<std::vector<LinkId>> down_links(static_cast<std::size_t>(t.switches));
  for (int s = 0; s < t.switches; ++s) {
    for (const LinkId l : g.out_links(t.sw_node[static_cast<std::size_t>(s)])) {
      if (!t.up(l)) continue;
      if (g.link_kind(l) == LinkKind::kUp) up_links[static_cast<std::size_t>(s)].push_back(l);
      if (g.link_kind(l) == LinkKind::kDown) down_links[static_cast<std::size_t>(s)].push_back(l);
    }
  }
  // Next hops in the order of the neighbours' node ids (parallel links by link id), so that the
  // choice a hash makes does not depend on the order the cables were added in: a graph written
  // to a fabric file and read back routes every flow the same way.
  const auto by_neighbour = [&g](LinkId a, LinkId b) {
    return g.link_dst(a) != g.link_dst(b) ? g.link_dst(a) < g.link_dst(b) : a < b;
  };
  for (int s = 0; s < t.switches; ++s) {
    std::sort(up_links[static_cast<std::size_t>(s)].begin(),
              up_links[static_cast<std::size_t>(s)].end(), by_neighbour);
    std::sort(down_links[static_cast<std::size_t>(s)].begin(),
              down_links[static_cast<std::size_t>(s)].end(), by_neighbour);
  }
  // Each switch's full up-list is stored once and shared by every class that goes up through all
  // of it (in a healthy Clos, every class but the switch's own descendants).
  std::vector<std::int32_t> up_segment(static_cast<std::size_t>(t.switches), -1);
  for (int s = 0; s < t.switches; ++s) {
    const auto& ups = up_links[static_cast<std::size_t>(s)];
    if (ups.empty()) continue;
    up_segment[static_cast<std::size_t>(s)] = static_cast<std::int32_t>(t.pool.size());
    t.pool.push_back(static_cast<LinkId>(ups.size()));
    t.pool.insert(t.pool.end(), ups.begin(), ups.end());
  }

  const auto classes_n = t.class_switches.size();
  const auto S = static_cast<std::size_t>(t.switches);
  t.dist.assign(classes_n * S, kUnreachable);
  t.hop.assign(classes_n * S, -1);
  std::vector<std::uint8_t> down(S);
  std::vector<LinkId> chosen;
  for (std::size_t c = 0; c < classes_n; ++c) {
    std::uint8_t* dist = t.dist.data() + c * S;
    std::int32_t* hop = t.hop.data() + c * S;
    std::fill(down.begin(), down.end(), kUnreachable);
    for (const std::int32_t s : t.class_switches[c]) down[static_cast<std::size_t>(s)] = 0;
    for (std::size_t s = 0; s < S; ++s) {
      if (down[s] == 0) continue;
      for (const LinkId l : down_links[s]) {
        const std::uint8_t d = down[static_cast<std::size_t>(t.sw(g.link_dst(l)))];
        if (d != kUnreachable) down[s] = std::min<std::uint8_t>(down[s], d + 1);
      }
    }
    for (std::size_t s = S; s-- > 0;) {
      if (down[s] != kUnreachable) {
        dist[s] = down[s];
        continue;
      }
      for (const LinkId l : up_links[s]) {
        const std::uint8_t d = dist[static_cast<std::size_t>(t.sw(g.link_dst(l)))];
        if (d != kUnreachable) dist[s] = std::min<std::uint8_t>(dist[s], d + 1);
      }
    }
    for (std::size_t s = 0; s < S; ++s) {
      if (dist[s] == 0 || dist[s] == kUnreachable) continue;
      const bool going_down = down[s] != kUnreachable;
      const auto& candidates = going_down ? down_links[s] : up_links[s];
      const std::uint8_t* next = going_down ? down.data() : dist;
      chosen.clear();
      for (const LinkId l : candidates) {
        if (next[static_cast<std::size_t>(t.sw(g.link_dst(l)))] + 1 == dist[s]) chosen.push_back(l);
      }
      if (!going_down && chosen.size() == up_links[s].size()) {
        hop[s] = up_segment[s];
        continue;
      }
      hop[s] = static_cast<std::int32_t>(t.pool.size());
      t.pool.push_back(static_cast<LinkId>(chosen.size()));
      t.pool.insert(t.pool.end(), chosen.begin(), chosen.end());
    }
  }
}

const HashParams& Router::hash_params(NodeId node) const {
  return t_->hash[static_cast<std::size_t>(node)];
}

FiveTuple Router::five_tuple(const Flow& flow) const {
  const Tables& t = *t_;
  const int a = t.gpu[static_cast<std::size_t>(flow.src)].nic;
  const int b = t.gpu[static_cast<std::size_t>(flow.dst)].nic;
  FiveTuple tuple;
  tuple.src_ip = a < 0 ? 0 : nic_ip(a);
  tuple.dst_ip = b < 0 ? 0 : nic_ip(b);
  tuple.src_port = roce_udp_source_port(qp_number(flow.src, flow.dst, flow.qp),
                                        qp_number(flow.dst, flow.src, flow.qp));
  return tuple;
}

bool Router::resolve(GpuId src, GpuId dst, Ends& e) const {
  const Tables& t = *t_;
  if (src == dst) return true;
  const Tables::GpuEnds& a = t.gpu[static_cast<std::size_t>(src)];
  const Tables::GpuEnds& b = t.gpu[static_cast<std::size_t>(dst)];
  if (a.server == b.server && a.nvs != kNoNode && a.nvs == b.nvs) {
    e.nvlink = true;
    e.first = a.to_nvs;
    e.last = b.from_nvs;
    return t.up(e.first) && t.up(e.last);
  }
  if (a.nic < 0 || b.nic < 0 || a.nic == b.nic) return false;
  e.nic_a = a.nic;
  e.nic_b = b.nic;
  e.first = a.to_nic;
  e.last = b.from_nic;
  if (!t.up(e.first) || !t.up(e.last)) return false;
  e.cls = t.nic_class[static_cast<std::size_t>(e.nic_b)];
  return e.cls >= 0;
}

namespace {

// The source NIC's uplinks on shortest paths to class `cls`, in neighbour order, written to
// `out`; returns how many.
template <class TablesT>
int nic_candidates(const TablesT& t, int nic, int cls, std::array<LinkId, kMaxNicUplinks>& out) {
  std::uint8_t best = kUnreachable;
  int n = 0;
  for (auto i = t.nic_port_at[static_cast<std::size_t>(nic)];
       i < t.nic_port_at[static_cast<std::size_t>(nic) + 1]; ++i) {
    const auto& port = t.nic_ports[static_cast<std::size_t>(i)];
    const std::uint8_t d = t.distance(cls, port.sw);
    if (d == kUnreachable || d > best) continue;
    if (d < best) {
      best = d;
      n = 0;
    }
    out[static_cast<std::size_t>(n++)] = port.up;
  }
  return n;
}

// The live link from switch number `sw` down to NIC number `nic`.
template <class TablesT>
LinkId link_to_nic(const TablesT& t, int sw, int nic) {
  for (auto i = t.nic_port_at[static_cast<std::size_t>(nic)];
       i < t.nic_port_at[static_cast<std::size_t>(nic) + 1]; ++i) {
    const auto& port = t.nic_ports[static_cast<std::size_t>(i)];
    if (port.sw == sw) return port.down;
  }
  return kNoLink;
}

}  // namespace

// Walks from the source NIC to the destination NIC, letting `choose(node, candidates)` pick the
// index of the next link wherever there is more than one.
template <class Choose>
bool Router::trace(const Ends& e, std::vector<LinkId>& path, Choose&& choose) const {
  const ClusterGraph& g = *graph_;
  const Tables& t = *t_;
  path.push_back(e.first);
  if (e.nvlink) {
    path.push_back(e.last);
    return true;
  }
  std::array<LinkId, kMaxNicUplinks> start{};
  const int n = nic_candidates(t, e.nic_a, e.cls, start);
  if (n == 0) return false;
  const std::span<const LinkId> first_hops(start.data(), static_cast<std::size_t>(n));
  LinkId l = start[static_cast<std::size_t>(
      n == 1 ? 0 : choose(t.nic_node[static_cast<std::size_t>(e.nic_a)], first_hops))];
  path.push_back(l);
  NodeId s = g.link_dst(l);
  for (;;) {
    const int sw = t.sw(s);
    if (t.distance(e.cls, sw) == 0) break;
    const std::span<const LinkId> hops = t.hops(e.cls, sw);
    l = hops[hops.size() == 1 ? 0 : static_cast<std::size_t>(choose(s, hops))];
    path.push_back(l);
    s = g.link_dst(l);
  }
  path.push_back(link_to_nic(t, t.sw(s), e.nic_b));
  path.push_back(e.last);
  return true;
}

bool Router::route(const Flow& flow, std::vector<LinkId>& path) {
  path.clear();
  if (config_.mode == RoutingMode::kSpray) {
    throw std::logic_error("Router::route: a sprayed flow has no single path; use route_shares");
  }
  Ends e;
  if (!resolve(flow.src, flow.dst, e)) return false;
  if (flow.src == flow.dst) return true;
  if (config_.mode == RoutingMode::kLeastLoaded) return route_least_loaded(e, path);
  if (config_.mode == RoutingMode::kPinned) {
    // D-mod-k (as InfiniBand fat-tree routing): the first branch takes key mod n1, the next
    // (key / n1) mod n2, and so on, where the key numbers the destination's ToR port across the
    // fabric; the ToR uplink is the destination's slice (Meta's pinning), the rest spread by ToR.
    std::uint32_t key = e.nvlink ? 0 : t_->nic_pin_key[static_cast<std::size_t>(e.nic_b)];
    return trace(e, path, [&key](NodeId, std::span<const LinkId> c) {
      const auto n = static_cast<std::uint32_t>(c.size());
      const int pick = static_cast<int>(key % n);
      key /= n;
      return pick;
    });
  }
  // The tuple's digest is computed at the first branch and serves every switch after it.
  bool have_digest = false;
  TupleDigest d;
  const HashKind kind = config_.hash;
  return trace(e, path, [&](NodeId node, std::span<const LinkId> c) {
    if (!have_digest) {
      d = digest(five_tuple(flow));
      have_digest = true;
    }
    return ecmp_pick(ecmp_hash(kind, d, t_->hash[static_cast<std::size_t>(node)]),
                     static_cast<int>(c.size()));
  });
}

// Least-loaded placement: among the flow's equal-cost paths, the one whose busiest link carries
// the fewest flows, then the smallest sum, then the lowest link ids; then the flow is added to
// every link of it. The paths form a DAG whose depth is at most twice the tiers, so a memoised
// recursion over its switches finds the best in one pass.
bool Router::route_least_loaded(const Ends& e, std::vector<LinkId>& path) {
  const ClusterGraph& g = *graph_;
  const Tables& t = *t_;
  if (load_.empty()) load_.assign(static_cast<std::size_t>(g.link_count()), 0.0);
  if (!e.nvlink) {
    struct Best {
      double max = 0, sum = 0;
      LinkId next = kNoLink;
    };
    std::map<int, Best> memo;
    const auto best = [&](auto&& self, NodeId s) -> Best {
      const int sw = t.sw(s);
      if (const auto it = memo.find(sw); it != memo.end()) return it->second;
      Best b;
      if (t.distance(e.cls, sw) == 0) {
        b.next = link_to_nic(t, t.sw(s), e.nic_b);
        b.max = b.sum = load_[static_cast<std::size_t>(b.next)];
      } else {
        b.max = std::numeric_limits<double>::infinity();
        for (const LinkId l : t.hops(e.cls, sw)) {
          const Best rest = self(self, g.link_dst(l));
          const double x = load_[static_cast<std::size_t>(l)];
          const double m = std::max(x, rest.max);
          const double sum = x + rest.sum;
          if (m < b.max || (m == b.max && sum < b.sum)) b = {m, sum, l};
        }
      }
      memo.emplace(sw, b);
      return b;
    };
    std::array<LinkId, kMaxNicUplinks> start{};
    const int n = nic_candidates(t, e.nic_a, e.cls, start);
    if (n == 0) return false;
    Best top{std::numeric_limits<double>::infinity(), 0, kNoLink};
    for (int i = 0; i < n; ++i) {
      const LinkId l = start[static_cast<std::size_t>(i)];
      const Best rest = best(best, g.link_dst(l));
      const double x = load_[static_cast<std::size_t>(l)];
      const double m = std::max(x, rest.max);
      if (m < top.max || (m == top.max && x + rest.sum < top.sum)) top = {m, x + rest.sum, l};
    }
    path.push_back(e.first);
    LinkId l = top.next;
    while (g.node(g.link_dst(l)).kind == NodeKind::kSwitch) {
      path.push_back(l);
      l = best(best, g.link_dst(l)).next;
    }
    path.push_back(l);
    path.push_back(e.last);
  } else {
    path.push_back(e.first);
    path.push_back(e.last);
  }
  for (const LinkId l : path) load_[static_cast<std::size_t>(l)] += 1.0;
  return true;
}

bool Router::route_shares(const Flow& flow, std::vector<LinkShare>& out) {
  out.clear();
  if (config_.mode == RoutingMode::kSpray) {
    Ends e;
    if (!resolve(flow.src, flow.dst, e)) return false;
    if (flow.src == flow.dst) return true;
    return route_spray(e, out);
  }
  if (!route(flow, path_scratch_)) return false;
  for (const LinkId l : path_scratch_) out.push_back({l, 1.0});
  return true;
}

// Ideal spraying: the flow splits evenly over the next hops at every branch. The DAG is walked
// level by level (the distance to the destination falls by one per hop), merging what reaches
// the same switch.
bool Router::route_spray(const Ends& e, std::vector<LinkShare>& out) const {
  const ClusterGraph& g = *graph_;
  const Tables& t = *t_;
  out.push_back({e.first, 1.0});
  if (e.nvlink) {
    out.push_back({e.last, 1.0});
    return true;
  }
  std::array<LinkId, kMaxNicUplinks> start{};
  const int n = nic_candidates(t, e.nic_a, e.cls, start);
  if (n == 0) return false;
  std::map<NodeId, double> level;
  for (int i = 0; i < n; ++i) {
    const LinkId l = start[static_cast<std::size_t>(i)];
    out.push_back({l, 1.0 / n});
    level[g.link_dst(l)] += 1.0 / n;
  }
  while (!level.empty()) {
    std::map<NodeId, double> next;
    for (const auto& [s, share] : level) {
      const int sw = t.sw(s);
      if (t.distance(e.cls, sw) == 0) {
        out.push_back({link_to_nic(t, t.sw(s), e.nic_b), share});
        continue;
      }
      const std::span<const LinkId> hops = t.hops(e.cls, sw);
      const double part = share / static_cast<double>(hops.size());
      for (const LinkId l : hops) {
        out.push_back({l, part});
        next[g.link_dst(l)] += part;
      }
    }
    level = std::move(next);
  }
  // Each switch sits at one distance from the destination, so no link is listed twice.
  out.push_back({e.last, 1.0});
  return true;
}

Routes Router::route_all(std::span<const Flow> flows) {
  Routes r;
  r.offset.reserve(flows.size() + 1);
  r.links.reserve(flows.size() * 8);
  const bool spray = config_.mode == RoutingMode::kSpray;
  for (std::size_t i = 0; i < flows.size(); ++i) {
    bool ok = false;
    if (spray) {
      ok = route_shares(flows[i], shares_scratch_);
      if (ok) {
        for (const LinkShare& s : shares_scratch_) {
          r.links.push_back(s.link);
          r.shares.push_back(s.share);
        }
      }
    } else {
      ok = route(flows[i], path_scratch_);
      if (ok) r.links.insert(r.links.end(), path_scratch_.begin(), path_scratch_.end());
    }
    if (!ok) r.unrouted.push_back(static_cast<std::int32_t>(i));
    r.offset.push_back(static_cast<std::int64_t>(r.links.size()));
  }
  return r;
}

void Router::reset_load() { std::fill(load_.begin(), load_.end(), 0.0); }

bool Router::connected(GpuId src, GpuId dst) const {
  Ends e;
  if (!resolve(src, dst, e)) return false;
  if (src == dst || e.nvlink) return true;
  std::array<LinkId, kMaxNicUplinks> start{};
  return nic_candidates(*t_, e.nic_a, e.cls, start) > 0;
}

std::uint64_t Router::path_count(GpuId src, GpuId dst) const {
  Ends e;
  if (!resolve(src, dst, e)) return 0;
  if (src == dst || e.nvlink) return 1;
  const ClusterGraph& g = *graph_;
  const Tables& t = *t_;
  std::map<int, std::uint64_t> memo;
  const auto count = [&](auto&& self, NodeId s) -> std::uint64_t {
    const int sw = t.sw(s);
    if (t.distance(e.cls, sw) == 0) return 1;
    if (const auto it = memo.find(sw); it != memo.end()) return it->second;
    std::uint64_t total = 0;
    for (const LinkId l : t.hops(e.cls, sw)) total += self(self, g.link_dst(l));
    memo.emplace(sw, total);
    return total;
  };
  std::array<LinkId, kMaxNicUplinks> start{};
  const int n = nic_candidates(t, e.nic_a, e.cls, start);
  std::uint64_t total = 0;
  for (int i = 0; i < n; ++i) total += count(count, g.link_dst(start[static_cast<std::size_t>(i)]));
  return total;
}

std::vector<std::vector<LinkId>> Router::paths(GpuId src, GpuId dst, std::size_t limit) const {
  std::vector<std::vector<LinkId>> out;
  Ends e;
  if (!resolve(src, dst, e)) return out;
  if (src == dst) return {{}};
  if (e.nvlink) return {{e.first, e.last}};
  const ClusterGraph& g = *graph_;
  const Tables& t = *t_;
  std::vector<LinkId> path{e.first};
  const auto dfs = [&](auto&& self, NodeId s) -> void {
    if (out.size() >= limit) return;
    const int sw = t.sw(s);
    if (t.distance(e.cls, sw) == 0) {
      path.push_back(link_to_nic(t, t.sw(s), e.nic_b));
      path.push_back(e.last);
      out.push_back(path);
      path.resize(path.size() - 2);
      return;
    }
    for (const LinkId l : t.hops(e.cls, sw)) {
      path.push_back(l);
      self(self, g.link_dst(l));
      path.pop_back();
    }
  };
  std::array<LinkId, kMaxNicUplinks> start{};
  const int n = nic_candidates(t, e.nic_a, e.cls, start);
  for (int i = 0; i < n; ++i) {
    path.push_back(start[static_cast<std::size_t>(i)]);
    dfs(dfs, g.link_dst(start[static_cast<std::size_t>(i)]));
    path.pop_back();
  }
  return out;
}

std::string Router::why_unreachable(GpuId src, GpuId dst) const {
  if (connected(src, dst)) return "";
  const ClusterGraph& g = *graph_;
  const Tables& t = *t_;
  const NodeId a = g.gpu_node(src);
  const NodeId b = g.gpu_node(dst);
  const std::string an = g.node_name(a);
  const std::string bn = g.node_name(b);
  const NodeId nvs = g.nvswitch_of_gpu(src);
  if (g.node(a).server == g.node(b).server && nvs != kNoNode && nvs == g.nvswitch_of_gpu(dst)) {
    return fmt::format("the NVLink between {} and {} through {} is down", an, bn, g.node_name(nvs));
  }
  // Reasons at either end, source first.
  for (const auto& [gpu, name] : {std::pair{a, an}, std::pair{b, bn}}) {
    const NodeId nic = g.nic_of_gpu(g.node(gpu).index);
    if (nic == kNoNode) return fmt::format("{} has no NIC", name);
    bool pcie = false;
    for (const LinkId l : g.out_links(gpu)) {
      if (g.link_dst(l) == nic && t.up(l) && t.up(ClusterGraph::reverse(l))) pcie = true;
    }
    if (!pcie) return fmt::format("{} ({}'s NIC) is down", g.node_name(nic), name);
    if (t.nic_class[static_cast<std::size_t>(g.node(nic).index)] < 0) {
      return fmt::format("every link of {} ({}'s NIC) to the fabric is down", g.node_name(nic),
                         name);
    }
  }
  if (g.nic_of_gpu(src) == g.nic_of_gpu(dst)) {
    return fmt::format("{} and {} share {} and no NVSwitch", an, bn,
                       g.node_name(g.nic_of_gpu(src)));
  }
  // Both NICs are attached; the switches between them are not.
  for (const auto& [gpu, name] : {std::pair{a, an}, std::pair{b, bn}}) {
    const NodeId nic = g.nic_of_gpu(g.node(gpu).index);
    for (const std::int32_t s : t.class_switches[static_cast<std::size_t>(
             t.nic_class[static_cast<std::size_t>(g.node(nic).index)])]) {
      const NodeId sn = t.sw_node[static_cast<std::size_t>(s)];
      bool any_up = false;
      for (const LinkId l : g.out_links(sn)) {
        if (g.link_kind(l) == LinkKind::kUp && t.up(l)) any_up = true;
      }
      if (!any_up) {
        return fmt::format("{} (the ToR of {}) has every uplink down", g.node_name(sn), name);
      }
    }
  }
  return fmt::format("no up/down path of live links joins the ToRs of {} and {}", an, bn);
}

void require_paths(const Router& router, std::span<const Flow> flows, int max_listed) {
  std::vector<Flow> unrouted;
  for (const Flow& f : flows) {
    if (!router.connected(f.src, f.dst)) unrouted.push_back(f);
  }
  if (!unrouted.empty()) {
    throw_unreachable(router, unrouted, static_cast<std::int64_t>(flows.size()), max_listed);
  }
}

void throw_unreachable(const Router& router, std::span<const Flow> unrouted,
                       std::int64_t total_flows, int max_listed) {
  std::map<std::pair<GpuId, GpuId>, int> pairs;  // pair -> order of first appearance
  for (const Flow& f : unrouted)
    pairs.emplace(std::pair{f.src, f.dst}, static_cast<int>(pairs.size()));
  std::vector<std::pair<GpuId, GpuId>> ordered(pairs.size());
  for (const auto& [pair, i] : pairs) ordered[static_cast<std::size_t>(i)] = pair;
  // Reasons are worked out for the pairs listed only: there may be millions of pairs.
  std::map<std::string, std::vector<std::string>> by_reason;
  const ClusterGraph& g = router.graph();
  const std::size_t listed =
      std::min(ordered.size(), static_cast<std::size_t>(std::max(max_listed, 0)));
  for (std::size_t i = 0; i < listed; ++i) {
    const auto [s, d] = ordered[i];
    by_reason[router.why_unreachable(s, d)].push_back(g.node_name(g.gpu_node(s)) + "->" +
                                                      g.node_name(g.gpu_node(d)));
  }
  std::string message =
      fmt::format("{} GPU pair{} lost connectivity ({} of {} flows have no path)", ordered.size(),
                  ordered.size() == 1 ? "" : "s", unrouted.size(), total_flows);
  for (const auto& [reason, names] : by_reason) {
    message += fmt::format("; {}: {}", reason, fmt::join(names, ", "));
  }
  if (listed < ordered.size())
    message += fmt::format("; and {} more pairs", ordered.size() - listed);
  throw_infeasible(message, {}, "restore the failed links or route the traffic elsewhere");
}

}  // namespace trainsim::topo
