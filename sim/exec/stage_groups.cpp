#include "sim/exec/stage_groups.h"

#include <algorithm>

namespace trainsim::exec {

using plan::Dim;

coll::GroupShape dim_shape(const plan::Layout& L, Dim d) {
  switch (d) {
    case Dim::kTp: return L.tp;
    case Dim::kCp: return L.cp;
    case Dim::kEp: return L.ep;
    case Dim::kDp: return L.dp_cp;  // the gradient group, DP·CP (ProgramSet::group)
    case Dim::kExpertDp: return L.expert_dp;
    case Dim::kPp: return pp_pair_shape(L);
    case Dim::kNone: break;
  }
  return {};
}

coll::GroupShape pp_pair_shape(const plan::Layout& L) {
  // Until analytic-36 / program-31 a pipeline with two or more stages on a server counted every
  // pair as inside one, although the stages on the next server (and, interleaved, the wrap from
  // the last stage to the first) are reached through the NICs.
  const bool inside = L.pp.nodes <= 1;
  return coll::GroupShape{2, inside ? 2 : 1, inside ? 1 : 2, std::min(2, L.pp.pods)};
}

coll::GroupShape pair_shape(int a, int b, const topo::ClusterSpec& cluster) {
  const int gpn = std::max(1, cluster.gpus_per_node);
  const bool inside = a / gpn == b / gpn;
  const int pod = cluster.fabric.pod_gpus;
  const bool pods = pod > 0 && a / pod != b / pod;
  return coll::GroupShape{2, inside ? 2 : 1, inside ? 1 : 2, pods ? 2 : 1};
}

std::vector<std::vector<int>> stage_groups(const plan::ProgramSet& ps, int stage, Dim d) {
  std::vector<std::vector<int>> out;
  const auto& p = ps.layout.par;
  for (int dp = 0; dp < p.dp; ++dp) {
    for (int cp = 0; cp < p.cp; ++cp) {
      for (int tp = 0; tp < p.tp; ++tp) {
        // One rank leads each group: the first of it in this (dp, cp, tp) order.
        bool lead = false;
        switch (d) {
          case Dim::kTp: lead = tp == 0; break;
          case Dim::kCp: lead = cp == 0; break;
          case Dim::kDp: lead = dp == 0 && cp == 0; break;
          case Dim::kEp: lead = dp % p.ep == 0; break;
          case Dim::kExpertDp: lead = dp < p.ep && cp == 0; break;
          default: break;
        }
        if (lead) out.push_back(ps.group(d, ps.rank_of({tp, cp, dp, stage})));
      }
    }
  }
  return out;
}

std::vector<std::pair<int, int>> stage_transfer_pairs(const plan::ProgramSet& ps, int stage,
                                                      int peer_stage) {
  std::vector<std::pair<int, int>> pairs;
  const auto& p = ps.layout.par;
  for (int dp = 0; dp < p.dp; ++dp) {
    for (int cp = 0; cp < p.cp; ++cp) {
      for (int tp = 0; tp < p.tp; ++tp) {
        const int r = ps.rank_of({tp, cp, dp, stage});
        pairs.emplace_back(r, ps.peer_on_stage(r, peer_stage));
      }
    }
  }
  return pairs;
}

}  // namespace trainsim::exec
