// `trainsim run` outputs checked against the figures they are made of, through the real CLI: a
// utilisation is its bytes over capacity × the executed iteration, whatever the fidelity; the
// text names each figure's inputs; every output names its seed; a trace adds up to the breakdown.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/cli_runner.h"

namespace trainsim {
namespace {

using nlohmann::json;
using testing::CliRun;
using testing::trainsim;

// Llama 3 8B on 64 H100s (TP 2, DP 32: its TP all-gathers and reduce-scatters run on NVLink),
// with fewer layers to keep the event-driven runs short.
const std::string kLlama8b = "scenarios/examples/llama3-8b-64xh100.yaml --set model.layers=8";
constexpr double kH100NvlinkBps = 450e9;  // per direction (scenarios/presets.cpp)

json run_json(const std::string& args) {
  const CliRun r = trainsim("run " + args + " --format json");
  EXPECT_EQ(r.code, 0) << r.err;
  return r.code == 0 ? json::parse(r.out) : json::object();
}

// network.nvlink_utilization = nvlink_bytes_per_gpu / (NVLink bandwidth × iteration_time_s) at
// every fidelity: the flow fidelity used to keep the analytic run's figure, over the analytic
// iteration time.
TEST(RunOutputs, NvlinkUtilizationIsOverTheExecutedIteration) {
  for (const char* fidelity : {"analytic", "schedule", "flow"}) {
    const json j = run_json(kLlama8b + " --fidelity " + fidelity);
    ASSERT_TRUE(j.contains("network")) << fidelity;
    const double bytes = j["network"]["nvlink_bytes_per_gpu"].get<double>();
    const double iter = j["iteration_time_s"].get<double>();
    ASSERT_GT(bytes, 0) << fidelity;
    EXPECT_NEAR(j["network"]["nvlink_utilization"].get<double>(),
                bytes / (kH100NvlinkBps * iter), 1e-12)
        << fidelity << " fidelity, iteration " << iter << " s";
  }
}

// The text's network line gives each utilisation with the inputs it is made of, and they make it:
// NVLink = bytes per GPU / (bandwidth × iteration); at schedule fidelity the NICs likewise over
// the GPU's share of them; at flow fidelity the NICs' figure is said to be the mean NIC uplink of
// the routed flows (and is the nic-> class's mean), the link classes are said to be the routed
// flows only, and classes that carried nothing are named, not dropped silently.
TEST(RunOutputs, TextNetworkFiguresFollowFromTheirInputs) {
  for (const char* fidelity : {"schedule", "flow"}) {
    const CliRun t = trainsim("run " + kLlama8b + " --fidelity " + fidelity);
    ASSERT_EQ(t.code, 0) << t.err;
    const json j = run_json(kLlama8b + " --fidelity " + fidelity);
    const auto& net = j["network"];
    const double iter = j["iteration_time_s"].get<double>();
    const std::string nv = fmt::format(
        "NVLink {:.1f} % busy ({:.2f} GB per GPU over 450 GB/s × {:.3f} s",
        100 * net["nvlink_utilization"].get<double>(),
        net["nvlink_bytes_per_gpu"].get<double>() / 1e9, iter);
    EXPECT_TRUE(testing::has(t.out, nv)) << nv << "\n" << t.out;
    // The printed inputs give the printed figure.
    EXPECT_NEAR(100 * net["nvlink_bytes_per_gpu"].get<double>() / (450e9 * iter),
                100 * net["nvlink_utilization"].get<double>(), 1e-9);
    if (std::string(fidelity) == "schedule") {
      const std::string nic = fmt::format(
          "NICs {:.1f} % busy ({:.2f} GB per GPU over its 50 GB/s share of the NICs × {:.3f} s)",
          100 * net["nic_utilization"].get<double>(), net["nic_bytes_per_gpu"].get<double>() / 1e9,
          iter);
      EXPECT_TRUE(testing::has(t.out, nic)) << nic << "\n" << t.out;
      EXPECT_NEAR(net["nic_bytes_per_gpu"].get<double>() / (50e9 * iter),
                  net["nic_utilization"].get<double>(), 1e-12);
      continue;
    }
    EXPECT_TRUE(testing::has(t.out, fmt::format("NICs {:.1f} % busy (mean NIC uplink: routed flows' "
                                                "wire bytes over 50 GB/s × {:.3f} s",
                                                100 * net["nic_utilization"].get<double>(), iter)))
        << t.out;
    EXPECT_TRUE(testing::has(t.out, "busiest / mean utilisation of the routed flows")) << t.out;
    bool nic_class = false;
    std::string idle;
    for (const auto& c : net["link_classes"]) {
      const std::string name = c["class"];
      if (name.rfind("nic->", 0) == 0 && c["used"].get<int>() > 0) {
        nic_class = true;
        EXPECT_DOUBLE_EQ(c["mean_utilization"].get<double>(), net["nic_utilization"].get<double>());
      }
      if (c["used"].get<int>() == 0) idle += (idle.empty() ? "" : ", ") + name;
    }
    EXPECT_TRUE(nic_class);
    if (!idle.empty()) {
      EXPECT_TRUE(testing::has(t.out, "carried nothing (not listed): " + idle)) << t.out;
    }
  }
}

// Every output names the seed: the trace's otherData (with the calibration profile's version),
// the text header of a multi-job run and of --compare, as a single run's header does.
TEST(RunOutputs, OutputsNameTheSeedAndProfileVersion) {
  const std::string trace = testing::temp_path("seed-trace.json");
  const json j = run_json(kLlama8b + " --fidelity schedule --set simulation.seed=7 --trace " + trace);
  const json doc = json::parse(testing::slurp(trace));
  EXPECT_EQ(doc["otherData"]["seed"], 7);
  EXPECT_EQ(doc["otherData"]["profile_version"], j["calibration"]["version"]);
  EXPECT_EQ(doc["otherData"]["profile"], j["calibration"]["profile"]);
  std::remove(trace.c_str());

  const CliRun jobs = trainsim("run scenarios/examples/two-jobs-dumbbell.yaml --set simulation.seed=5");
  ASSERT_EQ(jobs.code, 0) << jobs.err;
  const std::string first = jobs.out.substr(0, jobs.out.find('\n'));
  EXPECT_TRUE(testing::has(first, " · seed 5")) << first;
  const CliRun jobs_json =
      trainsim("run scenarios/examples/two-jobs-dumbbell.yaml --set simulation.seed=5 --format json");
  ASSERT_EQ(jobs_json.code, 0) << jobs_json.err;
  EXPECT_EQ(json::parse(jobs_json.out)["seed"], 5);

  const CliRun cmp = trainsim("run " + kLlama8b + " --compare parallel.tp=2,4");
  ASSERT_EQ(cmp.code, 0) << cmp.err;
  const std::string head = cmp.out.substr(0, cmp.out.find('\n'));
  EXPECT_TRUE(testing::has(head, " · seed 1")) << head;
  const CliRun seeds = trainsim("run " + kLlama8b + " --compare simulation.seed=3,4");
  ASSERT_EQ(seeds.code, 0) << seeds.err;
  const std::string seeds_head = seeds.out.substr(0, seeds.out.find('\n'));
  EXPECT_TRUE(testing::has(seeds_head, " · seeds 3, 4")) << seeds_head;
  // Variants of two GPUs run on two profiles, and the header names both.
  const CliRun gpus = trainsim("run " + kLlama8b + " --compare cluster.gpu=h100-sxm,h200-sxm");
  ASSERT_EQ(gpus.code, 0) << gpus.err;
  const std::string gpus_head = gpus.out.substr(0, gpus.out.find('\n'));
  EXPECT_TRUE(testing::has(gpus_head, "calibration datasheet-h100-sxm v9, datasheet-h200-sxm v9"))
      << gpus_head;
}

// The critical rank of a schedule-fidelity run, then its trace: events of the compute stream
// (tid 1) of that rank.
struct CriticalTrace {
  json result;
  std::vector<json> compute;  // its compute-stream events, in order
  double last_end_us = 0;     // over every event of the trace
};

CriticalTrace critical_trace(const std::string& args) {
  CriticalTrace out;
  const json first = run_json(args);
  const int crit = first["execution"]["critical_rank"].get<int>();
  const std::string trace = testing::temp_path("critical-trace.json");
  out.result = run_json(args + " --trace " + trace + " --trace-ranks " + std::to_string(crit));
  EXPECT_EQ(out.result["execution"]["critical_rank"].get<int>(), crit);
  const json doc = json::parse(testing::slurp(trace));
  std::remove(trace.c_str());
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    out.last_end_us = std::max(out.last_end_us, e["ts"].get<double>() + e["dur"].get<double>());
    if (e["pid"].get<int>() == crit && e["tid"].get<int>() == 1) out.compute.push_back(e);
  }
  return out;
}

// The trace lasts the iteration: after the critical rank's last task its compute stream ends with
// "slowest-GPU pacing" and "global sync", as long as their breakdown rows (the trace used to stop
// that much short of the iteration).
TEST(RunOutputs, TraceLastsTheIteration) {
  const CriticalTrace t = critical_trace(kLlama8b + " --fidelity schedule");
  const json& b = t.result["breakdown"];
  const double iter_us = 1e6 * t.result["iteration_time_s"].get<double>();
  ASSERT_GT(b["gpu_variation_s"].get<double>(), 0);
  ASSERT_GT(b["global_sync_s"].get<double>(), 0);
  EXPECT_NEAR(t.last_end_us, iter_us, 2e-3);
  ASSERT_GE(t.compute.size(), 2u);
  const json& pacing = t.compute[t.compute.size() - 2];
  const json& sync = t.compute.back();
  EXPECT_EQ(pacing["name"], "slowest-GPU pacing");
  EXPECT_EQ(sync["name"], "global sync");
  EXPECT_EQ(sync["cat"], "scale");
  EXPECT_NEAR(pacing["dur"].get<double>(), 1e6 * b["gpu_variation_s"].get<double>(), 2e-3);
  EXPECT_NEAR(sync["dur"].get<double>(), 1e6 * b["global_sync_s"].get<double>(), 2e-3);
  EXPECT_NEAR(sync["ts"].get<double>() + sync["dur"].get<double>(), iter_us, 2e-3);
}

// docs/program.md, "The breakdown comes from the timeline": a kernel slowed by collectives that
// hold SMs is drawn over its whole time, with args.unslowed_us (counted in compute) and
// args.slowed_us (counted in exposed communication). Over the critical rank's compute-category
// events Σ unslowed_us (dur where absent) = breakdown.compute_s = the compute kinds' total in
// task_kinds, and Σ slowed_us is part of the exposed rows. MegaScale 175B with its overlaps
// (TP and DP collectives beside GEMMs), cut to 256 GPUs and 16 layers.
TEST(RunOutputs, TraceSplitsSlowedKernelsAsTheBreakdownDoes) {
  const CriticalTrace t = critical_trace(
      "scenarios/megascale-175b-12288.yaml --set cluster.gpus=256 --set model.layers=16 "
      "--set parallel.vpp=2 --set training.global_batch=64 --fidelity schedule");
  const json& b = t.result["breakdown"];
  double unslowed = 0, slowed = 0, drawn = 0;
  std::size_t slowed_events = 0, events = 0;
  for (const json& e : t.compute) {
    if (e["cat"] != "compute") continue;
    ++events;
    drawn += e["dur"].get<double>();
    if (e["args"].contains("unslowed_us")) {
      ++slowed_events;
      const double u = e["args"]["unslowed_us"].get<double>();
      const double l = e["args"]["slowed_us"].get<double>();
      EXPECT_NEAR(u + l, e["dur"].get<double>(), 1e-6);
      EXPECT_GT(l, 0);
      unslowed += u;
      slowed += l;
    } else {
      unslowed += e["dur"].get<double>();
    }
  }
  ASSERT_GT(slowed_events, 0u) << "no kernel was slowed: the test shows nothing";
  const double compute_us = 1e6 * b["compute_s"].get<double>();
  // Each event is rounded to the nanosecond.
  EXPECT_NEAR(unslowed, compute_us, 1e-3 * static_cast<double>(events));
  EXPECT_GT(drawn, compute_us + 1.0);  // the trace draws the slowed kernels stretched
  double kinds = 0;
  for (const auto& k : t.result["task_kinds"]) {
    if (k["category"] == "compute") kinds += k["total_s"].get<double>();
  }
  EXPECT_NEAR(1e6 * kinds, compute_us, 1e-6 * compute_us);
  double exposed = 0;
  for (const auto& [dim, v] : b["exposed_comm_s"].items()) exposed += v.get<double>();
  EXPECT_LE(slowed, 1e6 * exposed + 1e-3 * static_cast<double>(slowed_events));
}

}  // namespace
}  // namespace trainsim
