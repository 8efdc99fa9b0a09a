#include "sim/network/congestion_fit.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "sim/core/error.h"
#include "sim/core/simulation.h"

namespace trainsim::net {
namespace {

// The last completion of an n → 1 incast: links 0 … n−1 are the senders', link n the downlink.
double incast_seconds(int n, std::int64_t bytes, const IncastGrid& grid,
                      const PacketNetworkOptions& options, std::uint64_t seed) {
  Simulation sim(seed);
  PacketNetwork& net = sim.emplace<PacketNetwork>(
      std::vector<double>(static_cast<std::size_t>(n) + 1, grid.link_Bps),
      std::vector<TimePs>(static_cast<std::size_t>(n) + 1, grid.latency), options);
  TimePs last;
  int done = 0;
  net.flow_done().subscribe([&](const FlowDone& d) {
    last = std::max(last, d.end);
    ++done;
  });
  for (int i = 0; i < n; ++i) {
    const topo::LinkId path[2] = {static_cast<topo::LinkId>(i), static_cast<topo::LinkId>(n)};
    net.start_flow({path, bytes, kUnlimited, static_cast<std::uint64_t>(i + 1)});
  }
  sim.run();
  if (done != n) {
    throw Error(ErrorKind::kRuntime, "congestion fit: an incast flow did not complete");
  }
  return last.seconds();
}

}  // namespace

double fitted_efficiency(const EfficiencyFit& fit, int flows) {
  return contention_efficiency(fit.contended_efficiency, fit.incast_penalty, flows);
}

EfficiencyFit fit_link_efficiency(const PacketNetworkOptions& options, const IncastGrid& grid,
                                  std::uint64_t seed) {
  if (options.config.congestion_control == CongestionControl::kIdeal) {
    throw Error(ErrorKind::kInput, "congestion fit: `ideal` has nothing to fit");
  }
  PacketNetworkOptions line = options;
  line.config.congestion_control = CongestionControl::kIdeal;
  std::vector<IncastPoint> points;
  for (const std::int64_t bytes : grid.bytes) {
    for (const int n : grid.senders) {
      if (n < 2) continue;  // η(1) = 1 by definition
      IncastPoint p{n, bytes, incast_seconds(n, bytes, grid, line, seed),
                    incast_seconds(n, bytes, grid, options, seed), 0};
      p.efficiency = p.line_s / p.cc_s;
      points.push_back(p);
    }
  }
  return fit_efficiency(std::move(points));
}

EfficiencyFit fit_efficiency(std::vector<IncastPoint> points) {
  EfficiencyFit fit;
  fit.points = std::move(points);
  if (fit.points.empty()) throw Error(ErrorKind::kInput, "congestion fit: no incast of 2 or more");
  for (const IncastPoint& p : fit.points) {
    if (p.senders < 2 || !(p.efficiency > 0) || !std::isfinite(p.efficiency)) {
      throw Error(ErrorKind::kInput, "congestion fit: a point needs senders >= 2 and efficiency > 0");
    }
  }

  // Least squares of y = 1/η on x = log2(n/2).
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const IncastPoint& p : fit.points) {
    const double x = std::log2(p.senders / 2.0), y = 1.0 / p.efficiency;
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double m = static_cast<double>(fit.points.size());
  const double var = sxx - sx * sx / m;
  const double slope = var > 0 ? (sxy - sx * sy / m) / var : 0.0;
  if (slope > 0) {
    const double intercept = (sy - slope * sx) / m;
    fit.contended_efficiency = std::min(1.0, 1.0 / intercept);
    fit.incast_penalty = slope / intercept;
  } else {
    fit.contended_efficiency = std::min(1.0, m / sy);
    fit.incast_penalty = 0.0;
  }
  for (const IncastPoint& p : fit.points) {
    const double flow_s = p.line_s / fitted_efficiency(fit, p.senders);
    fit.max_relative_error = std::max(fit.max_relative_error, std::abs(flow_s - p.cc_s) / p.cc_s);
  }
  return fit;
}

}  // namespace trainsim::net
