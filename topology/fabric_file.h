// Custom fabrics from files, for fabrics no builder makes: GraphML or GraphViz, read through
// Boost.Graph's readers, and the GraphViz writer that produces the same format.
//
// Format (docs/topology.md has the full description and scenarios/examples/ an example):
// - node attributes: `kind` = gpu | nvswitch | nic | switch (required); `server` = the server of a
//   gpu, nvswitch or nic (integer >= 0, required for those); `tier` = a switch's tier (1 = ToR),
//   given for every switch or for none (then tier = hops from the nearest NIC).
// - edge attributes: `gbps` = capacity per direction in Gbit/s (required); `latency_ns` = latency
//   of the edge's direction (optional: the forwarding latency of the device entered);
//   `latency_back_ns` = latency of the other direction (optional: latency_ns, if given).
// - every edge is one cable (two links), in a `graph` or a `digraph` alike; a `strict` graph
//   (which would merge parallel edges) is refused.
// - no other attribute is read, and none is ignored: an unknown one, one on the wrong element
//   (`tier` on a GPU, `gbps` on a node), one given twice, a node given attributes twice are
//   refused; a value is its whole text (`gbps=4e2` is 400, `gbps=2x` an error).
// - given tiers fit the cabling: NICs are cabled to tier 1, tiers have no gap.
// - GPUs are numbered by server, then by their order in the file.
// Every problem throws Error (kInput) naming the file, the line and the attribute.
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>

#include "topology/graph.h"
#include "topology/hardware.h"

namespace trainsim::topo {

enum class FabricFormat { kGraphMl, kGraphViz };

/// Reads a fabric file; the format follows the extension (.graphml/.xml: GraphML; .dot/.gv:
/// GraphViz). `base` gives what the file does not: the GPU model, latencies by device kind.
ClusterGraph read_fabric_file(const std::string& path, const ClusterSpec& base);

/// As read_fabric_file, from text; `name` stands for the file in messages.
ClusterGraph read_fabric_text(std::string_view text, FabricFormat format, const std::string& name,
                              const ClusterSpec& base);

/// The fabric a job (or the cluster of several jobs) runs on at flow and packet fidelity: the
/// file `c.fabric.file` names, or the Clos the fabric keys build. A file must hold at least
/// `c.gpus` GPUs, in servers of
/// `c.gpus_per_node` (the parallel layout places TP groups by server); otherwise Error (kInput)
/// naming `cluster.fabric.file`.
ClusterGraph cluster_graph(const ClusterSpec& c);

/// Writes `graph` as a GraphViz digraph in the format above (one edge per cable), which
/// read_fabric_text reads back into the same graph.
void write_graphviz(const ClusterGraph& graph, std::ostream& out);

}  // namespace trainsim::topo
