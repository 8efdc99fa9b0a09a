// Compute slowed by communication (executor.h): a collective running beside a compute task
// takes its dimension's share of the GPU's SMs (NCCL's channels, exec::nccl_sms; a TP one under
// a TP overlap the framework's overlap kernels, exec::tp_comm_sms) for as long as it transfers,
// so the compute task's remaining work proceeds at 1 − the held shares' sum; the time it loses
// is charged to the dimensions holding the SMs, each by its part of that sum.
#include <algorithm>

#include "sim/core/simulation.h"
#include "sim/exec/executor.h"

namespace trainsim::exec::detail {

// The running compute task's progress up to now, at the rate the SMs left to it allowed since
// `work_at`; the time it lost is charged to the dimensions of the collectives that held them.
void Executor::advance_work(Actor& act) const {
  const TimePs now = sim_.now();
  const double dt = static_cast<double>((now - act.work_at).ps);
  act.work_at = now;
  if (dt <= 0 || act.sm_total == 0) {
    act.work_left_ps = std::max(0.0, act.work_left_ps - dt);
    return;
  }
  double sum = 0;
  for (int d = 0; d < kSmHolders; ++d) sum += sm_share_[d] * act.sm_comms[d];
  const double held = std::min(1.0, sum);
  act.work_left_ps = std::max(0.0, act.work_left_ps - dt * (1.0 - held));
  if (sum <= 0) return;
  const double lost = dt * held * 1e-12;
  for (int d = 0; d < kSmHolders; ++d) {
    if (act.sm_comms[d] > 0) {
      act.lost_s[sm_holder_dim(d)] += lost * (sm_share_[d] * act.sm_comms[d]) / sum;
    }
  }
}

double Executor::held_share(const Actor& act) const {
  double sum = 0;
  for (int d = 0; d < kSmHolders; ++d) sum += sm_share_[d] * act.sm_comms[d];
  return std::min(1.0, sum);
}

// (Re)schedules the end of actor `a`'s running compute task at the rate its SMs allow now; with
// every SM held it waits (a collective in transfer always ends, and releases them).
void Executor::schedule_compute_end(int a) {
  Actor& act = actors_[static_cast<std::size_t>(a)];
  const double rate = 1.0 - held_share(act);
  act.event_rate = rate;
  const bool done = act.work_left_ps < 0.5;
  if (rate <= 0 && !done) {
    sim_.cancel(act.compute_event);
    act.compute_event = EventHandle{};
    return;
  }
  const TimePs end =
      sim_.now() + TimePs{done ? 0 : static_cast<std::int64_t>(act.work_left_ps / rate + 0.5)};
  if (sim_.pending(act.compute_event)) {
    sim_.reschedule(act.compute_event, end);
  } else {
    act.compute_event = sim_.schedule(
        end, *this, compute_tag(a, Stream::kCompute, act.s[static_cast<int>(Stream::kCompute)].kind));
  }
}

// A collective starts (delta +1) or ends (-1) on actor `a`: its SMs are taken from (or given
// back to) the compute task running there, whose end is re-scheduled at the end of the
// picosecond (on_batch_end).
void Executor::hold_sms(int a, int dim, int delta) {
  Actor& act = actors_[static_cast<std::size_t>(a)];
  const bool running = act.slowable && act.s[static_cast<int>(Stream::kCompute)].running;
  if (running) advance_work(act);
  act.sm_comms[dim] += delta;
  act.sm_total += delta;
  if (running && !act.sm_dirty) {
    act.sm_dirty = true;
    if (sm_dirty_.empty()) sim_.request_batch_end(*this);
    sm_dirty_.push_back(a);
  }
}

void Executor::on_batch_end() {
  for (int a : sm_dirty_) {
    Actor& act = actors_[static_cast<std::size_t>(a)];
    act.sm_dirty = false;
    if (!act.slowable || !act.s[static_cast<int>(Stream::kCompute)].running) continue;
    if (1.0 - held_share(act) == act.event_rate) continue;
    schedule_compute_end(a);
  }
  sm_dirty_.clear();
}

}  // namespace trainsim::exec::detail
