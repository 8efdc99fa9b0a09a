// The Simulation: simulated clock, pending events, random streams and the components of one run.
//
// Everything a run needs hangs off one Simulation object, with no global state, so two
// simulations can run side by side in one process (DESIGN.md §3, STYLE.md habit 8). The core
// knows nothing of networks, GPUs or training: components (a flow network, an executor) plug in
// by scheduling events for themselves (`EventTarget`) and, when they want to act once per
// timestamp rather than once per event, by asking for a call at the end of the current batch
// (`BatchListener`).
//
// Batches: all events of one picosecond are dispatched first, in scheduling order; then every
// listener that asked during that picosecond gets `on_batch_end()` once, in the order it asked.
// A listener may schedule further events at the same picosecond (they form the next round of the
// same batch) or ask again; the clock advances only when neither is left. A flow network uses
// this to re-solve rates once for all arrivals and departures of a timestamp.
//
// Determinism: the order of dispatch depends only on event times and the order of scheduling, and
// all randomness comes from `rng_stream(name)`, derived from the seed. Not thread-safe; a
// simulation belongs to one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/core/event_queue.h"
#include "sim/core/observer.h"
#include "sim/core/rng.h"
#include "sim/core/units.h"

namespace trainsim {

/// A part of a simulation that the Simulation owns (see `Simulation::emplace`).
class Component {
 public:
  virtual ~Component() = default;
};

/// Called once at the end of a timestamp's batch of events, when it asked for it.
class BatchListener {
 public:
  virtual void on_batch_end() = 0;

 protected:
  ~BatchListener() = default;
};

/// One dispatched event, as seen by trace observers.
struct DispatchRecord {
  TimePs time;
  std::uint64_t seq = 0;
  std::uint64_t tag = 0;
  bool operator==(const DispatchRecord&) const = default;
};

class Simulation {
 public:
  explicit Simulation(std::uint64_t seed = 0);
  /// Destroys the owned components in reverse order of creation, before the event queue.
  ~Simulation();
  Simulation(const Simulation&) = delete;
  Simulation& operator=(const Simulation&) = delete;

  TimePs now() const { return now_; }
  std::uint64_t seed() const { return seed_; }

  /// Schedules `target.on_event(tag)` at `at` (>= now(); a time in the past is a logic error).
  EventHandle schedule(TimePs at, EventTarget& target, std::uint64_t tag = 0);
  /// Schedules a closure at `at`. Allocates per call: meant for scenario set-up (a link flap at a
  /// given time) and tests, not for per-flow or per-task events.
  EventHandle schedule_call(TimePs at, std::function<void()> fn);
  bool cancel(EventHandle h);
  bool reschedule(EventHandle h, TimePs at);
  bool pending(EventHandle h) const { return queue_.pending(h); }

  /// Asks for `listener.on_batch_end()` after the events of the current picosecond. Asking twice
  /// in one round is asking once.
  void request_batch_end(BatchListener& listener);

  /// The random stream `name`: the same sequence for the same seed and name, independent of
  /// which other streams exist.
  Rng rng_stream(std::string_view name) const { return Rng(derive_stream_seed(seed_, name)); }

  /// Creates a component owned by this simulation: `T(*this, args...)`, alive until the
  /// simulation is destroyed.
  template <class T, class... Args>
  T& emplace(Args&&... args) {
    auto owned = std::make_unique<T>(*this, std::forward<Args>(args)...);
    T& ref = *owned;
    components_.push_back(std::move(owned));
    return ref;
  }

  /// Runs until no event or batch call is left, or `stop()`. Returns the events dispatched.
  std::uint64_t run();
  /// Runs every event at or before `t`, then moves the clock to `t` (unless stopped earlier).
  std::uint64_t run_until(TimePs t);
  /// Makes `run`/`run_until` return after the current event or batch call.
  void stop() { stopped_ = true; }

  /// Every dispatched event, for traces and determinism checks.
  Signal<DispatchRecord>& dispatched() { return dispatched_; }

  std::uint64_t events_dispatched() const { return events_dispatched_; }
  std::uint64_t batch_calls() const { return batch_calls_; }
  std::size_t pending_events() const { return queue_.size(); }
  /// Events scheduled so far (EventQueue::scheduled).
  std::uint64_t scheduled_events() const { return queue_.scheduled(); }

 private:
  class CallTarget : public EventTarget {
   public:
    explicit CallTarget(Simulation& sim) : sim_(sim) {}
    void on_event(std::uint64_t tag) override;

   private:
    Simulation& sim_;
  };

  std::uint64_t run_loop(TimePs limit);
  void check_not_past(TimePs at) const;

  std::uint64_t seed_;
  TimePs now_;
  EventQueue queue_;
  bool stopped_ = false;
  std::vector<BatchListener*> batch_pending_;
  std::vector<BatchListener*> batch_running_;
  CallTarget call_target_{*this};
  std::vector<std::function<void()>> calls_;
  std::vector<std::uint64_t> free_calls_;
  Signal<DispatchRecord> dispatched_;
  std::uint64_t events_dispatched_ = 0;
  std::uint64_t batch_calls_ = 0;
  std::vector<std::unique_ptr<Component>> components_;
};

}  // namespace trainsim
