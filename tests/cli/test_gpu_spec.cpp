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
  bool channels = false;  // the note says the NCCL channel count is the preset's, and its key
  for (const auto& n : h20["notes"]) {
    const std::string t = n.get<std::string>();
    noted = noted || has(t, "`h20` is the h100-sxm preset");
    channels = channels || (has(t, "keeps the preset's NCCL channel count") &&
                            has(t, "collectives.comm_sms"));
  }
  EXPECT_TRUE(noted) << h20["notes"].dump();
  EXPECT_TRUE(channels) << h20["notes"].dump();
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

// A new 16-bit peak alone carries the fp8 peak with it at the preset's ratio (H100: 1,979 /
// 989): fp8 training on a faster GPU was priced at the old fp8 rate, slower than bf16.
TEST(GpuSpec, ANewBf16PeakScalesTheFp8PeakAndFp8BelowBf16IsRefused) {
  const nlohmann::json fp8 =
      run_json("--set training.precision=fp8 --set cluster.gpu_spec.bf16_tflops=1978");
  ASSERT_TRUE(fp8.contains("peak_tflops_per_gpu"));
  EXPECT_DOUBLE_EQ(fp8["peak_tflops_per_gpu"].get<double>(), 1979.0 * 2);
  const CliRun low = trainsim(kScenario + " --set cluster.gpu_spec.fp8_tflops=500");
  EXPECT_EQ(low.code, 2) << low.err;
  EXPECT_TRUE(has(low.err, "`cluster.gpu_spec.fp8_tflops`: an fp8 peak of 500")) << low.err;
}

// NVLS on a GPU whose calibration has no NVLS bandwidth changed nothing while the note said
// "with NVLS"; a number below any GPU's, or written in hexadecimal, is a slip, not a GPU.
TEST(GpuSpec, DescriptionsThatCannotBePricedAreRefused) {
  const struct {
    const char* sets;
    const char* message;
  } cases[] = {
      {"--set cluster.gpu=a100-80gb --set cluster.preset=selene-a100 --set training.precision=bf16 "
       "--set cluster.gpu_spec.nvls=true",
       "`cluster.gpu_spec.nvls`: cluster.gpu a100-80gb has no NVLink SHARP"},
      {"--set cluster.gpu_spec.bf16_tflops=1e-9", "less than any GPU has"},
      {"--set cluster.gpu_spec.hbm_tb_per_s=1e-12", "less than any GPU has"},
      {"--set cluster.gpu_spec.bf16_tflops=0x10", "`cluster.gpu_spec.bf16_tflops`: expected a finite number"},
  };
  for (const auto& c : cases) {
    const CliRun r = trainsim(kScenario + " " + c.sets);
    EXPECT_EQ(r.code, 2) << c.sets << "\n" << r.err;
    EXPECT_TRUE(has(r.err, c.message)) << c.sets << "\n" << r.err;
  }
}

// Overlap never exposes more communication than running in turn: with fewer SMs than an
// overlapped collective's NCCL channels (8), the analytic share of the GPU a collective takes
// stops at the whole GPU, as the executor's does (one SM exposed 3.4× the TP time).
TEST(GpuSpec, AnOverlappedCollectiveTakesAtMostTheWholeGpu) {
  const std::string one_sm = "--set cluster.gpu_spec.sms=1";
  const nlohmann::json overlapped = run_json(one_sm);
  const nlohmann::json in_turn =
      run_json(one_sm + " --set optimizations.tp_overlap=false --set optimizations.dp_overlap=false");
  ASSERT_TRUE(overlapped.contains("iteration_time_s"));
  ASSERT_TRUE(in_turn.contains("iteration_time_s"));
  // (Compute may differ by the decomposed GEMMs' own cost; the exposed communication may not.)
  for (const char* dim : {"tp", "dp"}) {
    EXPECT_LE(overlapped["breakdown"]["exposed_comm_s"][dim].get<double>(),
              in_turn["breakdown"]["exposed_comm_s"][dim].get<double>() * (1 + 1e-12))
        << dim;
  }
}

// A GPU on another GPU's cluster preset keeps that cluster (servers, NICs, fabric), and says so.
TEST(GpuSpec, AGpuOnAnotherGpusClusterIsNoted) {
  const CliRun r = trainsim("run --set cluster.gpu=h100-sxm --set cluster.gpus=1024 "
                            "--set parallel.pp=4 --set training.global_batch=512");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "cluster.gpu = h100-sxm on the megascale-ampere cluster preset, which "
                         "is made for a100-80gb"))
      << r.out;
  EXPECT_TRUE(has(r.out, "cluster.preset=dgx-h100-superpod")) << r.out;
}

}  // namespace
