#include "sim/collective/placement.h"

#include <algorithm>

#include "sim/core/error.h"

namespace trainsim::coll {

const char* to_string(Placement p) {
  switch (p) {
    case Placement::kPacked: return "packed";
    case Placement::kRail: return "rail";
    case Placement::kSpread: return "spread";
  }
  return "?";
}

GroupShape placement_shape(int ranks, Placement placement, const topo::ClusterSpec& cluster) {
  if (ranks < 1) throw_input("needs at least 1 rank", {"", 0, "--ranks"});
  const int gpn = std::max(1, cluster.gpus_per_node);
  const long max_gpus = cluster.max_gpus();
  const long max_servers = max_gpus / gpn;
  GroupShape g;
  g.ranks = ranks;
  if (placement == Placement::kPacked) {
    if (ranks > max_gpus) {
      throw_infeasible(std::to_string(ranks) + " ranks do not fit cluster `" + cluster.name +
                           "`, whose fabric holds " + std::to_string(max_gpus) + " GPUs",
                       {"", 0, "--ranks"});
    }
    g.per_node = std::min(ranks, gpn);
    g.nodes = (ranks + gpn - 1) / gpn;
    g.min_per_node = ranks - (g.nodes - 1) * g.per_node;
  } else {
    if (ranks > max_servers) {
      throw_infeasible(std::to_string(ranks) + " ranks at one per server do not fit cluster `" +
                           cluster.name + "`, whose fabric holds " + std::to_string(max_servers) +
                           " servers",
                       {"", 0, "--ranks"}, "use --placement packed");
    }
    g.per_node = 1;
    g.nodes = ranks;
  }
  const int pod = cluster.fabric.pod_gpus;
  const long span_gpus = static_cast<long>(g.nodes) * gpn;
  g.pods = pod > 0 ? static_cast<int>(std::min<long>(g.nodes, (span_gpus + pod - 1) / pod)) : 1;
  return g;
}

}  // namespace trainsim::coll
