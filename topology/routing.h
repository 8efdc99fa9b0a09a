// Routing on a cluster graph: up/down equal-cost path sets, per-switch ECMP hashing of the RoCEv2
// 5-tuple, NCCL-style queue pairs, path pinning, ideal packet spraying, least-loaded placement,
// and failures.
//
// Paths. A flow between two GPUs of one server goes GPU -> NVSwitch -> GPU. Any other flow goes
// GPU -> NIC -> switches -> NIC -> GPU over the shortest valley-free (up, then down) paths of the
// live links: a switch that can reach the destination's ToR downwards goes down, any other goes
// up, and only to neighbours on a shortest such path (what BGP with ECMP converges to in a Clos).
// A failure removes exactly the paths through the failed links; a pair left without any path is
// reported, with the reason.
//
// Choosing among equal-cost next hops (RoutingConfig::mode):
// - ecmp: every switch hashes the flow's 5-tuple with its own HashParams (hash.h); the UDP source
//   port comes from the flow's QP numbers, so each QP of a connection is hashed independently.
// - pinned: the path depends on the destination alone (Meta's "path pinning" by destination
//   slice): D-mod-k digits of the destination's ToR port number, as InfiniBand fat-tree routing.
// - spray: ideal packet spraying: the flow is split evenly at every branch (route_shares).
// - least-loaded: flows are placed one by one on the equal-cost path whose busiest link carries
//   the fewest flows so far (then the least total), as a central traffic-engineering controller.
//
// Thread safety: a Router is built once and its const methods may be called from many threads;
// route() and route_all() mutate only in least-loaded mode (the placed load), so call them from
// one thread in that mode.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "topology/graph.h"
#include "topology/hardware.h"
#include "topology/hash.h"

namespace trainsim::topo {

enum class RoutingMode : std::uint8_t { kEcmp, kPinned, kSpray, kLeastLoaded };

/// Where switch hash seeds come from: one seed for the whole fabric (every switch hashes alike:
/// hash polarization), one per tier, or one per switch.
enum class SeedScope : std::uint8_t { kGlobal, kPerTier, kPerSwitch };

const char* to_string(RoutingMode mode);
const char* to_string(SeedScope scope);
std::optional<RoutingMode> routing_mode_from(
    std::string_view name);                                       // ecmp|pinned|spray|least-loaded
std::optional<SeedScope> seed_scope_from(std::string_view name);  // global|per-tier|per-switch

/// The routing settings of a scenario (`network.routing.*` keys).
struct RoutingConfig {
  RoutingMode mode = RoutingMode::kEcmp;         // network.routing.mode
  HashKind hash = HashKind::kCrc32;              // network.routing.hash
  SeedScope seed_scope = SeedScope::kPerSwitch;  // network.routing.seed_scope
  std::uint32_t seed = 0;                        // network.routing.seed: the base seed
  int qps_per_connection = 1;                    // network.routing.qps_per_connection (NCCL's 1)
};

/// One queue pair of a connection from GPU `src` to GPU `dst`; each is one ECMP flow.
struct Flow {
  GpuId src = 0;
  GpuId dst = 0;
  int qp = 0;  // 0 .. qps_per_connection-1
};

/// A link and the fraction of a flow it carries (1 except under spraying).
struct LinkShare {
  LinkId link = kNoLink;
  double share = 1.0;
};

/// Routes of many flows in one flat store: flow i uses links[offset[i] .. offset[i+1]).
struct Routes {
  std::vector<std::int64_t> offset{0};
  std::vector<LinkId> links;
  std::vector<double> shares;          // parallel to `links` in spray mode; empty otherwise (all 1)
  std::vector<std::int32_t> unrouted;  // indexes of flows without a path (empty ranges)

  std::size_t size() const { return offset.size() - 1; }
  std::span<const LinkId> path(std::size_t i) const {
    return {links.data() + offset[i], static_cast<std::size_t>(offset[i + 1] - offset[i])};
  }
};

/// Failed links and nodes. A failed cable takes both its directions down; a failed node takes
/// every cable it has.
class FailureSet {
 public:
  explicit FailureSet(const ClusterGraph& graph);

  void fail_cable(LinkId link);
  void fail_node(NodeId node);
  bool link_down(LinkId link) const { return link_down_[static_cast<std::size_t>(link)] != 0; }
  bool node_down(NodeId node) const { return node_down_[static_cast<std::size_t>(node)] != 0; }
  /// Failed cables by the id of their even (first) direction, in the order failed.
  const std::vector<LinkId>& failed_cables() const { return cables_; }
  const std::vector<NodeId>& failed_nodes() const { return nodes_; }

 private:
  const ClusterGraph* graph_;
  std::vector<std::uint8_t> link_down_, node_down_;
  std::vector<LinkId> cables_;
  std::vector<NodeId> nodes_;
};

/// `count` distinct switch-to-switch cables, picked by a generator seeded with `seed` (the same
/// seed gives the same cables). Throws Error (kInput) when the fabric has fewer.
std::vector<LinkId> pick_random_cables(const ClusterGraph& graph, int count, std::uint64_t seed);

/// Applies the failures a scenario's fabric states (FabricSpec::failed_cables, picked by
/// pick_random_cables with failure_seed; FabricSpec::failed_switches by name) to `failures`.
/// Throws Error (kInput) naming the `cluster.fabric.*` key for more cables than the fabric has
/// or a switch name it does not have.
void apply_fabric_failures(const ClusterGraph& graph, const FabricSpec& fabric,
                           FailureSet& failures);

/// Routes flows on one graph, which must outlive the router, under one configuration and one
/// set of failures (a changed failure set needs a new router: the tables are built once).
class Router {
 public:
  Router(const ClusterGraph& graph, const RoutingConfig& config);
  Router(const ClusterGraph& graph, const RoutingConfig& config, const FailureSet& failures);
  ~Router();
  Router(Router&&) noexcept;

  const ClusterGraph& graph() const { return *graph_; }
  const RoutingConfig& config() const { return config_; }

  /// The RoCEv2 5-tuple of a flow: the IPs of the two NICs, the UDP source port of the flow's
  /// QP numbers, destination port 4791, UDP.
  FiveTuple five_tuple(const Flow& flow) const;
  /// IPv4 address of a NIC: 10.0.0.0 + NIC number + 1.
  static std::uint32_t nic_ip(int nic_number) {
    return 0x0A000000u + 1u + static_cast<std::uint32_t>(nic_number);
  }
  /// The hash setting of a switch (or NIC) under the configured seed scope.
  const HashParams& hash_params(NodeId node) const;

  /// The flow's path (ecmp, pinned, least-loaded): clears `path` and fills it; false (and an
  /// empty path) when the pair has no path. A GPU sending to itself has an empty path. Throws
  /// std::logic_error in spray mode, where a flow has no single path.
  bool route(const Flow& flow, std::vector<LinkId>& path);
  /// The links of the flow with the share of it each carries (any mode); false when no path.
  bool route_shares(const Flow& flow, std::vector<LinkShare>& out);
  /// Routes every flow into one flat store (shares filled in spray mode).
  Routes route_all(std::span<const Flow> flows);

  /// Whether the two GPUs have a path, and if not, why ("tor3 has every uplink down").
  bool connected(GpuId src, GpuId dst) const;
  std::string why_unreachable(GpuId src, GpuId dst) const;
  /// Number of equal-cost paths (distinct link sequences) from src to dst; 0 when none.
  std::uint64_t path_count(GpuId src, GpuId dst) const;
  /// The equal-cost paths themselves, at most `limit` of them, in a fixed order.
  std::vector<std::vector<LinkId>> paths(GpuId src, GpuId dst, std::size_t limit = 65536) const;

  /// Least-loaded mode: flows placed per link so far; reset_load() forgets them.
  const std::vector<double>& placed_load() const { return load_; }
  void reset_load();

 private:
  struct Tables;
  struct Ends;
  bool resolve(GpuId src, GpuId dst, Ends& e) const;
  template <class Choose>
  bool trace(const Ends& e, std::vector<LinkId>& path, Choose&& choose) const;
  bool route_least_loaded(const Ends& e, std::vector<LinkId>& path);
  bool route_spray(const Ends& e, std::vector<LinkShare>& out) const;

  const ClusterGraph* graph_;
  RoutingConfig config_;
  std::unique_ptr<Tables> t_;
  std::vector<double> load_;
  std::vector<LinkId> path_scratch_;
  std::vector<LinkShare> shares_scratch_;
};

/// Throws Error (kInfeasible) when any flow has no path: names the GPU pairs that lost
/// connectivity (the first `max_listed`, grouped by the reason, then how many more pairs) and
/// how many flows have no path. Does nothing when every flow has a path.
void require_paths(const Router& router, std::span<const Flow> flows, int max_listed = 16);

/// The error require_paths throws, from the flows already known to have no path out of
/// `total_flows` routed.
[[noreturn]] void throw_unreachable(const Router& router, std::span<const Flow> unrouted,
                                    std::int64_t total_flows, int max_listed = 16);

}  // namespace trainsim::topo
