// Which GPUs a communication of the Program executor involves: the group shape the closed form
// prices, and under the symmetry shortcut (one actor per pipeline stage standing for all its
// ranks) every concrete group or transfer pair a stage's communication stands for. Pure functions
// of the ProgramSet's layout.
#pragma once

#include <utility>
#include <vector>

#include "sim/plan/program.h"

namespace trainsim::exec {

/// The shape of a group of dimension `d` as the closed form sees it (a pipeline transfer:
/// pp_pair_shape).
coll::GroupShape dim_shape(const plan::Layout& layout, plan::Dim d);

/// A pipeline transfer's pair as the closed form prices every one: on one server only when the
/// whole pipeline is (otherwise some neighbouring stages, or under interleaving the last and the
/// first, sit on two servers, and the pipeline moves at that pair's pace), across pods when the
/// pipeline spans several.
coll::GroupShape pp_pair_shape(const plan::Layout& layout);

/// The pair of GPUs `a` and `b` (cluster GPU indices) as a two-rank group.
coll::GroupShape pair_shape(int a, int b, const topo::ClusterSpec& cluster);

/// Every group of dimension `d` on pipeline stage `stage`, each once, the group of the stage's
/// first rank (rank_of({0, 0, 0, stage})) first.
std::vector<std::vector<int>> stage_groups(const plan::ProgramSet& ps, int stage, plan::Dim d);

/// Every (sender, receiver) pair of a transfer from `stage` to `peer_stage`, one per rank of
/// `stage`, the stage's first rank first.
std::vector<std::pair<int, int>> stage_transfer_pairs(const plan::ProgramSet& ps, int stage,
                                                      int peer_stage);

}  // namespace trainsim::exec
