// The executor of one job's Programs (program_exec.h): its actors' streams, dependencies,
// collective rendezvous and pipeline pairing, and the breakdown of the rank that finished last.
// Communication goes through a CommBackend; the executor is the job's CommEndpoints. Internal to
// sim/exec: run_program and run_jobs (run_jobs.cpp) build one per job.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "sim/core/flat_map.h"
#include "sim/core/rng.h"
#include "sim/core/simulation.h"
#include "sim/exec/comm_backend.h"
#include "sim/exec/role_index.h"
#include "sim/exec/task_time.h"
#include "sim/plan/program.h"

namespace trainsim::exec::detail {
using plan::Dim;
using plan::Pass;
using plan::Stream;
using plan::Task;
using plan::TaskType;

constexpr int kStreams = plan::kStreamCount;
constexpr std::uint64_t kCommTag = 1ull << 62;
constexpr std::uint64_t kStartTag = 1ull << 61;  // a job that starts later than time 0
// A compute task's end: actor · kStreams + stream in the low bits, its kind above them.
constexpr int kComputeTagKindShift = 40;
constexpr std::uint64_t kComputeTagMask = (1ull << kComputeTagKindShift) - 1;
inline std::uint64_t compute_tag(int actor, Stream st, std::uint16_t kind) {
  return (static_cast<std::uint64_t>(kind) << kComputeTagKindShift) |
         (static_cast<std::uint64_t>(actor) * kStreams + static_cast<std::uint64_t>(st));
}

enum Exposed { kExTp, kExCp, kExEp, kExPp, kExDp, kExCount };
// The kinds of SM holders: a collective of each exposed dimension inside a server, the same
// across servers (sm_holder + kSmAcross: NCCL runs fewer channels there, nccl_network_channels),
// and a TP all-gather that feeds its GEMM piece by piece under a decomposed overlap
// (exec::tp_ring_sms). Each is charged to its exposed dimension (a ring exchange's to TP).
enum SmHolder { kSmAcross = kExCount, kSmRing = 2 * kExCount, kSmHolders };
inline int sm_holder_dim(int h) { return h == kSmRing ? kExTp : h % kExCount; }

inline int exposed_index(Dim d) {
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
  std::uint32_t next = 0;       // position of the head task (= tasks done)
  // The running head's step, as complete() needs it (copied at its start: by its end the
  // role's step list is usually out of cache); once it completes, the last task done, until
  // the next one starts (a compute task's idle gap is charged to it).
  std::uint32_t task = 0;
  std::uint16_t kind = 0;
  bool running = false;         // the head has started (or is posted, for communication)
  TaskType type = TaskType::kCompute;
  Pass pass = Pass::kForward;
  Dim dim = Dim::kNone;         // communication: its dimension
  // Communication started by another one's completion (MoE: the TP all-gather of the rows
  // after the dispatch all-to-all): that one's dimension, which the compute stream's wait until
  // this one began is charged to; kNone otherwise (and for pipeline transfers, whose wait before
  // they begin is the bubble's).
  Dim wait_dim = Dim::kNone;
  TimePs start;                 // when its work began (communication: the transfer/collective)
};
static_assert(sizeof(StreamState) == 24, "StreamState stays three words");

struct Actor {
  int stage = 0;
  int rank = 0;              // representative rank
  bool all_stage = false;    // stands for every rank of its stage (symmetry shortcut)
  double factor = 1.0;       // straggler slow-down
  StreamState s[kStreams];
  std::uint32_t posted_send[2] = {0, 0};  // [0] activations (next), [1] gradients (prev)
  std::uint32_t posted_recv[2] = {0, 0};
  TimePs compute_end;        // end of the last compute task
  // Concurrent kernels (ComputeModel::concurrent): each collective transferring on this rank
  // holds its dimension's share of the SMs (Executor::sm_share_: NCCL's channels, or the TP
  // overlap's own kernels), so a GPU compute task running meanwhile progresses at 1 − the held
  // shares' sum of its rate. `sm_comms` counts them per SmHolder; the running compute
  // task keeps its remaining work (at full rate, in ps) as of `work_at` and the time it has lost
  // to each dimension's SMs, which its completion charges to that dimension.
  std::int32_t sm_comms[kSmHolders] = {};
  std::int32_t sm_total = 0;
  bool slowable = false;     // the running compute task is a GPU kernel (not the data pass)
  bool sm_dirty = false;     // its SM holds changed in this picosecond (Executor::on_batch_end)
  double event_rate = 1.0;   // the rate its end event was scheduled at
  double work_left_ps = 0;
  TimePs work_at;
  double lost_s[kExCount] = {};
  EventHandle compute_event;
  // Symmetry shortcut: the largest sum of copy spreads along the communications this actor
  // has waited on, directly or through other actors (Executor::finish_comm).
  double copy_spread_chain_s = 0;
  TimePs end;                // end of the last task of any stream
  double acc_compute = 0, acc_opt = 0, acc_data = 0, acc_bubble = 0;
  double acc_exposed[kExCount] = {};
  // Its rank's group in each dimension, as a rendezvous needs it: smallest rank and size
  // (computed at its first collective of that dimension; -1 before).
  std::int32_t group_min[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
  std::int32_t group_size[8] = {};
  std::optional<Rng> jitter;
  bool traced = false;
  std::vector<TaskSpan> spans;
};

static_assert(static_cast<int>(Dim::kPp) < 8, "Actor::group_min has one slot per Dim");

// One communication in flight (a collective or a transfer): the streams it completes.
struct Comm {
  struct Member {
    int actor;
    Stream stream;
  };
  std::vector<Member> members;
  double copy_spread_s = 0;  // written by the backend (CommRequest::copy_spread_s)
  int sm_dim = -1;  // a collective: the SmHolder whose SMs it holds (-1: a transfer)
};

// The executor: streams, dependencies, rendezvous and the breakdown. Communication goes through
// the CommBackend; the executor is the job's CommEndpoints (its actors are the endpoints).
class Executor final : public EventTarget, public BatchListener, public CommEndpoints {
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
  void prefetch(std::uint64_t tag) const override;
  // Re-schedules, once per picosecond, the compute tasks whose SM holds changed (a TP piece
  // ending as the next one starts leaves the rate, and the event, as they were).
  void on_batch_end() override;

  void setup_roles();
  void setup_actors();
  void try_start(int a, int cause_stream);
  // `cause`: the stream whose completion let the task start, as it was then (null: none, or
  // the compute stream).
  void start_task(int a, Stream st, const Role::Step& step, const StreamState* cause);
  bool ready(const Actor& act, const Role& role, const Role::Step& step) const;
  void complete(int a, Stream st);
  void post_collective(int a, Stream st, std::uint32_t ti);
  void post_p2p(int a, Stream st, std::uint32_t ti);
  bool start_clock(std::size_t id);
  void begin_transfer(int send_actor, int recv_actor, const Task& t, int dir);
  void finish_comm(std::size_t id);
  void hold_sms(int a, int dim, int delta);
  void advance_work(Actor& act) const;
  void schedule_compute_end(int a);
  std::size_t new_comm();
  CommRequest request(std::size_t id, int a, const Task& t);
  int actor_of_rank(int rank) const { return symmetric_ ? ps_.coord(rank).pp : rank; }
  int actor_of_peer(int a, int stage) const {
    return symmetric_ ? stage : ps_.peer_on_stage(actors_[static_cast<std::size_t>(a)].rank, stage);
  }
  double fill_result(Result& r) const;
  void next_iteration();
  // The pair of GPUs a transfer from `send_actor` to `recv_actor` runs on, as the closed form
  // prices it: the actors' own ranks, or for a symmetry-shortcut actor (every rank of its stage)
  // the worst of the pairs it stands for.
  coll::GroupShape transfer_shape(int send_actor, int recv_actor);
  int gpu_of(int rank) const {
    return gpus_.empty() ? rank : gpus_[static_cast<std::size_t>(rank)];
  }
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
  std::vector<coll::GroupShape> stage_pair_shapes_;  // transfer_shape's, by (stage, peer stage)
  const TimePs start_;
  const int iterations_;
  int iterations_done_ = 0;
  std::size_t finished_actors_ = 0;  // actors done with the current iteration (iterations_ > 1)
  int job_ = 0;
  std::vector<Role> roles_;
  std::vector<Actor> actors_;
  // Time per task kind of every actor, actor a's at [a · kind_stride_, + its role's kinds):
  // one flat array, so that a completion's address needs no load of a per-actor pointer.
  std::vector<double> kind_total_;
  std::size_t kind_stride_ = 0;
  double* kind_total(int a) { return kind_total_.data() + static_cast<std::size_t>(a) * kind_stride_; }
  const double* kind_total(int a) const {
    return kind_total_.data() + static_cast<std::size_t>(a) * kind_stride_;
  }
  bool symmetric_ = false;
  // Collective rendezvous: (task, group id) → comm id and arrivals.
  struct Rendezvous {
    std::size_t comm;
    int arrived = 0;
    int expected = 0;
  };
  // The rendezvous in flight by key (flat: no node allocation per collective).
  FlatU64Map<Rendezvous> rendezvous_;
  std::vector<std::unique_ptr<Comm>> comms_;
  std::vector<std::size_t> free_comms_;
  // finish_comm's copies of the members it completes, one list per nesting depth (a deque, so
  // that a deeper call's new list does not move the lists of the calls below it).
  std::deque<std::vector<Comm::Member>> member_scratch_;
  std::size_t finish_depth_ = 0;
  long task_instances_ = 0;
  // Share of a GPU's SMs one collective of each SmHolder holds (exec::nccl_sms, and
  // exec::tp_comm_sms / tp_ring_sms for TP, over the GPU's SMs); any_sm_share_: one is not 0.
  double sm_share_[kSmHolders] = {};
  bool any_sm_share_ = false;
  // The share of actor `act`'s SMs its transferring collectives hold, at most all of them.
  double held_share(const Actor& act) const;
  std::vector<int> sm_dirty_;  // actors whose SM holds changed in this picosecond
};


}  // namespace trainsim::exec::detail
