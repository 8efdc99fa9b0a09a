#include "sim/core/simulation.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace trainsim {

Simulation::Simulation(std::uint64_t seed) : seed_(seed) {}

Simulation::~Simulation() {
  while (!components_.empty()) components_.pop_back();
}

void Simulation::check_not_past(TimePs at) const {
  if (at < now_) {
    throw std::logic_error("event scheduled in the past: " + std::to_string(at.ps) + " ps < now " +
                           std::to_string(now_.ps) + " ps");
  }
}

EventHandle Simulation::schedule(TimePs at, EventTarget& target, std::uint64_t tag) {
  check_not_past(at);
  return queue_.push(at, &target, tag);
}

EventHandle Simulation::schedule_call(TimePs at, std::function<void()> fn) {
  check_not_past(at);
  std::uint64_t index;
  if (free_calls_.empty()) {
    index = calls_.size();
    calls_.push_back(std::move(fn));
  } else {
    index = free_calls_.back();
    free_calls_.pop_back();
    calls_[index] = std::move(fn);
  }
  return queue_.push(at, &call_target_, index);
}

bool Simulation::cancel(EventHandle h) {
  if (!queue_.pending(h)) return false;
  if (queue_.target_of(h) == &call_target_) {
    const std::uint64_t index = queue_.tag_of(h);
    calls_[index] = nullptr;
    free_calls_.push_back(index);
  }
  return queue_.cancel(h);
}

bool Simulation::reschedule(EventHandle h, TimePs at) {
  check_not_past(at);
  return queue_.reschedule(h, at);
}

void Simulation::CallTarget::on_event(std::uint64_t tag) {
  // Move the closure out first: it may schedule further calls, which can reuse its slot.
  std::function<void()> fn = std::move(sim_.calls_[tag]);
  sim_.calls_[tag] = nullptr;
  sim_.free_calls_.push_back(tag);
  fn();
}

void Simulation::request_batch_end(BatchListener& listener) {
  if (std::find(batch_pending_.begin(), batch_pending_.end(), &listener) == batch_pending_.end()) {
    batch_pending_.push_back(&listener);
  }
}

std::uint64_t Simulation::run() { return run_loop(TimePs::never()); }

std::uint64_t Simulation::run_until(TimePs t) {
  check_not_past(t);
  const std::uint64_t n = run_loop(t);
  if (!stopped_) now_ = t;
  return n;
}

std::uint64_t Simulation::run_loop(TimePs limit) {
  stopped_ = false;
  std::uint64_t dispatched = 0;
  while (!stopped_) {
    const bool events_now = !queue_.empty() && queue_.next_time() == now_;
    if (!batch_pending_.empty() && !events_now) {
      batch_running_.swap(batch_pending_);
      for (BatchListener* listener : batch_running_) {
        ++batch_calls_;
        listener->on_batch_end();
      }
      batch_running_.clear();
      continue;
    }
    if (queue_.empty() || queue_.next_time() > limit) break;
    const EventQueue::Event e = queue_.pop();
    queue_.prefetch_upcoming();
    now_ = e.time;
    ++dispatched;
    ++events_dispatched_;
    if (!dispatched_.empty()) dispatched_.emit(DispatchRecord{e.time, e.seq, e.tag});
    e.target->on_event(e.tag);
  }
  return dispatched;
}

}  // namespace trainsim
