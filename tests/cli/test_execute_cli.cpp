// `trainsim execute` and `trainsim compare` run as processes.
//
// execute: on a machine without a GPU (or a build without CUDA) it exits 4 saying "no CUDA device
// found"; a Program that needs more GPUs than the machine has exits 3 (shown with the fake
// backend pretending 4 GPUs for 8 ranks).
//
// compare: two hand-written result documents, the errors derived by hand:
//   iteration     sim 1.2 s, real 1.0 s              → +20.0 %
//   qkv fwd       sim 0.30, real 0.25                → +20.0 %
//   all-gather tp sim 0.20, real 0.25                → −20.0 %
//   optimizer     sim 0.05, real 0.05                → +0.0 %
//   attention fwd only measured: sim 0, real 0.10    → −100.0 % (text: "only measured")
//   category compute: sim 0.30, real 0.35            → −14.3 % (−0.05/0.35)
//   weighted |error| over op kinds: (0.05 + 0.05 + 0 + 0.10) / 0.65 = 30.8 %
//   exposed comm: sim tp 0.10 + pp 0.05 + dp 0.05 = 0.20, real 0.05 + 0.05 + 0.10 = 0.20 → 0;
//   exposed tp alone +0.05 s, +100.0 %.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "kernels/device_info.h"
#include "tests/support/cli_runner.h"

namespace {

using nlohmann::json;
using trainsim::testing::CliRun;
using trainsim::testing::temp_path;
using trainsim::testing::trainsim;

const std::string kTiny =
    " --set model.layers=4 --set model.hidden=256 --set model.heads=8 --set model.seq_len=128"
    " --set model.vocab=1024 --set parallel.vpp=1 --set parallel.tp=2 --set parallel.pp=2 --set "
    "parallel.dp=2"
    " --set training.global_batch=8 --set training.micro_batch=1";

// Activation offloading is simulated, not executed: refused before any device is touched.
TEST(ExecuteCli, ActivationOffloadingIsRefused) {
  const CliRun r = trainsim("execute scenarios/megascale-175b-12288.yaml" + kTiny +
                            " --set cluster.gpus=8 --set parallel.pp=1 --set parallel.dp=4"
                            " --set training.recompute=none --set training.cpu_offload_layers=2"
                            " --backend fake --iterations 1 --warmup 0");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("training.cpu_offload_layers"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("does not run activation offloading"), std::string::npos) << r.err;
}

TEST(ExecuteCli, WithoutAGpuExits4) {
  if (!trainsim::kernels::query_devices().devices.empty()) {
    GTEST_SKIP() << "a CUDA device is present: this test is about machines without one";
  }
  const std::string out = temp_path("real.json");
  const CliRun r = trainsim("execute scenarios/megascale-175b-12288.yaml" + kTiny +
                            " --set cluster.gpus=8 --out " + out);
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_NE(r.err.find("no CUDA device found"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

// The fake backend runs the same launch path without a GPU (every op 1 µs): the document has
// every key of `run --format json`, the op kinds of the same Program, and a trace with one
// process per traced rank.
TEST(ExecuteCli, FakeBackendWritesTheRunDocumentAndTrace) {
  const std::string sim = temp_path("sim_run.json"), real = temp_path("fake_real.json");
  const std::string trace = temp_path("fake_trace.json");
  const std::string scenario = "scenarios/megascale-175b-12288.yaml --set cluster.gpus=8" + kTiny;
  CliRun r = trainsim("run " + scenario + " --fidelity schedule --format json -o " + sim);
  ASSERT_EQ(r.code, 0) << r.err;
  r = trainsim("execute " + scenario + " --backend fake --iterations 2 --warmup 1 --out " + real +
               " --trace " + trace + " --trace-ranks 0,4-5");
  ASSERT_EQ(r.code, 0) << r.err;
  const json s = json::parse(trainsim::testing::slurp(sim));
  const json x = json::parse(trainsim::testing::slurp(real));
  for (const auto& [key, value] : s.items()) EXPECT_TRUE(x.contains(key)) << key;
  EXPECT_EQ(x.at("fidelity"), "fake");
  EXPECT_GT(x.at("iteration_time_s").get<double>(), 0);
  // `calibration` says nothing measured it and which profile priced the FLOPs and memory (its
  // version held the CUDA version).
  EXPECT_EQ(x.at("calibration").at("profile"), "fake");
  EXPECT_EQ(x.at("calibration").at("version"), "");
  EXPECT_EQ(x.at("calibration").at("model_profile"),
            s.at("calibration").at("profile").get<std::string>() + " v" +
                s.at("calibration").at("version").get<std::string>());
  // No device waits for another on the fake backend: the PP 2 pipeline has no bubble, and the
  // record says why (docs/execute.md).
  EXPECT_EQ(x.at("breakdown").at("pipeline_bubble_s").get<double>(), 0);
  EXPECT_EQ(x.at("breakdown").at("exposed_comm_s").at("pp").get<double>(), 0);
  bool said = false;
  for (const json& n : x.at("notes")) said |= n.get<std::string>().rfind("fake backend:", 0) == 0;
  EXPECT_TRUE(said) << x.at("notes").dump();
  std::set<std::string> sim_kinds, real_kinds;
  for (const json& k : s.at("task_kinds")) sim_kinds.insert(k.at("name").get<std::string>());
  for (const json& k : x.at("task_kinds")) real_kinds.insert(k.at("name").get<std::string>());
  // Each side lists its critical rank's kinds: the simulation's is on the first stage, the fake's
  // (every op 1 µs) on the last, so the layers' kinds are shared and the ends differ.
  for (const char* k :
       {"qkv fwd", "attention bwd", "all_gather tp", "reduce_scatter dp", "optimizer"}) {
    EXPECT_TRUE(sim_kinds.count(k) && real_kinds.count(k)) << k;
  }
  std::set<std::string> both = sim_kinds;
  both.insert(real_kinds.begin(), real_kinds.end());
  const json t = json::parse(trainsim::testing::slurp(trace));
  std::set<int> pids;
  for (const json& e : t.at("traceEvents")) {
    if (e.at("ph") == "X") pids.insert(e.at("pid").get<int>());
  }
  EXPECT_EQ(pids, (std::set<int>{0, 4, 5}));
  EXPECT_EQ(t.at("otherData").at("fidelity"), "fake");
  r = trainsim("compare " + sim + " " + real + " --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out).at("op_kinds").size(), both.size());
  r = trainsim("execute " + scenario + " --backend fake --iterations 1 --warmup 0 --format text");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("iteration time"), std::string::npos) << r.out;
}

// The text of an execute run names what timed it (it said "calibration measured v" beside the
// datasheet profile the model's numbers came from) and prints times in a unit that shows them
// (every fake time was "0.000 s"); --timeout 0 is refused in one line (CLI11 printed its range
// with 300 digits).
TEST(ExecuteCli, TextNamesWhatTimedTheRunInAUnitThatShowsIt) {
  const std::string scenario = "scenarios/megascale-175b-12288.yaml --set cluster.gpus=8" + kTiny;
  CliRun r = trainsim("execute " + scenario + " --backend fake --iterations 1 --warmup 0 "
                      "--format text");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("· calibration fake backend · seed"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("calibration measured v"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("profile   fake backend for no GPU: nothing measured"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(" µs\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("0.000 s"), std::string::npos) << r.out;
  const std::size_t it = r.out.find("iteration time");
  ASSERT_NE(it, std::string::npos) << r.out;
  const double shown = std::stod(r.out.substr(it + std::string("iteration time").size()));
  EXPECT_GT(shown, 1.0) << r.out;  // tens of µs, not 0.000

  r = trainsim("execute " + scenario + " --backend fake --timeout 0");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("`--timeout`: 0 s is not a timeout"), std::string::npos) << r.err;
  EXPECT_LT(r.err.size(), 200u) << r.err;
}

TEST(ExecuteCli, MoreGpusThanTheMachineExits3) {
  const CliRun r = trainsim("execute scenarios/megascale-175b-12288.yaml --set cluster.gpus=8" +
                            kTiny + " --backend fake --fake-gpus 4");
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.err.find("needs 8 GPUs"), std::string::npos) << r.err;
}

TEST(ExecuteCli, BadArgumentsExit2) {
  CliRun r = trainsim("execute scenarios/megascale-175b-12288.yaml --iterations 0");
  EXPECT_EQ(r.code, 2) << r.err;
  r = trainsim("execute scenarios/megascale-175b-12288.yaml --set cluster.gpus=8" + kTiny +
               " --backend fake --trace-ranks 0,x");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("`--trace-ranks`: `x` is not a rank"), std::string::npos) << r.err;
  r = trainsim("execute scenarios/megascale-175b-12288.yaml --set cluster.gpus=8" + kTiny +
               " --backend fake --trace-ranks 9");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("outside the job's 8 ranks"), std::string::npos) << r.err;
}

std::string write(const std::string& name, const json& j) {
  const std::string path = temp_path(name);
  std::ofstream(path) << j.dump(2);
  return path;
}

json sim_doc() {
  return json::parse(R"({
    "fidelity": "flow", "gpus": 8, "iteration_time_s": 1.2,
    "breakdown": {"compute_s": 0.8,
                  "exposed_comm_s": {"tp": 0.1, "cp": 0, "ep": 0, "pp": 0.05, "dp": 0.05},
                  "pipeline_bubble_s": 0.15, "optimizer_s": 0.05, "data_loading_s": 0},
    "task_kinds": [
      {"name": "qkv fwd", "category": "compute", "count": 8, "total_s": 0.3},
      {"name": "all-gather tp", "category": "tp", "count": 16, "total_s": 0.2},
      {"name": "optimizer", "category": "optimizer", "count": 1, "total_s": 0.05}],
    "config": {"parallel.tp": "2", "model.layers": "4", "simulation.fidelity": "flow"}
  })");
}

json real_doc() {
  return json::parse(R"({
    "fidelity": "real", "gpus": 8, "iteration_time_s": 1.0,
    "breakdown": {"compute_s": 0.7,
                  "exposed_comm_s": {"tp": 0.05, "cp": 0, "ep": 0, "pp": 0.05, "dp": 0.1},
                  "pipeline_bubble_s": 0.05, "optimizer_s": 0.05, "data_loading_s": 0},
    "task_kinds": [
      {"name": "qkv fwd", "category": "compute", "count": 8, "total_s": 0.25},
      {"name": "all-gather tp", "category": "tp", "count": 16, "total_s": 0.25},
      {"name": "attention fwd", "category": "compute", "count": 8, "total_s": 0.1},
      {"name": "optimizer", "category": "optimizer", "count": 1, "total_s": 0.05}],
    "config": {"parallel.tp": "2", "model.layers": "4", "simulation.fidelity": "real"}
  })");
}

const json* find(const json& rows, const std::string& key, const std::string& value) {
  for (const json& r : rows) {
    if (r.at(key) == value) return &r;
  }
  return nullptr;
}

TEST(CompareCli, JsonErrorsAreTheHandDerivedOnes) {
  const std::string sim = write("sim.json", sim_doc()), real = write("real.json", real_doc());
  const CliRun r = trainsim("compare " + sim + " " + real + " --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_NEAR(j.at("iteration_time").at("error").get<double>(), 0.2, 1e-12);
  const json& kinds = j.at("op_kinds");
  ASSERT_EQ(kinds.size(), 4u);
  EXPECT_NEAR(find(kinds, "name", "qkv fwd")->at("error").get<double>(), 0.2, 1e-12);
  EXPECT_NEAR(find(kinds, "name", "all-gather tp")->at("error").get<double>(), -0.2, 1e-12);
  EXPECT_NEAR(find(kinds, "name", "optimizer")->at("error").get<double>(), 0, 1e-12);
  const json* att = find(kinds, "name", "attention fwd");
  EXPECT_NEAR(att->at("error").get<double>(), -1, 1e-12);
  EXPECT_EQ(att->at("note"), "only measured");
  EXPECT_EQ(att->at("real_count"), 8);
  // Rows by measured time, ties by simulated time: qkv fwd, all-gather tp, attention, optimizer.
  EXPECT_EQ(kinds[0].at("name"), "qkv fwd");
  EXPECT_EQ(kinds[2].at("name"), "attention fwd");
  EXPECT_EQ(kinds[3].at("name"), "optimizer");
  const json* compute = find(j.at("categories"), "category", "compute");
  EXPECT_NEAR(compute->at("error").get<double>(), -0.05 / 0.35, 1e-12);
  EXPECT_NEAR(j.at("summary").at("op_kind_weighted_abs_error").get<double>(), 0.2 / 0.65, 1e-12);
  EXPECT_NEAR(j.at("exposed_comm").at("diff_s").get<double>(), 0, 1e-12);
  const json* tp = find(j.at("breakdown"), "key", "exposed_comm_s.tp");
  EXPECT_NEAR(tp->at("diff_s").get<double>(), 0.05, 1e-12);
  EXPECT_NEAR(tp->at("error").get<double>(), 1.0, 1e-12);
  const json* cp = find(j.at("breakdown"), "key", "exposed_comm_s.cp");
  EXPECT_EQ(cp->at("error"), 0);  // 0 against 0 is no error
}

// The breakdown rows add up to the iteration: the slowest-GPU pacing and the global sync a run
// writes are rows too (they were left out, so the rows fell short of the iteration).
TEST(CompareCli, BreakdownRowsAddUpToTheIteration) {
  const std::string a = temp_path("bd-sim.json");
  ASSERT_EQ(trainsim("run --format json -o " + a).code, 0);
  const CliRun r = trainsim("compare " + a + " " + a + " --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  double sum = 0;
  for (const json& row : j.at("breakdown")) sum += row.at("sim_s").get<double>();
  const double iteration = json::parse(trainsim::testing::slurp(a)).at("iteration_time_s");
  EXPECT_NEAR(sum, iteration, 1e-9 * iteration);
  EXPECT_NE(find(j.at("breakdown"), "key", "gpu_variation_s"), nullptr);
  EXPECT_GT(find(j.at("breakdown"), "key", "gpu_variation_s")->at("sim_s").get<double>(), 0);
}

TEST(CompareCli, TextAndMarkdown) {
  const std::string sim = write("sim.json", sim_doc()), real = write("real.json", real_doc());
  const CliRun t = trainsim("compare " + sim + " " + real);
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("error +20.0 %"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("-14.3 %"), std::string::npos) << t.out;
  // The kind only measured says so in text, not −100.0 % (its JSON row has the note).
  EXPECT_NE(t.out.find("only measured"), std::string::npos) << t.out;
  EXPECT_EQ(t.out.find("-100.0 %"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("weighted absolute error 30.8 %"), std::string::npos) << t.out;
  const std::string md = temp_path("compare.md");
  const CliRun m = trainsim("compare " + sim + " " + real + " --format markdown --out " + md);
  ASSERT_EQ(m.code, 0) << m.err;
  const std::string doc = trainsim::testing::slurp(md);
  EXPECT_NE(doc.find("# Simulation vs measurement"), std::string::npos) << doc;
  EXPECT_NE(doc.find("| qkv fwd "), std::string::npos) << doc;
  EXPECT_NE(doc.find("| ---"), std::string::npos) << doc;  // the header rule
}

// Peak memory: the simulation's memory model against what the device measured (execute's
// `memory_measured`); the measured document's own `memory` is the model's and is not read.
TEST(CompareCli, PeakMemoryOfBothSides) {
  json sim = sim_doc(), real = real_doc();
  sim["memory"] = {{"peak_bytes_per_gpu", 66.0 * (1 << 30)}};
  real["memory"] = {{"peak_bytes_per_gpu", 66.0 * (1 << 30)}};  // the model's: not the measure
  real["memory_measured"] = {{"peak_bytes", 60.0 * (1 << 30)}};
  const std::string s = write("sim-mem.json", sim), r = write("real-mem.json", real);
  const CliRun j = trainsim("compare " + s + " " + r + " --format json");
  ASSERT_EQ(j.code, 0) << j.err;
  const json c = json::parse(j.out);
  EXPECT_NEAR(c.at("peak_memory").at("error").get<double>(), 0.1, 1e-12);
  EXPECT_DOUBLE_EQ(c.at("peak_memory").at("real_bytes").get<double>(), 60.0 * (1 << 30));
  const CliRun t = trainsim("compare " + s + " " + r);
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("peak memory per GPU: sim 66.000 GiB, real 60.000 GiB, error +10.0 %"),
            std::string::npos)
      << t.out;
  // Without a measurement there is no memory comparison (and no error).
  real.erase("memory_measured");
  const std::string r2 = write("real-nomem.json", real);
  const CliRun n = trainsim("compare " + s + " " + r2 + " --format json");
  ASSERT_EQ(n.code, 0) << n.err;
  EXPECT_FALSE(json::parse(n.out).contains("peak_memory"));
  // A measured peak that is not a number names the field.
  real["memory_measured"] = {{"peak_bytes", "lots"}};
  const std::string r3 = write("real-badmem.json", real);
  const CliRun b = trainsim("compare " + s + " " + r3);
  EXPECT_EQ(b.code, 2);
  EXPECT_NE(b.err.find("memory_measured.peak_bytes"), std::string::npos) << b.err;
}

// An analytic-fidelity document has no task_kinds: the comparison says so and keeps the rest.
TEST(CompareCli, WithoutTaskKindsComparesTheRest) {
  json analytic = sim_doc();
  analytic.erase("task_kinds");
  const std::string sim = write("analytic.json", analytic), real = write("real.json", real_doc());
  const CliRun r = trainsim("compare " + sim + " " + real + " --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_TRUE(j.at("op_kinds").empty());
  EXPECT_TRUE(j.at("summary").at("op_kind_weighted_abs_error").is_null());
  EXPECT_NE(j.at("notes").at(0).get<std::string>().find("no `task_kinds`"), std::string::npos);
  EXPECT_NEAR(j.at("iteration_time").at("error").get<double>(), 0.2, 1e-12);
}

// execute runs one fused loss kernel per pass; a simulation that prices another loss
// implementation (framework.cross_entropy) says so in the comparison, one pricing TE's does not.
TEST(CompareCli, NamesALossOtherThanTheExecutors) {
  json sim = sim_doc();
  sim["config"]["framework.cross_entropy"] = "unfused";
  const std::string s = write("sim-unfused-loss.json", sim), r = write("real.json", real_doc());
  const CliRun j = trainsim("compare " + s + " " + r + " --format json");
  ASSERT_EQ(j.code, 0) << j.err;
  const json c = json::parse(j.out);
  ASSERT_TRUE(c.contains("notes")) << j.out;
  EXPECT_NE(c.at("notes").at(0).get<std::string>().find("framework.cross_entropy unfused"),
            std::string::npos);
  const CliRun t = trainsim("compare " + s + " " + r);
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("note: the loss"), std::string::npos) << t.out;
  sim["config"]["framework.cross_entropy"] = "te";
  const std::string te = write("sim-te-loss.json", sim);
  const CliRun n = trainsim("compare " + te + " " + r + " --format json");
  ASSERT_EQ(n.code, 0) << n.err;
  EXPECT_FALSE(json::parse(n.out).contains("notes")) << n.out;
}

// The scenario check never skips: a document without `gpus` or `config` cannot be checked and
// is refused (a 64-GPU Llama record stripped of both compared against a tiny GPT, exit 0 with
// -93 %); a key on one side only is a difference; the optimization levers and the GPU make the
// Program too (tp_overlap off halves the TP collectives: +648 % compared as an error).
TEST(CompareCli, MissingOrDifferentSettingsAreRefused) {
  const std::string sim = write("set-sim.json", sim_doc());
  auto refused = [&](const json& real, const std::string& name, const std::string& want) {
    const std::string path = write(name, real);
    const CliRun r = trainsim("compare " + sim + " " + path);
    EXPECT_EQ(r.code, 2) << name << "\n" << r.out;
    EXPECT_NE(r.err.find(want), std::string::npos) << name << "\n" << r.err;
  };
  json j = real_doc();
  j.erase("gpus");
  j.erase("config");
  refused(j, "no-gpus.json", "`gpus`");
  j = real_doc();
  j.erase("config");
  refused(j, "no-config.json", "`config`");
  j = real_doc();
  j["config"].erase("model.layers");
  refused(j, "one-side.json", "`config.model.layers`: `config.model.layers` is missing here");
  j = real_doc();
  j["config"]["training.micro_batch"] = "2";
  refused(j, "extra-key.json", "`config.training.micro_batch`");
  // A hand-edited number where trainsim writes a string: said as such, not as "1 but \"1\"".
  j = real_doc();
  j["config"]["model.layers"] = std::stoi(sim_doc()["config"]["model.layers"].get<std::string>());
  refused(j, "number.json", "not a string as trainsim writes every config value");
  j = real_doc();
  j["config"]["optimizations.tp_overlap"] = "false";
  json s2 = sim_doc();
  s2["config"]["optimizations.tp_overlap"] = "true";
  const std::string sim2 = write("set-sim2.json", s2);
  const std::string path = write("tp-overlap.json", j);
  CliRun r = trainsim("compare " + sim2 + " " + path);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find(path + ": `config.optimizations.tp_overlap`"), std::string::npos) << r.err;
  s2 = sim_doc();
  s2["config"]["cluster.gpu"] = "h100-sxm";
  j = real_doc();
  j["config"]["cluster.gpu"] = "h200-sxm";
  r = trainsim("compare " + write("gpu-sim.json", s2) + " " + write("gpu-real.json", j));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("`config.cluster.gpu`"), std::string::npos) << r.err;
  // What may differ: the fidelity, the calibration, the framework's kernels.
  s2 = sim_doc();
  s2["config"]["framework.attention_kernel"] = "flash2";
  s2["config"]["calibration.profile"] = "datasheet";
  j = real_doc();
  j["config"]["framework.attention_kernel"] = "cudnn";
  r = trainsim("compare " + write("fw-sim.json", s2) + " " + write("fw-real.json", j));
  EXPECT_EQ(r.code, 0) << r.err;
}

// Each field of a result document is what it says: a whole count, a known category and
// fidelity, a positive peak memory and iteration; a measured record without task kinds is named
// as such (the note blamed the analytic fidelity).
TEST(CompareCli, MalformedFieldsAreRefused) {
  const std::string sim = write("mal-sim.json", sim_doc());
  auto refused = [&](const json& real, const std::string& name, const std::string& want) {
    const std::string path = write(name, real);
    const CliRun r = trainsim("compare " + sim + " " + path);
    EXPECT_EQ(r.code, 2) << name << "\n" << r.out;
    EXPECT_NE(r.err.find(path + ": " + want), std::string::npos) << name << "\n" << r.err;
  };
  json j = real_doc();
  j["task_kinds"][0]["count"] = 2.5;
  refused(j, "count.json", "`task_kinds[0].count`: `task_kinds[0].count` is 2.5, not a whole");
  j = real_doc();
  j["task_kinds"][0]["category"] = "banana";
  refused(j, "category.json", "`task_kinds[0].category`");
  j = real_doc();
  j.erase("fidelity");
  refused(j, "no-fidelity.json", "`fidelity`: missing");
  j = real_doc();
  j["fidelity"] = "banana";
  refused(j, "banana.json", "`fidelity`: `fidelity` is \"banana\"");
  j = real_doc();
  j["memory_measured"] = {{"peak_bytes", 0}};
  refused(j, "peak0.json", "`memory_measured.peak_bytes`: `memory_measured.peak_bytes` is 0");
  j = real_doc();
  j["iteration_time_s"] = 0;
  refused(j, "iter0.json", "`iteration_time_s`: `iteration_time_s` is 0: an iteration takes time");

  j = real_doc();
  j.erase("task_kinds");
  const std::string bare = write("no-kinds-real.json", j);
  const CliRun r = trainsim("compare " + sim + " " + bare);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(bare + " has no `task_kinds` (the measured record lacks them"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("analytic"), std::string::npos) << r.out;
}

// The README's flow on one GPU: execute's pipeline bubble there is the residue of a
// difference of sums (1.4e-20 s with the fake backend), which compare refused as below 1e-15 s;
// such a time reads as 0. A time above the bound is still refused, naming the field.
TEST(CompareCli, OneGpuExecuteRecordCompares) {
  const std::string yaml = temp_path("one-gpu.yaml");
  std::ofstream(yaml) << "model: {preset: gpt3-125m, layers: 2}\n"
                         "cluster: {preset: dgx-h100-superpod, gpus: 1}\n"
                         "parallel: {tp: 1, pp: 1, dp: 1}\n"
                         "training: {global_batch: 2, micro_batch: 1}\n";
  const std::string sim = temp_path("one-gpu-sim.json"), real = temp_path("one-gpu-real.json");
  ASSERT_EQ(trainsim("run " + yaml + " --fidelity schedule --format json -o " + sim).code, 0);
  const CliRun e = trainsim("execute " + yaml + " --iterations 3 --warmup 1 --out " + real +
                            " --backend fake");
  ASSERT_EQ(e.code, 0) << e.err;
  const CliRun r = trainsim("compare " + sim + " " + real + " --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  json tiny = real_doc();
  tiny["breakdown"]["pipeline_bubble_s"] = 1.3552527156068805e-20;
  const std::string residue = write("residue.json", tiny);
  const CliRun t = trainsim("compare " + write("residue-sim.json", sim_doc()) + " " + residue +
                            " --format json");
  ASSERT_EQ(t.code, 0) << t.err;
  const json out = json::parse(t.out);
  const json* bubble = find(out.at("breakdown"), "key", "pipeline_bubble_s");
  ASSERT_NE(bubble, nullptr);
  EXPECT_EQ(bubble->at("real_s").get<double>(), 0.0);
  tiny["breakdown"]["pipeline_bubble_s"] = 2e9;
  const CliRun big = trainsim("compare " + write("residue-sim.json", sim_doc()) + " " +
                              write("big.json", tiny));
  EXPECT_EQ(big.code, 2);
  EXPECT_NE(big.err.find("`breakdown.pipeline_bubble_s`"), std::string::npos) << big.err;
}

TEST(CompareCli, BadInputNamesFileAndField) {
  const std::string sim = write("sim.json", sim_doc());
  json no_iter = real_doc();
  no_iter.erase("iteration_time_s");
  const std::string a = write("no_iter.json", no_iter);
  CliRun r = trainsim("compare " + sim + " " + a);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(a + ": `iteration_time_s`"), std::string::npos) << r.err;

  json bad_kind = real_doc();
  bad_kind["task_kinds"][1]["total_s"] = "slow";
  const std::string b = write("bad_kind.json", bad_kind);
  r = trainsim("compare " + sim + " " + b);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(b + ": `task_kinds[1].total_s`"), std::string::npos) << r.err;

  json other_tp = real_doc();
  other_tp["config"]["parallel.tp"] = "4";
  const std::string c = write("other_tp.json", other_tp);
  r = trainsim("compare " + sim + " " + c);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(c + ": `config.parallel.tp`"), std::string::npos) << r.err;

  const std::string d = temp_path("not_json.json");
  std::ofstream(d) << "iteration_time_s: 1\n";
  r = trainsim("compare " + sim + " " + d);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(d + ": not valid JSON"), std::string::npos) << r.err;

  // A key given twice: the parser kept the last silently (0.5 s compared, 0.25 s written
  // first); refused by name, as a profile's is.
  std::string twice = real_doc().dump();
  twice.insert(1, "\"iteration_time_s\": 0.25, ");
  const std::string e = temp_path("twice.json");
  std::ofstream(e) << twice;
  r = trainsim("compare " + sim + " " + e);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find(e + ": `iteration_time_s`: given twice in one object"), std::string::npos)
      << r.err;

  r = trainsim("compare " + sim + " /nonexistent/real.json");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("/nonexistent/real.json"), std::string::npos) << r.err;
}

}  // namespace
