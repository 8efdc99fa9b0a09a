// Synthetic traffic patterns for looking at a fabric's load before any training run: which GPU
// sends to which. Each (src, dst) pair is one connection; a connection of q QPs is q flows.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "topology/ids.h"
#include "topology/routing.h"

namespace trainsim::topo {

enum class TrafficPattern : std::uint8_t {
  kRing,         // in each group, GPU i sends to GPU i+1 (the last to the first)
  kDpRing,       // the ring of every data-parallel group of the rank layout (TrafficSpec)
  kPermutation,  // in each group, a random cyclic permutation (no GPU sends to itself)
  kAllToAll,     // in each group, every GPU sends to every other
  kIncast,       // in each group, every GPU sends to the group's first GPU
};

const char* to_string(TrafficPattern p);
std::optional<TrafficPattern> traffic_pattern_from(std::string_view name);

struct TrafficSpec {
  TrafficPattern pattern = TrafficPattern::kRing;
  // GPUs per group: groups are consecutive ranks 0..group-1, group..2*group-1, ... (the last may
  // be smaller); 0 = one group of every GPU. Not used by dp-ring.
  int group = 0;
  // dp-ring: ranks are laid out as Megatron does, TP fastest, then DP, then PP; the DP group of
  // (pipeline stage p, TP rank r) is {p*tp*dp + d*tp + r} (dp counts the CP ranks too: the
  // gradient group is DP·CP, consecutive at stride tp). With pp_before_dp (parallel.order
  // tp-cp-pp-dp, Llama 3's) PP comes before DP, and CP rank j of replica d is
  // {d*tp*cp*pp + p*tp*cp + j*tp + r}.
  int tp = 1;
  int pp = 1;
  int cp = 1;
  bool pp_before_dp = false;
  std::uint64_t seed = 1;  // permutation
};

/// Calls `connection(src, dst)` for every connection of the pattern over `gpus` GPUs, in a fixed
/// order. Throws Error (kInput) when the pattern does not fit (dp-ring: gpus not a multiple of
/// tp*pp).
void for_each_connection(const TrafficSpec& spec, int gpus,
                         const std::function<void(GpuId, GpuId)>& connection);

/// How many connections for_each_connection makes.
std::int64_t connection_count(const TrafficSpec& spec, int gpus);

/// The flows of the pattern: every connection as `qps` flows (QP 0..qps-1).
std::vector<Flow> make_flows(const TrafficSpec& spec, int gpus, int qps);

}  // namespace trainsim::topo
