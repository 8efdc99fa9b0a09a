#include "topology/hardware.h"

#include "topology/clos.h"

namespace trainsim::topo {

std::int64_t ClusterSpec::max_gpus() const { return fabric_capacity_gpus(*this); }

}  // namespace trainsim::topo
