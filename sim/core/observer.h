// Typed observers: a component announces what happened (a flow finished, a task finished) through
// a `Signal<Event>`, and reports, traces or the executor subscribe without the component knowing
// them (STYLE.md habit 9).
//
// Callbacks run synchronously, in subscription order, at the simulated time of the event; they may
// call back into the component that emits (start a flow from a "flow done" callback), but must not
// subscribe to or unsubscribe from the signal that is emitting. Not thread-safe.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace trainsim {

template <class Event>
class Signal {
 public:
  using Callback = std::function<void(const Event&)>;
  using SubscriptionId = std::uint64_t;

  SubscriptionId subscribe(Callback callback) {
    assert(emitting_ == 0);
    subscribers_.emplace_back(next_id_, std::move(callback));
    return next_id_++;
  }

  /// Returns whether `id` was subscribed.
  bool unsubscribe(SubscriptionId id) {
    assert(emitting_ == 0);
    for (std::size_t i = 0; i < subscribers_.size(); ++i) {
      if (subscribers_[i].first == id) {
        subscribers_.erase(subscribers_.begin() + static_cast<std::ptrdiff_t>(i));
        return true;
      }
    }
    return false;
  }

  /// True when nobody listens, so that an emitter can skip building the event.
  bool empty() const { return subscribers_.empty(); }

  void emit(const Event& event) {
    ++emitting_;
    for (const auto& [id, callback] : subscribers_) callback(event);
    --emitting_;
  }

 private:
  std::vector<std::pair<SubscriptionId, Callback>> subscribers_;
  SubscriptionId next_id_ = 1;
  int emitting_ = 0;  // nesting depth of emit(); a callback may emit again
};

}  // namespace trainsim
