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
  heap_.set(static_cast<std::int32_t>(slot), Key{at, next_seq_++});
  return EventHandle{slot, slots_[slot].generation};
}

bool EventQueue::pending(EventHandle h) const {
  return h.slot < slots_.size() && slots_[h.slot].generation == h.generation &&
         heap_.contains(static_cast<std::int32_t>(h.slot));
}

bool EventQueue::cancel(EventHandle h) {
  if (!pending(h)) return false;
  heap_.erase(static_cast<std::int32_t>(h.slot));
  release(h.slot);
  return true;
}

bool EventQueue::reschedule(EventHandle h, TimePs at) {
  if (!pending(h)) return false;
  heap_.set(static_cast<std::int32_t>(h.slot), Key{at, next_seq_++});
  return true;
}

TimePs EventQueue::time_of(EventHandle h) const {
  assert(pending(h));
  return heap_.key(static_cast<std::int32_t>(h.slot)).time;
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
  const Key key = heap_.top_key();
  const auto slot = static_cast<std::uint32_t>(heap_.pop());
  Event e{key.time, key.seq, slots_[slot].target, slots_[slot].tag};
  release(slot);
  return e;
}

void EventQueue::release(std::uint32_t slot) {
  ++slots_[slot].generation;
  slots_[slot].target = nullptr;
  free_.push_back(slot);
}

}  // namespace trainsim
