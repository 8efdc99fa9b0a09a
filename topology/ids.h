// Typed ids shared by the topology (which builds links and routes) and the flow network (which
// reads link capacities as a flat array indexed by LinkId and flows as lists of LinkIds).
#pragma once

#include <cstdint>

namespace trainsim::topo {

/// A directed link of the cluster graph (each cable is two links, one per direction).
using LinkId = std::int32_t;
/// A vertex of the cluster graph: GPU, NVSwitch domain, NIC, or switch.
using NodeId = std::int32_t;
/// A GPU of the cluster, numbered 0..gpus-1 in rank order (server-major: GPU i of server s is
/// s * gpus_per_node + i in the builders' graphs).
using GpuId = std::int32_t;

inline constexpr LinkId kNoLink = -1;
inline constexpr NodeId kNoNode = -1;

}  // namespace trainsim::topo
