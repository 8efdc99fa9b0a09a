// The pending-event set of a simulation, ordered by (time, sequence), with handles.
//
// Every event names an `EventTarget` and a 64-bit tag the target interprets; there is no closure
// per event, and slots are recycled through a free list, so a warm queue schedules, cancels and
// pops without allocating. Events at the same picosecond pop in the order they were scheduled
// (the sequence number breaks ties), which makes a run a pure function of its inputs.
//
// Two layouts, one order. A simulation of many identical ranks schedules most of its events at
// times that are already pending (the every-rank flow run of the default scenario at 768 GPUs:
// 774 events pending on average over 22 distinct times, 96 % of its 260 M schedules landing on
// a pending time); a packet-level run schedules nearly every event at a time of its own. The
// queue serves both:
//   * heap layout: a 4-ary min-heap over the events' (time, sequence) keys;
//   * bucket layout: one bucket per distinct pending time, its events in scheduling order, a
//     min-heap over the buckets' times and a hash index from time to bucket, so that a push to
//     a pending time appends and a pop takes a bucket's front, where the heap pays log(n)
//     mispredicted comparisons for each. A cancelled or rescheduled event leaves a stale entry
//     in its old bucket, skipped when reached; a bucket whose last live event leaves is removed
//     at once.
// Within a bucket, scheduling order is sequence order, so both layouts pop in exactly the
// (time, sequence) order. The queue counts, over each window of pops, how many come at the time
// of the pop before (events sharing a time) and moves to buckets when most do and back to the
// heap when few do (rebuilding from the pending events with their own sequence numbers): which
// layout is used changes the speed, never the order.
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
  /// A hint that an event with `tag` is one of the next to be dispatched
  /// (EventQueue::prefetch_upcoming): a target whose events visit records scattered over a
  /// large state (an every-rank run's actors) may prefetch them. It must change nothing.
  virtual void prefetch(std::uint64_t /*tag*/) const {}

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

  bool empty() const { return size_ == 0; }
  /// Sequence numbers handed out so far (every push and reschedule takes one): unchanged
  /// between two calls means nothing was scheduled in between.
  std::uint64_t scheduled() const { return next_seq_; }
  std::size_t size() const { return size_; }
  /// Time of the earliest pending event (queue must not be empty).
  TimePs next_time() const {
    return buckets_mode_ ? buckets_[static_cast<std::size_t>(times_.top_id())].time
                         : heap_.top_key().time;
  }
  /// Whether the bucket layout is in use (the order is the same in both).
  bool buckets_mode() const { return buckets_mode_; }
  /// Bytes held by the queue's containers (capacity, not size).
  std::size_t memory_bytes() const;
  /// Removes and returns the earliest event.
  Event pop();
  /// A hint for what the next pops will read, changing nothing (bucket layout only, where the
  /// events of one time are dispatched in their bucket's order): prefetches the queue's record
  /// of the event kSlotLookahead places behind the earliest (and the bucket's entries
  /// kItemLookahead places behind it), and asks the target of the one
  /// kTargetLookahead places behind it to prefetch what its dispatch will read (its record was
  /// prefetched some pops before). Simulation::run_loop calls it between a pop and its dispatch.
  void prefetch_upcoming() const;
  static constexpr std::size_t kTargetLookahead = 1;
  static constexpr std::size_t kSlotLookahead = 6;
  static constexpr std::size_t kItemLookahead = 16;

 private:
  struct Key {
    TimePs time;
    std::uint64_t seq = 0;
    auto operator<=>(const Key&) const = default;
  };
  static constexpr std::uint64_t kNoSeq = std::numeric_limits<std::uint64_t>::max();
  static constexpr std::uint32_t kNoBucket = std::numeric_limits<std::uint32_t>::max();
  struct Slot {
    EventTarget* target = nullptr;
    std::uint64_t tag = 0;
    std::uint64_t seq = kNoSeq;  // of its current scheduling; kNoSeq when not pending
    TimePs time;
    std::uint32_t bucket = kNoBucket;  // bucket layout
    std::uint32_t generation = 0;
  };
  // A bucket's entry: live while its slot's seq is still this one.
  struct Item {
    std::uint32_t slot;
    std::uint64_t seq;
  };
  struct Bucket {
    TimePs time;
    std::vector<Item> items;   // in scheduling order, stale ones included
    std::uint32_t head = 0;    // items before it are popped
    std::uint32_t live = 0;    // pending events in the bucket
  };

  /// Puts `slot`'s event at `at` with sequence number `seq` into the current layout.
  void place(std::uint32_t slot, TimePs at, std::uint64_t seq);
  /// Counts a pop at `t` and switches the layout at the end of a window.
  void observe_pop(TimePs t);
  void to_buckets();
  void to_heap();
  /// A pending event left bucket `b` (fired, cancelled or moved).
  void leave(std::uint32_t b);
  std::uint32_t bucket_for(TimePs at);
  void release(std::uint32_t slot);

  // Time -> bucket: open addressing, linear probing, backward-shift deletion.
  std::uint32_t find_index(TimePs at) const;
  void index_insert(TimePs at, std::uint32_t b);
  void index_erase(TimePs at);
  std::size_t home(TimePs at) const;

  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_;
  bool buckets_mode_ = false;
  IndexedMinHeap<Key> heap_;                // heap layout: slot -> (time, seq)
  // Layout choice: pops in the current window, and those at the time of the pop before.
  static constexpr std::uint32_t kWindow = 4096;
  std::uint32_t window_pops_ = 0, window_same_ = 0;
  TimePs last_pop_{-1};
  std::vector<Bucket> buckets_;
  std::vector<std::uint32_t> free_buckets_;
  IndexedMinHeap<TimePs> times_;            // bucket id -> its time
  std::vector<std::uint32_t> index_;        // hash table of bucket ids (kNoBucket: empty)
  std::uint32_t index_used_ = 0;
  std::uint32_t last_bucket_ = kNoBucket;   // the bucket of the last push (same-time pushes)
  std::size_t size_ = 0;
  std::uint64_t next_seq_ = 0;
};

}  // namespace trainsim
