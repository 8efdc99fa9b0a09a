// sim/model/transformer: parameter and FLOP accounting against closed forms derived by hand.
#include "sim/model/transformer.h"
#include "sim/model/ops.h"

#include <gtest/gtest.h>

#include "tests/support/models.h"

#include <cmath>

namespace trainsim::model {
namespace {

using testing::gpt;

// Megatron-LM SC21 Table 1 prints these sizes (billions, one decimal). Eq. 2 is
// 12lh²(1 + 13/12h + (V+s)/12lh); our per-layer count adds only the final LayerNorm (2h).
TEST(Transformer, MegatronTable1ParameterCounts) {
  struct Row { int l, h, a; double printed; };
  const Row rows[] = {{24, 2304, 24, 1.7},     {30, 3072, 32, 3.6},    {36, 4096, 32, 7.5},
                      {40, 6144, 48, 18.4},    {48, 8192, 64, 39.1},   {60, 10240, 80, 76.1},
                      {80, 12288, 96, 145.6},  {96, 16384, 128, 310.1}, {105, 20480, 128, 529.6},
                      {128, 25600, 160, 1008.0}};
  for (const Row& r : rows) {
    const ModelConfig m = gpt(r.l, r.h, r.a);
    const double p = count_parameters(m).total;
    const double eq2 = megatron_eq2_parameters(r.l, r.h, 51200, 2048);
    EXPECT_DOUBLE_EQ(p, eq2 + 2.0 * r.h) << r.l;
    EXPECT_DOUBLE_EQ(std::round(p / 1e8) / 10.0, r.printed) << "l=" << r.l << " h=" << r.h;
  }
}

// 175B: 72·l·h²·(1 + s/6h + V/12lh) FLOPs per token (SC21 Eq. 3 without recompute) and
// 96·l·h²·(1 + s/6h + V/16lh) with full recompute.
TEST(Transformer, MegatronFlopsPerToken) {
  const ModelConfig m = gpt(96, 12288, 96);
  const double l = 96, h = 12288, s = 2048, V = 51200;
  const double model = 72 * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
  const double full = 96 * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  EXPECT_NEAR(model_flops_per_token(m) / model, 1.0, 1e-12);
  EXPECT_NEAR(hardware_flops_per_token(m, Recompute::kFull) / full, 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(hardware_flops_per_token(m, Recompute::kNone), model_flops_per_token(m));
  // The NVIDIA DGX Cloud recipe states 2.20e15 model FLOPs per 2048-token sequence.
  EXPECT_NEAR(model_flops_per_token(m) * 2048 / 1e15, 2.20, 0.005);
}

// Selective recompute re-runs only the attention core: 4·s·h per layer and token.
TEST(Transformer, SelectiveRecomputeAddsAttentionCore) {
  const ModelConfig m = gpt(2, 256, 4, 1000, 128);
  EXPECT_DOUBLE_EQ(hardware_flops_per_token(m, Recompute::kSelective) - model_flops_per_token(m),
                   2 * 4.0 * 128 * 256);
}

// GQA: QKV maps h -> h + 2·kv with kv = kv_heads·h/heads; SwiGLU has three h×f matrices.
TEST(Transformer, LlamaStyleCounts) {
  ModelConfig m = gpt(1, 4096, 32, 128000, 8192);
  m.kv_heads = 8;
  m.ffn_hidden = 14336;
  m.mlp = MlpKind::kSwiglu;
  m.norm = NormKind::kRmsNorm;
  m.position = PositionKind::kRope;
  m.bias = false;
  m.tied_embeddings = false;
  const ParamCount p = count_parameters(m);
  EXPECT_DOUBLE_EQ(p.attention, 4096.0 * (4096 + 2 * 1024) + 4096.0 * 4096);
  EXPECT_DOUBLE_EQ(p.mlp, 3.0 * 4096 * 14336);
  EXPECT_DOUBLE_EQ(p.norms, 2.0 * 4096);
  EXPECT_DOUBLE_EQ(p.embedding, 128000.0 * 4096);
  EXPECT_DOUBLE_EQ(p.output, 128000.0 * 4096);
  // Llama 3 8B (32 layers) has 8.03B parameters (Llama 3 paper, Table 3 "8B").
  m.layers = 32;
  EXPECT_NEAR(count_parameters(m).total / 1e9, 8.03, 0.005);
}

// A head width other than hidden / heads (model.head_dim): Qwen3-30B-A3B (Qwen3 technical report
// and its published config: hidden 2,048, 48 layers, 32 query heads and 4 KV heads of 128, so
// queries are 4,096 wide; 128 experts of 768, 8 per token, every layer; vocabulary 151,936,
// untied) has 30.5B parameters, 3.3B of them active per token. By hand: attention 2048·(4096 +
// 2·512) + 4096·2048 = 18,874,368 per layer; experts 128·3·2048·768 + the router 2048·128.
TEST(Transformer, HeadDimOtherThanHiddenOverHeads) {
  ModelConfig m = gpt(48, 2048, 32, 151936, 4096);
  m.kv_heads = 4;
  m.head_dim_given = 128;
  m.ffn_hidden = 768;
  m.experts = 128;
  m.top_k = 8;
  m.mlp = MlpKind::kSwiglu;
  m.norm = NormKind::kRmsNorm;
  m.position = PositionKind::kRope;
  m.bias = false;
  m.tied_embeddings = false;
  EXPECT_EQ(m.q_dim(), 4096);
  EXPECT_EQ(m.kv_dim(), 512);
  const ParamCount p = count_parameters(m);
  EXPECT_DOUBLE_EQ(p.attention, 18874368.0);
  EXPECT_DOUBLE_EQ(p.expert_mlp, 128.0 * 3 * 2048 * 768 + 2048.0 * 128);
  EXPECT_NEAR(p.total / 1e9, 30.5, 0.05);
  EXPECT_NEAR(p.active / 1e9, 3.3, 0.06);
  // Attention FLOPs follow the query width: 4·s·q per token and layer, not 4·s·h.
  const ForwardFlops f = forward_flops_per_token(m);
  EXPECT_DOUBLE_EQ(f.attention, 48 * 4.0 * 4096 * 4096);
  // Without model.head_dim the same model has 64-wide heads and 2,048-wide queries.
  ModelConfig narrow = m;
  narrow.head_dim_given = 0;
  EXPECT_EQ(narrow.head_dim(), 64);
  EXPECT_DOUBLE_EQ(count_parameters(narrow).attention, 2048.0 * (2048 + 2 * 256) + 2048.0 * 2048);
}

// Megatron's accounting counts the full s×s attention whatever the window (MegaScale's MFU of
// its sliding-window runs uses the same count); the causal convention counts the keys the mask
// keeps: query t attends min(t + 1, w) keys, mean (s + 1)/2 without a window.
TEST(Transformer, FlopConventionsAndTheWindow) {
  ModelConfig full = gpt(4, 1024, 16, 32000, 4096);
  ModelConfig swa = full;
  swa.attention_window = 1024;
  EXPECT_DOUBLE_EQ(forward_flops_per_token(swa).attention, forward_flops_per_token(full).attention);
  EXPECT_DOUBLE_EQ(forward_flops_per_token(swa).dense_gemm,
                   forward_flops_per_token(full).dense_gemm);
  const ForwardFlops f = forward_flops_per_token(full);
  const double s = 4096, w = 1024;
  EXPECT_NEAR(flops_per_token(full, FlopsConvention::kCausal, Recompute::kNone),
              3 * (f.dense_gemm + f.logits + f.attention * (s + 1) / 2 / s), 1e-3);
  const double mean_keys = w - w * (w - 1) / (2 * s);  // Σ_t min(t+1, w) / s
  EXPECT_NEAR(flops_per_token(swa, FlopsConvention::kCausal, Recompute::kNone),
              3 * (f.dense_gemm + f.logits + f.attention * mean_keys / s), 1e-3);
  EXPECT_DOUBLE_EQ(flops_per_token(full, FlopsConvention::kMegatron, Recompute::kFull),
                   model_flops_per_token(full));
  EXPECT_DOUBLE_EQ(flops_per_token(full, FlopsConvention::kMegatronRecompute, Recompute::kFull),
                   hardware_flops_per_token(full, Recompute::kFull));
  // 6N: 6 × the parameters a token multiplies by (no embedding lookup; untied output counted).
  const ParamCount p = count_parameters(full);
  EXPECT_DOUBLE_EQ(flops_per_token(full, FlopsConvention::k6N, Recompute::kNone),
                   6 * (p.active - p.embedding + 32000.0 * 1024));
}

// Keys a causal attention kernel computes per query, by hand for s = 4096 and 128-token tiles
// (n = 32 query blocks): unfused 4096 (every score); fused, query block i computes i + 1 key
// blocks: Σ(i+1) = 528 blocks, ·128/32 = 2112 keys (= (s + 128)/2); with a 1024-token window
// (8 blocks) block i computes min(i, 8) + 1: Σ = 36 + 24·9 = 252 blocks → 1008 keys.
TEST(Transformer, FusedKernelsSkipMaskedTiles) {
  ModelConfig m = gpt(4, 1024, 16, 32000, 4096);
  EXPECT_DOUBLE_EQ(executed_keys_per_query(m, AttentionKernel::kUnfused), 4096);
  EXPECT_DOUBLE_EQ(executed_keys_per_query(m, AttentionKernel::kFlash2), 2112);
  m.attention_window = 1024;
  EXPECT_DOUBLE_EQ(executed_keys_per_query(m, AttentionKernel::kCudnn), 1008);
  // The unfused path computes every score whatever the window.
  EXPECT_DOUBLE_EQ(executed_keys_per_query(m, AttentionKernel::kUnfused), 4096);
}

// MoE: all experts count as parameters, only top_k as active; FLOPs follow the active ones.
TEST(Transformer, MoeActiveParameters) {
  ModelConfig m = gpt(2, 512, 8, 1000, 256);
  ModelConfig moe = m;
  moe.experts = 8;
  moe.top_k = 2;
  moe.moe_every = 1;
  const ParamCount d = count_parameters(m), e = count_parameters(moe);
  EXPECT_DOUBLE_EQ(e.total - d.total, 2 * (7 * d.mlp + 512.0 * 8));
  EXPECT_DOUBLE_EQ(e.active - d.active, 2 * (1 * d.mlp + 512.0 * 8));
  const double gemm = 2.0 * (4.0 * 512 * 2048 * 2);  // two layers' worth of one extra expert MLP
  EXPECT_DOUBLE_EQ(forward_flops_per_token(moe).dense_gemm - forward_flops_per_token(m).dense_gemm,
                   gemm / 2 + 2 * 2.0 * 512 * 8);
}

// The parallel block has one norm per layer instead of two; FLOPs are unchanged.
TEST(Transformer, ParallelBlock) {
  ModelConfig m = gpt(2, 512, 8, 1000, 256);
  ModelConfig pb = m;
  pb.parallel_block = true;
  EXPECT_DOUBLE_EQ(count_parameters(m).total - count_parameters(pb).total, 2 * 2.0 * 512);
  EXPECT_DOUBLE_EQ(model_flops_per_token(m), model_flops_per_token(pb));
}

// TorchTitan's per-op checkpointing (Recompute::kSelectiveOp): of a Llama layer's matmuls in
// forward order (wq, wk, wv, wo, w1, w3, w2) the even-numbered run again, wk, wo and w3; the
// fused attention is kept. Llama 3 8B: the `qkv` op (wq, wk, wv: 4096 + 1024 + 1024 columns)
// runs 1/6 of itself again, `mlp_up` (w1, w3) half, `attn_proj` in full, `mlp_down` and the
// attention not; the extra hardware FLOPs are those three matmuls' share of the dense GEMMs,
// (h·kv + q·h + h·f) / (h·(q + 2kv) + q·h + 3·h·f).
TEST(Transformer, SelectiveOpRecomputesEveryOtherMatmul) {
  const ModelConfig m = testing::llama3_8b(2, 1024);
  Sharding shard;
  shard.fused_attention = true;
  std::vector<Op> ops;
  layer_forward_ops(m, shard, 0, ops);
  const auto share = [&](const char* name) {
    for (const Op& op : ops) {
      if (op.name == name) return recompute_share(m, op, Recompute::kSelectiveOp);
    }
    ADD_FAILURE() << name;
    return -1.0;
  };
  EXPECT_DOUBLE_EQ(share("qkv"), 1024.0 / 6144.0);
  EXPECT_DOUBLE_EQ(share("attn_proj"), 1.0);
  EXPECT_DOUBLE_EQ(share("mlp_up"), 0.5);
  EXPECT_DOUBLE_EQ(share("mlp_down"), 0.0);
  EXPECT_DOUBLE_EQ(share("attention"), 0.0);
  EXPECT_DOUBLE_EQ(share("norm_attn"), 1.0);
  EXPECT_DOUBLE_EQ(share("mlp_bias_dropout_add"), 0.0);
  for (const Op& op : ops) {
    EXPECT_DOUBLE_EQ(recompute_share(m, op, Recompute::kFull), 1.0) << op.name;
    EXPECT_DOUBLE_EQ(recompute_share(m, op, Recompute::kNone), 0.0) << op.name;
    EXPECT_DOUBLE_EQ(recompute_share(m, op, Recompute::kSelective), attention_core(op) ? 1.0 : 0.0)
        << op.name;
  }
  const double h = 4096, q = 4096, kv = 1024, f = 14336;
  const ForwardFlops fw = forward_flops_per_token(m);
  EXPECT_NEAR(hardware_flops_per_token(m, Recompute::kSelectiveOp) - model_flops_per_token(m),
              fw.dense_gemm * (h * kv + q * h + h * f) / (h * (q + 2 * kv) + q * h + 3 * h * f),
              1e-6 * fw.dense_gemm);
  // An unfused attention core (batched matmuls and softmax) is not kept: it runs again.
  EXPECT_NEAR(hardware_flops_per_token(m, Recompute::kSelectiveOp, false) -
                  hardware_flops_per_token(m, Recompute::kSelectiveOp, true),
              fw.attention, 1e-9 * fw.attention);
  // A GeLU MLP has one up matmul (w1, the fifth: kept) and w2 the sixth (again).
  const ModelConfig g = gpt(2, 1024, 16, 64, 1024);
  layer_forward_ops(g, shard, 0, ops);
  for (const Op& op : ops) {
    const double expected = op.name == "mlp_up" ? 0.0 : op.name == "qkv" ? 1.0 / 3.0 : -1.0;
    if (op.name == "mlp_up" || op.name == "qkv" || op.name == "mlp_down") {
      EXPECT_DOUBLE_EQ(recompute_share(g, op, Recompute::kSelectiveOp),
                       op.name == "mlp_down" ? 1.0 : expected)
          << op.name;
    }
  }
}

}  // namespace
}  // namespace trainsim::model
