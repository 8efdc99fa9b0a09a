// Typed ids shared by the topology (which builds links and routes) and the flow network (which
// reads link capacities as a flat array indexed by LinkId and flows as lists of LinkIds).
#pragma once

#include <cstdint>

namespace trainsim::topo {

/// A directed link of the cluster graph (each cable is two links, one per direction).
using LinkId = std::int32_t;
/// A vertex of the cluster graph: GPU, NVSwitch domain, NIC, or switch.
using NodeId = std::int32_t;

inline constexpr LinkId kNoLink = -1;
inline constexpr NodeId kNoNode = -1;

}  // namespace trainsim::topo
