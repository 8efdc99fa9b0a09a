// The packet-level network (packet_network.h).
#include "sim/network/packet_network.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "sim/core/error.h"

namespace trainsim::net {
namespace {

// Event tags: the kind in the top byte, an index below.
constexpr std::uint64_t kKindShift = 56;
enum Kind : std::uint64_t {
  kTxDone = 1, kArrive, kWake, kCnp, kAlpha, kIncrease, kPause, kResume, kNak, kRto, kDown, kUp,
  kAck
};
std::uint64_t tag_of(Kind k, std::int64_t index) {
  return (static_cast<std::uint64_t>(k) << kKindShift) | static_cast<std::uint64_t>(index);
}
// A PAUSE or RESUME names a link and a priority class.
std::int64_t pause_index(std::int64_t link, int cls) {
  return link * kMaxPriorityClasses + cls;
}

// Serialization time of `bytes` at `Bps`, rounded up to the picosecond.
TimePs serialize(double bytes, double Bps) {
  return TimePs{static_cast<std::int64_t>(std::ceil(bytes / Bps * 1e12 - 1e-6))};
}

void check(bool ok, const std::string& key, const std::string& why) {
  if (!ok) throw_input(why, {"", 0, key});
}

}  // namespace

void validate(const PacketConfig& p) {
  check(std::isfinite(p.mtu_bytes) && p.mtu_bytes >= 64 && p.mtu_bytes <= 65536,
        "network.packet.mtu_bytes", "the MTU must be 64 B to 64 KiB");
  check(std::isfinite(p.buffer_bytes) && p.buffer_bytes >= p.mtu_bytes,
        "network.packet.buffer_bytes", "a port's buffer must hold at least one packet (mtu_bytes)");
  check(!p.pfc || (std::isfinite(p.pfc_xoff_bytes) && p.pfc_xoff_bytes >= p.mtu_bytes &&
                   p.pfc_xoff_bytes <= p.buffer_bytes),
        "network.packet.pfc_xoff_bytes",
        "PFC's XOFF threshold must be between one packet and the buffer");
  check(!p.pfc || (std::isfinite(p.pfc_xon_bytes) && p.pfc_xon_bytes >= 0 &&
                   p.pfc_xon_bytes <= p.pfc_xoff_bytes),
        "network.packet.pfc_xon_bytes", "PFC's XON threshold must not be above XOFF");
  check(std::isfinite(p.kmin_bytes) && p.kmin_bytes >= 0, "network.packet.kmin_bytes",
        "the ECN threshold Kmin must be a size of 0 bytes or more");
  check(std::isfinite(p.kmax_bytes) && p.kmax_bytes >= p.kmin_bytes,
        "network.packet.kmax_bytes", "the ECN threshold Kmax must not be below Kmin");
  check(std::isfinite(p.pmax) && p.pmax >= 0 && p.pmax <= 1, "network.packet.pmax",
        "the ECN marking probability Pmax must be between 0 and 1");
  check(std::isfinite(p.dcqcn_g) && p.dcqcn_g > 0 && p.dcqcn_g <= 1, "network.packet.dcqcn_g",
        "DCQCN's gain g must be in (0, 1]");
  check(p.alpha_timer.ps > 0, "network.packet.alpha_timer", "the α timer must be positive");
  check(p.cnp_interval.ps >= 0, "network.packet.cnp_interval",
        "the CNP interval must not be negative");
  check(std::isfinite(p.byte_counter_bytes) && p.byte_counter_bytes > 0,
        "network.packet.byte_counter_bytes", "the byte counter must be positive");
  check(std::isfinite(p.swift_beta) && p.swift_beta > 0 && p.swift_beta <= 1,
        "network.packet.swift_beta", "Swift's decrease factor β must be in (0, 1]");
  check(std::isfinite(p.swift_max_mdf) && p.swift_max_mdf > 0 && p.swift_max_mdf < 1,
        "network.packet.swift_max_mdf", "Swift's largest cut max_mdf must be in (0, 1)");
  check(p.swift_hop_scale.ps >= 0, "network.packet.swift_hop_scale",
        "Swift's hop scaling must not be negative");
  check(std::isfinite(p.swift_fs_range) && p.swift_fs_range >= 0, "network.packet.swift_fs_range",
        "Swift's flow-scaling range must not be negative");
  check(p.swift_fs_min_cwnd > 0 && p.swift_fs_max_cwnd > p.swift_fs_min_cwnd,
        "network.packet.swift_fs_max_cwnd",
        "Swift's flow scaling needs 0 < fs_min_cwnd < fs_max_cwnd (packets)");
  check(p.swift_min_cwnd > 0 && p.swift_max_cwnd >= 1 && p.swift_max_cwnd >= p.swift_min_cwnd,
        "network.packet.swift_max_cwnd",
        "Swift's window bounds need 0 < min_cwnd <= max_cwnd and max_cwnd >= 1 packet");
  check(p.priority_classes >= 1 && p.priority_classes <= kMaxPriorityClasses,
        "network.packet.priority_classes", "a port has 1 to 8 priority classes (IEEE 802.1Q)");
  double lightest = 1e300, heaviest = 0;
  for (double w : p.class_weights) {
    check(std::isfinite(w) && w > 0 && w <= 1e6, "network.packet.class_weights",
          "every class weight must be a positive number (at most 10^6)");
    lightest = std::min(lightest, w);
    heaviest = std::max(heaviest, w);
  }
  // ETS gives the lightest class one packet per turn and the others their weight's multiple:
  // 1e-300 beside 1 made a class's quantum 4e303 bytes.
  check(heaviest <= 1e6 * lightest, "network.packet.class_weights",
        "the heaviest class weight may be at most 10^6 times the lightest");
}

PacketNetwork::PacketNetwork(Simulation& sim, std::vector<double> capacity_Bps,
                             std::vector<TimePs> latency, PacketNetworkOptions options)
    : sim_(sim),
      capacity_(std::move(capacity_Bps)),
      latency_(std::move(latency)),
      cc_(options.config.congestion_control),
      dc_(options.config.dcqcn),
      pc_(options.packet),
      ports_(capacity_.size()),
      ecn_rng_(sim.rng_stream("packet/ecn")),
      spray_rng_(sim.rng_stream("packet/spray")) {
  validate(pc_);
  const CongestionModel cm(options.config);  // validates the retransmit and CC parameters
  const bool mega = cc_ == CongestionControl::kMegaScale;
  swift_base_ = mega ? options.config.megascale.base_rtt : options.config.swift.base_rtt;
  swift_ai_ = mega ? options.config.megascale.additive_increase_packets
                   : options.config.swift.additive_increase_packets;
  // Flow scaling (Swift §3.5): α/√cwnd + β, fs_range at fs_min_cwnd and 0 at fs_max_cwnd.
  const double range_s = pc_.swift_fs_range * swift_base_.seconds();
  fs_alpha_ = range_s / (1 / std::sqrt(pc_.swift_fs_min_cwnd) - 1 / std::sqrt(pc_.swift_fs_max_cwnd));
  fs_beta_ = -fs_alpha_ / std::sqrt(pc_.swift_fs_max_cwnd);
  rto_ = cm.retransmit_timeout();
  retry_count_ = options.config.retransmit.retry_count;
  check(dc_.rate_increase_timer.ps > 0, "network.dcqcn.rate_increase_timer",
        "the rate-increase timer must be positive");
  check(latency_.size() == capacity_.size(), "network.packet",
        "one latency per link is needed");
  for (Port& port : ports_) port.fifos.resize(static_cast<std::size_t>(pc_.priority_classes));
  for (const topo::LinkId l : options.sender_links) {
    check(l >= 0 && static_cast<std::size_t>(l) < ports_.size(), "network.packet",
          "sender link " + std::to_string(l) + " does not exist");
    ports_[static_cast<std::size_t>(l)].marks = false;
  }
  for (const topo::LinkId l : options.host_queue_links) {
    check(l >= 0 && static_cast<std::size_t>(l) < ports_.size(), "network.packet",
          "host-queue link " + std::to_string(l) + " does not exist");
    ports_[static_cast<std::size_t>(l)].host_queue = true;
  }
  // ETS quanta: the weights scaled so that the lightest class's turn carries one full packet
  // (every turn of a backlogged class then sends, and the shares stay the weights' ratios).
  double lightest = pc_.class_weights[0];
  for (int c = 1; c < pc_.priority_classes; ++c) {
    lightest = std::min(lightest, pc_.class_weights[static_cast<std::size_t>(c)]);
  }
  for (int c = 0; c < pc_.priority_classes; ++c) {
    quantum_[static_cast<std::size_t>(c)] =
        pc_.class_weights[static_cast<std::size_t>(c)] / lightest * pc_.mtu_bytes;
  }
  for (std::size_t l = 0; l < capacity_.size(); ++l) {
    check(std::isfinite(capacity_[l]) && capacity_[l] > 0, "network.packet",
          "link " + std::to_string(l) + " has no capacity");
    check(latency_[l].ps >= 0, "network.packet",
          "link " + std::to_string(l) + " has a negative latency");
  }
}

FlowId PacketNetwork::start_flow(const FlowSpec& spec) {
  if (spec.path.empty()) throw_input("a packet flow needs a path of at least one link");
  if (spec.bytes <= 0) throw_input("a packet flow needs at least one byte");
  for (topo::LinkId l : spec.path) {
    if (l < 0 || static_cast<std::size_t>(l) >= capacity_.size()) {
      throw_input("a packet flow's path names link " + std::to_string(l) + ", which does not exist");
    }
  }
  if (spec.priority < 0 || spec.priority >= pc_.priority_classes) {
    throw_input("a packet flow's priority class " + std::to_string(spec.priority) +
                    " is not one of the " + std::to_string(pc_.priority_classes) +
                    " classes (0 to priority_classes - 1)",
                {"", 0, "network.packet.priority_classes"});
  }
  const auto f = static_cast<std::int32_t>(flows_.size());
  Flow fl;
  fl.cls = spec.priority;
  fl.path.assign(spec.path.begin(), spec.path.end());
  if (spec.spray_offset.size() > 2) {
    // Two or more paths: each must be a real path leaving over the flow's first link (the
    // sender's queue pair sits there).
    const std::uint32_t base = spec.spray_offset.front();
    for (std::size_t k = 0; k + 1 < spec.spray_offset.size(); ++k) {
      const std::uint32_t b = spec.spray_offset[k];
      const std::uint32_t e = spec.spray_offset[k + 1];
      if (e <= b || e > spec.spray_links.size() || spec.spray_links[b] != fl.path.front()) {
        throw_input("a sprayed packet flow's path " + std::to_string(k) +
                    " is empty or does not leave over the flow's first link");
      }
      for (std::uint32_t i = b; i < e; ++i) {
        const topo::LinkId l = spec.spray_links[i];
        if (l < 0 || static_cast<std::size_t>(l) >= capacity_.size()) {
          throw_input("a sprayed packet flow's path names link " + std::to_string(l) +
                      ", which does not exist");
        }
      }
    }
    fl.spray_links.assign(spec.spray_links.begin() + base,
                          spec.spray_links.begin() + spec.spray_offset.back());
    fl.spray_offset.reserve(spec.spray_offset.size());
    for (const std::uint32_t o : spec.spray_offset) fl.spray_offset.push_back(o - base);
    fl.placed.assign(static_cast<std::size_t>(
                         (spec.bytes + static_cast<std::int64_t>(pc_.mtu_bytes) - 1) /
                         static_cast<std::int64_t>(pc_.mtu_bytes)),
                     0);
    ++stats_.sprayed_flows;
  }
  fl.bytes = spec.bytes;
  fl.tag = spec.tag;
  fl.start = fl.next_send = sim_.now();
  fl.last_cnp = TimePs{-pc_.cnp_interval.ps - 1};
  for (topo::LinkId l : fl.path) fl.reverse_latency += latency_[static_cast<std::size_t>(l)];
  fl.line = std::min(spec.cap_Bps, capacity_[static_cast<std::size_t>(fl.path.front())]);
  fl.rate = fl.target = fl.line;
  fl.active = true;
  fl.in_sources = true;
  fl.last_progress = sim_.now();
  if (windowed()) {
    // RoCE starts at line rate: the first window fills the unloaded path (out, one packet's
    // serialization per link, and back). Swift's target: base + h per switch passed.
    TimePs unloaded = fl.reverse_latency * 2;
    for (topo::LinkId l : fl.path) unloaded += serialize(pc_.mtu_bytes, capacity_[static_cast<std::size_t>(l)]);
    fl.rtt = unloaded;
    fl.cwnd = std::clamp(fl.line * unloaded.seconds(), pc_.mtu_bytes,
                         pc_.swift_max_cwnd * pc_.mtu_bytes);
    fl.base_target = swift_base_ + pc_.swift_hop_scale * static_cast<std::int64_t>(fl.path.size() - 1);
    fl.last_decrease = TimePs{-1};
  }
  flows_.push_back(std::move(fl));
  ++stats_.flows_started;
  stats_.bytes_started += spec.bytes;
  if (dcqcn()) {
    sim_.schedule(sim_.now() + pc_.alpha_timer, *this, tag_of(kAlpha, f));
    flows_.back().increase_event =
        sim_.schedule(sim_.now() + dc_.rate_increase_timer, *this, tag_of(kIncrease, f));
  }
  flows_.back().rto_event = sim_.schedule(sim_.now() + rto_, *this, tag_of(kRto, f));
  const topo::LinkId first = flows_.back().path.front();
  ports_[static_cast<std::size_t>(first)].sources.push_back(f);
  serve(first);
  return f;
}

std::int32_t PacketNetwork::new_packet(std::int32_t flow, std::int32_t bytes) {
  std::int32_t pk;
  if (!free_packets_.empty()) {
    pk = free_packets_.back();
    free_packets_.pop_back();
  } else {
    pk = static_cast<std::int32_t>(packets_.size());
    packets_.emplace_back();
  }
  packets_[static_cast<std::size_t>(pk)] = Packet{flow, 0, bytes, -1, false, 0, sim_.now()};
  ++stats_.packets;
  stats_.packets_in_flight_max = std::max(stats_.packets_in_flight_max, ++in_flight_);
  return pk;
}

// Starts the next transmission on link `l` if it is idle: a queued packet first (FIFO), else the
// next of its sending flows (round robin) whose pacing allows a packet now; if they all wait
// for their pacing, a wake-up at the earliest.
void PacketNetwork::serve(topo::LinkId l) {
  Port& port = ports_[static_cast<std::size_t>(l)];
  if (port.busy || !port.up) return;
  const auto paused = [&](int cls) { return (port.paused >> cls & 1U) != 0; };
  std::int32_t pk = -1;
  const auto take = [&](std::size_t c) {
    std::deque<std::int32_t>& fifo = port.fifos[c];
    pk = fifo.front();
    fifo.pop_front();
    const Packet& p = packets_[static_cast<std::size_t>(pk)];
    port.queued -= p.bytes;
    port.class_queued[c] -= p.bytes;
    left_queue(p);
  };
  const std::size_t classes = port.fifos.size();
  if (classes > 1 && pc_.scheduling == PacketConfig::Scheduling::kEts) {
    // Deficit round robin: a class's turn adds its quantum; it sends while its deficit covers
    // the packet at its head; an emptied class forfeits what is left. Two rounds visit every
    // class twice, enough to find a sendable packet when one exists.
    for (std::size_t tries = 0; tries < 2 * classes + 1 && pk < 0; ++tries) {
      const std::size_t c = port.turn;
      std::deque<std::int32_t>& fifo = port.fifos[c];
      if (fifo.empty() || paused(static_cast<int>(c))) {
        if (fifo.empty()) port.deficit[c] = 0;
        port.turn = static_cast<std::uint8_t>((c + 1) % classes);
        port.turn_started = false;
        continue;
      }
      if (!port.turn_started) {
        port.deficit[c] += quantum_[c];
        port.turn_started = true;
      }
      const double head = packets_[static_cast<std::size_t>(fifo.front())].bytes;
      if (port.deficit[c] >= head) {
        port.deficit[c] -= head;
        take(c);
        if (fifo.empty()) port.deficit[c] = 0;
      } else {
        port.turn = static_cast<std::uint8_t>((c + 1) % classes);
        port.turn_started = false;
      }
    }
  } else {
    // Strict priority: the first class with a queued packet that is not paused.
    for (std::size_t c = 0; c < classes && pk < 0; ++c) {
      if (port.fifos[c].empty() || paused(static_cast<int>(c))) continue;
      take(c);
    }
  }
  if (pk < 0 && !port.sources.empty()) {
    const TimePs now = sim_.now();
    TimePs earliest = TimePs::never();
    const std::size_t n = port.sources.size();
    // The flows that may send now; among them the best class goes first, in turn within it.
    const auto ready = [&](const Flow& fl, std::int32_t& bytes) {
      if (paused(fl.cls)) return false;
      if (fl.next_send > now) {
        earliest = std::min(earliest, fl.next_send);
        return false;
      }
      bytes = static_cast<std::int32_t>(
          std::min<double>(pc_.mtu_bytes, static_cast<double>(fl.bytes - fl.sent)));
      // A window-limited flow waits for its ACKs (on_ack serves the port again).
      return !(windowed() && fl.sent > fl.acked &&
               static_cast<double>(fl.sent - fl.acked + bytes) > fl.cwnd);
    };
    int best = kMaxPriorityClasses;
    if (port.fifos.size() > 1 && pc_.scheduling == PacketConfig::Scheduling::kStrict) {
      for (std::size_t i = 0; i < n; ++i) {
        const Flow& fl = flows_[static_cast<std::size_t>(port.sources[i])];
        std::int32_t bytes = 0;
        if (fl.cls < best && ready(fl, bytes)) best = fl.cls;
      }
      earliest = TimePs::never();  // the pass below finds it again
    }
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t at = (port.next_source + i) % n;
      Flow& fl = flows_[static_cast<std::size_t>(port.sources[at])];
      std::int32_t bytes = 0;
      if (best < kMaxPriorityClasses && fl.cls != best) continue;
      if (!ready(fl, bytes)) continue;
      pk = new_packet(port.sources[at], bytes);
      packets_[static_cast<std::size_t>(pk)].offset = fl.sent;
      if (!fl.spray_offset.empty()) {
        packets_[static_cast<std::size_t>(pk)].route = static_cast<std::int32_t>(
            spray_rng_.uniform_below(fl.spray_offset.size() - 1));
      }
      if (fl.sent < fl.highest) stats_.retransmitted_bytes += bytes;
      fl.sent += bytes;
      fl.highest = std::max(fl.highest, fl.sent);
      // Pacing keeps the flow's schedule: a packet the port held back (another flow's packet
      // was on the wire when this one became eligible) does not push the next one back too;
      // credit never reaches beyond now, so a flow that waited sends at most one packet early.
      fl.next_send = std::max(fl.next_send + pacing_gap(fl, bytes), now);
      if (dcqcn()) {
        fl.bytes_since_increase += bytes;
        if (fl.bytes_since_increase >= pc_.byte_counter_bytes) {
          fl.bytes_since_increase = 0;
          ++fl.byte_count;
          increase(fl);
        }
      }
      if (fl.sent == fl.bytes) {
        fl.in_sources = false;
        port.sources.erase(port.sources.begin() + static_cast<std::ptrdiff_t>(at));
        port.next_source = port.sources.empty() ? 0 : at % port.sources.size();
      } else {
        port.next_source = (at + 1) % n;
      }
      break;
    }
    if (pk < 0 && earliest != TimePs::never() && !port.wake_pending) {
      port.wake_pending = true;
      sim_.schedule(earliest, *this, tag_of(kWake, l));
    }
  }
  if (pk < 0) return;
  port.busy = true;
  port.current = pk;
  ++stats_.transmissions;
  sim_.schedule(sim_.now() + serialize(packets_[static_cast<std::size_t>(pk)].bytes,
                                       capacity_[static_cast<std::size_t>(l)]),
                *this, tag_of(kTxDone, l));
}

// RED marking at enqueue (DCQCN's congestion point), then the FIFO.
void PacketNetwork::enqueue(topo::LinkId l, std::int32_t pk) {
  Port& port = ports_[static_cast<std::size_t>(l)];
  if (!port.up) return drop(pk);
  Packet& p = packets_[static_cast<std::size_t>(pk)];
  const int cls = flows_[static_cast<std::size_t>(p.flow)].cls;
  const auto c = static_cast<std::size_t>(cls);
  const double q = port.class_queued[c];  // the class's own queue (per-queue RED)
  // A mark, once set, stays (ECN's CE codepoint is never cleared on the way): a later port below
  // Kmax draws only whether it marks too.
  if (!port.marks) {
  } else if (q > pc_.kmax_bytes) {
    p.ecn = true;
  } else if (q > pc_.kmin_bytes && pc_.pmax > 0) {
    const bool mark =
        ecn_rng_.uniform01() < pc_.pmax * (q - pc_.kmin_bytes) / (pc_.kmax_bytes - pc_.kmin_bytes);
    p.ecn = p.ecn || mark;
  }
  // A packet is counted once, at the first port that marks it: the mark then stays set and
  // later ports would count it again (counts above the packets sent).
  if (p.ecn && !p.ecn_counted) {
    p.ecn_counted = true;
    ++stats_.ecn_marks;
  }
  port.fifos[c].push_back(pk);
  port.queued += p.bytes;
  port.class_queued[c] += p.bytes;
  if (p.ingress >= 0) {
    Port& in = ports_[static_cast<std::size_t>(p.ingress)];
    in.ingress_bytes += p.bytes;
    in.ingress_class[c] += p.bytes;
    if (!port.host_queue && in.ingress_bytes > pc_.buffer_bytes &&
        in.above_since == TimePs::never()) {
      in.above_since = sim_.now();
    }
    const auto bit = static_cast<std::uint8_t>(1U << cls);
    if (pc_.pfc && (in.pause_sent & bit) == 0 && in.ingress_class[c] > pc_.pfc_xoff_bytes) {
      in.pause_sent |= bit;
      // A NIC's send queue holding its GPU's queue pairs back is the NIC reading at its own
      // line rate (the same backpressure), not a switch's PAUSE frame: not counted.
      if (port.host_queue) {
        in.host_side = true;
      } else {
        ++in.pauses;
        ++stats_.pauses;
      }
      sim_.schedule(sim_.now() + latency_[static_cast<std::size_t>(p.ingress)], *this,
                    tag_of(kPause, pause_index(p.ingress, cls)));
    }
  }
  serve(l);
  // What waits (a packet that went straight onto the link never queued) in a switch.
  if (!port.host_queue) stats_.max_queue_bytes = std::max(stats_.max_queue_bytes, port.queued);
}

// A packet left a switch's queue for its link: the ingress link it came in over may resume.
void PacketNetwork::left_queue(const Packet& p) {
  if (p.ingress < 0) return;
  Port& in = ports_[static_cast<std::size_t>(p.ingress)];
  const int cls = flows_[static_cast<std::size_t>(p.flow)].cls;
  in.ingress_bytes -= p.bytes;
  in.ingress_class[static_cast<std::size_t>(cls)] -= p.bytes;
  if (in.above_since != TimePs::never() && in.ingress_bytes <= pc_.buffer_bytes) {
    stats_.time_above_buffer_s += (sim_.now() - in.above_since).seconds();
    in.above_since = TimePs::never();
  }
  const auto bit = static_cast<std::uint8_t>(1U << cls);
  if (pc_.pfc && (in.pause_sent & bit) != 0 &&
      in.ingress_class[static_cast<std::size_t>(cls)] <= pc_.pfc_xon_bytes) {
    in.pause_sent &= static_cast<std::uint8_t>(~bit);
    sim_.schedule(sim_.now() + latency_[static_cast<std::size_t>(p.ingress)], *this,
                  tag_of(kResume, pause_index(p.ingress, cls)));
  }
}

std::span<const topo::LinkId> PacketNetwork::route_of(const Flow& fl, const Packet& p) const {
  if (p.route < 0) return fl.path;
  const auto k = static_cast<std::size_t>(p.route);
  return std::span<const topo::LinkId>(fl.spray_links)
      .subspan(fl.spray_offset[k], fl.spray_offset[k + 1] - fl.spray_offset[k]);
}

void PacketNetwork::arrive(std::int32_t pk) {
  Packet& p = packets_[static_cast<std::size_t>(pk)];
  const std::span<const topo::LinkId> path = route_of(flows_[static_cast<std::size_t>(p.flow)], p);
  p.ingress = path[static_cast<std::size_t>(p.hop)];
  ++p.hop;
  if (static_cast<std::size_t>(p.hop) == path.size()) return deliver(pk);
  enqueue(path[static_cast<std::size_t>(p.hop)], pk);
}

// What the receiver sends back for accepted packet `pk` of flow `fl`: under Swift or MegaScale the
// packet's slot travels back as its ACK (how many bytes arrived, in order or placed beyond a gap
// — a selective acknowledgement, so a sprayed flow's window does not wait for the gap to fill —,
// its mark and its send time); under DCQCN a CNP for a marked packet unless one went to this flow
// less than cnp_interval ago.
void PacketNetwork::answer(std::int32_t pk, bool ecn, Flow& fl) {
  const TimePs now = sim_.now();
  const std::int32_t f = packets_[static_cast<std::size_t>(pk)].flow;
  if (windowed()) {
    packets_[static_cast<std::size_t>(pk)].offset = fl.received + fl.placed_bytes;
    sim_.schedule(now + fl.reverse_latency, *this, tag_of(kAck, pk));
  } else {
    free_packets_.push_back(pk);
  }
  if (ecn && dcqcn() && now - fl.last_cnp >= pc_.cnp_interval) {
    fl.last_cnp = now;
    ++stats_.cnps;
    sim_.schedule(now + fl.reverse_latency, *this, tag_of(kCnp, f));
  }
}

// The receiver (DCQCN's notification point): counts the bytes, answers a marked packet with a
// CNP unless it sent one to this flow less than cnp_interval ago, and reports the last byte.
void PacketNetwork::deliver(std::int32_t pk) {
  const Packet p = packets_[static_cast<std::size_t>(pk)];
  --in_flight_;
  Flow& fl = flows_[static_cast<std::size_t>(p.flow)];
  const TimePs now = sim_.now();
  // A sprayed flow's receiver places a packet that came ahead of a gap (a duplicate, or a
  // packet of a flow no longer running, is dropped); no NAK: the RTO recovers a loss.
  if (!fl.placed.empty() && fl.active && p.offset > fl.received) {
    std::uint8_t& got =
        fl.placed[static_cast<std::size_t>(p.offset / static_cast<std::int64_t>(pc_.mtu_bytes))];
    if (got != 0) {
      free_packets_.push_back(pk);
      ++stats_.out_of_order;
      return;
    }
    got = 1;
    fl.placed_bytes += p.bytes;
    ++stats_.reordered;
    stats_.bytes_delivered += p.bytes;
    fl.last_progress = now;
    fl.timeouts = 0;
    answer(pk, p.ecn, fl);
    return;
  }
  // Go-back-N: only the next expected byte of a flow still running is accepted (a failed flow's
  // stragglers and a finished one's duplicates are not); a gap is answered with one NAK.
  if (!fl.active || p.offset != fl.received) {
    free_packets_.push_back(pk);
    ++stats_.out_of_order;
    if (p.offset > fl.received && fl.active && !fl.nak_sent) {
      fl.nak_sent = true;
      ++stats_.naks;
      sim_.schedule(now + fl.reverse_latency, *this, tag_of(kNak, p.flow));
    }
    return;
  }
  fl.received += p.bytes;
  fl.nak_sent = false;
  fl.last_progress = now;
  fl.timeouts = 0;
  stats_.bytes_delivered += p.bytes;
  if (!fl.placed.empty()) {
    // The gap is filled: what was placed beyond it now counts as received.
    const auto mtu = static_cast<std::int64_t>(pc_.mtu_bytes);
    while (fl.received < fl.bytes) {
      std::uint8_t& got = fl.placed[static_cast<std::size_t>(fl.received / mtu)];
      if (got == 0) break;
      got = 0;
      const std::int64_t more = std::min(mtu, fl.bytes - fl.received);
      fl.placed_bytes -= more;
      fl.received += more;
    }
  }
  answer(pk, p.ecn, fl);
  if (fl.received < fl.bytes) return;
  fl.active = false;
  if (dcqcn()) sim_.cancel(fl.increase_event);
  sim_.cancel(fl.rto_event);
  ++stats_.flows_done;
  if (!flow_done_.empty()) flow_done_.emit(FlowDone{p.flow, fl.tag, fl.start, now, fl.bytes});
}

// DCQCN reaction point, on a CNP: remember the rate as the target, cut by α/2, raise α, and
// restart the increase stages (Zhu et al. §3.1).
void PacketNetwork::on_cnp(std::int32_t f) {
  Flow& fl = flows_[static_cast<std::size_t>(f)];
  if (!fl.active || fl.sent == fl.bytes) return;
  ++stats_.rate_cuts;
  if (pc_.dcqcn_clamp_target_always || fl.increased_since_cut) fl.target = fl.rate;
  fl.increased_since_cut = false;
  fl.rate = std::max(dc_.rate_ai_Bps, fl.rate * (1 - fl.alpha / 2));
  fl.alpha = (1 - pc_.dcqcn_g) * fl.alpha + pc_.dcqcn_g;
  fl.cnp_since_alpha = true;
  fl.timer_count = fl.byte_count = 0;
  fl.bytes_since_increase = 0;
  sim_.reschedule(fl.increase_event, sim_.now() + dc_.rate_increase_timer);
}

// One increase event (timer or byte counter): fast recovery towards the target for the first F
// events of either counter, additive increase of the target after, hyper increase once both
// have passed F.
void PacketNetwork::increase(Flow& fl) {
  const int lo = std::min(fl.timer_count, fl.byte_count);
  const int hi = std::max(fl.timer_count, fl.byte_count);
  if (lo > dc_.fast_recovery_steps) {
    fl.target += dc_.rate_hai_Bps;
  } else if (hi > dc_.fast_recovery_steps) {
    fl.target += dc_.rate_ai_Bps;
  }
  fl.target = std::min(fl.target, fl.line);
  fl.rate = std::min(fl.line, (fl.target + fl.rate) / 2);
  fl.increased_since_cut = true;
}

// The time before a flow's next packet: its serialization at the flow's rate (DCQCN's, else the
// line rate); under Swift with a window below one packet, one packet per RTT · MTU / cwnd.
TimePs PacketNetwork::pacing_gap(const Flow& fl, std::int32_t bytes) const {
  const TimePs gap = serialize(bytes, fl.rate);
  if (!windowed() || fl.cwnd >= pc_.mtu_bytes) return gap;
  return std::max(gap, TimePs::from_seconds(fl.rtt.seconds() * pc_.mtu_bytes / fl.cwnd));
}

void PacketNetwork::cut_window(Flow& fl, double factor) {
  fl.cwnd = std::max(fl.cwnd * factor, pc_.swift_min_cwnd * pc_.mtu_bytes);
  fl.last_decrease = sim_.now();
}

// Swift's sender on an ACK (Kumar et al., Algorithm 1): the delay is the packet's round trip.
// Below the target (base + hops + flow scaling) the window grows by ai packets per window
// (ai per packet acknowledged below one packet); above it, once per RTT, it shrinks by
// β·(delay − target)/delay, at most max_mdf. MegaScale's hybrid also cuts by max_mdf, once
// per RTT, on an ECN echo, and does not grow on one.
void PacketNetwork::on_ack(std::int32_t pk) {
  const Packet a = packets_[static_cast<std::size_t>(pk)];
  free_packets_.push_back(pk);
  Flow& fl = flows_[static_cast<std::size_t>(a.flow)];
  if (!fl.active) return;
  ++stats_.acks;
  const TimePs now = sim_.now();
  const TimePs delay = now - a.sent_at;
  const double newly = static_cast<double>(std::max<std::int64_t>(0, a.offset - fl.acked));
  fl.acked = std::max(fl.acked, a.offset);
  fl.rtt = delay;
  const bool can_decrease = now - fl.last_decrease >= delay;
  const double mtu = pc_.mtu_bytes;
  const double pkts = fl.cwnd / mtu;
  const double fs = std::clamp(fs_alpha_ / std::sqrt(pkts) + fs_beta_, 0.0,
                               pc_.swift_fs_range * swift_base_.seconds());
  const double target_s = fl.base_target.seconds() + fs;
  const double delay_s = delay.seconds();
  if (a.ecn && cc_ == CongestionControl::kMegaScale) {
    if (can_decrease) {
      ++stats_.ecn_cuts;
      cut_window(fl, 1 - pc_.swift_max_mdf);
    }
  } else if (delay_s < target_s) {
    fl.cwnd += pkts >= 1 ? swift_ai_ * newly / pkts : swift_ai_ * newly;
  } else if (can_decrease) {
    ++stats_.delay_cuts;
    cut_window(fl, std::max(1 - pc_.swift_beta * (delay_s - target_s) / delay_s,
                            1 - pc_.swift_max_mdf));
  }
  fl.cwnd = std::min(fl.cwnd, pc_.swift_max_cwnd * mtu);
  if (fl.in_sources) serve(fl.path.front());
}

void PacketNetwork::drop(std::int32_t pk) {
  ++stats_.dropped;
  free_packets_.push_back(pk);
  --in_flight_;
}

// The sender goes back to the first byte its receiver has not accepted.
void PacketNetwork::go_back(std::int32_t f) {
  Flow& fl = flows_[static_cast<std::size_t>(f)];
  fl.sent = fl.received;
  const topo::LinkId first = fl.path.front();
  if (!fl.in_sources) {
    fl.in_sources = true;
    ports_[static_cast<std::size_t>(first)].sources.push_back(f);
  }
  serve(first);
}

void PacketNetwork::set_link_up(topo::LinkId l, bool up) {
  Port& port = ports_[static_cast<std::size_t>(l)];
  if (port.up == up) return;
  port.up = up;
  if (up) return serve(l);
  // What waits for the link is lost (what it is sending is lost when its serialization ends).
  for (std::size_t c = 0; c < port.fifos.size(); ++c) {
    std::deque<std::int32_t>& fifo = port.fifos[c];
    while (!fifo.empty()) {
      const std::int32_t pk = fifo.front();
      fifo.pop_front();
      port.queued -= packets_[static_cast<std::size_t>(pk)].bytes;
      port.class_queued[c] -= packets_[static_cast<std::size_t>(pk)].bytes;
      left_queue(packets_[static_cast<std::size_t>(pk)]);
      drop(pk);
    }
  }
}

void PacketNetwork::schedule_link_flap(topo::LinkId l, TimePs down_at, TimePs duration) {
  sim_.schedule(down_at, *this, tag_of(kDown, l));
  sim_.schedule(down_at + duration, *this, tag_of(kUp, l));
}

void PacketNetwork::on_event(std::uint64_t tag) {
  const auto kind = static_cast<Kind>(tag >> kKindShift);
  const auto index = static_cast<std::int64_t>(tag & ((std::uint64_t{1} << kKindShift) - 1));
  switch (kind) {
    case kTxDone: {
      const auto l = static_cast<topo::LinkId>(index);
      Port& port = ports_[static_cast<std::size_t>(l)];
      const std::int32_t pk = port.current;
      port.busy = false;
      port.current = -1;
      if (!port.up) return drop(pk);
      sim_.schedule(sim_.now() + latency_[static_cast<std::size_t>(l)], *this, tag_of(kArrive, pk));
      serve(l);
      return;
    }
    case kArrive: return arrive(static_cast<std::int32_t>(index));
    case kAck: return on_ack(static_cast<std::int32_t>(index));
    case kWake: {
      const auto l = static_cast<topo::LinkId>(index);
      ports_[static_cast<std::size_t>(l)].wake_pending = false;
      return serve(l);
    }
    case kCnp: return on_cnp(static_cast<std::int32_t>(index));
    case kNak: {
      if (!flows_[static_cast<std::size_t>(index)].active) return;
      return go_back(static_cast<std::int32_t>(index));
    }
    case kRto: {
      const auto f = static_cast<std::int32_t>(index);
      Flow& fl = flows_[static_cast<std::size_t>(f)];
      if (!fl.active) return;
      const TimePs now = sim_.now();
      if (now - fl.last_progress < rto_) {
        fl.rto_event = sim_.schedule(fl.last_progress + rto_, *this, tag);
        return;
      }
      ++stats_.timeouts;
      if (++fl.timeouts > retry_count_) {
        fl.active = false;
        if (dcqcn()) sim_.cancel(fl.increase_event);
        if (fl.in_sources) {
          auto& src = ports_[static_cast<std::size_t>(fl.path.front())].sources;
          src.erase(std::find(src.begin(), src.end(), f));
          fl.in_sources = false;
        }
        ++stats_.flows_failed;
        if (!flow_failed_.empty()) {
          flow_failed_.emit(
              FlowFailed{f, fl.tag, fl.start, fl.last_progress, now, fl.bytes - fl.received});
        }
        return;
      }
      fl.rto_event = sim_.schedule(now + rto_, *this, tag);
      if (windowed()) cut_window(fl, 1 - pc_.swift_max_mdf);  // Swift on a retransmit timeout
      return go_back(f);
    }
    case kDown: return set_link_up(static_cast<topo::LinkId>(index), false);
    case kUp: return set_link_up(static_cast<topo::LinkId>(index), true);
    case kPause: {
      const auto cls = static_cast<int>(index % kMaxPriorityClasses);
      Port& port = ports_[static_cast<std::size_t>(index / kMaxPriorityClasses)];
      const auto bit = static_cast<std::uint8_t>(1U << cls);
      if ((port.paused & bit) == 0) {
        port.paused |= bit;
        port.paused_since[static_cast<std::size_t>(cls)] = sim_.now();
      }
      return;
    }
    case kResume: {
      const auto cls = static_cast<int>(index % kMaxPriorityClasses);
      const auto l = static_cast<topo::LinkId>(index / kMaxPriorityClasses);
      Port& port = ports_[static_cast<std::size_t>(l)];
      const auto bit = static_cast<std::uint8_t>(1U << cls);
      if ((port.paused & bit) != 0) {
        port.paused &= static_cast<std::uint8_t>(~bit);
        if (!port.host_side) {
          stats_.paused_s +=
              (sim_.now() - port.paused_since[static_cast<std::size_t>(cls)]).seconds();
        }
      }
      return serve(l);
    }
    case kAlpha: {
      Flow& fl = flows_[static_cast<std::size_t>(index)];
      if (!fl.active) return;
      if (!fl.cnp_since_alpha) fl.alpha *= 1 - pc_.dcqcn_g;
      fl.cnp_since_alpha = false;
      sim_.schedule(sim_.now() + pc_.alpha_timer, *this, tag);
      return;
    }
    case kIncrease: {
      Flow& fl = flows_[static_cast<std::size_t>(index)];
      if (!fl.active) return;
      ++fl.timer_count;
      increase(fl);
      fl.increase_event = sim_.schedule(sim_.now() + dc_.rate_increase_timer, *this, tag);
      return;
    }
  }
}

}  // namespace trainsim::net
