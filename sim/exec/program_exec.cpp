#include "sim/exec/program_exec.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <unordered_map>

#include "sim/core/error.h"
#include "sim/core/simulation.h"
#include "sim/exec/comm_backend.h"
#include "sim/exec/role_index.h"
#include "sim/exec/stage_groups.h"
#include "sim/exec/task_time.h"
#include "sim/plan/program.h"

namespace trainsim::exec {
namespace {

using plan::Dim;
using plan::Pass;
using plan::Stream;
using plan::Task;
using plan::TaskType;

constexpr int kStreams = plan::kStreamCount;
constexpr std::uint64_t kCommTag = 1ull << 62;
constexpr std::uint64_t kStartTag = 1ull << 61;  // a job that starts later than time 0

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

using Role = RoleIndex;

struct StreamState {
  std::uint32_t next = 0;       // position of the head task
  std::uint32_t completed = 0;  // tasks done
  bool running = false;         // the head has started (or is posted, for communication)
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
  std::vector<TaskSpan> spans;
  // What the last completion on each stream was (for charging compute-stream gaps).
  struct Done {
    std::uint32_t task = 0;
    TimePs start;
  } last_done[kStreams];
};

// One communication in flight (a collective or a transfer): the streams it completes.
struct Comm {
  struct Member {
    int actor;
    Stream stream;
  };
  std::vector<Member> members;
};

// The executor: streams, dependencies, rendezvous and the breakdown. Communication goes through
// the CommBackend; the executor is the job's CommEndpoints (its actors are the endpoints).
class Executor final : public EventTarget, public CommEndpoints {
 public:
  /// `gpus`: the cluster GPU of each rank (empty: rank r is GPU r); `start`: when the job's
  /// iteration begins.
  /// `iterations`: how many iterations run back to back (each starts when every rank has
  /// finished the one before).
  Executor(const RunConfig& cfg, const ExecOptions& opt, const plan::ProgramSet& ps,
           Simulation& sim, CommBackend& backend, std::vector<int> gpus = {},
           TimePs start = TimePs{}, int iterations = 1)
      : cfg_(cfg), opt_(opt), ps_(ps), L_(ps.layout), sim_(sim), backend_(backend),
        gpus_(std::move(gpus)), start_(start), iterations_(std::max(1, iterations)) {}

  /// Sets the job up on the backend and schedules its first tasks (at `start`).
  void begin();
  /// After the simulation has run: checks every task ran and fills `r` (the mean iteration:
  /// times and breakdown over all iterations divided by their number); returns the executed
  /// timeline's length in seconds (from `start`, every iteration).
  double finish(Result& r);

  int endpoint_count() const override { return static_cast<int>(actors_.size()); }
  std::vector<int> own_group(int e, Dim d) const override {
    return placed(ps_.group(d, actors_[static_cast<std::size_t>(e)].rank));
  }
  std::vector<std::vector<int>> collective_groups(int e, Dim d) const override;
  std::vector<std::pair<int, int>> transfer_pairs(int e, int dir) const override;

 private:
  void on_event(std::uint64_t tag) override;

  void setup_roles();
  void setup_actors();
  void try_start(int a, int cause_stream);
  void start_task(int a, Stream st, std::uint32_t ti, int cause_stream);
  bool ready(const Actor& act, const Role& role, const Task& t) const;
  void complete(int a, Stream st);
  void post_collective(int a, Stream st, std::uint32_t ti);
  void post_p2p(int a, Stream st, std::uint32_t ti);
  bool start_clock(std::size_t id);
  void begin_transfer(int send_actor, int recv_actor, const Task& t, int dir);
  void finish_comm(std::size_t id);
  std::size_t new_comm();
  CommRequest request(std::size_t id, int a, const Task& t);
  int actor_of_rank(int rank) const { return symmetric_ ? ps_.coord(rank).pp : rank; }
  int actor_of_peer(int a, int stage) const {
    return symmetric_ ? stage : ps_.peer_on_stage(actors_[static_cast<std::size_t>(a)].rank, stage);
  }
  double fill_result(Result& r) const;
  void next_iteration();
  std::vector<int> placed(std::vector<int> ranks) const {
    if (!gpus_.empty()) {
      for (int& r : ranks) r = gpus_[static_cast<std::size_t>(r)];
    }
    return ranks;
  }

  const RunConfig& cfg_;
  const ExecOptions& opt_;
  const plan::ProgramSet& ps_;
  const plan::Layout& L_;
  Simulation& sim_;
  CommBackend& backend_;
  const std::vector<int> gpus_;
  const TimePs start_;
  const int iterations_;
  int iterations_done_ = 0;
  std::size_t finished_actors_ = 0;  // actors done with the current iteration (iterations_ > 1)
  int job_ = 0;
  std::vector<Role> roles_;
  std::vector<Actor> actors_;
  bool symmetric_ = false;
  // Collective rendezvous: (task, group id) → comm id and arrivals.
  struct Rendezvous {
    std::size_t comm;
    int arrived = 0;
    int expected = 0;
  };
  std::unordered_map<std::uint64_t, Rendezvous> rendezvous_;
  std::vector<std::unique_ptr<Comm>> comms_;
  std::vector<std::size_t> free_comms_;
  long task_instances_ = 0;
};

// What a backend needs to run communication `id` of task `t`, posted by actor `a`.
CommRequest Executor::request(std::size_t id, int a, const Task& t) {
  CommRequest req;
  req.job = job_;
  req.endpoint = a;
  req.dim = t.dim;
  req.kind = t.type == TaskType::kCollective ? t.collective : coll::Kind::kSendRecv;
  req.bytes = t.bytes;
  // A piece of a TP-overlapped collective (or of the CP ring exchange) is one slice of a single
  // ring collective, exchanged step by step beside the compute (MegaScale §3.2, Transformer
  // Engine's ring-exchange overlap): it takes its share of the whole collective's time, latency
  // included, rather than paying a collective's launch latency per piece.
  if (t.type == TaskType::kCollective && t.piece >= 0) {
    if (t.dim == Dim::kTp) req.pieces = L_.par.tp;
    if (t.dim == Dim::kCp) req.pieces = L_.par.cp - 1;
  }
  req.shape = dim_shape(L_, t.dim);
  req.target = this;
  req.tag = kCommTag | id;
  return req;
}

void Executor::setup_roles() {
  roles_.reserve(ps_.roles.size());
  for (const plan::Program& P : ps_.roles) roles_.push_back(index_role(cfg_, P));
}

void Executor::setup_actors() {
  const int world = ps_.world();
  const std::vector<double> factor =
      straggler_factors(opt_.stragglers, world, std::max(1, cfg_.cluster.gpus_per_node));
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

std::vector<std::pair<int, int>> Executor::transfer_pairs(int e, int dir) const {
  const Actor& sa = actors_[static_cast<std::size_t>(e)];
  const int peer_stage = dir == 0 ? ps_.next_stage(sa.stage) : ps_.prev_stage(sa.stage);
  std::vector<std::pair<int, int>> pairs =
      sa.all_stage ? stage_transfer_pairs(ps_, sa.stage, peer_stage)
                   : std::vector<std::pair<int, int>>{
                         {sa.rank, ps_.peer_on_stage(sa.rank, peer_stage)}};
  if (!gpus_.empty()) {
    for (auto& [a, b] : pairs) {
      a = gpus_[static_cast<std::size_t>(a)];
      b = gpus_[static_cast<std::size_t>(b)];
    }
  }
  return pairs;
}

// The concrete groups a communication of actor `a` stands for: its rank's group, or (symmetry
// shortcut) every group of the dimension on the actor's stage.
std::vector<std::vector<int>> Executor::collective_groups(int a, Dim d) const {
  const Actor& act = actors_[static_cast<std::size_t>(a)];
  if (!act.all_stage) return {placed(ps_.group(d, act.rank))};
  std::vector<std::vector<int>> groups = stage_groups(ps_, act.stage, d);
  for (auto& g : groups) g = placed(std::move(g));
  return groups;
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
  ss.start = sim_.now();
  ++task_instances_;
  if (t.type == TaskType::kCollective) return post_collective(a, st, ti);
  if (t.type != TaskType::kCompute) return post_p2p(a, st, ti);
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
      const double waiting =
          std::max(0.0, (std::min(sim_.now(), cause_start) - act.compute_end).seconds());
      act.acc_bubble += waiting;
      act.acc_exposed[kExPp] += gap - waiting;
    } else {
      act.acc_exposed[exposed_index(cause->dim)] += gap;
    }
  }
  // A slow GPU slows its kernels, not the host's data pipeline.
  double d = static_cast<double>(R.duration_ps[ti]) * (t.pass == Pass::kData ? 1.0 : act.factor);
  if (act.jitter && t.pass != Pass::kData) d *= jitter_factor(*act.jitter, opt_.jitter);
  const TimePs dur{static_cast<std::int64_t>(std::llround(d))};
  sim_.schedule(sim_.now() + dur, *this,
                static_cast<std::uint64_t>(a) * kStreams + static_cast<std::uint64_t>(st));
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
  if (it == rendezvous_.end()) it = rendezvous_.emplace(key, Rendezvous{new_comm(), 0, expected}).first;
  comms_[it->second.comm]->members.push_back({a, st});
  if (++it->second.arrived < it->second.expected) return;
  const std::size_t id = it->second.comm;
  rendezvous_.erase(it);
  if (!start_clock(id)) backend_.start_collective(request(id, a, t));
}

// A communication begins now: its members' streams record the start; with free communication
// it completes at once (returns true).
bool Executor::start_clock(std::size_t id) {
  const TimePs now = sim_.now();
  for (const auto& m : comms_[id]->members) {
    actors_[static_cast<std::size_t>(m.actor)].s[static_cast<int>(m.stream)].start = now;
  }
  if (!opt_.free_communication) return false;
  sim_.schedule(now, *this, kCommTag | id);
  return true;
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
    begin_transfer(a, b, t, dir);
  } else {
    begin_transfer(b, a, t, dir);
  }
}

// `t` is the task of whichever end posted last (both carry the transfer's bytes).
void Executor::begin_transfer(int send_actor, int recv_actor, const Task& t, int dir) {
  const std::size_t id = new_comm();
  Comm& c = *comms_[id];
  c.members.push_back({send_actor, dir == 0 ? Stream::kPpSendNext : Stream::kPpSendPrev});
  c.members.push_back({recv_actor, dir == 0 ? Stream::kPpRecvPrev : Stream::kPpRecvNext});
  if (start_clock(id)) return;
  CommRequest req = request(id, send_actor, t);
  req.direction = dir;
  backend_.start_transfer(req);
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
  if (iterations_ > 1 && ss.completed == R.stream_list[static_cast<int>(st)].size()) {
    bool done = true;
    for (int s = 0; s < kStreams; ++s) {
      done = done && act.s[s].completed == R.stream_list[s].size();
    }
    if (done && ++finished_actors_ == actors_.size()) next_iteration();
  }
}

// Every rank has finished an iteration: the next one starts now, from the first task of every
// stream. Accumulated times carry on (the breakdown is of all iterations); a rank's wait for the
// slowest one of the iteration before is its bubble.
void Executor::next_iteration() {
  finished_actors_ = 0;
  if (++iterations_done_ == iterations_) return;
  for (Actor& a : actors_) {
    for (StreamState& ss : a.s) ss = StreamState{};
    a.posted_send[0] = a.posted_send[1] = 0;
    a.posted_recv[0] = a.posted_recv[1] = 0;
  }
  sim_.schedule(sim_.now(), *this, kStartTag);
}

void Executor::on_event(std::uint64_t tag) {
  if (tag == kStartTag) {
    for (int a = 0; a < static_cast<int>(actors_.size()); ++a) try_start(a, -1);
    return;
  }
  if (tag & kCommTag) {
    finish_comm(static_cast<std::size_t>(tag & ~kCommTag));
    return;
  }
  const int a = static_cast<int>(tag / kStreams);
  const Stream st = static_cast<Stream>(tag % kStreams);
  complete(a, st);
  try_start(a, static_cast<int>(st));
}

void Executor::begin() {
  setup_roles();
  setup_actors();
  job_ = backend_.add_job(*this);
  if (start_ > TimePs{}) {
    for (Actor& a : actors_) a.compute_end = a.end = start_;
    sim_.schedule(start_, *this, kStartTag);
    return;
  }
  for (int a = 0; a < static_cast<int>(actors_.size()); ++a) try_start(a, -1);
}

double Executor::finish(Result& r) {
  // Every task must have run: anything left is a schedule that cannot make progress.
  for (const Actor& act : actors_) {
    std::uint32_t completed[kStreams];
    for (int s = 0; s < kStreams; ++s) completed[s] = act.s[s].completed;
    check_finished(roles_[static_cast<std::size_t>(act.stage)], act.rank, act.stage, completed);
  }
  return fill_result(r);
}

// The breakdown, task kinds and timeline from the executed actors; returns the executed
// timeline's length in seconds.
double Executor::fill_result(Result& r) const {
  TimePs T;
  std::size_t crit = 0;
  for (std::size_t i = 0; i < actors_.size(); ++i) {
    if (actors_[i].end > T) {
      T = actors_[i].end;
      crit = i;
    }
  }
  const Actor& ca = actors_[crit];
  const double executed = (T - start_).seconds();
  // Several iterations: the mean one (one iteration: the same numbers, divided by 1).
  const double n = static_cast<double>(iterations_);
  const double iter = executed / n;
  Breakdown& bd = r.breakdown;
  bd = Breakdown{};
  bd.compute_s = ca.acc_compute / n;
  bd.optimizer_s = ca.acc_opt / n;
  bd.data_loading_s = ca.acc_data / n;
  bd.exposed_tp_s = ca.acc_exposed[kExTp] / n;
  bd.exposed_cp_s = ca.acc_exposed[kExCp] / n;
  bd.exposed_ep_s = ca.acc_exposed[kExEp] / n;
  bd.exposed_pp_s = ca.acc_exposed[kExPp] / n;
  bd.exposed_dp_s = ca.acc_exposed[kExDp] / n;
  bd.pipeline_bubble_s = (ca.acc_bubble + (T - ca.compute_end).seconds()) / n;
  // The costs of scale (sim/exec/scale.h) are added as the analytic fidelity adds them: the
  // per-GPU speed spread is an order statistic over all ranks, not a per-rank draw here.
  const ScaleCosts sc = scale_costs(cfg_.scale, bd, ps_.layout, cfg_.cluster,
                                    link_model(cfg_.cluster, cfg_.profile), cfg_.training.precision);
  bd.gpu_variation_s = sc.gpu_variation_s;
  bd.global_sync_s = sc.global_sync_s;
  r.iteration_time_s = iter + sc.gpu_variation_s + sc.global_sync_s;

  const Role& CR = roles_[static_cast<std::size_t>(ca.stage)];
  if (iterations_ == 1) {
    r.task_kinds = task_kind_times(CR, ca.kind_total, ca.kind_count);
  } else {
    std::vector<double> total = ca.kind_total;
    std::vector<long> count = ca.kind_count;
    for (double& t : total) t /= n;
    for (long& c : count) c /= iterations_;
    r.task_kinds = task_kind_times(CR, total, count);
  }

  // Timeline of the traced ranks.
  r.timeline = Timeline{};
  std::vector<int> ranks = opt_.trace_ranks;
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  for (int rank : ranks) {
    if (rank < 0 || rank >= ps_.world()) continue;
    const Actor& act = actors_[static_cast<std::size_t>(actor_of_rank(rank))];
    append_trace(roles_[static_cast<std::size_t>(act.stage)], rank, act.spans, r.timeline);
  }

  r.exec.roles = static_cast<long>(roles_.size());
  for (const Role& R : roles_) {
    r.exec.tasks_per_role = std::max<long>(r.exec.tasks_per_role, static_cast<long>(R.prog->tasks.size()));
  }
  r.exec.actors = static_cast<long>(actors_.size());
  r.exec.task_instances = task_instances_;
  r.exec.events = static_cast<long>(sim_.events_dispatched());
  r.exec.symmetry = symmetric_;
  r.exec.critical_rank = ca.rank;
  return executed;
}

}  // namespace

namespace {

// The analytic evaluation a run starts from: memory, FLOP accounting, start-up and the analytic
// pipeline picture; every time is replaced by the executed timeline.
Result analytic_base(const RunConfig& cfg, const ExecOptions& options) {
  AnalyticOptions ao;
  ao.enforce_memory = options.enforce_memory;
  return run_analytic(cfg, ao);
}

// The rates of an executed iteration, and the note that says how it ran.
void finalize(const RunConfig& cfg, const char* fidelity, Result& r) {
  r.fidelity = fidelity;
  r.model_version = kProgramModelVersion;
  const double tokens = static_cast<double>(cfg.training.global_batch) * cfg.model.seq_len;
  r.tokens_per_s = tokens / r.iteration_time_s;
  const double gpu_seconds = r.iteration_time_s * cfg.cluster.gpus;
  r.tflops_per_gpu = r.model_flops_per_iteration / gpu_seconds / kTera;
  r.hw_tflops_per_gpu = r.hardware_flops_per_iteration / gpu_seconds / kTera;
  r.mfu = r.model_flops_per_iteration / (gpu_seconds * r.peak_flops_per_gpu);
  r.hfu = r.hardware_flops_per_iteration / (gpu_seconds * r.peak_flops_per_gpu);
}

// Runs `sim` to the end, in steps of about a hundredth of `estimate_s` when progress is asked for
// (Simulation::run_until dispatches the same events in the same order as run()).
void run_with_progress(Simulation& sim, const ExecOptions& options, double estimate_s) {
  if (!options.progress) {
    sim.run();
    return;
  }
  // At least one step: before it, the work may be only batch calls (flows started and not yet
  // solved), with no event queued.
  const TimePs step = TimePs::from_seconds(std::max(estimate_s / 100, 1e-3));
  do {
    sim.run_until(sim.now() + step);
    options.progress(sim.now().seconds(), estimate_s);
  } while (sim.pending_events() > 0);
}

void add_exec_note(Result& r) {
  std::erase_if(r.notes, [](const std::string& n) { return n.rfind("analytic fidelity", 0) == 0; });
  r.notes.push_back(fmt::format(
      "{} fidelity: {} Programs of up to {} tasks, {} {} executed ({} task instances{}); "
      "critical rank {}",
      r.fidelity, r.exec.roles, r.exec.tasks_per_role, r.exec.actors,
      r.exec.symmetry ? "stage actors (symmetry shortcut)" : "ranks", r.exec.task_instances,
      r.exec.flows > 0 ? fmt::format(", {} flows", r.exec.flows) : std::string(),
      r.exec.critical_rank));
}

}  // namespace

Result run_program(const RunConfig& cfg, const ExecOptions& options) {
  Result r = analytic_base(cfg, options);
  const plan::ProgramSet ps =
      plan::build_programs(cfg.model, cfg.cluster, cfg.parallel, cfg.training, cfg.opt);
  Simulation sim(options.seed);
  // The one place the fidelity is chosen: the executor sees only the CommBackend interface.
  const std::unique_ptr<CommBackend> backend = make_comm_backend(sim, cfg, options, r);
  Executor ex(cfg, options, ps, sim, *backend);
  ex.begin();
  run_with_progress(sim, options, r.iteration_time_s);
  const double executed_s = ex.finish(r);
  finalize(cfg, backend->fidelity(), r);
  backend->report(executed_s, r);
  add_exec_note(r);
  return r;
}

JobsResult run_jobs(const RunConfig& cluster, const std::vector<JobRun>& jobs,
                    const ExecOptions& options) {
  JobsResult out;
  std::vector<Result> results;
  std::vector<plan::ProgramSet> programs;
  results.reserve(jobs.size());
  programs.reserve(jobs.size());
  for (const JobRun& j : jobs) {
    if (static_cast<int>(j.gpus.size()) != j.cfg->cluster.gpus) {
      throw_input(fmt::format("the job runs {} ranks on {} placed GPUs", j.cfg->cluster.gpus,
                              j.gpus.size()),
                  {"", 0, "jobs"});
    }
    for (int g : j.gpus) {
      if (g < 0 || g >= cluster.cluster.gpus) {
        throw_input(fmt::format("GPU {} is outside the cluster's {} GPUs", g, cluster.cluster.gpus),
                    {"", 0, "jobs"});
      }
    }
    results.push_back(analytic_base(*j.cfg, options));
    programs.push_back(plan::build_programs(j.cfg->model, j.cfg->cluster, j.cfg->parallel,
                                            j.cfg->training, j.cfg->opt));
  }
  Simulation sim(options.seed);
  // One backend, and so one fabric, for every job; the closed form's traffic estimate is that of
  // the first job (schedule fidelity reports no shared network state).
  const std::unique_ptr<CommBackend> backend =
      make_comm_backend(sim, cluster, options, results.front());
  std::vector<std::unique_ptr<Executor>> executors;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    executors.push_back(std::make_unique<Executor>(*jobs[i].cfg, options, programs[i], sim,
                                                   *backend, jobs[i].gpus,
                                                   TimePs::from_seconds(jobs[i].start_s),
                                                   jobs[i].iterations));
    executors.back()->begin();
  }
  double estimate_s = 0;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    estimate_s = std::max(estimate_s, jobs[i].start_s + jobs[i].iterations *
                                                           results[i].iteration_time_s);
  }
  run_with_progress(sim, options, estimate_s);
  out.makespan_s = 0;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    Result& r = results[i];
    const double executed_s = executors[i]->finish(r);
    finalize(*jobs[i].cfg, backend->fidelity(), r);
    add_exec_note(r);
    out.makespan_s = std::max(out.makespan_s, jobs[i].start_s + executed_s);
  }
  out.fidelity = backend->fidelity();
  if (out.fidelity == "flow") {
    Result fabric;
    fabric.iteration_time_s = out.makespan_s;
    backend->report(out.makespan_s, fabric);
    out.fabric = fabric.network;
    out.exec = fabric.exec;
  }
  out.exec.events = static_cast<long>(sim.events_dispatched());
  out.jobs = std::move(results);
  return out;
}

}  // namespace trainsim::exec
