// Goodput of a whole training run: a Monte Carlo of failures, checkpoints and restarts.
//
// A synchronous training job on many GPUs stops whenever one of its components fails (Llama 3:
// 419 unexpected interruptions in 54 days on 16,384 GPUs; MegaScale NSDI'24 §4). Each trial here
// is one run of `days` days, simulated event by event in wall-clock time:
//
//   running ──failure──► detection ─► diagnosis ─► spare host ─► restart ──► running
//      │                  (heartbeat    (self-checks  (hot spare    (relaunch + communicator
//      │                   or NCCL       or manual)    or wait for   init + checkpoint load)
//      │                   timeout)                    a repair)
//      ├─ checkpoint: a blocking stall (to host memory, or straight to storage), then an
//      │  asynchronous write; a checkpoint protects the work before it once that write is done.
//      └─ slow host: every iteration is slower by a factor until the host is found and evicted
//         (an on-demand checkpoint first, so no work is lost).
//
// Failure classes are independent processes. Each class's arrivals over the job are a renewal
// process of mean gap 1/(units · rate): exponential gaps (a Poisson process, exact for many
// components with constant hazard) or Weibull gaps of the same mean (`weibull_shape` ≠ 1: shape
// < 1 gives bursts, > 1 regular gaps). Failures keep arriving while the job is down; one that
// arrives during a recovery starts the recovery over, which is what the closed form below assumes.
//
// Time is a double in seconds, not sim/core's integer picoseconds: a run of months exceeds what
// int64 picoseconds hold (2^63 ps ≈ 107 days), and the sub-microsecond resolution buys nothing
// for events minutes apart.
//
// Determinism: trial i draws only from streams seeded by (seed, i) (one stream per failure class,
// one for diagnosis outcomes), so a trial's result does not depend on which thread or MPI rank
// runs it, and the failure arrival times of a trial are the same for every checkpoint interval
// (common random numbers: the interval search compares like with like).
//
// Thread safety: every function is pure; run_trials runs trials on its own threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/error.h"

namespace trainsim::goodput {

/// Bounds of a Monte Carlo request: each trial keeps its result in memory (`run_trials`), and a
/// trial simulates every failure and checkpoint of its run, so both bound the work.
inline constexpr long kMaxTrials = 10'000'000;
inline constexpr double kMaxDays = 3650;  // ten years
/// Failure events a request may simulate without --force (trials × intervals × the job's
/// expected failures per run): about a minute on 2 cores, at the 1.4·10⁷ a second measured on
/// the default scenario with raised GPU rates (docs/reliability.md, Work).
inline constexpr double kMaxFailureEvents = 1e9;

/// What a component count a failure rate multiplies.
enum class Scope { kGpu, kHost, kNic, kLink, kSwitch, kJob };

/// How a failure shows and what it costs.
enum class Effect {
  kCrash,    // a process dies or reports an error: found after the crash detection time
  kHang,     // a collective never completes: found when the collective timeout fires
  kSlow,     // a host keeps running slowly until the slow-node detector finds it
  kPlanned,  // maintenance: an on-demand checkpoint, then a restart; nothing lost, no diagnosis
};

struct FailureClass {
  std::string name;
  Scope scope = Scope::kGpu;
  Effect effect = Effect::kCrash;
  double rate_per_unit_h = 0;  // events per unit per hour (FIT / 1e9)
  bool needs_spare = true;     // the faulty host leaves the job and a spare takes its place
};

/// Components of the job: the units failure rates are counted per.
struct Components {
  long gpus = 0, hosts = 0, nics = 0, links = 0, switches = 0;
  long count(Scope s) const;
};

/// The two-stage checkpoint and the restart-time load (MegaScale §4.3), from bytes and bandwidths.
struct CheckpointSpec {
  double state_bytes_per_gpu = 0;       // what one GPU saves: its weights and optimizer shards
  double replicated_bytes_per_gpu = 0;  // the part every DP replica holds alike (weights below
                                        // ZeRO-3, and the optimizer state without ZeRO)
  double unique_bytes = 0;              // one copy of the whole training state (storage holds)
  int gpus = 1, gpus_per_host = 8, dp = 1;  // a replica is gpus / dp GPUs
  double host_copy_Bps = 0;          // GPU → pinned host memory, per GPU
  double storage_write_Bps = 0;      // storage system, all clients together
  double storage_read_Bps = 0;
  double host_storage_Bps = 0;       // one host's path to storage
  double broadcast_s = 0;            // one GPU's replicated bytes broadcast over its DP group
  bool in_memory = true;    // stage 1 to host memory, stage 2 in the background (else blocking)
  bool one_replica_load = true;  // one DP replica reads the replicated part and broadcasts it
                                 // (else every GPU reads its whole state)
};

struct CheckpointCosts {
  double blocking_s = 0;  // training stalls this long per checkpoint
  double async_s = 0;     // then the background write, until the checkpoint is durable
  double load_s = 0;      // reading it back at a restart
};

/// Blocking, asynchronous and load times of `c`: docs/goodput.md derives them.
CheckpointCosts checkpoint_costs(const CheckpointSpec& c);

struct Params {
  Components units;
  std::vector<FailureClass> classes;
  double weibull_shape = 1.0;  // 1: exponential gaps

  // Detection (seconds from the failure until the job controller acts).
  double detect_crash_s = 0;
  double detect_hang_s = 0;
  double detect_slow_s = 0;

  // Diagnosis: automatic self-checks find a faulty host in `auto_diagnosis_s` with probability
  // `auto_share`; the rest, and every fault when `auto_diagnosis` is off, take a manual
  // investigation of `manual_diagnosis_s` (after the self-checks, when they ran).
  bool auto_diagnosis = true;
  double auto_share = 0.9;
  double auto_diagnosis_s = 0;
  double manual_diagnosis_s = 0;

  // Repair: an evicted host is out for `host_repair_s`; `spare_hosts` stand by to replace it.
  long spare_hosts = 0;
  double host_repair_s = 0;

  // Restart after the job has its hosts.
  double relaunch_s = 0;
  double comm_init_s = 0;
  double checkpoint_load_s = 0;

  // Checkpoints: every `interval_s` seconds of training.
  double interval_s = 3600;
  double checkpoint_blocking_s = 0;
  double checkpoint_async_s = 0;

  // A slow host makes every iteration this many times longer until evicted.
  double slow_iteration_factor = 1.0;

  double days = 1;
  std::uint64_t seed = 1;
};

/// Wall-clock time of one run by what it was spent on; the parts add up to the run's length.
struct TimeSplit {
  double training_s = 0;    // iterations whose progress was kept
  double lost_s = 0;        // iterations done since the last durable checkpoint, then lost
  double checkpoint_s = 0;  // blocking checkpoint stalls (and on-demand saves before a stop)
  double slow_s = 0;        // extra time of iterations slowed by a degraded host
  double detection_s = 0;
  double diagnosis_s = 0;
  double repair_s = 0;      // waiting for a host when no spare is free
  double restart_s = 0;     // relaunch, communicator initialization and checkpoint load
  double total() const {
    return training_s + lost_s + checkpoint_s + slow_s + detection_s + diagnosis_s + repair_s +
           restart_s;
  }
};

struct TrialResult {
  TimeSplit split;
  long interruptions = 0;           // times the job stopped
  long checkpoints = 0;             // periodic checkpoints taken
  std::vector<long> by_class;       // events of each class (as Params::classes), while up or down
  double ettr() const { return split.total() > 0 ? split.training_s / split.total() : 0; }
};

/// Checks `p` for values the model cannot run (negative rates or times, interval ≤ 0, ...);
/// throws trainsim::Error(kInput) naming the Params field.
void check(const Params& p);

/// Checks a request of `trials` trials of `days` days against the bounds above (≥ 2 trials for a
/// confidence interval, at most kMaxTrials; a finite length > 0 and at most kMaxDays); throws
/// trainsim::Error(kInput) at `trials_at` or `days_at` (the flag that gave the value).
void check_request(long trials, double days, const ErrorContext& trials_at,
                   const ErrorContext& days_at);

/// One trial: a run of p.days days with the streams of (p.seed, index).
TrialResult run_trial(const Params& p, std::uint64_t index);

/// Trials first .. first+count-1 over `threads` threads (≤ 0: the hardware's), in index order.
std::vector<TrialResult> run_trials(const Params& p, std::uint64_t first, std::uint64_t count,
                                    int threads);

/// Failures per hour of the classes that stop the job and lose work (crash and hang).
double job_failure_rate_h(const Params& p);

// Closed forms (docs/goodput.md). MTBF and δ in seconds.

/// Young (1974): τ = √(2·δ·MTBF).
double young_interval_s(double delta_s, double mtbf_s);
/// Daly (2006), the higher-order estimate: √(2δM)·(1 + √(δ/2M)/3 + (δ/2M)/9) − δ for δ < 2M,
/// else M.
double daly_interval_s(double delta_s, double mtbf_s);
/// Expected share of wall time spent on kept training for exponential failures of rate λ = 1/M,
/// segments of τ + δ, a recovery of R after each failure that a failure during it restarts:
/// E[time per segment] = e^{λR}·(e^{λ(τ+δ)} − 1)/λ, so ETTR = τ / E.
double exponential_ettr(double interval_s, double delta_s, double recovery_s, double mtbf_s);
/// The τ that maximises exponential_ettr (independent of R): the root of e^{λ(τ+δ)}(1 − λτ) = 1.
double exponential_optimal_interval_s(double delta_s, double mtbf_s);

/// Mean, standard deviation and 95 % confidence half-width of a sample.
struct Estimate {
  double mean = 0, sd = 0, ci95 = 0;
};
Estimate estimate(const std::vector<double>& x);

/// Everything a report shows, from the trials of one configuration.
struct Summary {
  long trials = 0;
  double days = 0;
  Estimate ettr;
  TimeSplit mean_split;           // per trial
  double mean_interruptions = 0;  // per trial
  double mean_checkpoints = 0;
  std::vector<double> mean_by_class;  // per trial
  double job_mtbf_s = 0;              // 1 / job_failure_rate
  double young_s = 0, daly_s = 0;     // from checkpoint_blocking_s and job_mtbf_s (+inf: no failures)
};
Summary summarize(const Params& p, const std::vector<TrialResult>& trials);

/// Checkpoint intervals a search tries: `points` log-spaced from young/4 to young·4 (the centre
/// one is young), each in whole seconds (round_interval_s; fewer when two round alike), with
/// `current` added in order when it is not among them.
std::vector<double> interval_grid(double young_s, double current_s, int points = 17);

/// Nodes closer than this in ln τ to the best one are left out of the parabola's fit: a quarter
/// of interval_grid's step (ln 2^{1/4}), ln 2 / 16 = 4.4 %. Their ETTRs differ by less than the
/// Monte Carlo noise near a flat optimum, so a fit through two of them bends to the noise (the
/// interval used, Daly's, lies within 0.2 % of a grid node in the default scenario).
inline constexpr double kFitMinLogGap = 0.043321698784996586;  // ln(2) / 16

/// `tau` in whole seconds, at least 1: what `reliability.checkpoint.interval` takes, so that an
/// interval the search tries can be run again (`--set reliability.checkpoint.interval=N`).
double round_interval_s(double tau);

/// The interval search's outcome: mean ETTR per grid interval (the same trials for each) and
/// the best of them; `fit_s` is the vertex of a parabola in ln τ through the best node and its
/// nearest neighbours at least kFitMinLogGap away, in whole seconds, 0 when there is none
/// (the best node at an end of the grid, a flat or upturned fit, or a vertex on a node).
/// A fit is only a candidate: the caller simulates it on the same trials and keeps it when it
/// beats the best node (the search never reports an ETTR it did not simulate).
struct IntervalSearch {
  std::vector<double> intervals_s;
  std::vector<double> ettr;
  double best_s = 0;
  double best_ettr = 0;
  double fit_s = 0;
};
IntervalSearch best_interval(const std::vector<double>& intervals_s,
                             const std::vector<double>& mean_ettr);

const char* to_string(Scope s);
const char* to_string(Effect e);

}  // namespace trainsim::goodput
