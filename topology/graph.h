// The cluster graph: every GPU, NVSwitch domain, NIC and switch of a cluster, and every link
// between them with its capacity and latency.
//
// A cable is two directed links with consecutive ids (2c and 2c+1), so `reverse(l)` is `l ^ 1`.
// Per-link data lives in flat arrays indexed by LinkId: the flow solver reads
// `link_capacity_Bps()` as its constraint vector and routes as lists of LinkIds. Nodes carry their
// kind, switch tier and server. Inside, the graph is also kept as a Boost.Graph adjacency list
// (`boost_graph.h`) for Boost's algorithms and GraphViz writer; the flat arrays are the hot path.
//
// A ClusterGraph is immutable once built (by `GraphBuilder::finish`, the Clos builders in clos.h
// or the fabric-file reader in fabric_file.h) and safe to share across threads. Failures are not
// part of the graph: a `FailureSet` (routing.h) marks links down for one router.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sim/core/units.h"
#include "topology/hardware.h"
#include "topology/ids.h"

namespace trainsim::topo {

enum class NodeKind : std::uint8_t {
  kGpu,
  kNvSwitch,  // the NVLink domain of one server (all its NVSwitch chips as one node)
  kNic,
  kSwitch,  // a scale-out switch; its tier is 1 (ToR/leaf) and up
};

/// What a directed link joins; statistics group links by it (and by tier for kUp/kDown).
enum class LinkKind : std::uint8_t {
  kNvlink,   // GPU -> NVSwitch or NVSwitch -> GPU
  kPcie,     // GPU -> NIC or NIC -> GPU (GPUDirect RDMA through the server's PCIe switch)
  kNicUp,    // NIC -> switch
  kNicDown,  // switch -> NIC
  kUp,       // switch -> switch of a higher tier
  kDown,     // switch -> switch of a lower tier
};

struct NodeInfo {
  NodeKind kind = NodeKind::kSwitch;
  std::int8_t tier = 0;      // switches: 1 (ToR/leaf) and up; 0 for every other kind
  std::int32_t index = 0;    // position among nodes of its kind (switches: within their tier)
  std::int32_t server = -1;  // server of a GPU, NVSwitch or NIC; -1 for switches
};

struct BoostGraphHolder;  // boost_graph.h

class ClusterGraph {
 public:
  ClusterGraph(ClusterGraph&&) noexcept;
  ClusterGraph& operator=(ClusterGraph&&) noexcept;
  ~ClusterGraph();

  /// The cluster it describes: the builders' input; for a fabric file, the scenario's cluster
  /// with the counts (GPUs, servers) the file gives.
  const ClusterSpec& spec() const { return spec_; }
  /// One line, e.g. "3-tier rail-optimized Clos, 1:1" or "fabric file f.graphml".
  const std::string& description() const { return description_; }

  int node_count() const { return static_cast<int>(nodes_.size()); }
  int link_count() const { return static_cast<int>(link_src_.size()); }
  int gpu_count() const { return static_cast<int>(gpu_node_.size()); }
  int server_count() const { return servers_; }
  int nic_count() const { return static_cast<int>(nic_node_.size()); }
  /// Highest switch tier present (0 when there are no switches).
  int tiers() const { return static_cast<int>(switches_per_tier_.size()); }
  /// Switches per tier, index 0 = tier 1.
  const std::vector<int>& switches_per_tier() const { return switches_per_tier_; }

  const NodeInfo& node(NodeId n) const { return nodes_[static_cast<std::size_t>(n)]; }
  NodeId gpu_node(GpuId g) const { return gpu_node_[static_cast<std::size_t>(g)]; }
  /// The NIC a GPU sends through (kNoNode when it has none), and the NVSwitch domain it is
  /// joined to (kNoNode when none).
  NodeId nic_of_gpu(GpuId g) const { return gpu_nic_[static_cast<std::size_t>(g)]; }
  NodeId nvswitch_of_gpu(GpuId g) const { return gpu_nvswitch_[static_cast<std::size_t>(g)]; }
  /// NIC number i (0..nic_count-1) as a node.
  NodeId nic_node(int i) const { return nic_node_[static_cast<std::size_t>(i)]; }
  /// Switch number i of tier t as a node.
  NodeId switch_node(int tier, int i) const;

  /// The links leaving a node, in increasing LinkId order.
  std::span<const LinkId> out_links(NodeId n) const {
    const auto b = out_offset_[static_cast<std::size_t>(n)];
    const auto e = out_offset_[static_cast<std::size_t>(n) + 1];
    return {out_links_.data() + b, static_cast<std::size_t>(e - b)};
  }
  NodeId link_src(LinkId l) const { return link_src_[static_cast<std::size_t>(l)]; }
  NodeId link_dst(LinkId l) const { return link_dst_[static_cast<std::size_t>(l)]; }
  LinkKind link_kind(LinkId l) const { return link_kind_[static_cast<std::size_t>(l)]; }
  /// The same cable in the other direction.
  static LinkId reverse(LinkId l) { return l ^ 1; }

  /// Capacity of every link in bytes per second, indexed by LinkId.
  const std::vector<double>& link_capacity_Bps() const { return link_capacity_Bps_; }
  double link_capacity_Bps(LinkId l) const {
    return link_capacity_Bps_[static_cast<std::size_t>(l)];
  }
  /// Latency a packet picks up on a link (the forwarding latency of the device it enters; see
  /// docs/topology.md), indexed by LinkId.
  const std::vector<TimePs>& link_latency() const { return link_latency_; }
  TimePs link_latency(LinkId l) const { return link_latency_[static_cast<std::size_t>(l)]; }

  /// "gpu12", "nic12", "nvs1", "tor5", "agg3", "core7", or the name a fabric file gave.
  std::string node_name(NodeId n) const;
  /// "tor5->agg3".
  std::string link_name(LinkId l) const;
  /// Short name of a switch tier in this graph: tor/agg/core for three tiers, leaf/spine for two.
  std::string tier_name(int tier) const;

  /// The same graph as a Boost.Graph adjacency list: vertex descriptor = NodeId, each edge carries
  /// its LinkId (boost_graph.h).
  const BoostGraphHolder& boost_graph() const { return *boost_; }

 private:
  friend class GraphBuilder;
  ClusterGraph();

  ClusterSpec spec_;
  std::string description_;
  int servers_ = 0;
  std::vector<NodeInfo> nodes_;
  std::vector<std::string> names_;  // empty, or one per node (fabric files)
  std::vector<NodeId> gpu_node_, gpu_nic_, gpu_nvswitch_, nic_node_;
  std::vector<std::vector<NodeId>> switch_nodes_;  // [tier-1][i]
  std::vector<int> switches_per_tier_;
  std::vector<std::int64_t> out_offset_;
  std::vector<LinkId> out_links_;
  std::vector<NodeId> link_src_, link_dst_;
  std::vector<LinkKind> link_kind_;
  std::vector<double> link_capacity_Bps_;
  std::vector<TimePs> link_latency_;
  std::unique_ptr<BoostGraphHolder> boost_;
};

/// Assembles a ClusterGraph node by node and cable by cable. Nodes of a kind are numbered in the
/// order they are added (the i-th GPU added is GpuId i). Used by the Clos builders and the
/// fabric-file reader; they check their input, so a misuse here (a cable between two GPUs, a
/// switch tier below 1) is a programming error and throws std::invalid_argument.
class GraphBuilder {
 public:
  /// `nic_latency_s` and `switch_latency_s`: the forwarding latency of entering a NIC or a
  /// switch, given to links whose latency add_cable does not state. Entering a GPU or an NVSwitch
  /// costs 0: NVLink latency belongs to the collective model's α (calibration).
  GraphBuilder(double nic_latency_s, double switch_latency_s);
  ~GraphBuilder();

  NodeId add_gpu(int server);
  NodeId add_nvswitch(int server);
  NodeId add_nic(int server);
  NodeId add_switch(int tier);
  /// Gives a node the name a fabric file uses for it.
  void set_name(NodeId n, std::string name);

  /// Adds a cable a-b of `Bps` per direction as links a->b (returned) and b->a (returned + 1),
  /// each with the latency of the node it enters.
  LinkId add_cable(NodeId a, NodeId b, double Bps);
  /// Sets the latency of one link (a fabric file's stated latency).
  void set_latency(LinkId l, TimePs latency);

  int node_count() const;
  const NodeInfo& node(NodeId n) const;

  /// Completes the graph. `spec` is recorded as the graph's spec, with `gpus` set to the GPUs
  /// built. The builder is empty afterwards.
  ClusterGraph finish(ClusterSpec spec, std::string description);

 private:
  NodeId add_node(NodeKind kind, int tier, int server);
  TimePs enter_latency(NodeId n) const;
  std::unique_ptr<ClusterGraph> graph_;
  TimePs nic_latency_, switch_latency_;
};

}  // namespace trainsim::topo
