#include "sim/network/congestion.h"

#include <cmath>
#include <string>

#include "sim/core/error.h"

namespace trainsim::net {
namespace {

void require(bool ok, const std::string& key, const std::string& what) {
  if (!ok) throw_input(what, ErrorContext{"", 0, key});
}

void validate_shared(double efficiency, double penalty, const std::string& prefix) {
  require(efficiency > 0 && efficiency <= 1, prefix + ".contended_efficiency", "must be in (0, 1]");
  require(penalty >= 0 && std::isfinite(penalty), prefix + ".incast_penalty", "must be >= 0");
}

void validate_window(TimePs rtt, double ai, double mtu, const std::string& prefix) {
  require(rtt.ps > 0, prefix + ".base_rtt", "must be > 0");
  require(ai > 0 && std::isfinite(ai), prefix + ".additive_increase", "must be > 0");
  require(mtu > 0 && std::isfinite(mtu), prefix + ".mtu_bytes", "must be > 0");
}

// Window-based AIMD (Swift, MegaScale): after one RTT without queueing delay the window grows by
// `ai` packets per RTT, so the rate grows linearly at ai·mtu/rtt² per second. Holding the old rate
// for rtt + Δ/(2·slope) loses the same bytes as that ramp.
double window_lag_s(double delta_Bps, TimePs rtt, double ai, double mtu) {
  const double rtt_s = rtt.seconds();
  const double slope = ai * mtu / (rtt_s * rtt_s);
  return rtt_s + delta_Bps / (2 * slope);
}

// DCQCN's reaction point after the last CNP (HPCC ns-3 Mellanox rate machine): every T the
// stage advances; F fast-recovery stages bring RC back to RT (the old rate: no gain), one stage
// of additive increase adds R_AI, then every stage adds R_HAI. RC ← (RC+RT)/2 makes RC trail RT
// by one period. The lag is the bytes lost against an immediate jump, divided by the jump.
double dcqcn_lag_s(double delta_Bps, const DcqcnConfig& p) {
  const double t = p.rate_increase_timer.seconds();
  double lost_s = (p.fast_recovery_steps + 2) * t;  // F stages, the AI stage, the RC trail
  const double after_ai = delta_Bps - p.rate_ai_Bps;
  if (after_ai > 0) {
    const double steps = std::ceil(after_ai / p.rate_hai_Bps);
    lost_s += t * (steps * after_ai - p.rate_hai_Bps * steps * (steps - 1) / 2) / delta_Bps;
  }
  return lost_s;
}

}  // namespace

const char* to_string(CongestionControl cc) {
  switch (cc) {
    case CongestionControl::kIdeal:
      return "ideal";
    case CongestionControl::kDcqcn:
      return "dcqcn";
    case CongestionControl::kSwift:
      return "swift";
    case CongestionControl::kMegaScale:
      return "megascale";
  }
  return "?";
}

std::optional<CongestionControl> parse_congestion_control(std::string_view name) {
  for (const CongestionControl cc : {CongestionControl::kIdeal, CongestionControl::kDcqcn,
                                     CongestionControl::kSwift, CongestionControl::kMegaScale}) {
    if (name == to_string(cc)) return cc;
  }
  return std::nullopt;
}

CongestionModel::CongestionModel(const NetworkConfig& config) : config_(config) {
  const DcqcnConfig& d = config.dcqcn;
  validate_shared(d.contended_efficiency, d.incast_penalty, "network.dcqcn");
  require(d.rate_increase_timer.ps > 0, "network.dcqcn.rate_increase_timer", "must be > 0");
  require(d.fast_recovery_steps >= 0, "network.dcqcn.fast_recovery_steps", "must be >= 0");
  require(d.rate_ai_Bps > 0, "network.dcqcn.rate_ai", "must be > 0");
  require(d.rate_hai_Bps > 0, "network.dcqcn.rate_hai", "must be > 0");
  const SwiftConfig& s = config.swift;
  validate_shared(s.contended_efficiency, s.incast_penalty, "network.swift");
  validate_window(s.base_rtt, s.additive_increase_packets, s.mtu_bytes, "network.swift");
  const MegaScaleCcConfig& m = config.megascale;
  validate_shared(m.contended_efficiency, m.incast_penalty, "network.megascale");
  validate_window(m.base_rtt, m.additive_increase_packets, m.mtu_bytes, "network.megascale");
  require(config.retransmit.timeout >= 0 && config.retransmit.timeout <= 31,
          "network.retransmit.timeout", "must be in 0..31 (the IB 5-bit field)");
  require(config.retransmit.retry_count >= 0 && config.retransmit.retry_count <= 7,
          "network.retransmit.retry_count", "must be in 0..7 (the IB 3-bit field)");

  switch (config.congestion_control) {
    case CongestionControl::kIdeal:
      break;
    case CongestionControl::kDcqcn:
      contended_efficiency_ = d.contended_efficiency;
      incast_penalty_ = d.incast_penalty;
      break;
    case CongestionControl::kSwift:
      contended_efficiency_ = s.contended_efficiency;
      incast_penalty_ = s.incast_penalty;
      break;
    case CongestionControl::kMegaScale:
      contended_efficiency_ = m.contended_efficiency;
      incast_penalty_ = m.incast_penalty;
      break;
  }
}

double contention_efficiency(double contended_efficiency, double incast_penalty, int flows) {
  if (flows <= 1) return 1.0;
  return contended_efficiency / (1.0 + incast_penalty * std::log2(flows / 2.0));
}

double CongestionModel::link_efficiency(int flows) const {
  if (!active()) return 1.0;
  return contention_efficiency(contended_efficiency_, incast_penalty_, flows);
}

TimePs CongestionModel::increase_lag(double from_Bps, double to_Bps) const {
  const double delta = to_Bps - from_Bps;
  if (!(delta > 0)) return TimePs{};
  double lag_s = 0;
  switch (config_.congestion_control) {
    case CongestionControl::kIdeal:
      return TimePs{};
    case CongestionControl::kDcqcn:
      lag_s = dcqcn_lag_s(delta, config_.dcqcn);
      break;
    case CongestionControl::kSwift:
      lag_s = window_lag_s(delta, config_.swift.base_rtt, config_.swift.additive_increase_packets,
                           config_.swift.mtu_bytes);
      break;
    case CongestionControl::kMegaScale:
      lag_s =
          window_lag_s(delta, config_.megascale.base_rtt,
                       config_.megascale.additive_increase_packets, config_.megascale.mtu_bytes);
      break;
  }
  return TimePs::from_seconds(lag_s);
}

TimePs CongestionModel::retransmit_timeout() const {
  return TimePs::from_ns(4096) * (std::int64_t{1} << config_.retransmit.timeout);
}

TimePs CongestionModel::retry_budget() const {
  return retransmit_timeout() * config_.retransmit.retry_count;
}

}  // namespace trainsim::net
