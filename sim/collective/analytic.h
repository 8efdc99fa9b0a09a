// Closed-form (α–β) cost of NCCL-style collectives on a hierarchical cluster.
//
// A communication group is described by its shape on the cluster (ranks, members per server,
// servers, pods). Sizes follow nccl-tests: `bytes` is the buffer size S (for all-gather the gathered
// output, for reduce-scatter the input), and the bus bandwidth factors are nccl-tests' own:
// all-reduce 2(n−1)/n, all-gather / reduce-scatter / all-to-all (n−1)/n, broadcast and send/recv 1.
//
// Bandwidth on a rail-optimized cluster (shared/reference/network-models.md §4.5): a ring over n
// ranks with g per server sends factor·S/g per GPU through its NIC and (g−1)/g·factor·S over
// NVLink, so busbw = min(g·B_nic, g/(g−1)·B_nvlink). Latency follows NCCL's tuning model
// (tuning.cc): a base latency per call, then per ring step the NVLink or network hop latency, with
// 2·nodes network steps for all-reduce and nodes−1 for all-gather / reduce-scatter.
#pragma once

#include <string>

namespace trainsim::coll {

enum class Kind { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kBroadcast, kSendRecv };

const char* to_string(Kind k);

/// Where the members of one communication group sit.
struct GroupShape {
  int ranks = 1;     // members
  int per_node = 1;  // members on one server (≥ 1)
  int nodes = 1;     // servers the group spans
  int pods = 1;      // full-bisection pods the group spans
};

/// Bandwidths and latencies of the cluster as the collective model sees them.
struct LinkModel {
  double nvlink_busbw_Bps = 0;      // ring bus bandwidth inside a server
  double nvls_busbw_Bps = 0;        // NVLS all-reduce bus bandwidth inside a server (0 = none)
  double nvlink_step_latency_s = 0;
  double nic_Bps_per_gpu = 0;       // achieved NIC bandwidth per GPU (NICs per node / GPUs per node)
  double net_step_latency_s = 0;
  double base_latency_s = 0;
  double above_pod_oversubscription = 1.0;
};

struct Cost {
  double time_s = 0;
  double nvlink_bytes = 0;  // bytes each rank sends over NVLink
  double nic_bytes = 0;     // bytes each rank sends through its NIC
};

/// Bus-bandwidth factor of nccl-tests for a collective over n ranks.
double busbw_factor(Kind k, int n);

/// Time and per-rank traffic of one collective of `bytes` over `group`.
Cost collective_cost(Kind k, double bytes, const GroupShape& group, const LinkModel& links);

}  // namespace trainsim::coll
