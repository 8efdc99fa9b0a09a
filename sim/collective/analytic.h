// Closed-form (α–β) cost of NCCL-style collectives on a hierarchical cluster, with NCCL's
// algorithms (ring, tree, NVLS) and protocols (LL, LL128, Simple).
//
// A communication group is described by its shape on the cluster (ranks, members per server,
// servers, pods). Sizes follow nccl-tests: `bytes` is the buffer size S (for all-gather the gathered
// output, for reduce-scatter the input), and the bus bandwidth factors are nccl-tests' own:
// all-reduce 2(n−1)/n, all-gather / reduce-scatter / all-to-all (n−1)/n, broadcast and send/recv 1.
//
// Bandwidth on a rail-optimized cluster (shared/reference/network-models.md §4.5): a ring over n
// ranks with g per server sends factor·S/g per GPU through its NIC and (g−1)/g·factor·S over
// NVLink, so busbw = min(g·B_nic, g/(g−1)·B_nvlink). Latency follows NCCL's tuning model
// (src/graph/tuning.cc, v2.19–2.21, network-models.md §4.2): a base latency per call and algorithm
// and protocol, then a hop latency per ring step over NVLink or the network (2·nodes network steps
// for all-reduce, nodes−1 for all-gather / reduce-scatter), a tree's log2(nodes) depth, NVLS's
// fixed cost. Protocols scale the bandwidth: LL carries 4 data bytes per 8, LL128 120 per 128.
// Without an explicit choice the fastest supported (algorithm, protocol) pair is used, as NCCL's
// tuner does.
#pragma once

#include <optional>
#include <string>

namespace trainsim::coll {

enum class Kind { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kBroadcast, kSendRecv };
enum class Algorithm { kRing, kTree, kNvls };
enum class Protocol { kLL, kLL128, kSimple };

const char* to_string(Kind k);
const char* to_string(Algorithm a);
const char* to_string(Protocol p);

/// Where the members of one communication group sit.
struct GroupShape {
  int ranks = 1;     // members
  int per_node = 1;  // members on one server (≥ 1)
  int nodes = 1;     // servers the group spans
  int pods = 1;      // full-bisection pods the group spans
  // Members on the least-populated server when the last is partly used (9 ranks on 8-GPU
  // servers: 1); 0 = per_node. Every ring enters and leaves that server through its NICs.
  int min_per_node = 0;
};

/// Latencies of one (algorithm, protocol) pair, seconds (NCCL baseLat and hwLat).
struct PairLatency {
  double base_s = 0;
  double nvlink_step_s = 0;
  double net_step_s = 0;
};

/// Bandwidths and latencies of the cluster as the collective model sees them.
struct LinkModel {
  double nvlink_busbw_Bps = 0;      // ring bus bandwidth inside a server (Simple protocol)
  double nvls_busbw_Bps = 0;        // NVLS all-reduce bus bandwidth inside a server (0 = none)
  double nic_Bps_per_gpu = 0;       // achieved NIC bandwidth per GPU (NICs per node / GPUs per node)
  double above_pod_oversubscription = 1.0;
  // A point-to-point transfer's bound over the network (its NCCL channels × what one moves);
  // 0 = only the NIC bounds it.
  double p2p_net_Bps = 0;
  // latency[algorithm][protocol]; defaults are NCCL's tuning table; Ring/Simple comes from the
  // calibration profile.
  PairLatency latency[3][3];

  LinkModel();
  /// Sets the Ring/Simple latencies (what the calibration profile measures).
  void set_ring_simple(double base_s, double nvlink_step_s, double net_step_s);
};

struct Cost {
  double time_s = 0;
  double nvlink_bytes = 0;  // bytes each rank sends over NVLink
  double nic_bytes = 0;     // bytes each rank sends through its NIC
  Algorithm algorithm = Algorithm::kRing;
  Protocol protocol = Protocol::kSimple;
};

/// NCCL_ALGO / NCCL_PROTO-style restrictions; unset = choose the fastest.
struct Choice {
  std::optional<Algorithm> algorithm;
  std::optional<Protocol> protocol;
};

/// Bus-bandwidth factor of nccl-tests for a collective over n ranks.
double busbw_factor(Kind k, int n);

/// NCCL (v2.17–v2.27) runs NVLS only when the communicator has more GPUs than this on a server.
inline constexpr int kNvlsMinGpusPerServer = 2;
/// NVLS all-reduce algorithm bandwidth (bytes of buffer per second), the same at any group size:
/// the profile's 8-GPU bus bandwidth × 8/14 (see analytic.cpp).
double nvls_algbw(const LinkModel& l);
/// NVLS chunk size NCCL picks for a one-server all-reduce of `bytes` over `heads` GPUs (bytes).
double nvls_chunk_bytes(double bytes, int heads);
/// Bytes' worth of time the NVLS kernel's three-stage chunk pipeline adds on one server (two
/// loops of 16 CTAs × heads chunks, or the whole buffer twice if it is smaller than a loop).
double nvls_pipeline_fill_bytes(double bytes, int heads);

/// Time and per-rank traffic of one collective of `bytes` over `group`. Throws trainsim::Error
/// (kInput) when `choice` asks for an algorithm or protocol the collective or GPU cannot use.
Cost collective_cost(Kind k, double bytes, const GroupShape& group, const LinkModel& links,
                     const Choice& choice = {});

}  // namespace trainsim::coll
