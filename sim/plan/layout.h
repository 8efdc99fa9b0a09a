// Where the ranks of each parallel dimension sit, and whether a parallel configuration can run.
//
// Ranks are numbered Megatron-style with TP fastest, then CP, then DP (EP is the fastest part of
// DP), then PP: rank = tp_i + tp·(cp_i + cp·(dp_i + dp·pp_i)); or, in the tp-cp-pp-dp order
// (parallel.order, Llama 3's), rank = tp_i + tp·(cp_i + cp·(pp_i + pp·dp_i)). On a cluster of servers with
// `gpus_per_node` GPUs, that decides which groups stay inside a server (NVLink) and which cross
// the network, which is all the analytic cost model needs to know about placement.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "sim/collective/analytic.h"
#include "sim/model/transformer.h"
#include "sim/plan/config.h"
#include "topology/hardware.h"

namespace trainsim::plan {

struct Layout {
  ParallelConfig par;
  int microbatches = 1;       // micro-batches per pipeline per iteration
  int layers_first_stage = 0; // layers on pipeline stage 0
  int layers_last_stage = 0;  // layers on the last stage
  int layers_max_stage = 0;   // layers on the most loaded stage
  int layers_max_middle = 0;  // layers on the most loaded of stages 1 .. pp−2 (0 when pp ≤ 2)
  std::vector<int> stage_layers;  // layers per pipeline stage
  /// First global layer and layer count of model chunk `chunk` on pipeline stage `stage`.
  /// Stages hold contiguous ranges; interleaved chunks j = chunk·pp + stage follow each other.
  /// A stage's layers split over its chunks as evenly as possible, the smaller chunk first on the
  /// first stage (it also runs the embedding) and last on the last stage (it runs the loss).
  std::pair<int, int> chunk_layers(int stage, int chunk) const;
  /// chunk_layers(stage, chunk).second in O(1) (chunk_layers sums the earlier chunks).
  int chunk_size(int stage, int chunk) const;
  /// Whether the chunks of `stage` hold equal layer counts (O(1)).
  bool even_chunks(int stage) const;
  coll::GroupShape tp, cp, dp, ep, expert_dp, pp;
  // The ranks that hold the same weights and reduce their gradients together: DP·CP (the CP ranks
  // of a replica compute gradients of the same weights on different tokens).
  coll::GroupShape dp_cp;
};

/// Shape of a group of `n` ranks whose members are `stride` ranks apart: where the groups of
/// such a dimension do not line up with the servers, the shape of the worst one (most servers,
/// then fewest members on one), bounded by `cluster.gpus`.
coll::GroupShape group_shape(int n, int stride, const topo::ClusterSpec& cluster);
/// Whether every group of `n` ranks `stride` apart lines up with servers of `gpus_per_node`
/// (each on whole servers, or whole groups on each server, the stride dividing the server): then
/// every group sits relative to the servers as the first one does.
bool groups_line_up(long n, long stride, long gpus_per_node);

/// Whether training.recompute selective-op (TorchTitan's per-op policy) is modelled for this
/// model and parallel configuration: one GPU's whole dense, sequential layer, so CP 1, no experts,
/// no parallel block, and TP only with sequence parallelism (make_layout refuses the rest).
bool selective_op_modelled(const model::ModelConfig& model, const ParallelConfig& par);

/// Checks that the configuration can run and places it. Throws trainsim::Error(kInfeasible) naming
/// the offending key (`parallel.tp`, `training.global_batch`, ...) with the numbers involved.
Layout make_layout(const model::ModelConfig& model, const topo::ClusterSpec& cluster,
                   const ParallelConfig& par, const TrainingConfig& train);

/// Why a configuration cannot run: what make_layout (or the analytic core) throws as
/// trainsim::Error(kInfeasible), as data.
struct Infeasibility {
  const char* field = "";  // the offending key ("parallel.tp"), "" when not about one key
  std::string message;
  std::string hint;
};

/// make_layout without exceptions, for sweeps (most --auto points fail a check): returns false
/// and, when `why` is given, fills it with the field, message and hint make_layout would throw.
/// Strings are built only for a failing check.
bool try_make_layout(const model::ModelConfig& model, const topo::ClusterSpec& cluster,
                     const ParallelConfig& par, const TrainingConfig& train, Layout& out,
                     Infeasibility* why);

}  // namespace trainsim::plan
