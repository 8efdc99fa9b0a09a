#include "topology/graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "topology/boost_graph.h"

namespace trainsim::topo {

ClusterGraph::ClusterGraph() : boost_(std::make_unique<BoostGraphHolder>()) {}
ClusterGraph::ClusterGraph(ClusterGraph&&) noexcept = default;
ClusterGraph& ClusterGraph::operator=(ClusterGraph&&) noexcept = default;
ClusterGraph::~ClusterGraph() = default;

NodeId ClusterGraph::switch_node(int tier, int i) const {
  return switch_nodes_[static_cast<std::size_t>(tier - 1)][static_cast<std::size_t>(i)];
}

std::string ClusterGraph::tier_name(int tier) const {
  switch (tiers()) {
    case 1:
      return "tor";
    case 2:
      return tier == 1 ? "leaf" : "spine";
    case 3:
      return tier == 1 ? "tor" : tier == 2 ? "agg" : "core";
    default:
      return fmt::format("t{}", tier);
  }
}

std::string ClusterGraph::node_name(NodeId n) const {
  if (!names_.empty() && !names_[static_cast<std::size_t>(n)].empty()) {
    return names_[static_cast<std::size_t>(n)];
  }
  const NodeInfo& info = node(n);
  switch (info.kind) {
    case NodeKind::kGpu:
      return fmt::format("gpu{}", info.index);
    case NodeKind::kNvSwitch:
      return fmt::format("nvs{}", info.server);
    case NodeKind::kNic:
      return fmt::format("nic{}", info.index);
    case NodeKind::kSwitch:
      break;
  }
  return fmt::format("{}{}", tier_name(info.tier), info.index);
}

std::string ClusterGraph::link_name(LinkId l) const {
  return node_name(link_src(l)) + "->" + node_name(link_dst(l));
}

GraphBuilder::GraphBuilder(double nic_latency_s, double switch_latency_s)
    : graph_(new ClusterGraph()),
      nic_latency_(TimePs::from_seconds(nic_latency_s)),
      switch_latency_(TimePs::from_seconds(switch_latency_s)) {}

GraphBuilder::~GraphBuilder() = default;

int GraphBuilder::node_count() const { return graph_->node_count(); }

const NodeInfo& GraphBuilder::node(NodeId n) const { return graph_->node(n); }

NodeId GraphBuilder::add_node(NodeKind kind, int tier, int server) {
  ClusterGraph& g = *graph_;
  NodeInfo info;
  info.kind = kind;
  info.tier = static_cast<std::int8_t>(tier);
  info.server = server;
  const NodeId id = static_cast<NodeId>(g.nodes_.size());
  switch (kind) {
    case NodeKind::kGpu:
      info.index = static_cast<std::int32_t>(g.gpu_node_.size());
      g.gpu_node_.push_back(id);
      break;
    case NodeKind::kNic:
      info.index = static_cast<std::int32_t>(g.nic_node_.size());
      g.nic_node_.push_back(id);
      break;
    case NodeKind::kNvSwitch:
      info.index = server;
      break;
    case NodeKind::kSwitch: {
      if (tier < 1) throw std::invalid_argument("switch tier below 1");
      if (g.switch_nodes_.size() < static_cast<std::size_t>(tier)) {
        g.switch_nodes_.resize(static_cast<std::size_t>(tier));
      }
      auto& tier_nodes = g.switch_nodes_[static_cast<std::size_t>(tier - 1)];
      info.index = static_cast<std::int32_t>(tier_nodes.size());
      tier_nodes.push_back(id);
      break;
    }
  }
  if (kind != NodeKind::kSwitch) {
    info.tier = 0;
    if (server < 0) throw std::invalid_argument("GPU, NVSwitch or NIC without a server");
    g.servers_ = std::max(g.servers_, server + 1);
  }
  g.nodes_.push_back(info);
  if (!g.names_.empty()) g.names_.emplace_back();
  return id;
}

NodeId GraphBuilder::add_gpu(int server) { return add_node(NodeKind::kGpu, 0, server); }
NodeId GraphBuilder::add_nvswitch(int server) { return add_node(NodeKind::kNvSwitch, 0, server); }
NodeId GraphBuilder::add_nic(int server) { return add_node(NodeKind::kNic, 0, server); }
NodeId GraphBuilder::add_switch(int tier) { return add_node(NodeKind::kSwitch, tier, -1); }

void GraphBuilder::set_name(NodeId n, std::string name) {
  ClusterGraph& g = *graph_;
  // Nodes left unnamed keep their generated name (node_name).
  if (g.names_.empty()) g.names_.resize(g.nodes_.size());
  g.names_[static_cast<std::size_t>(n)] = std::move(name);
}

TimePs GraphBuilder::enter_latency(NodeId n) const {
  switch (graph_->node(n).kind) {
    case NodeKind::kNic:
      return nic_latency_;
    case NodeKind::kSwitch:
      return switch_latency_;
    case NodeKind::kGpu:
    case NodeKind::kNvSwitch:
      break;
  }
  return TimePs{0};
}

namespace {

// The kind of link a->b, or throws for a pair that no cluster cables together.
LinkKind kind_of(const NodeInfo& a, const NodeInfo& b) {
  using K = NodeKind;
  if ((a.kind == K::kGpu && b.kind == K::kNvSwitch) ||
      (a.kind == K::kNvSwitch && b.kind == K::kGpu)) {
    return LinkKind::kNvlink;
  }
  if ((a.kind == K::kGpu && b.kind == K::kNic) || (a.kind == K::kNic && b.kind == K::kGpu)) {
    return LinkKind::kPcie;
  }
  if (a.kind == K::kNic && b.kind == K::kSwitch) return LinkKind::kNicUp;
  if (a.kind == K::kSwitch && b.kind == K::kNic) return LinkKind::kNicDown;
  if (a.kind == K::kSwitch && b.kind == K::kSwitch && a.tier != b.tier) {
    return a.tier < b.tier ? LinkKind::kUp : LinkKind::kDown;
  }
  throw std::invalid_argument("no cable joins these two kinds of node");
}

}  // namespace

LinkId GraphBuilder::add_cable(NodeId a, NodeId b, double Bps) {
  ClusterGraph& g = *graph_;
  if (!(Bps > 0)) throw std::invalid_argument("link capacity must be positive");
  const LinkKind ab = kind_of(g.node(a), g.node(b));
  const LinkKind ba = kind_of(g.node(b), g.node(a));
  const auto l = static_cast<LinkId>(g.link_src_.size());
  g.link_src_.insert(g.link_src_.end(), {a, b});
  g.link_dst_.insert(g.link_dst_.end(), {b, a});
  g.link_kind_.insert(g.link_kind_.end(), {ab, ba});
  g.link_capacity_Bps_.insert(g.link_capacity_Bps_.end(), {Bps, Bps});
  g.link_latency_.insert(g.link_latency_.end(), {enter_latency(b), enter_latency(a)});
  return l;
}

void GraphBuilder::set_latency(LinkId l, TimePs latency) {
  graph_->link_latency_[static_cast<std::size_t>(l)] = latency;
}

ClusterGraph GraphBuilder::finish(ClusterSpec spec, std::string description) {
  ClusterGraph& g = *graph_;
  const std::size_t nodes = g.nodes_.size();
  const std::size_t links = g.link_src_.size();

  // Out-links in CSR form, each node's links in increasing id order.
  g.out_offset_.assign(nodes + 1, 0);
  for (std::size_t l = 0; l < links; ++l)
    ++g.out_offset_[static_cast<std::size_t>(g.link_src_[l]) + 1];
  for (std::size_t n = 0; n < nodes; ++n) g.out_offset_[n + 1] += g.out_offset_[n];
  g.out_links_.resize(links);
  std::vector<std::int64_t> fill(g.out_offset_.begin(), g.out_offset_.end() - 1);
  for (std::size_t l = 0; l < links; ++l) {
    g.out_links_[static_cast<std::size_t>(fill[static_cast<std::size_t>(g.link_src_[l])]++)] =
        static_cast<LinkId>(l);
  }

  // A GPU sends through the first NIC it is cabled to and reaches its server's GPUs through the
  // first NVSwitch domain it is cabled to.
  g.gpu_nic_.assign(g.gpu_node_.size(), kNoNode);
  g.gpu_nvswitch_.assign(g.gpu_node_.size(), kNoNode);
  for (std::size_t i = 0; i < g.gpu_node_.size(); ++i) {
    for (const LinkId l : g.out_links(g.gpu_node_[i])) {
      const LinkKind k = g.link_kind(l);
      if (k == LinkKind::kPcie && g.gpu_nic_[i] == kNoNode) g.gpu_nic_[i] = g.link_dst(l);
      if (k == LinkKind::kNvlink && g.gpu_nvswitch_[i] == kNoNode) {
        g.gpu_nvswitch_[i] = g.link_dst(l);
      }
    }
  }

  g.switches_per_tier_.clear();
  for (const auto& tier_nodes : g.switch_nodes_) {
    g.switches_per_tier_.push_back(static_cast<int>(tier_nodes.size()));
  }

  BoostGraph& bg = g.boost_->graph;
  bg = BoostGraph(nodes);
  for (std::size_t l = 0; l < links; ++l) {
    boost::add_edge(static_cast<std::size_t>(g.link_src_[l]),
                    static_cast<std::size_t>(g.link_dst_[l]),
                    BoostLinkProps{static_cast<LinkId>(l)}, bg);
  }

  spec.gpus = g.gpu_count();
  g.spec_ = std::move(spec);
  g.description_ = std::move(description);
  ClusterGraph out = std::move(g);
  graph_.reset(new ClusterGraph());
  return out;
}

}  // namespace trainsim::topo
