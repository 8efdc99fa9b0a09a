#include "sim/exec/program_exec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numbers>
#include <optional>
#include <bit>
#include <deque>
#include <unordered_map>

#include "sim/collective/flow.h"
#include "sim/core/error.h"
#include "sim/core/simulation.h"
#include "sim/exec/collective_model.h"
#include "sim/exec/compute_model.h"
#include "sim/network/flow_network.h"
#include "sim/plan/program.h"
#include "topology/clos.h"
#include "topology/stats.h"

namespace trainsim::exec {
namespace {

using plan::Dim;
using plan::Part;
using plan::Pass;
using plan::Stream;
using plan::Task;
using plan::TaskType;

constexpr int kStreams = plan::kStreamCount;
constexpr std::uint64_t kCommTag = 1ull << 62;

enum Exposed { kExTp, kExCp, kExEp, kExPp, kExDp, kExCount };

int exposed_index(Dim d) {
  switch (d) {
    case Dim::kTp: return kExTp;
    case Dim::kCp: return kExCp;
    case Dim::kEp: return kExEp;
    case Dim::kPp: return kExPp;
    default: return kExDp;
  }
}

const char* category(const Task& t) {
  if (t.type == TaskType::kCompute) {
    if (t.pass == Pass::kData) return "data";
    if (t.pass == Pass::kOptimizer) return "optimizer";
    return "compute";
  }
  if (t.dim == Dim::kExpertDp) return "dp";
  return plan::to_string(t.dim);
}

// Per-role data computed once.
struct Role {
  const plan::Program* prog = nullptr;
  std::vector<std::int64_t> duration_ps;            // compute tasks (before stragglers/jitter)
  std::vector<std::uint32_t> stream_list[kStreams]; // task indices per stream, in order
  std::vector<std::uint16_t> kind;                  // task → kind id (name)
  std::vector<std::string> kind_names;
  std::vector<std::string> kind_category;
};

struct StreamState {
  std::uint32_t next = 0;       // position of the head task
  std::uint32_t completed = 0;  // tasks done
  bool running = false;         // the head has started (or is posted, for communication)
  TimePs post;                  // when the head was posted / started
  TimePs start;                 // when its work began (communication: the transfer/collective)
};

struct Actor {
  int stage = 0;
  int rank = 0;              // representative rank
  bool all_stage = false;    // stands for every rank of its stage (symmetry shortcut)
  double factor = 1.0;       // straggler slow-down
  StreamState s[kStreams];
  std::uint32_t posted_send[2] = {0, 0};  // [0] activations (next), [1] gradients (prev)
  std::uint32_t posted_recv[2] = {0, 0};
  TimePs compute_end;        // end of the last compute task
  TimePs end;                // end of the last task of any stream
  double acc_compute = 0, acc_opt = 0, acc_data = 0, acc_bubble = 0;
  double acc_exposed[kExCount] = {};
  std::vector<double> kind_total;
  std::vector<long> kind_count;
  std::optional<Rng> jitter;
  bool traced = false;
  struct Span {
    std::uint32_t task;
    TimePs start, end;
  };
  std::vector<Span> spans;
  // What the last completion on each stream was (for charging compute-stream gaps).
  struct Done {
    std::uint32_t task = 0;
    TimePs start;
  } last_done[kStreams];
};

// One communication in flight (a collective or a transfer), with the streams it completes.
struct Comm {
  struct Member {
    int actor;
    Stream stream;
  };
  std::vector<Member> members;
  std::uint32_t task = 0;  // task index (role of the first member)
  int flows_left = 0;
  TimePs latency;
  TimePs start;
  bool done = false;
};

class Executor final : public EventTarget {
 public:
  Executor(const RunConfig& cfg, const ExecOptions& opt, const plan::ProgramSet& ps)
      : cfg_(cfg), opt_(opt), ps_(ps), L_(ps.layout), sim_(opt.seed) {}

  void run(Result& r);

 private:
  void on_event(std::uint64_t tag) override;

  void setup_roles();
  void setup_actors();
  void setup_network();
  void try_start(int a, int cause_stream);
  void start_task(int a, Stream st, std::uint32_t ti, int cause_stream);
  bool ready(const Actor& act, const Role& role, const Task& t) const;
  void complete(int a, Stream st);
  void post_collective(int a, Stream st, std::uint32_t ti);
  void post_p2p(int a, Stream st, std::uint32_t ti);
  void begin_comm(std::size_t id, const Task& t, int a);
  bool start_clock(std::size_t id);
  void begin_transfer(int send_actor, int recv_actor, const Task& t, std::uint32_t send_task,
                      int dir);
  void finish_comm(std::size_t id);
  std::size_t new_comm();
  double analytic_time(const Task& t) const;
  coll::GroupShape shape(Dim d) const;
  std::vector<std::vector<int>> concrete_groups(int a, Dim d) const;
  bool inside_server(const std::vector<int>& ranks) const;
  bool group_inside_server(int a, Dim d);
  void start_cached_flows(std::size_t id, int send_actor, int dir, const Task& t);
  int actor_of_rank(int rank) const;
  int actor_of_peer(int a, int stage) const;

  const RunConfig& cfg_;
  const ExecOptions& opt_;
  const plan::ProgramSet& ps_;
  const plan::Layout& L_;
  Simulation sim_;
  std::vector<Role> roles_;
  std::vector<Actor> actors_;
  bool symmetric_ = false;
  std::optional<ComputeModel> cm_;
  coll::LinkModel links_;
  // Collective rendezvous: (task, group id) → comm id and arrivals.
  struct Rendezvous {
    std::size_t comm;
    int arrived = 0;
    int expected = 0;
  };
  std::unordered_map<std::uint64_t, Rendezvous> rendezvous_;
  // Waiting pipeline posts: per actor and direction, the stream and task of the posted head.
  std::vector<std::unique_ptr<Comm>> comms_;
  std::vector<std::size_t> free_comms_;
  // Flow backend.
  std::optional<topo::ClusterGraph> graph_;
  std::optional<topo::Router> router_;
  net::FlowNetwork* network_ = nullptr;
  std::vector<double> link_bytes_;
  std::vector<topo::LinkId> path_;
  // Links whose max-min constraint another link on every path through them implies (see
  // setup_network): left out of the paths the flow network solves, kept in the statistics.
  std::vector<std::uint8_t> implied_;
  long flows_started_ = 0;
  // Whether actor a's groups of dimension d stay inside one server ((a·8 + d) → 0/1, −1 unknown).
  std::vector<std::int8_t> inside_cache_;
  // The routed flows of a pipeline transfer (fixed size per Program), per (sender actor, direction):
  // every transfer of the same sender and direction starts the same flows on the same paths.
  // Routed flows, ready to start: flow f carries bytes[f] over links[offset[f], offset[f+1]).
  // `links` are the routed paths (for the link statistics), `net_links` the same without the
  // implied links (what the flow network solves).
  struct RoutedFlows {
    bool ready = false;
    bool inside = false;  // inside one server: priced in closed form instead
    double latency_s = 0;
    std::vector<std::int64_t> bytes;
    std::vector<std::uint32_t> offset{0};
    std::vector<topo::LinkId> links;
    std::vector<std::uint32_t> net_offset{0};
    std::vector<topo::LinkId> net_links;
    long starts = 0;  // cached transfers: their bytes go into the link statistics at the end
  };
  std::vector<RoutedFlows> transfer_cache_;
  // Routed collectives by (actor, dimension, kind, bytes); their start_group keys follow
  // kCollectiveKeys (transfer keys are small).
  struct CollKey {
    int actor, dim, kind;
    std::int64_t bytes;  // the task's bytes, bit for bit
    bool operator==(const CollKey&) const = default;
  };
  struct CollKeyHash {
    std::size_t operator()(const CollKey& k) const {
      std::uint64_t h = static_cast<std::uint64_t>(k.bytes) * 0x9E3779B97F4A7C15ull;
      h ^= (static_cast<std::uint64_t>(k.actor) << 16) ^ (static_cast<std::uint64_t>(k.dim) << 8) ^
           static_cast<std::uint64_t>(k.kind);
      return static_cast<std::size_t>(h ^ (h >> 29));
    }
  };
  static constexpr std::uint64_t kCollectiveKeys = std::uint64_t{1} << 40;
  std::unordered_map<CollKey, std::size_t, CollKeyHash> coll_index_;
  std::deque<RoutedFlows> coll_cache_;
  void route(const coll::CollectiveFlows& plan, RoutedFlows& out);
  void start_routed(std::size_t id, RoutedFlows& flows, std::uint64_t group_key);
  std::vector<net::FlowSpec> specs_;
  void count_link_bytes(const RoutedFlows& flows, long times);
  long task_instances_ = 0;
  double nvlink_bytes_ = 0, nic_bytes_ = 0;  // critical-actor traffic estimate (analytic costs)
};

coll::GroupShape Executor::shape(Dim d) const {
  switch (d) {
    case Dim::kTp: return L_.tp;
    case Dim::kCp: return L_.cp;
    case Dim::kEp: return L_.ep;
    case Dim::kDp: return L_.dp;
    case Dim::kExpertDp: return L_.expert_dp;
    case Dim::kPp: {
      return coll::GroupShape{2, L_.pp.per_node > 1 ? 2 : 1, L_.pp.per_node > 1 ? 1 : 2,
                              std::min(2, L_.pp.pods)};
    }
    case Dim::kNone: break;
  }
  return {};
}

double Executor::analytic_time(const Task& t) const {
  coll::Choice c;
  const coll::Kind k = t.type == TaskType::kCollective ? t.collective : coll::Kind::kSendRecv;
  if (k == coll::Kind::kAllReduce) c.algorithm = cfg_.collectives.algorithm;
  if (k != coll::Kind::kAllToAll && k != coll::Kind::kSendRecv) c.protocol = cfg_.collectives.protocol;
  // A piece of a TP-overlapped collective (or of the CP ring exchange) is one slice of a single
  // ring collective, exchanged step by step beside the compute (MegaScale §3.2, Transformer
  // Engine's ring-exchange overlap): it takes its share of the whole collective's time, latency
  // included, rather than paying a collective's launch latency per piece.
  int pieces = 1;
  if (t.type == TaskType::kCollective && t.piece >= 0) {
    if (t.dim == Dim::kTp) pieces = L_.par.tp;
    if (t.dim == Dim::kCp) pieces = L_.par.cp - 1;
  }
  return priced_collective(cfg_.profile, k, t.bytes * pieces, shape(t.dim), links_, c).time_s /
         pieces;
}

void Executor::setup_roles() {
  const auto& gpu = cfg_.cluster.gpu;
  const double peak16 = gpu.peak_dense_16bit_flops;
  const double gemm_peak =
      cfg_.training.precision == Precision::kFp8 ? gpu.peak_dense_fp8_flops : peak16;
  cm_.emplace(ComputeModel{cfg_.profile, gemm_peak, peak16, gpu.hbm_Bps});
  const ComputeModel& cm = *cm_;
  roles_.resize(ps_.roles.size());
  for (std::size_t i = 0; i < ps_.roles.size(); ++i) {
    Role& R = roles_[i];
    const plan::Program& P = ps_.roles[i];
    R.prog = &P;
    R.duration_ps.assign(P.tasks.size(), 0);
    R.kind.assign(P.tasks.size(), 0);
    std::map<std::string, std::uint16_t> ids;
    for (std::size_t ti = 0; ti < P.tasks.size(); ++ti) {
      const Task& t = P.tasks[ti];
      R.stream_list[static_cast<int>(t.stream)].push_back(static_cast<std::uint32_t>(ti));
      const std::string name = P.task_name(t);
      auto [it, fresh] = ids.emplace(name, static_cast<std::uint16_t>(R.kind_names.size()));
      if (fresh) {
        R.kind_names.push_back(name);
        R.kind_category.push_back(category(t));
      }
      R.kind[ti] = it->second;
      if (t.type != TaskType::kCompute) continue;
      const model::Op& op = P.ops[static_cast<std::size_t>(t.op)];
      const double launch = cfg_.profile.kernel_overhead_s * op.kernels;
      const double peak = op.batch > 1 ? peak16 : gemm_peak;
      // A share of a GEMM (a TP-overlap chunk, an attention block under CP) takes its share of
      // the whole GEMM's time plus its own launch (ComputeModel::forward_split: the pipelined
      // chunks keep the whole shape's rate).
      const double rows = op.m;
      const double share = t.fraction;
      double s = 0;
      switch (t.part) {
        case Part::kForward:
          s = op.kind == model::OpKind::kGemm
                  ? launch + cm.gemm_time(rows, op.n, op.k, op.batch, peak) * share
                  : launch + (cm.forward(op) - launch) * t.fraction;
          break;
        case Part::kBackward: s = launch + (cm.backward(op) - launch) * t.fraction; break;
        case Part::kDgrad: s = launch + cm.gemm_time(rows, op.k, op.n, op.batch, peak) * share; break;
        case Part::kWgrad: s = launch + cm.gemm_time(op.k, op.n, op.m, op.batch, peak) * t.fraction; break;
        case Part::kWhole:
          s = t.pass == Pass::kData ? cfg_.profile.data_loading_s : cm.forward(op);
          break;
      }
      R.duration_ps[ti] = TimePs::from_seconds(s).ps;
    }
  }
}

void Executor::setup_actors() {
  const int world = ps_.world();
  const int gpn = std::max(1, cfg_.cluster.gpus_per_node);
  std::vector<double> factor(static_cast<std::size_t>(world), 1.0);
  for (const Straggler& s : opt_.stragglers) {
    if (s.factor <= 0 || !std::isfinite(s.factor)) {
      throw_input("a straggler's factor must be positive, is " + fmt::format("{}", s.factor),
                  {"", 0, "simulation.straggler_factor"});
    }
    if (s.rank >= 0) {
      if (s.rank >= world) {
        throw_input(fmt::format("straggler rank {} is outside the job's {} ranks", s.rank, world),
                    {"", 0, "simulation.straggler_rank"});
      }
      factor[static_cast<std::size_t>(s.rank)] *= s.factor;
    }
    if (s.host >= 0) {
      if (s.host >= (world + gpn - 1) / gpn) {
        throw_input(fmt::format("straggler host {} is outside the job's {} servers", s.host,
                                (world + gpn - 1) / gpn),
                    {"", 0, "simulation.straggler_host"});
      }
      for (int g = 0; g < gpn && s.host * gpn + g < world; ++g) {
        factor[static_cast<std::size_t>(s.host * gpn + g)] *= s.factor;
      }
    }
  }
  const bool uniform = std::all_of(factor.begin(), factor.end(), [](double f) { return f == 1.0; });
  symmetric_ = opt_.symmetry && uniform && opt_.jitter == 0;
  auto traced = [&](int rank) {
    return std::find(opt_.trace_ranks.begin(), opt_.trace_ranks.end(), rank) !=
           opt_.trace_ranks.end();
  };
  if (symmetric_) {
    for (int s = 0; s < L_.par.pp; ++s) {
      Actor a;
      a.stage = s;
      a.rank = ps_.rank_of({0, 0, 0, s});
      a.all_stage = true;
      for (int r : opt_.trace_ranks) {
        if (r >= 0 && r < world && ps_.coord(r).pp == s) a.traced = true;
      }
      actors_.push_back(std::move(a));
    }
  } else {
    actors_.reserve(static_cast<std::size_t>(world));
    for (int r = 0; r < world; ++r) {
      Actor a;
      a.stage = ps_.coord(r).pp;
      a.rank = r;
      a.factor = factor[static_cast<std::size_t>(r)];
      a.traced = traced(r);
      if (opt_.jitter > 0) a.jitter.emplace(sim_.rng_stream(fmt::format("jitter/{}", r)));
      actors_.push_back(std::move(a));
    }
  }
  for (Actor& a : actors_) {
    const Role& R = roles_[static_cast<std::size_t>(a.stage)];
    a.kind_total.assign(R.kind_names.size(), 0.0);
    a.kind_count.assign(R.kind_names.size(), 0);
  }
}

void Executor::setup_network() {
  links_ = link_model(cfg_.cluster, cfg_.profile);
  if (opt_.backend != NetworkBackend::kFlow) return;
  if (opt_.routing.mode == topo::RoutingMode::kSpray) {
    throw_input("packet spraying splits a flow over links; flow fidelity needs one path per "
                "queue pair",
                {"", 0, "network.routing.mode"}, "use ecmp with more QPs per connection");
  }
  if (cfg_.collectives.algorithm && *cfg_.collectives.algorithm != coll::Algorithm::kRing) {
    throw_input(std::string(coll::to_string(*cfg_.collectives.algorithm)) +
                    " is modelled at analytic fidelity only; flow fidelity runs rings",
                {"", 0, "collectives.algorithm"}, "use ring");
  }
  graph_.emplace(topo::build_cluster_graph(cfg_.cluster));
  router_.emplace(*graph_, opt_.routing);
  std::vector<double> caps = coll::calibrated_capacities(
      *graph_, cfg_.profile.nvlink.busbw_Bps / cfg_.cluster.gpu.nvlink_Bps,
      cfg_.profile.nic_efficiency);
  link_bytes_.assign(caps.size(), 0.0);
  // PCIe hops whose constraint the NIC's link implies (coll::implied_links) are left out of the
  // solver's paths when no congestion control derates links by their flow count.
  if (net::CongestionModel(opt_.network).active()) {
    implied_.assign(caps.size(), 0);
  } else {
    implied_ = coll::implied_links(*graph_, caps);
  }
  net::FlowNetworkOptions fo;
  fo.config = opt_.network;
  fo.check_invariants = false;
  network_ = &sim_.emplace<net::FlowNetwork>(std::move(caps), fo);
  network_->flow_done().subscribe([this](const net::FlowDone& d) {
    Comm& c = *comms_[static_cast<std::size_t>(d.tag)];
    if (--c.flows_left == 0) {
      sim_.schedule(sim_.now() + c.latency, *this, kCommTag | d.tag);
    }
  });
}

int Executor::actor_of_rank(int rank) const {
  if (symmetric_) return ps_.coord(rank).pp;
  return rank;
}

int Executor::actor_of_peer(int a, int stage) const {
  if (symmetric_) return stage;
  return ps_.peer_on_stage(actors_[static_cast<std::size_t>(a)].rank, stage);
}

bool Executor::inside_server(const std::vector<int>& ranks) const {
  const int gpn = std::max(1, cfg_.cluster.gpus_per_node);
  for (int r : ranks) {
    if (r / gpn != ranks.front() / gpn) return false;
  }
  return true;
}

bool Executor::group_inside_server(int a, Dim d) {
  const std::size_t key = static_cast<std::size_t>(a) * 8 + static_cast<std::size_t>(d);
  if (inside_cache_.size() <= key) inside_cache_.resize(actors_.size() * 8, -1);
  if (inside_cache_[key] < 0) {
    const Actor& act = actors_[static_cast<std::size_t>(a)];
    inside_cache_[key] = inside_server(ps_.group(d, act.rank)) ? 1 : 0;
  }
  return inside_cache_[key] == 1;
}

// Routes every queue pair of every connection of a planned collective and appends the flows.
void Executor::route(const coll::CollectiveFlows& plan, RoutedFlows& out) {
  const int Q = std::max(1, opt_.routing.qps_per_connection);
  out.latency_s = std::max(out.latency_s, plan.result.latency_s);
  for (const auto& conn : plan.conns) {
    const auto total = static_cast<std::int64_t>(std::llround(conn.bytes * plan.wire));
    for (int q = 0; q < Q; ++q) {
      const std::int64_t share = total / Q + (q < total % Q ? 1 : 0);
      if (share <= 0) continue;
      if (!router_->route(topo::Flow{conn.src, conn.dst, conn.qp_base * Q + q}, path_)) {
        throw_infeasible(fmt::format("no path from GPU {} to GPU {}: {}", conn.src, conn.dst,
                                     router_->why_unreachable(conn.src, conn.dst)),
                         {"", 0, ""});
      }
      out.bytes.push_back(share);
      out.links.insert(out.links.end(), path_.begin(), path_.end());
      out.offset.push_back(static_cast<std::uint32_t>(out.links.size()));
      for (const topo::LinkId l : path_) {
        if (implied_[static_cast<std::size_t>(l)] == 0) out.net_links.push_back(l);
      }
      out.net_offset.push_back(static_cast<std::uint32_t>(out.net_links.size()));
    }
  }
}

// Adds the bytes of `flows` to every link of their paths, `times` over.
void Executor::count_link_bytes(const RoutedFlows& flows, long times) {
  for (std::size_t f = 0; f < flows.bytes.size(); ++f) {
    const double bytes = static_cast<double>(flows.bytes[f]) * static_cast<double>(times);
    for (std::uint32_t k = flows.offset[f]; k < flows.offset[f + 1]; ++k) {
      link_bytes_[static_cast<std::size_t>(flows.links[k])] += bytes;
    }
  }
}

// Starts routed flows for communication `id`; it completes `latency` after its last flow.
// A cached transfer or collective (group_key != 0) only counts its start (its link bytes are
// added once, at the end) and starts as a group, whose components the network records and
// replays when they run alone (FlowNetwork::start_group).
void Executor::start_routed(std::size_t id, RoutedFlows& flows, std::uint64_t group_key) {
  Comm& c = *comms_[id];
  if (group_key != 0) {
    ++flows.starts;
  } else {
    count_link_bytes(flows, 1);
  }
  specs_.resize(flows.bytes.size());
  for (std::size_t f = 0; f < flows.bytes.size(); ++f) {
    net::FlowSpec& spec = specs_[f];
    spec.path = std::span<const topo::LinkId>(flows.net_links.data() + flows.net_offset[f],
                                              flows.net_offset[f + 1] - flows.net_offset[f]);
    spec.bytes = flows.bytes[f];
    spec.tag = id;
  }
  network_->start_group(specs_, group_key);
  c.flows_left += static_cast<int>(flows.bytes.size());
  flows_started_ += static_cast<long>(flows.bytes.size());
  c.latency = TimePs::from_seconds(flows.latency_s);
  if (c.flows_left == 0) sim_.schedule(sim_.now() + c.latency, *this, kCommTag | id);
}

void Executor::start_cached_flows(std::size_t id, int send_actor, int dir, const Task& t) {
  const std::size_t key = static_cast<std::size_t>(send_actor) * 2 + static_cast<std::size_t>(dir);
  if (transfer_cache_.size() <= key) transfer_cache_.resize(actors_.size() * 2);
  RoutedFlows& cf = transfer_cache_[key];
  if (!cf.ready) {
    cf.ready = true;
    const Actor& sa = actors_[static_cast<std::size_t>(send_actor)];
    const int peer_stage = dir == 0 ? ps_.next_stage(sa.stage) : ps_.prev_stage(sa.stage);
    std::vector<std::pair<int, int>> pairs;
    if (sa.all_stage) {
      const auto& p = L_.par;
      for (int dp = 0; dp < p.dp; ++dp)
        for (int cp = 0; cp < p.cp; ++cp)
          for (int tp = 0; tp < p.tp; ++tp) {
            const int r = ps_.rank_of({tp, cp, dp, sa.stage});
            pairs.emplace_back(r, ps_.peer_on_stage(r, peer_stage));
          }
    } else {
      pairs.emplace_back(sa.rank, ps_.peer_on_stage(sa.rank, peer_stage));
    }
    cf.inside = inside_server({pairs.front().first, pairs.front().second});
    if (!cf.inside) {
      for (const auto& [src, dst] : pairs) {
        coll::FlowCollectiveRequest req{coll::Kind::kSendRecv, t.bytes, {src, dst}};
        route(coll::plan_collective_flows(req, *graph_, links_, {}, 0), cf);
      }
    }
  }
  if (cf.inside) {
    sim_.schedule(sim_.now() + TimePs::from_seconds(analytic_time(t)), *this, kCommTag | id);
    return;
  }
  start_routed(id, cf, key + 1);
}

// The concrete groups a communication of actor `a` stands for: its rank's group, or (symmetry
// shortcut) every group of the dimension on the actor's stage.
std::vector<std::vector<int>> Executor::concrete_groups(int a, Dim d) const {
  const Actor& act = actors_[static_cast<std::size_t>(a)];
  if (!act.all_stage) return {ps_.group(d, act.rank)};
  std::vector<std::vector<int>> out;
  const auto& p = L_.par;
  for (int dp = 0; dp < p.dp; ++dp) {
    for (int cp = 0; cp < p.cp; ++cp) {
      for (int tp = 0; tp < p.tp; ++tp) {
        bool lead = false;
        switch (d) {
          case Dim::kTp: lead = tp == 0; break;
          case Dim::kCp: lead = cp == 0; break;
          case Dim::kDp: lead = dp == 0; break;
          case Dim::kEp: lead = dp % p.ep == 0; break;
          case Dim::kExpertDp: lead = dp < p.ep; break;
          default: break;
        }
        if (lead) out.push_back(ps_.group(d, ps_.rank_of({tp, cp, dp, act.stage})));
      }
    }
  }
  return out;
}

// "; waiting for `recv-next pp` (micro-batch 3, chunk 1) on stream pp-recv-next" — the
// unfinished dependencies of a task, for deadlock reports.
std::string waiting_for(const Actor& act, const Role& role, const Task& t) {
  std::string out;
  const plan::Program& P = *role.prog;
  for (std::uint32_t i = 0; i < t.dep_count; ++i) {
    const Task& d = P.tasks[P.deps[t.dep_begin + i]];
    if (act.s[static_cast<int>(d.stream)].completed <= d.stream_pos) {
      out += fmt::format("; waiting for `{}` (micro-batch {}, chunk {}) on stream {}",
                         P.task_name(d), d.microbatch, d.chunk, plan::to_string(d.stream));
    }
  }
  return out;
}

bool Executor::ready(const Actor& act, const Role& role, const Task& t) const {
  const plan::Program& P = *role.prog;
  for (std::uint32_t i = 0; i < t.dep_count; ++i) {
    const Task& d = P.tasks[P.deps[t.dep_begin + i]];
    if (act.s[static_cast<int>(d.stream)].completed <= d.stream_pos) return false;
  }
  return true;
}

void Executor::try_start(int a, int cause_stream) {
  Actor& act = actors_[static_cast<std::size_t>(a)];
  const Role& R = roles_[static_cast<std::size_t>(act.stage)];
  for (int s = 0; s < kStreams; ++s) {
    StreamState& ss = act.s[s];
    if (ss.running || ss.next >= R.stream_list[s].size()) continue;
    const std::uint32_t ti = R.stream_list[s][ss.next];
    const Task& t = R.prog->tasks[ti];
    if (!ready(act, R, t)) continue;
    start_task(a, static_cast<Stream>(s), ti, cause_stream);
  }
}

void Executor::start_task(int a, Stream st, std::uint32_t ti, int cause_stream) {
  Actor& act = actors_[static_cast<std::size_t>(a)];
  const Role& R = roles_[static_cast<std::size_t>(act.stage)];
  const Task& t = R.prog->tasks[ti];
  StreamState& ss = act.s[static_cast<int>(st)];
  ss.running = true;
  ss.post = sim_.now();
  ss.start = sim_.now();
  ++task_instances_;
  if (t.type == TaskType::kCompute) {
    // Charge the compute stream's idle gap to what this task waited for.
    const double gap = (sim_.now() - act.compute_end).seconds();
    if (gap > 0) {
      const Task* cause = nullptr;
      TimePs cause_start = sim_.now();
      if (cause_stream >= 0 && cause_stream != static_cast<int>(Stream::kCompute)) {
        const auto& ld = act.last_done[cause_stream];
        cause = &R.prog->tasks[ld.task];
        cause_start = ld.start;
      }
      if (cause == nullptr) {
        act.acc_bubble += gap;
      } else if (cause->dim == Dim::kPp) {
        const double waiting = std::max(0.0, (std::min(sim_.now(), cause_start) - act.compute_end).seconds());
        act.acc_bubble += waiting;
        act.acc_exposed[kExPp] += gap - waiting;
      } else {
        act.acc_exposed[exposed_index(cause->dim)] += gap;
      }
    }
    // A slow GPU slows its kernels, not the host's data pipeline.
    double d = static_cast<double>(R.duration_ps[ti]) * (t.pass == Pass::kData ? 1.0 : act.factor);
    if (act.jitter && t.pass != Pass::kData) {
      // Log-normal with mean 1: exp(σ·z − σ²/2), z standard normal (Box–Muller).
      const double u1 = std::max(1e-300, act.jitter->uniform01());
      const double u2 = act.jitter->uniform01();
      const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
      d *= std::exp(opt_.jitter * z - 0.5 * opt_.jitter * opt_.jitter);
    }
    const TimePs dur{static_cast<std::int64_t>(std::llround(d))};
    sim_.schedule(sim_.now() + dur, *this,
                  static_cast<std::uint64_t>(a) * kStreams + static_cast<std::uint64_t>(st));
    return;
  }
  if (t.type == TaskType::kCollective) {
    post_collective(a, st, ti);
  } else {
    post_p2p(a, st, ti);
  }
}

std::size_t Executor::new_comm() {
  if (!free_comms_.empty()) {
    const std::size_t id = free_comms_.back();
    free_comms_.pop_back();
    *comms_[id] = Comm{};
    return id;
  }
  comms_.push_back(std::make_unique<Comm>());
  return comms_.size() - 1;
}

void Executor::post_collective(int a, Stream st, std::uint32_t ti) {
  const Actor& act = actors_[static_cast<std::size_t>(a)];
  const Role& R = roles_[static_cast<std::size_t>(act.stage)];
  const Task& t = R.prog->tasks[ti];
  int expected = 1;
  std::uint64_t group_id = static_cast<std::uint64_t>(a);
  if (!act.all_stage) {
    const std::vector<int> g = ps_.group(t.dim, act.rank);
    expected = static_cast<int>(g.size());
    group_id = static_cast<std::uint64_t>(*std::min_element(g.begin(), g.end()));
  }
  const std::uint64_t key = (static_cast<std::uint64_t>(ti) << 32) ^
                            (group_id << 3) ^ static_cast<std::uint64_t>(t.dim);
  auto it = rendezvous_.find(key);
  if (it == rendezvous_.end()) {
    it = rendezvous_.emplace(key, Rendezvous{new_comm(), 0, expected}).first;
    comms_[it->second.comm]->task = ti;
  }
  Comm& c = *comms_[it->second.comm];
  c.members.push_back({a, st});
  if (++it->second.arrived < it->second.expected) return;
  const std::size_t id = it->second.comm;
  rendezvous_.erase(it);
  begin_comm(id, t, a);
}

// A communication begins now: its members' streams record the start; with free communication
// it completes at once (returns true).
bool Executor::start_clock(std::size_t id) {
  Comm& c = *comms_[id];
  c.start = sim_.now();
  for (const auto& m : c.members) {
    actors_[static_cast<std::size_t>(m.actor)].s[static_cast<int>(m.stream)].start = c.start;
  }
  if (!opt_.free_communication) return false;
  sim_.schedule(sim_.now(), *this, kCommTag | id);
  return true;
}

void Executor::begin_comm(std::size_t id, const Task& t, int a) {
  if (start_clock(id)) return;
  if (opt_.backend == NetworkBackend::kFlow) {
    if (!group_inside_server(a, t.dim)) {
      // The same collective of the same actor (a DP bucket of one size, a TP all-gather) starts
      // the same flows every time: routed once, and started under one key (start_group).
      const CollKey key{a, static_cast<int>(t.dim), static_cast<int>(t.collective),
                        std::bit_cast<std::int64_t>(t.bytes)};
      auto [it, fresh] = coll_index_.emplace(key, coll_cache_.size());
      if (fresh) {
        RoutedFlows& rf = coll_cache_.emplace_back();
        coll::Choice choice;
        if (t.collective != coll::Kind::kAllToAll) choice.protocol = cfg_.collectives.protocol;
        for (const auto& g : concrete_groups(a, t.dim)) {
          coll::FlowCollectiveRequest req{t.collective, t.bytes,
                                          std::vector<topo::GpuId>(g.begin(), g.end())};
          route(coll::plan_collective_flows(req, *graph_, links_, choice, 0), rf);
        }
      }
      start_routed(id, coll_cache_[it->second], kCollectiveKeys + it->second);
      return;
    }
  }
  sim_.schedule(sim_.now() + TimePs::from_seconds(analytic_time(t)), *this, kCommTag | id);
}

void Executor::post_p2p(int a, Stream st, std::uint32_t ti) {
  Actor& act = actors_[static_cast<std::size_t>(a)];
  const Role& R = roles_[static_cast<std::size_t>(act.stage)];
  const Task& t = R.prog->tasks[ti];
  const bool send = t.type == TaskType::kSend;
  // Direction 0: activations (send-next / recv-prev), 1: gradients (send-prev / recv-next).
  const int dir = (st == Stream::kPpSendNext || st == Stream::kPpRecvPrev) ? 0 : 1;
  // The k-th send of a direction pairs with the peer's k-th receive (both streams are in order):
  // the transfer begins when the later of the two is posted.
  const int peer_stage = (dir == 0) == send ? ps_.next_stage(act.stage) : ps_.prev_stage(act.stage);
  const int b = actor_of_peer(a, peer_stage);
  Actor& peer = actors_[static_cast<std::size_t>(b)];
  const std::uint32_t k = send ? act.posted_send[dir]++ : act.posted_recv[dir]++;
  if ((send ? peer.posted_recv[dir] : peer.posted_send[dir]) <= k) return;
  if (send) {
    begin_transfer(a, b, t, ti, dir);
  } else {
    const Stream ss = dir == 0 ? Stream::kPpSendNext : Stream::kPpSendPrev;
    const Role& PR = roles_[static_cast<std::size_t>(peer.stage)];
    begin_transfer(b, a, t, PR.stream_list[static_cast<int>(ss)][peer.s[static_cast<int>(ss)].next],
                   dir);
  }
}

void Executor::begin_transfer(int send_actor, int recv_actor, const Task& t,
                              std::uint32_t send_task, int dir) {
  const std::size_t id = new_comm();
  Comm& c = *comms_[id];
  c.task = send_task;
  c.members.push_back({send_actor, dir == 0 ? Stream::kPpSendNext : Stream::kPpSendPrev});
  c.members.push_back({recv_actor, dir == 0 ? Stream::kPpRecvPrev : Stream::kPpRecvNext});
  if (start_clock(id)) return;
  if (opt_.backend == NetworkBackend::kFlow) {
    start_cached_flows(id, send_actor, dir, t);
    return;
  }
  sim_.schedule(sim_.now() + TimePs::from_seconds(analytic_time(t)), *this, kCommTag | id);
}

void Executor::finish_comm(std::size_t id) {
  // Copy: completing may start new communications that reuse slots.
  const std::vector<Comm::Member> members = comms_[id]->members;
  free_comms_.push_back(id);
  for (const auto& m : members) complete(m.actor, m.stream);
  for (const auto& m : members) try_start(m.actor, static_cast<int>(m.stream));
}

void Executor::complete(int a, Stream st) {
  Actor& act = actors_[static_cast<std::size_t>(a)];
  const Role& R = roles_[static_cast<std::size_t>(act.stage)];
  StreamState& ss = act.s[static_cast<int>(st)];
  const std::uint32_t ti = R.stream_list[static_cast<int>(st)][ss.next];
  const Task& t = R.prog->tasks[ti];
  const TimePs now = sim_.now();
  const double dur = (now - ss.start).seconds();
  act.kind_total[R.kind[ti]] += dur;
  ++act.kind_count[R.kind[ti]];
  if (t.type == TaskType::kCompute) {
    switch (t.pass) {
      case Pass::kData: act.acc_data += dur; break;
      case Pass::kOptimizer: act.acc_opt += dur; break;
      default: act.acc_compute += dur; break;
    }
    act.compute_end = now;
  }
  if (act.traced) act.spans.push_back({ti, ss.start, now});
  act.last_done[static_cast<int>(st)] = {ti, ss.start};
  act.end = std::max(act.end, now);
  ss.running = false;
  ++ss.next;
  ++ss.completed;
}

void Executor::on_event(std::uint64_t tag) {
  if (tag & kCommTag) {
    finish_comm(static_cast<std::size_t>(tag & ~kCommTag));
    return;
  }
  const int a = static_cast<int>(tag / kStreams);
  const Stream st = static_cast<Stream>(tag % kStreams);
  complete(a, st);
  try_start(a, static_cast<int>(st));
}

void Executor::run(Result& r) {
  setup_roles();
  setup_network();
  setup_actors();
  for (int a = 0; a < static_cast<int>(actors_.size()); ++a) try_start(a, -1);
  sim_.run();

  // Every task must have run: anything left is a schedule that cannot make progress.
  for (const Actor& act : actors_) {
    const Role& R = roles_[static_cast<std::size_t>(act.stage)];
    for (int s = 0; s < kStreams; ++s) {
      if (act.s[s].completed < R.stream_list[s].size()) {
        const Task& t = R.prog->tasks[R.stream_list[s][act.s[s].completed]];
        throw Error(ErrorKind::kRuntime,
                    fmt::format("the schedule deadlocked: rank {} (stage {}) stopped at `{}` on "
                                "stream {} (micro-batch {}, chunk {}){}",
                                act.rank, act.stage, R.prog->task_name(t), plan::to_string(static_cast<Stream>(s)),
                                t.microbatch, t.chunk, waiting_for(act, R, t)),
                    {"", 0, ""});
      }
    }
  }

  TimePs T;
  std::size_t crit = 0;
  for (std::size_t i = 0; i < actors_.size(); ++i) {
    if (actors_[i].end > T) {
      T = actors_[i].end;
      crit = i;
    }
  }
  const Actor& ca = actors_[crit];
  const double iter = T.seconds();
  Breakdown& bd = r.breakdown;
  bd = Breakdown{};
  bd.compute_s = ca.acc_compute;
  bd.optimizer_s = ca.acc_opt;
  bd.data_loading_s = ca.acc_data;
  bd.exposed_tp_s = ca.acc_exposed[kExTp];
  bd.exposed_cp_s = ca.acc_exposed[kExCp];
  bd.exposed_ep_s = ca.acc_exposed[kExEp];
  bd.exposed_pp_s = ca.acc_exposed[kExPp];
  bd.exposed_dp_s = ca.acc_exposed[kExDp];
  bd.pipeline_bubble_s = ca.acc_bubble + (T - ca.compute_end).seconds();
  // The costs of scale (sim/exec/scale.h) are added as the analytic fidelity adds them: the
  // per-GPU speed spread is an order statistic over all ranks, not a per-rank draw here.
  const ScaleCosts sc = scale_costs(cfg_.scale, bd, ps_.layout, cfg_.cluster, links_,
                                    cfg_.training.precision);
  bd.gpu_variation_s = sc.gpu_variation_s;
  bd.global_sync_s = sc.global_sync_s;
  r.iteration_time_s = iter + sc.gpu_variation_s + sc.global_sync_s;

  const Role& CR = roles_[static_cast<std::size_t>(ca.stage)];
  r.task_kinds.clear();
  for (std::size_t k = 0; k < CR.kind_names.size(); ++k) {
    if (ca.kind_count[k] == 0) continue;
    r.task_kinds.push_back({CR.kind_names[k], CR.kind_category[k], ca.kind_count[k], ca.kind_total[k]});
  }
  std::stable_sort(r.task_kinds.begin(), r.task_kinds.end(),
                   [](const TaskKindTime& a, const TaskKindTime& b) { return a.total_s > b.total_s; });

  // Timeline of the traced ranks.
  r.timeline = Timeline{};
  std::vector<int> ranks = opt_.trace_ranks;
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  for (int rank : ranks) {
    if (rank < 0 || rank >= ps_.world()) continue;
    r.timeline.ranks.push_back(rank);
    const Actor& act = actors_[static_cast<std::size_t>(actor_of_rank(rank))];
    const Role& R = roles_[static_cast<std::size_t>(act.stage)];
    std::vector<Actor::Span> spans = act.spans;
    std::stable_sort(spans.begin(), spans.end(),
                     [](const Actor::Span& x, const Actor::Span& y) { return x.start < y.start; });
    for (const Actor::Span& sp : spans) {
      const Task& t = R.prog->tasks[sp.task];
      TraceSpan ts;
      ts.rank = rank;
      ts.stream = plan::to_string(t.stream);
      ts.name = R.kind_names[R.kind[sp.task]];
      ts.category = R.kind_category[R.kind[sp.task]];
      ts.start_s = sp.start.seconds();
      ts.end_s = sp.end.seconds();
      ts.microbatch = t.microbatch;
      ts.chunk = t.chunk;
      ts.layer = t.layer;
      ts.bytes = t.type == TaskType::kCompute ? 0.0 : t.bytes;
      r.timeline.spans.push_back(std::move(ts));
    }
  }

  // Network statistics (flow backend: every link's bytes over the iteration).
  if (opt_.backend == NetworkBackend::kFlow && graph_) {
    for (const RoutedFlows& cf : transfer_cache_) count_link_bytes(cf, cf.starts);
    for (const RoutedFlows& cf : coll_cache_) count_link_bytes(cf, cf.starts);
    NetworkStats& ns = r.network;
    double max_u = 0, sum_u = 0, nic_sum = 0;
    int n = 0, nic_n = 0;
    double up_max = 0, up_sum = 0;
    int up_n = 0;
    const auto& caps = graph_->link_capacity_Bps();
    for (topo::LinkId l = 0; l < graph_->link_count(); ++l) {
      const double u = link_bytes_[static_cast<std::size_t>(l)] /
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
        up_max = std::max(up_max, link_bytes_[static_cast<std::size_t>(l)]);
        up_sum += link_bytes_[static_cast<std::size_t>(l)];
        ++up_n;
      }
    }
    ns.max_link_utilization = max_u;
    ns.mean_link_utilization = n > 0 ? sum_u / n : 0;
    ns.nic_utilization = nic_n > 0 ? nic_sum / nic_n : 0;
    ns.has_ecmp = up_n > 0 && up_sum > 0;
    ns.ecmp_imbalance = ns.has_ecmp ? up_max / (up_sum / up_n) : 0;
    std::vector<double> utilization(static_cast<std::size_t>(graph_->link_count()));
    for (std::size_t l = 0; l < utilization.size(); ++l) {
      utilization[l] = link_bytes_[l] / (caps[l] * iter);
    }
    for (const topo::LinkClassLoad& c : topo::link_class_loads(*graph_, utilization)) {
      ns.link_classes.push_back({c.name, c.links, c.used, c.max, c.mean});
    }
  }

  r.exec.roles = static_cast<long>(roles_.size());
  for (const Role& R : roles_) {
    r.exec.tasks_per_role = std::max<long>(r.exec.tasks_per_role, static_cast<long>(R.prog->tasks.size()));
  }
  r.exec.actors = static_cast<long>(actors_.size());
  r.exec.task_instances = task_instances_;
  r.exec.flows = flows_started_;
  r.exec.events = static_cast<long>(sim_.events_dispatched());
  r.exec.symmetry = symmetric_;
  if (network_ != nullptr) {
    const net::FlowNetworkStats& st = network_->stats();
    r.exec.solves = st.solves;
    r.exec.flows_replayed = st.flows_replayed;
    r.exec.replays_materialized = st.replays_materialized;
    r.exec.flows_per_solve =
        st.solves > 0 ? static_cast<double>(st.flows_resolved) / static_cast<double>(st.solves) : 0;
  }
  r.exec.critical_rank = ca.rank;
}

}  // namespace

Result run_program(const RunConfig& cfg, const ExecOptions& options) {
  AnalyticOptions ao;
  ao.enforce_memory = options.enforce_memory;
  // Memory, FLOP accounting, start-up and the analytic pipeline picture come from the analytic
  // evaluation; every time below is replaced by the executed timeline.
  Result r = run_analytic(cfg, ao);
  const double analytic_iter = r.iteration_time_s;
  const plan::ProgramSet ps =
      plan::build_programs(cfg.model, cfg.cluster, cfg.parallel, cfg.training, cfg.opt);
  Executor ex(cfg, options, ps);
  ex.run(r);
  r.fidelity = options.backend == NetworkBackend::kFlow ? "flow" : "schedule";
  r.model_version = kProgramModelVersion;
  const double tokens = static_cast<double>(cfg.training.global_batch) * cfg.model.seq_len;
  r.tokens_per_s = tokens / r.iteration_time_s;
  const double gpu_seconds = r.iteration_time_s * cfg.cluster.gpus;
  r.tflops_per_gpu = r.model_flops_per_iteration / gpu_seconds / kTera;
  r.hw_tflops_per_gpu = r.hardware_flops_per_iteration / gpu_seconds / kTera;
  r.mfu = r.model_flops_per_iteration / (gpu_seconds * r.peak_flops_per_gpu);
  r.hfu = r.hardware_flops_per_iteration / (gpu_seconds * r.peak_flops_per_gpu);
  // Link utilisation of GPU-attached links at analytic backends: bytes per GPU as the analytic
  // evaluation counted them, over the executed iteration.
  if (options.backend != NetworkBackend::kFlow) {
    NetworkStats& ns = r.network;
    const double scale = analytic_iter / r.iteration_time_s;
    ns.nvlink_utilization *= scale;
    ns.nic_utilization *= scale;
    ns.max_link_utilization *= scale;
    ns.mean_link_utilization *= scale;
  }
  std::erase_if(r.notes, [](const std::string& n) { return n.rfind("analytic fidelity", 0) == 0; });
  r.notes.push_back(fmt::format(
      "{} fidelity: {} Programs of up to {} tasks, {} {} executed ({} task instances{}); "
      "critical rank {}",
      r.fidelity, r.exec.roles, r.exec.tasks_per_role, r.exec.actors,
      r.exec.symmetry ? "stage actors (symmetry shortcut)" : "ranks", r.exec.task_instances,
      r.exec.flows > 0 ? fmt::format(", {} flows", r.exec.flows) : std::string(),
      r.exec.critical_rank));
  return r;
}

}  // namespace trainsim::exec
