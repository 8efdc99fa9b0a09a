#include "sim/collective/flow.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "sim/core/error.h"
#include "sim/core/simulation.h"
#include "sim/network/flow_network.h"

namespace trainsim::coll {

std::vector<double> calibrated_capacities(const topo::ClusterGraph& graph, double nvlink_factor,
                                          double nic_factor) {
  std::vector<double> cap = graph.link_capacity_Bps();
  for (topo::LinkId l = 0; l < graph.link_count(); ++l) {
    switch (graph.link_kind(l)) {
      case topo::LinkKind::kNvlink: cap[static_cast<std::size_t>(l)] *= nvlink_factor; break;
      case topo::LinkKind::kNicUp:
      case topo::LinkKind::kNicDown: cap[static_cast<std::size_t>(l)] *= nic_factor; break;
      default: break;
    }
  }
  return cap;
}

std::vector<topo::LinkId> sender_links(const topo::ClusterGraph& graph) {
  std::vector<topo::LinkId> out;
  for (topo::LinkId l = 0; l < graph.link_count(); ++l) {
    const topo::LinkKind k = graph.link_kind(l);
    if (k == topo::LinkKind::kNvlink || k == topo::LinkKind::kPcie ||
        k == topo::LinkKind::kNicUp) {
      out.push_back(l);
    }
  }
  return out;
}

std::vector<topo::LinkId> nic_egress_links(const topo::ClusterGraph& graph) {
  std::vector<topo::LinkId> out;
  for (topo::LinkId l = 0; l < graph.link_count(); ++l) {
    if (graph.link_kind(l) == topo::LinkKind::kNicUp) out.push_back(l);
  }
  return out;
}

std::vector<std::uint8_t> implied_links(const topo::ClusterGraph& graph,
                                        std::span<const double> capacities) {
  std::vector<std::uint8_t> implied(static_cast<std::size_t>(graph.link_count()), 0);
  const auto cap = [&](topo::LinkId l) { return capacities[static_cast<std::size_t>(l)]; };
  for (int i = 0; i < graph.nic_count(); ++i) {
    const topo::NodeId nic = graph.nic_node(i);
    topo::LinkId to_gpu = topo::kNoLink, up = topo::kNoLink;
    int pcie = 0, uplinks = 0, other = 0;
    for (const topo::LinkId l : graph.out_links(nic)) {
      switch (graph.link_kind(l)) {
        case topo::LinkKind::kPcie: to_gpu = l; ++pcie; break;
        case topo::LinkKind::kNicUp: up = l; ++uplinks; break;
        default: ++other; break;
      }
    }
    if (pcie != 1 || uplinks != 1 || other != 0) continue;
    // Every cable is two links, each the other's reverse: GPU → NIC and the downlink.
    const topo::LinkId from_gpu = topo::ClusterGraph::reverse(to_gpu);
    const topo::LinkId down = topo::ClusterGraph::reverse(up);
    if (cap(from_gpu) >= cap(up)) implied[static_cast<std::size_t>(from_gpu)] = 1;
    if (cap(to_gpu) >= cap(down)) implied[static_cast<std::size_t>(to_gpu)] = 1;
  }
  return implied;
}

namespace {
using Prepared = CollectiveFlows;
}  // namespace

CollectiveFlows plan_collective_flows(const FlowCollectiveRequest& req, const topo::ClusterGraph& graph,
                 const LinkModel& links, const Choice& choice, int channels) {
  Prepared p;
  FlowCollectiveResult& out = p.result;
  const Kind kind = req.kind;
  const double bytes = req.bytes;
  const auto& ranks = req.ranks;
  const int n = static_cast<int>(ranks.size());
  if (n <= 1 || bytes <= 0) return p;
  // Group shape as the analytic model sees it (servers from the GPUs' server ids).
  std::vector<int> servers;
  for (int i = 0; i < n; ++i) {
    servers.push_back(graph.node(graph.gpu_node(ranks[static_cast<std::size_t>(i)])).server);
  }
  std::sort(servers.begin(), servers.end());
  // The most and the fewest of the group's ranks on one server, as the analytic shape counts
  // them (a partly filled last server: 8 + 1 is per_node 8, min_per_node 1; the mean, 5, chose
  // another NCCL protocol than the analytic model for the same group, and 2 MiB ran faster than
  // 1 MiB).
  int most = 0, fewest = n;
  for (std::size_t i = 0, j; i < servers.size(); i = j) {
    for (j = i; j < servers.size() && servers[j] == servers[i]; ++j) {
    }
    most = std::max(most, static_cast<int>(j - i));
    fewest = std::min(fewest, static_cast<int>(j - i));
  }
  servers.erase(std::unique(servers.begin(), servers.end()), servers.end());
  GroupShape shape;
  shape.ranks = n;
  shape.nodes = static_cast<int>(servers.size());
  shape.per_node = most;
  shape.min_per_node = fewest < most ? fewest : 0;
  const int g = shape.per_node;
  const int nodes = shape.nodes;

  // Latency and protocol: what the analytic model would choose for a ring of this shape.
  Choice ring_choice = choice;
  ring_choice.algorithm = Algorithm::kRing;
  const int pieces = std::max(1, req.pieces);
  const Cost analytic = collective_cost(kind, bytes * pieces, shape, links, ring_choice);
  const PairLatency& L =
      links.latency[static_cast<int>(Algorithm::kRing)][static_cast<int>(analytic.protocol)];
  const double factor = busbw_factor(kind, n);
  int steps = 0, net_steps = 0;
  switch (kind) {
    case Kind::kAllReduce: steps = 2 * (n - 1); net_steps = nodes > 1 ? 2 * nodes : 0; break;
    case Kind::kAllGather:
    case Kind::kReduceScatter: steps = n - 1; net_steps = nodes > 1 ? nodes - 1 : 0; break;
    case Kind::kBroadcast: steps = n; net_steps = nodes > 1 ? nodes : 0; break;
    case Kind::kAllToAll:
      // One network step per other server (each rank reaches a remote server's ranks through
      // the GPU on its rail: (n − g)/g on full servers), as the analytic model counts it.
      steps = g - 1;
      net_steps = nodes - 1;
      break;
    case Kind::kSendRecv: steps = 1; net_steps = nodes > 1 ? 1 : 0; break;
  }
  if (kind == Kind::kAllToAll) steps += net_steps;
  net_steps = std::min(net_steps, steps);
  out.latency_s =
      (L.base_s + (steps - net_steps) * L.nvlink_step_s + net_steps * L.net_step_s) / pieces;
  if (analytic.protocol == Protocol::kLL) {
    p.wire = (kind == Kind::kAllReduce || nodes > 1) ? 4.0 : 2.0;
  }
  if (analytic.protocol == Protocol::kLL128) p.wire = 1.0 / (g == 1 && nodes > 1 ? 0.7 : 0.92);
  out.cost = analytic;
  out.cost.algorithm = Algorithm::kRing;

  auto& conns = p.conns;
  int C = channels;
  const auto rank = [&](int i) { return ranks[static_cast<std::size_t>(i)]; };
  if (kind == Kind::kAllToAll) {
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        if (i != j) conns.push_back({rank(i), rank(j), bytes / n, 0});
      }
    }
    C = 1;
  } else if (kind == Kind::kSendRecv) {
    if (C <= 0) C = nodes > 1 ? 2 : 1;
    for (int c = 0; c < C; ++c) conns.push_back({rank(0), rank(1), bytes / C, c});
    // NCCL's channels per net peer bound the transfer (LinkModel::p2p_net_Bps), shared by them.
    if (nodes > 1 && links.p2p_net_Bps > 0) p.flow_cap_Bps = links.p2p_net_Bps / C;
  } else {
    // Ring collectives: each edge carries factor·S (broadcast: S) over the collective.
    const double edge_bytes = factor * bytes;
    if (C <= 0 && (nodes == 1 || g == 1)) C = nodes > 1 ? 2 : std::max(1, g);
    if (nodes == 1 || g == 1) {
      for (int c = 0; c < C; ++c) {
        for (int i = 0; i < n; ++i) conns.push_back({rank(i), rank((i + 1) % n), edge_bytes / C, c});
      }
    } else {
      // Hierarchical rings: the ranks grouped by server (servers in the order their first rank
      // appears, ranks in the given order within one). A server may hold fewer of the group's
      // ranks than another (a job whose last server is partly used): its chain is shorter and
      // channel c enters it at local index c mod its own count.
      std::vector<std::vector<int>> local;  // per server: indices into `ranks`
      {
        std::vector<int> slot(servers.size(), -1);
        for (int i = 0; i < n; ++i) {
          const int server = graph.node(graph.gpu_node(rank(i))).server;
          const auto at = static_cast<std::size_t>(
              std::lower_bound(servers.begin(), servers.end(), server) - servers.begin());
          if (slot[at] < 0) {
            slot[at] = static_cast<int>(local.size());
            local.emplace_back();
          }
          local[static_cast<std::size_t>(slot[at])].push_back(i);
        }
      }
      const auto at = [&](int k, int l) {
        const std::vector<int>& v = local[static_cast<std::size_t>(k)];
        return rank(v[static_cast<std::size_t>(l)]);
      };
      const auto count = [&](int k) { return static_cast<int>(local[static_cast<std::size_t>(k)].size()); };
      // NCCL's choice: two channels per NIC across servers. Every rank runs the communicator's
      // channel count, the smallest any rank's topology search found (init.cc takes the minimum
      // over the ranks' graphs), so a server holding fewer of the group's ranks, whose search
      // finds two per NIC of its own GPUs, sets 2·g_min for all: the analytic model's g_min·B_nic
      // bound. With 2·g channels its few NICs carried more channels than the full servers' and
      // the ring ran at the most loaded NIC's pace (15 ranks on DGX H100: 247 GB/s, not 322).
      if (C <= 0) {
        int g_min = g;
        for (int k = 0; k < nodes; ++k) g_min = std::min(g_min, count(k));
        C = 2 * g_min;
      }
      for (int c = 0; c < C; ++c) {
        for (int k = 0; k < nodes; ++k) {
          const int gk = count(k);
          const int r = c % gk;
          for (int step = 0; step + 1 < gk; ++step) {
            conns.push_back({at(k, (r + step) % gk), at(k, (r + step + 1) % gk), edge_bytes / C, c});
          }
          const int next = (k + 1) % nodes;
          conns.push_back({at(k, r), at(next, c % count(next)), edge_bytes / C, c});
        }
      }
    }
  }
  out.channels = C;
  p.ring = kind != Kind::kAllToAll && kind != Kind::kSendRecv;
  return p;
}

void route_collective_flows(const CollectiveFlows& plan, topo::Router& router,
                            std::span<const std::uint8_t> implied, RoutedFlows& out,
                            bool lockstep) {
  const int Q = std::max(1, router.config().qps_per_connection);
  out.latency_s = std::max(out.latency_s, plan.result.latency_s);
  const bool spray = router.config().mode == topo::RoutingMode::kSpray;
  const auto no_path = [&](const FlowConnection& conn) {
    throw_infeasible("no path from GPU " + std::to_string(conn.src) + " to GPU " +
                         std::to_string(conn.dst) + ": " +
                         router.why_unreachable(conn.src, conn.dst),
                     {"", 0, ""});
  };
  if (lockstep && plan.ring && !spray) {
    // One flow per channel and queue pair: the ring's edges in lock step (see flow.h). Each
    // edge is routed with the label it has as a flow of its own, so the links are the same.
    std::vector<topo::LinkId> path;
    std::size_t first = 0;
    while (first < plan.conns.size()) {
      std::size_t last = first + 1;
      while (last < plan.conns.size() && plan.conns[last].qp_base == plan.conns[first].qp_base) ++last;
      const auto total = static_cast<std::int64_t>(std::llround(plan.conns[first].bytes * plan.wire));
      for (int q = 0; q < Q; ++q) {
        const std::int64_t share = total / Q + (q < total % Q ? 1 : 0);
        if (share <= 0) continue;
        for (std::size_t e = first; e < last; ++e) {
          const FlowConnection& conn = plan.conns[e];
          if (!router.route(topo::Flow{conn.src, conn.dst, conn.qp_base * Q + q}, path)) no_path(conn);
          out.links.insert(out.links.end(), path.begin(), path.end());
          for (const topo::LinkId l : path) {
            if (implied.empty() || implied[static_cast<std::size_t>(l)] == 0) out.net_links.push_back(l);
          }
        }
        if (!out.cap_Bps.empty()) out.cap_Bps.push_back(net::kUnlimited);
        out.bytes.push_back(share);
        out.offset.push_back(static_cast<std::uint32_t>(out.links.size()));
        out.net_offset.push_back(static_cast<std::uint32_t>(out.net_links.size()));
      }
      first = last;
    }
    return;
  }
  if (spray && out.spray_first.empty()) {
    out.spray_first.assign(out.bytes.size() + 1, 0);  // flows routed before: none of their own
    out.spray_offset.assign(1, 0);
  }
  std::vector<topo::LinkId> path;
  std::vector<std::vector<topo::LinkId>> paths;
  topo::GpuId paths_src = -1, paths_dst = -1;
  for (const FlowConnection& conn : plan.conns) {
    const auto total = static_cast<std::int64_t>(std::llround(conn.bytes * plan.wire));
    if (spray && (conn.src != paths_src || conn.dst != paths_dst)) {
      paths_src = conn.src;
      paths_dst = conn.dst;
      const std::uint64_t count = router.path_count(conn.src, conn.dst);
      if (count > kMaxSprayPaths) {
        throw_input("GPU " + std::to_string(conn.src) + " and GPU " + std::to_string(conn.dst) +
                        " have " + std::to_string(count) + " equal-cost paths; spraying at " +
                        "packet fidelity keeps at most " + std::to_string(kMaxSprayPaths),
                    {"", 0, "network.routing.mode"}, "use ecmp, or a smaller fabric");
      }
      paths = router.paths(conn.src, conn.dst, kMaxSprayPaths);
    }
    for (int q = 0; q < Q; ++q) {
      const std::int64_t share = total / Q + (q < total % Q ? 1 : 0);
      if (share <= 0) continue;
      if (spray) {
        if (paths.empty()) {
          path.clear();
        } else {
          path = paths.front();
          for (const std::vector<topo::LinkId>& p : paths) {
            out.spray_links.insert(out.spray_links.end(), p.begin(), p.end());
            out.spray_offset.push_back(static_cast<std::uint32_t>(out.spray_links.size()));
          }
          out.spray_first.push_back(static_cast<std::uint32_t>(out.spray_offset.size() - 1));
        }
      }
      if ((spray && paths.empty()) ||
          (!spray && !router.route(topo::Flow{conn.src, conn.dst, conn.qp_base * Q + q}, path))) {
        no_path(conn);
      }
      // Bounds are listed once some flow has one: the flows before it had none. (Until
      // program-30 the first capped flow of an empty list was left without its bound, and the
      // second back-filled it as unbounded: every transfer's first queue pair ran above NCCL's
      // per-peer rate.)
      if (plan.flow_cap_Bps > 0 || !out.cap_Bps.empty()) {
        out.cap_Bps.resize(out.bytes.size(), net::kUnlimited);
        out.cap_Bps.push_back(plan.flow_cap_Bps > 0 ? plan.flow_cap_Bps / Q : net::kUnlimited);
      }
      out.bytes.push_back(share);
      out.links.insert(out.links.end(), path.begin(), path.end());
      out.offset.push_back(static_cast<std::uint32_t>(out.links.size()));
      for (const topo::LinkId l : path) {
        if (implied.empty() || implied[static_cast<std::size_t>(l)] == 0) out.net_links.push_back(l);
      }
      out.net_offset.push_back(static_cast<std::uint32_t>(out.net_links.size()));
    }
  }
}

std::vector<FlowCollectiveResult> collective_flow_batch(
    std::span<const FlowCollectiveRequest> requests, const topo::ClusterGraph& graph,
    topo::Router& router, std::span<const double> capacities, const LinkModel& links,
    const Choice& choice, const FlowCollectiveOptions& options) {
  if (choice.algorithm && *choice.algorithm != Algorithm::kRing) {
    throw_input(std::string(to_string(*choice.algorithm)) +
                    " is modelled at analytic fidelity only; flow fidelity runs rings",
                {"", 0, "collectives.algorithm"}, "use ring");
  }
  if (router.config().mode == topo::RoutingMode::kSpray && !options.packet) {
    throw_input("packet spraying splits a flow over links; collectives at flow fidelity need one "
                "path per queue pair (packet fidelity sprays packet by packet)",
                {"", 0, "network.routing.mode"}, "use ecmp with more QPs per connection, or --fidelity packet");
  }
  std::vector<Prepared> prepared;
  prepared.reserve(requests.size());
  for (const FlowCollectiveRequest& req : requests) {
    prepared.push_back(plan_collective_flows(req, graph, links, choice, options.channels));
  }

  Simulation sim(options.seed);
  std::vector<TimePs> last(requests.size(), TimePs{0});
  auto on_done = [&](const net::FlowDone& d) {
    TimePs& t = last[static_cast<std::size_t>(d.tag)];
    t = std::max(t, d.end);
  };
  net::FlowNetwork* fluid = nullptr;
  net::PacketNetwork* packets = nullptr;
  if (options.packet) {
    net::PacketNetworkOptions popts;
    popts.config = options.network;
    popts.packet = options.packet_config;
    popts.sender_links = sender_links(graph);
    popts.host_queue_links = nic_egress_links(graph);
    packets = &sim.emplace<net::PacketNetwork>(
        std::vector<double>(capacities.begin(), capacities.end()), graph.link_latency(), popts);
    packets->flow_done().subscribe(on_done);
  } else {
    net::FlowNetworkOptions fopts;
    fopts.config = options.network;
    fopts.sender_links = sender_links(graph);
    fluid = &sim.emplace<net::FlowNetwork>(
        std::vector<double>(capacities.begin(), capacities.end()), fopts);
    fluid->flow_done().subscribe(on_done);
  }

  RoutedFlows routed;
  for (std::size_t i = 0; i < prepared.size(); ++i) {
    routed = RoutedFlows{};
    route_collective_flows(prepared[i], router, {}, routed,
                           !options.packet && options.network.ring_lockstep);
    for (std::size_t f = 0; f < routed.bytes.size(); ++f) {
      const net::FlowSpec spec = routed.spec(f, false, i);
      if (packets != nullptr) {
        packets->start_flow(spec);
      } else {
        fluid->start_flow(spec);
      }
    }
    prepared[i].result.flows += static_cast<std::int64_t>(routed.bytes.size());
  }
  sim.run();
  std::vector<FlowCollectiveResult> out;
  for (std::size_t i = 0; i < prepared.size(); ++i) {
    FlowCollectiveResult r = prepared[i].result;
    r.makespan_s = last[i].seconds();
    r.cost.time_s = r.flows > 0 ? r.latency_s + r.makespan_s : 0.0;
    out.push_back(r);
  }
  return out;
}

FlowCollectiveResult collective_flow(Kind kind, double bytes, std::span<const topo::GpuId> ranks,
                                     const topo::ClusterGraph& graph, topo::Router& router,
                                     std::span<const double> capacities, const LinkModel& links,
                                     const Choice& choice, const FlowCollectiveOptions& options) {
  const FlowCollectiveRequest req{kind, bytes, std::vector<topo::GpuId>(ranks.begin(), ranks.end())};
  return collective_flow_batch(std::span<const FlowCollectiveRequest>(&req, 1), graph, router,
                               capacities, links, choice, options)
      .front();
}

}  // namespace trainsim::coll
