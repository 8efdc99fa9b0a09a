// Builders of folded-Clos cluster fabrics: k-ary fat trees, generic 2- and 3-tier (up to 5-tier)
// Clos networks from switch radix, port speed, per-tier oversubscription and ToR port splitting,
// rail-optimized multi-rail servers, and the pod structure of the cluster presets.
//
// The rules (docs/topology.md derives the counts for every preset):
// - Servers: `gpus_per_node` GPUs on one NVSwitch domain, `nics_per_node` NICs; GPU i uses NIC
//   floor(i * nics / gpus). Rail-optimized: NIC i of every server goes to the rail-i ToR of the
//   server's ToR group (one ToR per rail); otherwise all NICs of a server go to one ToR.
// - A non-top switch with radix R at down:up ratio o has floor(R*o/(1+o)) down ports; a ToR's
//   down ports are split `port_split` ways into NIC ports. Uplinks are provisioned for the down
//   ports a full switch uses: round(down bandwidth / (o * port speed)).
// - Tier t >= 2 groups blocks of tier t-1 into blocks of its own (pods at tier 2). Tier-t switches
//   are arranged in planes: the j-th switch of every tier-(t-1) block connects only to plane j,
//   spreading its uplinks evenly over that plane's switches (the k-ary fat tree's core groups).
//   Each plane gets the fewest switches that hold its links; blocks are filled to the radix.
// - The fabric uses the fewest tiers, up to `tiers`, that join every server: a tier all of whose
//   children fit under one block becomes the top, with every port pointing down.
// - `pod_gpus` fixes the size of the tier-2 blocks and `above_pod_oversubscription` their ratio.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "topology/graph.h"
#include "topology/hardware.h"

namespace trainsim::topo {

/// How one tier of a Clos is built.
struct TierPlan {
  int tier = 1;                // 1 = ToR/leaf
  int radix = 0;               // ports per switch
  int down_ports = 0;          // down links per switch of a full block (tier 1: NIC ports)
  int up_ports = 0;            // uplinks per switch (0 at the top)
  double down_Gbps = 0;        // speed of one down link (tier 1: the NIC's)
  double up_Gbps = 0;          // speed of one uplink
  int children_per_block = 0;  // tier 1: servers per ToR (group); above: tier-(t-1) blocks
  int switches_per_plane = 1;  // tier >= 2: switches of one plane in a block
  int links_per_pair = 1;      // tier >= 2: parallel links from a child switch to each of them
  int switches_per_block = 1;  // tier 1: 1 (or the rails of a ToR group); above: planes * per plane
  int blocks = 0;              // blocks at this tier
  int switches = 0;            // switches built at this tier
  bool top = false;
};

struct FabricPlan {
  int gpus = 0;
  int servers = 0;
  int rails = 1;                // ToRs per ToR group: nics_per_node when rail-optimized, else 1
  std::vector<TierPlan> tiers;  // bottom-up; size = tiers actually built
};

/// Plans the fabric of `spec` for `spec.gpus` GPUs. Throws Error: kInput for a spec no fabric
/// can have (non-positive counts, a NIC faster than its split ToR port), kInfeasible when the
/// switches cannot attach that many GPUs (radix too small for the GPUs asked, a pod that does not
/// fit the radix).
FabricPlan plan_fabric(const ClusterSpec& spec);

/// Builds the cluster graph of `spec` (as plan_fabric; the same errors).
ClusterGraph build_cluster_graph(const ClusterSpec& spec);

/// The k-ary fat tree of Al-Fares et al. (SIGCOMM'08): k pods of k/2 edge and k/2 aggregation
/// switches, (k/2)^2 core switches, k^3/4 hosts of one GPU and one NIC each, every link at
/// `link_Gbps`. Throws Error (kInput) for an odd k or k < 2.
ClusterGraph build_fat_tree(int k, double link_Gbps = 100);

/// The largest GPU count the spec's fabric can attach (the rules above); 0 when none.
std::int64_t fabric_capacity_gpus(const ClusterSpec& spec);

/// One sentence per tier whose full block is built at a down:up ratio more than 2 % away from
/// the one asked (uplinks are whole cables, at least one per switch: 8 servers' 200 Gb/s NICs
/// under a ToR with 400 Gb/s ports cannot be 8:1, they get one uplink, 4:1), naming the key.
/// Empty when every tier is built as asked. Throws as plan_fabric.
std::vector<std::string> oversubscription_notes(const ClusterSpec& spec);

}  // namespace trainsim::topo
