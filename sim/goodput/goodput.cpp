#include "sim/goodput/goodput.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <queue>
#include <string>
#include <thread>

#include "sim/core/error.h"
#include "sim/core/rng.h"

namespace trainsim::goodput {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kSecondsPerDay = 86400.0;

bool interrupts(Effect e) { return e == Effect::kCrash || e == Effect::kHang; }

// One class's arrivals: a renewal process with gaps of mean `mean_gap_s`.
struct Arrivals {
  Rng rng{0};
  double mean_gap_s = kInf;
  double weibull_scale_s = kInf;  // mean / Γ(1 + 1/k)
  double next_s = kInf;
};

class Trial {
 public:
  Trial(const Params& p, std::uint64_t index) : p_(p), horizon_s_(p.days * kSecondsPerDay) {
    std::uint64_t state = derive_stream_seed(p.seed, "goodput-trial") + index;
    const std::uint64_t trial_seed = splitmix64(state);
    decisions_ = Rng(derive_stream_seed(trial_seed, "diagnosis"));
    const double shape = p.weibull_shape;
    for (const FailureClass& c : p.classes) {
      Arrivals a;
      a.rng = Rng(derive_stream_seed(trial_seed, c.name));
      const double rate_s = c.rate_per_unit_h * static_cast<double>(p.units.count(c.scope)) / 3600;
      if (rate_s > 0) {
        a.mean_gap_s = 1.0 / rate_s;
        a.weibull_scale_s = a.mean_gap_s / std::tgamma(1.0 + 1.0 / shape);
        a.next_s = gap(a);
      }
      arrivals_.push_back(a);
    }
    result_.by_class.assign(p.classes.size(), 0);
    spares_free_ = p.spare_hosts;
    next_checkpoint_w_ = p.interval_s;
  }

  TrialResult run() {
    while (t_ < horizon_s_) {
      const std::size_t c = next_class();
      const double arrival = c < arrivals_.size() ? arrivals_[c].next_s : kInf;
      // A checkpoint comes due after `interval` of training; one due while the previous
      // checkpoint is still being written waits for that write to end (training goes on).
      const double due = t_ + (next_checkpoint_w_ - w_) * factor_;
      const double checkpoint = writing_ ? std::max(due, write_end_) : due;
      const double end = std::max(t_, std::min({arrival, checkpoint, slow_detect_s_, horizon_s_}));
      train_until(end);
      if (t_ >= horizon_s_) break;
      if (arrival <= end) {
        on_arrival(c);
      } else if (slow_detect_s_ <= end) {
        ++result_.interruptions;
        stop_with_save(kEvictSlow);
      } else {
        skip_checkpoints(std::min({arrival, slow_detect_s_, horizon_s_}));
        take_checkpoint();
      }
    }
    return result_;
  }

 private:
  static constexpr std::size_t kEvictSlow = static_cast<std::size_t>(-1);

  double gap(Arrivals& a) const {
    if (p_.weibull_shape == 1.0) return a.rng.exponential(a.mean_gap_s);
    // Inverse transform of the Weibull distribution: scale · (−ln(1 − U))^(1/k).
    return a.weibull_scale_s * std::pow(-std::log1p(-a.rng.uniform01()), 1.0 / p_.weibull_shape);
  }

  std::size_t next_class() const {
    std::size_t best = arrivals_.size();
    double when = kInf;
    for (std::size_t i = 0; i < arrivals_.size(); ++i) {
      if (arrivals_[i].next_s < when) {
        when = arrivals_[i].next_s;
        best = i;
      }
    }
    return best;
  }

  // Counts class c's pending arrival and draws its next one.
  double consume(std::size_t c) {
    Arrivals& a = arrivals_[c];
    const double when = a.next_s;
    a.next_s += gap(a);
    ++result_.by_class[c];
    return when;
  }

  void train_until(double end) {
    const double dt = std::min(end, horizon_s_) - t_;
    if (dt <= 0) return;
    const double progress = dt / factor_;
    w_ += progress;
    result_.split.training_s += progress;
    result_.split.slow_s += dt - progress;
    t_ += dt;
  }

  // A background write that has finished by now protects the work before its checkpoint.
  void settle_writes() {
    if (writing_ && write_end_ <= t_) {
      durable_w_ = std::max(durable_w_, write_w_);
      writing_ = false;
    }
  }

  // Between two events a run is periodic: a checkpoint's stall δ, then training until the next
  // one, which comes after τ of training or, when the background write takes longer, at the
  // write's end (one write at a time): max(τ·f, write) of wall time. Takes in one step every
  // checkpoint but the last whose stall ends before `next_event_s` (t_ is the start of the
  // first, when no write is running). Checkpoint k's write ends by the start of checkpoint k + 1,
  // so after m of them the (m − 1)-th is durable and no write is running.
  void skip_checkpoints(double next_event_s) {
    settle_writes();
    if (writing_) return;
    const double delta = p_.checkpoint_blocking_s;
    const double train_wall = std::max(p_.interval_s * factor_, p_.checkpoint_async_s);
    const double step = train_wall / factor_;  // progress between two checkpoints
    const double cycle = train_wall + delta;
    const double room = next_event_s - t_ - delta;
    if (room <= 0) return;
    const double m = std::floor(room / cycle);  // checkpoints taken here; one more stays
    if (m < 1) return;
    durable_w_ = w_ + (m - 1) * step;
    w_ += m * step;
    result_.split.training_s += m * step;
    result_.split.slow_s += m * (train_wall - step);
    result_.split.checkpoint_s += m * delta;
    result_.checkpoints += static_cast<long>(m);
    t_ += m * cycle;
    next_checkpoint_w_ = w_;
  }

  // A checkpoint at t_, when no write is running (the run loop waits for it).
  void take_checkpoint() {
    settle_writes();
    const double stall_end = t_ + p_.checkpoint_blocking_s;
    // A crash or hang during the stall loses this checkpoint; other arrivals wait for its end.
    for (;;) {
      const std::size_t c = next_interrupting();
      const double arrival = c < arrivals_.size() ? arrivals_[c].next_s : kInf;
      if (arrival >= stall_end || arrival >= horizon_s_) break;
      result_.split.checkpoint_s += arrival - t_;
      t_ = arrival;
      on_arrival(c);
      return;
    }
    if (stall_end >= horizon_s_) {
      result_.split.checkpoint_s += horizon_s_ - t_;
      t_ = horizon_s_;
      return;
    }
    result_.split.checkpoint_s += p_.checkpoint_blocking_s;
    t_ = stall_end;
    ++result_.checkpoints;
    if (p_.checkpoint_async_s <= 0) {
      durable_w_ = w_;
    } else {
      writing_ = true;
      write_end_ = t_ + p_.checkpoint_async_s;
      write_w_ = w_;
    }
    next_checkpoint_w_ = w_ + p_.interval_s;
  }

  std::size_t next_interrupting() const {
    std::size_t best = arrivals_.size();
    double when = kInf;
    for (std::size_t i = 0; i < arrivals_.size(); ++i) {
      if (interrupts(p_.classes[i].effect) && arrivals_[i].next_s < when) {
        when = arrivals_[i].next_s;
        best = i;
      }
    }
    return best;
  }

  // A pending arrival of class c while the job runs (or at the end of a checkpoint stall).
  void on_arrival(std::size_t c) {
    const FailureClass& fc = p_.classes[c];
    const double when = consume(c);
    switch (fc.effect) {
      case Effect::kSlow:
        if (!slow_) {
          slow_ = true;
          factor_ = p_.slow_iteration_factor;
          slow_detect_s_ = when + p_.detect_slow_s;
        }
        return;
      case Effect::kPlanned:
        ++result_.interruptions;
        stop_with_save(c);
        return;
      case Effect::kCrash:
      case Effect::kHang:
        ++result_.interruptions;
        lose_and_recover(c);
        return;
    }
  }

  // A crash or hang at t_ (its arrival, already counted): the work since the last durable
  // checkpoint is lost, and the job recovers from it.
  void lose_and_recover(std::size_t c) {
    settle_writes();
    const double lost = w_ - durable_w_;
    result_.split.training_s -= lost;
    result_.split.lost_s += lost;
    w_ = durable_w_;
    recover(c);
  }

  // A stop the controller chooses (maintenance `cause`, or kEvictSlow): an on-demand checkpoint
  // (its stall, then its write once the running one has ended: one write at a time), then the
  // restart; nothing is lost. A crash or hang before the save is durable makes it a crash: the
  // work since the last durable checkpoint is lost, and the stop folds into that recovery (a
  // slow host found by then is evicted there).
  void stop_with_save(std::size_t cause) {
    double end = t_ + p_.checkpoint_blocking_s;
    if (p_.checkpoint_async_s > 0) {
      end = std::max(end, writing_ ? write_end_ : t_) + p_.checkpoint_async_s;
    }
    end = std::min(end, horizon_s_);
    const std::size_t c = next_interrupting();
    if (c < arrivals_.size() && arrivals_[c].next_s < end) {
      result_.split.checkpoint_s += arrivals_[c].next_s - t_;
      t_ = arrivals_[c].next_s;
      consume(c);
      lose_and_recover(c);
      return;
    }
    result_.split.checkpoint_s += end - t_;
    t_ = end;
    durable_w_ = w_;
    writing_ = false;
    if (t_ < horizon_s_) recover(cause);
  }

  // Spends `d` seconds of a recovery phase. In a `restartable` phase (the restart: processes
  // running again) a crash or hang cuts the phase short and its class is returned (t_ is then its
  // arrival); before that (detection, diagnosis, waiting for hosts) the job is stopped, and a
  // failing host is only added to the evictions, its fault found by the same self-checks.
  // Returns arrivals_.size() when the phase ran to its end or the run did. Slow-downs and
  // maintenance arriving while the job is down fold into the stop.
  std::size_t spend(double d, double& bucket, bool restartable) {
    const double end = t_ + d;
    for (;;) {
      const std::size_t c = next_class();
      if (c >= arrivals_.size() || arrivals_[c].next_s >= std::min(end, horizon_s_)) break;
      if (!interrupts(p_.classes[c].effect) || !restartable) {
        const double when = consume(c);
        if (interrupts(p_.classes[c].effect) && p_.classes[c].needs_spare) evict_host(when);
        continue;
      }
      bucket += arrivals_[c].next_s - t_;
      t_ = arrivals_[c].next_s;
      consume(c);
      ++result_.interruptions;
      return c;
    }
    const double stop = std::min(end, horizon_s_);
    bucket += stop - t_;
    t_ = stop;
    return arrivals_.size();
  }

  // From a stop caused by class `cause` (kEvictSlow: the slow-node detector) to running again.
  void recover(std::size_t cause) {
    TimeSplit& s = result_.split;
    std::size_t c = cause;
    for (;;) {
      std::size_t hit = arrivals_.size();
      const bool evicting_slow = c == kEvictSlow;
      const FailureClass* fc = evicting_slow ? nullptr : &p_.classes[c];
      if (fc != nullptr && interrupts(fc->effect)) {
        const double detect = fc->effect == Effect::kHang ? p_.detect_hang_s : p_.detect_crash_s;
        hit = spend(detect, s.detection_s, false);
        if (hit == arrivals_.size() && t_ < horizon_s_) {
          double diagnose = p_.manual_diagnosis_s;
          if (p_.auto_diagnosis) {
            diagnose = p_.auto_diagnosis_s;
            if (decisions_.uniform01() >= p_.auto_share) diagnose += p_.manual_diagnosis_s;
          }
          hit = spend(diagnose, s.diagnosis_s, false);
        }
      }
      if (hit == arrivals_.size() && t_ < horizon_s_) {
        if (evicting_slow || (fc != nullptr && fc->needs_spare)) evict_host();
        if (slow_ && slow_detect_s_ <= t_ && !evicting_slow) evict_host();
        if (evicting_slow || (slow_ && slow_detect_s_ <= t_)) clear_slow();
        hit = obtain_hosts();
      }
      if (hit == arrivals_.size() && t_ < horizon_s_) {
        hit = spend(p_.relaunch_s + p_.comm_init_s + p_.checkpoint_load_s, s.restart_s, true);
      }
      if (t_ >= horizon_s_) return;
      if (hit == arrivals_.size()) break;
      c = hit;  // a failure during the recovery: start over from its detection
    }
    writing_ = false;  // a write the stop interrupted never completes
    next_checkpoint_w_ = w_ + p_.interval_s;
  }

  void evict_host() { evict_host(t_); }
  void evict_host(double when) {
    ++hosts_needed_;
    repairs_.push(when + p_.host_repair_s);
  }

  void clear_slow() {
    slow_ = false;
    factor_ = 1.0;
    slow_detect_s_ = kInf;
  }

  // Replaces every evicted host: from the free spares, else by waiting for a repaired host.
  std::size_t obtain_hosts() {
    while (hosts_needed_ > 0) {
      while (!repairs_.empty() && repairs_.top() <= t_) {
        repairs_.pop();
        ++spares_free_;
      }
      if (spares_free_ > 0) {
        --spares_free_;
        --hosts_needed_;
        continue;
      }
      const std::size_t hit = spend(repairs_.top() - t_, result_.split.repair_s, false);
      if (hit != arrivals_.size() || t_ >= horizon_s_) return hit;
    }
    return arrivals_.size();
  }

  const Params& p_;
  const double horizon_s_;
  Rng decisions_{0};
  std::vector<Arrivals> arrivals_;
  TrialResult result_;

  double t_ = 0;                   // wall clock
  double w_ = 0;                   // training progress kept so far (seconds of iterations)
  double durable_w_ = 0;           // progress a restart resumes from
  double next_checkpoint_w_ = 0;   // progress at which the next checkpoint comes due
  bool writing_ = false;           // a background write is running (one at a time)
  double write_end_ = 0;           // when it ends
  double write_w_ = 0;             // the progress it protects then
  double factor_ = 1.0;            // iteration slow-down while a slow host is in the job
  bool slow_ = false;
  double slow_detect_s_ = kInf;
  long spares_free_ = 0;
  long hosts_needed_ = 0;
  // When each host in repair returns to the pool, earliest first (a heap: it was a vector sorted
  // at every look, quadratic in the failures of a trial once hosts queued for repair).
  std::priority_queue<double, std::vector<double>, std::greater<>> repairs_;
};

void require(bool ok, const std::string& field, const std::string& message) {
  if (!ok) throw_input(message, {"", 0, field});
}

}  // namespace

long Components::count(Scope s) const {
  switch (s) {
    case Scope::kGpu:
      return gpus;
    case Scope::kHost:
      return hosts;
    case Scope::kNic:
      return nics;
    case Scope::kLink:
      return links;
    case Scope::kSwitch:
      return switches;
    case Scope::kJob:
      return 1;
  }
  return 0;
}

CheckpointCosts checkpoint_costs(const CheckpointSpec& c) {
  auto over = [](double bytes, double Bps) { return Bps > 0 ? bytes / Bps : 0.0; };
  const double host_bytes = c.gpus_per_host * c.state_bytes_per_gpu;
  // Every unique byte is written once; a host writes what its GPUs hold, at most.
  const double write_s =
      std::max(over(c.unique_bytes, c.storage_write_Bps), over(host_bytes, c.host_storage_Bps));
  CheckpointCosts out;
  if (c.in_memory) {
    out.blocking_s = over(c.state_bytes_per_gpu, c.host_copy_Bps);
    out.async_s = write_s;
  } else {
    out.blocking_s = write_s;
  }
  if (c.one_replica_load) {
    // Only the loading replica's GPUs read the replicated part; every GPU still reads its own
    // shard of the rest. A host holds at most min(gpus_per_host, replica) of the replica's GPUs
    // (its inner dimensions, TP first, fill hosts), so a replica smaller than a host reads
    // through one host's path with only its own GPUs' bytes.
    const double replica_gpus =
        std::min(static_cast<double>(c.gpus_per_host),
                 std::max(1.0, static_cast<double>(c.gpus) / std::max(1, c.dp)));
    const double sharded = std::max(0.0, c.state_bytes_per_gpu - c.replicated_bytes_per_gpu);
    const double read_host =
        replica_gpus * c.replicated_bytes_per_gpu + c.gpus_per_host * sharded;
    out.load_s = std::max(over(c.unique_bytes, c.storage_read_Bps),
                          over(read_host, c.host_storage_Bps)) +
                 c.broadcast_s;
  } else {
    const double all = static_cast<double>(c.gpus) * c.state_bytes_per_gpu;
    out.load_s = std::max(over(all, c.storage_read_Bps), over(host_bytes, c.host_storage_Bps));
  }
  return out;
}

void check(const Params& p) {
  for (const FailureClass& c : p.classes) {
    require(c.rate_per_unit_h >= 0 && std::isfinite(c.rate_per_unit_h), "rate." + c.name,
            "a failure rate must be a finite number >= 0");
  }
  require(p.weibull_shape > 0, "weibull_shape", "the Weibull shape must be > 0");
  for (const auto& [v, name] :
       {std::pair{p.detect_crash_s, "detect_crash_s"}, {p.detect_hang_s, "detect_hang_s"},
        {p.detect_slow_s, "detect_slow_s"}, {p.auto_diagnosis_s, "auto_diagnosis_s"},
        {p.manual_diagnosis_s, "manual_diagnosis_s"}, {p.host_repair_s, "host_repair_s"},
        {p.relaunch_s, "relaunch_s"}, {p.comm_init_s, "comm_init_s"},
        {p.checkpoint_load_s, "checkpoint_load_s"},
        {p.checkpoint_blocking_s, "checkpoint_blocking_s"},
        {p.checkpoint_async_s, "checkpoint_async_s"}}) {
    require(v >= 0 && std::isfinite(v), name, "a duration must be a finite number >= 0");
  }
  require(p.auto_share >= 0 && p.auto_share <= 1, "auto_share", "a share must be in 0..1");
  require(p.interval_s > 0 && std::isfinite(p.interval_s), "interval_s",
          "the checkpoint interval must be > 0");
  require(p.slow_iteration_factor >= 1, "slow_iteration_factor",
          "a slow host cannot speed iterations up (factor >= 1)");
  require(p.spare_hosts >= 0, "spare_hosts", "spare hosts must be >= 0");
  require(p.spare_hosts <= p.units.hosts, "spare_hosts",
          "more spare hosts than the job has hosts");
  require(p.days > 0 && std::isfinite(p.days), "days", "the run must last > 0 days");
}

void check_request(long trials, double days, const ErrorContext& trials_at,
                   const ErrorContext& days_at) {
  if (trials < 2) throw_input("at least 2 trials are needed for a confidence interval", trials_at);
  // Each trial keeps its result in memory, and a trial simulates every failure of its run.
  if (trials > kMaxTrials) {
    throw_input(std::to_string(trials) + " trials: at most " + std::to_string(kMaxTrials) +
                    " (each keeps its result in memory)",
                trials_at);
  }
  if (!std::isfinite(days)) throw_input("the run's length must be a finite number of days", days_at);
  if (!(days > 0)) throw_input("the run must last more than 0 days", days_at);
  if (days > kMaxDays) {
    throw_input(fmt::format("{:g} days: at most {:g} (ten years; a trial simulates every failure "
                            "of the run)",
                            days, kMaxDays),
                days_at);
  }
}

TrialResult run_trial(const Params& p, std::uint64_t index) { return Trial(p, index).run(); }

std::vector<TrialResult> run_trials(const Params& p, std::uint64_t first, std::uint64_t count,
                                    int threads) {
  check(p);
  std::vector<TrialResult> out(count);
  unsigned n = threads > 0 ? static_cast<unsigned>(threads) : std::thread::hardware_concurrency();
  n = std::max(1u, std::min<unsigned>(n, static_cast<unsigned>(std::max<std::uint64_t>(count, 1))));
  auto work = [&](unsigned k) {
    const std::uint64_t lo = count * k / n, hi = count * (k + 1) / n;
    for (std::uint64_t i = lo; i < hi; ++i) out[i] = run_trial(p, first + i);
  };
  if (n == 1) {
    work(0);
    return out;
  }
  std::vector<std::thread> pool;
  for (unsigned k = 0; k < n; ++k) pool.emplace_back(work, k);
  for (std::thread& th : pool) th.join();
  return out;
}

double job_failure_rate_h(const Params& p) {
  double rate = 0;
  for (const FailureClass& c : p.classes) {
    if (interrupts(c.effect)) rate += c.rate_per_unit_h * static_cast<double>(p.units.count(c.scope));
  }
  return rate;
}

double young_interval_s(double delta_s, double mtbf_s) { return std::sqrt(2 * delta_s * mtbf_s); }

double daly_interval_s(double delta_s, double mtbf_s) {
  if (delta_s >= 2 * mtbf_s) return mtbf_s;
  const double r = delta_s / (2 * mtbf_s);
  return std::sqrt(2 * delta_s * mtbf_s) * (1 + std::sqrt(r) / 3 + r / 9) - delta_s;
}

double exponential_ettr(double interval_s, double delta_s, double recovery_s, double mtbf_s) {
  const double lambda = 1 / mtbf_s;
  const double segment = std::exp(lambda * recovery_s) * std::expm1(lambda * (interval_s + delta_s));
  return lambda * interval_s / segment;
}

double exponential_optimal_interval_s(double delta_s, double mtbf_s) {
  // g(x) = e^{x+d}(1 − x) − 1 falls from e^d − 1 > 0 at x = 0 to −1 at x = 1 (x = λτ, d = λδ).
  const double d = delta_s / mtbf_s;
  double lo = 0, hi = 1;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (std::exp(mid + d) * (1 - mid) - 1 > 0 ? lo : hi) = mid;
  }
  return (lo + hi) / 2 * mtbf_s;
}

Estimate estimate(const std::vector<double>& x) {
  Estimate e;
  if (x.empty()) return e;
  double sum = 0;
  for (double v : x) sum += v;
  e.mean = sum / static_cast<double>(x.size());
  if (x.size() < 2) return e;
  double ss = 0;
  for (double v : x) ss += (v - e.mean) * (v - e.mean);
  e.sd = std::sqrt(ss / static_cast<double>(x.size() - 1));
  e.ci95 = 1.959963984540054 * e.sd / std::sqrt(static_cast<double>(x.size()));
  return e;
}

Summary summarize(const Params& p, const std::vector<TrialResult>& trials) {
  Summary s;
  s.trials = static_cast<long>(trials.size());
  s.days = p.days;
  s.mean_by_class.assign(p.classes.size(), 0);
  std::vector<double> ettr;
  ettr.reserve(trials.size());
  for (const TrialResult& t : trials) {
    ettr.push_back(t.ettr());
    s.mean_split.training_s += t.split.training_s;
    s.mean_split.lost_s += t.split.lost_s;
    s.mean_split.checkpoint_s += t.split.checkpoint_s;
    s.mean_split.slow_s += t.split.slow_s;
    s.mean_split.detection_s += t.split.detection_s;
    s.mean_split.diagnosis_s += t.split.diagnosis_s;
    s.mean_split.repair_s += t.split.repair_s;
    s.mean_split.restart_s += t.split.restart_s;
    s.mean_interruptions += static_cast<double>(t.interruptions);
    s.mean_checkpoints += static_cast<double>(t.checkpoints);
    for (std::size_t c = 0; c < t.by_class.size() && c < s.mean_by_class.size(); ++c) {
      s.mean_by_class[c] += static_cast<double>(t.by_class[c]);
    }
  }
  s.ettr = estimate(ettr);
  const double n = trials.empty() ? 1.0 : static_cast<double>(trials.size());
  for (double* v : {&s.mean_split.training_s, &s.mean_split.lost_s, &s.mean_split.checkpoint_s,
                    &s.mean_split.slow_s, &s.mean_split.detection_s, &s.mean_split.diagnosis_s,
                    &s.mean_split.repair_s, &s.mean_split.restart_s, &s.mean_interruptions,
                    &s.mean_checkpoints}) {
    *v /= n;
  }
  for (double& v : s.mean_by_class) v /= n;
  const double rate_h = job_failure_rate_h(p);
  s.job_mtbf_s = rate_h > 0 ? 3600 / rate_h : kInf;
  if (rate_h > 0) {
    s.young_s = young_interval_s(p.checkpoint_blocking_s, s.job_mtbf_s);
    s.daly_s = daly_interval_s(p.checkpoint_blocking_s, s.job_mtbf_s);
  } else {
    // No failures: both formulas grow without bound (never checkpoint for failures' sake).
    s.young_s = s.daly_s = kInf;
  }
  return s;
}

std::vector<double> interval_grid(double young_s, double current_s, int points) {
  std::vector<double> out;
  if (young_s > 0 && std::isfinite(young_s)) {
    const int half = points / 2;
    for (int i = 0; i < points; ++i) {
      const double tau =
          round_interval_s(young_s * std::exp2(2.0 * (i - half) / std::max(half, 1)));
      if (out.empty() || tau != out.back()) out.push_back(tau);
    }
  }
  const bool present = std::any_of(out.begin(), out.end(), [&](double v) {
    return std::abs(v - current_s) <= 1e-9 * current_s;
  });
  if (!present && current_s > 0) out.push_back(current_s);
  std::sort(out.begin(), out.end());
  return out;
}

double round_interval_s(double tau) {
  if (!std::isfinite(tau)) return tau;
  return std::max(1.0, std::round(tau));
}

IntervalSearch best_interval(const std::vector<double>& intervals_s,
                             const std::vector<double>& mean_ettr) {
  IntervalSearch r;
  r.intervals_s = intervals_s;
  r.ettr = mean_ettr;
  if (intervals_s.empty() || intervals_s.size() != mean_ettr.size()) return r;
  const std::size_t i = static_cast<std::size_t>(
      std::max_element(mean_ettr.begin(), mean_ettr.end()) - mean_ettr.begin());
  r.best_s = intervals_s[i];
  r.best_ettr = mean_ettr[i];
  // The nearest node on each side at least kFitMinLogGap from the best one in ln τ.
  const double x1 = std::log(intervals_s[i]);
  std::size_t lo = i, hi = i;
  while (lo > 0 && x1 - std::log(intervals_s[lo]) < kFitMinLogGap) --lo;
  while (hi + 1 < intervals_s.size() && std::log(intervals_s[hi]) - x1 < kFitMinLogGap) ++hi;
  const double x0 = std::log(intervals_s[lo]), x2 = std::log(intervals_s[hi]);
  if (x1 - x0 < kFitMinLogGap || x2 - x1 < kFitMinLogGap) return r;  // at an end of the grid
  // Vertex of the parabola through the three points, in x = ln τ.
  const double y0 = mean_ettr[lo], y1 = mean_ettr[i], y2 = mean_ettr[hi];
  const double den = (x1 - x0) * (y1 - y2) - (x1 - x2) * (y1 - y0);
  if (!(den > 0) && !(den < 0)) return r;
  const double num = (x1 - x0) * (x1 - x0) * (y1 - y2) - (x1 - x2) * (x1 - x2) * (y1 - y0);
  const double x = std::clamp(x1 - 0.5 * num / den, x0, x2);
  const double fit = round_interval_s(std::exp(x));
  const bool on_a_node = std::any_of(intervals_s.begin(), intervals_s.end(), [&](double v) {
    return round_interval_s(v) == fit;
  });
  if (!on_a_node) r.fit_s = fit;
  return r;
}

const char* to_string(Scope s) {
  switch (s) {
    case Scope::kGpu:
      return "gpu";
    case Scope::kHost:
      return "host";
    case Scope::kNic:
      return "nic";
    case Scope::kLink:
      return "link";
    case Scope::kSwitch:
      return "switch";
    case Scope::kJob:
      return "job";
  }
  return "?";
}

const char* to_string(Effect e) {
  switch (e) {
    case Effect::kCrash:
      return "crash";
    case Effect::kHang:
      return "hang";
    case Effect::kSlow:
      return "slow";
    case Effect::kPlanned:
      return "planned";
  }
  return "?";
}

}  // namespace trainsim::goodput
