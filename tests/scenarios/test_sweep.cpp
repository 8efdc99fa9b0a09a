// Tests of configuration sweeps (scenarios/sweep.h): --vary and price parsing with their errors,
// the points of --vary and --auto (counted by hand below), exact encoding, ranking, determinism
// across threads and ranks, and resuming from a checkpoint.
//
// The --auto count of the small scenario `kTiny` (8 GPUs, 4 layers, 4 heads, seq 8), by hand:
// TP ≤ 4 heads: {1, 2, 4}; PP ≤ 4 layers dividing 8/TP; CP ≤ seq/2 = 4 dividing what is left.
// Layouts (tp, pp: cp values): (1,1: 1,2,4) (1,2: 1,2,4) (1,4: 1,2) (2,1: 1,2,4) (2,2: 1,2)
// (2,4: 1) (4,1: 1,2) (4,2: 1) = 17 layouts. Each takes 4 micro-batches × 3 recompute choices ×
// (4 ZeRO stages when DP > 1, else 1) × (2 vpp values when PP = 2, since 4/2 = 2 layers split into
// 1 or 2 chunks; else 1): 144 + 216 + 60 + 108 + 120 + 12 + 60 + 24 = 744 points.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "reports/sweep_report.h"
#include "scenarios/goodput_config.h"
#include "scenarios/run_config.h"
#include "scenarios/scenario.h"
#include "scenarios/sweep.h"
#include "sim/core/error.h"
#include "sim/exec/analytic.h"
#include "sim/goodput/goodput.h"

#ifndef TRAINSIM_SOURCE_DIR
#define TRAINSIM_SOURCE_DIR "."
#endif

namespace trainsim::scen {
namespace {

const std::string kMegascale =
    std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/megascale-175b-12288.yaml";

const char* kTiny = R"(
model: {preset: none, layers: 4, hidden: 256, heads: 4, vocab: 1024, seq_len: 8}
cluster: {preset: selene-a100, gpus: 8}
parallel: {tp: 2, pp: 2, vpp: 1, dp: auto, zero: 1}
training: {global_batch: 16, micro_batch: 1}
)";

Error capture(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  return Error(ErrorKind::kRuntime, "no error was thrown");
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string json_of(const SweepOutcome& o) {
  std::ostringstream out;
  reports::write_sweep_json(out, o);
  return out.str();
}

SweepOutcome sweep(const Scenario& base, const SweepSpec& spec, int jobs = 1,
                   const std::string& checkpoint = "") {
  SweepOptions options;
  options.jobs = jobs;
  options.block = 100;
  options.checkpoint = checkpoint;
  SweepTransport one;
  return run_sweep(base, plan_sweep(base, spec), spec, options, one);
}

std::string temp_file(const std::string& name) {
  return ::testing::TempDir() + std::to_string(::getpid()) + "_" + name;
}

// ---- --vary -------------------------------------------------------------------------------------

TEST(SweepVary, ListsAndRanges) {
  EXPECT_EQ(parse_vary("parallel.tp=1,2, 4").values, (std::vector<std::string>{"1", "2", "4"}));
  EXPECT_EQ(parse_vary("parallel.pp=1:4").values, (std::vector<std::string>{"1", "2", "3", "4"}));
  EXPECT_EQ(parse_vary("parallel.pp=1:10:3").values,
            (std::vector<std::string>{"1", "4", "7", "10"}));
  EXPECT_EQ(parse_vary("parallel.pp=1:64:*2").values,
            (std::vector<std::string>{"1", "2", "4", "8", "16", "32", "64"}));
  EXPECT_EQ(parse_vary("parallel.pp=1:8:x2").values,
            (std::vector<std::string>{"1", "2", "4", "8"}));
  EXPECT_EQ(parse_vary("cluster.nic_gbps=100:400:100").values,
            (std::vector<std::string>{"100", "200", "300", "400"}));
  EXPECT_EQ(parse_vary("training.global_batch_tokens=1M:4M:*2").values,
            (std::vector<std::string>{"1M", "2M", "4M"}));
  // Canonical spellings, repeats kept once, enums and words like `auto`.
  EXPECT_EQ(parse_vary("parallel.sp=yes,true,off").values,
            (std::vector<std::string>{"true", "false"}));
  EXPECT_EQ(parse_vary("training.recompute=Full,none").values,
            (std::vector<std::string>{"full", "none"}));
  EXPECT_EQ(parse_vary("parallel.dp=auto,4:5").values,
            (std::vector<std::string>{"auto", "4", "5"}));
}

TEST(SweepVary, UnknownKeyHasASuggestion) {
  const Error e = capture([] { parse_vary("parallel.ppp=1,2"); });
  EXPECT_EQ(e.kind(), ErrorKind::kInput);
  EXPECT_EQ(e.where().file, "--vary");
  EXPECT_EQ(e.where().field, "parallel.ppp");
  EXPECT_TRUE(contains(e.what(), "unknown key")) << e.what();
  EXPECT_TRUE(contains(e.hint(), "did you mean `parallel.pp`?")) << e.what();
  EXPECT_TRUE(contains(capture([] { parse_vary("parallel=1"); }).what(), "is a section"));
}

TEST(SweepVary, EmptyListsAndRangesAreErrors) {
  EXPECT_TRUE(contains(capture([] { parse_vary("parallel.pp="); }).what(), "no values to sweep"));
  EXPECT_TRUE(contains(capture([] { parse_vary("parallel.pp=1,,2"); }).what(), "empty value"));
  const Error e = capture([] { parse_vary("parallel.pp=64:1"); });
  EXPECT_EQ(e.kind(), ErrorKind::kInput);
  EXPECT_TRUE(contains(e.what(), "empty range `64:1`")) << e.what();
  EXPECT_TRUE(
      contains(capture([] { parse_vary("parallel.pp=1:8:0"); }).what(), "step must be positive"));
  EXPECT_TRUE(contains(capture([] { parse_vary("parallel.pp=1:8:*1"); }).what(), "factor above 1"));
  EXPECT_TRUE(contains(capture([] { parse_vary("parallel.pp"); }).what(), "has no `=`"));
  EXPECT_TRUE(contains(capture([] { parse_vary("parallel.pp=1:x"); }).what(), "not an integer"));
}

// A value --vary rejects gets the same message as the same value given to --set.
TEST(SweepVary, ValuesAreCheckedLikeSet) {
  const Error vary = capture([] { parse_vary("parallel.tp=2,eight"); });
  const Error set = capture([] { load_scenario_string("", "x", {"parallel.tp=eight"}); });
  EXPECT_EQ(vary.kind(), ErrorKind::kInput);
  EXPECT_EQ(vary.message(), set.message());
  EXPECT_EQ(set.where().file, "--set");
  // Ranges are checked value by value: 0 is below parallel.tp's minimum of 1.
  const Error zero = capture([] { parse_vary("parallel.tp=0:2"); });
  EXPECT_EQ(zero.message(),
            capture([] { load_scenario_string("", "x", {"parallel.tp=0"}); }).message());
}

// ---- prices -------------------------------------------------------------------------------------

TEST(SweepPrice, Forms) {
  for (const auto& [text, amount, currency] :
       std::vector<std::tuple<std::string, double, std::string>>{{"2.5USD", 2.5, "USD"},
                                                                 {"2.5 usd/h", 2.5, "USD"},
                                                                 {"$3", 3, "USD"},
                                                                 {"EUR 1.9", 1.9, "EUR"},
                                                                 {"\xE2\x82\xAC"
                                                                  "2/gpu-hour",
                                                                  2, "EUR"},
                                                                 {"0.75GBP/hr", 0.75, "GBP"}}) {
    const GpuHourPrice p = parse_gpu_hour_price(text);
    EXPECT_DOUBLE_EQ(p.amount, amount) << text;
    EXPECT_EQ(p.currency, currency) << text;
  }
}

TEST(SweepPrice, ErrorsSayWhatToWrite) {
  const Error bare = capture([] { parse_gpu_hour_price("2.5"); });
  EXPECT_EQ(bare.kind(), ErrorKind::kInput);
  EXPECT_TRUE(contains(bare.what(), "`2.5` has no currency")) << bare.what();
  EXPECT_TRUE(contains(bare.hint(), "2.5USD")) << bare.what();
  EXPECT_TRUE(contains(capture([] { parse_gpu_hour_price("60USD/day"); }).what(),
                       "not a price per GPU-hour (it is per `day`)"));
  EXPECT_TRUE(contains(capture([] { parse_gpu_hour_price("-1USD"); }).what(), "must be positive"));
  EXPECT_TRUE(
      contains(capture([] { parse_gpu_hour_price("2.5 dollars"); }).what(), "not a currency code"));
  EXPECT_TRUE(contains(capture([] { parse_gpu_hour_price("USD"); }).what(), "not an amount"));
}

// ---- plans --------------------------------------------------------------------------------------

TEST(SweepPlan, VaryIsTheProductFirstAxisSlowest) {
  const Scenario base = load_scenario_string(kTiny, "tiny.yaml");
  SweepSpec spec;
  spec.axes = {parse_vary("parallel.tp=1,2"), parse_vary("training.micro_batch=1,2,4")};
  const SweepPlan p = plan_sweep(base, spec);
  ASSERT_EQ(p.size(), 6u);
  EXPECT_EQ(p.label(0), "tp=1 micro_batch=1");
  EXPECT_EQ(p.label(1), "tp=1 micro_batch=2");
  EXPECT_EQ(p.label(3), "tp=2 micro_batch=1");
  ASSERT_TRUE(p.base_point.has_value());
  EXPECT_EQ(*p.base_point, 3u);  // tp 2, micro-batch 1: the scenario's own
  EXPECT_EQ(p.flat_values(5).at("training.micro_batch"), "4");
  EXPECT_EQ(p.flat_values(5).at("model.layers"), "4");  // the base's own values come along
  EXPECT_EQ(p.flat_values(5).count("model.vocab"), 1u);
}

TEST(SweepPlan, AutoCountsEveryFactorization) {
  const Scenario base = load_scenario_string(kTiny, "tiny.yaml");
  SweepSpec spec;
  spec.auto_parallel = true;
  const SweepPlan p = plan_sweep(base, spec);
  EXPECT_EQ(p.size(), 744u);  // derived at the top of this file
  EXPECT_EQ(p.keys, auto_keys());
  ASSERT_TRUE(p.base_point.has_value());
  EXPECT_EQ(p.label(*p.base_point),
            "tp=2 pp=2 dp=2 cp=1 ep=1 vpp=1 schedule=1f1b micro_batch=1 recompute=selective "
            "zero=1");
  for (std::size_t i = 0; i < p.size(); ++i) {
    const auto v = p.flat_values(i);
    EXPECT_EQ(std::stoi(v.at("parallel.tp")) * std::stoi(v.at("parallel.pp")) *
                  std::stoi(v.at("parallel.dp")) * std::stoi(v.at("parallel.cp")),
              8);
    EXPECT_EQ(v.at("parallel.schedule"), v.at("parallel.vpp") == "1" ? "1f1b" : "interleaved");
  }
  // --vary multiplies --auto on keys --auto leaves alone.
  spec.axes = {parse_vary("parallel.sp=true,false")};
  EXPECT_EQ(plan_sweep(base, spec).size(), 2 * 744u);
}

// --auto searches the framework's own selective recompute (framework.selective_recompute):
// Megatron's attention core, TorchTitan's per-op policy, or none where the framework has neither;
// the other values of the grid stay as they were (744 points of kTiny with three recompute values).
TEST(SweepPlan, AutoTriesTheFrameworksOwnSelectiveRecompute) {
  const auto recomputes = [](const std::string& fw) {
    const Scenario base =
        load_scenario_string(kTiny, "tiny.yaml", {"framework.preset=" + fw});
    SweepSpec spec;
    spec.auto_parallel = true;
    const SweepPlan p = plan_sweep(base, spec);
    std::set<std::string> seen;
    for (std::size_t i = 0; i < p.size(); ++i) seen.insert(p.flat_values(i).at("training.recompute"));
    return std::make_pair(seen, p.size());
  };
  const auto megatron = recomputes("megatron-lm-2023");
  EXPECT_EQ(megatron.first, (std::set<std::string>{"none", "selective", "full"}));
  EXPECT_EQ(megatron.second, 744u);
  const auto titan = recomputes("torchtitan-2024-04");
  EXPECT_EQ(titan.first, (std::set<std::string>{"none", "selective-op", "full"}));
  EXPECT_EQ(titan.second, 744u);
  const auto deepspeed = recomputes("deepspeed-2023");
  EXPECT_EQ(deepspeed.first, (std::set<std::string>{"none", "full"}));
  EXPECT_EQ(deepspeed.second, 744u / 3 * 2);
}

TEST(SweepPlan, Errors) {
  const Scenario base = load_scenario_string(kTiny, "tiny.yaml");
  EXPECT_TRUE(contains(capture([&] { plan_sweep(base, SweepSpec{}); }).what(), "nothing to sweep"));
  SweepSpec spec;
  spec.auto_parallel = true;
  spec.axes = {parse_vary("parallel.tp=1,2")};
  const Error by_auto = capture([&] { plan_sweep(base, spec); });
  EXPECT_TRUE(contains(by_auto.what(), "is chosen by --auto")) << by_auto.what();
  spec.auto_parallel = false;
  spec.axes = {parse_vary("parallel.tp=1"), parse_vary("parallel.tp=2")};
  EXPECT_TRUE(contains(capture([&] { plan_sweep(base, spec); }).what(), "given to --vary twice"));
  spec.axes = {parse_vary("parallel.tp=1:100"), parse_vary("parallel.pp=1:100")};
  EXPECT_TRUE(
      contains(capture([&] { plan_sweep(base, spec, 5000); }).what(), "more than 5000 points"));
}

// ---- evaluation and ranking ---------------------------------------------------------------------

// MegaScale 175B with TP 3 or 8 and PP 1 or 8: TP 3 cannot split 128 heads, PP 1 needs more
// than the A100's 80 GB, TP 8 · PP 8 is the paper's configuration and the only feasible one.
TEST(SweepRun, InfeasiblePointsKeepTheirReason) {
  // vpp auto, so that PP 1 is a single stage (vpp 6 on one stage is refused: nothing to
  // interleave) and fails on memory alone.
  const Scenario base = load_scenario_file(kMegascale, {"parallel.vpp=auto"});
  SweepSpec spec;
  spec.axes = {parse_vary("parallel.tp=3,8"), parse_vary("parallel.pp=1,8")};
  const SweepOutcome o = sweep(base, spec);
  ASSERT_EQ(o.results.size(), 4u);
  EXPECT_EQ(o.feasible, 1u);
  ASSERT_TRUE(o.base_rank.has_value());
  EXPECT_EQ(*o.base_rank, 1u);
  EXPECT_EQ(o.order.front(), 3u);
  const PointResult& tp3 = o.results[0];
  EXPECT_EQ(tp3.status, PointStatus::kInfeasible);
  EXPECT_EQ(tp3.field, "parallel.tp");
  EXPECT_TRUE(contains(tp3.reason, "TP 3 does not divide the 128 attention heads")) << tp3.reason;
  const PointResult& pp1 = o.results[2];
  EXPECT_EQ(pp1.status, PointStatus::kInfeasible);
  // And with the base's vpp 6, PP 1 says why it cannot interleave.
  const SweepOutcome six = sweep(load_scenario_file(kMegascale), spec);
  EXPECT_TRUE(contains(six.results[2].reason, "vpp 6 interleaves a pipeline, and PP 1 has none"))
      << six.results[2].reason;
  EXPECT_TRUE(contains(pp1.reason, "does not fit in memory: needs")) << pp1.reason;
  EXPECT_GT(pp1.memory_peak_bytes, pp1.memory_capacity_bytes);
  EXPECT_EQ(pp1.mfu, 0.0);  // a configuration that cannot run has no throughput
  // The feasible point is exactly `trainsim run` of the scenario.
  EXPECT_GT(o.results[3].mfu, 0.5);
}

TEST(SweepRun, InvalidCombinationsAreKept) {
  const Scenario base = load_scenario_string(kTiny, "tiny.yaml");
  SweepSpec spec;
  spec.axes = {parse_vary("parallel.schedule=1f1b,interleaved")};
  const SweepOutcome o = sweep(base, spec);
  EXPECT_EQ(o.results[1].status, PointStatus::kInvalid);
  EXPECT_TRUE(contains(o.results[1].reason, "interleaved schedule needs parallel.vpp > 1"))
      << o.results[1].reason;
}

TEST(SweepRun, RankingIsATotalOrder) {
  SweepOutcome o;
  o.plan.keys = {"parallel.tp"};
  o.plan.values = {{"1", "2", "4", "8"}};
  o.plan.cells = {0, 1, 2, 3};
  o.plan.base_point = 2;
  o.results.resize(4);
  o.results[0].mfu = 0.4;
  o.results[1].mfu = 0.5;
  o.results[2].mfu = 0.4;
  o.results[3].status = PointStatus::kInfeasible;
  rank_outcome(o);
  EXPECT_EQ(o.order, (std::vector<std::size_t>{1, 0, 2, 3}));  // equal MFU: lower index first
  EXPECT_EQ(o.feasible, 3u);
  EXPECT_EQ(o.base_rank, 3u);
  // Cost per million tokens: 3.6 USD per GPU-hour × 1000 GPUs / 3600 s at 10^6 tokens/s = 1.
  o.spec.price = GpuHourPrice{3.6, "USD"};
  o.spec.rank_by = RankBy::kCost;
  for (int i = 0; i < 3; ++i) o.results[i].gpus = 1000;
  o.results[0].tokens_per_s = 1e6;
  o.results[1].tokens_per_s = 2e6;
  o.results[2].tokens_per_s = 0.5e6;
  EXPECT_NEAR(*o.cost_per_mtok(0), 1.0, 1e-12);
  rank_outcome(o);
  EXPECT_EQ(o.order, (std::vector<std::size_t>{1, 0, 2, 3}));  // cheapest first
}

TEST(SweepRun, EncodingRoundTripsExactly) {
  PointResult r;
  r.status = PointStatus::kInfeasible;
  r.field = "parallel.tp";
  r.reason = "TP 3 does not divide\tthe heads";
  r.gpus = 12288;
  r.microbatches = 32;
  r.iteration_time_s = 1.0 / 3.0;
  r.mfu = 0.1;
  r.memory_peak_bytes = 4.9e-324;  // the smallest denormal
  r.breakdown.exposed_dp_s = 1e300;
  std::size_t index = 0;
  PointResult back;
  ASSERT_TRUE(decode_point(encode_point(77, r), index, back));
  EXPECT_EQ(index, 77u);
  EXPECT_EQ(encode_point(77, back), encode_point(77, r));
  EXPECT_EQ(back.iteration_time_s, r.iteration_time_s);
  EXPECT_EQ(back.memory_peak_bytes, r.memory_peak_bytes);
  EXPECT_EQ(back.reason, "TP 3 does not divide the heads");  // tabs cannot travel
  EXPECT_FALSE(decode_point(encode_point(77, r).substr(0, 30), index, back));
}

// Ranks of a job as threads of one process, meeting in gather().
class ThreadGroup {
 public:
  explicit ThreadGroup(int size) : size_(size), slots_(static_cast<std::size_t>(size)) {}
  std::vector<std::string> gather(int rank, const std::string& mine) {
    std::unique_lock<std::mutex> lock(mutex_);
    const int generation = generation_;
    slots_[static_cast<std::size_t>(rank)] = mine;
    if (++arrived_ == size_) {
      result_ = slots_;
      arrived_ = 0;
      ++generation_;
      done_.notify_all();
    } else {
      done_.wait(lock, [&] { return generation_ != generation; });
    }
    return rank == 0 ? result_ : std::vector<std::string>{};
  }
  int size() const { return size_; }

 private:
  int size_;
  std::mutex mutex_;
  std::condition_variable done_;
  std::vector<std::string> slots_, result_;
  int arrived_ = 0, generation_ = 0;
};

class ThreadRank : public SweepTransport {
 public:
  ThreadRank(ThreadGroup& group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_.size(); }
  std::vector<std::string> gather(const std::string& mine) override {
    return group_.gather(rank_, mine);
  }

 private:
  ThreadGroup& group_;
  int rank_;
};

// The same JSON, byte for byte, from one thread, three threads and three ranks.
TEST(SweepRun, SameResultWhateverRunsIt) {
  const Scenario base = load_scenario_string(kTiny, "tiny.yaml");
  SweepSpec spec;
  spec.auto_parallel = true;
  const std::string one = json_of(sweep(base, spec, 1));
  EXPECT_EQ(json_of(sweep(base, spec, 3)), one);

  ThreadGroup group(3);
  std::vector<SweepOutcome> outcomes(3);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      ThreadRank transport(group, r);
      SweepOptions options;
      options.jobs = 1;
      options.block = 50;
      outcomes[static_cast<std::size_t>(r)] =
          run_sweep(base, plan_sweep(base, spec), spec, options, transport);
    });
  }
  for (std::thread& t : ranks) t.join();
  EXPECT_EQ(json_of(outcomes[0]), one);
  EXPECT_TRUE(outcomes[1].results.empty());  // only rank 0 holds the result
}

// The --auto shortcut (PointEvaluator with the base scenario) against the resolver, point by
// point, on the small scenario, on Megatron-LM's 1.7B model on 32 GPUs (5,796 points) and on
// TorchTitan's Llama 2 70B at local batch 2, whose `recompute: auto` resolves to full recompute of
// 65 of its 80 layers: a point's `full` is every layer, as the resolver builds it (the shortcut
// kept the base's 65 until 2026-12-06).
TEST(SweepRun, ShortcutMatchesTheResolver) {
  const std::string examples = std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/examples/";
  const Scenario titan =
      load_scenario_file(examples + "torchtitan-llama2-70b-64xa100.yaml",
                         {"training.micro_batch=2", "training.global_batch=128"});
  ASSERT_EQ(titan.training.recompute, model::Recompute::kFull);
  ASSERT_EQ(titan.training.recompute_layers, 65);
  // ZeRO-2/3 with CP: a base that leaves the shard group to its default (each point derives
  // dp_cp for itself), one whose own ZeRO 3 · CP 2 derived it (its ZeRO-1 and CP-1 points do
  // not), and one that states `dp` (the resolver refuses those points, naming the field).
  const Scenario derived = load_scenario_string(kTiny, "tiny.yaml", {"parallel.zero=3", "parallel.cp=2"});
  ASSERT_TRUE(derived.parallel.shard_over_cp);
  const Scenario stated = load_scenario_string(kTiny, "tiny.yaml", {"framework.shard_group=dp"});
  const Scenario tiny_base = load_scenario_string(kTiny, "tiny.yaml");
  const Scenario megatron = load_scenario_file(examples + "megatron-1.7b-32xa100.yaml");
  for (const Scenario* base_ptr : {&tiny_base, &megatron, &titan, &derived, &stated}) {
    const Scenario& base = *base_ptr;
    SweepSpec spec;
    spec.auto_parallel = true;
    const SweepPlan plan = plan_sweep(base, spec);
    const PointEvaluator fast(plan, base), exact(plan);
    ASSERT_TRUE(fast.shortcut());
    std::size_t ok = 0, sharded_cp = 0;
    for (std::size_t i = 0; i < plan.size(); ++i) {
      const PointResult a = fast.evaluate(i), b = exact.evaluate(i);
      ASSERT_EQ(encode_point(i, a), encode_point(i, b)) << plan.label(i);
      ok += a.ok();
      const auto& v = plan.flat_values(i);
      const bool zero_cp = std::stoi(v.at("parallel.zero")) >= 2 && std::stoi(v.at("parallel.cp")) > 1;
      sharded_cp += zero_cp;
      // Every point takes the shortcut (all --auto points multiply to the GPU count), but for
      // ZeRO-2/3 with CP under a stated `dp` shard group.
      const bool refused = zero_cp && base_ptr == &stated;
      EXPECT_EQ(fast.takes_shortcut(i), !refused) << plan.label(i);
      if (refused) {
        EXPECT_NE(a.reason.find("framework.shard_group"), std::string::npos) << a.reason;
      }
    }
    EXPECT_GT(ok, 0u);
    if (base.cluster.gpus == 8) {
      EXPECT_GT(sharded_cp, 0u);
    }
  }
  // A plan with other keys takes no shortcut.
  const Scenario tiny = load_scenario_string(kTiny, "tiny.yaml");
  SweepSpec spec;
  spec.auto_parallel = true;
  spec.axes = {parse_vary("parallel.sp=true,false")};
  EXPECT_FALSE(PointEvaluator(plan_sweep(tiny, spec), tiny).shortcut());
}

// A --vary point is the base with the point's values, resolved as `run --set` resolves it: the
// base's framework preset does not leak its levers into a point that names another preset, and a
// base's `auto` keys (recompute, vpp) are resolved for each point again, not frozen at what they
// resolved to for the base (until 2026-12-06 the plan carried the base's preset-set and derived
// values as if the base stated them: DeepSpeed's point read 7.96 s against `run`'s 12.76 s, and
// TorchTitan's Llama 2 70B with recompute auto read "does not fit" at the base's own micro-batch).
TEST(SweepRun, VaryPointsResolveLikeRunSet) {
  const std::string examples = std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/examples/";
  const auto check = [](const std::string& file, const std::vector<std::string>& sets,
                        const std::string& vary) {
    const Scenario base = load_scenario_file(file, sets);
    SweepSpec spec;
    spec.axes = {parse_vary(vary)};
    const SweepPlan plan = plan_sweep(base, spec);
    const PointEvaluator eval(plan);
    const std::string key = vary.substr(0, vary.find('='));
    for (std::size_t i = 0; i < plan.size(); ++i) {
      std::vector<std::string> point = sets;
      point.push_back(key + "=" + plan.flat_values(i).at(key));
      const PointResult r = eval.evaluate(i);
      ASSERT_TRUE(r.ok()) << plan.label(i) << ": " << r.reason;
      const exec::Result want = exec::run_analytic(make_run_config(load_scenario_file(file, point)));
      EXPECT_EQ(r.iteration_time_s, want.iteration_time_s) << file << " " << plan.label(i);
      EXPECT_EQ(r.mfu, want.mfu) << file << " " << plan.label(i);
    }
  };
  check(examples + "llama3-8b-64xh100.yaml", {},
        "framework.preset=nemo-2024,nemo-2025,deepspeed-2023,torchtitan-2024-04,none");
  check(examples + "megatron-1.7b-32xa100.yaml", {}, "optimizations.system=megatron,deepspeed,nemo");
  check(examples + "torchtitan-llama2-70b-64xa100.yaml", {}, "training.micro_batch=1");
  check(examples + "llama3-8b-64xh100.yaml", {"parallel.pp=4", "parallel.vpp=auto"},
        "parallel.zero=1,2");
}

TEST(SweepRun, ResumesFromACheckpoint) {
  const Scenario base = load_scenario_string(kTiny, "tiny.yaml");
  SweepSpec spec;
  spec.auto_parallel = true;
  const std::string path = temp_file("sweep.checkpoint");
  std::filesystem::remove(path);
  const SweepOutcome full = sweep(base, spec, 2, path);
  EXPECT_EQ(full.resumed, 0u);

  // An interrupted run: the header, 300 complete lines and half of the next one.
  std::ifstream in(path);
  std::string text, line;
  for (int i = 0; i < 301 && std::getline(in, line); ++i) text += line + "\n";
  std::getline(in, line);
  text += line.substr(0, line.size() / 2);
  in.close();
  std::ofstream(path, std::ios::trunc) << text;

  const SweepOutcome resumed = sweep(base, spec, 2, path);
  EXPECT_EQ(resumed.resumed, 300u);
  EXPECT_EQ(json_of(resumed), json_of(full));
  // The checkpoint is complete again: a third run evaluates nothing.
  EXPECT_EQ(sweep(base, spec, 1, path).resumed, 744u);

  // Killed while writing the header: nothing to resume, and nothing in the way.
  const std::string header = text.substr(0, text.find('\n'));
  std::ofstream(path, std::ios::trunc) << header.substr(0, header.size() / 2);
  EXPECT_EQ(sweep(base, spec, 1, path).resumed, 0u);
  EXPECT_EQ(sweep(base, spec, 1, path).resumed, 744u);

  // Another sweep must not take these results.
  SweepSpec other;
  other.axes = {parse_vary("parallel.tp=1,2")};
  const Error e = capture([&] { sweep(base, other, 1, path); });
  EXPECT_EQ(e.kind(), ErrorKind::kInput);
  EXPECT_TRUE(contains(e.what(), "belongs to a different sweep")) << e.what();
  EXPECT_EQ(e.where().file, path);
}

TEST(SweepRun, OnlyAnalyticFidelity) {
  const Scenario base = load_scenario_string(kTiny, "tiny.yaml", {"simulation.fidelity=flow"});
  SweepSpec spec;
  spec.axes = {parse_vary("parallel.tp=1,2")};
  const Error e = capture([&] { sweep(base, spec); });
  EXPECT_EQ(e.kind(), ErrorKind::kInput);
  // Flow fidelity is in the build: sweeps rank at analytic fidelity and --refine re-runs the top
  // points at flow (the message said flow was "not available in this build yet").
  EXPECT_FALSE(contains(e.what(), "not available")) << e.what();
  EXPECT_TRUE(contains(e.what(), "ranks its points at analytic fidelity")) << e.what();
  EXPECT_TRUE(contains(e.hint(), "--refine K --refine-fidelity flow")) << e.hint();
  EXPECT_EQ(e.where().field, "simulation.fidelity");
}

// ---- --refine -----------------------------------------------------------------------------------

// Refined points run on up to `jobs` threads, each its own simulation: the outcome is the same,
// and progress counts every point once, in order, to the total.
TEST(SweepRefine, ThreadsDoNotChangeTheRefinement) {
  const Scenario base = load_scenario_string(kTiny, "tiny.yaml");
  SweepSpec spec;
  spec.axes = {parse_vary("parallel.tp=1,2,4"), parse_vary("training.micro_batch=1,2")};
  SweepOutcome one = sweep(base, spec);
  SweepOutcome three = one;
  refine_sweep(one, 3, "flow", {}, 1);
  std::vector<std::size_t> seen;
  std::size_t total = 0;
  refine_sweep(three, 3, "flow",
               [&](std::size_t done, std::size_t all) {
                 seen.push_back(done);
                 total = all;
               },
               3);
  ASSERT_EQ(one.refined.size(), 4u);  // the top 3 and the base
  EXPECT_EQ(json_of(three), json_of(one));
  for (std::size_t r = 0; r < one.refined.size(); ++r) {
    EXPECT_EQ(three.refined[r].point, one.refined[r].point);
    EXPECT_EQ(three.refined[r].result.iteration_time_s, one.refined[r].result.iteration_time_s);
  }
  EXPECT_EQ(seen, (std::vector<std::size_t>{1, 2, 3, 4}));
  EXPECT_EQ(total, 4u);
}

// The refined table's words: the base marked and measured against the refined leader at both
// fidelities, and, where the base comes out first, said to lead (not "the analytic rank N").
TEST(SweepRefine, TheTextMeasuresTheLeaderAgainstTheBase) {
  const Scenario base = load_scenario_string(kTiny, "tiny.yaml");
  SweepSpec spec;
  spec.axes = {parse_vary("parallel.tp=1,2,4"), parse_vary("training.micro_batch=1,2")};
  SweepOutcome o = sweep(base, spec);
  refine_sweep(o, 3, "schedule");
  ASSERT_EQ(o.refined.size(), 4u);
  const auto is_base = [](const RefinedPoint& rp) { return rp.base; };
  const auto b = std::find_if(o.refined.begin(), o.refined.end(), is_base);
  ASSERT_NE(b, o.refined.end());
  ASSERT_FALSE(o.refined.front().base);
  const RefinedPoint& top = o.refined.front();
  std::string text = reports::refined_text(o);
  EXPECT_TRUE(contains(text, "the top 3 and the base configuration (*) re-run at schedule fidelity"))
      << text;
  EXPECT_TRUE(contains(text, fmt::format("    {}*   {} base ", b->refined_rank, b->analytic_rank)))
      << text;
  EXPECT_TRUE(contains(
      text, fmt::format("the refined leader is {:+.1f} MFU points from the base configuration (*) "
                        "at schedule fidelity ({:+.1f} by the analytic estimates)",
                        100 * (top.result.mfu - b->result.mfu),
                        100 * (o.results[top.point].mfu - o.results[b->point].mfu))))
      << text;
  // The base first (as when the finer fidelity takes the leaders' gains away).
  const auto at = b - o.refined.begin();
  std::rotate(o.refined.begin(), o.refined.begin() + at, o.refined.begin() + at + 1);
  for (std::size_t r = 0; r < o.refined.size(); ++r) o.refined[r].refined_rank = r + 1;
  text = reports::refined_text(o);
  EXPECT_TRUE(contains(text, "the base configuration (*) leads at schedule fidelity: no refined "
                             "point beats it there"))
      << text;
  EXPECT_FALSE(contains(text, "is best at schedule fidelity")) << text;
  EXPECT_FALSE(contains(text, "the refined leader is")) << text;
}

// Each refined point is exactly `trainsim run` of that point's scenario at the finer fidelity,
// and the refined order is by that result's metric. The base configuration, ranked below the
// top K, is re-run beside them (the yardstick) and ranked with them.
TEST(SweepRefine, RefinedPointsAreRunsAtTheFinerFidelity) {
  const Scenario base = load_scenario_string(kTiny, "tiny.yaml");
  SweepSpec spec;
  spec.axes = {parse_vary("parallel.tp=1,2,4"), parse_vary("training.micro_batch=1,2")};
  SweepOutcome o = sweep(base, spec);
  ASSERT_GE(o.feasible, 4u);
  ASSERT_TRUE(o.base_rank.has_value());
  ASSERT_GT(*o.base_rank, 3u);  // the tiny scenario's own tp 2 · micro-batch 1 is not in the top 3
  refine_sweep(o, 3, "schedule");
  ASSERT_EQ(o.refined.size(), 4u);
  EXPECT_EQ(o.refine_top, 3u);
  EXPECT_EQ(o.refine_fidelity, "schedule");
  std::vector<std::size_t> analytic_ranks;
  int bases = 0;
  for (std::size_t r = 0; r < o.refined.size(); ++r) {
    const RefinedPoint& rp = o.refined[r];
    EXPECT_EQ(o.order[rp.analytic_rank - 1], rp.point);
    EXPECT_EQ(rp.base, o.plan.base_point == rp.point);
    if (rp.base) {
      ++bases;
      EXPECT_EQ(rp.analytic_rank, *o.base_rank);
    } else {
      analytic_ranks.push_back(rp.analytic_rank);
    }
    ASSERT_TRUE(rp.result.ok()) << rp.result.reason;
    EXPECT_EQ(rp.refined_rank, r + 1);
    const Scenario s = load_scenario_string(
        kTiny, "tiny.yaml",
        {"parallel.tp=" + o.plan.value(rp.point, 0), "training.micro_batch=" + o.plan.value(rp.point, 1),
         "simulation.fidelity=schedule"});
    const exec::Result run = run_scenario(s, make_run_config(s));
    EXPECT_EQ(rp.result.mfu, run.mfu) << o.plan.label(rp.point);
    EXPECT_EQ(rp.result.iteration_time_s, run.iteration_time_s);
    if (r > 0) {
      EXPECT_GE(o.refined[r - 1].result.mfu, rp.result.mfu);
    }
  }
  EXPECT_EQ(bases, 1);
  std::sort(analytic_ranks.begin(), analytic_ranks.end());
  EXPECT_EQ(analytic_ranks, (std::vector<std::size_t>{1, 2, 3}));  // the analytic top 3
  // The JSON carries them, the base marked; K above the feasible count refines them all, the
  // base among them (not twice).
  const std::string json = json_of(o);
  EXPECT_TRUE(contains(json, "\"refine\": {\"fidelity\": \"schedule\", \"top\": 3, \"points\": ["));
  EXPECT_TRUE(contains(json, fmt::format("\"analytic_rank\": {}, \"refined_rank\": ", *o.base_rank)));
  EXPECT_TRUE(contains(json, "\"base\": true"));
  refine_sweep(o, 1000, "schedule");
  EXPECT_EQ(o.refined.size(), o.feasible);
  EXPECT_EQ(std::count_if(o.refined.begin(), o.refined.end(),
                          [](const RefinedPoint& rp) { return rp.base; }),
            1);
  // The base inside the top K is not added again.
  refine_sweep(o, *o.base_rank, "schedule");
  EXPECT_EQ(o.refined.size(), *o.base_rank);
  const Error e = capture([&] { refine_sweep(o, 2, "analytic"); });
  EXPECT_EQ(e.kind(), ErrorKind::kInput);
}

// ---- --goodput ----------------------------------------------------------------------------------

SweepSpec goodput_spec(std::vector<std::string> vary, long trials, RankBy by = RankBy::kGoodput) {
  SweepSpec spec;
  for (const std::string& v : vary) spec.axes.push_back(parse_vary(v));
  spec.rank_by = by;
  spec.goodput = GoodputSweep{54, trials};
  return spec;
}

// Each point's goodput is what `trainsim goodput` computes for that point's scenario, bit for bit:
// the same setup, the same trials (seeded by simulation.seed and the trial index), one summary.
TEST(SweepGoodput, EachPointIsTheGoodputRunOfItsScenario) {
  const Scenario base = load_scenario_file(kMegascale);
  const SweepOutcome o = sweep(
      base, goodput_spec({"reliability.checkpoint.interval=900,auto", "reliability.spares=4,auto"},
                         20));
  ASSERT_EQ(o.results.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    const PointResult& x = o.results[i];
    ASSERT_TRUE(x.ok()) << x.reason;
    const Scenario s = load_scenario_file(
        kMegascale, {"reliability.checkpoint.interval=" + o.plan.value(i, 0),
                     "reliability.spares=" + o.plan.value(i, 1)});
    const GoodputSetup g = goodput_setup(s, 54);
    const goodput::Summary sum =
        goodput::summarize(g.params, goodput::run_trials(g.params, 0, 20, 1));
    EXPECT_EQ(x.ettr, sum.ettr.mean) << o.plan.label(i);
    EXPECT_EQ(x.ettr_ci95, sum.ettr.ci95);
    EXPECT_EQ(x.interruptions, sum.mean_interruptions);
    EXPECT_EQ(x.checkpoint_interval_s, g.params.interval_s);
    EXPECT_EQ(x.goodput_tokens_per_day, x.tokens_per_s * 86400.0 * x.ettr);
    // The shares and the ETTR split the whole run.
    EXPECT_NEAR(x.ettr + x.lost_share + x.checkpoint_share + x.restart_share + x.recovery_share +
                    x.slow_share,
                1.0, 1e-12);
  }
  EXPECT_EQ(o.results[0].checkpoint_interval_s, 900);
  // Ranked by tokens per day, best first.
  for (std::size_t r = 1; r < o.feasible; ++r) {
    EXPECT_GE(o.results[o.order[r - 1]].goodput_tokens_per_day,
              o.results[o.order[r]].goodput_tokens_per_day);
  }
}

// Exponential failures of one kind (framework crashes, 1 per job-day) and intervals at τ*/4, τ*
// and 4·τ*, where τ* is the closed-form optimum for the checkpoint stall δ of this scenario
// (goodput::exponential_optimal_interval_s, independent of the recovery time): the sweep ranks τ*
// first, and each point's ETTR is the closed form's within the Monte Carlo's 95 % interval
// (plus 0.2 points for the recovery-time approximation of the closed form).
TEST(SweepGoodput, RanksTheClosedFormsOptimalIntervalFirst) {
  std::vector<std::string> sets;
  for (const char* c : {"gpu", "hbm", "nic", "link", "switch", "host", "nccl_hang", "planned",
                        "slow_host"}) {
    sets.push_back(std::string("reliability.rate.") + c + "=0");
  }
  sets.push_back("reliability.rate.framework_crash=1");
  // No detection or diagnosis time, so that the recovery is the restart alone.
  for (const char* k : {"reliability.detection.crash=0", "reliability.diagnosis.self_check=0",
                        "reliability.diagnosis.auto_share=1"}) {
    sets.push_back(k);
  }
  const Scenario base = load_scenario_file(kMegascale, sets);
  const GoodputSetup g = goodput_setup(base, 54);
  const double delta = g.params.checkpoint_blocking_s, mtbf = 86400;
  ASSERT_GT(delta, 0);
  // Whole seconds: the key takes integers.
  const double best = std::round(goodput::exponential_optimal_interval_s(delta, mtbf));
  const std::vector<double> taus = {std::round(best / 4), best, best * 4};
  const SweepOutcome o = sweep(
      base, goodput_spec({fmt::format("reliability.checkpoint.interval={},{},{}", taus[0], taus[1],
                                      taus[2])},
                         300));
  ASSERT_EQ(o.feasible, 3u);
  EXPECT_EQ(o.order.front(), 1u) << "τ* = " << best << " s is not ranked first";
  for (std::size_t i = 0; i < 3; ++i) {
    const PointResult& x = o.results[i];
    const double recovery = x.restart_s;
    const double closed = goodput::exponential_ettr(taus[i], delta, recovery, mtbf);
    EXPECT_NEAR(x.ettr, closed, 2 * x.ettr_ci95 + 0.002)
        << "τ = " << taus[i] << " δ = " << delta << " R = " << recovery;
  }
}

TEST(SweepGoodput, SameResultWhateverTheThreads) {
  const Scenario base = load_scenario_file(kMegascale);
  const SweepSpec spec =
      goodput_spec({"reliability.checkpoint.interval=600,1800", "parallel.pp=8,16"}, 10);
  EXPECT_EQ(json_of(sweep(base, spec, 3)), json_of(sweep(base, spec, 1)));
}

TEST(SweepGoodput, ErrorsNameTheFlagOrKey) {
  const Scenario base = load_scenario_file(kMegascale);
  SweepSpec spec;
  spec.axes = {parse_vary("reliability.spares=0,8")};
  Error e = capture([&] { sweep(base, spec); });
  EXPECT_EQ(e.kind(), ErrorKind::kInput);
  EXPECT_EQ(e.where().field, "reliability.spares");
  EXPECT_TRUE(contains(e.what(), "--goodput")) << e.what();
  spec.axes = {parse_vary("parallel.pp=8,16")};
  spec.rank_by = RankBy::kGoodput;
  e = capture([&] { sweep(base, spec); });
  EXPECT_EQ(e.where().file, "--rank-by");
  spec.goodput = GoodputSweep{0, 10};
  e = capture([&] { sweep(base, spec); });
  EXPECT_EQ(e.where().file, "--days");
  spec.goodput = GoodputSweep{54, 1};
  e = capture([&] { sweep(base, spec); });
  EXPECT_EQ(e.where().file, "--trials");
}

// A point the goodput model cannot run stays in the sweep with the key that is wrong.
TEST(SweepGoodput, MoreSparesThanHostsIsAnInvalidPoint) {
  const Scenario base = load_scenario_file(kMegascale);
  const SweepOutcome o = sweep(base, goodput_spec({"reliability.spares=8,5000"}, 5));
  ASSERT_EQ(o.results.size(), 2u);
  EXPECT_TRUE(o.results[0].ok());
  EXPECT_EQ(o.results[1].status, PointStatus::kInvalid);
  EXPECT_EQ(o.results[1].field, "reliability.spares");
  EXPECT_TRUE(contains(o.results[1].reason, "5000 spare hosts is more than the job's 1536 hosts"))
      << o.results[1].reason;
}

}  // namespace
}  // namespace trainsim::scen
