// The memory report of `trainsim run`, run as the real executable, checked by hand:
//   * GPipe runs every forward before any backward, so the last stage keeps every micro-batch's
//     loss logits until its backward (1F1B keeps one): Llama 3 8B on 16 GPUs, TP 1, PP 2, full
//     recompute, 8 and then 4 micro-batches per pipeline; the last stage's activations are
//     m · (16 layers' checkpoints + one micro-batch's fp32 and 16-bit logits), proportional to m
//     (they held the logits once: 8·16·L + logits against 4·16·L + logits), the logits being
//     8,192 tokens × 128,000 / TP 1 × 6 B = 6,291,456,000 B a micro-batch; 1F1B's last stage,
//     one micro-batch in flight, holds exactly one GPipe micro-batch's share;
//   * `memory.peak_stage` says where the peak is: GPT-3 175B, PP 8 with 6 layers on each end
//     stage and 14 on the middle ones, 1F1B, peaks on stage 1, which holds 7 micro-batches in
//     flight (p − s): "middle", index 1 (it said "last" for every stage but the first).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/cli_runner.h"

namespace {

using trainsim::testing::CliRun;
using trainsim::testing::trainsim;

nlohmann::json memory_of(const std::string& args) {
  const CliRun r = trainsim("run " + args + " --format json");
  EXPECT_EQ(r.code, 0) << r.err;
  return r.code == 0 ? nlohmann::json::parse(r.out)["memory"] : nlohmann::json::object();
}

TEST(MemoryCli, GpipeKeepsEveryMicroBatchsLogits) {
  const std::string base =
      "--set model.preset=llama3-8b --set cluster.preset=dgx-h100-superpod --set cluster.gpu=b300 "
      "--set cluster.gpus=16 --set parallel.tp=1 --set parallel.pp=2 --set parallel.vpp=1 "
      "--set parallel.sp=false --set training.recompute=full --set parallel.schedule=gpipe "
      "--set optimizations.system=megatron";
  const nlohmann::json eight = memory_of(base + " --set training.global_batch=64");
  const nlohmann::json four = memory_of(base + " --set training.global_batch=32");
  ASSERT_EQ(eight["in_flight_microbatches"], 8.0);
  ASSERT_EQ(four["in_flight_microbatches"], 4.0);
  EXPECT_EQ(eight["peak_stage"], "last");
  const double a8 = eight["activations_bytes"], a4 = four["activations_bytes"];
  EXPECT_NEAR(a8, 2 * a4, 1e-12 * a8);
  // Per micro-batch: the logits and 16 layers' checkpoints; the logits are the hand value.
  const double logits = 8192.0 * 128000 * 6;
  EXPECT_GT(a8 / 8, logits);
  const nlohmann::json flat = memory_of(
      "--set model.preset=llama3-8b --set cluster.preset=dgx-h100-superpod --set cluster.gpu=b300 "
      "--set cluster.gpus=16 --set parallel.tp=1 --set parallel.pp=2 --set parallel.vpp=1 "
      "--set parallel.sp=false --set training.recompute=full --set parallel.schedule=1f1b "
      "--set optimizations.system=megatron --set training.global_batch=64");
  // 1F1B: the last stage (one micro-batch in flight) peaks with one micro-batch's layers and
  // logits, exactly one GPipe micro-batch's share.
  ASSERT_EQ(flat["peak_stage"], "last");
  ASSERT_EQ(flat["in_flight_microbatches"], 1.0);
  EXPECT_NEAR(flat["activations_bytes"].get<double>(), a8 / 8, 1e-12 * a8);
}

TEST(MemoryCli, PeakStageNamesAMiddleStage) {
  const nlohmann::json m = memory_of(
      "--set model.preset=gpt3-175b --set parallel.vpp=1 --set optimizations.system=megatron "
      "--set cluster.gpus=1024 --set training.global_batch=1536 "
      "--set parallel.first_stage_layers=6 --set parallel.last_stage_layers=6");
  EXPECT_EQ(m["peak_stage"], "middle");
  EXPECT_EQ(m["peak_stage_index"], 1);
  EXPECT_EQ(m["in_flight_microbatches"], 7.0);
}

}  // namespace
