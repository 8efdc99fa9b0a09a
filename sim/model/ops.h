// The compute ops of one transformer layer (and of the embedding and loss), with the shapes one
// GPU sees when the layer is sharded `tp` ways by tensor parallelism and its sequence `cp` ways by
// context parallelism.
//
// The op list is what the compute-time model prices (and, later, what the real executor launches):
// each op is a GEMM (m, n, k), a fused attention (batch·heads, queries, keys, head dim) or a
// memory-bound kernel (bytes moved). Backward ops are derived from the forward ones.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sim/model/transformer.h"

namespace trainsim::model {

enum class OpKind { kGemm, kAttention, kMemory };

struct Op {
  std::string name;
  OpKind kind = OpKind::kMemory;
  double m = 0, n = 0, k = 0;  // GEMM: [m×k]·[k×n]; batched GEMMs use `batch`
  double batch = 1;           // independent GEMMs / attention heads×sequences
  double flops = 0;           // forward FLOPs of the op on one GPU
  double bytes = 0;           // forward HBM traffic of a memory-bound op
  // Backward HBM traffic of a memory-bound op whose backward is not twice its forward (the
  // cross-entropy implementations, the MoE permutations); < 0: twice `bytes`
  // (sim/exec/compute_model.h).
  double backward_bytes = -1;
  int kernels = 1;            // kernel launches
  // Kernel launches of a memory-bound op's backward where they differ from its forward's
  // (the context-parallel ring's merges: cp output and cp − 1 statistics merges forward, 3·cp
  // gradient accumulations backward); < 0: `kernels`.
  int backward_kernels = -1;
  bool tp_comm_after = false; // followed by a TP reduce-scatter / all-reduce (row-parallel output)
  bool tp_comm_before = false;// preceded by a TP all-gather (column-parallel input under SP)
  bool moe = false;           // part of the expert MLP
  // Runs at the 16-bit rate under fp8 training: the output layer (logits), which Megatron-Core
  // builds as a plain ColumnParallelLinear rather than a Transformer Engine module (outside
  // fp8 autocast) and TorchTitan's float8 conversion leaves out.
  bool keep_16bit = false;
  // Under fp8 (a GEMM without keep_16bit, batch 1): the elements Transformer Engine casts to fp8
  // for it on this GPU, forward (its input activation) and backward (its output gradient), each
  // cast once and kept in both layouts (row-wise for one GEMM, transposed for the weight
  // gradient). Under SP a column-parallel input and a row-parallel output gradient are cast on
  // the local tokens/tp rows before the all-gather, as TE gathers the fp8 copy. `_fused`: the
  // kernel that writes the tensor (a norm, an activation or its backward) computes the amax
  // itself (sim/exec/compute_model.h, fp8_cast_time).
  double fp8_in_elements = 0;
  double fp8_grad_elements = 0;
  bool fp8_in_fused = false;
  bool fp8_grad_fused = false;
  // Memory-bound ops: the kernel kind that runs it, one of calib::measured_kernel_ops()
  // ("layernorm", "softmax", "dropout", ...), so that a measured profile prices it with the
  // efficiency measured for that kind (Profile::memory_efficiency).
  const char* kernel = "";
};

/// Whether `op` is part of the attention core (scores, softmax, dropout and context, or the one
/// fused attention kernel): the ops selective recompute repeats and the ops a context-parallel
/// ring overlaps its K/V exchange with. The names are those sim/model/ops.cpp gives them.
inline bool attention_core(const Op& op) {
  return op.kind == OpKind::kAttention || op.name == "attn_scores" || op.name == "softmax" ||
         op.name == "attn_dropout" || op.name == "attn_context" ||
         op.name == "cp_out_correction";
}
/// The share of `op`'s forward (of a dense transformer layer) that recompute mode `r` runs
/// again before the layer's backward: 1 for every op under full recompute, the attention core
/// under selective. Under selective-op (TorchTitan's per-op policy, Recompute::kSelectiveOp) the
/// ops whose outputs are kept run not again: the fused attention kernel, and of the matmuls in
/// forward order (wq, wk, wv, wo, w1, [w3,] w2; the `qkv` op holds the first three and a SwiGLU
/// `mlp_up` w1 and w3) the odd-numbered ones, so `qkv` runs its wk share again
/// (kv / (q + 2·kv)), `attn_proj` (wo) in full, a SwiGLU `mlp_up` half (w3) and `mlp_down` (w2)
/// not, a GeLU `mlp_up` (w1) not and `mlp_down` (w2, the sixth) in full. Every element-wise op
/// runs again but the residual add after the MLP: PyTorch's non-reentrant checkpoint stops its
/// recompute once the last tensor the backward needs (w2's input) is rebuilt.
double recompute_share(const ModelConfig& m, const Op& op, Recompute r);
/// Whether a GEMM runs at the 16-bit rate whatever the training precision: attention's batched
/// GEMMs (the score and context products) and the ops marked keep_16bit. Under fp8 every other
/// GEMM runs on the fp8 tensor cores and has its inputs cast (sim/exec/compute_model.h).
inline bool runs_16bit(const Op& op) { return op.batch > 1 || op.keep_16bit; }
/// Whether `op` is a GEMM that runs in fp8 when the training precision is fp8.
inline bool fp8_capable(const Op& op) { return op.kind == OpKind::kGemm && !runs_16bit(op); }

/// HBM bytes per logit of each cross-entropy implementation (CrossEntropyKernel), forward and
/// backward, with 16-bit (`act_bytes`) logits; counted from what each step reads and writes
/// (Megatron-Core tensor_parallel/cross_entropy.py and fusions/fused_cross_entropy.py, TE
/// pytorch/triton/cross_entropy.py; docs/analytic-model.md §2):
///  unfused  forward: cast to fp32 (e + 4), max (4), subtract in place (8), exp in place (8),
///           sum (4), divide in place (8): e + 36, six kernels; backward: the target's update
///           (per row), multiply in place (8), autograd's cast back to 16 bits (4 + e): 12 + e;
///  native   forward: cast and max fused, the fp32 copy kept (e + 4), subtract-exp fused (8),
///           divide in place (8): e + 20, three kernels; backward: update, multiply and cast
///           fused (4 + e);
///  te       (TE v2.7/v2.8) forward: the online-softmax pass reads the logits (e), the loss pass
///           reads them again and writes the gradient in their place (2e): 3e, two kernels;
///           backward: the gradient scaled in place by the per-token loss gradient (2e).
struct CrossEntropyBytes {
  double forward = 0;
  double backward = 0;
  int forward_kernels = 1;
};
CrossEntropyBytes cross_entropy_bytes_per_logit(CrossEntropyKernel k, double act_bytes);

/// How one GPU's share of a layer is cut.
struct Sharding {
  int micro_batch = 1;
  int tp = 1;
  int cp = 1;
  // Context parallelism's K/V all-gathered before one attention call (framework.cp_comm
  // all-gather) rather than a ring of cp calls, each on the K/V chunk received.
  bool cp_all_gather = false;
  bool sp = false;                 // sequence parallel: norms/dropout on s/tp tokens
  bool fused_attention = false;    // FlashAttention-style kernel instead of GEMM+softmax+GEMM
  AttentionKernel attention_kernel = AttentionKernel::kFlash2;  // which one, when fused
  CrossEntropyKernel cross_entropy = CrossEntropyKernel::kUnfused;
  int ep = 1;                      // expert parallelism: experts / ep are local to a GPU
  // The element-wise work a framework runs its own way (framework.rope, .activation, .gqa_kv):
  RopeKernel rope = RopeKernel::kFused;  // a RoPE model's rotation of queries and keys
  bool activation_unfused = false;       // SwiGLU as SiLU then ·up (two kernels, three back)
  bool gqa_kv_repeated = false;          // GQA keys and values copied to every query head
};

/// HBM bytes per rotated element (queries' and keys') of a RoPE implementation, forward and
/// backward, 16-bit activations of `act_bytes` each, and its kernels per rotated tensor:
///  fused    read + write (2e) each way, one kernel (the per-position cos/sin table, s·d values
///           shared by every head and sequence, is left out);
///  unfused  t·cos (2e), the negated half (e) and rotate_half's concatenation (2e), ·sin (2e),
///           the sum (3e), the concatenation with the unrotated part (2e): 12e, six kernels;
///           backward: the two products' gradients (2e + 2e), the negation (e) and the chunks'
///           concatenation (2e), the sum of the two paths' gradients (3e) and the slice's
///           zero-filled gradient (3e): 13e, seven kernels;
///  complex  .float() (e + 4), the complex multiply in fp32 (8), .type_as() (4 + e): 2e + 16,
///           three kernels; backward the same three in reverse: 2e + 16.
struct RopeBytes {
  double forward = 0;
  double backward = 0;
  int kernels = 1;  // per rotated tensor (queries, keys), forward
};
RopeBytes rope_bytes_per_element(RopeKernel k, double act_bytes);

/// HBM bytes per parameter of one optimizer step: Adam reads and writes the fp32 master weights
/// and both moments (24 B), reads the fp32 gradient (4 B), writes the 16-bit weights (2 B), and
/// gradient clipping reads the gradients once more (4 B): 34; LAMB adds the per-tensor weight and
/// update norms (another 8 B): 42.
inline double optimizer_bytes_per_param(bool lamb) { return lamb ? 42.0 : 34.0; }

/// HBM bytes of a memory-bound op's dedicated backward kernel per byte of its forward, for 16-bit
/// activations, from what each kernel reads and writes (kernels/bench_plan.cpp
/// memory_kernel_bytes, whose large-shape ratios these are; a test keeps them in step):
/// LayerNorm/RMSNorm x, dy → dx (3 vs 2 tensors), softmax y, dy → dx (3 vs 2), bias-GeLU x, dy →
/// dx (3 vs 2), SwiGLU gate, up, dy → dgate, dup (5 vs 3), dropout dy, mask → dx (the same
/// 2e + 1 bytes), bias-dropout-add dy, mask → dx (2e + 1 of 3e + 1: 5/7), embedding dy in and
/// the fp32 table-gradient rows read and written (e + 8 of 2e: 5/2). 0 for a kind without one
/// (cross-entropy writes its gradient in the forward; optimizers have no backward). The
/// simulator uses it where a measured profile timed the backward kernel
/// (sim/exec/compute_model.h); otherwise a backward moves twice the forward's bytes.
double memory_backward_byte_ratio(std::string_view kernel);

/// Forward ops of layer `layer_index` (0-based; decides MoE vs dense), for one micro-batch.
std::vector<Op> layer_forward_ops(const ModelConfig& m, const Sharding& s, int layer_index);
/// Forward ops of the input embedding (first pipeline stage).
std::vector<Op> embedding_forward_ops(const ModelConfig& m, const Sharding& s);
/// Forward ops of the output projection and cross-entropy loss (last pipeline stage).
std::vector<Op> head_forward_ops(const ModelConfig& m, const Sharding& s);

/// The same lists written into `out` (replacing its contents), reusing its elements and their
/// names' storage: a caller that keeps `out` between calls allocates nothing (the analytic core).
void layer_forward_ops(const ModelConfig& m, const Sharding& s, int layer_index,
                       std::vector<Op>& out);
void embedding_forward_ops(const ModelConfig& m, const Sharding& s, std::vector<Op>& out);
void head_forward_ops(const ModelConfig& m, const Sharding& s, std::vector<Op>& out);

}  // namespace trainsim::model
