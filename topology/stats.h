// Topology statistics: what a fabric is made of (switches and links per tier, bisection
// bandwidth, oversubscription) and how a traffic pattern loads it under a router (flows per link
// per link class, the max/mean ratio, the busiest links).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "topology/graph.h"
#include "topology/routing.h"
#include "topology/traffic.h"

namespace trainsim::topo {

struct TierSummary {
  int tier = 1;
  std::string name;  // "tor", "agg", ...
  int switches = 0;
  int down_cables = 0;  // cables to the tier below (tier 1: to NICs)
  int up_cables = 0;    // cables to the tier above
  double down_Bps = 0;  // their capacity, one direction
  double up_Bps = 0;
  double oversubscription = 0;  // down_Bps / up_Bps; 0 at the top tier, infinite with every uplink down
};

/// Cables of one kind, e.g. "nic-tor" or "tor-agg".
struct CableSummary {
  std::string name;
  int cables = 0;
  double Bps = 0;  // capacity of one cable per direction (the largest, if they differ)
};

struct FabricSummary {
  std::string description;
  int gpus = 0;
  int servers = 0;
  int nics = 0;
  int nodes = 0;
  int links = 0;  // directed
  std::vector<TierSummary> tiers;
  std::vector<CableSummary> cables;
  // What the NICs can put into the fabric: per NIC the lesser of its GPU (PCIe) cables and its
  // switch cables (a dual-homed NIC counts once), summed.
  double injection_Bps = 0;
  // Bandwidth across a balanced cut of the GPUs, one direction: half the narrowest of the
  // injection and each tier's total uplink capacity (exact for a symmetric Clos; with failed
  // cables or switches an upper bound, since the cut may cross more of them than their share).
  double bisection_Bps = 0;
  int failed_cables = 0;  // cables down (a failed switch takes its cables with it)
};

/// The fabric's parts per tier. With `failures`, the capacities (per tier, injection, bisection)
/// count the cables that are up; the cable counts stay those built.
FabricSummary summarize_fabric(const ClusterGraph& graph, const FailureSet* failures = nullptr);

/// Links grouped by what they join and in which direction, e.g. "tor->agg" or "nic->tor".
struct LinkClassLoad {
  std::string name;
  int links = 0;
  int used = 0;              // links carrying any flow
  double max = 0;            // flows on the busiest link (sprayed flows count fractionally)
  double mean = 0;           // flows per link over all links of the class
  double max_over_mean = 0;  // 0 when the class carries nothing
};

struct LoadSummary {
  std::int64_t connections = 0;
  std::int64_t flows = 0;
  std::vector<Flow> unrouted;          // flows without a path
  std::vector<LinkClassLoad> classes;  // in a fixed order: GPU side first, then tier by tier
  std::vector<std::pair<LinkId, double>> busiest;  // most loaded links, most first
  std::vector<double> link_flows;                  // flows per link, indexed by LinkId
};

/// Routes every flow of `traffic` (each connection as `qps` QPs) with `router` and counts flows
/// per link; keeps the `top` busiest links and every flow that has no path.
LoadSummary measure_load(Router& router, const TrafficSpec& traffic, int qps, int top = 10);

/// The class name of a link ("tor->agg") and every class of a graph in report order.
std::string link_class_name(const ClusterGraph& graph, LinkId link);

/// `per_link` (any per-link quantity: flows, bytes, utilisation; indexed by LinkId) summarised
/// per link class in report order: links, links above 0, the busiest and the mean.
std::vector<LinkClassLoad> link_class_loads(const ClusterGraph& graph,
                                            const std::vector<double>& per_link);

}  // namespace trainsim::topo
