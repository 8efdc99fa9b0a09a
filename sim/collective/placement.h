// Where the ranks of a stand-alone collective (the `trainsim collective` benchmark, like
// nccl-tests) sit on a cluster.
#pragma once

#include <string>

#include "sim/collective/analytic.h"
#include "topology/hardware.h"

namespace trainsim::coll {

enum class Placement {
  kPacked,  // fill servers: all GPUs of a server before the next (nccl-tests -g 8 on N nodes)
  kRail,    // one GPU per server, the same local index everywhere: traffic stays on one rail
  kSpread,  // one GPU per server, local index varying: traffic crosses rails
};

const char* to_string(Placement p);

/// Shape of `ranks` placed on `cluster`. Throws trainsim::Error(kInfeasible) when they do not fit
/// the fabric (`cluster.max_gpus()`, or its server count for one-per-server placements).
GroupShape placement_shape(int ranks, Placement placement, const topo::ClusterSpec& cluster);

}  // namespace trainsim::coll
