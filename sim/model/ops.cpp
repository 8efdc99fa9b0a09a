#include "sim/model/ops.h"

#include <algorithm>

namespace trainsim::model {
namespace {

constexpr double kAct = 2.0;  // bytes per activation element (bf16/fp16)

// Ops are written into `out` from position `n` on, reusing the elements (and the names'
// storage) a previous call left there, so that a caller that keeps its vector allocates nothing.
Op& next_op(std::vector<Op>& out, std::size_t& n, const char* name) {
  if (n == out.size()) out.emplace_back();
  Op& op = out[n++];
  std::string keep = std::move(op.name);
  op = Op{};
  keep.assign(name);
  op.name = std::move(keep);
  return op;
}

Op& gemm(std::vector<Op>& out, std::size_t& n, const char* name, double m, double nn, double k,
         double batch = 1) {
  Op& op = next_op(out, n, name);
  op.kind = OpKind::kGemm;
  op.m = m;
  op.n = nn;
  op.k = k;
  op.batch = batch;
  op.flops = 2.0 * m * nn * k * batch;
  return op;
}

Op& memory(std::vector<Op>& out, std::size_t& n, const char* name, const char* kernel,
           double bytes, int kernels = 1) {
  Op& op = next_op(out, n, name);
  op.kind = OpKind::kMemory;
  op.kernel = kernel;
  op.bytes = bytes;
  op.kernels = kernels;
  return op;
}

const char* norm_kernel(const ModelConfig& m) {
  return m.norm == NormKind::kRmsNorm ? "rmsnorm" : "layernorm";
}

}  // namespace

void layer_forward_ops(const ModelConfig& m, const Sharding& s, int layer_index,
                       std::vector<Op>& ops) {
  std::size_t n = 0;
  const double b = s.micro_batch;
  const double t = s.tp;
  const double tokens = b * static_cast<double>(m.seq_len) / s.cp;  // rows of every GEMM
  const double h = m.hidden;
  const double kv = m.kv_dim();
  const double heads = m.heads / t;
  const double dh = m.head_dim();
  // Element-wise work runs on tokens/tp rows under SP, on all rows without it.
  const double ew_rows = s.sp ? tokens / t : tokens;
  const double ew = ew_rows * h * kAct;  // bytes of one [rows × h] activation

  // Norm: read x, write y (its own kernel in every framework modelled).
  const int norms = m.parallel_block ? 1 : 2;
  for (int i = 0; i < norms; ++i) {
    memory(ops, n, i == 0 ? "norm_attn" : "norm_mlp", norm_kernel(m), 2 * ew);
  }

  const double q = m.q_dim();  // queries and attention output: h unless model.head_dim differs
  Op& qkv = gemm(ops, n, "qkv", tokens, (q + 2 * kv) / t, h);
  qkv.tp_comm_before = true;
  // fp8 casts (Op::fp8_in_elements): the norm's output in, attention's input gradient back.
  qkv.fp8_in_elements = ew_rows * h;
  qkv.fp8_in_fused = true;
  qkv.fp8_grad_elements = tokens * (q + 2 * kv) / t;

  // Rotary position embeddings rotate the rank's queries and keys after the QKV GEMM, all
  // `tokens` rows (SP gathers them for the GEMM), as the framework implements it (RopeBytes).
  // The passes of this op, the GQA repeat and eager SiLU·mul are plain streaming kernels: they
  // are priced at the copy kernel's efficiency (a measured profile's `copy`).
  if (m.position == PositionKind::kRope && s.rope != RopeKernel::kNone) {
    const double rotated = tokens * (q + kv) / t;
    const RopeBytes rb = rope_bytes_per_element(s.rope, kAct);
    Op& rope = memory(ops, n, "rope", "copy", rotated * rb.forward, 2 * rb.kernels);
    rope.backward_bytes = rotated * rb.backward;
  }
  // GQA through an attention call that wants as many key and value heads as query heads
  // (PyTorch's scaled_dot_product_attention before 2.5 has no enable_gqa): TorchTitan's
  // repeat_kv expands K and V to every query head and reshape copies them (read kv, write q, for
  // each); backward sums the copies' gradients back (read q, write kv).
  if (s.gqa_kv_repeated && kv < q) {
    Op& rep = memory(ops, n, "repeat_kv", "copy", 2.0 * tokens * (q + kv) / t * kAct, 2);
    rep.backward_bytes = rep.bytes;
  }
  const double q_rows = static_cast<double>(m.seq_len) / s.cp;
  if (s.fused_attention) {
    // The keys the kernel really computes: masked tiles skipped (executed_keys_per_query).
    const double keys = executed_keys_per_query(m, s.attention_kernel);
    Op& a = next_op(ops, n, "attention");
    a.kind = OpKind::kAttention;
    a.kernel = to_string(s.attention_kernel);  // the profile may rate each kernel on its own
    a.batch = b * heads;
    a.m = q_rows;
    a.n = keys;
    a.k = dh;
    a.flops = 4.0 * b * heads * q_rows * keys * dh;
    // The kernel's shape is one call's: a context-parallel ring calls it once per step on the
    // K/V chunk received (Transformer Engine's AttnFuncWithCPAndKVP2P; one launch each, the
    // Program runs them as cp tasks of 1/cp), so each call's queries compute 1/cp of their
    // keys and every thread block's fixed cost is paid cp times (Profile's attention curve);
    // the FLOPs are all the calls'. All-gather CP runs one call over the gathered K/V.
    if (s.cp > 1 && !s.cp_all_gather) {
      a.n = keys / s.cp;
      a.kernels = s.cp;
      // Each ring step's call returns a partial output and its softmax statistics; the partials
      // are merged after the last step (Transformer Engine's AttnFuncWithCPAndKVP2P.forward:
      // flash_attn_fwd_out_correction_init for step 0, flash_attn_fwd_out_correction or its
      // second-half variant for each later one, one fused element-wise kernel each, plus a
      // softmax-statistics merge per step), and in backward each step's dQ and dK/dV are added
      // into the running sums (dq.add_, dk.add_, dv.add_ per step, bwd_dq_update and the dkv
      // correction). Step 0 reads its partial and writes the output (2 passes); a later step
      // reads its partial and the output and writes the output (3). On causal ring ranks a step
      // covers the whole query chunk (steps 1..r of rank r) or its second half; the ranks meet
      // at the next layer's ring exchange, so the slowest, rank cp − 1 with every step whole,
      // sets the pace: 2 + 3·(cp − 1) passes over the rank's attention output (queries) and,
      // backward, over its query and key/value gradients. In the activation dtype (TE's default
      // path; fp8 attention, which merges in fp32, is not modelled). Memory traffic only, at the
      // copy kernel's efficiency; ring attention in any framework merges its steps so.
      const double out = tokens * q / t;            // the rank's attention output, elements
      const double kv_grad = 2.0 * tokens * kv / t;  // its dK and dV
      const double passes = 2.0 + 3.0 * (s.cp - 1);
      Op& merge = memory(ops, n, "cp_out_correction", "copy", passes * out * kAct, 2 * s.cp - 1);
      merge.backward_bytes = passes * (out + kv_grad) * kAct;
      merge.backward_kernels = 3 * s.cp;
    }
  } else {
    // Megatron's unfused path: QKᵀ batched GEMM, fused scale-mask-softmax, dropout, ·V. The mask
    // (causal or window) is applied in the softmax: the GEMMs compute every score.
    const double keys = m.seq_len;
    gemm(ops, n, "attn_scores", q_rows, keys, dh, b * heads);
    const double scores = b * heads * q_rows * keys;
    memory(ops, n, "softmax", "softmax", scores * 2 * kAct);
    if (m.dropout) memory(ops, n, "attn_dropout", "dropout", scores * (2 * kAct + 1));
    gemm(ops, n, "attn_context", q_rows, dh, keys, b * heads);
  }
  // A parallel block sums the attention and MLP outputs before one reduction and one residual
  // add, and both branches read the same gathered norm output (one all-gather, one reduce-scatter
  // per layer and pass instead of two each).
  Op& proj = gemm(ops, n, "attn_proj", tokens, h, q / t);
  proj.tp_comm_after = !m.parallel_block;
  // In: attention's output (its own kernel's bf16); back: the residual stream's gradient.
  proj.fp8_in_elements = tokens * q / t;
  proj.fp8_grad_elements = ew_rows * h;
  // Bias + dropout + residual add: one fused kernel of its own after the row-parallel GEMM,
  // reading two inputs and writing one, and the dropout mask (a byte an element) when the model
  // has dropout. Every preset's framework runs it so (Megatron-Core's self_attn_bda / mlp_bda
  // modules, get_bias_dropout_add, at core_v0.8.0; MegaScale fuses each element-wise op into one
  // kernel, NSDI'24 §3.3, but not into the GEMMs), so it is charged whatever the levers say.
  const double bda_bytes = 3 * ew + (m.dropout ? ew / kAct : 0.0);
  if (!m.parallel_block) {
    memory(ops, n, "attn_bias_dropout_add", "bias_dropout_add", bda_bytes);
  }

  const bool moe = m.is_moe_layer(layer_index);
  const double f = m.ffn_hidden;
  const double up_mult = m.mlp == MlpKind::kSwiglu ? 2.0 : 1.0;
  const double expert_rows = moe ? tokens * m.top_k : tokens;
  // Token permutation around the experts (Megatron-Core's MoEAlltoAllTokenDispatcher with
  // moe_utils' permute, sort_chunks_by_idxs and unpermute): the [tokens·top_k × h] 16-bit rows
  // are gathered into expert order before the all-to-all and, with more than one local expert,
  // sorted by local expert after it; after the experts they are un-sorted, and unpermute
  // scatter-adds them, weighted by the router's probabilities, back into [tokens × h]. Each pass
  // reads and writes the rows once (a copy-like kernel); the backward moves the same bytes the
  // other way (a gather's gradient is a scatter-add and back).
  const double rows_bytes = expert_rows * h * kAct;
  const bool sorted = moe && m.experts / std::max(1, s.ep) > 1;
  // Under SP a TP rank routes and permutes its own tokens/tp rows; the rows are gathered over
  // TP after the all-to-all (the dispatcher's gather_from_sequence_parallel_region), so the sort
  // by local expert and its undoing run on all of them, and the final unpermute on its own
  // again after the reduce-scatter back (MoEAlltoAllTokenDispatcher). Without SP both are all.
  const double local_rows_bytes = moe ? ew_rows * m.top_k * h * kAct : 0.0;
  if (moe) {
    // Megatron-Core's router is a plain linear layer outside Transformer Engine (fp32 logits).
    gemm(ops, n, "router", ew_rows, m.experts, h).keep_16bit = true;
    memory(ops, n, "router_topk", "softmax", ew_rows * m.experts * 4.0 * 2);
    Op& permute = memory(ops, n, "moe_permute", "copy",
                         2.0 * local_rows_bytes + (sorted ? 2.0 * rows_bytes : 0.0));
    permute.backward_bytes = permute.bytes;
  }
  Op& up = gemm(ops, n, moe ? "expert_up" : "mlp_up", expert_rows, up_mult * f / t, h);
  up.tp_comm_before = !moe && !m.parallel_block;
  up.moe = moe;
  // In: the norm's output (dense) or the dispatched tokens (experts); back: the activation's
  // backward, which computes the amax of the gradient it writes.
  // A parallel block's MLP reads the attention branch's fp8 copy of the one norm output.
  up.fp8_in_elements = moe ? expert_rows * h : m.parallel_block ? 0 : ew_rows * h;
  up.fp8_in_fused = !moe;
  up.fp8_grad_elements = expert_rows * up_mult * f / t;
  up.fp8_grad_fused = true;
  {
    // Activation (bias-GeLU or SiLU·up) as its own kernel over the [rows × f/t] tensor, after the
    // GEMM (Megatron-Core's bias_gelu_impl / bias_swiglu_impl in MLP.forward at core_v0.8.0, not
    // a GEMM epilogue).
    const double act = expert_rows * (f / t) * kAct;
    if (m.mlp == MlpKind::kSwiglu && s.activation_unfused) {
      // SiLU then the product as two PyTorch ops (Megatron-LM's swiglu before its fusion of
      // 2023-11, TorchTitan's F.silu(w1(x)) * w3(x) in eager mode): SiLU reads the gate and
      // writes its output (2), the product reads both and writes one (3); backward, the
      // product's two gradients (3 + 3) and SiLU's (3).
      Op& a = memory(ops, n, "silu_mul", "copy", 5 * act, 2);
      a.backward_bytes = 9 * act;
    } else {
      const char* kind = m.mlp == MlpKind::kSwiglu ? "swiglu" : "bias_gelu";
      memory(ops, n, kind, kind, (up_mult + 1) * act);
    }
  }
  Op& down = gemm(ops, n, moe ? "expert_down" : "mlp_down", expert_rows, h, f / t);
  down.tp_comm_after = !moe;
  down.moe = moe;
  // In: the activation's output; back: the residual stream's gradient (the experts' combine;
  // a parallel block's two branches share one, cast for attn_proj).
  down.fp8_in_elements = expert_rows * f / t;
  down.fp8_in_fused = true;
  down.fp8_grad_elements = moe ? expert_rows * h : m.parallel_block ? 0 : ew_rows * h;
  if (moe) {
    Op& unpermute = memory(ops, n, "moe_unpermute", "copy",
                           (sorted ? 2.0 * rows_bytes : 0.0) + local_rows_bytes +
                               ew_rows * h * kAct);
    unpermute.backward_bytes = unpermute.bytes;
  }
  memory(ops, n, "mlp_bias_dropout_add", "bias_dropout_add", bda_bytes);
  ops.resize(n);
}

std::vector<Op> layer_forward_ops(const ModelConfig& m, const Sharding& s, int layer_index) {
  std::vector<Op> ops;
  layer_forward_ops(m, s, layer_index, ops);
  return ops;
}

void embedding_forward_ops(const ModelConfig& m, const Sharding& s, std::vector<Op>& ops) {
  std::size_t n = 0;
  const double tokens = s.micro_batch * static_cast<double>(m.seq_len) / s.cp;
  // Vocab-parallel lookup writes [tokens × h], then an all-reduce / reduce-scatter over TP.
  Op& lookup = memory(ops, n, "embedding", "embedding", tokens * m.hidden * kAct * 2);
  lookup.tp_comm_after = s.tp > 1;
  ops.resize(n);
}

std::vector<Op> embedding_forward_ops(const ModelConfig& m, const Sharding& s) {
  std::vector<Op> ops;
  embedding_forward_ops(m, s, ops);
  return ops;
}

void head_forward_ops(const ModelConfig& m, const Sharding& s, std::vector<Op>& ops) {
  std::size_t n = 0;
  const double tokens = s.micro_batch * static_cast<double>(m.seq_len) / s.cp;
  memory(ops, n, "final_norm", norm_kernel(m), 2 * (s.sp ? tokens / s.tp : tokens) * m.hidden * kAct);
  Op& logits = gemm(ops, n, "logits", tokens, static_cast<double>(m.vocab) / s.tp, m.hidden);
  logits.tp_comm_before = true;
  logits.keep_16bit = true;
  // Vocab-parallel cross-entropy over [tokens × V/tp], as the framework's implementation moves it.
  const double logits_n = tokens * (static_cast<double>(m.vocab) / s.tp);
  const CrossEntropyBytes ce = cross_entropy_bytes_per_logit(s.cross_entropy, kAct);
  Op& loss = memory(ops, n, "cross_entropy", "cross_entropy", logits_n * ce.forward,
                    ce.forward_kernels);
  loss.backward_bytes = logits_n * ce.backward;
  ops.resize(n);
}

std::vector<Op> head_forward_ops(const ModelConfig& m, const Sharding& s) {
  std::vector<Op> ops;
  head_forward_ops(m, s, ops);
  return ops;
}

CrossEntropyBytes cross_entropy_bytes_per_logit(CrossEntropyKernel k, double e) {
  switch (k) {
    case CrossEntropyKernel::kUnfused: return {e + 36, 12 + e, 6};
    case CrossEntropyKernel::kNative: return {e + 20, 4 + e, 3};
    case CrossEntropyKernel::kTe: return {3 * e, 2 * e, 2};
  }
  return {};
}

RopeBytes rope_bytes_per_element(RopeKernel k, double e) {
  switch (k) {
    case RopeKernel::kFused: return {2 * e, 2 * e, 1};
    case RopeKernel::kUnfused: return {12 * e, 13 * e, 6};
    case RopeKernel::kComplex: return {2 * e + 16, 2 * e + 16, 3};
    case RopeKernel::kNone: return {0, 0, 0};
  }
  return {};
}

double memory_backward_byte_ratio(std::string_view kernel) {
  if (kernel == "layernorm" || kernel == "rmsnorm" || kernel == "softmax" ||
      kernel == "bias_gelu") {
    return 1.5;
  }
  if (kernel == "swiglu") return 5.0 / 3.0;
  if (kernel == "dropout") return 1.0;
  if (kernel == "bias_dropout_add") return 5.0 / 7.0;
  if (kernel == "embedding") return 2.5;
  return 0.0;
}

double recompute_share(const ModelConfig& m, const Op& op, Recompute r) {
  switch (r) {
    case Recompute::kNone: return 0.0;
    case Recompute::kFull: return 1.0;
    case Recompute::kSelective: return attention_core(op) ? 1.0 : 0.0;
    case Recompute::kSelectiveOp: break;
  }
  const bool swiglu = m.mlp == MlpKind::kSwiglu;
  // The attention call's output is kept: neither the kernel nor its ring merges run again.
  if (op.kind == OpKind::kAttention || op.name == "cp_out_correction") return 0.0;
  if (op.name == "qkv") {
    const double q = m.q_dim(), kv = m.kv_dim();
    return kv / (q + 2.0 * kv);
  }
  if (op.name == "mlp_up") return swiglu ? 0.5 : 0.0;
  if (op.name == "mlp_down") return swiglu ? 0.0 : 1.0;
  if (op.name == "mlp_bias_dropout_add") return 0.0;
  return 1.0;
}

}  // namespace trainsim::model
