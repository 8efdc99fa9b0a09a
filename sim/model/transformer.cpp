#include "sim/model/transformer.h"

#include <algorithm>

namespace trainsim::model {

ParamCount count_parameters(const ModelConfig& m) {
  ParamCount p;
  const double h = m.hidden;
  const double q = m.q_dim();  // h unless model.head_dim says otherwise
  const double kv = m.kv_dim();
  const double f = m.ffn_hidden;
  const double b = m.bias ? 1.0 : 0.0;
  // QKV: h -> q + 2·kv; output projection: q -> h.
  p.attention = h * (q + 2 * kv) + b * (q + 2 * kv) + q * h + b * h;
  // GeLU MLP: h -> f -> h. SwiGLU: gate and up h -> f each, down f -> h.
  const double up = (m.mlp == MlpKind::kSwiglu ? 2.0 : 1.0);
  p.mlp = up * h * f + b * up * f + f * h + b * h;
  if (m.experts > 0) p.expert_mlp = m.experts * p.mlp + h * m.experts;  // + router h -> E
  // LayerNorm has a scale and a shift; RMSNorm only a scale. A parallel block has one norm.
  const double per_norm = (m.norm == NormKind::kLayerNorm ? 2.0 : 1.0) * h;
  p.norms = (m.parallel_block ? 1.0 : 2.0) * per_norm;
  p.embedding = static_cast<double>(m.vocab) * h +
                (m.position == PositionKind::kLearned ? static_cast<double>(m.seq_len) * h : 0.0);
  p.output = m.tied_embeddings ? 0.0 : static_cast<double>(m.vocab) * h;
  p.final_norm = per_norm;
  const int tensors_per_gemm = m.bias ? 2 : 1;
  const int tensors_per_norm = m.norm == NormKind::kLayerNorm ? 2 : 1;
  p.attention_tensors = 2 * tensors_per_gemm;
  p.mlp_tensors = 2 * tensors_per_gemm;
  p.expert_tensors = p.mlp_tensors;
  p.norm_tensors = (m.parallel_block ? 1 : 2) * tensors_per_norm;
  p.final_norm_tensors = tensors_per_norm;

  const int moe = m.moe_layers();
  const int dense = m.layers - moe;
  const double body = m.layers * (p.attention + p.norms) + dense * p.mlp + moe * p.expert_mlp;
  p.total = body + p.embedding + p.output + p.final_norm;
  const double active_expert = m.experts > 0 ? m.top_k * p.mlp + h * m.experts : 0.0;
  p.active = m.layers * (p.attention + p.norms) + dense * p.mlp + moe * active_expert +
             p.embedding + p.output + p.final_norm;
  return p;
}

ForwardFlops forward_flops_per_token(const ModelConfig& m) {
  ForwardFlops f;
  const double h = m.hidden;
  const double q = m.q_dim();
  const double kv = m.kv_dim();
  const double ff = m.ffn_hidden;
  const double up = (m.mlp == MlpKind::kSwiglu ? 2.0 : 1.0);
  const double attn_gemm = 2.0 * (h * (q + 2 * kv) + q * h);
  const double mlp_gemm = 2.0 * (up * h * ff + ff * h);
  const int moe = m.moe_layers();
  const int dense = m.layers - moe;
  const double router = m.experts > 0 ? 2.0 * h * m.experts : 0.0;
  f.dense_gemm = m.layers * attn_gemm + dense * mlp_gemm + moe * (m.top_k * mlp_gemm + router);
  // Scores QKᵀ and the weighted sum with V: 2·2·s·q per token per layer (q = heads·head_dim, h
  // unless model.head_dim says otherwise; Megatron counts its query projection size), over the
  // full sequence (Megatron's accounting counts the whole s × s matrix, window or not;
  // MegaScale's MFU for its sliding-window runs uses the same count, its Table 2 MFU ratio equals
  // its throughput ratio).
  f.attention = m.layers * 4.0 * static_cast<double>(m.seq_len) * q;
  f.logits = 2.0 * h * m.vocab;
  return f;
}

double embedding_params_per_rank(const ModelConfig& m, const ParamCount& pc, int tp) {
  const double position =
      m.position == PositionKind::kLearned ? static_cast<double>(m.seq_len) * m.hidden : 0.0;
  return (pc.embedding - position) / std::max(1, tp) + position;
}

double model_flops_per_token(const ModelConfig& m) { return 3.0 * forward_flops_per_token(m).total(); }

double executed_keys_per_query(const ModelConfig& m, AttentionKernel kernel, int block) {
  const double s = m.seq_len;
  if (kernel == AttentionKernel::kUnfused || m.seq_len <= 0) return s;
  const long n = (m.seq_len + block - 1) / block;  // query (and key) blocks
  const long wb = m.attention_window > 0 && m.attention_window < m.seq_len
                      ? (m.attention_window + block - 1) / block
                      : n;
  // Query block i computes key blocks max(0, i - wb) .. i: min(i, wb) + 1 blocks. Summed in
  // closed form (exact integers, so the same double as adding them one by one): 1 + 2 + ... for
  // the first min(n, wb + 1) query blocks, then wb + 1 for each of the rest.
  const long ramp = std::min(n, wb + 1);
  const double blocks = static_cast<double>(ramp * (ramp + 1) / 2 + (n - ramp) * (wb + 1));
  // Keys per query: blocks per query block × block size, spread over the sequence's queries
  // (the last, partial block computes a full tile).
  return std::min(s, blocks * block / static_cast<double>(n));
}

double flops_per_token(const ModelConfig& m, FlopsConvention c, Recompute r) {
  switch (c) {
    case FlopsConvention::kMegatron: return model_flops_per_token(m);
    case FlopsConvention::kMegatronRecompute: return hardware_flops_per_token(m, r);
    case FlopsConvention::kCausal: {
      ForwardFlops f = forward_flops_per_token(m);
      // Query t attends min(t + 1, window) keys; averaged over the sequence.
      const double s = m.seq_len;
      const double w = m.attended_tokens();
      const double mean_keys = w >= s ? (s + 1) / 2 : w - w * (w - 1) / (2 * s);
      f.attention *= mean_keys / s;
      return 3.0 * f.total();
    }
    case FlopsConvention::k6N: {
      // 6 FLOPs per parameter a token touches, without the embedding lookup (no multiply); a tied
      // output projection still multiplies by the embedding matrix.
      const ParamCount p = count_parameters(m);
      const double output = m.tied_embeddings ? static_cast<double>(m.vocab) * m.hidden : 0.0;
      return 6.0 * (p.active - p.embedding + output);
    }
  }
  return model_flops_per_token(m);
}

const char* to_string(FlopsConvention c) {
  switch (c) {
    case FlopsConvention::kMegatron: return "megatron";
    case FlopsConvention::kMegatronRecompute: return "megatron-recompute";
    case FlopsConvention::kCausal: return "causal";
    case FlopsConvention::k6N: return "6n";
  }
  return "?";
}

const char* to_string(AttentionKernel k) {
  switch (k) {
    case AttentionKernel::kUnfused: return "unfused";
    case AttentionKernel::kFlash2: return "flash2";
    case AttentionKernel::kFlash3: return "flash3";
    case AttentionKernel::kCudnn: return "cudnn";
    case AttentionKernel::kTriton: return "triton";
  }
  return "?";
}

const char* to_string(RopeKernel k) {
  switch (k) {
    case RopeKernel::kFused: return "fused";
    case RopeKernel::kUnfused: return "unfused";
    case RopeKernel::kComplex: return "complex";
    case RopeKernel::kNone: return "none";
  }
  return "?";
}

const char* to_string(CrossEntropyKernel k) {
  switch (k) {
    case CrossEntropyKernel::kUnfused: return "unfused";
    case CrossEntropyKernel::kNative: return "native";
    case CrossEntropyKernel::kTe: return "te";
  }
  return "?";
}

double hardware_flops_per_token(const ModelConfig& m, Recompute r, bool fused_attention) {
  const ForwardFlops f = forward_flops_per_token(m);
  switch (r) {
    case Recompute::kNone: return 3.0 * f.total();
    case Recompute::kSelective: return 3.0 * f.total() + f.attention;
    case Recompute::kFull: return 3.0 * f.total() + f.dense_gemm + f.attention;
    case Recompute::kSelectiveOp: {
      // The matmuls run again (wk, wo and w3 of a SwiGLU MLP, or w2 of a GeLU one) as their
      // share of a layer's dense GEMM FLOPs; an unfused attention core (batched matmuls and
      // softmax, none of them kept) runs again too.
      const double h = m.hidden, q = m.q_dim(), kv = m.kv_dim(), ff = m.ffn_hidden;
      const bool swiglu = m.mlp == MlpKind::kSwiglu;
      const double all = h * (q + 2 * kv) + q * h + (swiglu ? 3.0 : 2.0) * h * ff;
      const double again = h * kv + q * h + h * ff;
      const double attention = fused_attention ? 0.0 : f.attention;
      return 3.0 * f.total() + f.dense_gemm * again / all + attention;
    }
  }
  return 3.0 * f.total();
}

double megatron_eq2_parameters(int layers, int hidden, int vocab, int seq_len) {
  const double l = layers, h = hidden, V = vocab, s = seq_len;
  return 12.0 * l * h * h * (1.0 + 13.0 / (12.0 * h) + (V + s) / (12.0 * l * h));
}

const char* to_string(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
    case Recompute::kSelectiveOp: return "selective-op";
  }
  return "?";
}
const char* to_string(MlpKind k) { return k == MlpKind::kGelu ? "gelu" : "swiglu"; }
const char* to_string(NormKind k) { return k == NormKind::kLayerNorm ? "layernorm" : "rmsnorm"; }
const char* to_string(PositionKind k) { return k == PositionKind::kLearned ? "learned" : "rope"; }

}  // namespace trainsim::model
