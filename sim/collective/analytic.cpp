#include "sim/collective/analytic.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sim/core/error.h"

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

const char* to_string(Algorithm a) {
  switch (a) {
    case Algorithm::kRing: return "ring";
    case Algorithm::kTree: return "tree";
    case Algorithm::kNvls: return "nvls";
  }
  return "?";
}

const char* to_string(Protocol p) {
  switch (p) {
    case Protocol::kLL: return "LL";
    case Protocol::kLL128: return "LL128";
    case Protocol::kSimple: return "Simple";
  }
  return "?";
}

namespace {

// The ranks on the group's least-populated server (a partly filled last server), at most `g`:
// every ring, tree or exchange across servers passes through its few NICs.
int least_per_node(const GroupShape& group, int g) {
  return group.min_per_node > 0 ? std::min(g, group.min_per_node) : g;
}

constexpr int kRing = static_cast<int>(Algorithm::kRing);
constexpr int kTree = static_cast<int>(Algorithm::kTree);
constexpr int kNvls = static_cast<int>(Algorithm::kNvls);
constexpr int kLL = static_cast<int>(Protocol::kLL);
constexpr int kLL128 = static_cast<int>(Protocol::kLL128);
constexpr int kSimple = static_cast<int>(Protocol::kSimple);

}  // namespace

// NCCL tuning.cc (v2.19–2.21) latency table, µs (network-models.md §4.2):
//            baseLat LL/LL128/Simple   hwLat NVLink            hwLat NET
//   Tree     6.8 / 14.0 / 0            0.6 / 1.25 / 28         5.0 / 8.5 / 28
//   Ring     6.6 / 14.0 / 8.4          0.6 / 1.9 / 3.4         2.7 / 4.0 / 14.0
//   NVLS     – / – / 0                 – / – / 23              – / – / 18
LinkModel::LinkModel() {
  auto set = [&](int a, int p, double base, double nvl, double net) {
    latency[a][p] = {base * 1e-6, nvl * 1e-6, net * 1e-6};
  };
  set(kTree, kLL, 6.8, 0.6, 5.0);
  set(kTree, kLL128, 14.0, 1.25, 8.5);
  set(kTree, kSimple, 0.0, 28.0, 28.0);
  set(kRing, kLL, 6.6, 0.6, 2.7);
  set(kRing, kLL128, 14.0, 1.9, 4.0);
  set(kRing, kSimple, 8.4, 3.4, 14.0);
  set(kNvls, kSimple, 0.0, 23.0, 18.0);
}

void LinkModel::set_ring_simple(double base_s, double nvlink_step_s, double net_step_s) {
  latency[kRing][kSimple] = {base_s, nvlink_step_s, net_step_s};
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

// Protocol bandwidth efficiency (NCCL tuning: LL ×1/4 for all-reduce or multi-node rings, else
// ×1/2 for its 4-of-8 data bytes; LL128 ×0.92, ×0.7 with one GPU per node; tree LL ×1/3.8).
double protocol_factor(Algorithm a, Protocol p, Kind k, const GroupShape& g) {
  switch (p) {
    case Protocol::kSimple: return 1.0;
    case Protocol::kLL128: return g.per_node == 1 && g.nodes > 1 ? 0.7 : 0.92;
    case Protocol::kLL:
      if (a == Algorithm::kTree) return 1.0 / 3.8;
      return (k == Kind::kAllReduce || g.nodes > 1) ? 0.25 : 0.5;
  }
  return 1.0;
}

struct Candidate {
  bool ok = false;
  Cost cost;
  // The time NCCL's own tuning model (src/graph/tuning.cc) gives the pair: latency plus bytes
  // over bandwidth. NCCL picks the pair with the least of it, whatever the kernel then really
  // takes (its model has no chunk pipeline), so the choice follows this and not cost.time_s.
  double tuner_time_s = 0;
};

Candidate ring(Kind k, double bytes, const GroupShape& group, const LinkModel& l, Protocol p) {
  Candidate c;
  const int n = group.ranks;
  const int g = std::max(1, std::min(group.per_node, n));
  const int nodes = std::max(1, group.nodes);
  const double factor = busbw_factor(k, n);
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
    default: return c;
  }
  net_steps = std::min(net_steps, steps);
  const PairLatency& L = l.latency[kRing][static_cast<int>(p)];
  const double lat = L.base_s + (steps - net_steps) * L.nvlink_step_s + net_steps * L.net_step_s;
  double busbw = 0;
  if (nodes == 1) {
    busbw = l.nvlink_busbw_Bps;
    c.cost.nvlink_bytes = factor * bytes;
  } else {
    // The rings cross each server boundary once: a server of g members feeds them through g
    // GPUs' NICs, the least-populated one through its own few.
    const int g_min = least_per_node(group, g);
    const double nic_busbw = g_min * l.nic_Bps_per_gpu / above_pod_slowdown(k, group, l);
    const double nvl_busbw =
        g > 1 ? g / (g - 1.0) * l.nvlink_busbw_Bps : std::numeric_limits<double>::infinity();
    busbw = std::min(nic_busbw, nvl_busbw);
    if (g_min == g) {
      c.cost.nic_bytes = factor * bytes / g;
      c.cost.nvlink_bytes = factor * bytes * (g - 1.0) / g;
    } else {
      // `nodes` of the ring's n edges cross servers: the average rank's share.
      c.cost.nic_bytes = factor * bytes * nodes / n;
      c.cost.nvlink_bytes = factor * bytes * (n - nodes) / static_cast<double>(n);
    }
  }
  busbw *= protocol_factor(Algorithm::kRing, p, k, group);
  c.cost.time_s = lat + factor * bytes / busbw;
  c.tuner_time_s = c.cost.time_s;
  c.ok = busbw > 0;
  return c;
}

// Double binary tree all-reduce: reduce up and broadcast down, pipelined, so its bus bandwidth is
// the ring's × 0.92 while its latency grows with log2(nodes); inside one server the tree is a
// chain through the g GPUs. NCCL's tuning model (src/graph/tuning.cc, v2.19–v2.24) turns the
// tree's bus bandwidth into algorithm bandwidth with × 1/2 (the ring's is × n/(2(n−1))), and
// prices LL128 on a tree at × 7/9 inside one server and × 120/128 across servers.
Candidate tree(Kind k, double bytes, const GroupShape& group, const LinkModel& l, Protocol p) {
  Candidate c;
  if (k != Kind::kAllReduce) return c;
  const Candidate r = ring(k, bytes, group, l, Protocol::kSimple);
  const int g = std::max(1, std::min(group.per_node, group.ranks));
  const int g_min = least_per_node(group, g);
  const double nic_busbw = group.nodes > 1
                               ? g_min * l.nic_Bps_per_gpu / above_pod_slowdown(k, group, l)
                               : std::numeric_limits<double>::infinity();
  const double nvl_busbw = group.nodes == 1 ? l.nvlink_busbw_Bps
                           : g > 1          ? g / (g - 1.0) * l.nvlink_busbw_Bps
                                            : std::numeric_limits<double>::infinity();
  const double proto = p == Protocol::kLL128 ? (group.nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0)
                                             : protocol_factor(Algorithm::kTree, p, k, group);
  const double busbw = 0.92 * std::min(nic_busbw, nvl_busbw) * proto;
  const PairLatency& L = l.latency[kTree][static_cast<int>(p)];
  const double lat =
      L.base_s + 2.0 * ((g - 1) * L.nvlink_step_s + std::log2(group.nodes) * L.net_step_s);
  c.cost = r.cost;  // same bytes per link type as the ring
  c.cost.time_s = lat + 2.0 * bytes / busbw;
  c.tuner_time_s = c.cost.time_s;
  c.ok = true;
  return c;
}

// NCCL's NVLS all-reduce kernel, as NCCL v2.19–v2.24 run it on one server (NVIDIA/nccl):
// - 16 CTAs (channels), whatever the size: NCCL_NVLS_NCHANNELS, src/transport/nvls.cc; the
//   channel tuning of src/enqueue.cc leaves NVLS's count alone.
// - Each CTA takes 1/16 of the buffer and walks it in loops of nHeads chunks (one per GPU of the
//   NVLS domain). The chunk starts at NCCL_NVLS_CHUNKSIZE = 128 KiB and shrinks with the message
//   (calcCollChunking, src/enqueue.cc): 64 KiB when the CTA's part is below 64·nHeads·C,
//   32 KiB below 8·nHeads·C, 16 KiB below 2·nHeads·C (on one server: 64 KiB below 1 GiB,
//   32 KiB below 64 MiB, 16 KiB below 8 MiB).
// - A loop goes through three warp groups linked by step FIFOs (src/device/all_reduce.h,
//   RunWorkColl<…, NCCL_ALGO_NVLS, NCCL_PROTO_SIMPLE>): scatter into the heads' buffers,
//   multimem reduce and broadcast through the switch, gather. It is a three-stage pipeline, so
//   L loops take L + 2 loop times: the first loop's scatter and the last loop's gather overlap
//   nothing. At 1 GiB the two extra loops are 3 % of the time, at 8 MiB half of it; this is the
//   slow rise of the published 8-GPU H100 curve (docs/network.md).
constexpr double kNvlsChannels = 16;
constexpr double kNvlsMaxChunkBytes = 128.0 * 1024;
constexpr double kNvlsMinChunkBytes = 16.0 * 1024;
constexpr int kNvlsPipelineStages = 3;
constexpr int kNvlsProfileRanks = 8;  // the profile's NVLS bus bandwidth is an 8-GPU run's

}  // namespace

double nvls_algbw(const LinkModel& l) {
  return l.nvls_busbw_Bps / busbw_factor(Kind::kAllReduce, kNvlsProfileRanks);
}

double nvls_chunk_bytes(double bytes, int heads) {
  const double per_cta = bytes / kNvlsChannels;
  double chunk = kNvlsMaxChunkBytes;
  for (const double times : {64.0, 8.0, 2.0}) {
    if (chunk > kNvlsMinChunkBytes && per_cta < times * heads * chunk) chunk /= 2;
  }
  return chunk;
}

double nvls_pipeline_fill_bytes(double bytes, int heads) {
  const double loop = kNvlsChannels * heads * nvls_chunk_bytes(bytes, heads);
  return (kNvlsPipelineStages - 1) * std::min(loop, bytes);
}

namespace {

// NVLS all-reduce: the NVSwitch reduces (NVLink SHARP); across servers NVLS_TREE adds a tree
// over the network, bounded by the NIC bandwidth. Simple protocol only. On one server the
// chunk pipeline's fill and drain (above) add to the bandwidth term; NVLS_TREE's own chunking
// across servers is not modelled.
//
// How many GPUs share the switch does not change what one GPU's links carry: for its 1/g of the
// buffer it pulls the reduced slice (g slices read by the switch, one returned), and for every
// slice it receives the multicast result, so each GPU moves about S in and S out whatever g is.
// The algorithm bandwidth S/t is therefore the same at 3, 4 or 8 GPUs, and NCCL's tuning model
// says so too: it turns NVLS bus bandwidth into algorithm bandwidth by a constant 5/6 whatever
// nRanks (src/graph/tuning.cc), where a ring's ratio is n/(2(n−1)). The profile's NVLS figure is
// the bus bandwidth of an 8-GPU nccl-tests run (DGX H100, docs/calibration.md), so the algorithm
// bandwidth is B_nvls · 8/14 at any g, and the bus bandwidth 2(g−1)/g of that: 411 GB/s at 4
// GPUs, not 480. NCCL v2.17–v2.27 enables NVLS only when the communicator has more than two GPUs
// on a server (`gpuCount <= 2` in ncclNvlsInit, src/transport/nvls.cc; 2.28 lowered it to one),
// so a TP-2 group or a group with two or fewer ranks per server runs a ring or tree.

Candidate nvls(Kind k, double bytes, const GroupShape& group, const LinkModel& l, Protocol p) {
  Candidate c;
  if (k != Kind::kAllReduce || l.nvls_busbw_Bps <= 0 || p != Protocol::kSimple) return c;
  const int g = std::max(1, std::min(group.per_node, group.ranks));
  if (g <= kNvlsMinGpusPerServer) return c;
  // Across servers the tree runs at the least-populated server's NICs, as the ring does (a
  // partly filled last server: 9 ranks on 8-GPU servers run at one NIC's pace, not eight).
  const int g_min = least_per_node(group, g);
  const double factor = busbw_factor(k, group.ranks);
  const PairLatency& L = l.latency[kNvls][kSimple];
  double lat = L.base_s + L.nvlink_step_s;
  // The switch's pace in the group's bus-bandwidth terms: factor · nvls_algbw, written as a ratio
  // of factors so that an 8-GPU group gets the profile's figure exactly.
  double busbw =
      l.nvls_busbw_Bps * (factor / busbw_factor(Kind::kAllReduce, kNvlsProfileRanks));
  if (group.nodes > 1) {
    busbw = std::min(busbw, g_min * l.nic_Bps_per_gpu / above_pod_slowdown(k, group, l));
    lat += 2.0 * std::log2(group.nodes) * L.net_step_s;
    c.cost.nic_bytes = factor * bytes / g_min;
  }
  c.cost.nvlink_bytes = factor * bytes * (group.nodes > 1 ? (g - 1.0) / g : 1.0);
  const double fill = group.nodes > 1 ? 0.0 : nvls_pipeline_fill_bytes(bytes, g);
  c.cost.time_s = lat + factor * (bytes + fill) / busbw;
  c.tuner_time_s = lat + factor * bytes / busbw;
  c.ok = true;
  return c;
}

Cost point_to_point(Kind k, double bytes, const GroupShape& group, const LinkModel& l) {
  Cost c;
  const int n = group.ranks;
  const int g = std::max(1, std::min(group.per_node, n));
  const int nodes = std::max(1, group.nodes);
  const double slow = above_pod_slowdown(k, group, l);
  const PairLatency& L = l.latency[kRing][kSimple];
  if (k == Kind::kSendRecv) {
    // One peer: over NVLink when it shares the server, else through the NIC.
    if (nodes == 1) {
      c.nvlink_bytes = bytes;
      c.time_s = L.base_s + L.nvlink_step_s + bytes / l.nvlink_busbw_Bps;
    } else {
      c.nic_bytes = bytes;
      const double bw = l.p2p_net_Bps > 0 ? std::min(l.nic_Bps_per_gpu, l.p2p_net_Bps)
                                          : l.nic_Bps_per_gpu;
      c.time_s = L.base_s + L.net_step_s + bytes * slow / bw;
    }
    return c;
  }
  // All-to-all: each rank sends S/n to every other: (g−1)·S/n stay in the server, (n−g)·S/n leave;
  // on a partly filled last server a rank has fewer server peers and sends (n − g_min)·S/n out,
  // which paces the exchange.
  const int g_min = least_per_node(group, g);
  const double intra = bytes * (g - 1) / n;
  const double inter = bytes * (n - g_min) / n;
  c.nvlink_bytes = intra;
  c.nic_bytes = inter;
  const double t_intra = intra > 0 ? intra / l.nvlink_busbw_Bps : 0.0;
  const double t_inter = inter > 0 ? inter * slow / l.nic_Bps_per_gpu : 0.0;
  // One network step per other server: a rank reaches a remote server's ranks through the GPU
  // on its rail, (n − g)/g steps on full servers. (Counted as (n − g_min)/g_min until
  // analytic-32, a partly filled last server with one rank paid n − 1 steps: 9 ranks on 8-GPU
  // servers 144 µs at 1 KiB, 16 ranks 46 µs.)
  const double lat = L.base_s + (g - 1) * L.nvlink_step_s + (nodes - 1) * L.net_step_s;
  c.time_s = lat + std::max(t_intra, t_inter);
  return c;
}

}  // namespace

Cost collective_cost(Kind k, double bytes, const GroupShape& group, const LinkModel& l,
                     const Choice& choice) {
  if (group.ranks <= 1 || bytes <= 0) return Cost{};
  if (k == Kind::kAllToAll || k == Kind::kSendRecv) {
    if ((choice.algorithm && *choice.algorithm != Algorithm::kRing) ||
        (choice.protocol && *choice.protocol != Protocol::kSimple)) {
      throw_input(std::string(to_string(k)) + " runs as point-to-point sends (Simple protocol); "
                  "no algorithm or protocol can be chosen for it",
                  {"", 0, "collectives.algorithm"});
    }
    return point_to_point(k, bytes, group, l);
  }
  if (choice.algorithm == Algorithm::kNvls && l.nvls_busbw_Bps <= 0) {
    throw_input("NVLS needs NVLink SHARP (NVSwitch multicast), which this GPU does not have",
                {"", 0, "collectives.algorithm"}, "use ring or tree");
  }
  if (choice.algorithm == Algorithm::kNvls && k == Kind::kAllReduce &&
      std::min(group.per_node, group.ranks) <= kNvlsMinGpusPerServer) {
    throw_input("NCCL runs NVLS only with more than " + std::to_string(kNvlsMinGpusPerServer) +
                    " of the communicator's GPUs on a server (ncclNvlsInit, v2.17 to v2.27); this "
                    "group has " + std::to_string(std::min(group.per_node, group.ranks)),
                {"", 0, "collectives.algorithm"}, "use ring or tree");
  }
  if (choice.algorithm && *choice.algorithm != Algorithm::kRing && k != Kind::kAllReduce) {
    throw_input(std::string(to_string(*choice.algorithm)) + " implements all_reduce only, not " +
                    to_string(k),
                {"", 0, "collectives.algorithm"}, "use ring");
  }
  Candidate best;
  for (Algorithm a : {Algorithm::kRing, Algorithm::kTree, Algorithm::kNvls}) {
    if (choice.algorithm && *choice.algorithm != a) continue;
    for (Protocol p : {Protocol::kLL, Protocol::kLL128, Protocol::kSimple}) {
      if (choice.protocol && *choice.protocol != p) continue;
      Candidate c = a == Algorithm::kRing   ? ring(k, bytes, group, l, p)
                    : a == Algorithm::kTree ? tree(k, bytes, group, l, p)
                                            : nvls(k, bytes, group, l, p);
      if (!c.ok) continue;
      c.cost.algorithm = a;
      c.cost.protocol = p;
      if (!best.ok || c.tuner_time_s < best.tuner_time_s) best = c;
    }
  }
  if (!best.ok) {
    throw_input(std::string("no ") + (choice.algorithm ? to_string(*choice.algorithm) : "") +
                    (choice.protocol ? std::string(" ") + to_string(*choice.protocol) : "") +
                    " implementation of " + to_string(k) + " for this group",
                {"", 0, "collectives.protocol"},
                "NVLS runs the Simple protocol only");
  }
  return best.cost;
}

}  // namespace trainsim::coll
