// Flow fidelity for collectives: a collective becomes a few long-lived fluid flows on the
// cluster graph, each QP of each channel on its own ECMP-hashed path, solved by the max-min flow
// network (sim/network); the protocol's step latencies are added on top (DESIGN.md §4).
//
// Mapping (network-models.md §4.4–4.5): NCCL runs C channels (two per NIC across servers, of the
// server holding the fewest of the group's ranks: every rank runs the smallest count any rank's
// topology search found), each an independent ring. Across servers, ring c crosses from server k to server k+1 between the
// GPUs of local index r = c mod g (rail r), and inside a server it runs through the g local GPUs
// as a chain starting at r; so every NIC carries factor·S/g and NVLink (g−1)/g·factor·S, the
// hierarchical volumes of the analytic model. With one rank per server (rail / spread
// placements) the ring runs rank to rank. All-to-all is a flow per ordered pair; send/recv one
// connection. Every connection is split over `qps` queue pairs, each hashed on its own.
//
// Rings in lock step (flow fidelity, program-6). An NCCL ring forwards what it received: rank i
// sends step s of a chunk only after step s−1 arrived from rank i−1 (reduce or copy, then send),
// and a sender may run at most NCCL_STEPS = 8 slots ahead of its receiver (nccl
// src/include/device.h; the Simple protocol's 4 MiB buffer per channel and peer, NCCL_BUFFSIZE).
// So every edge of a channel's ring carries its bytes at the rate of the slowest edge, give or
// take one buffer, and an edge on idle links cannot finish early and hand its bandwidth to other
// traffic. At flow fidelity a channel's queue pair q is therefore one flow whose path is all its
// edges' routed paths back to back (each edge routed with the label it would have alone, so the
// links are the same), a link crossed by k edges counting k times in the max-min constraints
// (net::MaxMinSolver). The queue pairs of one channel stay separate flows (each on its own ECMP
// path). The packet level keeps one flow per edge: its packets need a hop-by-hop path.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/collective/analytic.h"
#include "sim/network/congestion.h"
#include "sim/network/packet_network.h"
#include "topology/graph.h"
#include "topology/routing.h"

namespace trainsim::coll {

struct FlowCollectiveOptions {
  int channels = 0;                // rings; 0 = NCCL's choice (2 per NIC of the least-populated
                                   // server across servers, else g)
  std::uint64_t seed = 1;          // the Simulation's seed
  net::NetworkConfig network;      // congestion control
  /// Packet level instead of fluid flows (net::PacketNetwork on the same links, paths and
  /// queue pairs, with the links' latencies): `ideal`, `dcqcn`, `swift` or `megascale`.
  bool packet = false;
  net::PacketConfig packet_config;
};

struct FlowCollectiveResult {
  Cost cost;              // time = latency + makespan; bytes per rank as in the analytic model
  double latency_s = 0;   // the protocol's base and per-step latencies
  double makespan_s = 0;  // until the last flow finished
  std::int64_t flows = 0;
  int channels = 0;
  bool routed = true;     // false when some pair had no path (failures)
};

/// Link capacities the flows see: NVLink scaled to the profile's measured ring bus bandwidth,
/// NIC links to its achieved fraction of line rate; switch links at line rate.
std::vector<double> calibrated_capacities(const topo::ClusterGraph& graph, double nvlink_factor,
                                          double nic_factor);

/// Links where only one sender's traffic is scheduled: NVLink ports, PCIe hops and NIC egress
/// (kNicUp). Congestion control acts at switch egress queues, where flows from many senders
/// meet and ECN marks; at these links the NIC or the GPU's copy engine schedules its own queue
/// pairs (and NVLink runs no DCQCN at all), so the flow level's contention derating η(n) does
/// not apply there (net::FlowNetworkOptions::sender_links).
std::vector<topo::LinkId> sender_links(const topo::ClusterGraph& graph);
/// The NICs' egress links (kNicUp): their queue is the NIC's send queue, in GPU or host memory
/// (net::PacketNetworkOptions::host_queue_links).
std::vector<topo::LinkId> nic_egress_links(const topo::ClusterGraph& graph);

/// Links whose max-min constraint is implied by another link on every path through them, so
/// that a flow solver may leave them out of its paths without changing any rate (1 = implied):
/// a PCIe hop GPU → NIC when the NIC has exactly one PCIe link each way (one GPU) and one uplink
/// — a path entering the NIC from its GPU can only leave through the uplink (going back would
/// revisit the GPU), so every flow on the hop is on the uplink too — and its capacity is at least
/// the uplink's; likewise NIC → GPU behind the NIC's one downlink. The feasible set, hence the
/// max-min allocation, is unchanged. Under congestion control too, when the PCIe hops and the
/// NIC's egress are sender links (not derated; sender_links): the GPU → NIC hop is then bound
/// like the underated uplink, and the NIC → GPU hop carries exactly the downlink's flows, whose
/// derated capacity η(n)·C is at most C. Dropping two of the eight hops of a cross-pod path
/// saves a quarter of the solver's work.
std::vector<std::uint8_t> implied_links(const topo::ClusterGraph& graph,
                                        std::span<const double> capacities);

/// One collective of a batch that runs concurrently on the fabric.
struct FlowCollectiveRequest {
  Kind kind = Kind::kAllReduce;
  double bytes = 0;
  std::vector<topo::GpuId> ranks;  // in ring order
  // The request is one of `pieces` slices of one collective of pieces × bytes (a TP-overlap
  // chunk): NCCL's protocol is the whole collective's and the slice takes 1/pieces of its
  // latency, as the closed form prices it; its flows carry the slice's bytes.
  int pieces = 1;
};

/// One connection of a collective: `bytes` from `src` to `dst`, split over the router's queue
/// pairs `qp_base·Q … qp_base·Q + Q − 1` (Q = qps_per_connection).
struct FlowConnection {
  topo::GpuId src = 0, dst = 0;
  double bytes = 0;
  int qp_base = 0;
};

/// A collective's connections, latency and protocol before any flow starts (what
/// collective_flow_batch runs, and what the Program executor starts on its shared network).
struct CollectiveFlows {
  FlowCollectiveResult result;  // latency_s, cost (analytic ring choice), channels
  std::vector<FlowConnection> conns;
  double wire = 1.0;  // bytes on the wire per payload byte (LL and LL128 carry flags)
  double flow_cap_Bps = 0;  // a connection's rate bound (point-to-point NCCL channels); 0 = none
  /// Ring collectives: `conns` hold each channel's ring edges back to back (the same qp_base c
  /// and the same bytes), so that route_collective_flows can run a channel in lock step.
  bool ring = false;
};

/// Plans the flows of one collective (`channels` 0 = NCCL's choice).
CollectiveFlows plan_collective_flows(const FlowCollectiveRequest& req,
                                      const topo::ClusterGraph& graph, const LinkModel& links,
                                      const Choice& choice, int channels);

/// Collectives' flows on their routed paths, ready to start: flow f carries bytes[f] over
/// links[offset[f], offset[f+1]); net_links/net_offset are the same paths without the links the
/// caller marked implied (what a flow solver needs, see implied_links).
struct RoutedFlows {
  double latency_s = 0;  // the largest latency of the collectives routed into it
  std::vector<std::int64_t> bytes;
  std::vector<std::uint32_t> offset{0};
  std::vector<topo::LinkId> links;
  std::vector<std::uint32_t> net_offset{0};
  std::vector<topo::LinkId> net_links;
  /// Per flow rate bounds (empty: none has one).
  std::vector<double> cap_Bps;
  double cap_of(std::size_t f) const { return cap_Bps.empty() ? net::kUnlimited : cap_Bps[f]; }
  /// Spray mode only (empty otherwise): flow f's equal-cost paths are spray_offset entries
  /// spray_first[f] .. spray_first[f+1], path j being spray_links[spray_offset[j],
  /// spray_offset[j+1]); links/net_links then hold its first path.
  std::vector<std::uint32_t> spray_first;
  std::vector<std::uint32_t> spray_offset;
  std::vector<topo::LinkId> spray_links;
  bool sprayed() const { return !spray_first.empty(); }
  /// Flow f's paths as a FlowSpec takes them (spray_offset span of paths + 1 entries).
  std::span<const std::uint32_t> spray_offsets_of(std::size_t f) const {
    if (spray_first.empty()) return {};
    return std::span<const std::uint32_t>(spray_offset)
        .subspan(spray_first[f], spray_first[f + 1] - spray_first[f] + 1);
  }
  /// Flow f as the networks take it (spans into this object), on its whole path or, with
  /// `solver_path`, on net_links (the implied links left out).
  net::FlowSpec spec(std::size_t f, bool solver_path, std::uint64_t tag) const {
    const std::vector<std::uint32_t>& off = solver_path ? net_offset : offset;
    const std::vector<topo::LinkId>& path = solver_path ? net_links : links;
    net::FlowSpec s;
    s.path = std::span<const topo::LinkId>(path.data() + off[f], off[f + 1] - off[f]);
    s.bytes = bytes[f];
    s.cap_Bps = cap_of(f);
    s.tag = tag;
    s.spray_offset = spray_offsets_of(f);
    s.spray_links = spray_links;
    return s;
  }
};

/// Most equal-cost paths a sprayed flow is spread over at packet fidelity (a pair with more is
/// refused: the packet level keeps each flow's paths).
inline constexpr std::size_t kMaxSprayPaths = 4096;

/// With `lockstep` (flow fidelity), a ring collective's channel becomes one flow per queue pair
/// over all its edges' paths (above); all-to-all and send/recv, and spray mode, are unchanged.
/// Turns a planned collective into flows and appends them to `out`: every connection's bytes on
/// the wire (bytes · wire, rounded) are split over its Q = qps_per_connection queue pairs, the
/// first `total mod Q` taking one byte more, empty shares dropped; queue pair q of a connection
/// with qp_base b is routed as flow label b·Q + q, so each hashes onto its own ECMP path.
/// `implied` (one entry per link, or empty for none) marks links left out of net_links. The one
/// routine both `trainsim collective --fidelity flow` and the Program executor's flow backend
/// split and route collectives with. Throws trainsim::Error(kInfeasible) when a pair of GPUs
/// has no path. Under network.routing.mode spray (packet fidelity only) every flow also gets
/// all its equal-cost paths (spray_*), each queue pair's share spread over them packet by packet.
void route_collective_flows(const CollectiveFlows& plan, topo::Router& router,
                            std::span<const std::uint8_t> implied, RoutedFlows& out,
                            bool lockstep = false);

/// Runs several collectives at once (e.g. the 8 DP rings of a server's GPUs), sharing the
/// fabric; one result per request, in order.
std::vector<FlowCollectiveResult> collective_flow_batch(
    std::span<const FlowCollectiveRequest> requests, const topo::ClusterGraph& graph,
    topo::Router& router, std::span<const double> capacities, const LinkModel& links,
    const Choice& choice, const FlowCollectiveOptions& options);

/// Runs one collective over `ranks` (GPU ids in ring order). Ring algorithm only (tree and NVLS
/// are analytic-only; asking for them is an input error). Throws trainsim::Error(kInfeasible) when
/// a pair of ranks has no path.
FlowCollectiveResult collective_flow(Kind kind, double bytes, std::span<const topo::GpuId> ranks,
                                     const topo::ClusterGraph& graph, topo::Router& router,
                                     std::span<const double> capacities, const LinkModel& links,
                                     const Choice& choice, const FlowCollectiveOptions& options);

}  // namespace trainsim::coll
