// The flow-level network: fluid flows over routed paths, max-min rates, congestion control,
// link failures, driven by the event core.
//
// A flow is a path of topo::LinkIds (the topology's router computes it), a byte count, an
// optional rate bound (the NIC line rate) and a caller's tag. Rates are the exact max-min
// allocation of `MaxMinSolver` under the congestion-control model of `CongestionModel`
// (capacity derating, rate-increase lag). The network advances by events only:
//
//   * Each flow's completion date sits in a heap and is recomputed only when its rate changes;
//     the network keeps one pending Simulation event, at the earliest completion or timer.
//   * Arrivals, departures, capacity changes and timers of one picosecond are processed as one
//     batch (`BatchListener`): the solver then re-solves, once, only the components they touched.
//   * A link going down stalls the flows crossing it. A stalled flow resumes at the first
//     retransmission after the link is back (RTO = 4.096 µs · 2^timeout after the stall began,
//     then every RTO); if the link is still down retry_count · RTO after the stall began, the
//     flow fails and `flow_failed` fires (the executor turns that into a job failure).
//
// Groups (`start_group`): a caller that starts the same flows again and again starts them under a
// key; each connected component of them that runs alone on its links is recorded once and later
// replayed outside the solver, until other traffic reaches it (see start_group).
//
// Bytes are conserved to the byte: a flow's fluid integral ∫rate dt equals its size within one
// byte at completion (completion dates are rounded up to the picosecond), which `stats()` records.
//
// Ownership: the Simulation passed in must outlive the network (create it with
// `Simulation::emplace<FlowNetwork>(...)`). FlowIds are solver slots: valid from `start_flow`
// until the flow's `flow_done`/`flow_failed` notification or `abort_flow`, then reused.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "sim/core/indexed_heap.h"
#include "sim/core/observer.h"
#include "sim/core/simulation.h"
#include "sim/core/units.h"
#include "sim/network/congestion.h"
#include "sim/network/maxmin.h"
#include "topology/ids.h"

namespace trainsim::net {

using FlowId = FlowIndex;

struct FlowSpec {
  std::span<const topo::LinkId> path;  // copied by start_flow
  std::int64_t bytes = 0;
  double cap_Bps = kUnlimited;  // rate bound, e.g. the NIC line rate
  std::uint64_t tag = 0;        // the caller's id, echoed in notifications
  int priority = 0;             // packet level: its priority class (0 = served first)
  /// Packet level, network.routing.mode spray: the equal-cost paths the flow's packets are
  /// spread over, path k being spray_links[spray_offset[k], spray_offset[k+1]) (spans into a
  /// store of many flows' paths); each starts with `path`'s first link. Fewer than two paths:
  /// every packet takes `path`.
  std::span<const topo::LinkId> spray_links{};
  std::span<const std::uint32_t> spray_offset{};
};

struct FlowDone {
  FlowId id = -1;
  std::uint64_t tag = 0;
  TimePs start;
  TimePs end;
  std::int64_t bytes = 0;
  /// Flows this notification stands for: 1, except for replayed flows under
  /// FlowNetworkOptions::merge_replayed_completions (then `start` is the earliest start, `end`
  /// the latest end and `bytes` the sum of the merged flows, which share `tag`).
  std::int32_t count = 1;
};

struct FlowFailed {
  FlowId id = -1;
  std::uint64_t tag = 0;
  TimePs start;
  TimePs stalled_since;  // when the link on its path went down
  TimePs time;           // stalled_since + retry_count · RTO
  std::int64_t bytes_left = 0;
};

struct FlowRateChanged {
  FlowId id = -1;
  std::uint64_t tag = 0;
  TimePs time;
  double rate_Bps = 0;
};

#ifdef NDEBUG
inline constexpr bool kCheckInvariantsByDefault = false;
#else
inline constexpr bool kCheckInvariantsByDefault = true;
#endif

struct FlowNetworkOptions {
  NetworkConfig config;
  /// Links where only one sender's queue pairs meet (a host's NIC egress, an NVLink port): the
  /// NIC schedules them, so the congestion-control derating does not apply there.
  std::vector<topo::LinkId> sender_links;
  /// Check the max-min invariants after every solve (throws std::logic_error on a violation).
  bool check_invariants = kCheckInvariantsByDefault;
  /// A replay reports the flows it completes at one moment with one tag as one FlowDone (with
  /// its `count`) instead of one per flow: for callers that only wait for the last flow of a tag.
  bool merge_replayed_completions = false;
};

struct FlowNetworkStats {
  std::int64_t solves = 0;          // re-solves (batches with a change, plus CC hold rounds)
  // Of them: kept as verified partial re-fills (MaxMinSolver::solve_verified), and tried as one
  // but given to the level-restricted search (the rest went to the search directly).
  std::int64_t solves_partial = 0;
  std::int64_t solves_partial_given_up = 0;
  std::int64_t flows_resolved = 0;  // Σ flows in the re-solved components
  std::int64_t links_resolved = 0;  // Σ links in the re-solved components
  std::int64_t rate_changes = 0;    // flows whose applied rate changed
  std::int64_t flows_started = 0;
  std::int64_t flows_done = 0;
  std::int64_t flows_failed = 0;
  std::int64_t bytes_started = 0;
  std::int64_t bytes_done = 0;
  std::int64_t flows_replayed = 0;  // flows that followed a recorded trajectory (start_group)
  std::int64_t replays_materialized = 0;  // replayed components that something reached mid-way
  std::int64_t composites_recorded = 0;   // replays reached by a group, recorded together
  std::int64_t composites_replayed = 0;   // ... and replayed together (no solver work)
  double max_residual_bytes = 0;  // largest |size − ∫rate dt| seen at a completion
};

class FlowNetwork final : public Component, public EventTarget, public BatchListener {
 public:
  /// `link_capacity_Bps` is indexed by topo::LinkId. Throws trainsim::Error on bad input.
  FlowNetwork(Simulation& sim, std::vector<double> link_capacity_Bps,
              FlowNetworkOptions options = {});

  /// Starts a flow now; its rate is set at the end of the current batch.
  FlowId start_flow(const FlowSpec& spec);
  /// Starts a group of flows now (a transfer's queue pairs). With `group_key` != 0, under any
  /// congestion-control model, the group is split once per key into its connected components (flows
  /// sharing links), and each component whose links are up and carry no other flow runs alone:
  /// its max-min rates depend on nothing else. The caller guarantees that a key always names the
  /// same paths, bounds and sizes, in the same order (a different count or size is refused).
  ///   * a component that stays alone until its last flow ends is recorded (every rate change
  ///     and completion, as offsets from its start);
  ///   * later starts of a recorded component that find it alone are replayed: its flows stay
  ///     out of the solver and complete at the recorded offsets. When anything reaches its links
  ///     before it ends (a flow starting on one, a capacity change, a link going down), its
  ///     unfinished flows enter the solver at that moment with their recorded rates and the bytes
  ///     they have left (under congestion control also a rate-increase hold in progress, with its
  ///     end, and their links derated for the flows back on them), and everything proceeds as if
  ///     they had been there all along (max-min allocations of disjoint components are
  ///     independent; a component's derating and holds depend only on its own flows).
  /// A component whose links are held by replays only starts with them as a composite: the
  /// replays' remaining flows and its own, recorded the first time such a meeting (same group,
  /// same replays at the same age) runs alone to its end and replayed at the next.
  /// Otherwise it is start_flow for each. Returns the ids of the flows that entered the solver
  /// (replayed flows report id -1 in FlowDone).
  /// `tag_base` is OR-ed into every flow's tag (FlowDone reports spec.tag | tag_base): a caller
  /// whose flows keep their tags from start to start and only change a per-start part passes
  /// the same specs each time, and a replay then reports its completions without a per-flow
  /// tag table.
  std::span<const FlowId> start_group(std::span<const FlowSpec> specs, std::uint64_t group_key,
                                      std::uint64_t tag_base = 0);
  /// Removes an active flow without notification.
  void abort_flow(FlowId id);

  /// Changes a link's capacity now (a degraded port, a re-trained lane).
  void set_link_capacity(topo::LinkId l, double capacity_Bps);
  /// Takes a link down or brings it back now.
  void set_link_up(topo::LinkId l, bool up);
  /// Schedules a flap: down at `down_at`, up again `duration` later.
  void schedule_link_flap(topo::LinkId l, TimePs down_at, TimePs duration);

  bool active(FlowId id) const { return solver_.alive(id); }
  /// Rate in effect now (0 while stalled or before the first solve).
  double rate_Bps(FlowId id) const { return st_[static_cast<std::size_t>(id)].applied_rate; }
  /// Bytes not yet delivered, as of now.
  double remaining_bytes(FlowId id) const;
  std::int64_t active_flows() const { return solver_.flow_count(); }
  bool link_up(topo::LinkId l) const { return down_[static_cast<std::size_t>(l)] == 0; }

  Signal<FlowDone>& flow_done() { return flow_done_; }
  Signal<FlowFailed>& flow_failed() { return flow_failed_; }
  Signal<FlowRateChanged>& rate_changed() { return rate_changed_; }

  const MaxMinSolver& solver() const { return solver_; }
  const CongestionModel& congestion() const { return cc_; }
  const FlowNetworkStats& stats() const { return stats_; }
  /// Bytes held by the network and its solver (container capacities).
  std::size_t memory_bytes() const;

 private:
  // The wake-up event only asks for the end-of-batch call, where all work happens.
  void on_event(std::uint64_t tag) override;
  void on_batch_end() override;

  enum class Timer : std::uint8_t { kNone, kHold, kResume, kDeadline };

  double effective_cap(FlowId f) const;
  void refresh_cap(FlowId f);
  void refresh_link_efficiency(topo::LinkId l);
  void advance(FlowId f, TimePs now);
  void set_timer(FlowId f, Timer kind, TimePs at);
  void clear_timer(FlowId f);
  void handle_timer(FlowId f);
  void complete(FlowId f);
  void fail(FlowId f);
  void remove(FlowId f);
  void solve_and_apply();
  void note_solve();
  void apply_rate(FlowId f, double rate);
  void reschedule_wakeup();
  void request_flush() { sim_.request_batch_end(*this); }
  void ensure_slot(FlowId f);
  void init_flow(FlowId f, const FlowSpec& spec, std::int32_t down);
  struct Trajectory;
  struct Shape;
  struct Owner;
  Shape& shape_of(std::uint64_t key, std::span<const FlowSpec> specs);
  std::int32_t new_owner(Shape* sh, std::uint32_t comp, bool replay);
  void release_owner(std::int32_t o);
  void touch_links(std::span<const topo::LinkId> path);
  void contact(std::int32_t o);
  void end_replay(std::int32_t o, bool early);
  void schedule_replay_end(std::int32_t o, TimePs at);
  void cancel_replay_end(std::int32_t o);
  void fire_replay_batch(std::int32_t b);
  std::uint64_t tag_of(const Owner& ow, std::uint32_t flow) const;
  FlowId start_spec(const FlowSpec& spec);  // start_flow with the current group's tag_base
  void replay_break(std::int32_t o);
  std::size_t replay_done(const Owner& ow, std::size_t from, std::int64_t elapsed,
                          std::vector<FlowDone>* done) const;
  void report_done(std::span<const FlowDone> done);
  std::uint8_t classify(const Shape& sh, std::uint32_t c, std::vector<std::int32_t>* owners) const;
  bool start_composite(const Shape& sh, std::span<const FlowSpec> specs,
                       std::span<const std::uint32_t> comps, std::vector<std::int32_t> owners,
                       std::vector<FlowId>* ids);
  void replay_composite(Shape& csh, const Shape& sh, std::span<const FlowSpec> specs,
                        std::span<const std::uint32_t> comps, std::span<const std::int32_t> owners);
  std::unique_ptr<Shape> composite_shape(std::span<const std::int32_t> owners, const Shape& sh,
                                         std::span<const FlowSpec> specs,
                                         std::span<const std::uint32_t> comps);
  void record_rate(FlowId f, double rate);
  void record_end(FlowId f);

  Simulation& sim_;
  CongestionModel cc_;
  bool check_invariants_;
  bool merge_replays_;  // FlowNetworkOptions::merge_replayed_completions
  MaxMinSolver solver_;

  // Links.
  std::vector<double> base_capacity_;
  std::vector<std::uint8_t> down_;
  std::vector<std::uint8_t> sender_link_;

  // Flows, indexed by FlowId (solver slot): one record per flow, so that starting, advancing and
  // completing a flow touches one place.
  struct FlowState {
    std::int64_t bytes = 0;
    double remaining = 0;  // as of last_update
    TimePs last_update;
    double applied_rate = 0;
    TimePs start;
    std::uint64_t tag = 0;
    double user_cap = kUnlimited;
    double hold_cap = kUnlimited;  // kUnlimited when no congestion-control hold
    TimePs stall_start;
    std::uint64_t exempt_batch = 0;   // no new hold in this batch (just released)
    std::uint64_t touched_batch = 0;
    std::int32_t down_links = 0;      // down links on the path
    std::int32_t owner = -1;          // the recording this flow belongs to (-1: none)
    std::int32_t owner_index = 0;     // its position in that group
    Timer timer_kind = Timer::kNone;
    std::uint8_t stalled = 0;         // waiting for a link or for its retransmission
  };
  std::vector<FlowState> st_;

  IndexedMinHeap<TimePs> completion_;
  IndexedMinHeap<TimePs> timers_;
  EventHandle wakeup_;
  std::uint64_t batch_ = 0;
  std::vector<FlowId> touched_;
  std::vector<topo::LinkId> path_scratch_;

  std::vector<FlowId> group_ids_;
  bool in_batch_ = false;                // inside on_batch_end (batch_ is the current batch)
  std::uint64_t tag_base_ = 0;           // start_group's tag_base while it runs
  std::vector<FlowId> materialized_;     // end_replay scratch

  // Replay (start_group). A Shape is a key's flows split into components; a Trajectory is what a
  // component did alone (flows in component order); an Owner is a component whose links no
  // other flow crosses, either recording (its flows are real) or replayed (outside the solver).
  // link_owner_[l] is the owner of link l or -1.
  struct Trajectory {
    std::vector<std::uint32_t> seg_offset{0};  // flow k: segments [seg_offset[k], seg_offset[k+1])
    std::vector<std::int64_t> seg_start;       // ps after the start
    std::vector<double> seg_rate;
    std::vector<std::int64_t> end;             // ps after the start
    std::vector<std::uint32_t> order;          // flows by end
    // Plain shapes: per position of `order`, one past the last position of its run (the
    // consecutive flows with the same tag in the shape), and the sizes summed along `order`
    // (n + 1 entries): what merged completions report without visiting each flow.
    std::vector<std::uint32_t> run_end;
    std::vector<std::int64_t> bytes_before;
    std::int64_t last_end = 0;
    // When completions are reported (ps after the start, ascending, the last is last_end): the
    // end of each part's last flow (flows of a part share their caller's tag, so its last
    // completion is reported at its own date).
    std::vector<std::int64_t> breaks;
    // Congestion-control holds (a flow keeping its old rate for τ_up after its share rose):
    // flow k: holds [hold_offset[k], hold_offset[k+1]), each set at hold_set (ps after the
    // start) at rate hold_cap until hold_until. What a materialized flow needs besides its rate.
    std::vector<std::uint32_t> hold_offset{0};
    std::vector<std::int64_t> hold_set, hold_until;
    std::vector<double> hold_cap;
  };
  struct Shape {
    std::vector<topo::LinkId> links;  // every flow's path, back to back
    std::vector<std::uint32_t> offset;
    std::vector<std::int64_t> bytes;
    std::vector<double> caps;
    std::vector<std::uint32_t> comp_flows;   // flow indices by component
    std::vector<std::uint32_t> comp_offset;  // component c: [comp_offset[c], comp_offset[c+1])
    std::vector<topo::LinkId> comp_links;    // the distinct links of each component
    std::vector<std::uint32_t> comp_link_offset;
    std::vector<std::int64_t> comp_bytes;  // per component, the sum of its flows' sizes
    std::vector<std::uint64_t> tags;       // plain shapes: the tags of the first start's specs
    std::vector<std::shared_ptr<const Trajectory>> trajectory;  // per component, once recorded
    std::vector<std::int32_t> recording;                         // owner recording it, or -1
    std::uint64_t serial = 0;  // unique per shape, for composite keys
    // A composite shape (replays that a new group reached, with that group's flows; one
    // component) starts with flows under way. Per flow: bytes left at the start, its start in
    // ps relative to the composite's (<= 0), and its part (the replay it came from, or the new
    // group). Empty for a plain shape: full sizes, starts at 0, one part.
    std::vector<double> left0;
    std::vector<std::int64_t> start0;
    std::vector<std::uint32_t> part;
  };
  struct Owner {
    bool live = false;
    bool replay = false;
    Shape* shape = nullptr;
    std::uint32_t comp = 0;
    TimePs start;
    // Replay: the start's tags, by flow; or null, when they are the shape's tags | tag_base.
    std::shared_ptr<std::vector<std::uint64_t>> tags;
    std::uint64_t tag_base = 0;
    // Recording.
    std::vector<FlowId> ids;
    std::vector<std::vector<std::pair<std::int64_t, double>>> segs;
    struct Hold {
      std::int64_t set, until;
      double cap;
    };
    std::vector<std::vector<Hold>> holds;
    std::vector<std::int64_t> ends;
    std::int64_t ended = 0;
    // Replay.
    std::shared_ptr<const Trajectory> trajectory;
    EventHandle end_event;       // unless batch >= 0
    std::int32_t batch = -1;     // the replay-end batch whose event stands for end_event
    std::uint32_t gen = 0;       // bumped at each new_owner (batches hold (owner, gen))
    std::size_t emitted = 0;     // completions reported so far (in trajectory order)
    std::size_t next_break = 0;  // the break end_event stands for
  };
  std::unordered_map<std::uint64_t, std::unique_ptr<Shape>> shapes_;
  // Composite shapes by their descriptor: the new group's shape and components, whether it
  // started inside a batch, and each reached replay's shape, component and age.
  std::map<std::vector<std::int64_t>, std::unique_ptr<Shape>> composites_;
  std::uint64_t next_serial_ = 1;
  std::vector<FlowId> replay_ids_;  // end_replay: the solver id of each flow it brought back (-1: done)
  std::vector<std::int32_t> owner_mark_;  // start_group scratch, by owner
  std::vector<Owner> owners_;
  std::vector<std::int32_t> free_owners_;
  std::vector<std::int32_t> link_owner_;
  // Replay ends that would be consecutive events (the same time, nothing scheduled between
  // them) share one event, which ends them in the order they were scheduled: the same order
  // the separate events would have been dispatched in.
  struct ReplayBatch {
    TimePs at;
    std::uint64_t scheduled_after = 0;  // Simulation::scheduled_events() after its event
    EventHandle event;
    std::int32_t live = 0;              // members not cancelled
    std::vector<std::pair<std::int32_t, std::uint32_t>> members;  // (owner, gen)
  };
  // Completion lists of replays being reported, one per nesting level (an observer of one
  // replay's completions may end another): reused instead of allocated per replay.
  std::deque<std::vector<FlowDone>> done_pool_;
  std::size_t done_depth_ = 0;
  struct DoneScratch {
    FlowNetwork& net;
    std::vector<FlowDone>& done;
    explicit DoneScratch(FlowNetwork& n)
        : net(n),
          done(n.done_depth_ < n.done_pool_.size() ? n.done_pool_[n.done_depth_]
                                                   : n.done_pool_.emplace_back()) {
      ++net.done_depth_;
      done.clear();
    }
    ~DoneScratch() { --net.done_depth_; }
    DoneScratch(const DoneScratch&) = delete;
    DoneScratch& operator=(const DoneScratch&) = delete;
  };
  std::vector<ReplayBatch> batches_;
  std::vector<std::int32_t> free_batches_;
  std::int32_t open_batch_ = -1;  // the batch a replay ending at its time may still join

  Signal<FlowDone> flow_done_;
  Signal<FlowFailed> flow_failed_;
  Signal<FlowRateChanged> rate_changed_;
  FlowNetworkStats stats_;
};

}  // namespace trainsim::net
