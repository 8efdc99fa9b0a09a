#include "topology/traffic.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "sim/core/error.h"
#include "sim/core/rng.h"

namespace trainsim::topo {
namespace {

int group_size(const TrafficSpec& spec, int gpus) {
  return spec.group > 0 ? std::min(spec.group, gpus) : gpus;
}

void check_dp(const TrafficSpec& spec, int gpus) {
  const int cp = spec.pp_before_dp ? spec.cp : 1;
  if (spec.tp < 1 || spec.pp < 1 || cp < 1 || gpus % (spec.tp * spec.pp * cp) != 0) {
    throw_input(fmt::format("dp-ring needs the GPU count ({}) to be a multiple of tp {} x pp {}{}",
                            gpus, spec.tp, spec.pp, cp > 1 ? fmt::format(" x cp {}", cp) : ""),
                {"", 0, "traffic"}, "set parallel.tp and parallel.pp to divide the GPUs");
  }
}

}  // namespace

const char* to_string(TrafficPattern p) {
  switch (p) {
    case TrafficPattern::kRing:
      return "ring";
    case TrafficPattern::kDpRing:
      return "dp-ring";
    case TrafficPattern::kPermutation:
      return "permutation";
    case TrafficPattern::kAllToAll:
      return "all-to-all";
    case TrafficPattern::kIncast:
      return "incast";
  }
  return "?";
}

std::optional<TrafficPattern> traffic_pattern_from(std::string_view name) {
  for (TrafficPattern p :
       {TrafficPattern::kRing, TrafficPattern::kDpRing, TrafficPattern::kPermutation,
        TrafficPattern::kAllToAll, TrafficPattern::kIncast}) {
    if (name == to_string(p)) return p;
  }
  return std::nullopt;
}

void for_each_connection(const TrafficSpec& spec, int gpus,
                         const std::function<void(GpuId, GpuId)>& connection) {
  if (gpus <= 1) return;
  if (spec.pattern == TrafficPattern::kDpRing) {
    check_dp(spec, gpus);
    if (spec.pp_before_dp) {
      // The DP·CP group of (stage p, TP rank r), in rank order: replica d outer, CP rank j inner.
      const int cp = spec.cp, dp = gpus / (spec.tp * cp * spec.pp), n = dp * cp;
      if (n < 2) return;
      const auto member = [&](int p, int r, int i) {
        return ((i / cp) * spec.pp * cp + p * cp + i % cp) * spec.tp + r;
      };
      for (int p = 0; p < spec.pp; ++p) {
        for (int r = 0; r < spec.tp; ++r) {
          for (int i = 0; i < n; ++i) connection(member(p, r, i), member(p, r, (i + 1) % n));
        }
      }
      return;
    }
    const int dp = gpus / (spec.tp * spec.pp);
    if (dp < 2) return;
    for (int p = 0; p < spec.pp; ++p) {
      for (int r = 0; r < spec.tp; ++r) {
        for (int d = 0; d < dp; ++d) {
          const int base = p * spec.tp * dp + r;
          connection(base + d * spec.tp, base + ((d + 1) % dp) * spec.tp);
        }
      }
    }
    return;
  }
  const int size = group_size(spec, gpus);
  Rng rng(derive_stream_seed(spec.seed, "traffic"));
  std::vector<int> perm;
  for (int first = 0; first < gpus; first += size) {
    const int n = std::min(size, gpus - first);
    if (n < 2) continue;
    switch (spec.pattern) {
      case TrafficPattern::kRing:
        for (int i = 0; i < n; ++i) connection(first + i, first + (i + 1) % n);
        break;
      case TrafficPattern::kPermutation: {
        // Sattolo's algorithm: a uniformly random permutation with a single cycle, so no GPU
        // is its own destination.
        perm.resize(static_cast<std::size_t>(n));
        std::iota(perm.begin(), perm.end(), 0);
        for (int i = n - 1; i > 0; --i) {
          const auto j = static_cast<int>(rng.uniform_below(static_cast<std::uint64_t>(i)));
          std::swap(perm[static_cast<std::size_t>(i)], perm[static_cast<std::size_t>(j)]);
        }
        for (int i = 0; i < n; ++i)
          connection(first + i, first + perm[static_cast<std::size_t>(i)]);
        break;
      }
      case TrafficPattern::kAllToAll:
        for (int i = 0; i < n; ++i) {
          for (int j = 0; j < n; ++j) {
            if (i != j) connection(first + i, first + j);
          }
        }
        break;
      case TrafficPattern::kIncast:
        for (int i = 1; i < n; ++i) connection(first + i, first);
        break;
      case TrafficPattern::kDpRing:
        break;
    }
  }
}

std::int64_t connection_count(const TrafficSpec& spec, int gpus) {
  if (gpus <= 1) return 0;
  if (spec.pattern == TrafficPattern::kDpRing) {
    check_dp(spec, gpus);
    const std::int64_t dp = gpus / (spec.tp * spec.pp);
    return dp < 2 ? 0 : static_cast<std::int64_t>(gpus);
  }
  const int size = group_size(spec, gpus);
  std::int64_t total = 0;
  for (int first = 0; first < gpus; first += size) {
    const std::int64_t n = std::min(size, gpus - first);
    if (n < 2) continue;
    switch (spec.pattern) {
      case TrafficPattern::kRing:
      case TrafficPattern::kPermutation:
        total += n;
        break;
      case TrafficPattern::kAllToAll:
        total += n * (n - 1);
        break;
      case TrafficPattern::kIncast:
        total += n - 1;
        break;
      case TrafficPattern::kDpRing:
        break;
    }
  }
  return total;
}

std::vector<Flow> make_flows(const TrafficSpec& spec, int gpus, int qps) {
  std::vector<Flow> flows;
  flows.reserve(static_cast<std::size_t>(connection_count(spec, gpus) * qps));
  for_each_connection(spec, gpus, [&](GpuId s, GpuId d) {
    for (int q = 0; q < qps; ++q) flows.push_back({s, d, q});
  });
  return flows;
}

}  // namespace trainsim::topo
