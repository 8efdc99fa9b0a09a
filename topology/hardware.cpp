#include "topology/hardware.h"

#include <algorithm>
#include <cmath>

namespace trainsim::topo {

// A folded Clos of L tiers built from radix-k switches attaches 2·(k/2)^L endpoints at 1:1
// (k-ary fat-tree: k^3/4 hosts for L = 3, Al-Fares et al. SIGCOMM'08). A down:up ratio o at a tier
// gives that tier k·o/(o+1) downlinks instead of k/2, so the endpoint count scales by 2o/(o+1)
// per oversubscribed tier. Splitting each ToR downlink into `port_split` ports multiplies NIC ports.
std::int64_t ClusterSpec::max_gpus() const {
  if (fabric.pod_gpus > 0 && fabric.pods > 0) {
    return static_cast<std::int64_t>(fabric.pod_gpus) * fabric.pods;
  }
  const double k = fabric.switch_radix;
  if (fabric.tiers <= 0 || k < 2 || nics_per_node <= 0) return 0;
  double endpoints = 2.0 * std::pow(k / 2.0, fabric.tiers);
  for (double o : fabric.oversubscription) {
    if (o > 0) endpoints *= 2.0 * o / (o + 1.0);
  }
  if (fabric.pod_gpus > 0 && fabric.above_pod_oversubscription > 1.0) {
    const double o = fabric.above_pod_oversubscription;
    endpoints *= 2.0 * o / (o + 1.0);
  }
  const double nic_ports = endpoints * std::max(1, fabric.port_split);
  const double servers = std::floor(nic_ports / nics_per_node);
  return static_cast<std::int64_t>(servers) * gpus_per_node;
}

}  // namespace trainsim::topo
