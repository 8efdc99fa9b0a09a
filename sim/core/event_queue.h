// The pending-event set of a simulation: a min-heap of (time, sequence) with handles.
//
// Every event names an `EventTarget` and a 64-bit tag the target interprets; there is no closure
// per event, and slots are recycled through a free list, so a warm queue schedules, cancels and
// pops without allocating. Events at the same picosecond pop in the order they were scheduled
// (the sequence number breaks ties), which makes a run a pure function of its inputs.
//
// A handle stays valid until its event fires or is cancelled; afterwards every operation on it is
// a harmless no-op (the slot's generation has moved on). Not thread-safe.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "sim/core/indexed_heap.h"
#include "sim/core/units.h"

namespace trainsim {

/// Receives the events it scheduled. Implemented by simulation components.
class EventTarget {
 public:
  virtual void on_event(std::uint64_t tag) = 0;

 protected:
  ~EventTarget() = default;
};

struct EventHandle {
  static constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
  std::uint32_t slot = kNone;
  std::uint32_t generation = 0;
};

class EventQueue {
 public:
  struct Event {
    TimePs time;
    std::uint64_t seq = 0;  // order of scheduling; unique within a queue
    EventTarget* target = nullptr;
    std::uint64_t tag = 0;
  };

  EventHandle push(TimePs at, EventTarget* target, std::uint64_t tag);
  /// Removes a pending event; returns false when it already fired or was cancelled.
  bool cancel(EventHandle h);
  /// Moves a pending event to `at`; it then orders as if scheduled now. False when not pending.
  bool reschedule(EventHandle h, TimePs at);
  bool pending(EventHandle h) const;
  /// Time, target and tag of a pending event (`pending(h)` must hold).
  TimePs time_of(EventHandle h) const;
  EventTarget* target_of(EventHandle h) const;
  std::uint64_t tag_of(EventHandle h) const;

  bool empty() const { return heap_.empty(); }
  /// Sequence numbers handed out so far (every push and reschedule takes one): unchanged
  /// between two calls means nothing was scheduled in between.
  std::uint64_t scheduled() const { return next_seq_; }
  std::size_t size() const { return heap_.size(); }
  /// Time of the earliest pending event (queue must not be empty).
  TimePs next_time() const { return heap_.top_key().time; }
  /// Removes and returns the earliest event.
  Event pop();

 private:
  struct Key {
    TimePs time;
    std::uint64_t seq = 0;
    auto operator<=>(const Key&) const = default;
  };
  struct Slot {
    EventTarget* target = nullptr;
    std::uint64_t tag = 0;
    std::uint32_t generation = 0;
  };

  void release(std::uint32_t slot);

  IndexedMinHeap<Key> heap_;
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_;
  std::uint64_t next_seq_ = 0;
};

}  // namespace trainsim
