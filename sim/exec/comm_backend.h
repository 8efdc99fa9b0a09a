// The seam between the Program executor and the network (DESIGN.md §1, STYLE.md habit 15): the
// executor asks "start this collective / this transfer, tell me when it ends" and does not know
// which fidelity answers.
//
// A request names the job that posts it (`add_job`), the endpoint inside that job (an executor's
// actor: one rank, or under the symmetry shortcut a pipeline stage standing for all its ranks),
// what moves (kind, bytes, the group's shape) and where to deliver the completion: the backend
// schedules one event for `target` with `tag` on the shared Simulation at the instant the
// communication ends. Completion is an ordinary event, so a backend adds nothing to the event
// order the executor would see if it scheduled the event itself.
//
// Which GPUs take part is the job's knowledge, not the request's: a backend that needs them (the
// flow level, to route) asks the job's `CommEndpoints` the first time it meets an (endpoint,
// dimension) or (endpoint, direction), and caches what it derives. Several jobs may share one
// backend (and so one fabric): every cache is per job.
//
// Each backend owns its network state and its statistics, and writes them into the Result at the
// end (`report`). Backends are built once, by `make_comm_backend`, where the fidelity is chosen.
// Not thread-safe; the Simulation must outlive the backend.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "sim/core/event_queue.h"
#include "sim/core/simulation.h"
#include "sim/exec/program_exec.h"
#include "sim/plan/program.h"

namespace trainsim::exec {

/// A job's answer to "which GPUs does this communication use". Endpoints are the job's own ids
/// (dense from 0).
class CommEndpoints {
 public:
  virtual ~CommEndpoints() = default;
  /// Number of endpoints (caches are sized by it).
  virtual int endpoint_count() const = 0;
  /// The group of dimension `d` of endpoint `e`'s representative rank, in ring order.
  virtual std::vector<int> own_group(int e, plan::Dim d) const = 0;
  /// Every group a collective of `e` in dimension `d` stands for (its own group first): one, or
  /// under the symmetry shortcut every group of the dimension on its pipeline stage.
  virtual std::vector<std::vector<int>> collective_groups(int e, plan::Dim d) const = 0;
  /// Every (sender, receiver) GPU pair a pipeline transfer that `e` sends in direction `dir`
  /// (0 activations to the next stage, 1 gradients to the previous) stands for, own pair first.
  virtual std::vector<std::pair<int, int>> transfer_pairs(int e, int dir) const = 0;

 protected:
  CommEndpoints() = default;
  CommEndpoints(const CommEndpoints&) = default;
  CommEndpoints& operator=(const CommEndpoints&) = default;
};

/// One collective or point-to-point transfer to run now.
struct CommRequest {
  int job = 0;       // from CommBackend::add_job
  int endpoint = 0;  // a collective: the endpoint whose arrival completed the rendezvous; a
                     // transfer: the sending endpoint
  plan::Dim dim = plan::Dim::kNone;
  coll::Kind kind = coll::Kind::kSendRecv;  // kSendRecv for a transfer
  double bytes = 0;                         // per rank, as the task states it
  // The task is one of `pieces` slices of a single collective of pieces × bytes (a TP-overlap
  // chunk, a step of the CP ring exchange): it takes its share of that collective's time.
  int pieces = 1;
  coll::GroupShape shape;  // the group as the closed form sees it
  int direction = 0;       // a transfer: 0 activations (to the next stage), 1 gradients
  // Completion: one event for `target` with `tag`, at the end.
  EventTarget* target = nullptr;
  std::uint64_t tag = 0;
  // Where the backend writes, by the completion, how far apart the copies it ran for this
  // request ended (a symmetry-shortcut request stands for one copy per rank group: the last
  // copy's end minus the first's; 0 for one copy or identical copies). Null: not wanted.
  double* copy_spread_s = nullptr;
};

class CommBackend {
 public:
  virtual ~CommBackend() = default;
  /// Registers a job; its requests carry the returned id. `endpoints` must outlive the backend.
  virtual int add_job(const CommEndpoints& endpoints) = 0;
  /// Starts a collective whose members have all arrived.
  virtual void start_collective(const CommRequest& req) = 0;
  /// Starts a pipeline transfer whose send and receive are both posted.
  virtual void start_transfer(const CommRequest& req) = 0;
  /// The fidelity's name in results ("schedule", "flow").
  virtual const char* fidelity() const = 0;
  /// Writes the backend's network statistics into `r` (r.network, the flow counters of r.exec).
  /// `executed_s` is the executed timeline's length; r.iteration_time_s is final (costs of scale
  /// included).
  virtual void report(double executed_s, Result& r) const = 0;

 protected:
  CommBackend() = default;
  CommBackend(const CommBackend&) = delete;
  CommBackend& operator=(const CommBackend&) = delete;
};

/// The backend of `options.backend` on `sim`: the closed form (schedule fidelity) or the flow
/// level. `analytic` is the analytic evaluation of the same configuration (the closed form reports
/// its traffic estimate over the executed iteration). Throws trainsim::Error(kInput) for options
/// the backend cannot model (packet spraying, a non-ring algorithm at flow fidelity).
std::unique_ptr<CommBackend> make_comm_backend(Simulation& sim, const RunConfig& cfg,
                                               const ExecOptions& options, const Result& analytic);

}  // namespace trainsim::exec
