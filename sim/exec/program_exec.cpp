// The executor's methods (executor.h): streams, dependencies, rendezvous, the breakdown.
#include "sim/exec/program_exec.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <memory>
#include <optional>
#include <utility>

#include "sim/core/error.h"
#include "sim/core/simulation.h"
#include "sim/exec/comm_backend.h"
#include "sim/exec/compute_model.h"
#include "sim/exec/role_index.h"
#include "sim/exec/stage_groups.h"
#include "sim/exec/task_time.h"
#include "sim/exec/executor.h"
#include "sim/plan/program.h"

namespace trainsim::exec::detail {

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
  req.copy_spread_s = &comms_[id]->copy_spread_s;
  return req;
}

void Executor::setup_roles() {
  roles_.reserve(ps_.roles.size());
  for (const plan::Program& P : ps_.roles) roles_.push_back(index_role(cfg_, P));
}

void Executor::setup_actors() {
  const int world = ps_.world();
  const int sms = cfg_.cluster.gpu.sms;
  for (int h = 0; h < kSmHolders; ++h) {
    // A ring exchange's pieces are the TP group's (its fallback, an NCCL collective, spans it).
    const bool across = h == kSmRing ? L_.tp.nodes > 1 : h >= kSmAcross;
    const CommSpan span{across, cfg_.cluster.nics_per_node};
    const int d = sm_holder_dim(h);
    sm_share_[h] = sm_share(h == kSmRing  ? tp_ring_sms(cfg_.opt, cfg_.profile, span)
                            : d == kExTp ? tp_comm_sms(cfg_.opt, cfg_.profile, span)
                                         : nccl_sms(cfg_.opt, cfg_.profile, span),
                            sms);
    any_sm_share_ = any_sm_share_ || sm_share_[h] > 0;
  }
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
  for (const Role& R : roles_) kind_stride_ = std::max(kind_stride_, R.kind_names.size());
  kind_total_.assign(actors_.size() * kind_stride_, 0.0);
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

bool Executor::ready(const Actor& act, const Role& role, const Role::Step& step) const {
  constexpr std::uint32_t kPos = (1u << Role::kPosBits) - 1;
  for (std::uint32_t i = 0; i < step.dep_count; ++i) {
    const std::uint32_t d = role.ready_deps[step.dep_begin + i];
    if (act.s[d >> Role::kPosBits].next <= (d & kPos)) return false;
  }
  return true;
}

// Starts the actor's ready stream heads, in stream order. Every head that became ready earlier
// was started then, so after a completion on `cause_stream` only that stream's next task and the
// heads of the streams waiting on the completed task (Step::waiters) need a look; at the start
// (no cause) and after an iteration's reset, every stream.
void Executor::try_start(int a, int cause_stream) {
  Actor& act = actors_[static_cast<std::size_t>(a)];
  const Role& R = roles_[static_cast<std::size_t>(act.stage)];
  std::uint32_t look = (1u << kStreams) - 1;
  // The cause's last task as it completed: starting its stream's next task below overwrites it.
  StreamState cause{};
  const bool charged = cause_stream >= 0 && cause_stream != static_cast<int>(Stream::kCompute);
  if (cause_stream >= 0) {
    const std::uint32_t done = act.s[cause_stream].next;
    if (done > 0) look = (1u << cause_stream) | R.steps[cause_stream][done - 1].waiters;
    cause = act.s[cause_stream];
  }
  for (; look != 0; look &= look - 1) {
    const int s = std::countr_zero(look);
    StreamState& ss = act.s[s];
    if (ss.running || ss.next >= R.steps[s].size()) continue;
    const Role::Step& step = R.steps[s][ss.next];
    if (!ready(act, R, step)) continue;
    start_task(a, static_cast<Stream>(s), step, charged ? &cause : nullptr);
  }
}

void Executor::start_task(int a, Stream st, const Role::Step& step, const StreamState* cause) {
  Actor& act = actors_[static_cast<std::size_t>(a)];
  const std::uint32_t ti = step.task;
  StreamState& ss = act.s[static_cast<int>(st)];
  ss.running = true;
  ss.task = ti;
  ss.kind = step.kind;
  ss.type = step.type;
  ss.pass = step.pass;
  ss.start = sim_.now();
  ++task_instances_;
  ss.wait_dim = Dim::kNone;
  if (step.type != TaskType::kCompute) {
    const Role& R = roles_[static_cast<std::size_t>(act.stage)];
    ss.dim = R.prog->tasks[ti].dim;
    if (cause != nullptr && cause->type != TaskType::kCompute && cause->dim != Dim::kPp &&
        ss.dim != Dim::kPp) {
      ss.wait_dim = cause->dim;
    }
    if (step.type == TaskType::kCollective) return post_collective(a, st, ti);
    return post_p2p(a, st, ti);
  }
  // Charge the compute stream's idle gap to what this task waited for.
  const double gap = (sim_.now() - act.compute_end).seconds();
  if (gap > 0) {
    if (cause == nullptr) {
      act.acc_bubble += gap;
    } else if (cause->dim == Dim::kPp) {
      const TimePs cause_start = cause->start;
      const double waiting =
          std::max(0.0, (std::min(sim_.now(), cause_start) - act.compute_end).seconds());
      act.acc_bubble += waiting;
      act.acc_exposed[kExPp] += gap - waiting;
    } else {
      // A chain of collectives (the dispatch all-to-all, then the TP all-gather of its rows):
      // the wait until the last one began is its predecessor's.
      double before = 0;
      if (cause->wait_dim != Dim::kNone && cause->wait_dim != cause->dim) {
        before = std::clamp((std::min(sim_.now(), cause->start) - act.compute_end).seconds(), 0.0,
                            gap);
        act.acc_exposed[exposed_index(cause->wait_dim)] += before;
      }
      act.acc_exposed[exposed_index(cause->dim)] += gap - before;
    }
  }
  // A slow GPU slows its kernels, not the host's data pipeline.
  const Role& R = roles_[static_cast<std::size_t>(act.stage)];
  const bool data = step.pass == Pass::kData;
  double d = static_cast<double>(R.duration_ps[ti]) * (data ? 1.0 : act.factor);
  if (act.jitter && !data) d *= jitter_factor(*act.jitter, opt_.jitter);
  act.slowable = any_sm_share_ && !data;
  act.event_rate = 1.0;
  if (!act.slowable || act.sm_total == 0) {
    const TimePs dur{static_cast<std::int64_t>(std::llround(d))};
    act.compute_event = sim_.schedule(sim_.now() + dur, *this, compute_tag(a, st, step.kind));
  }
  if (!act.slowable) return;
  act.work_left_ps = std::round(d);
  act.work_at = sim_.now();
  for (double& l : act.lost_s) l = 0;
  if (act.sm_total > 0) schedule_compute_end(a);
}

std::size_t Executor::new_comm() {
  if (!free_comms_.empty()) {
    const std::size_t id = free_comms_.back();
    free_comms_.pop_back();
    // Reset in place: the member list keeps its capacity (no allocation per communication).
    Comm& c = *comms_[id];
    c.members.clear();
    c.copy_spread_s = 0;
    c.sm_dim = -1;
    return id;
  }
  comms_.push_back(std::make_unique<Comm>());
  return comms_.size() - 1;
}

void Executor::post_collective(int a, Stream st, std::uint32_t ti) {
  Actor& act = actors_[static_cast<std::size_t>(a)];
  const Role& R = roles_[static_cast<std::size_t>(act.stage)];
  const Task& t = R.prog->tasks[ti];
  int expected = 1;
  std::uint64_t group_id = static_cast<std::uint64_t>(a);
  if (!act.all_stage) {
    const auto d = static_cast<std::size_t>(t.dim);
    if (act.group_min[d] < 0) {
      const std::vector<int> g = ps_.group(t.dim, act.rank);
      act.group_size[d] = static_cast<std::int32_t>(g.size());
      act.group_min[d] = *std::min_element(g.begin(), g.end());
    }
    expected = act.group_size[d];
    group_id = static_cast<std::uint64_t>(act.group_min[d]);
  }
  std::size_t id;
  if (expected == 1) {
    id = new_comm();
    comms_[id]->members.push_back({a, st});
  } else {
    const std::uint64_t key = (static_cast<std::uint64_t>(ti) << 32) ^
                              (group_id << 3) ^ static_cast<std::uint64_t>(t.dim);
    Rendezvous& rv = rendezvous_.find_or_insert(key, Rendezvous{0, 0, expected});
    if (rv.arrived == 0) rv.comm = new_comm();  // the first arrival
    comms_[rv.comm]->members.push_back({a, st});
    if (++rv.arrived < rv.expected) return;
    id = rv.comm;
    rendezvous_.erase(key);
  }
  // A decomposed overlap's TP all-gather pieces (Program: comm_then_compute, each feeding its
  // piece of the GEMM) are its ring exchange; the re-gather for the weight gradient is whole.
  const bool ring = t.dim == Dim::kTp && t.collective == coll::Kind::kAllGather && t.piece >= 0;
  const bool across = dim_shape(L_, t.dim).nodes > 1;
  comms_[id]->sm_dim = ring     ? kSmRing
                       : across ? kSmAcross + exposed_index(t.dim)
                                : exposed_index(t.dim);
  if (!start_clock(id)) backend_.start_collective(request(id, a, t));
}

// A communication begins now: its members' streams record the start; with free communication
// it completes at once (returns true).
bool Executor::start_clock(std::size_t id) {
  const TimePs now = sim_.now();
  const Comm& c = *comms_[id];
  for (const auto& m : c.members) {
    actors_[static_cast<std::size_t>(m.actor)].s[static_cast<int>(m.stream)].start = now;
    if (c.sm_dim >= 0 && sm_share_[c.sm_dim] > 0) hold_sms(m.actor, c.sm_dim, +1);
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
  req.shape = transfer_shape(send_actor, recv_actor);
  backend_.start_transfer(req);
}

coll::GroupShape Executor::transfer_shape(int send_actor, int recv_actor) {
  const Actor& from = actors_[static_cast<std::size_t>(send_actor)];
  const Actor& to = actors_[static_cast<std::size_t>(recv_actor)];
  if (!from.all_stage) return pair_shape(gpu_of(from.rank), gpu_of(to.rank), cfg_.cluster);
  const int p = L_.par.pp;
  if (stage_pair_shapes_.empty()) {
    stage_pair_shapes_.assign(static_cast<std::size_t>(p) * p, coll::GroupShape{0, 0, 0, 0});
  }
  coll::GroupShape& worst = stage_pair_shapes_[static_cast<std::size_t>(from.stage * p + to.stage)];
  if (worst.ranks == 0) {
    // Every copy waits for the slowest (the shortcut's actor ends with its last copy): the most
    // servers, then the most pods, of the stage's pairs.
    worst = pair_shape(gpu_of(from.rank), gpu_of(to.rank), cfg_.cluster);
    for (const auto& [a, b] : stage_transfer_pairs(ps_, from.stage, to.stage)) {
      const coll::GroupShape g = pair_shape(gpu_of(a), gpu_of(b), cfg_.cluster);
      if (g.nodes > worst.nodes || (g.nodes == worst.nodes && g.pods > worst.pods)) worst = g;
    }
  }
  return worst;
}

void Executor::finish_comm(std::size_t id) {
  // Copy: completing may start new communications that reuse slots. The copy goes to a list
  // kept per nesting depth (a completion can finish another communication before it returns).
  if (member_scratch_.size() <= finish_depth_) member_scratch_.emplace_back();
  std::vector<Comm::Member>& members = member_scratch_[finish_depth_++];
  members.assign(comms_[id]->members.begin(), comms_[id]->members.end());
  // The copies this communication stood for ended up to copy_spread_s apart; a rank of the
  // every-rank run would have gone on after its own copy. What its members wait on from here
  // carries that spread on top of the largest one behind any of them.
  if (symmetric_) {
    double chain = 0;
    for (const auto& m : members) {
      chain = std::max(chain, actors_[static_cast<std::size_t>(m.actor)].copy_spread_chain_s);
    }
    chain += comms_[id]->copy_spread_s;
    for (const auto& m : members) actors_[static_cast<std::size_t>(m.actor)].copy_spread_chain_s = chain;
  }
  const int sm_dim = comms_[id]->sm_dim;
  free_comms_.push_back(id);
  if (sm_dim >= 0 && sm_share_[sm_dim] > 0) {
    for (const auto& m : members) hold_sms(m.actor, sm_dim, -1);
  }
  for (const auto& m : members) complete(m.actor, m.stream);
  for (const auto& m : members) try_start(m.actor, static_cast<int>(m.stream));
  --finish_depth_;
}

void Executor::complete(int a, Stream st) {
  Actor& act = actors_[static_cast<std::size_t>(a)];
  const Role& R = roles_[static_cast<std::size_t>(act.stage)];
  StreamState& ss = act.s[static_cast<int>(st)];
  const std::uint32_t ti = ss.task;
  const TimePs now = sim_.now();
  const double dur = (now - ss.start).seconds();
  double& kind_time = kind_total(a)[ss.kind];
  if (ss.type != TaskType::kCompute) kind_time += dur;
  double lost = 0;  // a compute task's time lost to collectives' SMs
  if (ss.type == TaskType::kCompute) {
    // The time its kernels lost to collectives' SMs is exposed communication of their dimension
    // (as the analytic fidelity charges ComputeModel::concurrent's excess).
    if (act.slowable) {
      advance_work(act);
      for (int d = 0; d < kExCount; ++d) {
        act.acc_exposed[d] += act.lost_s[d];
        lost += act.lost_s[d];
      }
      act.slowable = false;
    }
    kind_time += dur - lost;
    switch (ss.pass) {
      case Pass::kData: act.acc_data += dur; break;
      case Pass::kOptimizer: act.acc_opt += dur - lost; break;
      default: act.acc_compute += dur - lost; break;
    }
    act.compute_end = now;
  }
  if (act.traced) act.spans.push_back({ti, ss.start, now, lost});
  act.end = std::max(act.end, now);
  ss.running = false;
  ++ss.next;
  if (iterations_ > 1 && ss.next == R.steps[static_cast<int>(st)].size()) {
    bool done = true;
    for (int s = 0; s < kStreams; ++s) {
      done = done && act.s[s].next == R.steps[s].size();
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
    // A stream's last task stays in its state, unread: the first compute start of the next
    // iteration has no cause and charges its idle gap (the wait for the slowest rank) to the
    // bubble; every later start takes its cause from the stream that just completed.
    for (StreamState& ss : a.s) {
      ss.next = 0;
      ss.running = false;
    }
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
  const std::uint64_t at = tag & kComputeTagMask;
  const int a = static_cast<int>(at / kStreams);
  const Stream st = static_cast<Stream>(at % kStreams);
  // The task's time-per-kind cell, fetched while the actor's record is: neither is usually in
  // cache when an every-rank run's task ends, and the cell's address does not need the record.
  __builtin_prefetch(kind_total(a) + (tag >> kComputeTagKindShift));
  complete(a, st);
  try_start(a, static_cast<int>(st));
}

// A compute task's end is coming (EventQueue::prefetch_upcoming): what complete() and
// try_start() will read of its actor. In an every-rank run the actors are one per GPU and the
// next event's is rarely in cache; asked an event ahead, the misses overlap with this one's work.
void Executor::prefetch(std::uint64_t tag) const {
  if (tag & (kCommTag | kStartTag)) return;
  const std::uint64_t at = tag & kComputeTagMask;
  const auto a = static_cast<int>(at / kStreams);
  if (a >= static_cast<int>(actors_.size())) return;
  const Actor& act = actors_[static_cast<std::size_t>(a)];
  __builtin_prefetch(&act.stage);
  __builtin_prefetch(&act.s[at % kStreams]);
  __builtin_prefetch(&act.compute_end);
  __builtin_prefetch(&act.lost_s[0]);
  __builtin_prefetch(&act.acc_compute);
  __builtin_prefetch(&act.traced);
  __builtin_prefetch(kind_total(a) + (tag >> kComputeTagKindShift));
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
    for (int s = 0; s < kStreams; ++s) completed[s] = act.s[s].next;
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
                                    link_model(cfg_), cfg_.training.precision);
  bd.gpu_variation_s = sc.gpu_variation_s;
  bd.global_sync_s = sc.global_sync_s;
  r.iteration_time_s = iter + sc.gpu_variation_s + sc.global_sync_s;

  const Role& CR = roles_[static_cast<std::size_t>(ca.stage)];
  // Every task ran (finish checked it): each kind ran as often as the role holds it, per
  // iteration.
  const double* ck = kind_total_.data() + crit * kind_stride_;
  const std::span<const double> crit_kinds(ck, CR.kind_names.size());
  if (iterations_ == 1) {
    r.task_kinds = task_kind_times(CR, crit_kinds, CR.kind_tasks);
  } else {
    std::vector<double> total(crit_kinds.begin(), crit_kinds.end());
    for (double& t : total) t /= n;
    r.task_kinds = task_kind_times(CR, total, CR.kind_tasks);
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
    // The two costs of scale that end the iteration after the last rank's last task (every rank
    // waits for them): drawn on the compute stream, so that a trace lasts the iteration.
    double at = T.seconds();
    for (const auto& [name, seconds] : {std::pair<const char*, double>{"slowest-GPU pacing",
                                                                        sc.gpu_variation_s},
                                        {"global sync", sc.global_sync_s}}) {
      if (seconds <= 0) continue;
      TraceSpan span;
      span.rank = rank;
      span.stream = "compute";
      span.name = name;
      span.category = "scale";
      span.start_s = at;
      span.end_s = at + seconds;
      r.timeline.spans.push_back(std::move(span));
      at += seconds;
    }
  }

  r.exec.roles = static_cast<long>(roles_.size());
  for (const Role& R : roles_) {
    r.exec.tasks_per_role = std::max<long>(r.exec.tasks_per_role, static_cast<long>(R.prog->tasks.size()));
  }
  r.exec.actors = static_cast<long>(actors_.size());
  r.exec.task_instances = task_instances_;
  r.exec.events = static_cast<long>(sim_.events_dispatched());
  r.exec.symmetry = symmetric_;
  double chain = 0;
  for (const Actor& a : actors_) chain = std::max(chain, a.copy_spread_chain_s);
  r.exec.symmetry_bound_s = chain / n;
  r.exec.critical_rank = ca.rank;
  return executed;
}


}  // namespace trainsim::exec::detail
