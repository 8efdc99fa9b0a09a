// `trainsim run --fidelity schedule|flow` through the real CLI: result JSON of the event-driven
// fidelities, the Chrome/Perfetto trace of a 64-GPU run parsed back, validation at schedule
// fidelity, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "tests/support/cli_runner.h"

namespace trainsim {
namespace {

using testing::CliRun;
using testing::slurp;
using testing::temp_path;
using testing::trainsim;

bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// Llama 3 8B on 64 H100s, reshaped to TP 2 · PP 2 · DP 16 so that every kind of stream shows.
const std::string k64 =
    "scenarios/examples/llama3-8b-64xh100.yaml --set parallel.pp=2 --set parallel.vpp=2 "
    "--set model.layers=8";

TEST(ProgramCli, TraceOf64GpusIsValidTraceEventJson) {
  const std::string trace = temp_path("trace64.json");
  const CliRun r = trainsim("run " + k64 + " --fidelity flow --format json --trace " + trace +
                            " --trace-ranks 0-3,30-33,60-63");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto result = nlohmann::json::parse(r.out);
  const double iter_us = result["iteration_time_s"].get<double>() * 1e6;
  const auto doc = nlohmann::json::parse(slurp(trace));
  ASSERT_TRUE(doc.contains("traceEvents"));
  EXPECT_EQ(doc["otherData"]["fidelity"], "flow");
  std::set<int> pids;
  std::set<std::string> threads, names, cats;
  std::size_t spans = 0;
  for (const auto& e : doc["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "M" && e["name"] == "process_name") pids.insert(e["pid"].get<int>());
    if (ph == "M" && e["name"] == "thread_name") threads.insert(e["args"]["name"].get<std::string>());
    if (ph != "X") continue;
    ++spans;
    names.insert(e["name"].get<std::string>());
    cats.insert(e["cat"].get<std::string>());
    const int pid = e["pid"].get<int>();
    EXPECT_GE(pid, 0);
    EXPECT_LT(pid, 64);
    EXPECT_GE(e["dur"].get<double>(), 0.0);
    EXPECT_LE(e["ts"].get<double>() + e["dur"].get<double>(), iter_us * (1 + 1e-9) + 1e-3);
  }
  EXPECT_EQ(pids, (std::set<int>{0, 1, 2, 3, 30, 31, 32, 33, 60, 61, 62, 63}));
  for (const char* s : {"compute", "tp", "dp", "pp-send-next", "pp-recv-prev", "pp-send-prev",
                        "pp-recv-next"}) {
    EXPECT_TRUE(threads.count(s)) << s;
  }
  for (const char* n : {"qkv fwd", "qkv dgrad", "qkv wgrad", "attention fwd", "attention bwd",
                        "mlp_down fwd", "logits fwd", "embedding fwd", "optimizer",
                        "all_gather tp", "reduce_scatter tp", "reduce_scatter dp", "send-next pp",
                        "recv-prev pp"}) {
    EXPECT_TRUE(names.count(n)) << n;
  }
  for (const char* c : {"compute", "tp", "dp", "pp", "optimizer"}) EXPECT_TRUE(cats.count(c)) << c;
  EXPECT_GT(spans, 12u * 100);
}

// The default trace ranks are the first rank of every stage, in the scenario's rank order: with
// Llama 3's (parallel.order tp-cp-pp-dp) stages are TP = 2 ranks apart, so ranks 0 and 2 (they
// were 0 and world / pp = 32, both stage 0, until 2026-12-06).
TEST(ProgramCli, DefaultTraceRanksFollowTheRankOrder) {
  const std::string trace = temp_path("trace-order.json");
  const CliRun r = trainsim("run " + k64 + " --set parallel.order=tp-cp-pp-dp --fidelity schedule " +
                            "--format json -o /dev/null --trace " + trace);
  ASSERT_EQ(r.code, 0) << r.err;
  std::map<int, std::string> names;
  const auto doc = nlohmann::json::parse(slurp(trace));
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") {
      names[e["pid"].get<int>()] = e["args"]["name"].get<std::string>();
    }
  }
  EXPECT_EQ(names, (std::map<int, std::string>{{0, "rank 0 (stage 0)"}, {2, "rank 2 (stage 1)"}}));
}

// A whole iteration at packet fidelity: the default 175B layout on 64 GPUs (TP 8 inside a server,
// 8 pipeline stages across servers, 8 micro-batches), every pipeline transfer as packets through
// the ports of the fabric. It agrees with the flow level within 0.1 % (1.50028 against 1.50007 s:
// propagation and store and forward), reports its fidelity, and a run above the packet work
// limit is refused by its key.
// The closed form's pipeline fill and drain run through the other stages (analytic-19): with
// stage slots t_i an iteration is (m − 1)·max t + Σ t, so a heavy stage no longer makes every
// fill step as long as itself. Two cases a fuzz run found, each against the executed schedule:
// GPT-3 125M's 12 layers on 8 stages of 1–2 layers with a 50K-vocabulary head (analytic 33 %
// slower than executed until then) and Llama 3 70B over 16 stages of a GB300 rack (+12 %).
TEST(ProgramCli, ClosedFormPipelineFillRunsThroughTheOtherStages) {
  for (const std::string args :
       {"run --set model.preset=gpt3-125m --set parallel.tp=2 --set parallel.vpp=1",
        "run --set cluster.preset=dgx-gb300-nvl72 --set model.preset=llama3-70b "
        "--set cluster.gpus=256 --set parallel.pp=16 --set parallel.vpp=1 "
        "--set training.global_batch=64 --set training.precision=fp8"}) {
    const CliRun a = trainsim(args + " --format json");
    const CliRun s = trainsim(args + " --format json --fidelity schedule");
    ASSERT_EQ(a.code, 0) << a.err;
    ASSERT_EQ(s.code, 0) << s.err;
    const double ta = nlohmann::json::parse(a.out)["iteration_time_s"].get<double>();
    const double ts = nlohmann::json::parse(s.out)["iteration_time_s"].get<double>();
    EXPECT_NEAR(ta, ts, 0.05 * ts) << args;
  }
}

TEST(ProgramCli, PacketFidelityRunsAWholeIteration) {
  const std::string base = "run --set cluster.gpus=64 --set training.global_batch=8 --format json";
  const CliRun flow = trainsim(base + " --fidelity flow");
  ASSERT_EQ(flow.code, 0) << flow.err;
  const auto jf = nlohmann::json::parse(flow.out);
  if (!trainsim::testing::kSanitized) {
    const CliRun packet = trainsim(base + " --fidelity packet");
    ASSERT_EQ(packet.code, 0) << packet.err;
    const auto jp = nlohmann::json::parse(packet.out);
    EXPECT_EQ(jp["fidelity"], "packet");
    const double tf = jf["iteration_time_s"].get<double>(), tp = jp["iteration_time_s"].get<double>();
    EXPECT_GT(tp, tf);
    EXPECT_NEAR(tp, tf, 0.001 * tf);
    // No traffic of this run crosses the switch tiers, and no switch queue forms: no PFC
    // pause, no port above its buffer, a deepest queue of a packet. Each GPU's queue pairs wait
    // in its NIC's send queue (GPU memory, read at the NIC's line rate), which until 2026-12-06
    // read as the deepest queue (381 KB here; 80,544 PFC pauses on a 32-GPU Megatron run).
    const auto& packets = jp["network"]["packets"];
    EXPECT_EQ(packets["pfc_pauses"].get<long>(), 0);
    EXPECT_EQ(packets["time_above_buffer_s"].get<double>(), 0.0);
    EXPECT_LE(packets["max_queue_bytes"].get<double>(), 2 * 4096.0);
  }
  const CliRun big = trainsim("run --set cluster.gpus=2048 --fidelity packet");
  EXPECT_EQ(big.code, 2);
  EXPECT_NE(big.err.find("packet-fidelity run of 2048 GPUs"), std::string::npos) << big.err;
  EXPECT_NE(big.err.find("simulation.fidelity"), std::string::npos) << big.err;
}

// A whole iteration with packet spraying: the 64-GPU layout with 4 servers per ToR group (the
// pipeline transfers between servers 3 and 4 cross the spines, 4 equal-cost paths each). The
// packet level reports what it counted; spraying spreads the uplink load evenly (ECMP
// imbalance 1 where hashing gives 2) and, the transfers being far below the uplinks' rate,
// leaves the iteration as the flow level's ECMP run within 0.1 %.
TEST(ProgramCli, PacketFidelitySpraysAWholeIteration) {
  if (trainsim::testing::kSanitized) GTEST_SKIP() << "an 8 s packet run; covered unsanitized";
  const std::string base = "run --set cluster.gpus=64 --set training.global_batch=8 "
                           "--set cluster.fabric.servers_per_tor=4 --format json";
  const CliRun flow = trainsim(base + " --fidelity flow");
  ASSERT_EQ(flow.code, 0) << flow.err;
  const CliRun spray = trainsim(base + " --fidelity packet --set network.routing.mode=spray");
  ASSERT_EQ(spray.code, 0) << spray.err;
  const auto jf = nlohmann::json::parse(flow.out), js = nlohmann::json::parse(spray.out);
  EXPECT_DOUBLE_EQ(jf["network"]["ecmp_imbalance"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(js["network"]["ecmp_imbalance"].get<double>(), 1.0);
  const auto& p = js["network"]["packets"];
  EXPECT_GT(p["sprayed_flows"].get<long>(), 0);
  EXPECT_GT(p["packets"].get<long>(), 0);
  EXPECT_EQ(p["retransmitted_bytes"].get<long>(), 0);
  EXPECT_FALSE(jf["network"].contains("packets"));  // the flow level counts no packets
  const double tf = jf["iteration_time_s"].get<double>(), ts = js["iteration_time_s"].get<double>();
  EXPECT_NEAR(ts, tf, 0.001 * tf);
}

// The JSON names the seed it ran with, as the text header does ("seed 7").
TEST(ProgramCli, JsonNamesItsSeed) {
  const CliRun r = trainsim("run " + k64 + " --set simulation.seed=7 --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["seed"], 7);
  const CliRun t = trainsim("run " + k64 + " --set simulation.seed=7");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("seed 7"), std::string::npos) << t.out;
}

// The mixture-of-experts example (Mixtral 8x7B, EP 8 inside a server, PP 4 interleaved): the
// executed schedule and the closed form agree within a point, and both expose the experts'
// all-to-all (EP) and no TP (TP 1).
TEST(ProgramCli, MixtureOfExpertsExampleAgreesAcrossFidelities) {
  const std::string moe = "run scenarios/examples/mixtral-8x7b-64xh100.yaml --format json";
  const CliRun a = trainsim(moe + " --fidelity analytic");
  const CliRun s = trainsim(moe + " --fidelity schedule");
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(s.code, 0) << s.err;
  const auto ja = nlohmann::json::parse(a.out);
  const auto js = nlohmann::json::parse(s.out);
  EXPECT_NEAR(ja["mfu"].get<double>(), js["mfu"].get<double>(), 0.01);
  for (const auto* j : {&ja, &js}) {
    EXPECT_GT((*j)["breakdown"]["exposed_comm_s"]["ep"].get<double>(), 0.0);
    EXPECT_EQ((*j)["breakdown"]["exposed_comm_s"]["tp"].get<double>(), 0.0);
    EXPECT_TRUE((*j)["memory"]["fits"].get<bool>());
  }
}

TEST(ProgramCli, FlowJsonHasTaskKindsExecutionAndNetwork) {
  const CliRun r = trainsim("run " + k64 + " --fidelity flow --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["fidelity"], "flow");
  EXPECT_EQ(j["model_version"], "program-38");
  EXPECT_EQ(j["seed"], 1);  // simulation.seed, next to the model version and the profile
  ASSERT_TRUE(j.contains("task_kinds"));
  double compute_kinds = 0;
  for (const auto& k : j["task_kinds"]) {
    if (k["category"] == "compute") compute_kinds += k["total_s"].get<double>();
  }
  // The critical rank's compute-kind times add up to the breakdown's compute.
  EXPECT_NEAR(compute_kinds, j["breakdown"]["compute_s"].get<double>(),
              1e-6 * compute_kinds);
  EXPECT_GT(j["execution"]["flows"].get<long>(), 0);
  EXPECT_TRUE(j["execution"]["symmetry_shortcut"].get<bool>());
  // The solves split: kept partial re-fills and those given up are among all solves, and every
  // solve re-fills at least one flow.
  const auto& ex = j["execution"];
  const long solves = ex["flow_solves"].get<long>();
  EXPECT_GT(solves, 0);
  EXPECT_GE(ex["flow_solves_partial"].get<long>(), 0);
  EXPECT_GE(ex["flow_solves_partial_given_up"].get<long>(), 0);
  EXPECT_LE(ex["flow_solves_partial"].get<long>() + ex["flow_solves_partial_given_up"].get<long>(),
            solves);
  EXPECT_GE(ex["flows_refilled"].get<long>(), solves);
  EXPECT_GT(j["network"]["max_link_utilization"].get<double>(), 0.0);
  const auto& b = j["breakdown"];
  double sum = b["compute_s"].get<double>() + b["pipeline_bubble_s"].get<double>() +
               b["optimizer_s"].get<double>() + b["data_loading_s"].get<double>() +
               b["gpu_variation_s"].get<double>() + b["global_sync_s"].get<double>();
  for (const auto& [k, v] : b["exposed_comm_s"].items()) sum += v.get<double>();
  EXPECT_NEAR(sum, j["iteration_time_s"].get<double>(), 1e-9 * sum);
}

// A job whose last server is partly used (1.7B, 160 GPUs of 8-GPU servers is 20 servers, but
// TP 1 · DP 20 on the example's 8-GPU A100 nodes puts 4 GPUs of its DP rings on a third
// server; 64 H100 on 3-GPU servers with a NIC each leave one GPU on the 22nd): the flow
// fidelity runs it (its hierarchical rings indexed past the group and crashed until
// 2026-12-05) and stays within 25 % of the schedule fidelity (ECMP collisions, and the partly
// used server's few NICs carry every ring channel that crosses to it; on 3-GPU servers the TP 2
// groups 2-3, 8-9, ... also straddle two servers, which both fidelities price since 2026-12-06:
// 18 % apart when written).
TEST(ProgramCli, FlowRunsAJobWhoseLastServerIsPartlyUsed) {
  const std::string cases[] = {
      "run scenarios/examples/megatron-1.7b-32xa100.yaml --set parallel.dp=20 --set "
      "training.global_batch=80",
      "run scenarios/examples/llama3-8b-64xh100.yaml --set cluster.gpus_per_node=3 --set "
      "cluster.nics_per_node=3"};
  for (const std::string& c : cases) {
    const CliRun flow = trainsim(c + " --fidelity flow --format json");
    ASSERT_EQ(flow.code, 0) << c << "\n" << flow.err;
    const CliRun sched = trainsim(c + " --fidelity schedule --format json");
    ASSERT_EQ(sched.code, 0) << c << "\n" << sched.err;
    const double tf = nlohmann::json::parse(flow.out)["iteration_time_s"].get<double>();
    const double ts = nlohmann::json::parse(sched.out)["iteration_time_s"].get<double>();
    EXPECT_GT(tf, 0.0) << c;
    EXPECT_NEAR(tf / ts, 1.0, 0.25) << c;
  }
}

// A straggler through scenario keys: the run names it in the result and takes longer.
// network.ring_lockstep (default true): a ring channel's edges are one flow; false runs a flow
// per edge, so the same run starts more flows, and the key is refused where it is not a bool.
TEST(ProgramCli, RingLockstepKeyChoosesTheFlowModel) {
  const CliRun lock = trainsim("run " + k64 + " --fidelity flow --format json");
  const CliRun edges =
      trainsim("run " + k64 + " --fidelity flow --format json --set network.ring_lockstep=false");
  ASSERT_EQ(lock.code, 0) << lock.err;
  ASSERT_EQ(edges.code, 0) << edges.err;
  const auto jl = nlohmann::json::parse(lock.out), je = nlohmann::json::parse(edges.out);
  EXPECT_LT(jl["execution"]["flows"].get<long>(), je["execution"]["flows"].get<long>());
  const double tl = jl["iteration_time_s"].get<double>(), te = je["iteration_time_s"].get<double>();
  EXPECT_NEAR(tl, te, 0.01 * te);
  const CliRun bad = trainsim("run " + k64 + " --fidelity flow --set network.ring_lockstep=maybe");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("network.ring_lockstep"), std::string::npos) << bad.err;
}

TEST(ProgramCli, StragglerThroughScenarioKeys) {
  const CliRun base = trainsim("run " + k64 + " --fidelity schedule --format json");
  const CliRun slow = trainsim("run " + k64 +
                               " --fidelity schedule --format json --set simulation.straggler_rank=5"
                               " --set simulation.straggler_factor=1.2");
  ASSERT_EQ(base.code, 0) << base.err;
  ASSERT_EQ(slow.code, 0) << slow.err;
  const auto a = nlohmann::json::parse(base.out), b = nlohmann::json::parse(slow.out);
  EXPECT_GT(b["iteration_time_s"].get<double>(), a["iteration_time_s"].get<double>());
  EXPECT_FALSE(b["execution"]["symmetry_shortcut"].get<bool>());
  EXPECT_EQ(b["execution"]["actors"].get<long>(), 64);
}

// The symmetry shortcut's bound (docs/program.md, "Symmetry"): on 1,536 GPUs of the default
// fabric, the DP copies of a pipeline transfer meet on core links and end apart, so the
// shortcut (each stage waits for its slowest copy) and the every-rank run (each rank for its
// own) differ; the difference stays within the bound the shortcut reports. Without the
// shortcut there are no copies and the bound is 0.
TEST(ProgramCli, SymmetryShortcutStaysWithinItsBound) {
  const std::string run =
      "run --fidelity flow --format json --set cluster.gpus=1536 --set training.global_batch=768 "
      "--set model.layers=16 --set parallel.vpp=1 --set simulation.symmetry=";
  const CliRun fast = trainsim(run + "true");
  const CliRun full = trainsim(run + "false");
  ASSERT_EQ(fast.code, 0) << fast.err;
  ASSERT_EQ(full.code, 0) << full.err;
  const auto a = nlohmann::json::parse(fast.out), b = nlohmann::json::parse(full.out);
  ASSERT_TRUE(a["execution"]["symmetry_shortcut"].get<bool>());
  ASSERT_FALSE(b["execution"]["symmetry_shortcut"].get<bool>());
  const double bound = a["execution"]["symmetry_bound_s"].get<double>();
  EXPECT_EQ(b["execution"]["symmetry_bound_s"].get<double>(), 0.0);
  const double diff = a["iteration_time_s"].get<double>() - b["iteration_time_s"].get<double>();
  EXPECT_NE(diff, 0.0);  // copies do collide here: the case the bound is for
  EXPECT_GT(bound, 0.0);
  EXPECT_LE(std::abs(diff), bound);
  // The bound is of the order of the exposed pipeline time, not of the iteration.
  EXPECT_LT(bound, 0.01 * a["iteration_time_s"].get<double>());
}

TEST(ProgramCli, BadTraceRanksAndStragglers) {
  const CliRun r = trainsim("run " + k64 + " --fidelity schedule --trace " +
                            temp_path("t.json") + " --trace-ranks 0,99");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "--trace-ranks")) << r.err;
  const CliRun s = trainsim("run " + k64 + " --fidelity schedule --set simulation.straggler_rank=64"
                            " --set simulation.straggler_factor=2");
  EXPECT_EQ(s.code, 2);
  EXPECT_TRUE(has(s.err, "simulation.straggler_rank")) << s.err;
}

// The published runs of at most `max_gpus` GPUs, as a CSV in the test temp directory; returns its
// path and sets `rows`.
std::string runs_upto(long max_gpus, int& rows) {
  std::ifstream in("scenarios/validation/published-runs.csv");
  std::string line, kept;
  std::getline(in, line);
  kept = line + "\n";
  std::size_t gpus_col = 0;
  for (std::size_t i = 0, c = 0; i < line.size(); ++i) {
    if (line.compare(i, 5, "gpus,") == 0 && (i == 0 || line[i - 1] == ',')) gpus_col = c;
    if (line[i] == ',') ++c;
  }
  rows = 0;
  while (std::getline(in, line)) {
    std::size_t start = 0;
    for (std::size_t c = 0; c < gpus_col; ++c) start = line.find(',', start) + 1;
    if (std::stol(line.substr(start, line.find(',', start) - start)) > max_gpus) continue;
    kept += line + "\n";
    ++rows;
  }
  const std::string path =
      ::testing::TempDir() + "/runs_upto_" + std::to_string(max_gpus) + ".csv";
  std::ofstream(path) << kept;
  return path;
}

// Under a sanitizer (-O0 with instrumentation, about ten times slower, and the 12,288-GPU
// iterations take hours there) the validate tests run the small rows (schedule: up to 256 GPUs,
// 653 s under ASan on a loaded 2-core machine; flow: up to 128 GPUs): the same code paths, every
// row simulated; the accuracy bounds are the optimized build's.
void expect_every_row_simulated(const char* fidelity, long max_gpus) {
  int rows = 0;
  const std::string path = runs_upto(max_gpus, rows);
  ASSERT_GE(rows, 4);
  const CliRun r = trainsim("validate " + path + " --fidelity " + fidelity + " --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["summary"]["simulated"].get<int>(), rows);
}

// The published runs at schedule fidelity (every rank's Program on the event core).
void expect_validation_within_bounds(const char* fidelity) {
  const CliRun r = trainsim(std::string("validate scenarios/validation/published-runs.csv "
                                        "--fidelity ") + fidelity + " --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  // Regression bounds (docs/validation.md: median 2.4, max 10.8 on the 31 rows at schedule
  // fidelity; issue 14's targets, 2.0 and 4.0, are not met). 3.3 at analytic-5 with the
  // Table 2 rows' blank vpp searched; analytic-6 prices the pipeline activations as Megatron-LM
  // 2021 sent them, and a blank vpp is the format's "not interleaved".
  EXPECT_LE(j["summary"]["median_abs_mfu_err_pts"].get<double>(), 2.8);
  EXPECT_LE(j["summary"]["max_abs_mfu_err_pts"].get<double>(), 11.5);
  // The executed schedule and the analytic closed form price the same mechanisms (concurrent
  // kernels, DP overlap per model chunk): on every row they agree within 1.5 MFU points (0.9 at
  // analytic-5; up to 5.3 at analytic-4, when the executor took no SMs from the compute and
  // the closed form hid a stage's whole reduction behind one micro-batch's backward).
  const CliRun ra = trainsim("validate scenarios/validation/published-runs.csv --format json");
  ASSERT_EQ(ra.code, 0) << ra.err;
  const auto ja = nlohmann::json::parse(ra.out);
  ASSERT_EQ(ja["rows"].size(), j["rows"].size());
  for (std::size_t i = 0; i < j["rows"].size(); ++i) {
    const auto& rs = j["rows"][i];
    const auto& an = ja["rows"][i];
    ASSERT_EQ(rs["id"], an["id"]);
    EXPECT_NEAR(rs["predicted"]["mfu"].get<double>(), an["predicted"]["mfu"].get<double>(), 0.015)
        << rs["id"];
  }
}

TEST(ProgramCli, ValidateAtScheduleFidelity) {
  if (trainsim::testing::kSanitized) return expect_every_row_simulated("schedule", 256);
  expect_validation_within_bounds("schedule");
}

// Every published run's full iteration with its fabric's flows (about 12 s of CPU).
// At flow fidelity the rows of up to 1,024 GPUs (the 12,288-GPU rows take minutes of flows each
// on a loaded 2-core machine, and the 1,536-GPU 175B row, interleaved 4 ways, about 70 s):
// median 2.2, max 9.1.
TEST(ProgramCli, ValidateAtFlowFidelity) {
  if (trainsim::testing::kSanitized) return expect_every_row_simulated("flow", 128);
  int rows = 0;
  const std::string path = runs_upto(1024, rows);
  ASSERT_GE(rows, 20);
  const CliRun r = trainsim("validate " + path + " --fidelity flow --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["summary"]["simulated"].get<int>(), rows);
  EXPECT_LE(j["summary"]["median_abs_mfu_err_pts"].get<double>(), 2.5);
  EXPECT_LE(j["summary"]["max_abs_mfu_err_pts"].get<double>(), 10.5);
}

// Llama 3 405B in the shared format, with system, vpp, mbs and recompute blank (docs/validation.md
// "Runs beyond the table"): the source's year picks Megatron-Core, the 126 layers are split 7 +
// 14 x 8 + 7 for the interleaved search. Since analytic-26 that preset (Megatron-Core 2023-12)
// runs SwiGLU and RoPE as PyTorch ops, as its code did before the fusions became defaults on
// 2024-01-18: SiLU's output is kept for backward, so the least recompute that fits at 8K is one
// layer per model chunk, not none, and every row comes within 5 points (-2.7, -4.9 and the
// 131K CP 16 row +4.4, which read +10.7 before; -2.0, -3.5, +10.7 at analytic-25; -21 and -25
// with a 2023-01 Megatron, vpp 1 and full recompute).
TEST(ProgramCli, Llama3RowsInTheSharedFormat) {
  const CliRun r = trainsim("validate scenarios/validation/llama3-runs.csv --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["rows"].size(), 3u);
  for (const auto& row : j["rows"]) {
    ASSERT_TRUE(row.contains("assumed")) << row["id"];
    EXPECT_EQ(row["assumed"]["framework"].get<std::string>().rfind("megatron-core-2023", 0), 0u)
        << row["id"];
    EXPECT_EQ(row["assumed"]["stage_layers"].get<std::string>().rfind("7 on the first", 0), 0u)
        << row["id"];
    EXPECT_NE(row["assumed"]["vpp"].get<std::string>().rfind("1 ", 0), 0u) << row["id"];
  }
  // −2.3 until analytic-41, −3.7 since: its ZeRO-2 reductions (each micro-batch's, across
  // servers) hold NCCL's 16 channels (two a NIC) of the H100's 132 SMs instead of 8 while they
  // run beside the compute (calibrate/profiles/README.md, nccl_channels).
  EXPECT_LE(std::abs(j["rows"][0]["error"]["mfu_pts"].get<double>()), 4.5);
  // −5.10 since analytic-31 (ZeRO-2's drain, toward the schedule fidelity's −5.3; −4.90 before);
  // −5.85 since analytic-41 (the same channels).
  EXPECT_LE(std::abs(j["rows"][1]["error"]["mfu_pts"].get<double>()), 6.5);
  // The 131,072-token row: +4.3 until analytic-39, +8.0 since, +7.1 since analytic-41. Its attention (most of its time)
  // now runs on cuDNN's published H100 curve, at 4K keys a call (8K queries a rank, one call per
  // CP step) 10 % (forward) and 26 % (backward) above the flat 2K-token rates before. Which
  // kernel Meta ran is not published (FlashAttention-2 on H100 would be 0.29 of peak, not 0.55).
  // +5.6 since analytic-42: the row states Llama 3's all-gather CP (§3.3.2: K and V gathered,
  // exposed), which it read as the preset's ring before (+6.1 with the ring's merges).
  EXPECT_LE(std::abs(j["rows"][2]["error"]["mfu_pts"].get<double>()), 6.5);
  bool all_gather = false;
  for (const auto& kv : j["rows"][2]["set"]) all_gather |= kv == "framework.cp_comm=all-gather";
  EXPECT_TRUE(all_gather);
  EXPECT_EQ(j["rows"][1]["assumed"]["recompute"].get<std::string>().rfind(
                "full (1 layer per model chunk)", 0),
            0u);
}

// `trainsim validate CSV --format json`, checked to exit 0 with `rows` rows, each simulated.
// The header line (with its newline) and the line of row `id` of a runs file.
std::pair<std::string, std::string> header_and_row(const std::string& csv, const std::string& id) {
  const std::string text = slurp(csv);
  const std::size_t at = text.find("\n" + id + ",") + 1;
  EXPECT_GT(at, 0u) << id;
  return {text.substr(0, text.find('\n') + 1), text.substr(at, text.find('\n', at) - at)};
}

nlohmann::json simulated_rows(const std::string& csv, std::size_t rows) {
  const CliRun r = trainsim("validate " + csv + " --format json");
  EXPECT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["rows"].size(), rows) << csv;
  for (const auto& row : j["rows"]) EXPECT_TRUE(row.contains("error")) << row.dump();
  return j["rows"];
}

// A row's two published numbers (its iteration time and `field`, a throughput per GPU: TFLOP/s
// or MFU) agree with the model's FLOP accounting within 1 %: the model's `field` at the
// published iteration time is the published one.
void expect_published_pair_agrees(const nlohmann::json& row, const char* field) {
  const auto& pred = row["predicted"];
  const auto& pub = row["published"];
  const double at_published_time =
      pred[field].get<double>() * pred["iter_s"].get<double>() / pub["iter_s"].get<double>();
  EXPECT_NEAR(at_published_time / pub[field].get<double>(), 1.0, 0.01) << row["id"] << " " << field;
}

// Korthikanti et al.'s four runs (DP 1, SP + selective recompute) as a new user writes them:
// framework and system blank. The 2021 release their date alone would pick has no selective
// recompute (and without SP three of them do not fit), so the rows run on the first preset that
// has it; the model was not fitted to them. Within 3 points, but the 22B row: since
// `analytic-24` Megatron's asynchronous backward hides its TP collectives behind the GEMMs that
// do not need them, the most for the smallest model, and it reads +3.4 (docs/validation.md).
TEST(ProgramCli, Korthikanti2022RowsRunOnSoftwareWithSelectiveRecompute) {
  const auto rows = simulated_rows("scenarios/validation/korthikanti-2022-runs.csv", 4);
  ASSERT_EQ(rows.size(), 4u);
  for (const auto& row : rows) {
    ASSERT_TRUE(row.contains("error"));
    EXPECT_EQ(row["assumed"]["framework"].get<std::string>().rfind("megatron-lm-2023", 0), 0u)
        << row["id"];
    const double bound = row["id"] == "k22-22b" ? 3.5 : 3.0;
    EXPECT_LE(std::abs(row["error"]["mfu_pts"].get<double>()), bound) << row["id"];
  }
}

// The Megatron-Core H100 weak-scaling rows (docs/validation.md): all nine are simulated with the
// framework their date gives; their error is documented, not bounded here.
TEST(ProgramCli, MegatronCore2024RowsAreAllSimulated) {
  const auto rows = simulated_rows("scenarios/validation/megatron-core-2024-runs.csv", 9);
  ASSERT_EQ(rows.size(), 9u);
  for (const auto& row : rows) {
    ASSERT_TRUE(row.contains("error"));
    EXPECT_EQ(row["assumed"]["framework"].get<std::string>().rfind("megatron-core-2023", 0), 0u)
        << row["id"];
    EXPECT_GT(row["predicted"]["mfu"].get<double>(), 0.2) << row["id"];
    EXPECT_LT(row["predicted"]["mfu"].get<double>(), 0.7) << row["id"];
  }
}

// MT-NLG 530B (docs/validation.md): the three rows are simulated with the DeepSpeed preset, and
// the paper's two numbers per row (iteration time and TFLOP/s per GPU) agree with the model's
// FLOP accounting counting the recompute forward pass: FLOPs per GPU per iteration over the
// published 60.1 / 50.2 / 44.4 s give 125.7 / 120.4 / 113.5 TFLOP/s against the published
// 126 / 121 / 113. The 9-point error is documented, not bounded here.
TEST(ProgramCli, MtNlgRowsAreSimulated) {
  const auto rows = simulated_rows("scenarios/validation/mtnlg-2022-runs.csv", 3);
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& row : rows) {
    ASSERT_TRUE(row.contains("error"));
    expect_published_pair_agrees(row, "tflops_gpu");
    EXPECT_EQ(row["assumed"]["tflops_gpu"].get<std::string>().rfind("compared with predicted TFLOP/s counting recompute", 0),
              0u)
        << row["id"];
  }
}

// Nemotron-4 340B (docs/validation.md): the three rows of the report's batch-size ramp are
// simulated as a new user writes them (framework by the date rule, interleaving searched), and
// each row's two published numbers (iteration time and MFU) agree with the model's FLOP
// accounting (megatron convention: model FLOPs, full s x s attention) within 1 %: the model's
// MFU at the published iteration time is the published MFU.
TEST(ProgramCli, Nemotron4RowsAreSimulated) {
  const auto rows = simulated_rows("scenarios/validation/nemotron4-2024-runs.csv", 3);
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& row : rows) {
    ASSERT_TRUE(row.contains("error"));
    expect_published_pair_agrees(row, "mfu");
    EXPECT_EQ(row["assumed"]["framework"].get<std::string>().rfind("megatron-core-2023", 0), 0u)
        << row["id"];
    EXPECT_NE(row["assumed"]["vpp"].get<std::string>().find("(auto:"), std::string::npos)
        << row["assumed"]["vpp"];
  }
}

// The blind test's three files (docs/validation.md, "A blind test"): every row simulated (their
// errors are documented, not bounded here), and each NeMo 24.12 row's two published figures
// (tokens/s and model TFLOP/s per GPU) agree with the model's FLOP accounting under the
// megatron convention within 1 %, a check of the transcription.
TEST(ProgramCli, BlindTestRowsAreSimulated) {
  EXPECT_EQ(simulated_rows("scenarios/validation/flash-attention-2022-runs.csv", 5).size(), 5u);
  EXPECT_EQ(simulated_rows("scenarios/validation/torchtitan-2024-runs.csv", 8).size(), 8u);
  const auto nemo = simulated_rows("scenarios/validation/nemo-2024-12-runs.csv", 8);
  ASSERT_EQ(nemo.size(), 8u);
  for (const auto& row : nemo) {
    ASSERT_TRUE(row.contains("error"));
    expect_published_pair_agrees(row, "tflops_gpu");
  }
}

// The H100 FP8 rows (docs/validation.md): both simulated at the FP8 peak; error documented.
// The NeMo 25.09/25.11 tables (Megatron-Bridge) publish TFLOP/s and tokens/s per GPU; the two
// agree only under the causal convention its throughput log counts (half the s×s scores,
// flop_utils.py), which the nemo-2025 preset states. The published iteration derived from the
// TFLOP/s must equal global batch · sequence / (tokens/s/GPU · GPUs), by hand:
//   H100 8B 128·8192/(8·14,079) = 9.3096 s, 70B 128·8192/(64·1,619) = 10.1195 s, 8B (25.11)
//   128·8192/(8·14,451) = 9.0700 s, 70B 128·8192/(64·1,602) = 10.2269 s, 405B
//   512·8192/(1024·302) = 13.5629 s and 512·8192/(1024·292) = 14.0274 s;
//   B200 8B 128·8192/(8·29,994) = 4.3697 s, 405B 64·8192/(128·664) = 6.1687 s, 8B (25.11)
//   128·8192/(8·30,624) = 4.2798 s, 405B 64·8192/(128·661) = 6.1967 s.
// Under the full-attention convention the 8B's would be 12 % longer. The 2026 containers' rows
// (70B at batch 256, 405B at batch 1,536) give tokens/s: 70B 256·8192/(64·1,621) = 20.2147 s,
// /(64·1,639) = 19.9927 s, /(64·1,633) = 20.0661 s, /(64·1,664) = 19.6923 s; 405B
// 1536·8192/(1024·311) = 39.5113 s, /(1024·328) = 37.4634 s, /(1024·326) = 37.6933 s.
TEST(ProgramCli, Fp8RowsAreSimulated) {
  const auto rows = simulated_rows("scenarios/validation/nemo-2025-fp8-runs.csv", 13);
  ASSERT_EQ(rows.size(), 13u);
  const double from_tokens[] = {9.3096,  10.1195, 9.0700,  10.2269, 13.5629, 14.0274, 20.2147,
                                19.9927, 20.0661, 19.6923, 39.5113, 37.4634, 37.6933};
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const auto& row = rows[r];
    ASSERT_TRUE(row.contains("error"));
    EXPECT_NEAR(row["published"]["iter_s"].get<double>(), from_tokens[r], 0.002 * from_tokens[r])
        << row["id"];
    EXPECT_EQ(row["assumed"]["flops_convention"].get<std::string>().rfind("causal", 0), 0u)
        << row["assumed"];
    // `fp8-cs` states the recipe: nothing is assumed about it.
    EXPECT_FALSE(row.value("assumed", nlohmann::json::object()).contains("fp8_recipe")) << row["id"];
  }
  // Llama 3.1 405B: 126 layers over PP 8 × VP 8 take 15 on the end stages, 16 on the others
  // (the embedding and the loss counted as layers of the first and the last chunk).
  // The 70B at twice the batch, four 2026 containers: within 1.5 points each (held out: added
  // after the model was last changed, 2026-12-05).
  for (std::size_t r = 6; r < 10; ++r) {
    EXPECT_LT(std::abs(rows[r]["error"]["mfu_pts"].get<double>()), 1.5) << rows[r]["id"];
  }
  for (const std::size_t r : {4u, 5u, 10u, 11u, 12u}) {
    EXPECT_EQ(rows[r]["assumed"]["stage_layers"].get<std::string>().rfind(
                  "15 on the first and the last stage, 16 on the others", 0),
              0u)
        << rows[r]["assumed"];
  }
}

// The same tables' DGX-B200 rows, on a GPU no row of the project's table has: simulated with the
// b200 preset and its derived profile (nothing fitted to them), the published iteration from
// tokens/s as above.
TEST(ProgramCli, B200RowsAreSimulated) {
  const auto rows = simulated_rows("scenarios/validation/nemo-2025-b200-runs.csv", 4);
  ASSERT_EQ(rows.size(), 4u);
  const double from_tokens[] = {4.3697, 6.1687, 4.2798, 6.1967};
  for (std::size_t r = 0; r < rows.size(); ++r) {
    EXPECT_NEAR(rows[r]["published"]["iter_s"].get<double>(), from_tokens[r],
                0.002 * from_tokens[r])
        << rows[r]["id"];
    EXPECT_GT(rows[r]["predicted"]["iter_s"].get<double>(), 0);
  }
}

// The same tables' DGX-GB200 and DGX-GB300 rows (NVL72 racks): the gb200 and gb300 presets,
// their derived profiles and NVL72 clusters (nothing fitted to them); the published iteration
// from tokens/s: GB200 8B 128·8192/(8·31,357) = 4.1800 s and 128·8192/(8·31,508) = 4.1600 s,
// 405B 1536·8192/(256·813) = 60.4576 s; GB300 8B 128·8192/(8·37,556) = 3.4900 s, 405B
// 1536·8192/(256·999) = 49.2012 s. The rows' TFLOP/s agree with the causal count (no warning);
// the GB200 405B's 126 layers over PP 16 × VP 4 take 7 on the end stages, 8 on the others.
TEST(ProgramCli, Gb200AndGb300RowsAreSimulated) {
  const auto rows = simulated_rows("scenarios/validation/nemo-2025-gb200-runs.csv", 15);
  ASSERT_EQ(rows.size(), 15u);
  // Rows 6–9 run Megatron FSDP with activation offloading (the `set` column's
  // training.cpu_offload_layers): 70B 128·8192 / (64·3,986), 256·8192 / (64·4,312) and
  // / (64·4,520); 405B 64·8192 / (128·729). The 2026 containers' rows give tokens/s: 70B
  // 256·8192 / (64·4,224) and / (64·5,248); 405B 1536·8192 / (256·864), / (256·1,024),
  // / (256·843), / (256·1,048).
  const double from_tokens[] = {4.1800,  4.1600,  60.4576, 3.4900,  49.2012,
                                4.1104,  7.5993,  7.2496,  5.6187,  7.7576,
                                6.2439,  56.8889, 48.0000, 58.3060, 46.9008};
  const char* cluster[] = {"dgx-gb200-nvl72", "dgx-gb200-nvl72", "dgx-gb200-nvl72",
                           "dgx-gb300-nvl72", "dgx-gb300-nvl72", "dgx-gb200-nvl72",
                           "dgx-gb200-nvl72", "dgx-gb300-nvl72", "dgx-gb200-nvl72",
                           "dgx-gb200-nvl72", "dgx-gb300-nvl72", "dgx-gb200-nvl72",
                           "dgx-gb300-nvl72", "dgx-gb200-nvl72", "dgx-gb300-nvl72"};
  for (std::size_t r = 0; r < rows.size(); ++r) {
    EXPECT_NEAR(rows[r]["published"]["iter_s"].get<double>(), from_tokens[r],
                0.002 * from_tokens[r])
        << rows[r]["id"];
    EXPECT_TRUE(rows[r]["warnings"].empty()) << rows[r]["warnings"];
    EXPECT_EQ(rows[r]["assumed"]["cluster"].get<std::string>().rfind(cluster[r], 0), 0u)
        << rows[r]["assumed"];
    EXPECT_GT(rows[r]["predicted"]["iter_s"].get<double>(), 0);
  }
  EXPECT_EQ(rows[2]["assumed"]["stage_layers"].get<std::string>().rfind(
                "7 on the first and the last stage, 8 on the others", 0),
            0u)
      << rows[2]["assumed"];
  // Without its offloaded layers the 70B does not fit a GB200, as NeMo's recipe needs them.
  auto [header, line] =
      header_and_row("scenarios/validation/nemo-2025-gb200-runs.csv", "nemo2511-gb200-llama3-70b");
  const std::size_t set = line.rfind(",training.cpu_offload_layers=40");
  ASSERT_NE(set, std::string::npos) << line;
  line.erase(set + 1);
  const std::string csv = temp_path("gb200-70b-no-offload.csv");
  {
    std::ofstream out(csv);
    out << header << line << "\n";
  }
  const CliRun o = trainsim("validate " + csv + " --format json");
  EXPECT_EQ(o.code, 3) << o.err;  // the file's only row cannot run
  EXPECT_TRUE(o.err.find("does not fit in memory") != std::string::npos) << o.err;
}

// LLM Foundry's MPT benchmarks (docs/validation.md): all 209 BF16 rows simulated, their tokens/s
// and TFLOP/s agreeing under the megatron convention (the 7B on 8 H100 at 2,048 by hand:
// 48·2048 / (8·10,643) = 1.15456 s) but for the 125M at 32K and 64K tokens, whose published
// count also has the 6·s·h of a learned position table as long as the sequence (+3 %: warned,
// naming the convention). Rows whose stated micro-batch fills the GPU and that the model puts
// over capacity by less than its allocator-fragmentation reserve are simulated as published,
// each with that warning. The rows with checkpointing at 2,048 tokens on 128+ H100 stay within
// the documented 3.2 points.
TEST(ProgramCli, LlmFoundryRowsAreSimulated) {
  const CliRun r = trainsim("validate scenarios/validation/llm-foundry-2023-runs.csv --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["rows"].size(), 209u);
  int over = 0;
  for (const auto& row : j["rows"]) {
    const std::string id = row["id"];
    ASSERT_FALSE(row.contains("error_message")) << id << row["error_message"];
    for (const auto& w : row["warnings"]) {
      const std::string text = w.get<std::string>();
      if (text.find("allocator-fragmentation reserve") != std::string::npos) {
        ++over;
        EXPECT_EQ(row["assumed"].count("recompute"), 0u) << id;  // stated, not searched
      } else {
        EXPECT_EQ(id.rfind("mpt-125m-", 0), 0u) << id << text;
        EXPECT_NE(text.find("megatron convention is within 3."), std::string::npos) << text;
      }
    }
    if (id == "mpt-7b-h100-8-s2048") {
      EXPECT_NEAR(row["published"]["iter_s"].get<double>(), 48.0 * 2048 / (8 * 10643), 1e-4);
    }
    // 16K to 64K tokens: attention is most of the work, run by MPT's Triton kernel (`triton`,
    // at FlashAttention-1's rate). Priced as FlashAttention-2 these rows read 12–38 points fast.
    for (const char* long_seq : {"-s16384", "-s32768", "-s65536"}) {
      if (id.size() > std::strlen(long_seq) &&
          id.compare(id.size() - std::strlen(long_seq), std::string::npos, long_seq) == 0) {
        EXPECT_LE(std::abs(row["error"]["mfu_pts"].get<double>()), 12.0) << id;
      }
    }
    for (const char* big : {"mpt-70b-h100-128-s2048", "mpt-70b-h100-256-s2048",
                            "mpt-70b-h100-512-s2048", "mpt-30b-h100-128-s2048",
                            "mpt-30b-h100-256-s2048", "mpt-30b-h100-512-s2048",
                            "mpt-13b-h100-128-s2048"}) {
      if (id == big) {
        // 4.0 since analytic-39 (the Triton kernel on FlashAttention-1's curve runs 5 % below
        // its flat 16K rate at 2K tokens: mpt-13b-h100-128 −3.2 → −3.6).
        EXPECT_LE(std::abs(row["error"]["mfu_pts"].get<double>()), 4.0) << id;
      }
    }
  }
  EXPECT_EQ(over, 17);
  EXPECT_EQ(j["summary"]["simulated"].get<int>(), 209);
  // The same 1B row at twice its micro-batch is over by more than the reserve: refused; with its
  // micro-batch blank the search takes one that fits with the reserve, without a warning.
  const auto [header, line] =
      header_and_row("scenarios/validation/llm-foundry-2023-runs.csv", "mpt-1b-h100-64-s2048");
  const std::size_t mbs = line.find(",20,1280,");
  ASSERT_NE(mbs, std::string::npos) << line;
  std::string twice = line, blank = line;
  twice.replace(mbs, 9, ",40,2560,");
  blank.replace(mbs, 9, ",,1280,");
  // Each variant its own id (a runs file refuses two rows with one id).
  twice.insert(twice.find(','), "-mbs40");
  blank.insert(blank.find(','), "-mbs-blank");
  const std::string csv = temp_path("mpt-over.csv");
  {
    std::ofstream out(csv);
    out << header << twice << "\n" << blank << "\n";
  }
  const CliRun o = trainsim("validate " + csv + " --format json");
  ASSERT_EQ(o.code, 0) << o.err;
  const auto oj = nlohmann::json::parse(o.out);
  EXPECT_NE(oj["rows"][0].value("error_message", "").find("does not fit in memory"),
            std::string::npos)
      << oj["rows"][0].dump();
  ASSERT_FALSE(oj["rows"][1].contains("error_message")) << oj["rows"][1]["error_message"];
  EXPECT_TRUE(oj["rows"][1]["warnings"].empty()) << oj["rows"][1]["warnings"];
  EXPECT_LT(std::stoi(oj["rows"][1]["assumed"]["mbs"].get<std::string>()), 20);
}

// BLOOM 176B (BigScience tr11-176B-ml): its log's 104.70 s and 149.77 TFLOP/s per GPU on 384
// GPUs imply 6.021e18 FLOPs per iteration, which is SC21's Eq. 3 count with recompute by hand:
// 96·B·s·l·h²·(1 + s/6h + V/16lh) = 96·2048·2048·70·14336²·(1 + 2048/86016 + 250880/16056320)
// = 6.0211e18. The row is simulated on the jean-zay-a100 preset without a warning, and the
// model's own count of the same convention matches the hand value.
TEST(ProgramCli, BloomRowIsSimulated) {
  const auto rows = simulated_rows("scenarios/validation/bloom-2022-runs.csv", 1);
  ASSERT_EQ(rows.size(), 1u);
  const auto& r = rows[0];
  const double eq3 = 96.0 * 2048 * 2048 * 70 * 14336.0 * 14336.0 *
                     (1 + 2048.0 / (6 * 14336) + 250880.0 / (16.0 * 70 * 14336));
  EXPECT_NEAR(149.77e12 * 104.70 * 384, eq3, 0.001 * eq3);
  EXPECT_TRUE(r["warnings"].empty()) << r["warnings"];
  const double predicted = r["predicted"]["tflops_gpu"].get<double>() * 1e12 *
                           r["predicted"]["iter_s"].get<double>() * 384;
  EXPECT_NEAR(predicted, eq3, 0.001 * eq3);
  EXPECT_EQ(r["assumed"].count("cluster"), 0u);  // the row names jean-zay-a100
}

// A fine-grained MoE row (Qwen3-30B-A3B on 16 H100, NeMo 25.11): expressible with the head_dim
// and MoE columns, simulated; the published iteration is batch·seq / (tokens/s/GPU · GPUs) =
// 512·4096 / (5275·16) = 24.848 s, and the published TFLOP/s agree with the model's causal count
// (no warning: the head width and the expert FLOPs counted as Megatron-Bridge counts them).
TEST(ProgramCli, FineGrainedMoeRowIsSimulated) {
  const auto rows = simulated_rows("scenarios/validation/nemo-2025-moe-runs.csv", 1);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_NEAR(rows[0]["published"]["iter_s"].get<double>(), 512.0 * 4096 / (5275.0 * 16), 1e-6);
  EXPECT_TRUE(rows[0]["warnings"].empty()) << rows[0]["warnings"];
  EXPECT_GT(rows[0]["predicted"]["iter_s"].get<double>(), 0);
}

// ZeRO-2 without DP overlap (optimizations.dp_overlap false): the shard's reduce-scatters after
// each micro-batch's backward hold the compute stream, as the analytic fidelity exposes them;
// the schedule ran the next micro-batch under them and exposed a sixth as much (Llama 3 8B on 64
// H100, TP 2: 0.21 s of DP against 1.37 s analytic, the step 14 % shorter). By hand the exposed
// DP is at least the 16 reduce-scatters of 4.01 G parameters · 4 B · 31/32 over the NIC share.
TEST(ProgramCli, ZeroTwoWithoutDpOverlapWaitsForItsReduceScatters) {
  const auto run = [](const std::string& fidelity) {
    const CliRun r = trainsim("run scenarios/examples/llama3-8b-64xh100.yaml --format json "
                              "--set parallel.zero=2 --set optimizations.dp_overlap=false "
                              "--fidelity " + fidelity);
    EXPECT_EQ(r.code, 0) << r.err;
    return r.code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
  };
  const nlohmann::json a = run("analytic"), s = run("schedule");
  ASSERT_TRUE(a.contains("breakdown") && s.contains("breakdown"));
  EXPECT_NEAR(s["iteration_time_s"].get<double>(), a["iteration_time_s"].get<double>(),
              0.03 * a["iteration_time_s"].get<double>());
  EXPECT_GT(s["breakdown"]["exposed_comm_s"]["dp"].get<double>(),
            0.9 * a["breakdown"]["exposed_comm_s"]["dp"].get<double>());
}

}  // namespace
}  // namespace trainsim
