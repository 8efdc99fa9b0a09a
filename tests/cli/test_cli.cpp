// The real `trainsim` executable, started as a process: outputs parsed back, exit codes checked.
// Exit codes (DESIGN.md §3): 0 ok, 2 input/usage, 3 infeasible configuration, 4 runtime.
#include <gtest/gtest.h>

#include "sim/core/limits.h"
#include "tests/support/cli_runner.h"
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace {

using trainsim::testing::CliRun;
using trainsim::testing::slurp;
using trainsim::testing::temp_path;
using trainsim::testing::trainsim;

std::string write_yaml(const std::string& name, const std::string& text) {
  const std::string path = temp_path(std::to_string(::getpid()) + "_" + name);
  std::ofstream(path) << text;
  return path;
}

bool has(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

const char* kScenario = "scenarios/megascale-175b-12288.yaml";

// The default scenario as JSON: every key of DESIGN.md §5, MFU strictly inside (0, 1), and a
// breakdown that adds up to the iteration time.
TEST(Cli, RunJsonHasTheDesignKeys) {
  const CliRun r = trainsim(std::string("run ") + kScenario + " --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* k : {"iteration_time_s", "tokens_per_s", "mfu", "hfu", "tflops_per_gpu",
                        "trainsim_version", "model_version"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_GT(j["mfu"].get<double>(), 0.0);
  EXPECT_LT(j["mfu"].get<double>(), 1.0);
  EXPECT_GT(j["memory"]["peak_bytes_per_gpu"].get<double>(), 0.0);
  EXPECT_EQ(j["calibration"]["profile"], "datasheet-a100-80gb");
  EXPECT_EQ(j["calibration"]["version"], "7");
  for (const char* k : {"max_link_utilization", "mean_link_utilization", "ecmp_imbalance"}) {
    EXPECT_TRUE(j["network"].contains(k)) << k;
  }
  const auto& b = j["breakdown"];
  double sum = b["compute_s"].get<double>() + b["pipeline_bubble_s"].get<double>() +
               b["optimizer_s"].get<double>() + b["data_loading_s"].get<double>() +
               b["gpu_variation_s"].get<double>() + b["global_sync_s"].get<double>();
  for (const char* d : {"tp", "cp", "ep", "pp", "dp"}) sum += b["exposed_comm_s"][d].get<double>();
  EXPECT_NEAR(sum, j["iteration_time_s"].get<double>(), 1e-9);
  EXPECT_EQ(j["config"]["parallel.dp"], "192");
  EXPECT_EQ(j["gpus"], 12288);
}

TEST(Cli, RunTextShowsTheBreakdown) {
  const CliRun r = trainsim(std::string("run ") + kScenario);
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* s : {"MFU", "where the time goes", "pipeline bubble", "exposed DP communication",
                        "memory per GPU", "datasheet-a100-80gb"}) {
    EXPECT_TRUE(has(r.out, s)) << s;
  }
}

// The built-in default is the same scenario as the file, and runs are byte-identical.
TEST(Cli, BuiltinDefaultAndDeterminism) {
  const CliRun a = trainsim("run --format json");
  const CliRun b = trainsim(std::string("run ") + kScenario + " --format json");
  const CliRun c = trainsim(std::string("run ") + kScenario + " --format json");
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(b.out, c.out);
}

TEST(Cli, SetOverridesChangeTheResult) {
  const CliRun a = trainsim(std::string("run ") + kScenario + " --format json");
  const CliRun b = trainsim(std::string("run ") + kScenario +
                         " --format json --set optimizations.dp_overlap=false");
  ASSERT_EQ(b.code, 0) << b.err;
  const auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  EXPECT_GT(jb["breakdown"]["exposed_comm_s"]["dp"].get<double>(),
            ja["breakdown"]["exposed_comm_s"]["dp"].get<double>());
}

// The Triton attention kernel on a profile that rates it (A100, the default scenario's) runs
// slower than cuDNN's and says nothing; on one that does not (B300) the run says so in its notes.
TEST(Cli, UnratedTritonKernelIsNoted) {
  const std::string base = std::string("run ") + kScenario +
                           " --format json --set optimizations.efficient_operators=true";
  const auto json_of = [](const CliRun& r) {
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  };
  const auto noted = [](const nlohmann::json& j) {
    for (const auto& n : j["notes"]) {
      if (has(n.get<std::string>(), "attention kernel triton")) return true;
    }
    return false;
  };
  const auto triton = json_of(trainsim(base + " --set framework.attention_kernel=triton"));
  const auto cudnn = json_of(trainsim(base + " --set framework.attention_kernel=cudnn"));
  EXPECT_GT(triton["iteration_time_s"].get<double>(), cudnn["iteration_time_s"].get<double>());
  EXPECT_FALSE(noted(triton));
  const std::string b300 = " --set cluster.preset=dgx-b300-superpod";
  const auto unrated = json_of(trainsim(base + b300 + " --set framework.attention_kernel=triton"));
  EXPECT_TRUE(noted(unrated)) << unrated["notes"];
  EXPECT_FALSE(noted(json_of(trainsim(base + b300 + " --set framework.attention_kernel=cudnn"))));
}

// Activation offloading as Megatron-Core allows it: Llama 3 70B with Megatron FSDP on 64 GB200
// fits only with 40 layers' activations in host memory (the NeMo recipe's setting); pipeline
// parallelism, recompute or every layer offloaded are refused naming the key; where the copies
// outrun compute (8B on A100, PCIe Gen4) both fidelities charge the same stall.
TEST(Cli, ActivationOffloadingAsMegatronAllowsIt) {
  const std::string gb200 =
      std::string("run ") + kScenario +
      " --format json --set cluster.preset=dgx-gb200-nvl72 --set cluster.gpus=64"
      " --set model.preset=llama3-70b --set parallel.tp=1 --set parallel.pp=1 --set parallel.vpp=1"
      " --set parallel.zero=3 --set training.micro_batch=2 --set training.global_batch=256"
      " --set training.precision=fp8 --set training.fp8_recipe=current"
      " --set framework.preset=nemo-2025 --set training.recompute=none";
  const CliRun without = trainsim(gb200);
  EXPECT_EQ(without.code, 3) << without.err;
  EXPECT_TRUE(has(without.err, "does not fit")) << without.err;
  const CliRun with = trainsim(gb200 + " --set training.cpu_offload_layers=40");
  ASSERT_EQ(with.code, 0) << with.err;
  const auto j = nlohmann::json::parse(with.out);
  EXPECT_LE(j["memory"]["peak_bytes_per_gpu"].get<double>(),
            j["memory"]["capacity_bytes"].get<double>());
  EXPECT_GT(j["memory"]["host_offload_bytes"].get<double>(), 100e9);  // 40 layers of 3.6 GB
  // The shipped example is this run; 70 layers (254 GB) overflow the GPU's 240 GB of the Grace's
  // memory: refused (exit 3), naming the key.
  const CliRun example =
      trainsim("run scenarios/examples/llama3-70b-fp8-64xgb200-offload.yaml --format json");
  ASSERT_EQ(example.code, 0) << example.err;
  EXPECT_EQ(nlohmann::json::parse(example.out)["iteration_time_s"], j["iteration_time_s"]);
  // Too few layers offloaded: the advice is the lever that remains (more offloading), not the
  // pipeline parallelism or recompute that offloading rules out.
  const CliRun few = trainsim(gb200 + " --set training.cpu_offload_layers=5");
  EXPECT_EQ(few.code, 3) << few.err;
  EXPECT_TRUE(has(few.err, "offload more layers")) << few.err;
  EXPECT_FALSE(has(few.err, "try more pipeline")) << few.err;
  const CliRun host = trainsim(gb200 + " --set training.cpu_offload_layers=70");
  EXPECT_EQ(host.code, 3) << host.err;
  EXPECT_TRUE(has(host.err, "do not fit in host memory")) << host.err;
  EXPECT_TRUE(has(host.err, "training.cpu_offload_layers")) << host.err;
  for (const auto& [set, says] : std::vector<std::pair<std::string, std::string>>{
           {"training.cpu_offload_layers=40 --set parallel.pp=2", "parallel.pp 1"},
           {"training.cpu_offload_layers=40 --set training.recompute=selective",
            "does not work with activation recompute"},
           {"training.cpu_offload_layers=80", "fewer than the model's layers"}}) {
    const CliRun bad = trainsim(gb200 + " --set " + set);
    EXPECT_EQ(bad.code, 2) << set << bad.err;
    EXPECT_TRUE(has(bad.err, "training.cpu_offload_layers")) << bad.err;
    EXPECT_TRUE(has(bad.err, says)) << bad.err;
  }
  const std::string a100 =
      std::string("run ") + kScenario +
      " --format json --set cluster.preset=selene-a100 --set cluster.gpus=8"
      " --set model.preset=llama3-8b --set parallel.tp=1 --set parallel.pp=1 --set parallel.vpp=1"
      " --set parallel.zero=3 --set training.micro_batch=1 --set training.global_batch=16"
      " --set training.recompute=none --set training.cpu_offload_layers=28";
  const CliRun an = trainsim(a100);
  const CliRun sc = trainsim(a100 + " --fidelity schedule");
  ASSERT_EQ(an.code, 0) << an.err;
  ASSERT_EQ(sc.code, 0) << sc.err;
  const auto ja = nlohmann::json::parse(an.out), js = nlohmann::json::parse(sc.out);
  const CliRun plain = trainsim(a100 + " --set training.cpu_offload_layers=0");
  ASSERT_EQ(plain.code, 0) << plain.err;
  const double base = nlohmann::json::parse(plain.out)["breakdown"]["compute_s"].get<double>();
  const double stalled = ja["breakdown"]["compute_s"].get<double>();
  EXPECT_GT(stalled, base * 1.05);  // the copies (1 layer: 0.25 GB at 32 GB/s) outrun compute
  EXPECT_NEAR(js["breakdown"]["compute_s"].get<double>(), stalled, 1e-9 * stalled);
}

TEST(Cli, MisspeltKeyIsAnInputError) {
  const std::string path = write_yaml("misspelt.yaml",
                                      "model:\n  preset: megascale-175b\npipline_parallel: 8\n");
  const CliRun r = trainsim("run " + path);
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, path + ":3")) << r.err;
  EXPECT_TRUE(has(r.err, "pipline_parallel")) << r.err;
  EXPECT_TRUE(has(r.err, "did you mean `parallel.pp`?")) << r.err;
}

TEST(Cli, WrongTypeIsAnInputError) {
  const std::string path = write_yaml(
      "wrongtype.yaml", "model:\n  preset: megascale-175b\nparallel:\n  tp: eight\n");
  const CliRun r = trainsim("run " + path);
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, path + ":4")) << r.err;
  EXPECT_TRUE(has(r.err, "parallel.tp")) << r.err;
}

TEST(Cli, TpNotDividingHeadsIsInfeasible) {
  const CliRun r = trainsim(std::string("run ") + kScenario + " --set parallel.tp=3");
  EXPECT_EQ(r.code, 3);
  EXPECT_TRUE(has(r.err, "parallel.tp")) << r.err;
  EXPECT_TRUE(has(r.err, "does not divide the 128 attention heads")) << r.err;
  // The value came from --set, so the message names --set, not the scenario file (issue 15).
  EXPECT_TRUE(has(r.err, "--set: `parallel.tp`")) << r.err;
}

TEST(Cli, GpuCountMismatchIsInfeasible) {
  const CliRun r = trainsim(std::string("run ") + kScenario + " --set parallel.dp=190");
  EXPECT_EQ(r.code, 3);
  EXPECT_TRUE(has(r.err, "12288 GPUs is not TP×PP×DP×CP = 8×8×190×1 = 12160")) << r.err;
}

TEST(Cli, ConfigThatDoesNotFitIsInfeasible) {
  const CliRun r = trainsim(std::string("run ") + kScenario +
                         " --set parallel.pp=1 --set parallel.vpp=1");
  EXPECT_EQ(r.code, 3);
  EXPECT_TRUE(has(r.err, "does not fit in memory: needs")) << r.err;
  EXPECT_TRUE(has(r.err, "GiB of 80.0 GiB per GPU")) << r.err;
}

TEST(Cli, UsageErrors) {
  EXPECT_EQ(trainsim("run --no-such-flag").code, 2);
  EXPECT_EQ(trainsim("frobnicate").code, 2);
  const CliRun bad_set = trainsim(std::string("run ") + kScenario + " --set parallel.tp");
  EXPECT_EQ(bad_set.code, 2);
  EXPECT_TRUE(has(bad_set.err, "--set")) << bad_set.err;
  const CliRun missing = trainsim("run /nonexistent/scenario.yaml");
  EXPECT_EQ(missing.code, 2);
  EXPECT_TRUE(has(missing.err, "/nonexistent/scenario.yaml")) << missing.err;
  const CliRun packet = trainsim(std::string("run ") + kScenario + " --fidelity packet");
  EXPECT_EQ(packet.code, 2);
  // It names the flag the user wrote (it said `--set`, which --fidelity is applied as).
  EXPECT_TRUE(has(packet.err, "--fidelity: `simulation.fidelity`")) << packet.err;
  // Spraying at flow fidelity: refused, naming the key (a flow keeps one path; the packet
  // level sprays).
  const CliRun spray = trainsim(std::string("run ") + kScenario +
                                " --fidelity flow --set network.routing.mode=spray");
  EXPECT_EQ(spray.code, 2);
  EXPECT_TRUE(has(spray.err, "network.routing.mode")) << spray.err;
  EXPECT_TRUE(has(spray.err, "packet fidelity sprays packet by packet")) << spray.err;
  // A straggler needs an event-driven fidelity; a trace too.
  const CliRun straggler = trainsim(std::string("run ") + kScenario +
                                    " --set simulation.straggler_rank=3 --set simulation.straggler_factor=2");
  EXPECT_EQ(straggler.code, 2);
  EXPECT_TRUE(has(straggler.err, "event-driven")) << straggler.err;
  const CliRun trace = trainsim(std::string("run ") + kScenario + " --trace /tmp/x.json");
  EXPECT_EQ(trace.code, 2);
  EXPECT_TRUE(has(trace.err, "--trace")) << trace.err;
}

TEST(Cli, CorruptCalibrationProfileNamesFileAndField) {
  const std::string profile = write_yaml("corrupt_profile.json", "{\"format_version\": 1, \"name\": 3}");
  const CliRun r = trainsim(std::string("run ") + kScenario + " --set calibration.profile=" + profile);
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, profile)) << r.err;
  EXPECT_TRUE(has(r.err, "`name`")) << r.err;
}

// validate on the project's copy of the published runs: the table, the summary, and JSON rows.
TEST(Cli, ValidatePublishedRuns) {
  const CliRun t = trainsim("validate scenarios/validation/published-runs.csv");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_TRUE(has(t.out, "median |err|")) << t.out;
  EXPECT_TRUE(has(t.out, "sc21-1008b")) << t.out;
  EXPECT_TRUE(has(t.out, "MAPE")) << t.out;
  const CliRun j = trainsim("validate scenarios/validation/published-runs.csv --format json");
  ASSERT_EQ(j.code, 0) << j.err;
  const auto doc = nlohmann::json::parse(j.out);
  ASSERT_EQ(doc["rows"].size(), 31u);
  for (const auto& row : doc["rows"]) {
    ASSERT_FALSE(row.contains("error_message")) << row.dump();
    for (const char* k : {"iter_s", "tokens_s", "mfu", "tflops_gpu", "hfu"}) {
      EXPECT_TRUE(row["predicted"].contains(k)) << k;
    }
    EXPECT_TRUE(row.contains("assumed"));
    EXPECT_TRUE(row["error"].contains("mfu_pts"));
  }
  for (const char* k : {"median_abs_mfu_err_pts", "max_abs_mfu_err_pts", "iter_time_mape"}) {
    EXPECT_TRUE(doc["summary"].contains(k)) << k;
  }
  EXPECT_GE(doc["summary"]["max_abs_mfu_err_pts"].get<double>(),
            doc["summary"]["median_abs_mfu_err_pts"].get<double>());
}

// Several runs files at once: each file's own summary is what `validate FILE` gives alone, and
// the summary of every file is that of their rows together (rows add up; the max is the largest
// of the files' maxima; the union's median lies between the files' medians).
// --group-by: the rows grouped by cells (and ranges of a numeric column), each group's signed
// MFU error its own rows' median / min / max. The GB200/GB300 file by hand: gb200 at 8 and 64
// GPUs (five rows) and at 128 and 256 (four), gb300 at 8 and 64 (three) and at 256 (three).
TEST(Cli, ValidateGroupsRowsByColumns) {
  const std::string b = "scenarios/validation/nemo-2025-gb200-runs.csv";
  const CliRun j = trainsim("validate " + b + " --format json --group-by gpu,gpus:64");
  ASSERT_EQ(j.code, 0) << j.err;
  const auto doc = nlohmann::json::parse(j.out);
  std::map<std::string, double> err;
  for (const auto& r : doc["rows"]) err[r["id"]] = r["error"]["mfu_pts"].get<double>();
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> expect = {
      {{"gb200", "<=64"},
       {"nemo-gb200-llama3-8b", "nemo2511-gb200-llama3-8b", "nemo-gb200-llama3-70b",
        "nemo2511-gb200-llama3-70b", "nemo260401-gb200-llama3-70b"}},
      {{"gb200", ">64"},
       {"nemo2511-gb200-llama31-405b", "nemo-gb200-llama31-405b", "nemo260401-gb200-llama31-405b",
        "nemo2606-gb200-llama31-405b"}},
      {{"gb300", "<=64"},
       {"nemo2511-gb300-llama3-8b", "nemo2511-gb300-llama3-70b", "nemo260401-gb300-llama3-70b"}},
      {{"gb300", ">64"},
       {"nemo2511-gb300-llama31-405b", "nemo260401-gb300-llama31-405b",
        "nemo2606-gb300-llama31-405b"}}};
  ASSERT_EQ(doc["groups"].size(), expect.size()) << doc["groups"];
  for (std::size_t i = 0; i < expect.size(); ++i) {
    const auto& g = doc["groups"][i];
    const auto& [key, ids] = expect[i];
    EXPECT_EQ(g["key"]["gpu"], key[0]);
    EXPECT_EQ(g["key"]["gpus"], key[1]);
    EXPECT_EQ(g["rows"].get<std::size_t>(), ids.size());
    std::vector<double> e;
    for (const auto& id : ids) e.push_back(err.at(id));
    std::sort(e.begin(), e.end());
    const std::size_t n = e.size();
    EXPECT_DOUBLE_EQ(g["min_mfu_err_pts"].get<double>(), e.front());
    EXPECT_DOUBLE_EQ(g["max_mfu_err_pts"].get<double>(), e.back());
    EXPECT_DOUBLE_EQ(g["median_mfu_err_pts"].get<double>(),
                     n % 2 ? e[n / 2] : 0.5 * (e[n / 2 - 1] + e[n / 2]));
  }
  // Over several files the groups cover every row; the text prints one line per group.
  const std::string a = "scenarios/validation/korthikanti-2022-runs.csv";
  const CliRun t = trainsim("validate " + a + " " + b + " --group-by source");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_TRUE(has(t.out, "groups (MFU error in points")) << t.out;
  const CliRun js = trainsim("validate " + a + " " + b + " --format json --group-by source");
  ASSERT_EQ(js.code, 0) << js.err;
  int rows = 0;
  const auto both = nlohmann::json::parse(js.out);
  for (const auto& g : both["groups"]) rows += g["rows"].get<int>();
  EXPECT_EQ(rows, 4 + 15);
  // Bad specs: exit 2, naming the option and the reason, before any row is simulated.
  for (const auto& [spec, says] : std::vector<std::pair<std::string, std::string>>{
           {"gpuz", "did you mean `gpu`"},
           {"seq:8192:2048", "not a number above the one before it"},
           {"gpu,gpu", "given twice"},
           {"gpu:5", "is not a number to cut"}}) {
    const CliRun bad = trainsim("validate " + b + " --group-by " + spec);
    EXPECT_EQ(bad.code, 2) << spec;
    EXPECT_TRUE(has(bad.err, says)) << spec << ": " << bad.err;
  }
}

TEST(Cli, ValidateSeveralFilesSummarisesEachAndAll) {
  const std::string a = "scenarios/validation/korthikanti-2022-runs.csv";
  const std::string b = "scenarios/validation/nemo-2025-gb200-runs.csv";
  const CliRun j = trainsim("validate " + a + " " + b + " --format json");
  ASSERT_EQ(j.code, 0) << j.err;
  const auto doc = nlohmann::json::parse(j.out);
  ASSERT_EQ(doc["files"].size(), 2u);
  double max_of_files = 0, lo = 1e9, hi = 0;
  int rows = 0;
  for (std::size_t i = 0; i < 2; ++i) {
    const auto& f = doc["files"][i];
    EXPECT_EQ(f["file"], i == 0 ? a : b);
    const CliRun alone = trainsim("validate " + f["file"].get<std::string>() + " --format json");
    ASSERT_EQ(alone.code, 0) << alone.err;
    const auto one = nlohmann::json::parse(alone.out);
    EXPECT_EQ(f["summary"], one["summary"]);
    EXPECT_EQ(f["rows"], one["rows"]);
    rows += f["summary"]["rows"].get<int>();
    max_of_files = std::max(max_of_files, f["summary"]["max_abs_mfu_err_pts"].get<double>());
    lo = std::min(lo, f["summary"]["median_abs_mfu_err_pts"].get<double>());
    hi = std::max(hi, f["summary"]["median_abs_mfu_err_pts"].get<double>());
  }
  EXPECT_EQ(doc["summary"]["rows"].get<int>(), rows);
  EXPECT_EQ(doc["summary"]["rows"].get<int>(), 4 + 15);
  EXPECT_DOUBLE_EQ(doc["summary"]["max_abs_mfu_err_pts"].get<double>(), max_of_files);
  EXPECT_GE(doc["summary"]["median_abs_mfu_err_pts"].get<double>(), lo);
  EXPECT_LE(doc["summary"]["median_abs_mfu_err_pts"].get<double>(), hi);
  // Text: each file's table under its name, then one line per file and one for all of them.
  const CliRun t = trainsim("validate " + a + " " + b);
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_TRUE(has(t.out, "== " + a + " (4 rows)")) << t.out;
  EXPECT_TRUE(has(t.out, "files at a glance")) << t.out;
  EXPECT_TRUE(has(t.out, "every file")) << t.out;
  // Leave-one-source-out and the HTML report take one file: refused, naming the option.
  const CliRun cv = trainsim("validate " + a + " " + b + " --cross-validate source");
  EXPECT_EQ(cv.code, 2);
  EXPECT_TRUE(has(cv.err, "--cross-validate")) << cv.err;
  EXPECT_TRUE(has(cv.err, "one runs file")) << cv.err;
  // A file none of whose rows runs is refused by name, as alone.
  const CliRun missing = trainsim("validate " + a + " no-such-runs.csv");
  EXPECT_EQ(missing.code, 2) << missing.err;
  EXPECT_TRUE(has(missing.err, "no-such-runs.csv")) << missing.err;
}

// `validate --scenarios DIR` writes each simulated row as DIR/<id>.yaml: running that file gives
// the row's predicted iteration to the bit, whatever the searches chose (the MegaScale rows'
// micro-batch and recompute, Llama 3's interleaving and uneven end stages, TorchTitan's
// selective-op); the JSON rows carry the same keys (`set`) and where the time goes (`breakdown`,
// summing to the iteration).
TEST(Cli, ValidateWritesEachRowAsAScenario) {
  const std::string dir = temp_path("row-scenarios");
  const std::string files = "scenarios/validation/llama3-runs.csv "
                            "scenarios/validation/torchtitan-2024-runs.csv "
                            "scenarios/validation/published-runs.csv";
  const CliRun v = trainsim("validate " + files + " --format json --scenarios " + dir);
  ASSERT_EQ(v.code, 0) << v.err;
  const auto doc = nlohmann::json::parse(v.out);
  int checked = 0;
  for (const auto& f : doc["files"]) {
    for (const auto& row : f["rows"]) {
      const std::string id = row["id"];
      if (id != "llama3-405b-16384" && id != "tt-llama3-8b-selop" && id != "ms175-256-meg" &&
          id != "sc21-145.6b") {
        continue;
      }
      ++checked;
      const double iter = row["predicted"]["iter_s"].get<double>();
      const auto& b = row["breakdown"];
      double sum = b["compute_s"].get<double>() + b["pipeline_bubble_s"].get<double>() +
                   b["optimizer_s"].get<double>() + b["data_loading_s"].get<double>() +
                   b["gpu_variation_s"].get<double>() + b["global_sync_s"].get<double>();
      for (const auto& [dim, s] : b["exposed_comm_s"].items()) sum += s.get<double>();
      EXPECT_NEAR(sum, iter, 1e-9 * iter) << id;
      EXPECT_FALSE(row["set"].empty()) << id;
      const std::string yaml = slurp(dir + "/" + id + ".yaml");
      EXPECT_TRUE(has(yaml, "# Row `" + id + "`")) << yaml;
      const CliRun r = trainsim("run " + dir + "/" + id + ".yaml --format json");
      ASSERT_EQ(r.code, 0) << id << ": " << r.err;
      EXPECT_EQ(nlohmann::json::parse(r.out)["iteration_time_s"].get<double>(), iter) << id;
    }
  }
  EXPECT_EQ(checked, 4);
  // A folder that cannot be made (under a file) is refused, naming the option.
  const std::string file = temp_path("row-scenarios-file");
  std::ofstream(file) << "x";
  const CliRun bad = trainsim("validate scenarios/validation/llama3-runs.csv --scenarios " + file +
                              "/sub");
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_TRUE(has(bad.err, "--scenarios cannot create")) << bad.err;
  // Leave-one-source-out refits profile constants a scenario file cannot hold: refused.
  const CliRun cv = trainsim("validate scenarios/validation/llama3-runs.csv --cross-validate "
                             "source --scenarios " + dir);
  EXPECT_EQ(cv.code, 2) << cv.err;
  EXPECT_TRUE(has(cv.err, "--cross-validate")) << cv.err;
  std::filesystem::remove_all(dir);
  std::filesystem::remove(file);
}

TEST(Cli, ValidateRowThatCannotRunAndCorruptCsv) {
  const std::string header = slurp("scenarios/validation/published-runs.csv").substr(0, 
      slurp("scenarios/validation/published-runs.csv").find('\n') + 1);
  const std::string rows =
      header +
      "bad-tp,test,a100-80gb,fp16,selene-a100,20,24,2304,24,24,9216,2048,51200,5,1,,,1,1,1,48,0,"
      "full,megatron,,,,137,,,\n" +
      // A row that runs, so that the file is not refused as a whole (exit 3 when nothing runs).
      "ok,test,a100-80gb,fp16,selene-a100,32,24,2304,24,24,9216,2048,51200,1,1,32,,1,1,,512,0,"
      "full,megatron,,,,137,,megatron-lm-2021,megatron-recompute\n";
  const CliRun r = trainsim("validate " + write_yaml("runs.csv", rows) + " --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_TRUE(has(doc["rows"][0]["error_message"].get<std::string>(), "does not divide"));
  const std::string bad = header + "x,test,a100-80gb,fp16,,8,2,256,4,4,1024,128,1000,1,1,8,,1,1,"
                                   "1,8,0,full,megatron,fast,,,,,,\n";
  const std::string bad_path = write_yaml("bad_runs.csv", bad);
  const CliRun b = trainsim("validate " + bad_path);
  EXPECT_EQ(b.code, 2);
  EXPECT_TRUE(has(b.err, bad_path + ":2")) << b.err;
  EXPECT_TRUE(has(b.err, "iter_s")) << b.err;
  // No row runs: exit 3, and the message gives each row's reason (no table is printed).
  const CliRun none = trainsim("validate " + write_yaml("none_run.csv", header + rows.substr(
      header.size(), rows.find("\nok,") + 1 - header.size())));
  EXPECT_EQ(none.code, 3) << none.err;
  EXPECT_TRUE(has(none.err, "none of the 1 rows")) << none.err;
  EXPECT_TRUE(has(none.err, "bad-tp: ")) << none.err;
  EXPECT_TRUE(has(none.err, "does not divide")) << none.err;
}

// The fp8 recipe is a scenario key: printed with the precision, slower under current scaling
// (each cast reads its input once more for the amax), and a typo is refused naming the key.
TEST(Cli, Fp8RecipeIsPrintedAndPriced) {
  // The shipped FP8 example (NeMo's Llama 3 70B FP8-CS recipe) states current scaling.
  const std::string run = "run scenarios/examples/llama3-70b-fp8-64xh100.yaml";
  const CliRun text = trainsim(run);
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_TRUE(has(text.out, "; fp8 (current scaling); ")) << text.out;
  const CliRun cur = trainsim(run + " --format json");
  const CliRun del = trainsim(run + " --set training.fp8_recipe=delayed --format json");
  ASSERT_EQ(cur.code, 0) << cur.err;
  ASSERT_EQ(del.code, 0) << del.err;
  const auto jc = nlohmann::json::parse(cur.out), jd = nlohmann::json::parse(del.out);
  EXPECT_EQ(jc["config"]["training.fp8_recipe"], "current");
  EXPECT_EQ(jd["config"]["training.fp8_recipe"], "delayed");
  EXPECT_GT(jc["iteration_time_s"].get<double>(), jd["iteration_time_s"].get<double>());
  const CliRun bad = trainsim(run + " --set training.fp8_recipe=fast");
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(has(bad.err, "training.fp8_recipe")) << bad.err;
}

// Start-up: the MegaScale system creates communicators with a Redis-like store and ordered groups
// (seconds); the Megatron baseline with a TCPStore and a barrier per group (hours at 12,288 GPUs).
TEST(Cli, StartupCommunicatorInitialization) {
  const CliRun fast = trainsim(std::string("run ") + kScenario + " --format json");
  const CliRun slow = trainsim(std::string("run ") + kScenario +
                               " --format json --set optimizations.fast_comm_init=false");
  ASSERT_EQ(fast.code, 0) << fast.err;
  const auto jf = nlohmann::json::parse(fast.out), js = nlohmann::json::parse(slow.out);
  EXPECT_LT(jf["startup"]["comm_init_s"].get<double>(), 30.0);
  EXPECT_GT(js["startup"]["comm_init_s"].get<double>(), 3600.0);
  EXPECT_EQ(jf["startup"]["store"], "redis");
  // Iteration time does not depend on start-up.
  EXPECT_EQ(jf["iteration_time_s"], js["iteration_time_s"]);
}

// NCCL_ALGO/NCCL_PROTO-style keys and the congestion-control keys go through the schema.
TEST(Cli, CollectiveAndNetworkKeys) {
  const CliRun nvls = trainsim(std::string("run ") + kScenario + " --set collectives.algorithm=nvls");
  EXPECT_EQ(nvls.code, 2);
  EXPECT_TRUE(has(nvls.err, "NVLS")) << nvls.err;
  const CliRun tree = trainsim(std::string("run ") + kScenario +
                               " --format json --set collectives.algorithm=tree --set parallel.zero=0");
  ASSERT_EQ(tree.code, 0) << tree.err;
  const CliRun cc = trainsim(std::string("run ") + kScenario +
                             " --set network.congestion_control=dcqcm");
  EXPECT_EQ(cc.code, 2);
  EXPECT_TRUE(has(cc.err, "dcqcn")) << cc.err;
  const CliRun eff = trainsim(std::string("run ") + kScenario +
                              " --set network.dcqcn.contended_efficiency=1.5");
  EXPECT_EQ(eff.code, 2);
  EXPECT_TRUE(has(eff.err, "network.dcqcn.contended_efficiency")) << eff.err;
}

TEST(Cli, ExplainPresetsInfo) {
  const CliRun e = trainsim("explain parallel.pp");
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_TRUE(has(e.out, "parallel.pp"));
  const CliRun u = trainsim("explain parallel.ppp");
  EXPECT_EQ(u.code, 2);
  EXPECT_TRUE(has(u.err, "parallel.pp")) << u.err;
  const CliRun ej = trainsim("explain parallel --format json");
  ASSERT_EQ(ej.code, 0);
  EXPECT_GE(nlohmann::json::parse(ej.out).size(), 9u);
  // The bounds and aliases that the text form prints are in the JSON too (scripts/schema-doc.py
  // writes docs/scenario-schema.md from it): model.layers is 0..kMaxModelLayers (0: from the
  // preset), a rate's open bound is flagged exclusive, parallel.pp
  // has no upper bound, and Megatron's flag names are parallel.pp's aliases.
  const nlohmann::json layers = nlohmann::json::parse(trainsim("explain model.layers --format json").out);
  ASSERT_EQ(layers.size(), 1u);
  EXPECT_EQ(layers[0]["minimum"], 0.0);
  EXPECT_EQ(layers[0]["exclusive_minimum"], false);
  EXPECT_EQ(layers[0]["maximum"], static_cast<double>(trainsim::limits::kMaxModelLayers));
  const nlohmann::json rtt =
      nlohmann::json::parse(trainsim("explain network.swift.base_rtt --format json").out);
  EXPECT_EQ(rtt[0]["exclusive_minimum"], true);
  EXPECT_EQ(rtt[0]["exclusive_maximum"], false);
  for (const auto& k : nlohmann::json::parse(ej.out)) {
    if (k["key"] != "parallel.pp") continue;
    EXPECT_EQ(k["minimum"], 1.0);
    EXPECT_TRUE(k["maximum"].is_null());
    EXPECT_FALSE(k["aliases"].empty());
  }
  const CliRun p = trainsim("--list-presets");
  ASSERT_EQ(p.code, 0);
  for (const char* s : {"megascale-ampere", "selene-a100", "dgx-h100-superpod", "meta-h100-roce",
                        "h200-sxm", "a800", "llama3-405b", "megatron-1008b", "gpt3-175b"}) {
    EXPECT_TRUE(has(p.out, s)) << s;
  }
  const CliRun i = trainsim("info --format json");
  ASSERT_EQ(i.code, 0) << i.err;
  const nlohmann::json info = nlohmann::json::parse(i.out);
  EXPECT_TRUE(info.contains("cuda_compiled"));
  // The built-in profiles as a list with their GPU and version (it was one comma-joined string
  // of names).
  ASSERT_TRUE(info.at("builtin_profiles").is_array()) << i.out;
  bool h200 = false;
  for (const auto& p : info.at("builtin_profiles")) {
    EXPECT_FALSE(p.at("version").get<std::string>().empty()) << p.dump();
    h200 |= p.at("name") == "datasheet-h200-sxm" && p.at("gpu") == "h200-sxm";
  }
  EXPECT_TRUE(h200) << i.out;
}

// A scenario that does not set parallel.vpp inherits the built-in default's 6 (MegaScale's 175B
// layout); at PP 2 Llama 3 8B's 32 layers do not make 12 chunks. The refusal names the counts
// that do split them (32 / 2 = 16 layers a stage: 1, 2, 4, 8, 16) and `auto`.
TEST(Cli, AVppThatDoesNotSplitTheLayersNamesTheOnesThatDo) {
  const CliRun r = trainsim("run scenarios/examples/llama3-8b-64xh100.yaml --set parallel.pp=2");
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("parallel.vpp 1, 2, 4, 8, 16 split them"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("auto"), std::string::npos) << r.err;
}

// cluster.fabric.above_pod_oversubscription acts only above pods (cluster.fabric.pod_gpus):
// without them it changed nothing and said nothing; now a note says so, and with pods it is
// applied without one (the meta-h100-roce preset's 1:7 above 3,072-GPU pods).
TEST(Cli, AbovePodOversubscriptionWithoutPodsIsNoted) {
  const CliRun r = trainsim("run --set cluster.fabric.above_pod_oversubscription=2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("above_pod_oversubscription = 2 has no effect"), std::string::npos) << r.out;
  const CliRun meta = trainsim("run --set cluster.preset=meta-h100-roce --set cluster.gpus=6144");
  ASSERT_EQ(meta.code, 0) << meta.err;
  EXPECT_EQ(meta.out.find("has no effect"), std::string::npos) << meta.out;
}

}  // namespace

namespace {

// The seed is part of what a result depends on (jitter, flow hashing), so every format names it:
// JSON and CSV had it in `config`; the text header and the HTML report now say it too.
TEST(Cli, TextAndHtmlNameTheSeed) {
  const CliRun text = trainsim("run --set simulation.seed=7");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_TRUE(has(text.out.substr(0, text.out.find('\n')), "· seed 7")) << text.out;
  const std::string dir = temp_path("seed-report");
  const CliRun html = trainsim("run --set simulation.seed=7 --report " + dir);
  ASSERT_EQ(html.code, 0) << html.err;
  EXPECT_TRUE(has(slurp(dir + "/index.html"), "· seed 7 ·")) << dir;
}

// --report names a folder; an existing file there was found only after the whole run had been
// printed (exit 4). Refused when the command line is read, for every command that has it.
TEST(Cli, ReportOntoAnExistingFileIsRefusedBeforeRunning) {
  const std::string file = temp_path("report-is-a-file");
  std::ofstream(file) << "x";
  for (const std::string cmd : {"run", "sweep --vary training.micro_batch=1,2", "goodput --trials 2",
                                "validate scenarios/validation/korthikanti-2022-runs.csv"}) {
    const CliRun r = trainsim(cmd + " --report " + file);
    EXPECT_EQ(r.code, 2) << cmd << r.err;
    EXPECT_TRUE(has(r.err, "is a file: --report takes a folder")) << cmd << r.err;
    EXPECT_TRUE(r.out.empty()) << cmd << r.out;
  }
}

}  // namespace
