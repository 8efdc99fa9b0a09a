// Configuration sweeps: the engine of `trainsim sweep`.
//
// A sweep starts from a loaded scenario (the base) and a set of points, each of which overrides
// some scenario keys. Points come from `--vary KEY=VALUES` (the Cartesian product of the axes) and
// from `--auto` (every factorization of the GPU count into TP×PP×DP×CP×EP, with micro-batch, vpp,
// recompute and ZeRO choices). Every point is built through `build_scenario`, so a value a sweep
// sets passes the same schema checks and derivations as `--set`, and is evaluated at analytic
// fidelity. Points that cannot run stay in the result with the reason ("TP 3 does not divide the
// 128 attention heads", "does not fit in memory: needs 93.1 GiB of 74.5 GiB ...").
//
// Determinism: a plan is a pure function of the base scenario and the spec; a point's result is a
// pure function of its overrides; the ranking is a total order (metric, then point index). So the
// outcome is the same whatever the number of threads, processes or resumptions that computed it,
// and its serialisation round-trips doubles exactly (shortest round-trip decimal form).
//
// Distribution: `run_sweep` evaluates the pending points in blocks; each block is dealt out over
// the ranks of a `SweepTransport` (one process, or MPI ranks in cli/) and, inside a rank, over
// `jobs` threads; rank 0 gathers every block, appends it to the checkpoint file and reports
// progress. Thread safety: all functions are reentrant; the schema and presets they read are
// immutable after first use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "calibrate/profile.h"
#include "scenarios/scenario.h"
#include "sim/exec/analytic.h"
#include "sim/exec/result.h"

namespace trainsim::scen {

/// One swept key and the canonical values it takes, in the order given.
struct SweepAxis {
  std::string key;
  std::vector<std::string> values;
};

/// Parses one `--vary` argument: `KEY=SPEC`, where SPEC is a comma-separated list of values and,
/// for numeric keys, ranges: `A:B` (every integer from A to B), `A:B:S` (step S) or `A:B:xF` /
/// `A:B:*F` (times F, for geometric series like 1:64:x2). Each value is checked like `--set` (same
/// errors, located at `--vary` and the key). Repeated values are kept once. Throws Error(kInput)
/// for an unknown key (with a suggestion), an empty list or range, or a bad value. `flag` is the
/// option the argument came with (`--vary`, `--compare`), which errors name.
SweepAxis parse_vary(const std::string& arg, const std::string& flag = "--vary");

/// The price of one GPU for one hour, as given to `--gpu-hour-price`.
struct GpuHourPrice {
  double amount = 0;
  std::string currency;  // ISO-style code: "USD", "EUR", ...
};

/// Parses `2.5USD`, `2.5 USD/h`, `$2.5`, `€1.9/gpu-hour`, ... A bare number, a price per anything
/// other than the GPU-hour, or a non-positive amount throws Error(kInput) saying what to write.
GpuHourPrice parse_gpu_hour_price(const std::string& text);

enum class RankBy { kMfu, kTokensPerS, kCost, kGoodput };

/// "mfu", "tokens_per_s", "cost", "goodput".
const char* to_string(RankBy r);

/// A whole-run goodput Monte Carlo per point (`sweep --goodput`, docs/goodput.md): each feasible
/// point's scenario goes through the same `goodput_setup` and trials as `trainsim goodput`
/// (without its interval search), so a sweep can vary `reliability.*` keys (checkpoint interval,
/// spares, detection, diagnosis), the MegaScale levers (`optimizations.fast_comm_init`,
/// `reliability.checkpoint.in_memory`, `reliability.diagnosis.automatic`) and the parallel
/// configuration together, and rank by tokens per day over the run.
struct GoodputSweep {
  double days = 54;
  long trials = 1000;
};

struct SweepSpec {
  std::vector<SweepAxis> axes;  // --vary, in the order given
  bool auto_parallel = false;   // --auto
  RankBy rank_by = RankBy::kMfu;
  std::optional<GpuHourPrice> price;  // needed for RankBy::kCost
  std::optional<GoodputSweep> goodput;  // needed for RankBy::kGoodput and reliability.* axes
};

/// The points of a sweep. Columns are the swept keys; each point stores, per key, an index into
/// that key's value list (compact: 300,000 points of ten keys take 6 MB).
struct SweepPlan {
  std::string source;                             // the base scenario's file (or name)
  std::string description;                        // how the points were made, for the summary
  std::map<std::string, std::string> base_given;  // the values the base scenario states itself
  std::vector<std::string> keys;
  std::vector<std::vector<std::string>> values;  // per key, canonical text
  std::vector<std::uint16_t> cells;              // point-major: cells[point * keys.size() + k]
  std::optional<std::size_t> base_point;         // the point equal to the base configuration

  std::size_t size() const { return keys.empty() ? 0 : cells.size() / keys.size(); }
  const std::string& value(std::size_t point, std::size_t key) const {
    return values[key][cells[point * keys.size() + key]];
  }
  /// The flat values a point's scenario is built from: the base's own plus the point's.
  std::map<std::string, std::string> flat_values(std::size_t point) const;
  /// "tp=8 pp=8 ..." of the point's own keys (leaf names), for messages and labels.
  std::string label(std::size_t point) const;
};

/// The keys `--auto` chooses, in column order.
const std::vector<std::string>& auto_keys();

/// Enumerates the points. `--auto` takes every TP ≤ heads, PP ≤ layers and CP ≤ seq_len/2 that
/// divide the GPU count (DP is what remains), EP dividing DP up to the expert count (MoE models
/// only), micro-batch 1, 2, 4, 8, vpp 1 and every divisor of layers/PP above it (interleaved;
/// not when the base schedule is explicitly gpipe or 1f1b), recompute none/selective/full and
/// ZeRO 0-3 (only 0 when DP is 1), times the `--vary` axes on other keys. Throws Error(kInput)
/// when there is nothing to sweep, an axis repeats a key or names a key `--auto` chooses, or the
/// sweep would exceed `max_points`.
SweepPlan plan_sweep(const Scenario& base, const SweepSpec& spec,
                     std::size_t max_points = 5'000'000);

enum class PointStatus : std::uint8_t {
  kOk,          // evaluated
  kInfeasible,  // well formed but cannot run: divisibility, GPU count, memory
  kInvalid,     // the combination is not a valid scenario (e.g. vpp 2 with the gpipe schedule)
};

const char* to_string(PointStatus s);

/// What a sweep keeps of one point: the headline figures and the breakdown (a full exec::Result
/// per point would cost too much memory at 10^5 points; `evaluate_point_full` recomputes one).
struct PointResult {
  PointStatus status = PointStatus::kOk;
  std::string field;   // the offending key, when not ok ("" if none)
  std::string reason;  // why it is not ok
  int gpus = 0;
  int microbatches = 0;
  double iteration_time_s = 0;
  double tokens_per_s = 0;
  double mfu = 0;
  double hfu = 0;
  double tflops_per_gpu = 0;
  double memory_peak_bytes = 0;  // also set for points that do not fit
  double memory_capacity_bytes = 0;
  double nvlink_utilization = 0;
  double nic_utilization = 0;
  exec::Breakdown breakdown;
  // With SweepSpec::goodput, of feasible points: the Monte Carlo's means over the trials.
  double ettr = 0;                    // effective training time ratio
  double ettr_ci95 = 0;               // its 95 % confidence half-width
  double goodput_tokens_per_day = 0;  // tokens_per_s · 86,400 · ETTR
  double interruptions = 0;           // per run
  double checkpoint_interval_s = 0;   // as resolved (`auto`: Daly's)
  double checkpoint_blocking_s = 0;   // one checkpoint's stall
  double restart_s = 0;               // one restart: relaunch + communicator init + load
  // Shares of the run's wall time (with ettr they add up to 1).
  double lost_share = 0, checkpoint_share = 0, restart_share = 0, recovery_share = 0,
         slow_share = 0;  // recovery: detection, diagnosis and waiting for a host

  bool ok() const { return status == PointStatus::kOk; }
};

/// One line of text (no newline) holding a point's result; `decode_point` inverts it exactly.
/// Used for the checkpoint file and for gathering results across processes.
std::string encode_point(std::size_t index, const PointResult& r);
/// Parses a line of `encode_point`; false (and nothing changed) when the line is malformed,
/// e.g. cut short by a crash.
bool decode_point(const std::string& line, std::size_t& index, PointResult& r);

/// Evaluates points of one plan. Every point is built by build_scenario and make_run_config, so
/// every key (and any key a later issue adds) is resolved as `trainsim run` resolves it; with the
/// base scenario given, a pure --auto plan takes a shortcut instead: it sets the --auto keys on
/// the base's run config directly (five times faster; tests check that it gives the same results
/// as the resolver on every point). Thread safe: evaluate and evaluate_full are const.
class PointEvaluator {
 public:
  /// `goodput`: also run the goodput Monte Carlo of every feasible point (never the shortcut).
  explicit PointEvaluator(const SweepPlan& plan,
                          std::optional<GoodputSweep> goodput = std::nullopt)
      : plan_(plan), goodput_(goodput) {}
  PointEvaluator(const SweepPlan& plan, const Scenario& base,
                 std::optional<GoodputSweep> goodput = std::nullopt);
  bool shortcut() const { return shortcut_; }
  /// Whether `point` takes the shortcut (false: the resolver evaluates it). For tests: every
  /// point whose TP·PP·DP·CP is the GPU count should, but for a stated shard group that the
  /// resolver refuses.
  bool takes_shortcut(std::size_t point) const {
    if (!shortcut_) return false;
    exec::RunConfig scratch = base_config_;
    return shortcut_config(point, scratch);
  }

  PointResult evaluate(std::size_t point) const;
  /// The same, with `scratch` as the shortcut's run config: a copy of base_config() that this
  /// call overwrites with the point's --auto keys (and nothing else), so that a thread evaluating
  /// many points copies the base configuration (its calibration profile included) only once.
  PointResult evaluate(std::size_t point, exec::RunConfig& scratch) const;
  /// The base scenario's run config (shortcut evaluators only).
  const exec::RunConfig& base_config() const { return base_config_; }
  /// The point's scenario, run config and full result (for reports on the best points), always
  /// through the resolver. Throws the point's Error when it cannot be evaluated.
  void evaluate_full(std::size_t point, Scenario& scenario, exec::Result& result,
                     calib::Profile& profile) const;

 private:
  Scenario scenario_of(std::size_t point) const;
  bool shortcut_config(std::size_t point, exec::RunConfig& cfg) const;
  PointResult evaluate_with(std::size_t point, exec::RunConfig* scratch) const;
  void add_goodput(const Scenario& s, PointResult& out) const;
  const SweepPlan& plan_;
  std::optional<GoodputSweep> goodput_;
  bool shortcut_ = false;
  exec::RunConfig base_config_;
  long base_gpus_ = 0;
  // framework.shard_group as the base states it or its preset sets it (before the resolver's
  // derivation for ZeRO-2/3 with CP), and whether the base states it.
  bool base_shard_over_cp_ = false;
  bool shard_group_stated_ = false;
  // The --auto columns decoded once per plan, by value index: the integers of columns 0-5, 7
  // and 9 (kNotNumber, outside int's range, where a value is not an int), the schedule and
  // recompute enums.
  static constexpr std::int64_t kNotNumber = INT64_MIN;
  std::vector<std::vector<std::int64_t>> numbers_;
  std::vector<plan::Schedule> schedules_;
  std::vector<model::Recompute> recomputes_;
};

/// How results of the ranks of a distributed sweep meet. The default is one process.
class SweepTransport {
 public:
  virtual ~SweepTransport() = default;
  virtual int rank() const { return 0; }
  virtual int size() const { return 1; }
  /// Collective: every rank passes its bytes; rank 0 gets all ranks' bytes in rank order, the
  /// others get an empty vector.
  virtual std::vector<std::string> gather(const std::string& mine) { return {mine}; }
};

struct SweepProgress {
  std::size_t done = 0;  // points with a result, resumed ones included
  std::size_t total = 0;
  std::size_t resumed = 0;  // taken from the checkpoint file
  double elapsed_s = 0;     // since the evaluation started
};

struct SweepOptions {
  int jobs = 1;              // threads per rank
  std::size_t block = 4096;  // points per gather round
  std::string checkpoint;    // "" = none
  bool shortcut = true;      // false: every point through the resolver (PointEvaluator)
  // Called on rank 0 after every block (and once before the first); may be empty.
  std::function<void(const SweepProgress&)> progress;
};

/// A point of the analytic ranking re-evaluated at a finer fidelity (`sweep --refine K`).
struct RefinedPoint {
  std::size_t point = 0;
  std::size_t analytic_rank = 0;  // 1-based
  std::size_t refined_rank = 0;   // 1-based among the refined points that ran; 0 if it did not
  bool base = false;              // the scenario's own configuration
  PointResult result;             // at the finer fidelity (goodput figures: see refine_sweep)
  // The run itself (its scenario, result and profile), for reports; null if it could not run.
  std::shared_ptr<const Scenario> scenario;
  std::shared_ptr<const exec::Result> full;
  std::shared_ptr<const calib::Profile> profile;
};

/// The ranked outcome: results by point index, the order of the ranking (feasible points by the
/// metric, best first; then every other point by index) and the base configuration's rank.
struct SweepOutcome {
  SweepPlan plan;
  SweepSpec spec;
  std::string calibration;  // "name v<version>" of the base scenario's profile
  std::vector<PointResult> results;
  std::vector<std::size_t> order;
  std::size_t feasible = 0;
  std::size_t resumed = 0;
  std::optional<std::size_t> base_rank;  // 1-based among feasible points

  /// What the scenario's framework version can run (scenarios/frameworks.h): its highest ZeRO
  /// stage, context parallelism, an interleaved pipeline. A sweep ranks every point it was given,
  /// these too; framework_lacks names what a point asks beyond them, and framework_rank is the
  /// 1-based rank of the best feasible point within them (none when no point is).
  struct FrameworkLimits {
    std::string preset;  // framework.preset, resolved; empty: no limits known
    std::string date;
    int max_zero = 3;
    bool context_parallel = true;
    bool interleaved_pp = true;
  } framework;
  std::optional<std::size_t> framework_rank;
  int base_zero = 0, base_cp = 1, base_vpp = 1;  // the scenario's, for keys a sweep does not vary
  /// "" where point `point` is within the framework's limits, else what it lacks ("ZeRO 2 (its
  /// highest is 1)", "context parallelism", "an interleaved pipeline"), joined by ", ".
  std::string framework_lacks(std::size_t point) const;
  bool within_framework(std::size_t point) const;

  /// With `--refine K`: the top K feasible points (and the base configuration, when feasible and
  /// below them) re-run at `refine_fidelity`, in their new order (feasible ones by the metric of
  /// their refined result, ties by analytic rank; then those the finer fidelity could not run).
  /// Empty without --refine.
  std::string refine_fidelity;
  std::vector<RefinedPoint> refined;
  std::size_t refine_top = 0;  // how many of `refined` are the analytic top (the rest: the base)

  /// The ranking metric's value of a feasible point (cost: currency per million tokens).
  double metric(std::size_t point) const;
  double metric_of(const PointResult& r) const;
  /// Currency per million tokens, or nullopt without a price.
  std::optional<double> cost_per_mtok(std::size_t point) const;
  std::optional<double> cost_per_mtok_of(const PointResult& r) const;
};

/// Evaluates every point and ranks them. On rank 0 returns the full outcome; on other ranks the
/// outcome has no results. With a checkpoint file, points already recorded there (by an
/// interrupted run of the same sweep) are not evaluated again and new ones are appended as each
/// block finishes; a file from a different sweep throws Error(kInput).
SweepOutcome run_sweep(const Scenario& base, SweepPlan plan, const SweepSpec& spec,
                       const SweepOptions& options, SweepTransport& transport);

/// Re-runs the top `k` feasible points of a ranked outcome at `fidelity` ("flow" or "schedule"),
/// and the base configuration when it is feasible and ranks below them (the yardstick: whether
/// the analytic leaders still beat what the scenario runs now), each built through the resolver
/// like `trainsim run --set ... --fidelity F`, and re-ranks them by the same metric (fills
/// refined, refine_top and refine_fidelity). With --goodput, a refined point keeps the analytic point's Monte Carlo ETTR
/// and shares (the failure process does not depend on the fidelity) and its tokens per day
/// follows the refined tokens/s. `progress(done, total)` is called after each point (under a
/// lock: from any of the threads). `jobs` points run at once, each on its own thread (a flow
/// iteration of 12,288 GPUs takes up to a GiB); the result is the same for any `jobs`.
/// Throws Error(kInput) for another fidelity; a point the finer fidelity cannot run keeps its
/// reason.
void refine_sweep(SweepOutcome& outcome, std::size_t k, const std::string& fidelity,
                  const std::function<void(std::size_t, std::size_t)>& progress = {},
                  int jobs = 1);

/// Ranks results (exposed for tests): fills order, feasible and base_rank.
void rank_outcome(SweepOutcome& outcome);

/// A fingerprint of the plan and the model that evaluates it (and of the goodput run's days and
/// trials, when there is one), stored in checkpoint files.
std::string sweep_fingerprint(const SweepPlan& plan,
                              const std::optional<GoodputSweep>& goodput = std::nullopt);

/// Checks a spec against the points it would sweep: ranking by goodput, or varying a
/// `reliability.*` key, needs `goodput`; its days and trials must be positive (≥ 2 trials).
/// Throws Error(kInput) naming the flag or the key.
void check_goodput_spec(const SweepSpec& spec);

}  // namespace trainsim::scen
