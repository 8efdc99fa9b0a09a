// Flow-level congestion-control models and the network parameters a scenario will set.
//
// At flow level a congestion-control algorithm is not simulated packet by packet; it changes the
// fluid model in three documented ways (docs/network-model.md derives each one and gives sources):
//
//   1. Contention efficiency. A link shared by n >= 2 flows delivers η(n)·C instead of C:
//        η(n) = contended_efficiency / (1 + incast_penalty · log2(n / 2)),   η(1) = 1.
//      contended_efficiency is the steady-state loss of the algorithm's rate oscillation around
//      the fair share; the log2 term is the incast penalty: flows that start at line rate need
//      about log2(n) multiplicative cuts to reach C/n, and each cut overshoots.
//   2. Rate-increase lag. When a flow's fair share rises (a competitor left) the flow keeps its
//      old rate for an equivalent lag τ_up (the delay that loses the same bytes as the algorithm's
//      real ramp) and then jumps. Decreases are immediate: every algorithm here cuts within a few
//      RTTs, far below flow durations. New flows start at their share (RoCE NICs start at line
//      rate; there is no slow start).
//   3. Nothing else: rates stay max-min fair under the derated capacities and the held rates, so
//      every solver invariant still holds.
//
// `ideal` is exact max-min. The retransmit parameters (RTO and retries) apply to every algorithm.
//
// The structs below are the future `network.*` scenario keys (docs/network-model.md lists them);
// each field names its key and documents its default. Defaults marked [D] in the documentation are
// placeholders derived from the published mechanisms, to be fitted against the packet-level
// engine (DESIGN.md §4).
#pragma once

#include <optional>
#include <string_view>

#include "sim/core/units.h"

namespace trainsim::net {

/// network.congestion_control
enum class CongestionControl { kIdeal, kDcqcn, kSwift, kMegaScale };

const char* to_string(CongestionControl cc);
/// "ideal", "dcqcn", "swift", "megascale"; nullopt for anything else.
std::optional<CongestionControl> parse_congestion_control(std::string_view name);

/// network.dcqcn.*: DCQCN (Zhu et al., SIGCOMM'15). The reaction-point parameters keep the
/// paper's names (T, F, R_AI, R_HAI); values are the HPCC ns-3 "dcqcn_paper" set scaled to 200 Gb/s
/// NICs. A key is the field name without its unit suffix.
struct DcqcnConfig {
  double contended_efficiency = 0.95;  // η of a link shared by 2 flows [D]
  double incast_penalty = 0.06;        // efficiency lost per doubling of the flows beyond 2 [D]
  TimePs rate_increase_timer = TimePs::from_us(55);  // T: period of the rate-increase timer
  int fast_recovery_steps = 5;                       // F: timer periods of fast recovery
  double rate_ai_Bps = 5e6;                          // R_AI: additive-increase step, 40 Mb/s
  double rate_hai_Bps = 50e6;                        // R_HAI: hyper-increase step, 400 Mb/s
};

/// network.swift.*: Swift (Kumar et al., SIGCOMM'20), delay-based window control.
struct SwiftConfig {
  // η's constants: the fit of packet-level incasts (congestion_fit.h; test_congestion_fit.cpp).
  // Swift's target delay keeps a standing queue at the bottleneck, so it never idles: η = 1.
  double contended_efficiency = 1.0;       // η of a link shared by 2 flows [F: packet incasts]
  double incast_penalty = 0.0;             // efficiency lost per doubling beyond 2 [F]
  TimePs base_rtt = TimePs::from_us(10);   // unloaded fabric round-trip time [D]
  double additive_increase_packets = 1.0;  // ai: window increase per RTT, packets [D]
  double mtu_bytes = 4096;                 // bytes per packet (RoCE MTU 4096)
};

/// network.megascale.*: MegaScale's Swift + DCQCN hybrid (Jiang et al., NSDI'24 §3.6): ECN cuts
/// as in DCQCN plus RTT cuts as in Swift, RTT-paced additive increase. No equations are
/// published; the flow-level parameters follow the mechanism.
struct MegaScaleCcConfig {
  // η's constants: the fit of packet-level incasts, as for Swift; the ECN cuts of the first
  // round trips cost 0.7 % on average (2–3 % for 4 MB into 2–4 senders), with no trend in n.
  double contended_efficiency = 0.995;     // η of a link shared by 2 flows [F: packet incasts]
  double incast_penalty = 0.0;             // efficiency lost per doubling beyond 2 [F]
  TimePs base_rtt = TimePs::from_us(10);   // unloaded fabric round-trip time [D]
  double additive_increase_packets = 1.0;  // window increase per RTT, packets [D]
  double mtu_bytes = 4096;                 // bytes per packet (RoCE MTU 4096)
};

/// network.retransmit.*: RC transport retransmission (InfiniBand spec; NCCL_IB_TIMEOUT and
/// NCCL_IB_RETRY_CNT). RTO = 4.096 µs · 2^timeout; a flow stalled by a down link for longer
/// than retry_count · RTO fails.
struct RetransmitConfig {
  int timeout = 20;     // the exponent t; NCCL_IB_TIMEOUT default 20 → RTO 4.29 s
  int retry_count = 7;  // NCCL_IB_RETRY_CNT default 7 (the 3-bit maximum)
};

/// The network.* parameters of a scenario that the flow model reads.
struct NetworkConfig {
  CongestionControl congestion_control = CongestionControl::kIdeal;  // network.congestion_control
  DcqcnConfig dcqcn;
  SwiftConfig swift;
  MegaScaleCcConfig megascale;
  RetransmitConfig retransmit;
  /// Flow fidelity: each ring channel's queue pair is one flow over all its edges, in lock step
  /// (network.ring_lockstep; sim/collective/flow.h); false: one independent flow per edge.
  bool ring_lockstep = true;
};

/// η(n) = contended_efficiency / (1 + incast_penalty · log2(n / 2)) for n >= 2, 1 for one flow.
double contention_efficiency(double contended_efficiency, double incast_penalty, int flows);

/// The flow-level effect of a NetworkConfig. Construction validates the config and throws a
/// trainsim::Error naming the offending key.
class CongestionModel {
 public:
  explicit CongestionModel(const NetworkConfig& config = {});

  CongestionControl algorithm() const { return config_.congestion_control; }
  const NetworkConfig& config() const { return config_; }

  /// False for `ideal`: capacities are not derated and rates never lag.
  bool active() const { return config_.congestion_control != CongestionControl::kIdeal; }

  /// True when η(n) < 1 for some n: the algorithm derates shared links (Swift's fitted η is 1:
  /// it only lags on increases).
  bool derates() const {
    return active() && (contended_efficiency_ < 1.0 || incast_penalty_ > 0.0);
  }

  /// η(n): fraction of a link's capacity that n flows sharing it receive.
  double link_efficiency(int flows) const;

  /// τ_up: how long a flow keeps rate `from_Bps` before taking its new share `to_Bps`
  /// (to > from); zero for `ideal`.
  TimePs increase_lag(double from_Bps, double to_Bps) const;

  /// RTO = 4.096 µs · 2^timeout.
  TimePs retransmit_timeout() const;
  /// retry_count · RTO: the longest stall a flow survives.
  TimePs retry_budget() const;

 private:
  double contended_efficiency_ = 1.0;
  double incast_penalty_ = 0.0;
  NetworkConfig config_;
};

}  // namespace trainsim::net
