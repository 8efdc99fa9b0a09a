// A GPU the presets do not hold, described by cluster.gpu_spec.* on the preset of its
// architecture, run through the real executable and checked by hand:
//   * naming the GPU alone changes nothing but the name: the same iteration, bit for bit, with
//     the profile `datasheet-<preset>~<name>`;
//   * the datasheet numbers reach the model: the HBM capacity is hbm_gib · 2³⁰ bytes, MFU is read
//     against the new bf16 peak, and halving the NVLink rate halves the NVLink bus bandwidth of
//     the profile (370 GB/s on the H100), so a 1 GiB ring all-reduce inside one 8-GPU server takes
//     2·7/8·2³⁰·(1/185e9 − 1/370e9) s = 5.0788 ms longer (the latency terms are the same);
//   * bad descriptions are refused naming the key: an fp8 rate on a GPU without fp8, a negative
//     number, a measured profile made for another GPU.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/cli_runner.h"

namespace {

using trainsim::testing::CliRun;
using trainsim::testing::has;
using trainsim::testing::trainsim;

const std::string kScenario = "run scenarios/examples/llama3-8b-64xh100.yaml --format json";

nlohmann::json run_json(const std::string& sets) {
  const CliRun r = trainsim(kScenario + " " + sets);
  EXPECT_EQ(r.code, 0) << r.err;
  return r.code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

TEST(GpuSpec, ANameAloneChangesOnlyTheName) {
  const nlohmann::json preset = run_json("");
  const nlohmann::json named = run_json("--set cluster.gpu_spec.name=h100-lab");
  ASSERT_TRUE(named.contains("iteration_time_s"));
  EXPECT_EQ(named["iteration_time_s"].get<double>(), preset["iteration_time_s"].get<double>());
  EXPECT_EQ(named["calibration"]["profile"], "datasheet-h100-sxm~h100-lab");
  EXPECT_EQ(named["calibration"]["gpu"], "h100-lab");
  EXPECT_EQ(named["config"]["cluster.gpu_spec.name"], "h100-lab");
}

TEST(GpuSpec, DatasheetNumbersReachTheModel) {
  const nlohmann::json preset = run_json("");
  const nlohmann::json h20 = run_json(
      "--set cluster.gpu_spec.name=h20 --set cluster.gpu_spec.bf16_tflops=148 "
      "--set cluster.gpu_spec.fp8_tflops=296 --set cluster.gpu_spec.hbm_gib=96 "
      "--set cluster.gpu_spec.hbm_tb_per_s=4");
  ASSERT_TRUE(h20.contains("memory"));
  EXPECT_EQ(h20["memory"]["capacity_bytes"].get<double>(), 96.0 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(h20["peak_tflops_per_gpu"].get<double>(), 148.0);
  // A sixth of the tensor-core rate: a compute-bound step is several times slower, and MFU is
  // read against 148 TFLOP/s (model FLOPs / (time · GPUs · peak)).
  EXPECT_GT(h20["iteration_time_s"].get<double>(), 3.0 * preset["iteration_time_s"].get<double>());
  const double flops = h20["model_flops_per_iteration"];
  EXPECT_NEAR(h20["mfu"].get<double>(),
              flops / (h20["iteration_time_s"].get<double>() * 64 * 148e12), 1e-12);
  bool noted = false;
  for (const auto& n : h20["notes"]) noted = noted || has(n.get<std::string>(), "`h20` is the h100-sxm preset");
  EXPECT_TRUE(noted) << h20["notes"].dump();
}

double all_reduce_us(const std::string& sets) {
  const CliRun r = trainsim(
      "collective --op all_reduce --ranks 8 --cluster dgx-h100-superpod --sizes 1G --algo ring "
      "--proto Simple --format json --set cluster.gpu=h100-sxm " + sets);
  EXPECT_EQ(r.code, 0) << r.err;
  return r.code == 0 ? nlohmann::json::parse(r.out)["rows"][0]["time_us"].get<double>() : 0.0;
}

TEST(GpuSpec, NvlinkRateScalesTheNvlinkBusBandwidth) {
  const double preset = all_reduce_us("");
  const double half = all_reduce_us("--set cluster.gpu_spec.nvlink_gb_per_s=225");
  const double bytes = 1073741824.0;
  const double hand_us = 2.0 * 7.0 / 8.0 * bytes * (1.0 / 185e9 - 1.0 / 370e9) * 1e6;
  EXPECT_NEAR(half - preset, hand_us, 1e-6 * hand_us);
}

TEST(GpuSpec, BadDescriptionsAreRefusedNamingTheKey) {
  const CliRun fp8 = trainsim(kScenario +
                              " --set cluster.gpu=a100-80gb --set cluster.preset=selene-a100 "
                              "--set cluster.gpu_spec.fp8_tflops=600");
  EXPECT_EQ(fp8.code, 2);
  EXPECT_TRUE(has(fp8.err, "cluster.gpu_spec.fp8_tflops")) << fp8.err;
  EXPECT_TRUE(has(fp8.err, "no fp8 tensor cores")) << fp8.err;
  const CliRun negative = trainsim(kScenario + " --set cluster.gpu_spec.hbm_gib=-1");
  EXPECT_EQ(negative.code, 2);
  EXPECT_TRUE(has(negative.err, "cluster.gpu_spec.hbm_gib")) << negative.err;
  const CliRun profile = trainsim(kScenario +
                                  " --set cluster.gpu_spec.name=h20 "
                                  "--set calibration.profile=calibrate/profiles/h100-sxm.json");
  EXPECT_EQ(profile.code, 2);
  EXPECT_TRUE(has(profile.err, "was made for GPU `h100-sxm`, the cluster has `h20`")) << profile.err;
}

}  // namespace
