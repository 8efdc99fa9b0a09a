#include "sim/collective/comm_init.h"

#include <utility>

namespace trainsim::coll {

const char* to_string(StoreKind s) { return s == StoreKind::kTcpStore ? "tcpstore" : "redis"; }

CommInitTime comm_init_time(const CommInitLayout& L, StoreKind store, bool ordered,
                            const CommInitParams& p) {
  CommInitTime t;
  const long G = L.gpus;
  // (group size, number of such groups) for every kind of group Megatron-LM creates.
  std::pair<int, long> kinds[8] = {
      {L.tp, G / L.tp},                // tensor parallel
      {L.pp, G / L.pp},                // pipeline parallel
      {L.dp, G / L.dp},                // data parallel
      {L.tp * L.pp, G / (L.tp * L.pp)},  // model parallel (tp·pp)
      {2, G / L.pp},                   // embedding (first and last stage)
      {1, G / L.pp},                   // position embedding (first stage)
  };
  int n = 6;  // a fixed array, not a vector: the analytic core calls this for every sweep point
  if (L.cp > 1) kinds[n++] = {L.cp, G / L.cp};
  if (L.ep > 1) kinds[n++] = {L.ep, G / L.ep};
  for (int i = 0; i < n; ++i) {
    const auto& [size, count] = kinds[i];
    t.groups_total += count;
    t.groups_per_rank += 1;
    t.bootstrap_s += p.bootstrap_allgathers * (size - 1) * p.bootstrap_hop_s;
  }
  const double op = store == StoreKind::kTcpStore ? p.tcpstore_op_s : p.redis_op_s;
  t.store_operations = ordered ? static_cast<double>(G) * t.groups_per_rank
                               : static_cast<double>(G) * t.groups_total;
  t.store_s = t.store_operations * op;
  t.total_s = t.store_s + t.bootstrap_s;
  return t;
}

}  // namespace trainsim::coll
