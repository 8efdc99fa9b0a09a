#include "sim/network/flow_network.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "sim/core/error.h"

namespace trainsim::net {
namespace {

// Rises smaller than this (relative) are rounding noise of a re-solve, not a freed share.
constexpr double kRiseTolerance = 1e-9;
// Bound on the congestion-control hold rounds of one batch (each round holds at least one more
// flow; in practice one or two rounds suffice).
constexpr int kMaxHoldRounds = 32;

}  // namespace

FlowNetwork::FlowNetwork(Simulation& sim, std::vector<double> link_capacity_Bps,
                         FlowNetworkOptions options)
    : sim_(sim),
      cc_(options.config),
      check_invariants_(options.check_invariants),
      solver_(link_capacity_Bps),
      base_capacity_(std::move(link_capacity_Bps)),
      down_(base_capacity_.size(), 0),
      sender_link_(base_capacity_.size(), 0) {
  for (const topo::LinkId l : options.sender_links) {
    if (l < 0 || static_cast<std::size_t>(l) >= base_capacity_.size()) {
      throw_input("sender link " + std::to_string(l) + " is not a link of the network");
    }
    sender_link_[static_cast<std::size_t>(l)] = 1;
  }
}

void FlowNetwork::ensure_slot(FlowId f) {
  const auto need = static_cast<std::size_t>(f) + 1;
  if (bytes_.size() >= need) return;
  bytes_.resize(need, 0);
  remaining_.resize(need, 0);
  last_update_.resize(need);
  applied_rate_.resize(need, 0);
  start_.resize(need);
  tag_.resize(need, 0);
  user_cap_.resize(need, kUnlimited);
  hold_cap_.resize(need, kUnlimited);
  timer_kind_.resize(need, Timer::kNone);
  stall_start_.resize(need);
  down_links_.resize(need, 0);
  stalled_.resize(need, 0);
  exempt_batch_.resize(need, 0);
  touched_batch_.resize(need, 0);
}

double FlowNetwork::effective_cap(FlowId f) const {
  const auto i = static_cast<std::size_t>(f);
  if (stalled_[i] != 0) return 0.0;
  return std::min(user_cap_[i], hold_cap_[i]);
}

void FlowNetwork::refresh_cap(FlowId f) { solver_.set_flow_cap(f, effective_cap(f)); }

void FlowNetwork::refresh_link_efficiency(topo::LinkId l) {
  const auto li = static_cast<std::size_t>(l);
  if (!cc_.active() || sender_link_[li] != 0) return;
  const int n = solver_.flow_count_on(l);
  solver_.set_link_capacity(l, base_capacity_[li] * cc_.link_efficiency(n));
}

FlowId FlowNetwork::start_flow(const FlowSpec& spec) {
  if (spec.bytes < 0) throw_input("a flow's size must be >= 0 bytes");
  const TimePs now = sim_.now();
  std::int32_t down = 0;
  for (const topo::LinkId l : spec.path) {
    // Bad ids are reported by the solver below.
    if (l >= 0 && static_cast<std::size_t>(l) < down_.size()) {
      down += down_[static_cast<std::size_t>(l)];
    }
  }
  const FlowId f = solver_.add_flow(spec.path, down > 0 ? 0.0 : spec.cap_Bps);
  ensure_slot(f);
  const auto i = static_cast<std::size_t>(f);
  bytes_[i] = spec.bytes;
  remaining_[i] = static_cast<double>(spec.bytes);
  last_update_[i] = now;
  applied_rate_[i] = 0;
  start_[i] = now;
  tag_[i] = spec.tag;
  user_cap_[i] = spec.cap_Bps;
  hold_cap_[i] = kUnlimited;
  timer_kind_[i] = Timer::kNone;
  down_links_[i] = down;
  stalled_[i] = down > 0 ? 1 : 0;
  exempt_batch_[i] = 0;
  touched_batch_[i] = 0;
  if (down > 0) {
    stall_start_[i] = now;
    set_timer(f, Timer::kDeadline, now + cc_.retry_budget());
  }
  if (spec.bytes == 0) completion_.set(f, now);
  for (const topo::LinkId l : spec.path) refresh_link_efficiency(l);
  ++stats_.flows_started;
  stats_.bytes_started += spec.bytes;
  request_flush();
  return f;
}

void FlowNetwork::remove(FlowId f) {
  const std::span<const topo::LinkId> path = solver_.path(f);
  path_scratch_.assign(path.begin(), path.end());
  solver_.remove_flow(f);
  completion_.erase(f);
  timers_.erase(f);
  const auto i = static_cast<std::size_t>(f);
  timer_kind_[i] = Timer::kNone;
  applied_rate_[i] = 0;
  for (const topo::LinkId l : path_scratch_) refresh_link_efficiency(l);
  request_flush();
}

void FlowNetwork::abort_flow(FlowId id) {
  if (!solver_.alive(id)) return;
  remove(id);
}

void FlowNetwork::set_link_capacity(topo::LinkId l, double capacity_Bps) {
  if (l < 0 || static_cast<std::size_t>(l) >= base_capacity_.size()) {
    throw_input("link " + std::to_string(l) + " is not a link of the network");
  }
  if (!(capacity_Bps >= 0) || !std::isfinite(capacity_Bps)) {
    throw_input("link " + std::to_string(l) + ": capacity must be finite and >= 0");
  }
  base_capacity_[static_cast<std::size_t>(l)] = capacity_Bps;
  if (cc_.active() && sender_link_[static_cast<std::size_t>(l)] == 0) {
    refresh_link_efficiency(l);
  } else {
    solver_.set_link_capacity(l, capacity_Bps);
  }
  request_flush();
}

void FlowNetwork::set_link_up(topo::LinkId l, bool up) {
  if (l < 0 || static_cast<std::size_t>(l) >= down_.size()) {
    throw_input("link " + std::to_string(l) + " is not a link of the network");
  }
  const auto li = static_cast<std::size_t>(l);
  if ((down_[li] == 0) == up) return;
  down_[li] = up ? 0 : 1;
  const TimePs now = sim_.now();
  const TimePs rto = cc_.retransmit_timeout();
  for (const FlowId f : solver_.flows_on(l)) {
    const auto i = static_cast<std::size_t>(f);
    if (!up) {
      if (++down_links_[i] > 1) continue;
      if (stalled_[i] == 0) {
        // A new stall episode: the in-flight data is lost and the retransmit timer starts.
        stalled_[i] = 1;
        stall_start_[i] = now;
        hold_cap_[i] = kUnlimited;
        refresh_cap(f);
      }
      // Down again before the resuming retransmission: the same episode, same retry budget.
      set_timer(f, Timer::kDeadline, stall_start_[i] + cc_.retry_budget());
    } else {
      if (--down_links_[i] > 0) continue;
      // Retransmissions happen every RTO after the stall began; the first one after the link
      // is back gets through.
      const std::int64_t elapsed = (now - stall_start_[i]).ps;
      const std::int64_t attempts = std::max<std::int64_t>(1, ceil_div(elapsed, rto.ps));
      set_timer(f, Timer::kResume, stall_start_[i] + rto * attempts);
    }
  }
  request_flush();
}

void FlowNetwork::schedule_link_flap(topo::LinkId l, TimePs down_at, TimePs duration) {
  sim_.schedule_call(down_at, [this, l] { set_link_up(l, false); });
  sim_.schedule_call(down_at + duration, [this, l] { set_link_up(l, true); });
}

double FlowNetwork::remaining_bytes(FlowId id) const {
  const auto i = static_cast<std::size_t>(id);
  const double elapsed_s = (sim_.now() - last_update_[i]).seconds();
  return std::max(0.0, remaining_[i] - applied_rate_[i] * elapsed_s);
}

void FlowNetwork::advance(FlowId f, TimePs now) {
  const auto i = static_cast<std::size_t>(f);
  if (applied_rate_[i] > 0) remaining_[i] -= applied_rate_[i] * (now - last_update_[i]).seconds();
  last_update_[i] = now;
}

void FlowNetwork::set_timer(FlowId f, Timer kind, TimePs at) {
  timer_kind_[static_cast<std::size_t>(f)] = kind;
  timers_.set(f, at);
}

void FlowNetwork::clear_timer(FlowId f) {
  timer_kind_[static_cast<std::size_t>(f)] = Timer::kNone;
  timers_.erase(f);
}

void FlowNetwork::on_event(std::uint64_t) { request_flush(); }

void FlowNetwork::handle_timer(FlowId f) {
  const auto i = static_cast<std::size_t>(f);
  const Timer kind = timer_kind_[i];
  timer_kind_[i] = Timer::kNone;
  switch (kind) {
    case Timer::kNone:
      break;
    case Timer::kHold:
      hold_cap_[i] = kUnlimited;
      exempt_batch_[i] = batch_;
      refresh_cap(f);
      break;
    case Timer::kResume:
      stalled_[i] = 0;
      exempt_batch_[i] = batch_;
      refresh_cap(f);
      break;
    case Timer::kDeadline:
      fail(f);
      break;
  }
}

void FlowNetwork::complete(FlowId f) {
  const auto i = static_cast<std::size_t>(f);
  const TimePs now = sim_.now();
  advance(f, now);
  const double residual = std::abs(remaining_[i]);
  stats_.max_residual_bytes = std::max(stats_.max_residual_bytes, residual);
  if (check_invariants_ && !(residual < 1.0)) {
    throw std::logic_error("flow " + std::to_string(f) + " completed with " +
                           std::to_string(remaining_[i]) + " bytes unaccounted");
  }
  const FlowDone done{f, tag_[i], start_[i], now, bytes_[i]};
  remove(f);
  ++stats_.flows_done;
  stats_.bytes_done += done.bytes;
  flow_done_.emit(done);
}

void FlowNetwork::fail(FlowId f) {
  const auto i = static_cast<std::size_t>(f);
  const TimePs now = sim_.now();
  advance(f, now);
  const FlowFailed failed{
      f, tag_[i], start_[i], stall_start_[i], now, std::llround(std::max(0.0, remaining_[i]))};
  remove(f);
  ++stats_.flows_failed;
  flow_failed_.emit(failed);
}

void FlowNetwork::on_batch_end() {
  ++batch_;
  const TimePs now = sim_.now();
  // Timers first (a resume or a hold release changes a bound), then completions. Callbacks may
  // start flows that are due at once (zero bytes), hence the loop.
  while (true) {
    if (!timers_.empty() && timers_.top_key() <= now) {
      handle_timer(timers_.pop());
    } else if (!completion_.empty() && completion_.top_key() <= now) {
      complete(completion_.pop());
    } else {
      break;
    }
  }
  solve_and_apply();
  reschedule_wakeup();
}

void FlowNetwork::note_solve() {
  ++stats_.solves;
  stats_.flows_resolved += static_cast<std::int64_t>(solver_.last_flows().size());
  stats_.links_resolved += static_cast<std::int64_t>(solver_.last_links().size());
  if (check_invariants_) {
    const std::string violation = solver_.check_last_solve();
    if (!violation.empty()) throw std::logic_error("max-min invariant violated: " + violation);
  }
}

void FlowNetwork::solve_and_apply() {
  touched_.clear();
  if (!solver_.dirty()) return;
  std::span<const FlowId> changed = solver_.solve();
  note_solve();
  for (int round = 0;; ++round) {
    bool new_hold = false;
    for (const FlowId f : changed) {
      const auto i = static_cast<std::size_t>(f);
      if (touched_batch_[i] != batch_) {
        touched_batch_[i] = batch_;
        touched_.push_back(f);
      }
      // Congestion-control lag: a running flow whose share rose keeps its old rate for τ_up.
      const double old_rate = applied_rate_[i];
      const double target = solver_.rate(f);
      if (!cc_.active() || old_rate <= 0 || exempt_batch_[i] == batch_ || stalled_[i] != 0 ||
          hold_cap_[i] < kUnlimited || !(target > old_rate * (1 + kRiseTolerance))) {
        continue;
      }
      const TimePs lag = cc_.increase_lag(old_rate, target);
      if (lag.ps <= 0) continue;
      hold_cap_[i] = old_rate;
      set_timer(f, Timer::kHold, sim_.now() + lag);
      refresh_cap(f);
      new_hold = true;
    }
    if (!new_hold || round + 1 >= kMaxHoldRounds) break;
    changed = solver_.solve();
    note_solve();
  }
  for (const FlowId f : touched_) {
    if (!solver_.alive(f)) continue;
    const double rate = solver_.rate(f);
    if (rate != applied_rate_[static_cast<std::size_t>(f)]) apply_rate(f, rate);
  }
}

void FlowNetwork::apply_rate(FlowId f, double rate) {
  const auto i = static_cast<std::size_t>(f);
  const TimePs now = sim_.now();
  advance(f, now);
  applied_rate_[i] = rate;
  ++stats_.rate_changes;
  if (rate > 0) {
    // Round the completion up to the picosecond, ignoring relative rounding noise (1e-12) of
    // the byte count, so that at completion the flow has delivered its size to far less than
    // a byte.
    const double exact_ps = std::max(0.0, remaining_[i]) * 1e12 / rate;
    const double ps = std::ceil(exact_ps * (1 - 1e-12) - 1e-6);
    const double horizon = static_cast<double>(TimePs::never().ps - now.ps);
    if (ps < horizon) {
      completion_.set(f, now + TimePs{static_cast<std::int64_t>(std::max(0.0, ps))});
    } else {
      completion_.erase(f);
    }
  } else {
    completion_.erase(f);
  }
  if (!rate_changed_.empty()) rate_changed_.emit(FlowRateChanged{f, tag_[i], now, rate});
}

void FlowNetwork::reschedule_wakeup() {
  TimePs next = TimePs::never();
  if (!completion_.empty()) next = completion_.top_key();
  if (!timers_.empty()) next = std::min(next, timers_.top_key());
  if (next == TimePs::never()) {
    sim_.cancel(wakeup_);
    return;
  }
  if (sim_.pending(wakeup_)) {
    sim_.reschedule(wakeup_, next);
  } else {
    wakeup_ = sim_.schedule(next, *this);
  }
}

std::size_t FlowNetwork::memory_bytes() const {
  const auto bytes_of = [](const auto& v) { return v.capacity() * sizeof(v[0]); };
  return solver_.memory_bytes() + completion_.memory_bytes() + timers_.memory_bytes() +
         bytes_of(base_capacity_) + bytes_of(down_) + bytes_of(sender_link_) + bytes_of(bytes_) +
         bytes_of(remaining_) + bytes_of(last_update_) + bytes_of(applied_rate_) +
         bytes_of(start_) + bytes_of(tag_) + bytes_of(user_cap_) + bytes_of(hold_cap_) +
         bytes_of(timer_kind_) + bytes_of(stall_start_) + bytes_of(down_links_) +
         bytes_of(stalled_) + bytes_of(exempt_batch_) + bytes_of(touched_batch_) +
         bytes_of(touched_) + bytes_of(path_scratch_);
}

}  // namespace trainsim::net
