// sim/exec/comm_backend: the seam between the Program executor and the network. Expected results
// come from the functions each backend stands on, so a backend is checked against them alone:
//   * the closed form: a lone all-reduce of 64 MiB over the 16 GPUs of two A100 servers completes
//     at priced_collective's time (the profile's fit or NCCL's closed form), rounded to the
//     picosecond; a TP-overlap piece (pieces = 8) completes at 1/8 of the whole collective's time;
//   * the flow level: the same all-reduce starts exactly the flows that
//     coll::route_collective_flows makes of coll::plan_collective_flows (NCCL's choice across
//     servers: 2·g = 16 rings of 8 GPUs per server; each ring has 16 edges, 7 NVLink hops and one
//     crossing per server; one QP per connection by default; each ring one flow in lock step
//     over its edges' paths), and completes
//     when `trainsim collective --fidelity flow` (collective_flow) says it does: the same flows on
//     an idle fabric, up to picosecond rounding.
//   * a group inside one server goes through the closed form at flow fidelity too.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "scenarios/run_config.h"
#include "scenarios/scenario.h"
#include "sim/collective/flow.h"
#include "sim/exec/collective_model.h"
#include "sim/exec/comm_backend.h"
#include "topology/clos.h"

namespace trainsim {
namespace {

using exec::CommRequest;

exec::RunConfig config() {
  const std::string yaml =
      "model: {layers: 8, hidden: 1024, heads: 16, ffn_hidden: 4096, vocab: 64, seq_len: 1024}\n"
      "cluster: {preset: selene-a100, gpus: 32}\n"
      "parallel: {tp: 8, pp: 1, dp: 4, zero: 0, vpp: 1, schedule: 1f1b}\n"
      "training: {global_batch: 16, micro_batch: 1, recompute: none}\n"
      "optimizations: {system: megatron}\n";
  return scen::make_run_config(scen::load_scenario_string(yaml, "test-comm-backend.yaml"));
}

// One endpoint whose collectives run on `group`.
class OneGroup final : public exec::CommEndpoints {
 public:
  explicit OneGroup(std::vector<int> group) : group_(std::move(group)) {}
  int endpoint_count() const override { return 1; }
  std::vector<int> own_group(int, plan::Dim) const override { return group_; }
  std::vector<std::vector<int>> collective_groups(int, plan::Dim) const override {
    return {group_};
  }
  std::vector<std::pair<int, int>> transfer_pairs(int, int) const override {
    return {std::pair<int, int>(group_.front(), group_.back())};
  }

 private:
  std::vector<int> group_;
};

// Records when its events arrive.
struct Clock final : EventTarget {
  explicit Clock(Simulation& s) : sim(s) {}
  void on_event(std::uint64_t tag) override {
    done_at = sim.now();
    last_tag = tag;
  }
  Simulation& sim;
  TimePs done_at{-1};
  std::uint64_t last_tag = 0;
};

struct Outcome {
  TimePs done_at;
  exec::Result result;
};

Outcome run_one(exec::NetworkBackend kind, const std::vector<int>& group, int pieces = 1,
                bool ring_lockstep = true) {
  const exec::RunConfig cfg = config();
  exec::ExecOptions opt;
  opt.backend = kind;
  opt.network.ring_lockstep = ring_lockstep;
  Simulation sim(opt.seed);
  Outcome out;
  out.result.iteration_time_s = 1.0;
  const std::unique_ptr<exec::CommBackend> backend =
      exec::make_comm_backend(sim, cfg, opt, out.result);
  OneGroup endpoints(group);
  Clock clock(sim);
  CommRequest req;
  req.job = backend->add_job(endpoints);
  req.dim = plan::Dim::kDp;
  req.kind = coll::Kind::kAllReduce;
  req.bytes = 64.0 * 1024 * 1024;
  req.pieces = pieces;
  req.shape = coll::GroupShape{static_cast<int>(group.size()), 8, 2, 1};
  req.target = &clock;
  req.tag = 42;
  backend->start_collective(req);
  sim.run();
  EXPECT_EQ(clock.last_tag, 42u);
  out.done_at = clock.done_at;
  backend->report(clock.done_at.seconds(), out.result);
  return out;
}

std::vector<int> two_servers() {
  std::vector<int> g;
  for (int r = 0; r < 16; ++r) g.push_back(r);
  return g;
}

TEST(CommBackend, ClosedFormCompletesAtThePricedTime) {
  const exec::RunConfig cfg = config();
  const coll::LinkModel links = exec::link_model(cfg.cluster, cfg.profile);
  const double S = 64.0 * 1024 * 1024;
  const double t = exec::priced_collective(cfg.profile, coll::Kind::kAllReduce, S,
                                           coll::GroupShape{16, 8, 2, 1}, links, {})
                       .time_s;
  const Outcome whole = run_one(exec::NetworkBackend::kAnalytic, two_servers());
  EXPECT_EQ(whole.done_at, TimePs::from_seconds(t));
  const Outcome piece = run_one(exec::NetworkBackend::kAnalytic, two_servers(), 8);
  EXPECT_EQ(piece.done_at,
            TimePs::from_seconds(exec::priced_collective(cfg.profile, coll::Kind::kAllReduce,
                                                         8 * S, coll::GroupShape{16, 8, 2, 1},
                                                         links, {})
                                     .time_s /
                                 8));
  EXPECT_EQ(whole.result.exec.flows, 0);
}

TEST(CommBackend, FlowLevelStartsTheRoutedFlowsOfTheCollective) {
  const exec::RunConfig cfg = config();
  const topo::ClusterGraph graph = topo::build_cluster_graph(cfg.cluster);
  topo::Router router(graph, exec::ExecOptions{}.routing);
  const coll::LinkModel links = exec::link_model(cfg.cluster, cfg.profile);
  const std::vector<int> group = two_servers();
  const coll::FlowCollectiveRequest req{coll::Kind::kAllReduce, 64.0 * 1024 * 1024,
                                        std::vector<topo::GpuId>(group.begin(), group.end())};
  const coll::CollectiveFlows plan = coll::plan_collective_flows(req, graph, links, {}, 0);
  coll::RoutedFlows edges;
  coll::route_collective_flows(plan, router, {}, edges);
  // 16 rings × 16 edges × 1 QP.
  EXPECT_EQ(edges.bytes.size(), 16u * 16u);
  // In lock step, one flow per ring over its 16 edges' paths, back to back, with an edge's bytes.
  coll::RoutedFlows routed;
  coll::route_collective_flows(plan, router, {}, routed, true);
  ASSERT_EQ(routed.bytes.size(), 16u);
  for (std::size_t ring = 0; ring < 16; ++ring) {
    EXPECT_EQ(routed.bytes[ring], edges.bytes[ring * 16]);
    const std::vector<topo::LinkId> whole(routed.links.begin() + routed.offset[ring],
                                          routed.links.begin() + routed.offset[ring + 1]);
    const std::vector<topo::LinkId> joined(edges.links.begin() + edges.offset[ring * 16],
                                           edges.links.begin() + edges.offset[ring * 16 + 16]);
    EXPECT_EQ(whole, joined) << "ring " << ring;
  }

  const Outcome flow = run_one(exec::NetworkBackend::kFlow, group);
  EXPECT_EQ(flow.result.exec.flows, static_cast<long>(routed.bytes.size()));
  const std::vector<double> caps = coll::calibrated_capacities(
      graph, cfg.profile.nvlink.busbw_Bps / cfg.cluster.gpu.nvlink_Bps, cfg.profile.nic_efficiency);
  const coll::FlowCollectiveResult alone =
      coll::collective_flow(coll::Kind::kAllReduce, req.bytes, req.ranks, graph, router, caps,
                            links, {}, {});
  EXPECT_EQ(alone.flows, flow.result.exec.flows);
  EXPECT_NEAR(flow.done_at.seconds(), alone.cost.time_s, 2e-12);
  EXPECT_GT(flow.result.network.max_link_utilization, 0.0);
  // network.ring_lockstep false: a flow per edge, as before program-6. Alone on the fabric the
  // ring ends with its slowest edge either way, and its edges load the same links.
  const Outcome edgewise = run_one(exec::NetworkBackend::kFlow, group, 1, false);
  EXPECT_EQ(edgewise.result.exec.flows, static_cast<long>(edges.bytes.size()));
  EXPECT_NEAR(edgewise.done_at.seconds(), flow.done_at.seconds(), 2e-12);
  EXPECT_DOUBLE_EQ(edgewise.result.network.max_link_utilization,
                   flow.result.network.max_link_utilization);
}

// A point-to-point transfer's queue pairs are each bound at NCCL's per-peer rate over the
// queue pairs (CollectiveFlows::flow_cap_Bps / Q), the first one too: until program-30 the first
// flow of an empty list got no bound (the second back-filled it as unbounded), so a transfer's
// first queue pair ran at line rate, and at packet fidelity flooded its NIC (+14 % on an idle
// two-server transfer). A list that starts with unbounded flows keeps them unbounded.
TEST(CommBackend, EveryQueuePairOfATransferKeepsItsBound) {
  exec::RunConfig cfg = config();
  const topo::ClusterGraph graph = topo::build_cluster_graph(cfg.cluster);
  topo::RoutingConfig routing = exec::ExecOptions{}.routing;
  routing.qps_per_connection = 4;
  topo::Router router(graph, routing);
  coll::LinkModel links = exec::link_model(cfg.cluster, cfg.profile);
  links.p2p_net_Bps = 14e9;
  const coll::FlowCollectiveRequest send{coll::Kind::kSendRecv, 64.0 * 1024 * 1024, {0, 8}};
  const coll::CollectiveFlows plan = coll::plan_collective_flows(send, graph, links, {}, 0);
  ASSERT_GT(plan.flow_cap_Bps, 0);
  coll::RoutedFlows routed;
  coll::route_collective_flows(plan, router, {}, routed);
  ASSERT_EQ(routed.cap_Bps.size(), routed.bytes.size());
  ASSERT_GE(routed.bytes.size(), 4u);
  const double per_qp = plan.flow_cap_Bps / 4;
  for (std::size_t f = 0; f < routed.bytes.size(); ++f) EXPECT_EQ(routed.cap_of(f), per_qp) << f;
  // Appended after a collective without bounds: those stay unbounded, the transfer's are bound.
  const std::vector<int> group = two_servers();
  const coll::FlowCollectiveRequest ring{coll::Kind::kAllReduce, 64.0 * 1024 * 1024,
                                         std::vector<topo::GpuId>(group.begin(), group.end())};
  coll::RoutedFlows both;
  coll::route_collective_flows(coll::plan_collective_flows(ring, graph, links, {}, 0), router, {},
                               both);
  const std::size_t unbounded = both.bytes.size();
  ASSERT_TRUE(both.cap_Bps.empty());
  coll::route_collective_flows(plan, router, {}, both);
  ASSERT_EQ(both.cap_Bps.size(), both.bytes.size());
  for (std::size_t f = 0; f < both.bytes.size(); ++f) {
    EXPECT_EQ(both.cap_of(f), f < unbounded ? net::kUnlimited : per_qp) << f;
  }
}

// A group inside one server is priced in the closed form at a one-server shape, whatever shape
// the request carries (run_one's says two servers: the dimension's worst group, in an
// every-rank run where other groups of the dimension straddle servers; program-28). Until then
// it took the request's shape, and an NVLink group was priced as crossing.
TEST(CommBackend, FlowLevelPricesAGroupInsideOneServerInClosedForm) {
  const std::vector<int> one_server = {0, 1, 2, 3, 4, 5, 6, 7};
  const Outcome flow = run_one(exec::NetworkBackend::kFlow, one_server);
  EXPECT_EQ(flow.result.exec.flows, 0);
  const exec::RunConfig cfg = config();
  const coll::LinkModel links = exec::link_model(cfg.cluster, cfg.profile);
  const double t = exec::priced_collective(cfg.profile, coll::Kind::kAllReduce, 64.0 * 1024 * 1024,
                                           coll::GroupShape{8, 8, 1, 1}, links, {})
                       .time_s;
  EXPECT_EQ(flow.done_at, TimePs::from_seconds(t));
  const Outcome closed = run_one(exec::NetworkBackend::kAnalytic, one_server);
  EXPECT_GT(closed.done_at, flow.done_at);  // the request's two-server shape
}

}  // namespace
}  // namespace trainsim
