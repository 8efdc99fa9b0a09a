// Packet-level network (issue 16, first part): the same links and paths as the flow level
// (flow_network.h), carried packet by packet so that queues, ECN marks and the DCQCN rate
// machine happen rather than being modelled.
//
// What a packet does (docs/network.md, "Packet level"):
//   * a flow (one queue pair) is cut into packets of `mtu_bytes`; its sender's first link (the
//     NIC's egress or an NVLink port) takes packets from the flows that start there in turn,
//     each flow paced at its congestion-control rate (line rate without CC: RoCE has no slow
//     start);
//   * every link is an output-queued port: a FIFO in front of a serializer of the link's
//     capacity, then the link's propagation latency; a packet is forwarded once it has fully
//     arrived (store and forward);
//   * at enqueue, a switch port marks ECN with the RED profile of DCQCN: never below `kmin_bytes`
//     of queue, with probability `pmax`·(q − kmin)/(kmax − kmin) up to `kmax_bytes`, always
//     above; a mark stays on the packet to its receiver; a sender's own port (NIC egress, NVLink,
//     PCIe: PacketNetworkOptions::sender_links) never marks;
//   * PFC (IEEE 802.1Qbb), lossless: each switch counts, per ingress link, the bytes that came in
//     over it and still wait in any of its queues; above `pfc_xoff_bytes` it sends PAUSE up that
//     link (arriving one link latency later: the upstream port then starts no new packet), below
//     `pfc_xon_bytes` RESUME. Pauses spread upstream hop by hop and block every flow behind the
//     paused port (head-of-line blocking);
//   * under `dcqcn`, the receiver (notification point) answers marked packets with at most one
//     CNP per `cnp_interval` per flow, and the sender (reaction point) runs the rate machine of
//     Zhu et al., SIGCOMM'15 (cut on CNP, α update, fast recovery / additive / hyper increase on
//     the timer and byte counter).
//   * under `swift` and `megascale` (window control), the receiver acknowledges every packet it
//     accepts; the ACK takes the reverse path's latency and carries the packet's round-trip delay
//     and its ECN mark. The sender keeps at most `cwnd` bytes unacknowledged and runs Swift's
//     AIMD (Kumar et al., SIGCOMM'20, Algorithm 1): below the target delay (base + hop scaling +
//     flow scaling) the window grows by ai packets per window; above it shrinks by
//     β·(delay − target)/delay, at most max_mdf and at most once per RTT; under one packet it
//     paces. MegaScale's hybrid (Jiang et al., NSDI'24 §3.6: Swift's RTT with DCQCN's ECN
//     response, no equations published) adds a cut by max_mdf, at most once per RTT, on an
//     ACK that echoes an ECN mark;
//   * loss and go-back-N (RoCE RC): a link taken down (`set_link_up`, `schedule_link_flap`) drops
//     what it carries and what reaches it; the receiver accepts only the next byte it expects,
//     drops the rest and answers a gap with one NAK, on which the sender goes back to it; a
//     sender that sees no progress for an RTO (4.096 µs · 2^network.retransmit.timeout) goes
//     back too, and gives up after network.retransmit.retry_count RTOs in a row (flow_failed).
//     An RTO shorter than the queueing delay retransmits packets still in flight (spurious
//     retransmissions, counted); a long one stalls a flow for that long after a flap.
//   * packet spraying (network.routing.mode spray): a flow given its equal-cost paths sends
//     each packet down one of them drawn uniformly at random (random packet spraying, Dixit et
//     al., INFOCOM'13), from the Simulation's "packet/spray" stream; its receiver places
//     packets wherever they land (direct data placement, as NICs that support adaptive routing
//     do) and counts those that came ahead of a gap as reordered; it sends no NAK for a gap
//     (reordering is expected), so a lost packet is recovered by the RTO;
//   * priority classes (network.packet.priority_classes): a queue per class at every port,
//     served in strict priority, with ECN and PFC per class (one class by default: a PAUSE then
//     stops the whole port).
//     Between classes, ETS (network.packet.scheduling: ets) as deficit round robin instead.
// Not (yet) modelled, said where it matters: buffers are never exceeded by design of the thresholds (the time any port spends above
// `buffer_bytes` is reported, so too small a headroom shows), CNPs and NAKs take the reverse
// path's propagation latency without queueing (so do Swift's ACKs).
//
// Deterministic: events follow the Simulation's order and ECN draws come from the
// Simulation's "packet/ecn" random stream.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "sim/core/observer.h"
#include "sim/core/rng.h"
#include "sim/core/simulation.h"
#include "sim/core/units.h"
#include "sim/network/congestion.h"
#include "sim/network/flow_network.h"
#include "topology/ids.h"

namespace trainsim::net {

/// network.packet.*: the packet level's own parameters.
struct PacketConfig {
  double mtu_bytes = 4096;  // RoCE payload MTU (the flow level's swift/megascale mtu_bytes too)
  /// Buffer per ingress link of a switch (the bytes that came in over it and still wait in its
  /// queues) [D]. PFC pauses the link before it fills; the engine never drops and reports the
  /// time any ingress spent above it (too small a headroom, or PFC off).
  double buffer_bytes = 1 << 20;
  /// PFC thresholds per ingress link [D]: XOFF leaves a headroom of buffer − xoff for the bytes
  /// in flight while the PAUSE travels (2 × link latency × rate + a packet each way); XON two
  /// packets below XOFF. `pfc` false: no pauses (the buffer then only bounds nothing).
  bool pfc = true;
  double pfc_xoff_bytes = 512 * 1024;
  double pfc_xon_bytes = 512 * 1024 - 2 * 4096;
  /// ECN marking (RED) thresholds of DCQCN, Zhu et al. SIGCOMM'15 §5 (Kmin 5 KB, Kmax 200 KB,
  /// Pmax 1 %, for 40 Gb/s ports).
  double kmin_bytes = 5e3;
  double kmax_bytes = 200e3;
  double pmax = 0.01;
  /// DCQCN's remaining constants (Zhu et al. §3 and §5): g, the α timer, the NP's CNP interval
  /// and the byte counter; T, F, R_AI and R_HAI are the flow level's DcqcnConfig.
  double dcqcn_g = 1.0 / 256;
  TimePs alpha_timer = TimePs::from_us(55);
  TimePs cnp_interval = TimePs::from_us(50);
  double byte_counter_bytes = 10e6;
  /// true (the paper): every CNP sets the target rate to the current rate. false (ConnectX's
  /// clamp_tgt_rate 0 with clamp_tgt_rate_after_time_inc 1): only the first CNP after an
  /// increase event does; back-to-back cuts keep the older, higher target.
  bool dcqcn_clamp_target_always = true;
  /// Swift (Kumar et al., SIGCOMM'20 Algorithm 1; `swift` and `megascale`). The base target
  /// delay is the flow level's network.swift.base_rtt (network.megascale.base_rtt): the RTT the
  /// algorithm holds the fabric at, which the flow level's window lag uses too; ai likewise.
  /// The constants below are Broadcom csg-htsim's Swift defaults (sim/swift.cpp, marked there
  /// as guesses; the paper gives none) [D]: β 0.8, max_mdf 0.5, flow scaling over 0.1–100
  /// packets with a range of 5 × the base target. The hop scaling h is what one more switch adds
  /// to this simulator's unloaded RTT [D]: two forwarding latencies of 0.6 µs
  /// (topology/hardware.h) and a 4 KB serialization at 200 Gb/s, 0.16 µs.
  double swift_beta = 0.8;
  double swift_max_mdf = 0.5;
  TimePs swift_hop_scale = TimePs::from_ns(1360);
  double swift_fs_range = 5;  // × the base target
  double swift_fs_min_cwnd = 0.1;   // packets
  double swift_fs_max_cwnd = 100;   // packets
  double swift_min_cwnd = 0.001;    // packets (below one packet the sender paces)
  double swift_max_cwnd = 1000;     // packets
  /// Priority classes (IEEE 802.1Q: up to 8 per port), 1 = one class for all traffic. A flow's
  /// class is FlowSpec::priority; every port keeps one queue per class and serves them in strict
  /// priority (class 0 first), marks ECN on the class's own queue, and PFC counts and pauses per
  /// ingress link and class, so a PAUSE stops only that class on the link (802.1Qbb). The
  /// buffer stays shared by all classes of an ingress link.
  int priority_classes = 1;
  /// How the executor puts traffic into classes (sim/exec/flow_backend.cpp): all in class 0; by
  /// job (job i in class i, e.g. a production job above a best-effort one); or by parallelism
  /// dimension (TP, CP, EP, PP, DP in classes 0, 1, 2, 3, 4: the latency-critical collectives
  /// of the layer above the DP reduction that overlaps compute). Classes beyond the last share
  /// it.
  enum class PriorityBy { kNone, kJob, kDimension };
  PriorityBy priority_by = PriorityBy::kNone;
  /// Service between a switch port's classes: strict priority, or ETS (IEEE 802.1Qaz) as
  /// deficit round robin (Shreedhar & Varghese, SIGCOMM'95) with `class_weights` (quanta in the weights' ratio,
  /// the lightest class's one packet per turn): a backlogged class gets its weight's share of the link, and
  /// what an idle class leaves goes to the others. A NIC's own flows take turns regardless.
  enum class Scheduling { kStrict, kEts };
  Scheduling scheduling = Scheduling::kStrict;
  std::array<double, 8> class_weights{1, 1, 1, 1, 1, 1, 1, 1};
};

/// Most priority classes a port has (IEEE 802.1Q's eight).
inline constexpr int kMaxPriorityClasses = 8;

/// Throws trainsim::Error (input) naming the `network.packet.*` key of an impossible
/// configuration: an MTU outside 64 B–64 KiB, a buffer smaller than one packet, XOFF outside
/// [one packet, buffer], XON above XOFF, Kmin > Kmax, Pmax outside [0, 1], DCQCN's g, timers
/// or byte counter not positive, Swift's β, max_mdf or window bounds out of range.
void validate(const PacketConfig& config);

struct PacketNetworkOptions {
  NetworkConfig config;  // congestion_control and the DCQCN, Swift and MegaScale parameters
  PacketConfig packet;
  /// Ports that never mark ECN: where only one sender's traffic is queued (a NIC's egress, an
  /// NVLink port, a PCIe hop: coll::sender_links). RED marking is a switch egress queue's
  /// (DCQCN's congestion point, Zhu et al. SIGCOMM'15 §3.1); NVLink runs no ECN at all. Every
  /// other port marks.
  std::vector<topo::LinkId> sender_links;
  /// Ports whose queue is a NIC's send queue (a NIC's egress: coll::nic_egress_links): what waits
  /// there is still in GPU or host memory, read by the NIC at its line rate, not in a switch
  /// buffer. It holds its GPU's queue pairs back as before (the PCIe hop's pause stands for the
  /// NIC reading no faster than it sends), but those are not counted as PFC pauses or paused
  /// time, the queue is not a switch's deepest queue and counts toward no buffer (several queue
  /// pairs of one GPU, each paced at line rate, read as 80,544 PFC pauses and a 528 KB deepest
  /// queue on a run whose traffic met no switch queue).
  std::vector<topo::LinkId> host_queue_links;
};

struct PacketNetworkStats {
  std::int64_t flows_started = 0;
  std::int64_t flows_done = 0;
  std::int64_t bytes_started = 0;
  std::int64_t bytes_delivered = 0;
  std::int64_t packets = 0;        // packets sent by the flows
  std::int64_t transmissions = 0;  // packet × link serializations
  std::int64_t ecn_marks = 0;      // packets an ECN-marking port marked, each counted once
  std::int64_t cnps = 0;
  std::int64_t rate_cuts = 0;      // DCQCN cuts (one per CNP that reached an active flow)
  std::int64_t acks = 0;           // Swift / MegaScale ACKs
  std::int64_t delay_cuts = 0;     // window cuts on a delay above the target
  std::int64_t ecn_cuts = 0;       // MegaScale's window cuts on an ECN echo
  double max_queue_bytes = 0;      // largest queue in front of any port
  double time_above_buffer_s = 0;  // Σ over ingress links of the time their bytes waiting in the
                                   // switch exceeded buffer_bytes (data a real switch would drop)
  std::int64_t pauses = 0;         // PAUSE frames sent
  std::int64_t dropped = 0;        // packets lost on a down link
  std::int64_t out_of_order = 0;   // packets the receiver dropped (a gap before them, or duplicates)
  std::int64_t reordered = 0;      // sprayed packets accepted ahead of a gap (placed directly)
  std::int64_t sprayed_flows = 0;  // flows whose packets were spread over more than one path
  std::int64_t naks = 0;
  std::int64_t timeouts = 0;       // RTOs that fired with no progress
  std::int64_t retransmitted_bytes = 0;  // bytes sent again after going back
  std::int64_t flows_failed = 0;
  double paused_s = 0;             // Σ over ports of the time they were paused
  std::int64_t packets_in_flight_max = 0;
};

class PacketNetwork final : public Component, public EventTarget {
 public:
  /// `capacity_Bps` and `latency` are indexed by topo::LinkId. Throws trainsim::Error (input)
  /// naming the `network.packet.*` key of an impossible configuration.
  PacketNetwork(Simulation& sim, std::vector<double> capacity_Bps, std::vector<TimePs> latency,
                PacketNetworkOptions options = {});

  /// Starts a flow now: `spec.path` from its sender's link to its receiver's; `spec.cap_Bps`
  /// bounds its rate (the NIC line rate), else the first link's capacity does.
  FlowId start_flow(const FlowSpec& spec);

  /// A flow's last byte reached its receiver (FlowDone.end); `bytes` is its size.
  Signal<FlowDone>& flow_done() { return flow_done_; }
  /// A flow gave up after retry_count RTOs without progress.
  Signal<FlowFailed>& flow_failed() { return flow_failed_; }

  /// Takes link `l` down (it drops what it carries and what reaches it) or up again now.
  void set_link_up(topo::LinkId l, bool up);
  /// Down at `down_at`, up again `duration` later.
  void schedule_link_flap(topo::LinkId l, TimePs down_at, TimePs duration);

  const PacketNetworkStats& stats() const { return stats_; }
  /// A flow's current sending rate (bytes/s): its DCQCN rate, or its line rate.
  double rate_Bps(FlowId f) const { return flows_[static_cast<std::size_t>(f)].rate; }
  /// A flow's congestion window (bytes) under `swift` or `megascale`; 0 otherwise.
  double cwnd_bytes(FlowId f) const { return flows_[static_cast<std::size_t>(f)].cwnd; }
  /// PAUSE frames the switch at the far end of link `l` has sent up it.
  std::int64_t pauses_on(topo::LinkId l) const { return ports_[static_cast<std::size_t>(l)].pauses; }
  /// The queue in front of link `l` now, bytes.
  double queue_bytes(topo::LinkId l) const { return ports_[static_cast<std::size_t>(l)].queued; }

 private:
  struct Packet {
    std::int32_t flow = -1;
    std::int32_t hop = 0;  // index in the flow's path of the link it is on
    std::int32_t bytes = 0;
    std::int32_t ingress = -1;  // the link it came in over, while it waits in a switch
    bool ecn = false;
    std::int64_t offset = 0;    // its first byte in the flow (the PSN); an ACK's cumulative byte
    TimePs sent_at;             // when its sender put it on the first link
    std::int32_t route = -1;    // sprayed: the index of its path among the flow's; -1: `path`
    bool ecn_counted = false;   // in stats().ecn_marks already
  };
  struct Flow {
    std::vector<topo::LinkId> path;
    // Spraying: the equal-cost paths (path k = spray_links[spray_offset[k], spray_offset[k+1]))
    // and, at the receiver, which packets (offset / MTU) arrived ahead of `received`.
    std::vector<topo::LinkId> spray_links;
    std::vector<std::uint32_t> spray_offset;
    std::vector<std::uint8_t> placed;
    std::int64_t placed_bytes = 0;  // bytes placed beyond `received`
    int cls = 0;  // priority class
    std::int64_t bytes = 0, sent = 0, received = 0;
    std::uint64_t tag = 0;
    TimePs start, next_send, last_cnp, reverse_latency;
    double line = 0, rate = 0;
    bool active = false;
    bool in_sources = false;  // listed at its first link
    std::int64_t highest = 0;  // furthest byte ever sent (what is below it again is a retransmission)
    // go-back-N
    bool nak_sent = false;
    TimePs last_progress;
    int timeouts = 0;
    EventHandle rto_event;
    // DCQCN reaction point
    double target = 0, alpha = 1.0;
    int timer_count = 0, byte_count = 0;
    double bytes_since_increase = 0;
    bool cnp_since_alpha = false;
    bool increased_since_cut = false;  // an increase event since the last CNP cut
    EventHandle increase_event;
    // Swift / MegaScale window
    double cwnd = 0;
    std::int64_t acked = 0;
    TimePs rtt, last_decrease, base_target;
  };
  struct Port {
    std::vector<std::deque<std::int32_t>> fifos;  // one per priority class, class 0 first
    double queued = 0;                            // all classes
    std::array<double, kMaxPriorityClasses> class_queued{};
    bool busy = false;
    std::int32_t current = -1;
    TimePs above_since = TimePs::never();  // as an ingress link: over buffer_bytes since
    std::vector<std::int32_t> sources;  // flows whose first link this is
    std::size_t next_source = 0;
    bool wake_pending = false;
    std::uint8_t paused = 0;   // PFC: classes (bit c) the port downstream paused on this link
    std::array<TimePs, kMaxPriorityClasses> paused_since{};
    double ingress_bytes = 0;  // bytes that came in over this link and wait downstream (buffer)
    std::array<double, kMaxPriorityClasses> ingress_class{};  // ... per class (PFC)
    std::uint8_t pause_sent = 0;  // classes the downstream switch has paused on this link
    // ETS (deficit round robin): whose turn it is, whether its quantum was added, the deficits.
    std::uint8_t turn = 0;
    bool turn_started = false;
    std::array<double, kMaxPriorityClasses> deficit{};
    std::int64_t pauses = 0;   // ... how many times
    bool up = true;
    bool marks = true;  // a switch egress queue that marks ECN (not a sender link)
    bool host_queue = false;  // a NIC's send queue (PacketNetworkOptions::host_queue_links)
    bool host_side = false;   // held back by a NIC's send queue (its pauses are not PFC's)
  };

  void on_event(std::uint64_t tag) override;
  /// The links packet `p` of flow `fl` travels: its sprayed path or the flow's path.
  std::span<const topo::LinkId> route_of(const Flow& fl, const Packet& p) const;
  void serve(topo::LinkId l);
  void arrive(std::int32_t pk);
  void enqueue(topo::LinkId l, std::int32_t pk);
  void deliver(std::int32_t pk);
  void answer(std::int32_t pk, bool ecn, Flow& fl);
  std::int32_t new_packet(std::int32_t flow, std::int32_t bytes);
  void on_cnp(std::int32_t f);
  void left_queue(const Packet& p);
  void go_back(std::int32_t f);
  void drop(std::int32_t pk);
  void increase(Flow& fl);
  void on_ack(std::int32_t pk);
  void cut_window(Flow& fl, double factor);
  TimePs pacing_gap(const Flow& fl, std::int32_t bytes) const;
  bool dcqcn() const { return cc_ == CongestionControl::kDcqcn; }
  bool windowed() const {
    return cc_ == CongestionControl::kSwift || cc_ == CongestionControl::kMegaScale;
  }

  Simulation& sim_;
  std::vector<double> capacity_;
  std::vector<TimePs> latency_;
  CongestionControl cc_;
  DcqcnConfig dc_;
  PacketConfig pc_;
  TimePs swift_base_;     // network.swift.base_rtt or network.megascale.base_rtt
  double swift_ai_ = 1;   // ... additive_increase (packets per window)
  double fs_alpha_ = 0, fs_beta_ = 0;  // flow scaling: α/√cwnd + β, seconds
  std::vector<Flow> flows_;
  std::vector<Port> ports_;
  std::array<double, kMaxPriorityClasses> quantum_{};  // ETS: bytes per class turn
  std::vector<Packet> packets_;
  std::vector<std::int32_t> free_packets_;
  std::int64_t in_flight_ = 0;
  Rng ecn_rng_;
  Rng spray_rng_;
  PacketNetworkStats stats_;
  Signal<FlowDone> flow_done_;
  Signal<FlowFailed> flow_failed_;
  TimePs rto_;
  int retry_count_ = 7;
};

}  // namespace trainsim::net
