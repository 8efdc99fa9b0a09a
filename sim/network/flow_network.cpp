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
  if (st_.size() < need) st_.resize(need);
}

double FlowNetwork::effective_cap(FlowId f) const {
  const auto i = static_cast<std::size_t>(f);
  if (st_[i].stalled != 0) return 0.0;
  return std::min(st_[i].user_cap, st_[i].hold_cap);
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
  std::int32_t down = 0;
  for (const topo::LinkId l : spec.path) {
    // Bad ids are reported by the solver below.
    if (l >= 0 && static_cast<std::size_t>(l) < down_.size()) {
      down += down_[static_cast<std::size_t>(l)];
    }
  }
  const FlowId f = solver_.add_flow(spec.path, down > 0 ? 0.0 : spec.cap_Bps);
  init_flow(f, spec, down);
  if (cc_.active()) {
    for (const topo::LinkId l : spec.path) refresh_link_efficiency(l);
  }
  return f;
}

void FlowNetwork::init_flow(FlowId f, const FlowSpec& spec, std::int32_t down) {
  const TimePs now = sim_.now();
  ensure_slot(f);
  FlowState& st = st_[static_cast<std::size_t>(f)];
  st.bytes = spec.bytes;
  st.remaining = static_cast<double>(spec.bytes);
  st.last_update = now;
  st.applied_rate = 0;
  st.start = now;
  st.tag = spec.tag;
  st.user_cap = spec.cap_Bps;
  st.hold_cap = kUnlimited;
  st.timer_kind = Timer::kNone;
  st.down_links = down;
  st.stalled = down > 0 ? 1 : 0;
  st.exempt_batch = 0;
  st.touched_batch = 0;
  if (down > 0) {
    st.stall_start = now;
    set_timer(f, Timer::kDeadline, now + cc_.retry_budget());
  }
  if (spec.bytes == 0) completion_.set(f, now);
  ++stats_.flows_started;
  stats_.bytes_started += spec.bytes;
  ++batch_additions_;
  request_flush();
}

std::span<const FlowId> FlowNetwork::start_group(std::span<const FlowSpec> specs,
                                                 std::uint64_t memo_key) {
  group_ids_.clear();
  bool isolated = memo_key != 0 && !cc_.active();
  for (std::size_t k = 0; isolated && k < specs.size(); ++k) {
    if (specs[k].bytes < 0) throw_input("a flow's size must be >= 0 bytes");
    for (const topo::LinkId l : specs[k].path) {
      if (l < 0 || l >= solver_.link_count() || down_[static_cast<std::size_t>(l)] != 0 ||
          solver_.flow_count_on(l) != 0) {
        isolated = false;
        break;
      }
    }
  }
  const auto it = isolated ? memo_.find(memo_key) : memo_.end();
  if (it != memo_.end() && it->second.size() == specs.size()) {
    for (std::size_t k = 0; k < specs.size(); ++k) {
      const double rate = it->second[k];
      const FlowId f = solver_.add_solved_flow(specs[k].path, specs[k].cap_Bps, rate);
      init_flow(f, specs[k], 0);
      if (specs[k].bytes > 0) apply_rate(f, rate);
      group_ids_.push_back(f);
    }
    stats_.flows_memo += static_cast<std::int64_t>(specs.size());
    return group_ids_;
  }
  for (const FlowSpec& spec : specs) group_ids_.push_back(start_flow(spec));
  if (isolated && pending_key_ == 0) {
    pending_key_ = memo_key;
    pending_ids_ = group_ids_;
  }
  return group_ids_;
}

// After the solve of a batch in which an isolated group started and nothing else changed: its
// rates are the max-min rates of the group alone.
void FlowNetwork::record_memo() {
  const bool alive = std::all_of(pending_ids_.begin(), pending_ids_.end(),
                                 [&](FlowId f) { return solver_.alive(f); });
  if (pending_key_ != 0 && alive && !batch_other_change_ &&
      batch_additions_ == static_cast<std::int64_t>(pending_ids_.size())) {
    std::vector<double>& rates = memo_[pending_key_];
    rates.clear();
    for (const FlowId f : pending_ids_) rates.push_back(solver_.rate(f));
  }
  pending_key_ = 0;
  pending_ids_.clear();
  batch_additions_ = 0;
  batch_other_change_ = false;
}

void FlowNetwork::remove(FlowId f) {
  if (cc_.active()) {
    const std::span<const topo::LinkId> path = solver_.path(f);
    path_scratch_.assign(path.begin(), path.end());
  }
  solver_.remove_flow(f);
  completion_.erase(f);
  timers_.erase(f);
  const auto i = static_cast<std::size_t>(f);
  st_[i].timer_kind = Timer::kNone;
  st_[i].applied_rate = 0;
  if (cc_.active()) {
    for (const topo::LinkId l : path_scratch_) refresh_link_efficiency(l);
  }
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
  memo_.clear();
  batch_other_change_ = true;
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
  batch_other_change_ = true;
  const TimePs now = sim_.now();
  const TimePs rto = cc_.retransmit_timeout();
  for (const FlowId f : solver_.flows_on(l)) {
    const auto i = static_cast<std::size_t>(f);
    if (!up) {
      if (++st_[i].down_links > 1) continue;
      if (st_[i].stalled == 0) {
        // A new stall episode: the in-flight data is lost and the retransmit timer starts.
        st_[i].stalled = 1;
        st_[i].stall_start = now;
        st_[i].hold_cap = kUnlimited;
        refresh_cap(f);
      }
      // Down again before the resuming retransmission: the same episode, same retry budget.
      set_timer(f, Timer::kDeadline, st_[i].stall_start + cc_.retry_budget());
    } else {
      if (--st_[i].down_links > 0) continue;
      // Retransmissions happen every RTO after the stall began; the first one after the link
      // is back gets through.
      const std::int64_t elapsed = (now - st_[i].stall_start).ps;
      const std::int64_t attempts = std::max<std::int64_t>(1, ceil_div(elapsed, rto.ps));
      set_timer(f, Timer::kResume, st_[i].stall_start + rto * attempts);
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
  const double elapsed_s = (sim_.now() - st_[i].last_update).seconds();
  return std::max(0.0, st_[i].remaining - st_[i].applied_rate * elapsed_s);
}

void FlowNetwork::advance(FlowId f, TimePs now) {
  const auto i = static_cast<std::size_t>(f);
  if (st_[i].applied_rate > 0) st_[i].remaining -= st_[i].applied_rate * (now - st_[i].last_update).seconds();
  st_[i].last_update = now;
}

void FlowNetwork::set_timer(FlowId f, Timer kind, TimePs at) {
  st_[static_cast<std::size_t>(f)].timer_kind = kind;
  timers_.set(f, at);
}

void FlowNetwork::clear_timer(FlowId f) {
  st_[static_cast<std::size_t>(f)].timer_kind = Timer::kNone;
  timers_.erase(f);
}

void FlowNetwork::on_event(std::uint64_t) { request_flush(); }

void FlowNetwork::handle_timer(FlowId f) {
  const auto i = static_cast<std::size_t>(f);
  const Timer kind = st_[i].timer_kind;
  st_[i].timer_kind = Timer::kNone;
  switch (kind) {
    case Timer::kNone:
      break;
    case Timer::kHold:
      st_[i].hold_cap = kUnlimited;
      st_[i].exempt_batch = batch_;
      refresh_cap(f);
      break;
    case Timer::kResume:
      st_[i].stalled = 0;
      st_[i].exempt_batch = batch_;
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
  const double residual = std::abs(st_[i].remaining);
  stats_.max_residual_bytes = std::max(stats_.max_residual_bytes, residual);
  if (check_invariants_ && !(residual < 1.0)) {
    throw std::logic_error("flow " + std::to_string(f) + " completed with " +
                           std::to_string(st_[i].remaining) + " bytes unaccounted");
  }
  const FlowDone done{f, st_[i].tag, st_[i].start, now, st_[i].bytes};
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
      f, st_[i].tag, st_[i].start, st_[i].stall_start, now, std::llround(std::max(0.0, st_[i].remaining))};
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
  record_memo();
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
      if (st_[i].touched_batch != batch_) {
        st_[i].touched_batch = batch_;
        touched_.push_back(f);
      }
      // Congestion-control lag: a running flow whose share rose keeps its old rate for τ_up.
      const double old_rate = st_[i].applied_rate;
      const double target = solver_.rate(f);
      if (!cc_.active() || old_rate <= 0 || st_[i].exempt_batch == batch_ || st_[i].stalled != 0 ||
          st_[i].hold_cap < kUnlimited || !(target > old_rate * (1 + kRiseTolerance))) {
        continue;
      }
      const TimePs lag = cc_.increase_lag(old_rate, target);
      if (lag.ps <= 0) continue;
      st_[i].hold_cap = old_rate;
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
    if (rate != st_[static_cast<std::size_t>(f)].applied_rate) apply_rate(f, rate);
  }
}

void FlowNetwork::apply_rate(FlowId f, double rate) {
  const auto i = static_cast<std::size_t>(f);
  const TimePs now = sim_.now();
  advance(f, now);
  st_[i].applied_rate = rate;
  ++stats_.rate_changes;
  if (rate > 0) {
    // Round the completion up to the picosecond, ignoring relative rounding noise (1e-12) of
    // the byte count, so that at completion the flow has delivered its size to far less than
    // a byte.
    const double exact_ps = std::max(0.0, st_[i].remaining) * 1e12 / rate;
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
  if (!rate_changed_.empty()) rate_changed_.emit(FlowRateChanged{f, st_[i].tag, now, rate});
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
         bytes_of(base_capacity_) + bytes_of(down_) + bytes_of(sender_link_) + bytes_of(st_) +
         bytes_of(touched_) + bytes_of(path_scratch_);
}

}  // namespace trainsim::net
