// Transformer description and its FLOP and parameter accounting.
//
// `ModelConfig` describes a decoder-only transformer (GPT, Llama with GQA/SwiGLU/RMSNorm/RoPE,
// MoE, parallel attention+MLP block, sliding-window attention). Everything here is independent of
// how the model is parallelised: counts are for the whole model and one token or one sequence.
//
// FLOP accounting follows Megatron-LM (Narayanan et al., SC21, Eq. 3 and its appendix): every
// GEMM costs 2·m·n·k, a backward pass costs twice the forward, attention scores count the full
// s×s matrix (no causal halving, as Megatron, MegaScale and the NeMo recipes count), embeddings
// lookups and element-wise ops are not counted. For a GPT with ffn = 4h and full attention this
// reduces exactly to 72·l·h²·(1 + s/6h + V/12lh) FLOPs per token (fwd+bwd).
#pragma once

#include <cstdint>
#include <string>

namespace trainsim::model {

enum class MlpKind { kGelu, kSwiglu };
/// The attention kernel a framework runs. Fused kernels (FlashAttention-2/3, cuDNN's fused
/// scaled-dot-product attention) tile queries and keys into blocks and skip the blocks the causal
/// or sliding-window mask removes entirely; the unfused path (QKᵀ GEMM, masked softmax, ·V GEMM)
/// computes the full s × s score matrix whatever the mask. kTriton is FlashAttention's Triton
/// kernel of 2022 (flash_attn_triton.py, FlashAttention-1's algorithm on the pre-MLIR Triton
/// compiler), which MosaicML's MPT ran as `attn_impl: triton`: fused, with the same 128 × 128
/// tiles and masked-tile skip, at its own rate (calibrate/profiles/README.md).
enum class AttentionKernel { kUnfused, kFlash2, kFlash3, kCudnn, kTriton };
/// The cross-entropy implementation a framework runs over the vocab-parallel logits.
///  kUnfused: Megatron's VocabParallelCrossEntropy as separate PyTorch ops (the default of
///            Megatron-LM and Megatron-Core: `cross_entropy_loss_fusion` off);
///  kNative:  Megatron-Core's fused_vocab_parallel_cross_entropy (`--cross-entropy-loss-fusion`,
///            `cross_entropy_fusion_impl` native: the same steps in three fused functions);
///  kTe:      Transformer Engine's Triton parallel_cross_entropy (`cross_entropy_fusion_impl`
///            te, Megatron-Bridge's Llama recipes).
enum class CrossEntropyKernel { kUnfused, kNative, kTe };
/// Which FLOPs the MFU numerator counts (published runs differ; `validate` takes it per row).
///  kMegatron: Megatron-LM's accounting (SC21 Eq. 3): every GEMM, attention over the full s × s
///             matrix (no causal halving, no window), recompute not counted.
///  kMegatronRecompute: the same plus what recompute runs again (SC21's TFLOP/s, i.e. HFU).
///  kCausal:   attention over the keys the mask keeps (causal halving, the window).
///  k6N:       6 · parameters touched per token, no attention term (PaLM/TorchTitan style).
enum class FlopsConvention { kMegatron, kMegatronRecompute, kCausal, k6N };
/// How a framework applies rotary position embeddings to the queries and keys (framework.rope),
/// per element of the rotated tensors, 16-bit activations (docs/analytic-model.md §2):
///  kFused:   one kernel per tensor reads it and writes the rotated copy, forward and backward
///            (Transformer Engine's fused RoPE, which Megatron-Core runs by default since
///            2024-01-18, commit de9428a701 `--no-rope-fusion`; torch.compile's fused kernel);
///  kUnfused: Megatron's apply_rotary_pos_emb as PyTorch ops (t·cos, rotate_half's negation and
///            concatenation, ·sin, the sum, the concatenation with the unrotated rest): six
///            kernels forward, seven backward (Megatron-LM 2023-03-31 to 2024-01);
///  kComplex: Meta's reference Llama code as TorchTitan runs it eagerly (apply_rotary_emb:
///            .float(), a complex multiply, .type_as()): three kernels each way, through fp32.
///  kNone:    no rotation priced (the Program before program-22; records made then).
enum class RopeKernel { kFused, kUnfused, kComplex, kNone };
enum class NormKind { kLayerNorm, kRmsNorm };
enum class PositionKind { kLearned, kRope };

struct ModelConfig {
  std::string name = "custom";
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;        // = heads for MHA; fewer means GQA/MQA
  int ffn_hidden = 0;      // MLP inner size (per expert for MoE)
  int vocab = 0;
  int seq_len = 0;
  MlpKind mlp = MlpKind::kGelu;
  NormKind norm = NormKind::kLayerNorm;
  PositionKind position = PositionKind::kLearned;
  bool bias = true;              // linear layers and norms carry biases
  bool tied_embeddings = true;   // output projection shares the input embedding
  bool parallel_block = false;   // attention and MLP read the same norm output (GPT-J/PaLM style)
  int attention_window = 0;      // sliding-window size in tokens; 0 = full attention
  int experts = 0;               // MoE experts per MoE layer; 0 = dense
  int top_k = 1;                 // experts each token is routed to
  int moe_every = 1;             // layers 0, n, 2n, ... are MoE (when experts > 0)
  bool dropout = true;           // dropout after attention and MLP (and on the attention
                                 // probabilities); its masks are stored for backward
  // Width of one attention head (Megatron's --kv-channels, Hugging Face's head_dim); 0 =
  // hidden / heads. Models whose heads·head_dim is not hidden (Qwen 3, Gemma, GPT-OSS) project
  // the residual stream to a wider or narrower attention and back.
  int head_dim_given = 0;

  int head_dim() const { return head_dim_given > 0 ? head_dim_given : hidden / heads; }
  int q_dim() const { return heads * head_dim(); }  // queries and attention output, all heads
  int kv_dim() const { return kv_heads * head_dim(); }
  /// Megatron-Core's integer moe_layer_freq N: layer i (from 0) is an MoE layer when i % N == 0,
  /// so the first layer is one and a model of L layers has ⌈L/N⌉ of them
  /// (megatron/core/models/gpt/gpt_layer_specs.py, get_gpt_decoder_block_spec: the pattern is 1
  /// where i % moe_layer_freq == 0).
  bool is_moe_layer(int layer_index) const {
    return experts > 0 && (layer_index % moe_every) == 0;
  }
  int moe_layers() const { return experts > 0 ? (layers + moe_every - 1) / moe_every : 0; }
  /// MoE layers among global layers [first, first + count).
  int moe_layers_in(int first, int count) const {
    if (experts <= 0 || count <= 0) return 0;
    const auto upto = [&](int end) { return end <= 0 ? 0 : (end + moe_every - 1) / moe_every; };
    return upto(first + count) - upto(first);
  }
  /// Tokens each query attends to (min of window and sequence).
  int attended_tokens() const {
    return attention_window > 0 && attention_window < seq_len ? attention_window : seq_len;
  }
};

/// Parameter counts, in parameters (not bytes).
struct ParamCount {
  double attention = 0;   // per layer: QKV + output projection (+ biases)
  double mlp = 0;         // per dense layer: MLP weights (+ biases)
  double expert_mlp = 0;  // per MoE layer: all experts' MLP weights + router
  double norms = 0;       // per layer: the norm parameters
  double embedding = 0;   // token embedding (+ learned positions)
  double output = 0;      // untied output projection (0 when tied)
  double final_norm = 0;
  double total = 0;       // everything
  double active = 0;      // parameters a token touches (MoE: top_k experts only)
  // Parameter tensors (weights and biases as separate tensors, Megatron's layout: QKV fused,
  // SwiGLU's gate and up fused): per layer attention, per dense layer MLP, per expert MLP, per
  // layer norms, and the final norm.
  int attention_tensors = 0, mlp_tensors = 0, expert_tensors = 0, norm_tensors = 0;
  int final_norm_tensors = 0;
};

ParamCount count_parameters(const ModelConfig& m);
/// The embedding's parameters on one TP rank: the vocab-parallel word table split over TP, the
/// learned position table (model.position learned) whole on every rank, as Megatron keeps it
/// (a plain nn.Embedding beside VocabParallelEmbedding). It was divided by TP too.
double embedding_params_per_rank(const ModelConfig& m, const ParamCount& pc, int tp);

/// Forward FLOPs for one token, split by where they come from.
struct ForwardFlops {
  double dense_gemm = 0;   // per-layer GEMMs (QKV, proj, MLP / active experts, router), all layers
  double attention = 0;    // QKᵀ and attention·V, all layers
  double logits = 0;       // output projection to the vocabulary
  double total() const { return dense_gemm + attention + logits; }
};

ForwardFlops forward_flops_per_token(const ModelConfig& m);

/// Mean number of keys each query's attention kernel computes against, for a causal decoder.
/// Unfused kernels compute all `seq_len` keys. Fused kernels work on `block` × `block` tiles and
/// skip the tiles the causal mask (and the sliding window, when set) removes entirely: query block
/// i of n computes key blocks max(0, i − w_b) .. i, where w_b = ⌈window / block⌉. FlashAttention-2
/// (Dao 2023, §3.1) and cuDNN's fused attention use 128-token key blocks on A100/H100.
double executed_keys_per_query(const ModelConfig& m, AttentionKernel kernel, int block = 128);

/// Activation recompute. kSelectiveOp is PyTorch's per-op selective activation checkpointing
/// with TorchTitan's policy (`selective_ac_option = "op"`, torchtitan
/// parallelisms/parallelize_llama.py at 1ea476e9f, 2024-04-24): each layer is checkpointed, and
/// of its ops only the outputs of the fused attention call (SDPA) and of every odd-numbered
/// matmul in forward order (wq, wv, w1, w2 of a Llama layer; wk, wo, w3 run again) are kept
/// (model::recompute_share, plan::layer_activation_bytes).
enum class Recompute { kNone, kSelective, kFull, kSelectiveOp };

/// Model FLOPs per token (forward + backward, no recompute): the MFU numerator, under Megatron's
/// accounting (full s × s attention whatever the mask or window).
double model_flops_per_token(const ModelConfig& m);
/// The MFU numerator under a stated convention (kMegatronRecompute needs the recompute mode).
double flops_per_token(const ModelConfig& m, FlopsConvention c, Recompute r);
const char* to_string(FlopsConvention c);
const char* to_string(AttentionKernel k);
const char* to_string(RopeKernel k);
const char* to_string(CrossEntropyKernel k);
/// Hardware FLOPs per token: model FLOPs plus what recompute runs again (the HFU numerator).
/// Full recompute re-runs the forward of every layer (not the logits, Megatron Eq. 3);
/// selective recompute re-runs the attention core (QKᵀ, softmax, ·V) (Korthikanti et al. 2022).
/// `fused_attention`: the attention core is one fused kernel, which kSelectiveOp keeps (an
/// unfused core, batched matmuls and softmax, it runs again).
double hardware_flops_per_token(const ModelConfig& m, Recompute r, bool fused_attention = true);

/// Megatron-LM SC21 Eq. 2 parameter count for a GPT with ffn = 4h: 12lh²(1 + 13/12h + (V+s)/12lh).
double megatron_eq2_parameters(int layers, int hidden, int vocab, int seq_len);

const char* to_string(Recompute r);
const char* to_string(MlpKind k);
const char* to_string(NormKind k);
const char* to_string(PositionKind k);

}  // namespace trainsim::model
