// sim/exec/compute_model.h with the measured fields of a profile: a GEMM's own fixed cost and
// per-kind memory-bound efficiencies (calibrate/gemm_fit.h fits them; docs/calibration.md).
// Expected values derived by hand from the pricing formulas.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>
#include <utility>
#include <vector>

#include "calibrate/profile.h"
#include "sim/exec/compute_model.h"
#include "sim/model/ops.h"
#include "sim/model/transformer.h"
#include "tests/support/models.h"

namespace trainsim::exec {
namespace {

constexpr double kPeak = 989e12;
constexpr double kHbm = 4.8e12;

model::Op memory_op(const char* kernel, double bytes) {
  model::Op op;
  op.name = "x";
  op.kind = model::OpKind::kMemory;
  op.kernel = kernel;
  op.bytes = bytes;
  return op;
}

// Under fp8 the GEMMs run at the fp8 peak, except attention's batched GEMMs and the output layer
// (logits), which Megatron-Core builds outside Transformer Engine: they keep the 16-bit peak.
TEST(ComputeModelMeasured, OutputLayerStays16BitUnderFp8) {
  calib::Profile p;
  const ComputeModel fp8{p, 2 * kPeak, kPeak, kHbm};
  const ComputeModel bf16{p, kPeak, kPeak, kHbm};
  const model::ModelConfig m = testing::gpt(2, 4096, 32, 128000, 4096);
  model::Sharding s;
  const std::vector<model::Op> head = model::head_forward_ops(m, s);
  const auto logits = std::find_if(head.begin(), head.end(),
                                   [](const model::Op& o) { return o.name == "logits"; });
  ASSERT_NE(logits, head.end());
  EXPECT_TRUE(logits->keep_16bit);
  EXPECT_DOUBLE_EQ(fp8.forward(*logits), bf16.forward(*logits));
  EXPECT_DOUBLE_EQ(fp8.backward(*logits), bf16.backward(*logits));
  const std::vector<model::Op> layer = model::layer_forward_ops(m, s, 0);
  const auto up = std::find_if(layer.begin(), layer.end(),
                               [](const model::Op& o) { return o.name == "mlp_up"; });
  ASSERT_NE(up, layer.end());
  EXPECT_FALSE(up->keep_16bit);
  EXPECT_LT(fp8.forward(*up), bf16.forward(*up));
}

const model::Op& op_named(const std::vector<model::Op>& ops, const char* name) {
  const auto it = std::find_if(ops.begin(), ops.end(),
                               [&](const model::Op& o) { return o.name == name; });
  EXPECT_NE(it, ops.end()) << name;
  return *it;
}

// model.head_dim wider than hidden / heads: the QKV GEMM writes (q + 2·kv)/t columns and the
// output projection reads q/t, q = heads·head_dim; attention runs on head_dim-wide heads. Qwen 3
// shape at TP 4: hidden 2,048, 32 heads and 4 KV heads of 128: qkv n = (4096 + 1024)/4 = 1,280,
// attn_proj k = 4096/4 = 1,024, attention batch 8 heads of k = 128.
TEST(ComputeModelMeasured, HeadDimSetsTheAttentionShapes) {
  model::ModelConfig m = testing::gpt(1, 2048, 32, 151936, 4096);
  m.kv_heads = 4;
  m.head_dim_given = 128;
  model::Sharding s;
  s.tp = 4;
  s.fused_attention = true;
  const std::vector<model::Op> ops = model::layer_forward_ops(m, s, 0);
  EXPECT_DOUBLE_EQ(op_named(ops, "qkv").n, 1280);
  EXPECT_DOUBLE_EQ(op_named(ops, "qkv").k, 2048);
  EXPECT_DOUBLE_EQ(op_named(ops, "attn_proj").k, 1024);
  EXPECT_DOUBLE_EQ(op_named(ops, "attn_proj").n, 2048);
  EXPECT_DOUBLE_EQ(op_named(ops, "attention").k, 128);
  EXPECT_DOUBLE_EQ(op_named(ops, "attention").batch, 8);
}

// The MoE dispatcher's permutations (Megatron-Core MoEAlltoAllTokenDispatcher): with 4,096 tokens,
// top-2 and hidden 1,024 the routed rows are 8,192 × 1,024 16-bit values (16 MiB). Before the
// experts: the gather into expert order (read and write them: 2 × 16 MiB) and, with more than one
// local expert, the sort by local expert (2 × 16 MiB more); after: the un-sort (2 × 16 MiB) and
// the weighted scatter-add back (read 16 MiB, write 4,096 × 1,024 × 2 = 8 MiB). EP 8 with 8
// experts leaves one local expert: no sorts. The backward moves the same bytes. (Without SP
// every TP rank routes every token.)
TEST(ComputeModelMeasured, MoeLayersPermuteTheirTokens) {
  model::ModelConfig m = testing::gpt(2, 1024, 16, 32000, 4096);
  m.experts = 8;
  m.top_k = 2;
  const double rows = 8192.0 * 1024 * 2;
  for (const int ep : {1, 8}) {
    model::Sharding s;
    s.ep = ep;
    const std::vector<model::Op> ops = model::layer_forward_ops(m, s, 0);
    const model::Op& permute = op_named(ops, "moe_permute");
    const model::Op& unpermute = op_named(ops, "moe_unpermute");
    EXPECT_DOUBLE_EQ(permute.bytes, (ep == 1 ? 4 : 2) * rows) << "ep " << ep;
    EXPECT_DOUBLE_EQ(unpermute.bytes, (ep == 1 ? 3 : 1) * rows + 4096.0 * 1024 * 2) << "ep " << ep;
    EXPECT_DOUBLE_EQ(permute.backward_bytes, permute.bytes);
    EXPECT_DOUBLE_EQ(unpermute.backward_bytes, unpermute.bytes);
    EXPECT_STREQ(permute.kernel, "copy");
  }
  // Under TP 2 with SP a rank routes and permutes its own 2,048 tokens (4,096 rows, 8 MiB); the
  // rows are gathered over TP for the experts, so the sort by local expert and its undoing run
  // on all 16 MiB, and the final scatter-add reads its own 8 MiB and writes 2,048 × 1,024 × 2.
  {
    model::Sharding s;
    s.tp = 2;
    s.sp = true;
    const std::vector<model::Op> ops = model::layer_forward_ops(m, s, 0);
    const double local = rows / 2;
    EXPECT_DOUBLE_EQ(op_named(ops, "moe_permute").bytes, 2 * local + 2 * rows);
    EXPECT_DOUBLE_EQ(op_named(ops, "moe_unpermute").bytes, 2 * rows + local + 2048.0 * 1024 * 2);
    EXPECT_DOUBLE_EQ(op_named(ops, "router").m, 2048.0);  // the rank's own tokens
    EXPECT_DOUBLE_EQ(op_named(ops, "router_topk").bytes, 2048.0 * 8 * 4 * 2);
  }
  // A dense layer has neither.
  m.experts = 0;
  for (const model::Op& op : model::layer_forward_ops(m, model::Sharding{}, 0)) {
    EXPECT_NE(op.name, "moe_permute");
    EXPECT_NE(op.name, "moe_unpermute");
  }
}

// The elements Transformer Engine casts to fp8 for each GEMM of a layer, by hand: GPT block
// (kv = h = 4096, ffn = 4h, GeLU), 4,096 tokens. TP 4 with SP: a column-parallel input and a
// row-parallel output gradient are cast on the local 1,024 rows before the all-gather.
TEST(ComputeModelMeasured, Fp8CastElementsFollowTheLayer) {
  const model::ModelConfig m = testing::gpt(2, 4096, 32, 128000, 4096);
  model::Sharding s;
  s.tp = 4;
  s.sp = true;
  const std::vector<model::Op> layer = model::layer_forward_ops(m, s, 0);
  const double t = 4096, h = 4096;
  EXPECT_DOUBLE_EQ(op_named(layer, "qkv").fp8_in_elements, t / 4 * h);
  EXPECT_TRUE(op_named(layer, "qkv").fp8_in_fused);  // the norm writes it
  EXPECT_DOUBLE_EQ(op_named(layer, "qkv").fp8_grad_elements, t * 3 * h / 4);
  EXPECT_FALSE(op_named(layer, "qkv").fp8_grad_fused);  // attention's backward
  EXPECT_DOUBLE_EQ(op_named(layer, "attn_proj").fp8_in_elements, t * h / 4);
  EXPECT_FALSE(op_named(layer, "attn_proj").fp8_in_fused);
  EXPECT_DOUBLE_EQ(op_named(layer, "attn_proj").fp8_grad_elements, t / 4 * h);
  EXPECT_DOUBLE_EQ(op_named(layer, "mlp_up").fp8_in_elements, t / 4 * h);
  EXPECT_DOUBLE_EQ(op_named(layer, "mlp_up").fp8_grad_elements, t * 4 * h / 4);
  EXPECT_TRUE(op_named(layer, "mlp_up").fp8_grad_fused);  // GeLU's backward writes it
  EXPECT_DOUBLE_EQ(op_named(layer, "mlp_down").fp8_in_elements, t * 4 * h / 4);
  EXPECT_TRUE(op_named(layer, "mlp_down").fp8_in_fused);  // GeLU writes it
  EXPECT_DOUBLE_EQ(op_named(layer, "mlp_down").fp8_grad_elements, t / 4 * h);
  // A parallel block's MLP shares the attention branch's casts of the norm output and of the
  // residual gradient.
  model::ModelConfig pb = m;
  pb.parallel_block = true;
  const std::vector<model::Op> par = model::layer_forward_ops(pb, s, 0);
  EXPECT_DOUBLE_EQ(op_named(par, "mlp_up").fp8_in_elements, 0.0);
  EXPECT_DOUBLE_EQ(op_named(par, "mlp_down").fp8_grad_elements, 0.0);
  EXPECT_DOUBLE_EQ(op_named(par, "qkv").fp8_in_elements, t / 4 * h);
}

// What the casts cost (ComputeModel::fp8_cast_time), by hand at 0.5 of 4.8 TB/s and 4 µs a
// kernel, TP 1 (4,096 × 4,096 = 16,777,216 elements in the norm's output): current scaling
// reads a fused producer's output and writes both fp8 copies (4 B, one kernel), any other tensor
// is read once more for its amax (6 B, two kernels); delayed scaling costs nothing after a fused
// producer and a cast-transpose (4 B, one kernel) elsewhere; 16-bit GEMMs and bf16 runs cost 0.
TEST(ComputeModelMeasured, Fp8CastsFollowTheRecipe) {
  calib::Profile p;
  p.memory_bw_efficiency = 0.5;
  p.kernel_overhead_s = 4e-6;
  const ComputeModel current{p, 2 * kPeak, kPeak, kHbm, true, Fp8Recipe::kCurrent};
  const ComputeModel delayed{p, 2 * kPeak, kPeak, kHbm, true, Fp8Recipe::kDelayed};
  const ComputeModel no_casts{p, 2 * kPeak, kPeak, kHbm};
  const ComputeModel bf16{p, kPeak, kPeak, kHbm};
  const model::ModelConfig m = testing::gpt(2, 4096, 32, 128000, 4096);
  const model::Sharding s;
  const std::vector<model::Op> layer = model::layer_forward_ops(m, s, 0);
  const double e = 4096.0 * 4096.0, bw = kHbm * 0.5;
  const model::Op& qkv = op_named(layer, "qkv");
  const model::Op& proj = op_named(layer, "attn_proj");
  const model::Op& up = op_named(layer, "mlp_up");
  EXPECT_DOUBLE_EQ(current.forward_cast(qkv), e * 4 / bw + 4e-6);
  EXPECT_DOUBLE_EQ(current.forward_cast(proj), e * 6 / bw + 8e-6);
  EXPECT_DOUBLE_EQ(current.backward_cast(qkv), 3 * e * 6 / bw + 8e-6);
  EXPECT_DOUBLE_EQ(current.backward_cast(up), 4 * e * 4 / bw + 4e-6);
  EXPECT_DOUBLE_EQ(delayed.forward_cast(qkv), 0.0);
  EXPECT_DOUBLE_EQ(delayed.forward_cast(proj), e * 4 / bw + 4e-6);
  EXPECT_DOUBLE_EQ(delayed.backward_cast(up), 0.0);
  EXPECT_DOUBLE_EQ(delayed.backward_cast(proj), e * 4 / bw + 4e-6);
  // The GEMM's time carries its casts: forward the input's, backward the output gradient's.
  EXPECT_DOUBLE_EQ(current.forward(proj), no_casts.forward(proj) + current.forward_cast(proj));
  EXPECT_DOUBLE_EQ(current.backward(proj), no_casts.backward(proj) + current.backward_cast(proj));
  EXPECT_DOUBLE_EQ(bf16.forward_cast(proj), 0.0);
  EXPECT_DOUBLE_EQ(bf16.backward_cast(qkv), 0.0);
  // The output layer and attention's batched GEMMs stay 16-bit: nothing is cast for them.
  const std::vector<model::Op> head = model::head_forward_ops(m, s);
  EXPECT_DOUBLE_EQ(current.forward_cast(op_named(head, "logits")), 0.0);
  EXPECT_DOUBLE_EQ(current.backward_cast(op_named(layer, "attn_scores")), 0.0);
}

// The element-wise passes are one kernel each whatever the attention kernel: the activation and
// both bias-dropout-adds after their GEMMs (as Megatron-Core runs them), by hand for the GPT
// block, 4,096 tokens, hidden 4,096, TP 1: one [T × h] bf16 tensor is 33,554,432 B. A
// bias-dropout-add reads two and writes one (3 of them) plus a one-byte mask (half of one) with
// dropout; bias-GeLU reads and writes the [T × 4h] tensor (2 × 4 of them).
TEST(ComputeModelMeasured, ElementwisePassesAreTheirOwnKernels) {
  const model::ModelConfig gpt = testing::gpt(2, 4096, 32, 128000, 4096);
  ASSERT_TRUE(gpt.dropout);
  model::ModelConfig no_dropout = gpt;
  no_dropout.dropout = false;
  const double ew = 4096.0 * 4096.0 * 2;
  for (const bool fused_attention : {false, true}) {
    model::Sharding s;
    s.fused_attention = fused_attention;
    const std::vector<model::Op> layer = model::layer_forward_ops(gpt, s, 0);
    EXPECT_DOUBLE_EQ(op_named(layer, "attn_bias_dropout_add").bytes, 3.5 * ew);
    EXPECT_DOUBLE_EQ(op_named(layer, "mlp_bias_dropout_add").bytes, 3.5 * ew);
    EXPECT_DOUBLE_EQ(op_named(layer, "bias_gelu").bytes, 8 * ew);
    const std::vector<model::Op> plain = model::layer_forward_ops(no_dropout, s, 0);
    EXPECT_DOUBLE_EQ(op_named(plain, "attn_bias_dropout_add").bytes, 3 * ew);
    EXPECT_DOUBLE_EQ(op_named(plain, "mlp_bias_dropout_add").bytes, 3 * ew);
  }
}

TEST(ComputeModelMeasured, MemoryOpsUseTheirKindsEfficiency) {
  calib::Profile p;
  p.memory_bw_efficiency = 0.5;
  p.kernel_overhead_s = 4e-6;
  p.memory_bw_efficiency_by_kind = {{"softmax", 0.25}};
  const ComputeModel cm{p, kPeak, kPeak, kHbm};
  // softmax at 0.25 of 4.8 TB/s: 1.2e9 B/s... 1 GB takes 4e-6 + 1e9 / 1.2e12 s.
  EXPECT_DOUBLE_EQ(cm.forward(memory_op("softmax", 1e9)), 4e-6 + 1e9 / (kHbm * 0.25));
  EXPECT_DOUBLE_EQ(cm.backward(memory_op("softmax", 1e9)), 4e-6 + 2e9 / (kHbm * 0.25));
  // A kind the profile does not list, and an op without a kind: the common efficiency.
  EXPECT_DOUBLE_EQ(cm.forward(memory_op("dropout", 1e9)), 4e-6 + 1e9 / (kHbm * 0.5));
  EXPECT_DOUBLE_EQ(cm.forward(memory_op("", 1e9)), 4e-6 + 1e9 / (kHbm * 0.5));
  // The optimizer step streams 34 B per parameter (Adam), 42 (LAMB), ten launches.
  p.memory_bw_efficiency_by_kind["adam"] = 0.8;
  EXPECT_DOUBLE_EQ(cm.optimizer(1e9, false), 34e9 / (kHbm * 0.8) + 10 * 4e-6);
  EXPECT_DOUBLE_EQ(cm.optimizer(1e9, true), 42e9 / (kHbm * 0.5) + 10 * 4e-6);
}

// A fused attention kernel the profile rates on its own (attention_by_kernel) runs at that rate,
// forward and backward; any other fused kernel at the profile's attention rates. The layer's
// attention op names its kernel (Sharding::attention_kernel).
TEST(ComputeModelMeasured, AttentionRunsAtItsKernelsRate) {
  calib::Profile p;
  p.kernel_overhead_s = 0;
  p.attention_fwd_efficiency = 0.5;
  p.attention_bwd_efficiency = 0.32;
  p.attention_by_kernel = {{"triton", {0.119, 0.119}}, {"flash2", {0.284, 0.25}}};
  const ComputeModel cm{p, kPeak, kPeak, kHbm};
  const model::ModelConfig m = testing::gpt(1, 2048, 16, 51200, 2048);
  model::Sharding s;
  s.fused_attention = true;
  const double flops = 1e12;
  for (const auto& [kernel, fwd, bwd] :
       {std::tuple{model::AttentionKernel::kTriton, 0.119, 0.119},
        std::tuple{model::AttentionKernel::kFlash2, 0.284, 0.25},
        std::tuple{model::AttentionKernel::kCudnn, 0.5, 0.32},
        std::tuple{model::AttentionKernel::kFlash3, 0.5, 0.32}}) {
    s.attention_kernel = kernel;
    const std::vector<model::Op> ops = model::layer_forward_ops(m, s, 0);
    model::Op a = op_named(ops, "attention");
    SCOPED_TRACE(a.kernel);
    EXPECT_STREQ(a.kernel, model::to_string(kernel));
    a.flops = flops;
    EXPECT_DOUBLE_EQ(cm.forward(a), flops / (kPeak * fwd));
    EXPECT_DOUBLE_EQ(cm.backward(a), 2 * flops / (kPeak * bwd));
  }
}

// The head dimension picks the curve (analytic-40): the attention op's k is its head dimension,
// and the compute model prices it with the profile's curve at that head dimension, by hand:
// 2,048 over 32 heads is 64, 1,536 over 16 is 96 (half of each curve), 2,048 over 16 is 128.
TEST(ComputeModelMeasured, AttentionTakesTheCurveOfItsHeadDimension) {
  calib::Profile p;
  p.kernel_overhead_s = 0;
  p.attention_fwd_efficiency = 0.5;
  p.attention_bwd_efficiency = 0.4;
  p.attention_hd64 = {0.25, 0.1, 0, 0};
  const ComputeModel cm{p, kPeak, kPeak, kHbm};
  model::Sharding s;
  s.fused_attention = true;
  s.attention_kernel = model::AttentionKernel::kCudnn;
  for (const auto& [hidden, heads] :
       {std::pair{2048, 32}, std::pair{1536, 16}, std::pair{2048, 16}}) {
    const model::ModelConfig m = testing::gpt(1, hidden, heads, 51200, 2048);
    model::Op a = op_named(model::layer_forward_ops(m, s, 0), "attention");
    const double d = static_cast<double>(hidden) / heads;
    EXPECT_DOUBLE_EQ(a.k, d);
    const double w = std::clamp((128 - d) / 64, 0.0, 1.0);
    a.flops = 1e12;
    EXPECT_DOUBLE_EQ(cm.forward(a), 1e12 / (kPeak * ((1 - w) * 0.5 + w * 0.25))) << d;
    EXPECT_DOUBLE_EQ(cm.backward(a), 2e12 / (kPeak * ((1 - w) * 0.4 + w * 0.1))) << d;
  }
}

// The attention curve (analytic-39): a pass runs at e · K / (K + k0) for the K keys a query
// computes per call. 2,048 causal tokens in blocks of 128: 16 query blocks computing 1 + ... + 16
// = 136 key blocks, K = 136 · 128 / 16 = 1,088. A context-parallel ring over 4 ranks runs the
// kernel once per step: the op's shape is one call's, K / 4 = 272 keys, with all the calls' FLOPs
// and launches (the Program runs it as 4 tasks of 1/4, one launch each); all-gather CP is one
// call over the whole K.
TEST(ComputeModelMeasured, AttentionFollowsItsCurveOverTheKeysOfEachCall) {
  calib::Profile p;
  p.kernel_overhead_s = 2e-6;
  p.attention_fwd_efficiency = 0.5;
  p.attention_fwd_overhead_keys = 100;
  p.attention_bwd_efficiency = 0.3;
  p.attention_bwd_overhead_keys = 300;
  const ComputeModel cm{p, kPeak, kPeak, kHbm};
  const model::ModelConfig m = testing::gpt(1, 2048, 16, 51200, 2048);
  model::Sharding s;
  s.fused_attention = true;
  s.attention_kernel = model::AttentionKernel::kCudnn;
  model::Op a = op_named(model::layer_forward_ops(m, s, 0), "attention");
  EXPECT_DOUBLE_EQ(a.n, 1088);
  EXPECT_EQ(a.kernels, 1);
  a.flops = 1e12;
  EXPECT_DOUBLE_EQ(cm.forward(a), 2e-6 + 1e12 / (kPeak * 0.5 * 1088 / 1188));
  EXPECT_DOUBLE_EQ(cm.backward(a), 2e-6 + 2e12 / (kPeak * 0.3 * 1088 / 1388));
  s.cp = 4;
  const model::Op whole = op_named(model::layer_forward_ops(m, s, 0), "attention");
  model::Op c = whole;
  EXPECT_DOUBLE_EQ(c.n, 272);
  EXPECT_EQ(c.kernels, 4);
  c.flops = 1e12;
  EXPECT_DOUBLE_EQ(cm.forward(c), 4 * 2e-6 + 1e12 / (kPeak * 0.5 * 272 / 372));
  EXPECT_DOUBLE_EQ(cm.backward(c), 4 * 2e-6 + 2e12 / (kPeak * 0.3 * 272 / 572));
  s.cp_all_gather = true;
  EXPECT_DOUBLE_EQ(op_named(model::layer_forward_ops(m, s, 0), "attention").n, 1088);
  EXPECT_DOUBLE_EQ(op_named(model::layer_forward_ops(m, s, 0), "attention").flops, whole.flops);
  // A flat profile (no fixed cost in keys) prices every K alike.
  p.attention_fwd_overhead_keys = 0;
  const ComputeModel flat{p, kPeak, kPeak, kHbm};
  EXPECT_DOUBLE_EQ(flat.forward(c) - 4 * 2e-6, 1e12 / (kPeak * 0.5));
}

// A kind whose dedicated backward kernel was timed (`<kind>_bwd`) prices its backward with that
// kernel's bytes (model::memory_backward_byte_ratio: LayerNorm 3 tensors for the forward's 2,
// dropout the same bytes, bias-dropout-add 5/7) at its own efficiency; a kind without one keeps
// twice the forward bytes at the forward's efficiency.
TEST(ComputeModelMeasured, TimedBackwardKernelsPriceTheirOwnBytes) {
  calib::Profile p;
  p.memory_bw_efficiency = 0.5;
  p.kernel_overhead_s = 4e-6;
  p.memory_bw_efficiency_by_kind = {{"layernorm", 0.8},
                                    {"layernorm_bwd", 0.75},
                                    {"dropout_bwd", 0.6},
                                    {"bias_dropout_add_bwd", 0.7},
                                    {"softmax", 0.25}};
  const ComputeModel cm{p, kPeak, kPeak, kHbm};
  EXPECT_DOUBLE_EQ(cm.backward(memory_op("layernorm", 1e9)), 4e-6 + 1.5e9 / (kHbm * 0.75));
  EXPECT_DOUBLE_EQ(cm.backward(memory_op("dropout", 1e9)), 4e-6 + 1e9 / (kHbm * 0.6));
  EXPECT_DOUBLE_EQ(cm.backward(memory_op("bias_dropout_add", 7e8)), 4e-6 + 5e8 / (kHbm * 0.7));
  EXPECT_DOUBLE_EQ(cm.backward(memory_op("softmax", 1e9)), 4e-6 + 2e9 / (kHbm * 0.25));
  // Cross-entropy writes its gradient in the forward: no backward kernel of its own.
  p.memory_bw_efficiency_by_kind["cross_entropy_bwd"] = 0.9;
  EXPECT_DOUBLE_EQ(cm.backward(memory_op("cross_entropy", 1e9)), 4e-6 + 2e9 / (kHbm * 0.5));
  // The forward is untouched.
  EXPECT_DOUBLE_EQ(cm.forward(memory_op("layernorm", 1e9)), 4e-6 + 1e9 / (kHbm * 0.8));
}

// The loss over the vocab-parallel logits, per implementation (framework.cross_entropy), by hand:
// GPT with vocab 128,000 at TP 4 and a 4,096-token micro-batch has 4,096 × 32,000 = 131,072,000
// logits per GPU. Megatron's unfused VocabParallelCrossEntropy moves 38 B per 16-bit logit
// forward (cast 2 + 4, max 4, subtract 8, exp 8, sum 4, divide 8) in six kernels and 14 B
// backward (multiply 8, cast back 4 + 2); Megatron-Core's fused functions 22 and 6 B in three;
// Transformer Engine's Triton kernels 6 and 4 B in two. The backward is priced from those bytes
// at the kind's efficiency, not as twice the forward.
TEST(ComputeModelMeasured, CrossEntropyMovesWhatItsImplementationMoves) {
  calib::Profile p;
  p.memory_bw_efficiency = 0.5;
  p.kernel_overhead_s = 4e-6;
  const ComputeModel cm{p, kPeak, kPeak, kHbm};
  const model::ModelConfig m = testing::gpt(2, 4096, 32, 128000, 4096);
  const double logits = 4096.0 * 32000.0;
  struct Want {
    model::CrossEntropyKernel kernel;
    double fwd, bwd;
    int kernels;
  };
  for (const Want w : {Want{model::CrossEntropyKernel::kUnfused, 38, 14, 6},
                       Want{model::CrossEntropyKernel::kNative, 22, 6, 3},
                       Want{model::CrossEntropyKernel::kTe, 6, 4, 2}}) {
    model::Sharding s;
    s.tp = 4;
    s.cross_entropy = w.kernel;
    const model::Op& ce = op_named(model::head_forward_ops(m, s), "cross_entropy");
    EXPECT_DOUBLE_EQ(ce.bytes, logits * w.fwd) << model::to_string(w.kernel);
    EXPECT_DOUBLE_EQ(ce.backward_bytes, logits * w.bwd) << model::to_string(w.kernel);
    EXPECT_EQ(ce.kernels, w.kernels);
    EXPECT_DOUBLE_EQ(cm.forward(ce), w.kernels * 4e-6 + logits * w.fwd / (kHbm * 0.5));
    EXPECT_DOUBLE_EQ(cm.backward(ce), w.kernels * 4e-6 + logits * w.bwd / (kHbm * 0.5));
  }
  // Any other memory-bound op's backward stays twice its forward bytes.
  EXPECT_DOUBLE_EQ(cm.backward(memory_op("swiglu", 1e9)), 4e-6 + 2e9 / (kHbm * 0.5));
}

TEST(ComputeModelMeasured, GemmsPayTheirOwnFixedCost) {
  calib::Profile p;
  p.gemm_peak_efficiency = 0.8;
  p.gemm_half_dim = 0;  // no shape penalty: time = 2mnk / (peak · 0.8)
  p.kernel_overhead_s = 4e-6;
  model::Op g;
  g.name = "qkv";
  g.kind = model::OpKind::kGemm;
  g.m = 2048;
  g.n = 4608;
  g.k = 12288;
  const double t = 2.0 * 2048 * 4608 * 12288 / (kPeak * 0.8);
  {
    const ComputeModel cm{p, kPeak, kPeak, kHbm};
    EXPECT_DOUBLE_EQ(cm.forward(g), 4e-6 + t);  // no gemm_overhead_s: a kernel's
  }
  p.gemm_overhead_s = 13.8e-6;
  const ComputeModel cm{p, kPeak, kPeak, kHbm};
  EXPECT_DOUBLE_EQ(cm.forward(g), 13.8e-6 + t);
  // Backward: the dgrad and the wgrad GEMM, each with its own fixed cost.
  EXPECT_DOUBLE_EQ(cm.backward(g), 2 * 13.8e-6 + 2 * t);
  // A memory-bound op still pays the kernel's.
  EXPECT_DOUBLE_EQ(cm.forward(memory_op("softmax", 0)), 4e-6);
}

TEST(ComputeModelMeasured, EveryMemoryOpOfALayerNamesATimedKind) {
  // The ops carry the kernel kind calibrate kernels times for them, so that a measured profile
  // can price each with its own efficiency.
  model::ModelConfig m;
  m.layers = 2;
  m.hidden = 1024;
  m.heads = 16;
  m.kv_heads = 16;
  m.ffn_hidden = 4096;
  m.seq_len = 1024;
  m.vocab = 32000;
  m.dropout = true;
  model::Sharding s;
  std::vector<model::Op> ops = model::layer_forward_ops(m, s, 0);
  for (model::Op& op : model::embedding_forward_ops(m, s)) ops.push_back(op);
  for (model::Op& op : model::head_forward_ops(m, s)) ops.push_back(op);
  int memory_ops = 0;
  for (const model::Op& op : ops) {
    if (op.kind != model::OpKind::kMemory) continue;
    ++memory_ops;
    EXPECT_TRUE(calib::is_memory_bound_kernel(op.kernel)) << op.name;
    EXPECT_NE(std::string(calib::measured_kernel_ops()).find(op.kernel), std::string::npos)
        << op.name << " → `" << op.kernel << "`";
    EXPECT_NE(std::string(op.kernel), "") << op.name;
  }
  EXPECT_GE(memory_ops, 8);  // norms, softmax, dropout, bias-dropout-adds, GeLU, embedding, loss
}

}  // namespace
}  // namespace trainsim::exec

namespace trainsim::exec {
namespace {

// A Llama-style block (RoPE, GQA 32/8, SwiGLU), hidden 4,096, head 128 (q 4,096, kv 1,024),
// ffn 14,336, 4,096 tokens, TP 2: per rank the rotated elements are T·(q + kv)/t = 4,096 ·
// 2,560 = 10,485,760. By hand from each implementation's passes (model::RopeBytes,
// docs/analytic-model.md §2): fused 4 B an element each way (two kernels: queries and keys);
// Megatron's unfused PyTorch ops 24 B forward, 26 backward, twelve kernels; the complex path
// 20 and 20, six kernels; none (records before program-22) no op. A learned-position GPT has
// none whatever the key says.
model::ModelConfig llama_block() { return testing::llama3_8b(2, 4096); }

bool has_op(const std::vector<model::Op>& ops, const char* name) {
  return std::any_of(ops.begin(), ops.end(), [&](const model::Op& o) { return o.name == name; });
}

TEST(ComputeModelMeasured, RopeMovesWhatItsImplementationMoves) {
  const model::ModelConfig m = llama_block();
  model::Sharding s;
  s.tp = 2;
  s.fused_attention = true;
  const double rotated = 4096.0 * (4096 + 1024) / 2;
  const struct {
    model::RopeKernel k;
    double fwd, bwd;
    int kernels;
  } cases[] = {{model::RopeKernel::kFused, 4, 4, 2},
               {model::RopeKernel::kUnfused, 24, 26, 12},
               {model::RopeKernel::kComplex, 20, 20, 6}};
  calib::Profile p;
  p.kernel_overhead_s = 0;
  const ComputeModel cm{p, kPeak, kPeak, kHbm};
  for (const auto& c : cases) {
    s.rope = c.k;
    const std::vector<model::Op> ops = model::layer_forward_ops(m, s, 0);
    const model::Op& rope = op_named(ops, "rope");
    EXPECT_DOUBLE_EQ(rope.bytes, c.fwd * rotated) << model::to_string(c.k);
    EXPECT_DOUBLE_EQ(rope.backward_bytes, c.bwd * rotated) << model::to_string(c.k);
    EXPECT_EQ(rope.kernels, c.kernels) << model::to_string(c.k);
    EXPECT_STREQ(rope.kernel, "copy");
    EXPECT_DOUBLE_EQ(cm.backward(rope), c.bwd * rotated / (kHbm * p.memory_bw_efficiency));
    // It comes right after the QKV GEMM, before attention.
    const auto at = [&](const char* n) {
      return std::find_if(ops.begin(), ops.end(), [&](const model::Op& o) { return o.name == n; }) -
             ops.begin();
    };
    EXPECT_EQ(at("rope"), at("qkv") + 1);
    EXPECT_LT(at("rope"), at("attention"));
  }
  s.rope = model::RopeKernel::kNone;
  EXPECT_FALSE(has_op(model::layer_forward_ops(m, s, 0), "rope"));
  s.rope = model::RopeKernel::kUnfused;
  EXPECT_FALSE(has_op(model::layer_forward_ops(testing::gpt(2, 4096, 32, 128000, 4096), s, 0),
                      "rope"));
}

// SwiGLU as two PyTorch ops (framework.activation unfused): SiLU reads the gate and writes its
// output, the product reads both and writes one: 5 [T × f/t] tensors forward (3 fused); backward
// the product's two gradients (3 + 3) and SiLU's (3): 9. GQA keys and values repeated to every
// query head (framework.gqa_kv repeat): K and V each read at kv wide and written q wide, and
// back: 2·T·(q + kv)/t elements of 2 B each way; multi-head attention has nothing to repeat.
// The context-parallel ring's merges (cp_out_correction, Transformer Engine's
// AttnFuncWithCPAndKVP2P), by hand for Llama 3 8B's block (32 heads of 128, 8 KV heads) at TP 2,
// CP 4, 4,096 tokens: a rank holds 1,024 query rows, so its attention output is 1,024 × 2,048
// elements and its dK, dV 2 × 1,024 × 512. The slowest ring rank merges every step whole:
// 2 + 3·3 = 11 passes of 2 B, forward over the output (46,137,344 B), backward over the output's
// gradient and dK, dV (69,206,016 B); 2·4 − 1 = 7 launches forward, 3·4 = 12 backward. The op
// follows the attention call and is part of the attention core (selective recompute repeats
// it); none at CP 1 or with all-gather CP (one call, nothing to merge).
TEST(ComputeModelMeasured, ContextParallelRingMergesItsSteps) {
  const model::ModelConfig m = llama_block();
  model::Sharding s;
  s.tp = 2;
  s.cp = 4;
  s.fused_attention = true;
  const std::vector<model::Op> ops = model::layer_forward_ops(m, s, 0);
  const model::Op& merge = op_named(ops, "cp_out_correction");
  EXPECT_DOUBLE_EQ(merge.bytes, 11.0 * 1024 * 2048 * 2);
  EXPECT_DOUBLE_EQ(merge.backward_bytes, 11.0 * (1024 * 2048 + 2 * 1024 * 512) * 2);
  EXPECT_EQ(merge.kernels, 7);
  EXPECT_EQ(merge.backward_kernels, 12);
  EXPECT_TRUE(model::attention_core(merge));
  EXPECT_EQ(model::recompute_share(m, merge, model::Recompute::kSelective), 1.0);
  EXPECT_EQ(model::recompute_share(m, merge, model::Recompute::kSelectiveOp), 0.0);
  const auto at = [&](const char* name) {
    return std::find_if(ops.begin(), ops.end(),
                        [&](const model::Op& o) { return o.name == name; }) -
           ops.begin();
  };
  EXPECT_EQ(at("cp_out_correction"), at("attention") + 1);
  // Priced as the copy kernel: bytes at the HBM rate, each pass its own launches.
  calib::Profile p;
  const ComputeModel cm{p, kPeak, kPeak, kHbm};
  const double e = kHbm * p.memory_efficiency("copy");
  EXPECT_NEAR(cm.forward(merge), 7 * p.kernel_overhead_s + merge.bytes / e, 1e-15);
  EXPECT_NEAR(cm.backward(merge), 12 * p.kernel_overhead_s + merge.backward_bytes / e, 1e-15);
  s.cp_all_gather = true;
  EXPECT_FALSE(has_op(model::layer_forward_ops(m, s, 0), "cp_out_correction"));
  s.cp_all_gather = false;
  s.cp = 1;
  EXPECT_FALSE(has_op(model::layer_forward_ops(m, s, 0), "cp_out_correction"));
}

TEST(ComputeModelMeasured, EagerActivationAndRepeatedKvMoveTheirCopies) {
  const model::ModelConfig m = llama_block();
  model::Sharding s;
  s.tp = 2;
  s.fused_attention = true;
  const double act = 4096.0 * 14336 / 2 * 2;
  const std::vector<model::Op> fused = model::layer_forward_ops(m, s, 0);
  EXPECT_DOUBLE_EQ(op_named(fused, "swiglu").bytes, 3 * act);
  EXPECT_FALSE(has_op(fused, "silu_mul"));
  EXPECT_FALSE(has_op(fused, "repeat_kv"));
  s.activation_unfused = true;
  s.gqa_kv_repeated = true;
  const std::vector<model::Op> eager = model::layer_forward_ops(m, s, 0);
  EXPECT_FALSE(has_op(eager, "swiglu"));
  EXPECT_DOUBLE_EQ(op_named(eager, "silu_mul").bytes, 5 * act);
  EXPECT_DOUBLE_EQ(op_named(eager, "silu_mul").backward_bytes, 9 * act);
  EXPECT_EQ(op_named(eager, "silu_mul").kernels, 2);
  const double kv_copy = 2.0 * 4096 * (4096 + 1024) / 2 * 2;
  EXPECT_DOUBLE_EQ(op_named(eager, "repeat_kv").bytes, kv_copy);
  EXPECT_DOUBLE_EQ(op_named(eager, "repeat_kv").backward_bytes, kv_copy);
  model::ModelConfig mha = m;
  mha.kv_heads = mha.heads;
  EXPECT_FALSE(has_op(model::layer_forward_ops(mha, s, 0), "repeat_kv"));
  // A GeLU MLP moves the same bytes either way: one op, read and write the [T × f/t] tensor.
  const model::ModelConfig gpt = testing::gpt(2, 4096, 32, 128000, 4096);
  EXPECT_DOUBLE_EQ(op_named(model::layer_forward_ops(gpt, s, 0), "bias_gelu").bytes,
                   2 * 4096.0 * 16384 / 2 * 2);
  // Every new op is a kind calibrate kernels times (the copy kernel).
  for (const model::Op& op : eager) {
    if (op.kind != model::OpKind::kMemory) continue;
    EXPECT_TRUE(calib::is_memory_bound_kernel(op.kernel)) << op.name;
  }
}

}  // namespace
}  // namespace trainsim::exec
