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
//     flight (p − s): "middle", index 1 (it said "last" for every stage but the first);
//   * training.recompute_layers counts per model chunk, as Megatron-Core's --recompute-num-layers
//     does per virtual stage: Llama 3 8B, TP 2 (SP), PP 4, VPP 2 (8 layers a stage in two chunks
//     of 4), R layers of each chunk, 2R of the stage, keep only their input (2·s·h/t =
//     33,554,432 B), the others everything (SP-sharded 8·s·h/t = 134,217,728 B, and the TP-sharded
//     Q, K, V, output (2·4096 + 2·1024 + 2·1024 + 2·4096)·s, SwiGLU's 6·14,336·s and the fp32
//     log-sum-exp 4·32·s, /t: 436,731,904 B; 570,949,632 B a layer); stage 0 holds 5.5 chunk-
//     micro-batches' worth ((2·3 + 4 + 1)/2) and the embedding output: R = 2 reads
//     (4·33,554,432 + 4·570,949,632 + 33,554,432)·5.5 = 13,483,638,784 B (it counted 2 of the
//     stage's 8: 19,394,985,984), R = 4 is every layer, and HFU/MFU is that of PP 4 without
//     interleaving and 4 layers a stage;
//   * an MoE model keeps its top-k experts' activations in its MoE layers only
//     (model.moe_every): Llama 3 8B with 8 experts, top-2, EP 8, TP 2: each MoE layer holds
//     (k − 1)·6·14,336·8,192/2 = 352,321,536 B more than a dense one, so every-layer MoE less
//     every-other-layer is 16 of them and every-other less every-fourth 8 (all three read the
//     same before);
//   * ZeRO-3 gathers two units (layers, or the embedding where it is bigger) but never more than
//     the stage: Llama 3 8B at PP 32, TP 1, DP 2, whose first stage is one layer and the
//     embedding (P = 742.4 M parameters): 2·P/2 sharded + 2·P gathered = 1.5 × ZeRO-0's 2·P (it
//     read 2.5 ×, more than no sharding).
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

const std::string kLlama8b = "scenarios/examples/llama3-8b-64xh100.yaml";

nlohmann::json run_of(const std::string& args) {
  const CliRun r = trainsim("run " + kLlama8b + " " + args + " --format json");
  EXPECT_EQ(r.code, 0) << r.err;
  return r.code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

TEST(MemoryCli, BlockRecomputeCountsPerModelChunk) {
  const std::string base =
      "--set parallel.pp=4 --set training.recompute=full --set training.recompute_layers=";
  const nlohmann::json two = run_of(base + "2 --set parallel.vpp=2");
  ASSERT_TRUE(two.contains("memory"));
  EXPECT_EQ(two["memory"]["in_flight_microbatches"].get<double>(), 5.5);
  EXPECT_EQ(two["memory"]["activations_bytes"].get<double>(),
            (4 * 33554432.0 + 4 * 570949632.0 + 33554432.0) * 5.5);
  const nlohmann::json four = run_of(base + "4 --set parallel.vpp=2");
  const nlohmann::json every = run_of(base + "0 --set parallel.vpp=2");
  EXPECT_EQ(four["memory"]["activations_bytes"], every["memory"]["activations_bytes"]);
  EXPECT_EQ(four["hfu"], every["hfu"]);
  const nlohmann::json flat = run_of(base + "4 --set parallel.vpp=1");
  const double ratio2 = two["hfu"].get<double>() / two["mfu"].get<double>();
  const double ratio_flat = flat["hfu"].get<double>() / flat["mfu"].get<double>();
  EXPECT_NEAR(ratio2, ratio_flat, 1e-12);
  EXPECT_GT(ratio2, 1.0);
}

TEST(MemoryCli, MoeActivationsFollowMoeEvery) {
  const auto activations = [](int every) {
    return run_of("--set model.experts=8 --set model.top_k=2 --set parallel.ep=8 "
                  "--set parallel.tp=2 --set model.moe_every=" + std::to_string(every))["memory"]
        ["activations_bytes"].get<double>();
  };
  // Per MoE layer beyond a dense one: the second expert copy's SwiGLU activations
  // (top_k − 1)·6·f·s/t, the permuted rows the experts read, k·2·h·s (gathered over TP: not
  // divided by t), and the experts' output rows unpermute saves, k·2·h·s/t.
  const double delta = 6.0 * 14336 * 8192 / 2 + 2.0 * 2 * 4096 * 8192 + 2.0 * 2 * 4096 * 8192 / 2;
  EXPECT_EQ(delta, 553648128.0);
  // 32 layers: 32, 16 and 8 MoE layers (layers 0, n, 2n, ...).
  EXPECT_EQ(activations(1) - activations(2), 16 * delta);
  EXPECT_EQ(activations(2) - activations(4), 8 * delta);
}

// Megatron-Core places an MoE layer at every layer i with i % moe_every == 0: 32 layers every 3rd
// are 11 MoE layers (0, 3, ..., 30), not 10; and a pipeline stage holds its own ones, not the
// model's average share. PP 4 of 8 layers: stages 0, 1 and 3 hold 3 MoE layers, stage 2 holds 2.
TEST(MemoryCli, MoeLayersSitWhereMegatronPutsThem) {
  const std::string moe =
      "--set model.experts=8 --set model.top_k=2 --set parallel.ep=8 --set model.moe_every=3 ";
  const nlohmann::json dense = run_of("");
  const nlohmann::json every3 = run_of(moe);
  const double h = 4096, f = 14336, mlp = 3 * h * f, router = h * 8;
  EXPECT_EQ(every3["parameters"].get<double>() - dense["parameters"].get<double>(),
            11 * (7 * mlp + router));
  // Stage 0 at PP 4, TP 2, EP 8: 8 layers' attention (41,943,040 parameters) and norms (8,192),
  // 5 dense MLPs /t, 3 MoE layers' one local expert and router share (8·mlp + router)/(t·EP),
  // the embedding /t; 2 bytes each (ZeRO 1 leaves the weights whole).
  const nlohmann::json pp4 = run_of(moe + "--set parallel.pp=4 --set parallel.vpp=1 --set training.recompute=none");
  ASSERT_EQ(pp4["memory"]["peak_stage"], "first") << pp4["memory"].dump();
  const double vocab = std::stod(pp4["config"]["model.vocab"].get<std::string>());
  const double stage0 = 8 * (41943040.0 / 2 + 8192) + 5 * mlp / 2 + 3 * (8 * mlp + router) / 16 +
                        vocab * h / 2;
  EXPECT_DOUBLE_EQ(pp4["memory"]["weights_bytes"].get<double>(), 2 * stage0);
}

TEST(MemoryCli, ZeroThreeGathersNoMoreThanTheStage) {
  const auto weights = [](int zero) {
    return run_of("--set parallel.tp=1 --set parallel.pp=32 --set parallel.vpp=1 "
                  "--set parallel.zero=" + std::to_string(zero))["memory"]["weights_bytes"]
        .get<double>();
  };
  const double w0 = weights(0);
  EXPECT_EQ(w0, 2 * 742400000.0);  // one layer (218.1 M) and the embedding (524.3 M), 2 B
  EXPECT_EQ(weights(3), 1.5 * w0);
}

}  // namespace
