// Communicator initialization time at job start (MegaScale, NSDI'24 §3.5; network-models.md §5).
//
// Megatron-LM creates every process group on every rank (torch.distributed.new_group is
// collective), and each creation ends with a store-based barrier over all G ranks. With groups for
// TP (G/tp), PP (G/pp), DP (G/dp), CP, EP, model parallel (dp·cp), embedding and position
// embedding (G/pp each), the number of groups grows with G, so the store sees O(G²) operations: a
// single-threaded, blocking TCPStore serves them one at a time, a Redis-like asynchronous store
// faster. MegaScale's fix orders group creation so that each rank only takes part in its own
// groups with no global barrier in between: O(G) store operations. NCCL's bootstrap adds, per
// communicator a rank joins, 3 ring all-gathers of (|c| − 1) socket hops.
//
// Two constants are fitted to MegaScale's published 2,048-GPU figures (TCPStore ≈ 1,047 s,
// Redis-like ≈ 361 s, assuming the 175B layout TP 8 · PP 8 · DP 32 for that run); the ordered
// regime (< 5 s at 2,048, < 30 s above 10,000 GPUs) and every other size are predictions.
#pragma once

namespace trainsim::coll {

enum class StoreKind { kTcpStore, kRedis };

struct CommInitParams {
  // Seconds per store operation under the all-ranks barrier load, fitted: 1,047 s / (2,048 ranks ·
  // 1,120 groups) for the TCPStore and 361 s / the same for the Redis-like store.
  double tcpstore_op_s = 1047.0 / (2048.0 * 1120.0);
  double redis_op_s = 361.0 / (2048.0 * 1120.0);
  double bootstrap_hop_s = 20e-6;  // one TCP socket exchange between ranks on a LAN
  int bootstrap_allgathers = 3;    // NCCL merges its bootstrap exchanges into 3 all-gathers
};

struct CommInitLayout {
  int gpus = 1, tp = 1, pp = 1, dp = 1, cp = 1, ep = 1;
};

struct CommInitTime {
  double total_s = 0;
  double store_s = 0;            // store operations of group creation and barriers
  double bootstrap_s = 0;        // NCCL bootstrap all-gathers of the groups one rank joins
  long groups_total = 0;         // distinct process groups in the job
  int groups_per_rank = 0;       // groups each rank belongs to
  double store_operations = 0;
};

CommInitTime comm_init_time(const CommInitLayout& layout, StoreKind store, bool ordered,
                            const CommInitParams& params = {});

const char* to_string(StoreKind s);

}  // namespace trainsim::coll
