#include "sim/core/event_queue.h"

#include <cassert>

namespace trainsim {

EventHandle EventQueue::push(TimePs at, EventTarget* target, std::uint64_t tag) {
  std::uint32_t slot;
  if (free_.empty()) {
    slot = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  } else {
    slot = free_.back();
    free_.pop_back();
  }
  slots_[slot].target = target;
  slots_[slot].tag = tag;
  place(slot, at, next_seq_++);
  ++size_;
  return EventHandle{slot, slots_[slot].generation};
}

bool EventQueue::pending(EventHandle h) const {
  return h.slot < slots_.size() && slots_[h.slot].generation == h.generation &&
         slots_[h.slot].seq != kNoSeq;
}

bool EventQueue::cancel(EventHandle h) {
  if (!pending(h)) return false;
  if (buckets_mode_) {
    leave(slots_[h.slot].bucket);
  } else {
    heap_.erase(static_cast<std::int32_t>(h.slot));
  }
  release(h.slot);
  --size_;
  return true;
}

bool EventQueue::reschedule(EventHandle h, TimePs at) {
  if (!pending(h)) return false;
  // It orders as if scheduled now. In buckets the old entry goes stale (its seq no longer
  // matches the slot's).
  const std::uint32_t old = slots_[h.slot].bucket;
  place(h.slot, at, next_seq_++);
  if (buckets_mode_) leave(old);
  return true;
}

TimePs EventQueue::time_of(EventHandle h) const {
  assert(pending(h));
  return slots_[h.slot].time;
}

EventTarget* EventQueue::target_of(EventHandle h) const {
  assert(pending(h));
  return slots_[h.slot].target;
}

std::uint64_t EventQueue::tag_of(EventHandle h) const {
  assert(pending(h));
  return slots_[h.slot].tag;
}

EventQueue::Event EventQueue::pop() {
  Event e;
  std::uint32_t slot;
  if (buckets_mode_) {
    const auto b = static_cast<std::uint32_t>(times_.top_id());
    Bucket& B = buckets_[b];
    // The bucket has a live entry (it is removed when its last one leaves): skip the stale ones.
    Item it = B.items[B.head++];
    while (slots_[it.slot].seq != it.seq) it = B.items[B.head++];
    slot = it.slot;
    e = Event{B.time, it.seq, slots_[slot].target, slots_[slot].tag};
    leave(b);
  } else {
    const Key key = heap_.top_key();
    slot = static_cast<std::uint32_t>(heap_.pop());
    e = Event{key.time, key.seq, slots_[slot].target, slots_[slot].tag};
  }
  release(slot);
  --size_;
  observe_pop(e.time);
  return e;
}

void EventQueue::prefetch_upcoming() const {
  if (!buckets_mode_ || size_ == 0) return;
  const Bucket& B = buckets_[static_cast<std::size_t>(times_.top_id())];
  const std::size_t h = B.head;
  // The bucket's own entries further ahead still (four to a cache line), then the records.
  if (h + kItemLookahead < B.items.size()) __builtin_prefetch(&B.items[h + kItemLookahead]);
  if (h + kSlotLookahead < B.items.size()) {
    __builtin_prefetch(&slots_[B.items[h + kSlotLookahead].slot]);
  }
  if (h + kTargetLookahead < B.items.size()) {
    const Item& it = B.items[h + kTargetLookahead];
    const Slot& s = slots_[it.slot];
    if (s.seq == it.seq) s.target->prefetch(s.tag);
  }
}

std::size_t EventQueue::memory_bytes() const {
  std::size_t n = slots_.capacity() * sizeof(Slot) + free_.capacity() * sizeof(std::uint32_t) +
                  heap_.memory_bytes() + times_.memory_bytes() +
                  buckets_.capacity() * sizeof(Bucket) +
                  free_buckets_.capacity() * sizeof(std::uint32_t) +
                  index_.capacity() * sizeof(std::uint32_t);
  for (const Bucket& b : buckets_) n += b.items.capacity() * sizeof(Item);
  return n;
}

void EventQueue::place(std::uint32_t slot, TimePs at, std::uint64_t seq) {
  Slot& s = slots_[slot];
  s.seq = seq;
  s.time = at;
  if (!buckets_mode_) {
    heap_.set(static_cast<std::int32_t>(slot), Key{at, seq});
    return;
  }
  const std::uint32_t b = bucket_for(at);
  Bucket& B = buckets_[b];
  B.items.push_back(Item{slot, seq});
  ++B.live;
  s.bucket = b;
  // Events that keep moving through a bucket that stays pending (a far timer) leave stale
  // entries behind; past four per live one they are dropped, in order (amortized O(1)).
  if (B.items.size() - B.head > 4 * static_cast<std::size_t>(B.live) + 64) {
    std::size_t kept = 0;
    for (std::size_t i = B.head; i < B.items.size(); ++i) {
      const Item it = B.items[i];
      if (slots_[it.slot].seq == it.seq) B.items[kept++] = it;
    }
    B.items.resize(kept);
    B.head = 0;
  }
}

void EventQueue::observe_pop(TimePs t) {
  window_same_ += t == last_pop_ ? 1 : 0;
  last_pop_ = t;
  if (++window_pops_ < kWindow) return;
  // Buckets when more than half the pops shared their time with the pop before (a bucket then
  // holds two events or more on average), the heap again below a quarter (hysteresis).
  if (!buckets_mode_ && 2 * window_same_ > kWindow) {
    to_buckets();
  } else if (buckets_mode_ && 4 * window_same_ < kWindow) {
    to_heap();
  }
  window_pops_ = window_same_ = 0;
}

// The pending events, popped from the heap in (time, sequence) order, appended to their buckets
// with their own sequence numbers: each bucket's entries stay in sequence order.
void EventQueue::to_buckets() {
  buckets_mode_ = true;
  while (!heap_.empty()) {
    const Key key = heap_.top_key();
    const auto slot = static_cast<std::uint32_t>(heap_.pop());
    place(slot, key.time, key.seq);
  }
}

void EventQueue::to_heap() {
  buckets_mode_ = false;
  for (std::uint32_t slot = 0; slot < slots_.size(); ++slot) {
    Slot& s = slots_[slot];
    if (s.seq == kNoSeq) continue;
    s.bucket = kNoBucket;
    heap_.set(static_cast<std::int32_t>(slot), Key{s.time, s.seq});
  }
  for (std::uint32_t b = 0; b < buckets_.size(); ++b) {
    Bucket& B = buckets_[b];
    if (B.live == 0) continue;
    B.live = 1;  // leave() then removes it
    leave(b);
  }
}

void EventQueue::leave(std::uint32_t b) {
  Bucket& B = buckets_[b];
  if (--B.live > 0) return;
  times_.erase(static_cast<std::int32_t>(b));
  index_erase(B.time);
  B.items.clear();
  B.head = 0;
  free_buckets_.push_back(b);
  if (last_bucket_ == b) last_bucket_ = kNoBucket;
}

std::uint32_t EventQueue::bucket_for(TimePs at) {
  if (last_bucket_ != kNoBucket && buckets_[last_bucket_].time == at) return last_bucket_;
  std::uint32_t b = find_index(at);
  if (b == kNoBucket) {
    if (free_buckets_.empty()) {
      b = static_cast<std::uint32_t>(buckets_.size());
      buckets_.emplace_back();
    } else {
      b = free_buckets_.back();
      free_buckets_.pop_back();
    }
    buckets_[b].time = at;
    times_.set(static_cast<std::int32_t>(b), at);
    index_insert(at, b);
  }
  last_bucket_ = b;
  return b;
}

void EventQueue::release(std::uint32_t slot) {
  Slot& s = slots_[slot];
  ++s.generation;
  s.target = nullptr;
  s.seq = kNoSeq;
  s.bucket = kNoBucket;
  free_.push_back(slot);
}

// Fibonacci hashing of the picosecond count into the table (a power of two).
std::size_t EventQueue::home(TimePs at) const {
  const auto h = static_cast<std::uint64_t>(at.ps) * 0x9E3779B97F4A7C15ull;
  return static_cast<std::size_t>(h >> 32) & (index_.size() - 1);
}

std::uint32_t EventQueue::find_index(TimePs at) const {
  if (index_.empty()) return kNoBucket;
  const std::size_t mask = index_.size() - 1;
  for (std::size_t i = home(at);; i = (i + 1) & mask) {
    const std::uint32_t b = index_[i];
    if (b == kNoBucket || buckets_[b].time == at) return b;
  }
}

void EventQueue::index_insert(TimePs at, std::uint32_t b) {
  // Kept at most half full, so that probes stay short and an empty cell always ends a probe.
  if (2 * (index_used_ + 1) > index_.size()) {
    std::vector<std::uint32_t> old;
    old.swap(index_);
    index_.assign(old.empty() ? 64 : 2 * old.size(), kNoBucket);
    for (const std::uint32_t o : old) {
      if (o == kNoBucket) continue;
      std::size_t i = home(buckets_[o].time);
      while (index_[i] != kNoBucket) i = (i + 1) & (index_.size() - 1);
      index_[i] = o;
    }
  }
  const std::size_t mask = index_.size() - 1;
  std::size_t i = home(at);
  while (index_[i] != kNoBucket) i = (i + 1) & mask;
  index_[i] = b;
  ++index_used_;
}

// Backward-shift deletion: the cells after the hole that could live in it move back, so that no
// probe ever passes an empty cell before its key (no tombstones).
void EventQueue::index_erase(TimePs at) {
  const std::size_t mask = index_.size() - 1;
  std::size_t i = home(at);
  while (buckets_[index_[i]].time != at) i = (i + 1) & mask;
  std::size_t hole = i;
  for (std::size_t j = (hole + 1) & mask; index_[j] != kNoBucket; j = (j + 1) & mask) {
    const std::size_t want = home(buckets_[index_[j]].time);
    // j's entry may move to the hole when its home is not in (hole, j] (cyclically).
    const bool between = hole < j ? (want > hole && want <= j) : (want > hole || want <= j);
    if (!between) {
      index_[hole] = index_[j];
      hole = j;
    }
  }
  index_[hole] = kNoBucket;
  --index_used_;
}

}  // namespace trainsim
