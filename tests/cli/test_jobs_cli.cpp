// Several jobs on one fabric (`jobs:` in a scenario; scenarios/jobs.h, docs/network.md), run as
// the real executable: two DP rings forced onto the same leaf-spine links each slow down by what
// max-min fairness gives, the same jobs under their own leaves do not slow each other, a job
// started later is measured from its start, and bad job lists exit 2 naming the field.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/cli_runner.h"

namespace {

using trainsim::testing::CliRun;
using trainsim::testing::slurp;
using trainsim::testing::temp_path;
using trainsim::testing::trainsim;

const char* kDumbbell = "scenarios/examples/two-jobs-dumbbell.yaml";

bool has(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

// The dumbbell scenario with its `jobs:` list replaced by `jobs` (YAML text after "jobs:").
std::string dumbbell_with(const std::string& jobs, const std::string& name) {
  std::string text = slurp(kDumbbell);
  text = text.substr(0, text.find("\njobs:")) + "\njobs:\n" + jobs;
  const std::string path = temp_path(name + ".yaml");
  std::ofstream(path) << text;
  return path;
}

// The built-in H100 profile with NICs at their full line rate, so that the NIC links and the
// leaf-spine cables have the same capacity C (switch links are not derated; the NIC's are by
// nic_efficiency).
std::string full_rate_profile() {
  std::string p = slurp("calibrate/profiles/h100-sxm.json");
  const std::string key = "\"nic_efficiency\": ";
  const std::size_t at = p.find(key);
  const std::size_t end = p.find_first_of(",\n}", at);
  p = p.substr(0, at + key.size()) + "1.0" + p.substr(end);
  const std::string path = temp_path("full_rate_h100.json");
  std::ofstream(path) << p;
  return path;
}

nlohmann::json run_json(const std::string& args) {
  const CliRun r = trainsim("run " + args + " --format json");
  EXPECT_EQ(r.code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

double exposed_dp(const nlohmann::json& breakdown) {
  return breakdown["exposed_comm_s"]["dp"].get<double>();
}

// Job a (servers 0, 2) and job b (servers 1, 3) each all-reduce over a 2-rank ring whose two
// flows cross leaf 0 -> spine and leaf 1 -> spine. Alone, a job's flows run at C on every link
// (NIC and leaf-spine cables are both C), so its DP transfer of W bytes per GPU takes W / C.
// Together, each leaf-spine link carries one flow group of each job; max-min fairness gives each
// C / 2, so the transfer takes 2 W / C: each job's exposed DP time grows by exactly W / C, and the
// rest of its iteration (compute, latencies) is unchanged.
TEST(JobsCli, TwoDpRingsOnSharedCoreLinksSlowDownByTheMaxMinShare) {
  const nlohmann::json j =
      run_json(std::string(kDumbbell) + " --set calibration.profile=" + full_rate_profile());
  ASSERT_EQ(j["jobs"].size(), 2u);
  EXPECT_EQ(j["fidelity"], "flow");
  const double C = 400e9 / 8;
  for (const auto& job : j["jobs"]) {
    const double W = job["result"]["network"]["nic_bytes_per_gpu"].get<double>();
    ASSERT_GT(W, 1e8);
    const double shared = exposed_dp(job["result"]["breakdown"]);
    const double alone = exposed_dp(job["alone"]["breakdown"]);
    EXPECT_NEAR(shared - alone, W / C, 1e-9 * W / C) << job["name"];
    EXPECT_NEAR(job["iteration_time_s"].get<double>() - job["alone_iteration_time_s"].get<double>(),
                W / C, 1e-9 * W / C);
    EXPECT_GT(job["slowdown"].get<double>(), 1.2);
  }
  EXPECT_EQ(j["jobs"][0]["iteration_time_s"], j["jobs"][1]["iteration_time_s"]);
  // The two leaf-spine links each way, and nothing else, carry both jobs.
  EXPECT_EQ(j["fabric"]["links_shared_by_jobs"], 4);
  for (const auto& c : j["fabric"]["link_classes"]) {
    if (c["class"] == "leaf->spine") {
      EXPECT_NEAR(c["mean_utilization"].get<double>() * C * j["fabric"]["makespan_s"].get<double>(),
                  2 * j["jobs"][0]["result"]["network"]["nic_bytes_per_gpu"].get<double>(), 1.0);
    }
  }
}

// The same two jobs at packet fidelity: each leaf-spine port's FIFO interleaves the two jobs'
// packets, so each job's DP transfer again takes about 2 W / C, against W / C alone; the extra time
// is W / C within 2 % (store and forward, one more packet per hop), and the packet level agrees
// with the flow level's iteration within 1 %. Jobs whose GPUs add up past the packet work limit
// are refused together even when each one alone is below it.
TEST(JobsCli, PacketFidelityPutsBothJobsOnOneFabric) {
  const std::string profile = " --set calibration.profile=" + full_rate_profile();
  const nlohmann::json p = run_json(std::string(kDumbbell) + profile + " --fidelity packet");
  const nlohmann::json f = run_json(std::string(kDumbbell) + profile);
  EXPECT_EQ(p["fidelity"], "packet");
  const double C = 400e9 / 8;
  for (std::size_t i = 0; i < 2; ++i) {
    const auto& job = p["jobs"][i];
    const double W = job["result"]["network"]["nic_bytes_per_gpu"].get<double>();
    const double extra = exposed_dp(job["result"]["breakdown"]) - exposed_dp(job["alone"]["breakdown"]);
    EXPECT_NEAR(extra, W / C, 0.02 * W / C) << job["name"];
    EXPECT_NEAR(job["iteration_time_s"].get<double>(),
                f["jobs"][i]["iteration_time_s"].get<double>(),
                0.01 * f["jobs"][i]["iteration_time_s"].get<double>());
  }
  EXPECT_EQ(p["fabric"]["links_shared_by_jobs"], 4);
  // What the packet level counted, as a single run reports it (a multi-job run printed none).
  ASSERT_TRUE(p["fabric"].contains("packets")) << p["fabric"].dump();
  EXPECT_GT(p["fabric"]["packets"]["packets"].get<double>(), 0);
  EXPECT_LE(p["fabric"]["packets"]["ecn_marks"].get<double>(),
            p["fabric"]["packets"]["packets"].get<double>());
  EXPECT_FALSE(f["fabric"].contains("packets"));
  const CliRun text = trainsim("run " + std::string(kDumbbell) + " --fidelity packet");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_TRUE(has(text.out, "carried packet by packet")) << text.out;
  EXPECT_TRUE(has(text.out, "\npackets   ")) << text.out;
  EXPECT_TRUE(has(text.out, " ECN-marked, ")) << text.out;
  // Shared links count jobs that used a link at any time in the run, and say so.
  EXPECT_TRUE(has(text.out, "carried more than one job's traffic during the run, at the same "
                            "time or not"))
      << text.out;
  // Two jobs of 768 GPUs each: 1,536 GPUs of packets on one fabric, above the limit of 1,024.
  std::string big = "cluster:\n  preset: selene-a100\n  gpus: 1536\nmodel:\n  preset: gpt3-350m\n"
                    "parallel:\n  tp: 8\n  pp: 1\ntraining:\n  global_batch: 192\n"
                    "simulation:\n  fidelity: packet\njobs:\n  - {name: a, gpus: 768}\n"
                    "  - {name: b, gpus: 768}\n";
  const std::string path = temp_path("two_big_jobs.yaml");
  std::ofstream(path) << big;
  const CliRun refused = trainsim("run " + path);
  EXPECT_EQ(refused.code, 2) << refused.err;
  EXPECT_TRUE(has(refused.err, "the jobs together")) << refused.err;
  EXPECT_TRUE(has(refused.err, "1536 GPUs")) << refused.err;
  EXPECT_TRUE(has(refused.err, "--force")) << refused.err;
}

// The same two jobs at packet fidelity with two priority classes, one per job: the first job's
// packets always go first on the shared leaf-spine cables, so its DP transfer takes W / C as
// alone (extra below 3 % of W / C, against W / C in one class). The second job's waits for it,
// at most W / C (the whole of the first job's transfer; less where it fills the first job's
// gaps between ring steps) and it does wait (more than a third of that).
TEST(JobsCli, PriorityClassPerJobLetsTheFirstJobRunAsAlone) {
  const std::string args = std::string(kDumbbell) + " --set calibration.profile=" +
                           full_rate_profile() +
                           " --fidelity packet --set network.packet.priority_classes=2"
                           " --set network.packet.priority_by=job";
  const nlohmann::json p = run_json(args);
  const double C = 400e9 / 8;
  ASSERT_EQ(p["jobs"].size(), 2u);
  double extra[2], W[2];
  for (std::size_t i = 0; i < 2; ++i) {
    const auto& job = p["jobs"][i];
    W[i] = job["result"]["network"]["nic_bytes_per_gpu"].get<double>();
    extra[i] = exposed_dp(job["result"]["breakdown"]) - exposed_dp(job["alone"]["breakdown"]);
  }
  EXPECT_LT(std::abs(extra[0]), 0.03 * W[0] / C) << extra[0];
  EXPECT_LT(extra[1], 1.03 * W[0] / C);
  EXPECT_GT(extra[1], W[0] / C / 3);
  EXPECT_EQ(W[0], W[1]);
}

// With the datasheet profile the NIC is derated (efficiency e < 1): alone the NIC link is the
// bottleneck at e·C, together the shared cable at C / 2, so the extra time is W/C · (2 − 1/e),
// within the tail of unequal flows (flows of one job do not all end together).
TEST(JobsCli, DeratedNicsMoveTheBottleneckToTheSharedCable) {
  const nlohmann::json j = run_json(kDumbbell);
  const double C = 400e9 / 8;
  const double e = 0.94;  // calibrate/profiles/h100-sxm.json
  for (const auto& job : j["jobs"]) {
    const double W = job["result"]["network"]["nic_bytes_per_gpu"].get<double>();
    const double extra = exposed_dp(job["result"]["breakdown"]) - exposed_dp(job["alone"]["breakdown"]);
    EXPECT_NEAR(extra, W / C * (2 - 1 / e), 0.03 * W / C);
  }
}

TEST(JobsCli, JobsUnderTheirOwnLeavesDoNotSlowEachOther) {
  const std::string path =
      dumbbell_with("  - {name: a, hosts: [0, 1]}\n  - {name: b, hosts: [2, 3]}\n", "disjoint");
  const nlohmann::json j = run_json(path);
  for (const auto& job : j["jobs"]) {
    EXPECT_EQ(job["slowdown"].get<double>(), 1.0) << job["name"];
    EXPECT_EQ(job["iteration_time_s"], job["alone_iteration_time_s"]);
  }
  EXPECT_EQ(j["fabric"]["links_shared_by_jobs"], 0);
  for (const auto& c : j["fabric"]["link_classes"]) {
    if (c["class"] == "leaf->spine") {
      EXPECT_EQ(c["used"], 0);
    }
  }
  // The report: the page, and its JSON and CSV read back.
  const std::string dir = temp_path("jobs_report_dir");
  const CliRun rep = trainsim("run " + path + " --report " + dir);
  ASSERT_EQ(rep.code, 0) << rep.err;
  EXPECT_TRUE(has(slurp(dir + "/index.html"), "jobs-slowdown"));
  const nlohmann::json back = nlohmann::json::parse(slurp(dir + "/results.json"));
  EXPECT_EQ(back["jobs"][1]["slowdown"], 1.0);
  const std::string csv = slurp(dir + "/results.csv");
  EXPECT_TRUE(has(csv, "\"a\",2,hosts,0,1,")) << csv;
  // The text output names both jobs and the fabric.
  const CliRun text = trainsim("run " + path);
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_TRUE(has(text.out, "1.000×"));
  EXPECT_TRUE(has(text.out, "0 switch and NIC links carried more than one job's traffic"));
}

// A job that starts later is measured from its own start; b starts when a's DP all-reduce is
// under way, so the two overlap only in part and b slows down less than when they start together.
TEST(JobsCli, ALaterStartIsMeasuredFromTheJobsOwnStart) {
  const nlohmann::json together = run_json(kDumbbell);
  const double a_alone = together["jobs"][0]["alone_iteration_time_s"].get<double>();
  const std::string late = dumbbell_with(
      "  - {name: a, hosts: [0, 2]}\n  - {name: b, hosts: [1, 3], start_s: 0.072}\n", "late");
  const nlohmann::json j = run_json(late);
  EXPECT_EQ(j["jobs"][1]["start_s"], 0.072);
  const double b = j["jobs"][1]["iteration_time_s"].get<double>();
  EXPECT_GT(b, a_alone);
  EXPECT_LT(b, together["jobs"][1]["iteration_time_s"].get<double>());
  EXPECT_NEAR(j["fabric"]["makespan_s"].get<double>(),
              0.072 + b - (j["jobs"][1]["result"]["breakdown"]["gpu_variation_s"].get<double>() +
                          j["jobs"][1]["result"]["breakdown"]["global_sync_s"].get<double>()),
              1e-9);
  // Without a shared network (schedule fidelity) jobs do not meet.
  const nlohmann::json sched = run_json(std::string(kDumbbell) + " --fidelity schedule");
  for (const auto& job : sched["jobs"]) EXPECT_EQ(job["slowdown"].get<double>(), 1.0);
}

// Jobs of different lengths: a runs three iterations, b one. b shares only a's first iteration,
// which is then exactly the iteration of the two-job run; a's next two run alone. So a's mean
// iteration is (T_shared + 2 T_alone) / 3, and b's is the two-job run's.
TEST(JobsCli, IterationsRunBackToBackAndTheMeanIsReported) {
  const nlohmann::json both = run_json(kDumbbell);
  const double shared = both["jobs"][0]["iteration_time_s"].get<double>();
  const double alone = both["jobs"][0]["alone_iteration_time_s"].get<double>();
  const nlohmann::json j = run_json(dumbbell_with(
      "  - {name: a, hosts: [0, 2], iterations: 3}\n  - {name: b, hosts: [1, 3]}\n", "iters"));
  EXPECT_EQ(j["jobs"][0]["iterations"], 3);
  const auto scale = [](const nlohmann::json& job) {
    const auto& b = job["result"]["breakdown"];
    return b["gpu_variation_s"].get<double>() + b["global_sync_s"].get<double>();
  };
  const double sc = scale(both["jobs"][0]);
  EXPECT_NEAR(j["jobs"][0]["iteration_time_s"].get<double>() - sc,
              ((shared - sc) + 2 * (alone - sc)) / 3, 1e-12);
  EXPECT_NEAR(j["jobs"][1]["iteration_time_s"].get<double>(), shared, 1e-12);
  EXPECT_NEAR(j["fabric"]["makespan_s"].get<double>(), (shared - sc) + 2 * (alone - sc), 1e-12);
  // The mean iteration's breakdown still adds up to it.
  const auto& b = j["jobs"][0]["result"]["breakdown"];
  double sum = b["compute_s"].get<double>() + b["pipeline_bubble_s"].get<double>() +
               b["optimizer_s"].get<double>() + b["data_loading_s"].get<double>() + sc;
  for (const auto& [dim, t] : b["exposed_comm_s"].items()) sum += t.get<double>();
  EXPECT_NEAR(sum, j["jobs"][0]["iteration_time_s"].get<double>(), 1e-9);
  // Alone on its own servers, three iterations are three times the first.
  const nlohmann::json solo = run_json(
      dumbbell_with("  - {name: a, hosts: [0, 2], iterations: 3}\n", "solo"));
  EXPECT_NEAR(solo["jobs"][0]["iteration_time_s"].get<double>(), alone, 1e-12);
}

// Back-to-back iterations of a pipelined job repeat the first exactly, its breakdown included:
// every rank starts iteration k + 1 when the slowest one ends iteration k, from the first task of
// every stream (docs/program.md). PP 2 over the two servers of job a (one GPU each), 1F1B: the
// stages end an iteration at different times, and the reported breakdown (the critical rank's)
// has a bubble. Three iterations report the mean one, which must be the single iteration's.
TEST(JobsCli, IterationsOfAPipelinedJobRepeatTheFirstBreakdownIncluded) {
  const std::string pp2 = "  - {name: a, hosts: [0, 2]";
  const auto run = [&](const std::string& iterations, const std::string& name) {
    std::string text = slurp(dumbbell_with(pp2 + iterations + "}\n", name));
    const auto at = text.find("  pp: 1");
    EXPECT_NE(at, std::string::npos);
    text.replace(at, 7, "  pp: 2");
    const std::string path = temp_path(name + "-pp2.yaml");
    std::ofstream(path) << text;
    return run_json(path);
  };
  const nlohmann::json one = run("", "pp2-one");
  const nlohmann::json three = run(", iterations: 3", "pp2-three");
  ASSERT_EQ(three["jobs"][0]["iterations"], 3);
  const double t1 = one["jobs"][0]["iteration_time_s"].get<double>();
  EXPECT_NEAR(three["jobs"][0]["iteration_time_s"].get<double>(), t1, 1e-12 * t1);
  const auto& b1 = one["jobs"][0]["result"]["breakdown"];
  const auto& b3 = three["jobs"][0]["result"]["breakdown"];
  for (const char* k : {"compute_s", "pipeline_bubble_s", "optimizer_s", "data_loading_s"}) {
    EXPECT_NEAR(b3[k].get<double>(), b1[k].get<double>(), 1e-9 * t1) << k;
  }
  EXPECT_GT(b1["pipeline_bubble_s"].get<double>(), 0.0);
  for (const auto& [dim, t] : b1["exposed_comm_s"].items()) {
    EXPECT_NEAR(b3["exposed_comm_s"][dim].get<double>(), t.get<double>(), 1e-9 * t1) << dim;
  }
}

// `--compare` runs the jobs on each variant of the fabric: one row per (variant, job). On the
// dumbbell at 1:1 (two spines) the rings may still collide by ECMP; at 2:1 they always share.
TEST(JobsCli, CompareRunsEveryJobOnEachFabricVariant) {
  const CliRun r = trainsim(std::string("run ") + kDumbbell +
                            " --compare cluster.fabric.oversubscription=1,2 --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["variants"].size(), 2u);
  const nlohmann::json& two = j["variants"][1]["jobs"];
  EXPECT_EQ(j["variants"][1]["config"]["cluster.fabric.oversubscription"], "2");
  // The 2:1 variant is the scenario as written.
  const nlohmann::json direct = run_json(kDumbbell);
  EXPECT_EQ(two["jobs"][0]["iteration_time_s"], direct["jobs"][0]["iteration_time_s"]);
  EXPECT_LE(j["variants"][0]["jobs"]["jobs"][0]["slowdown"].get<double>(),
            two["jobs"][0]["slowdown"].get<double>());
  const CliRun text = trainsim(std::string("run ") + kDumbbell +
                               " --compare cluster.fabric.oversubscription=1,2");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_TRUE(has(text.out, "oversubscription=2  b"));
  EXPECT_TRUE(has(text.out, "links that carried more than one job's traffic"));
  const CliRun unknown = trainsim(std::string("run ") + kDumbbell +
                                  " --compare cluster.fabric.oversubscriptio=1,2");
  EXPECT_EQ(unknown.code, 2);
  EXPECT_TRUE(has(unknown.err, "`cluster.fabric.oversubscriptio`: unknown key")) << unknown.err;
  const CliRun report = trainsim(std::string("run ") + kDumbbell +
                                 " --compare cluster.fabric.oversubscription=1,2 --report " +
                                 temp_path("jobs_report"));
  EXPECT_EQ(report.code, 2);
  EXPECT_TRUE(has(report.err, "--report")) << report.err;
}

// On a terminal an event-driven run (and goodput) shows its progress with an ETA on stderr;
// piped, or with JSON output, it shows none; and the result is the same bytes either way. `script` (util-linux)
// gives the run a pseudo-terminal.
TEST(JobsCli, ProgressOnATerminalOnly) {
  if (trainsim::testing::shell("command -v script > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "no `script` to give the run a terminal";
  }
  const std::string tty_out = temp_path("tty_result.txt"), tty_log = temp_path("tty_log.txt");
  for (const std::string& scenario :
       {std::string("scenarios/examples/megatron-1.7b-32xa100.yaml --fidelity flow"),
        std::string(kDumbbell)}) {
    const std::string cmd = std::string("script -qec \"") + TRAINSIM_BINARY + " run " + scenario +
                            " -o " + tty_out + "\" /dev/null > " + tty_log + " 2>&1";
    ASSERT_EQ(trainsim::testing::shell(cmd), 0) << slurp(tty_log);
    EXPECT_TRUE(has(slurp(tty_log), "ETA")) << slurp(tty_log);
    const CliRun piped = trainsim("run " + scenario);
    ASSERT_EQ(piped.code, 0) << piped.err;
    EXPECT_FALSE(has(piped.err, "ETA")) << piped.err;
    EXPECT_EQ(slurp(tty_out), piped.out);
    const std::string json_cmd = std::string("script -qec \"") + TRAINSIM_BINARY + " run " +
                                 scenario + " --format json -o " + tty_out + "\" /dev/null > " +
                                 tty_log + " 2>&1";
    ASSERT_EQ(trainsim::testing::shell(json_cmd), 0) << slurp(tty_log);
    EXPECT_FALSE(has(slurp(tty_log), "ETA")) << slurp(tty_log);
  }
  // goodput: one progress line per checkpoint interval searched.
  const std::string gp = std::string("script -qec \"") + TRAINSIM_BINARY +
                         " goodput --trials 20 -o " + tty_out + "\" /dev/null > " + tty_log +
                         " 2>&1";
  ASSERT_EQ(trainsim::testing::shell(gp), 0) << slurp(tty_log);
  EXPECT_TRUE(has(slurp(tty_log), "checkpoint intervals")) << slurp(tty_log);
  const CliRun piped = trainsim("goodput --trials 20");
  ASSERT_EQ(piped.code, 0) << piped.err;
  EXPECT_FALSE(has(piped.err, "ETA"));
  EXPECT_EQ(slurp(tty_out), piped.out);
}

TEST(JobsCli, BadJobListsExitTwoNamingTheField) {
  struct Case {
    std::string jobs, expect;
  };
  const Case cases[] = {
      {"  - {name: a, gpus: 4}\n  - {name: b, gpus: 2}\n",
       "the jobs need 6 GPUs; the cluster has 4"},
      {"  - {name: a, hosts: [0, 2]}\n  - {name: b, hosts: [2, 3]}\n",
       "`jobs[1].hosts`: server 2 is also in job `a`'s hosts"},
      {"  - {name: a, hosts: [0, 7]}\n", "server 7 is outside the cluster's servers 0-3"},
      {"  - {name: a, gpus: 2, placement: scattered}\n", "unknown placement `scattered`"},
      {"  - {name: a, gpus: 2, cluster: {nic_gbps: 200}}\n",
       "`jobs[0].cluster.nic_gbps`: describes the shared cluster or the simulation, not one job"},
      {"  - {name: a, gpus: 2, parallel: {tpp: 2}}\n", "`jobs[0].parallel.tpp`: unknown key"},
      {"  - {name: a, placement: packed}\n", "has no `gpus:`"},
      {"  - {name: a, hosts: [3-1]}\n", "runs backwards"},
      {"  - {name: a, hosts: [0, 1], iterations: 0}\n", "`jobs[0].iterations`"},
      {"  {name: a}\n", "`jobs`: expected a list of jobs"},
      {"  - {name: a, gpus: 2, parallel: {tp: 4}}\n", "job `a`"},
  };
  for (const Case& c : cases) {
    const std::string path = dumbbell_with(c.jobs, "bad");
    const CliRun r = trainsim("run " + path);
    EXPECT_EQ(r.code, c.jobs.find("tp: 4") != std::string::npos ? 3 : 2) << c.jobs << r.err;
    EXPECT_TRUE(has(r.err, c.expect)) << c.jobs << " -> " << r.err;
    EXPECT_TRUE(has(r.err, path)) << r.err;
  }
  // Commands of one job refuse a scenario of several, naming the file and `jobs`.
  for (const std::string& cmd : {std::string("sweep"), std::string("goodput --trials 10"),
                                 std::string("execute --backend fake")}) {
    const CliRun one = trainsim(cmd + " " + kDumbbell);
    EXPECT_EQ(one.code, 2) << cmd << one.err;
    EXPECT_TRUE(has(one.err, std::string(kDumbbell) + ":32: `jobs`: ")) << cmd << one.err;
    EXPECT_TRUE(has(one.err, "takes a scenario of one job")) << one.err;
  }
  // A trace draws one job's ranks.
  const CliRun trace = trainsim(std::string("run ") + kDumbbell + " --trace /dev/null");
  EXPECT_EQ(trace.code, 2);
  EXPECT_TRUE(has(trace.err, "--trace"));
}

// What a new user's trial found wrong in the errors of job lists: an entry key's typo had no
// `jobs[i].` and no suggestion; keys inside an entry were named without it (docs say
// `jobs[i].<key>`); two jobs of one name were accepted as two rows no one could tell apart; a
// server listed twice in one job's hosts was "also in job `a`'s hosts" (its own).
TEST(JobsCli, EntryErrorsNameTheEntryAndTheKey) {
  struct Case {
    std::string jobs, expect;
  };
  const Case cases[] = {
      {"  - {name: a, gpus: 2, placment: spread}\n",
       "`jobs[0].placment`: unknown key (did you mean `placement`?)"},
      {"  - {name: a, gpus: 2}\n  - {name: b, gpus: 2, iteratons: 2}\n",
       "`jobs[1].iteratons`: unknown key (did you mean `iterations`?)"},
      {"  - {name: a, gpus: 2, parallel: {tpp: 2}}\n",
       "`jobs[0].parallel.tpp`: unknown key (did you mean `parallel.tp`?)"},
      {"  - {name: a, gpus: 2, network: {routing: {qps_per_connection: 4}}}\n",
       "`jobs[0].network.routing.qps_per_connection`: describes the shared cluster"},
      {"  - {name: a, gpus: 2}\n  - {name: a, gpus: 2}\n",
       "`jobs[1].name`: job name `a` is also jobs[0]'s"},
      {"  - {name: a, hosts: [0, 0]}\n", "`jobs[0].hosts`: server 0 is listed twice"},
      {"  - {name: a, hosts: \"0-2,1\"}\n", "`jobs[0].hosts`: server 1 is listed twice"},
  };
  for (const Case& c : cases) {
    const std::string path = dumbbell_with(c.jobs, "entry");
    const CliRun r = trainsim("run " + path);
    EXPECT_EQ(r.code, 2) << c.jobs << r.err;
    EXPECT_TRUE(has(r.err, path + ":")) << r.err;
    EXPECT_TRUE(has(r.err, c.expect)) << c.jobs << " -> " << r.err;
  }
}

// `--compare` without `=` or without values answered in `--vary`'s words, and stragglers at
// analytic fidelity named `schedule` and `flow` only, though packet runs them too.
TEST(JobsCli, CompareAndStragglerErrorsNameTheirFlagAndEveryFidelity) {
  for (const std::string& arg : {std::string("parallel.tp"), std::string("parallel.tp=")}) {
    const CliRun r = trainsim(std::string("run ") + kDumbbell + " --compare " + arg);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_TRUE(has(r.err, "--compare")) << r.err;
    EXPECT_FALSE(has(r.err, "--vary")) << r.err;
    EXPECT_FALSE(has(r.err, "sweep")) << r.err;
  }
  EXPECT_TRUE(has(trainsim(std::string("run ") + kDumbbell + " --compare parallel.tp").err,
                  "`--compare parallel.tp` has no `=`"));
  EXPECT_TRUE(has(trainsim(std::string("run ") + kDumbbell + " --compare parallel.tp=").err,
                  "no values to compare"));
  // Stragglers at analytic fidelity: every event-driven fidelity is named, packet included.
  const CliRun straggler =
      trainsim("run --set simulation.straggler_rank=0 --set simulation.straggler_factor=1.5");
  EXPECT_EQ(straggler.code, 2) << straggler.err;
  EXPECT_TRUE(has(straggler.err, "(`schedule`, `flow` or `packet`)")) << straggler.err;
}

// A fabric file too small for the cluster of several jobs is the cluster's problem, not the
// first job's ("job `a`: ... the job needs 4"), and a NIC rate given beside a fabric file says
// that flow and packet fidelity use the file's cables.
TEST(JobsCli, AFabricFileTooSmallIsTheClustersProblem) {
  const std::string small = temp_path("three_servers.dot");
  std::ofstream(small) << "graph f {\n"
                          "  g0 [kind=gpu, server=0]; n0 [kind=nic, server=0];\n"
                          "  g1 [kind=gpu, server=1]; n1 [kind=nic, server=1];\n"
                          "  g2 [kind=gpu, server=2]; n2 [kind=nic, server=2];\n"
                          "  t0 [kind=switch];\n"
                          "  g0 -- n0 [gbps=400]; g1 -- n1 [gbps=400]; g2 -- n2 [gbps=400];\n"
                          "  n0 -- t0 [gbps=400]; n1 -- t0 [gbps=400]; n2 -- t0 [gbps=400];\n"
                          "}\n";
  const CliRun r =
      trainsim(std::string("run ") + kDumbbell + " --set cluster.fabric.file=" + small);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(has(r.err, "`cluster.fabric.file`: the fabric holds 3 GPUs, fewer than "
                         "cluster.gpus = 4"))
      << r.err;
  EXPECT_FALSE(has(r.err, "job `")) << r.err;
  // One job of 2 GPUs on the 3-GPU file, its NICs asked at 100 Gb/s: noted as not used there.
  const CliRun one = trainsim("run --set cluster.gpus=2 --set cluster.gpus_per_node=1 "
                              "--set cluster.nics_per_node=1 --set model.preset=gpt3-350m "
                              "--set parallel.tp=1 --set parallel.pp=1 --set training.global_batch=8 "
                              "--set cluster.nic_gbps=100 --set cluster.fabric.file=" + small +
                              " --fidelity flow --format json");
  ASSERT_EQ(one.code, 0) << one.err;
  const std::string notes = nlohmann::json::parse(one.out)["notes"].dump();
  EXPECT_TRUE(has(notes, "cluster.nic_gbps = 100 prices the analytic and schedule fidelities "
                         "only: flow and packet fidelity take every cable's rate from " + small))
      << notes;
}

// The cluster the jobs share is checked and described as a whole (found by a new user's trial):
//   * `--compare` of failed cables or switches on the dumbbell (2 leaves, 1 spine, 2 cables)
//     checked them against each job's own 2-GPU fabric, a single switch, and refused "this
//     fabric has 0 switch-to-switch cables"; failing one of its 2 cables cuts job a's ring,
//     as `--set` says: exit 3 naming the lost path;
//   * the notes of the cluster (here the 4:1 asked of a tier built at 2:1, whole cables) were
//     not printed for a multi-job run.
TEST(JobsCli, TheSharedClusterIsCheckedAndNotedAsAWhole) {
  const CliRun cable = trainsim(
      "run scenarios/examples/two-jobs-dumbbell.yaml --compare cluster.fabric.failed_cables=0,1");
  EXPECT_EQ(cable.code, 3) << cable.err;
  EXPECT_EQ(cable.err.find("0 switch-to-switch cables"), std::string::npos) << cable.err;
  EXPECT_NE(cable.err.find("no path"), std::string::npos) << cable.err;
  const CliRun spine = trainsim(
      "run scenarios/examples/two-jobs-dumbbell.yaml --compare cluster.fabric.failed_switches=spine0");
  EXPECT_EQ(spine.code, 3) << spine.err;
  EXPECT_EQ(spine.err.find("no switch named"), std::string::npos) << spine.err;
  const CliRun text = trainsim(
      "run scenarios/examples/two-jobs-dumbbell.yaml --set cluster.fabric.oversubscription=4");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("built at 2.00:1"), std::string::npos) << text.out;
  const CliRun json = trainsim(
      "run scenarios/examples/two-jobs-dumbbell.yaml --set cluster.fabric.oversubscription=4 "
      "--format json");
  ASSERT_EQ(json.code, 0) << json.err;
  EXPECT_NE(nlohmann::json::parse(json.out)["notes"].dump().find("built at 2.00:1"),
            std::string::npos);
  // The cluster resolves as one replica per GPU; notes about that layout are no job's
  // ("parallel.dp = 4 (auto: 4 GPUs / (tp 1 ...))" was printed beside the jobs' own layouts).
  EXPECT_EQ(nlohmann::json::parse(json.out)["notes"].dump().find("parallel."), std::string::npos)
      << json.out;
  EXPECT_EQ(text.out.find("parallel.dp ="), std::string::npos) << text.out;
}

}  // namespace
