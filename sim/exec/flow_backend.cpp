#include "sim/exec/flow_backend.h"

#include <algorithm>
#include <bit>
#include <string>

#include "sim/core/error.h"
#include "topology/clos.h"
#include "topology/fabric_file.h"
#include "topology/stats.h"

namespace trainsim::exec {
namespace {

// start_group keys: a transfer's is 1 + its cache index, a collective's kCollectiveKeys + its
// cache index; each job after the first has its own range above kJobKeys.
constexpr std::uint64_t kCollectiveKeys = std::uint64_t{1} << 40;
constexpr int kJobKeyShift = 48;

}  // namespace

FlowBackend::FlowBackend(Simulation& sim, const RunConfig& cfg, const ExecOptions& options,
                         const Result& analytic)
    : sim_(sim), cfg_(cfg), closed_form_(sim, cfg, analytic), links_(link_model(cfg)) {
  if (options.routing.mode == topo::RoutingMode::kSpray &&
      options.backend != NetworkBackend::kPacket) {
    throw_input("packet spraying splits a flow over links; flow fidelity needs one path per "
                "queue pair (packet fidelity sprays packet by packet)",
                {"", 0, "network.routing.mode"},
                "use ecmp with more QPs per connection, or --fidelity packet");
  }
  if (cfg.collectives.algorithm && *cfg.collectives.algorithm != coll::Algorithm::kRing) {
    throw_input(std::string(coll::to_string(*cfg.collectives.algorithm)) +
                    " is modelled at analytic fidelity only; flow fidelity runs rings",
                {"", 0, "collectives.algorithm"}, "use ring");
  }
  graph_.emplace(topo::cluster_graph(cfg.cluster));
  failures_.emplace(*graph_);
  topo::apply_fabric_failures(*graph_, cfg.cluster.fabric, *failures_);
  router_.emplace(*graph_, options.routing, *failures_);
  std::vector<double> caps = coll::calibrated_capacities(
      *graph_, cfg.profile.nvlink.busbw_Bps / cfg.cluster.gpu.nvlink_Bps,
      cfg.profile.nic_efficiency);
  const bool packet = options.backend == NetworkBackend::kPacket;
  // PCIe hops whose constraint the NIC's link implies (coll::implied_links) are left out of the
  // solver's paths, under every congestion-control model: the derating applies to switch egress
  // ports only (coll::sender_links), and a hold only lowers a rate, so such a hop never binds.
  // Never at packet fidelity, where every hop is a port with its latency.
  if (packet) {
    implied_.assign(caps.size(), 0);
  } else {
    implied_ = coll::implied_links(*graph_, caps);
  }
  if (packet) {
    net::PacketNetworkOptions po;
    po.config = options.network;
    po.packet = options.packet;
    po.sender_links = coll::sender_links(*graph_);
    po.host_queue_links = coll::nic_egress_links(*graph_);
    packet_config_ = options.packet;
    packets_ = &sim_.emplace<net::PacketNetwork>(std::move(caps), graph_->link_latency(), po);
    packets_->flow_done().subscribe([this](const net::FlowDone& d) { flow_done(d); });
    return;
  }
  ring_lockstep_ = options.network.ring_lockstep;
  net::FlowNetworkOptions fo;
  fo.config = options.network;
  fo.sender_links = coll::sender_links(*graph_);
  fo.check_invariants = false;
  fo.merge_replayed_completions = true;  // flow_done counts flows and keeps the latest end
  network_ = &sim_.emplace<net::FlowNetwork>(std::move(caps), fo);
  network_->flow_done().subscribe([this](const net::FlowDone& d) { flow_done(d); });
}

// A flow's tag: its communication's in-flight slot (low 32 bits) and its copy (high 32).
void FlowBackend::flow_done(const net::FlowDone& d) {
  const auto slot = static_cast<std::uint32_t>(d.tag);
  InFlight& c = in_flight_[slot];
  if (!c.copy_end.empty()) {
    TimePs& end = c.copy_end[static_cast<std::size_t>(d.tag >> 32)];
    end = std::max(end, d.end);
  }
  c.flows_left -= d.count;
  if (c.flows_left == 0) {
    if (c.copy_spread_s != nullptr) {
      *c.copy_spread_s = 0;
      // Copies without a flow (none so far: every copy of a group routes at least one)
      // keep the sentinel -1 and do not count.
      TimePs lo = TimePs::never(), hi{-1};
      for (const TimePs end : c.copy_end) {
        if (end.ps < 0) continue;
        lo = std::min(lo, end);
        hi = std::max(hi, end);
      }
      if (hi.ps >= 0) *c.copy_spread_s = (hi - lo).seconds();
    }
    sim_.schedule(sim_.now() + c.latency, *c.target, c.tag);
    free_in_flight_.push_back(slot);
  }
}

int FlowBackend::add_job(const CommEndpoints& endpoints) {
  Job& job = jobs_.emplace_back();
  job.endpoints = &endpoints;
  return static_cast<int>(jobs_.size()) - 1;
}

bool FlowBackend::inside_server(int a, int b) const {
  const int gpn = std::max(1, cfg_.cluster.gpus_per_node);
  return a / gpn == b / gpn;
}

bool FlowBackend::group_inside_server(Job& job, int e, plan::Dim d) const {
  const std::size_t key = static_cast<std::size_t>(e) * 8 + static_cast<std::size_t>(d);
  if (job.inside.size() <= key) {
    job.inside.resize(static_cast<std::size_t>(job.endpoints->endpoint_count()) * 8, -1);
  }
  if (job.inside[key] < 0) {
    // Every group the endpoint stands for (under the symmetry shortcut, all of its stage's):
    // groups that do not line up with the servers (TP 4 on 6-GPU servers) straddle a server
    // boundary where others do not, and then every group is routed as flows (the
    // representative's group alone decided until 2026-12-06, so a straddling group behind an
    // inside one ran at NVLink speed).
    bool inside = true;
    for (const std::vector<int>& g : job.endpoints->collective_groups(e, d)) {
      for (int r : g) inside = inside && inside_server(r, g.front());
    }
    job.inside[key] = inside ? 1 : 0;
  }
  return job.inside[key] == 1;
}

// Starts the routed flows of `c` for `req`: it completes its latency after its last flow. The
// flows start as a group under `group_key`, whose components the network records and replays
// when they run alone (FlowNetwork::start_group); their link bytes are counted at the end.
int priority_class(const net::PacketConfig& packet, int job, plan::Dim dim) {
  using By = net::PacketConfig::PriorityBy;
  int cls = 0;
  if (packet.priority_by == By::kJob) {
    cls = job;
  } else if (packet.priority_by == By::kDimension) {
    switch (dim) {
      case plan::Dim::kTp: cls = 0; break;
      case plan::Dim::kCp: cls = 1; break;
      case plan::Dim::kEp: cls = 2; break;
      case plan::Dim::kPp: cls = 3; break;
      default: cls = 4; break;  // DP (dense and expert), and anything else
    }
  }
  return std::min(cls, packet.priority_classes - 1);
}

void FlowBackend::start(const CommRequest& req, Cached& c, std::uint64_t group_key) {
  ++c.starts;
  std::uint32_t slot;
  if (!free_in_flight_.empty()) {
    slot = free_in_flight_.back();
    free_in_flight_.pop_back();
  } else {
    slot = static_cast<std::uint32_t>(in_flight_.size());
    in_flight_.emplace_back();
  }
  const coll::RoutedFlows& flows = c.flows;
  const std::size_t n = flows.bytes.size();
  InFlight& f = in_flight_[slot];
  f.target = req.target;
  f.tag = req.tag;
  f.flows_left = static_cast<int>(n);
  f.latency = TimePs::from_seconds(flows.latency_s);
  f.copy_spread_s = req.copy_spread_s;
  f.copy_end.clear();
  if (c.copies > 1 && req.copy_spread_s != nullptr) f.copy_end.assign(c.copies, TimePs{-1});
  // (Rebuilt too if the Cached was ever copied: the specs' spans point into the routed flows.)
  if (c.specs.size() != n ||
      (n > 0 && c.specs[0].path.data() != flows.net_links.data() + flows.net_offset[0])) {
    // A cached communication's job and dimension (hence its priority class) never change.
    int priority = 0;
    if (packets_ != nullptr) priority = priority_class(packet_config_, req.job, req.dim);
    c.specs.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      c.specs[i] = flows.spec(i, true, static_cast<std::uint64_t>(c.copy_of[i]) << 32);
      c.specs[i].priority = priority;
    }
  }
  if (packets_ != nullptr) {
    for (net::FlowSpec spec : c.specs) {
      spec.tag |= slot;
      packets_->start_flow(spec);
    }
  } else {
    network_->start_group(c.specs, group_key, slot);  // each flow's tag: slot | copy << 32
  }
  flows_started_ += static_cast<long>(n);
  if (n == 0) {
    if (f.copy_spread_s != nullptr) *f.copy_spread_s = 0;
    sim_.schedule(sim_.now() + f.latency, *f.target, f.tag);
    free_in_flight_.push_back(slot);
  }
}

void FlowBackend::start_collective(const CommRequest& req) {
  Job& job = jobs_[static_cast<std::size_t>(req.job)];
  if (group_inside_server(job, req.endpoint, req.dim)) {
    // In the closed form at the shape of a group inside one server: the request carries the
    // dimension's worst group (plan::group_shape), which, in an every-rank run where some
    // groups straddle a server and this one does not, is not this group's (a TP group on
    // NVLink was priced as crossing: 1.79 s against 0.80 s for the shortcut's flows).
    CommRequest inside = req;
    inside.shape.per_node = inside.shape.ranks;
    inside.shape.nodes = 1;
    inside.shape.pods = 1;
    inside.shape.min_per_node = 0;
    closed_form_.start_collective(inside);
    return;
  }
  const CollKey key{req.endpoint, static_cast<int>(req.dim), static_cast<int>(req.kind),
                    std::bit_cast<std::int64_t>(req.bytes), req.pieces};
  auto [it, fresh] = job.coll_index.emplace(key, job.collectives.size());
  if (fresh) {
    Cached& c = job.collectives.emplace_back();
    c.ready = true;
    coll::Choice choice;
    if (req.kind != coll::Kind::kAllToAll) choice.protocol = cfg_.collectives.protocol;
    const auto groups = job.endpoints->collective_groups(req.endpoint, req.dim);
    for (std::size_t g = 0; g < groups.size(); ++g) {
      coll::FlowCollectiveRequest fr{req.kind, req.bytes,
                                     std::vector<topo::GpuId>(groups[g].begin(), groups[g].end()),
                                     req.pieces};
      coll::route_collective_flows(coll::plan_collective_flows(fr, *graph_, links_, choice, 0),
                                   *router_, implied_, c.flows,
                                   packets_ == nullptr && ring_lockstep_);
      c.copy_of.resize(c.flows.bytes.size(), static_cast<std::uint32_t>(g));
    }
    c.copies = static_cast<std::uint32_t>(std::max<std::size_t>(1, groups.size()));
  }
  const std::uint64_t job_keys = static_cast<std::uint64_t>(req.job) << kJobKeyShift;
  start(req, job.collectives[it->second], job_keys + kCollectiveKeys + it->second);
}

void FlowBackend::start_transfer(const CommRequest& req) {
  Job& job = jobs_[static_cast<std::size_t>(req.job)];
  const std::size_t key =
      static_cast<std::size_t>(req.endpoint) * 2 + static_cast<std::size_t>(req.direction);
  if (job.transfers.size() <= key) {
    job.transfers.resize(static_cast<std::size_t>(job.endpoints->endpoint_count()) * 2);
  }
  Cached& c = job.transfers[key];
  if (!c.ready) {
    c.ready = true;
    // Under the symmetry shortcut the endpoint stands for every pair of its stage, and some may
    // cross servers where others do not (stages whose ranks do not fill their servers evenly):
    // the transfer is in the closed form (NVLink) only when every pair stays inside a server,
    // else every pair is a flow (the first pair alone decided until 2026-12-06, so a crossing
    // pair behind an inside first one ran at NVLink speed).
    const std::vector<std::pair<int, int>> pairs =
        job.endpoints->transfer_pairs(req.endpoint, req.direction);
    c.inside = std::all_of(pairs.begin(), pairs.end(),
                           [&](const auto& pr) { return inside_server(pr.first, pr.second); });
    if (!c.inside) {
      for (std::size_t p = 0; p < pairs.size(); ++p) {
        coll::FlowCollectiveRequest fr{coll::Kind::kSendRecv, req.bytes,
                                       {pairs[p].first, pairs[p].second}};
        coll::route_collective_flows(coll::plan_collective_flows(fr, *graph_, links_, {}, 0),
                                     *router_, implied_, c.flows);
        c.copy_of.resize(c.flows.bytes.size(), static_cast<std::uint32_t>(p));
      }
      c.copies = static_cast<std::uint32_t>(std::max<std::size_t>(1, pairs.size()));
    }
  }
  if (c.inside) {
    closed_form_.start_transfer(req);
    return;
  }
  const std::uint64_t job_keys = static_cast<std::uint64_t>(req.job) << kJobKeyShift;
  start(req, c, job_keys + key + 1);
}

// Adds the bytes of `c`'s flows to every link of their paths, once per start.
void FlowBackend::count_link_bytes(const Cached& c, std::vector<double>& link_bytes) const {
  const coll::RoutedFlows& flows = c.flows;
  for (std::size_t f = 0; f < flows.bytes.size(); ++f) {
    const double bytes = static_cast<double>(flows.bytes[f]) * static_cast<double>(c.starts);
    const std::span<const std::uint32_t> sprayed = flows.spray_offsets_of(f);
    if (sprayed.size() > 2) {
      // Sprayed: each path carries its expected share (the packets pick paths uniformly).
      const double share = bytes / static_cast<double>(sprayed.size() - 1);
      for (std::size_t j = 0; j + 1 < sprayed.size(); ++j) {
        for (std::uint32_t k = sprayed[j]; k < sprayed[j + 1]; ++k) {
          link_bytes[static_cast<std::size_t>(flows.spray_links[k])] += share;
        }
      }
      continue;
    }
    for (std::uint32_t k = flows.offset[f]; k < flows.offset[f + 1]; ++k) {
      link_bytes[static_cast<std::size_t>(flows.links[k])] += bytes;
    }
  }
}

void FlowBackend::report(double executed_s, Result& r) const {
  // Utilisation is over the iteration as the result states it (a run's: the executed timeline
  // plus slowest-GPU pacing and global sync, as at the other fidelities; several jobs': the
  // makespan), so that bytes / (capacity × iteration_time_s) gives every figure.
  const double iter = r.iteration_time_s > 0 ? r.iteration_time_s : executed_s;
  std::vector<double> link_bytes(static_cast<std::size_t>(graph_->link_count()), 0.0);
  for (const Job& job : jobs_) {
    for (const Cached& c : job.transfers) count_link_bytes(c, link_bytes);
  }
  for (const Job& job : jobs_) {
    for (const Cached& c : job.collectives) count_link_bytes(c, link_bytes);
  }
  NetworkStats& ns = r.network;
  double max_u = 0, sum_u = 0, nic_sum = 0;
  int n = 0, nic_n = 0;
  double up_max = 0, up_sum = 0;
  int up_n = 0;
  const auto& caps = graph_->link_capacity_Bps();
  for (topo::LinkId l = 0; l < graph_->link_count(); ++l) {
    const double u = link_bytes[static_cast<std::size_t>(l)] /
                     (caps[static_cast<std::size_t>(l)] * iter);
    const topo::LinkKind k = graph_->link_kind(l);
    if (k == topo::LinkKind::kPcie) continue;
    max_u = std::max(max_u, u);
    sum_u += u;
    ++n;
    if (k == topo::LinkKind::kNicUp) {
      nic_sum += u;
      ++nic_n;
    }
    if (k == topo::LinkKind::kUp) {
      up_max = std::max(up_max, link_bytes[static_cast<std::size_t>(l)]);
      up_sum += link_bytes[static_cast<std::size_t>(l)];
      ++up_n;
    }
  }
  ns.max_link_utilization = max_u;
  ns.mean_link_utilization = n > 0 ? sum_u / n : 0;
  // Traffic inside a server is priced in closed form, not routed: NVLink keeps the bytes per GPU
  // the analytic evaluation counted, over this run's iteration (not the analytic one).
  const double nvlink_Bps = cfg_.cluster.gpu.nvlink_Bps;
  ns.nvlink_utilization = nvlink_Bps > 0 ? ns.nvlink_bytes_per_gpu / (nvlink_Bps * iter) : 0;
  ns.nic_utilization = nic_n > 0 ? nic_sum / nic_n : 0;
  ns.has_ecmp = up_n > 0 && up_sum > 0;
  ns.ecmp_imbalance = ns.has_ecmp ? up_max / (up_sum / up_n) : 0;
  std::vector<double> utilization(static_cast<std::size_t>(graph_->link_count()));
  for (std::size_t l = 0; l < utilization.size(); ++l) {
    utilization[l] = link_bytes[l] / (caps[l] * iter);
  }
  for (const topo::LinkClassLoad& c : topo::link_class_loads(*graph_, utilization)) {
    ns.link_classes.push_back({c.name, c.links, c.used, c.max, c.mean});
  }

  // Links more than one job used, from each job's own link bytes.
  ns.jobs = static_cast<int>(jobs_.size());
  if (jobs_.size() > 1) {
    std::vector<int> users(link_bytes.size(), 0);
    std::vector<double> own(link_bytes.size());
    for (const Job& job : jobs_) {
      std::fill(own.begin(), own.end(), 0.0);
      for (const Cached& c : job.transfers) count_link_bytes(c, own);
      for (const Cached& c : job.collectives) count_link_bytes(c, own);
      for (std::size_t l = 0; l < own.size(); ++l) users[l] += own[l] > 0 ? 1 : 0;
    }
    double shared = 0, total = 0;
    for (topo::LinkId l = 0; l < graph_->link_count(); ++l) {
      const topo::LinkKind k = graph_->link_kind(l);
      if (k == topo::LinkKind::kPcie || k == topo::LinkKind::kNvlink) continue;
      const std::size_t i = static_cast<std::size_t>(l);
      total += link_bytes[i];
      if (users[i] > 1) {
        ++ns.links_shared_by_jobs;
        shared += link_bytes[i];
      }
    }
    ns.shared_link_bytes_fraction = total > 0 ? shared / total : 0;
  }

  r.exec.flows = flows_started_;
  if (packets_ != nullptr) {
    const net::PacketNetworkStats& st = packets_->stats();
    ns.has_packets = true;
    ns.packets = {st.packets,  st.ecn_marks, st.pauses,     st.paused_s,
                  st.max_queue_bytes, st.sprayed_flows, st.reordered, st.retransmitted_bytes,
                  st.timeouts, st.time_above_buffer_s};
    return;
  }
  const net::FlowNetworkStats& st = network_->stats();
  r.exec.solves = st.solves;
  r.exec.solves_partial = st.solves_partial;
  r.exec.solves_partial_given_up = st.solves_partial_given_up;
  r.exec.flows_refilled = st.flows_resolved;
  r.exec.flows_replayed = st.flows_replayed;
  r.exec.replays_materialized = st.replays_materialized;
  r.exec.flows_per_solve =
      st.solves > 0 ? static_cast<double>(st.flows_resolved) / static_cast<double>(st.solves) : 0;
}

}  // namespace trainsim::exec
