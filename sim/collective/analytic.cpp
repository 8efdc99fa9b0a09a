#include "sim/collective/analytic.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace trainsim::coll {

const char* to_string(Kind k) {
  switch (k) {
    case Kind::kAllReduce: return "all_reduce";
    case Kind::kAllGather: return "all_gather";
    case Kind::kReduceScatter: return "reduce_scatter";
    case Kind::kAllToAll: return "all_to_all";
    case Kind::kBroadcast: return "broadcast";
    case Kind::kSendRecv: return "sendrecv";
  }
  return "?";
}

double busbw_factor(Kind k, int n) {
  if (n <= 1) return 0.0;
  const double nn = n;
  switch (k) {
    case Kind::kAllReduce: return 2.0 * (nn - 1.0) / nn;
    case Kind::kAllGather:
    case Kind::kReduceScatter:
    case Kind::kAllToAll: return (nn - 1.0) / nn;
    case Kind::kBroadcast:
    case Kind::kSendRecv: return 1.0;
  }
  return 1.0;
}

namespace {

// Share of the group's inter-server traffic that must cross the oversubscribed tier above the
// pods, turned into a slowdown of the network part. A ring crosses a pod boundary on `pods` of
// its `nodes` edges; an all-to-all sends (pods−1)/pods of its traffic across.
double above_pod_slowdown(Kind k, const GroupShape& g, const LinkModel& l) {
  if (g.pods <= 1 || l.above_pod_oversubscription <= 1.0) return 1.0;
  const double crossing = (k == Kind::kAllToAll)
                              ? (g.pods - 1.0) / g.pods
                              : std::min(1.0, static_cast<double>(g.pods) / std::max(1, g.nodes));
  return std::max(1.0, crossing * l.above_pod_oversubscription);
}

}  // namespace

Cost collective_cost(Kind k, double bytes, const GroupShape& group, const LinkModel& l) {
  Cost c;
  const int n = group.ranks;
  if (n <= 1 || bytes <= 0) return c;
  const int g = std::max(1, std::min(group.per_node, n));
  const int nodes = std::max(1, group.nodes);
  const double slow = above_pod_slowdown(k, group, l);

  if (k == Kind::kSendRecv) {
    // One peer: over NVLink when it shares the server, else through the NIC.
    if (nodes == 1) {
      c.nvlink_bytes = bytes;
      c.time_s = l.base_latency_s + l.nvlink_step_latency_s + bytes / l.nvlink_busbw_Bps;
    } else {
      c.nic_bytes = bytes;
      c.time_s = l.base_latency_s + l.net_step_latency_s + bytes * slow / l.nic_Bps_per_gpu;
    }
    return c;
  }

  if (k == Kind::kAllToAll) {
    // Each rank sends S/n to every other rank: (g−1)·S/n stay in the server, (n−g)·S/n leave it.
    const double intra = bytes * (g - 1) / n;
    const double inter = bytes * (n - g) / n;
    c.nvlink_bytes = intra;
    c.nic_bytes = inter;
    const double t_intra = intra > 0 ? intra / l.nvlink_busbw_Bps : 0.0;
    const double t_inter = inter > 0 ? inter * slow / l.nic_Bps_per_gpu : 0.0;
    const double lat = l.base_latency_s + (g - 1) * l.nvlink_step_latency_s +
                       (n - g) * (nodes > 1 ? l.net_step_latency_s : 0.0) / std::max(1, g);
    c.time_s = lat + std::max(t_intra, t_inter);
    return c;
  }

  const double factor = busbw_factor(k, n);
  // Ring steps and how many of them cross the network (NCCL tuning model).
  int steps = 0, net_steps = 0;
  switch (k) {
    case Kind::kAllReduce:
      steps = 2 * (n - 1);
      net_steps = nodes > 1 ? 2 * nodes : 0;
      break;
    case Kind::kAllGather:
    case Kind::kReduceScatter:
      steps = n - 1;
      net_steps = nodes > 1 ? nodes - 1 : 0;
      break;
    case Kind::kBroadcast:
      steps = n;
      net_steps = nodes > 1 ? nodes : 0;
      break;
    default: break;
  }
  net_steps = std::min(net_steps, steps);
  const double lat = l.base_latency_s + (steps - net_steps) * l.nvlink_step_latency_s +
                     net_steps * l.net_step_latency_s;

  double busbw = 0;
  if (nodes == 1) {
    busbw = l.nvlink_busbw_Bps;
    if (k == Kind::kAllReduce && l.nvls_busbw_Bps > busbw) busbw = l.nvls_busbw_Bps;
    c.nvlink_bytes = factor * bytes;
  } else {
    const double nic_busbw = g * l.nic_Bps_per_gpu / slow;
    const double nvl_busbw =
        g > 1 ? g / (g - 1.0) * l.nvlink_busbw_Bps : std::numeric_limits<double>::infinity();
    busbw = std::min(nic_busbw, nvl_busbw);
    c.nic_bytes = factor * bytes / g;
    c.nvlink_bytes = factor * bytes * (g - 1.0) / g;
  }
  c.time_s = lat + factor * bytes / busbw;
  return c;
}

}  // namespace trainsim::coll
