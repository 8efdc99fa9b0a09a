// The Boost.Graph view of a ClusterGraph, for code that runs Boost's algorithms or writers on it.
// Kept out of graph.h so that the many files including the graph do not compile Boost.Graph.
#pragma once

#include <boost/graph/adjacency_list.hpp>

#include "topology/graph.h"

namespace trainsim::topo {

struct BoostLinkProps {
  LinkId id = kNoLink;
};

/// Vertex descriptor = NodeId (vecS storage, nodes added in id order); one edge per directed link.
using BoostGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS,
                                         boost::no_property, BoostLinkProps>;

struct BoostGraphHolder {
  BoostGraph graph;
};

}  // namespace trainsim::topo
