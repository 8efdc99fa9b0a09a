// A 4-ary min-heap over dense integer ids, with a position index so that the key of any id can
// be changed or the id removed in O(log n) ("a heap with handles"). Four children per node halve
// the depth of a binary heap and sit in one or two cache lines; the pop moves the hole left by
// the top down to a leaf along the smaller children and only then places the last entry
// ("bottom-up" deletion, Wegener 1993), which saves most comparisons against it. The pop order
// depends only on the (key, id) order, not on the heap's shape.
//
// The event queue keeps one entry per pending event in it; the flow network keeps one entry per
// flow's completion date and per flow's control timer. Ties between equal keys are broken by the
// smaller id, so the pop order is a pure function of the (key, id) pairs: nothing depends on the
// order of insertion, which is what makes traces reproducible.
//
// Ids are small non-negative integers (slot numbers owned by the caller); the position index grows
// to the largest id seen and is reused afterwards, so a warm heap never allocates.
// Not thread-safe.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace trainsim {

template <class Key>
class IndexedMinHeap {
 public:
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }

  bool contains(std::int32_t id) const {
    return id >= 0 && static_cast<std::size_t>(id) < pos_.size() && pos_[id] >= 0;
  }
  const Key& key(std::int32_t id) const { return heap_[pos_[id]].key; }

  std::int32_t top_id() const { return heap_.front().id; }
  const Key& top_key() const { return heap_.front().key; }

  /// Inserts `id` (which must not be present) or changes its key (when it is).
  void set(std::int32_t id, Key key) {
    assert(id >= 0);
    if (static_cast<std::size_t>(id) >= pos_.size()) pos_.resize(id + 1, -1);
    std::int32_t at = pos_[id];
    if (at < 0) {
      at = static_cast<std::int32_t>(heap_.size());
      heap_.push_back(Entry{key, id});
      pos_[id] = at;
      sift_up(at);
      return;
    }
    const bool up = less(Entry{key, id}, heap_[at]);
    heap_[at].key = key;
    if (up) {
      sift_up(at);
    } else {
      sift_down(at);
    }
  }

  /// Removes `id` if present; returns whether it was.
  bool erase(std::int32_t id) {
    if (!contains(id)) return false;
    const std::int32_t at = pos_[id];
    pos_[id] = -1;
    const std::int32_t last = static_cast<std::int32_t>(heap_.size()) - 1;
    if (at != last) {
      heap_[at] = heap_[last];
      pos_[heap_[at].id] = at;
      heap_.pop_back();
      if (at > 0 && less(heap_[at], heap_[(at - 1) / kArity])) {
        sift_up(at);
      } else {
        sift_down(at);
      }
    } else {
      heap_.pop_back();
    }
    return true;
  }

  /// Removes and returns the id with the smallest (key, id).
  std::int32_t pop() {
    const std::int32_t id = heap_.front().id;
    pos_[id] = -1;
    const Entry last = heap_.back();
    heap_.pop_back();
    const auto n = static_cast<std::int32_t>(heap_.size());
    if (n == 0) return id;
    // The hole at the top goes down to a leaf along the smallest children, then `last` rises
    // from there to its place.
    std::int32_t at = 0;
    while (true) {
      const std::int32_t best = smallest_child(at, n);
      if (best < 0) break;
      heap_[at] = heap_[best];
      pos_[heap_[at].id] = at;
      at = best;
    }
    heap_[at] = last;
    pos_[last.id] = at;
    sift_up(at);
    return id;
  }

  void clear() {
    for (const Entry& e : heap_) pos_[e.id] = -1;
    heap_.clear();
  }

  std::size_t memory_bytes() const {
    return heap_.capacity() * sizeof(Entry) + pos_.capacity() * sizeof(std::int32_t);
  }

 private:
  struct Entry {
    Key key;
    std::int32_t id;
  };

  static bool less(const Entry& a, const Entry& b) {
    if (a.key < b.key) return true;
    if (b.key < a.key) return false;
    return a.id < b.id;
  }

  static constexpr std::int32_t kArity = 4;

  // The smallest of the children of `at` in a heap of n entries, or -1 for a leaf.
  std::int32_t smallest_child(std::int32_t at, std::int32_t n) const {
    const std::int32_t first = kArity * at + 1;
    if (first >= n) return -1;
    std::int32_t best = first;
    const std::int32_t end = first + kArity < n ? first + kArity : n;
    for (std::int32_t c = first + 1; c < end; ++c) {
      if (less(heap_[c], heap_[best])) best = c;
    }
    return best;
  }

  void sift_up(std::int32_t at) {
    const Entry moving = heap_[at];
    while (at > 0) {
      const std::int32_t parent = (at - 1) / kArity;
      if (!less(moving, heap_[parent])) break;
      heap_[at] = heap_[parent];
      pos_[heap_[at].id] = at;
      at = parent;
    }
    heap_[at] = moving;
    pos_[moving.id] = at;
  }

  void sift_down(std::int32_t at) {
    const Entry moving = heap_[at];
    const std::int32_t n = static_cast<std::int32_t>(heap_.size());
    while (true) {
      const std::int32_t child = smallest_child(at, n);
      if (child < 0 || !less(heap_[child], moving)) break;
      heap_[at] = heap_[child];
      pos_[heap_[at].id] = at;
      at = child;
    }
    heap_[at] = moving;
    pos_[moving.id] = at;
  }

  std::vector<Entry> heap_;
  std::vector<std::int32_t> pos_;  // id -> index in heap_, -1 when absent
};

}  // namespace trainsim
