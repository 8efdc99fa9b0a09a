// Fitting the flow level's contention efficiency to the packet level (issue 16, DESIGN.md §4).
//
// The flow level derates a link shared by n flows to η(n)·C with
//     η(n) = contended_efficiency / (1 + incast_penalty · log2(n / 2))     (congestion.h).
// Its two constants are not measured anywhere in public; this file measures them on the packet
// engine. For each incast (n senders, each on its own link, into one downlink, every link of
// equal capacity and latency) it runs the packet level twice, under the algorithm and at line
// rate (`ideal`, the same PFC and store and forward), and takes η = T_line / T_cc: what the
// algorithm alone costs. 1/η is linear in log2(n/2) under the flow model
//     1/η = 1/e + (p/e) · log2(n/2),
// so an ordinary least-squares line through the points gives e = 1/intercept and
// p = slope/intercept. A negative slope (η rising with n) is outside the model's form; p is then
// 0 and e = 1/mean(1/η). The fit's quality is the largest relative error of the flow level's
// time T_line/η_fit(n) against the packet time.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/network/packet_network.h"

namespace trainsim::net {

struct IncastPoint {
  int senders = 0;
  std::int64_t bytes = 0;  // per sender
  double line_s = 0;       // packet level at line rate (`ideal`)
  double cc_s = 0;         // packet level under the algorithm
  double efficiency = 0;   // line_s / cc_s
};

struct EfficiencyFit {
  double contended_efficiency = 1.0;
  double incast_penalty = 0.0;
  std::vector<IncastPoint> points;
  double max_relative_error = 0;  // max |line_s/η_fit(n) − cc_s| / cc_s over the points
};

struct IncastGrid {
  std::vector<int> senders{2, 4, 8, 16, 32};
  std::vector<std::int64_t> bytes{4'000'000, 16'000'000};
  double link_Bps = 25e9;                // 200 Gb/s NICs and switch ports
  TimePs latency = TimePs::from_us(1);   // per link
};

/// Runs the grid's incasts under `options` (its congestion_control must not be `ideal`) and
/// fits η. Deterministic for a given seed.
EfficiencyFit fit_link_efficiency(const PacketNetworkOptions& options, const IncastGrid& grid = {},
                                  std::uint64_t seed = 1);

/// The least-squares fit of the points above (every point must have senders >= 2 and
/// 0 < efficiency <= 1); throws an input error when there are none.
EfficiencyFit fit_efficiency(std::vector<IncastPoint> points);

/// η(n) of a fitted pair, as CongestionModel::link_efficiency computes it.
double fitted_efficiency(const EfficiencyFit& fit, int flows);

}  // namespace trainsim::net
