// Parallel layout, training settings and system optimizations: the plain config structs that
// `scenarios/` fills and the planner and executors read.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "sim/core/units.h"
#include "sim/model/ops.h"
#include "sim/model/transformer.h"

namespace trainsim::plan {

enum class Schedule { kGpipe, k1F1B, kInterleaved };
enum class Optimizer { kAdam, kLamb };
// The order ranks are numbered in, fastest-varying first (Megatron-Core's `order` of
// initialize_model_parallel): TP, CP, DP, PP (its default, tp-cp-ep-dp-pp) or TP, CP, PP, DP
// (Megatron-LM's --use-tp-pp-dp-mapping, tp-cp-ep-pp-dp; Llama 3's "[TP, CP, PP, DP]", Llama
// Team 2024 §3.3.2). It decides which groups stay inside a server or a pod.
enum class RankOrder { kTpCpDpPp, kTpCpPpDp };

struct ParallelConfig {
  int tp = 1;    // tensor parallel
  int pp = 1;    // pipeline stages
  int dp = 1;    // data parallel replicas (the GPU count is tp·pp·dp·cp)
  int vpp = 1;   // virtual pipeline chunks per stage (interleaved 1F1B when > 1)
  int cp = 1;    // context parallel
  int ep = 1;    // expert parallel, carved out of dp (must divide dp)
  bool sp = false;  // sequence parallel (TP regions shard the non-TP activations)
  int zero = 0;     // 0 none, 1 optimizer state, 2 + gradients, 3 + parameters, sharded over dp
  Schedule schedule = Schedule::k1F1B;
  // The group ZeRO/the distributed optimizer shards over: DP alone (Megatron-LM before Oct 2023)
  // or DP·CP (Megatron-Core since Oct 2023: the CP ranks of a DP group hold the same weights).
  bool shard_over_cp = false;
  // Under SP, what a column-parallel layer (QKV, MLP up) keeps of its all-gathered input for its
  // weight gradient (framework.sp_wgrad_input). false: the rank's own s/t rows, gathered again in
  // backward beside the input-gradient GEMM (Megatron-LM's
  // LinearWithGradAccumulationAndAsyncCommunication since SP came in 2022, Transformer Engine's
  // Linear and LayerNormLinear). true: the whole gathered tensor, no second gather (PyTorch
  // DTensor TP as TorchTitan runs it: the all-gather's output is the Linear's saved input).
  bool sp_saves_gathered_input = false;
  // Framework implementation choices that change what a layer keeps for backward (and the
  // element-wise work it runs; sim/model/ops.h Sharding): SwiGLU as two PyTorch ops keeps SiLU's
  // output besides its input (framework.activation unfused), and GQA keys and values repeated to
  // every query head are saved at the queries' width (framework.gqa_kv repeat).
  bool activation_unfused = false;
  bool gqa_kv_repeated = false;
  // Layers on the first and the last pipeline stage; 0 = an even split, with the layers that do
  // not divide evenly on the middle stages (the first stage holds the most in-flight activations).
  // Llama 3 405B: one layer fewer on each end (Dubey et al. 2024, §3.3.2).
  int first_stage_layers = 0;
  int last_stage_layers = 0;
  RankOrder order = RankOrder::kTpCpDpPp;

  int world() const { return tp * pp * dp * cp; }
  // Rank distance between neighbouring pipeline stages and between neighbouring DP replicas.
  int pp_stride() const { return order == RankOrder::kTpCpDpPp ? tp * cp * dp : tp * cp; }
  int dp_stride() const { return order == RankOrder::kTpCpDpPp ? tp * cp : tp * cp * pp; }
  // The pipeline stage of a rank.
  int stage_of(int rank) const { return (rank / pp_stride()) % pp; }
  // The ranks ZeRO / the distributed optimizer shards dense state over: DP, or DP·CP.
  int zero_group() const { return dp * (shard_over_cp ? cp : 1); }
};

struct TrainingConfig {
  int global_batch = 0;   // sequences per iteration
  int micro_batch = 1;    // sequences per micro-batch
  Precision precision = Precision::kBf16;
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;  // how fp8 GEMM inputs are scaled (fp8 only)
  model::Recompute recompute = model::Recompute::kNone;
  // Full recompute of only this many layers per pipeline stage (Megatron's
  // --recompute-method block --recompute-num-layers N); the other layers keep everything.
  // 0 = every layer (with kFull).
  int recompute_layers = 0;
  // The framework's own selective recompute, what `training.recompute: auto` and `sweep --auto`
  // try between none and full (framework.selective_recompute): kSelective (Megatron's attention
  // core), kSelectiveOp (PyTorch's per-op checkpointing with TorchTitan's policy) or kNone (the
  // framework has neither). Prices nothing itself.
  model::Recompute selective_mode = model::Recompute::kSelective;
  // Activation offloading (Megatron-Core's cpu_offloading_num_layers, Transformer Engine's
  // get_cpu_offload_context): the activations of the first N layers go to host memory during
  // the forward pass and come back for the backward; at most layers − N layers' activations are
  // on the GPU at any time. Megatron-Core allows it without pipeline parallelism and without
  // activation recompute only. 0 = off.
  int cpu_offload_layers = 0;
  Optimizer optimizer = Optimizer::kAdam;
  Precision grad_reduce = Precision::kFp32;  // datatype of the DP gradient reduction
};

/// DP gradient bucket sizing (Megatron DDP): a fixed 40 M parameters (until Megatron-Core 0.7,
/// April 2024) or max(40 M, 1 M · DP) parameters (since: larger buckets keep large-DP rings
/// bandwidth-bound). Without overlap the whole gradient is one reduction after the backward pass.
enum class BucketRule { kFixed40M, kScaledWithDp };
inline double dp_bucket_params(BucketRule rule, int dp) {
  return rule == BucketRule::kScaledWithDp && dp > 40 ? 1e6 * dp : 40e6;
}
/// The DP buckets of a model chunk of `params` parameters over `layers` layers: buckets of
/// `bucket_params` parameters made of whole layers (at least one bucket, at most one a layer).
/// Each is a collective of its own (the Program runs them so; the analytic fidelity prices them
/// so).
inline int dp_bucket_count(double params, double bucket_params, int layers) {
  return std::clamp(static_cast<int>(std::ceil(params / bucket_params)), 1, std::max(1, layers));
}

enum class PpActivation : std::uint8_t { kScatterGather, kFull };

/// How a weight's gradient is summed over the micro-batches of an iteration
/// (framework.grad_accumulation; docs/analytic-model.md §2, "Gradient accumulation"):
/// - kInGemm: the weight-gradient GEMM adds into the gradient buffer itself (Megatron-LM's
///   gradient-accumulation fusion, on by default since 2022-02, commit 83b1e42f: the wgrad
///   GEMM's epilogue reads and writes the fp32 main_grad); no kernel of its own.
/// - kAdd16: PyTorch autograd's AccumulateGrad adds each new 16-bit gradient into `.grad` in
///   place, one kernel per parameter tensor, from the second micro-batch on (the first one's
///   gradient is taken over as `.grad`): read 2 + 2 B, write 2 B per parameter. Megatron-LM v2.5
///   (SC21: fp16, local DDP without contiguous buffers, examples/sc21/CONFIG.sh) and DeepSpeed's
///   engine between gradient-accumulation boundaries.
/// - kAddFp32: the new 16-bit gradient is added into an fp32 accumulator per micro-batch: the
///   first writes the fp32 copy (read 2 B, write 4 B), the others read 2 + 4 B and write 4 B
///   (FSDP2's unsharded_accumulated_grad in the reduce dtype while gradient sync is off between
///   micro-batches; Llama 3 §3.3.2 accumulates in FP32 across micro-batches).
enum class GradAccumulation : std::uint8_t { kInGemm, kAdd16, kAddFp32 };
/// HBM bytes per parameter that micro-batch accumulation moves: `first` = the iteration's first
/// micro-batch of the model chunk.
inline double grad_accumulation_bytes_per_param(GradAccumulation g, bool first) {
  switch (g) {
    case GradAccumulation::kInGemm: return 0.0;
    case GradAccumulation::kAdd16: return first ? 0.0 : 6.0;
    case GradAccumulation::kAddFp32: return first ? 6.0 : 10.0;
  }
  return 0.0;
}

/// What NCCL assumes one point-to-point channel moves over the network: NCCL 2.29's
/// NCCL_P2P_PER_CHANNEL_NET_BW default, 14 GB/s (src/graph/paths.cc, which sizes the channels
/// per net peer as max(NICs, ⌈NIC bandwidth / 14 GB/s⌉)).
inline constexpr double kNcclP2pChannelNetBps = 14e9;

/// MegaScale's system levers (DESIGN.md §4), each changing what the model computes or overlaps.
struct Optimizations {
  bool tp_overlap = false;           // TP/SP all-gather and reduce-scatter fused with GEMMs
  bool pp_overlap = false;           // PP send/recv off the critical path
  bool dp_overlap = false;           // DP reduce-scatter during backward, all-gather prefetch
  bool efficient_operators = false;  // the framework's fused attention kernel
  bool async_data_pipeline = false;  // data loading overlapped with the previous iteration
  bool lamb = false;                 // LAMB optimizer (allows a larger global batch)
  bool sliding_window = false;       // attention limited to model.attention_window tokens
  bool parallel_block = false;       // parallel transformer block (attention ∥ MLP)
  bool fast_comm_init = false;       // Redis-like store + ordered group creation at start-up
  // The attention kernel (the framework's; efficient_operators alone means FlashAttention-2).
  model::AttentionKernel attention_kernel = model::AttentionKernel::kUnfused;
  // The cross-entropy implementation (framework.cross_entropy; sim/model/ops.h).
  model::CrossEntropyKernel cross_entropy = model::CrossEntropyKernel::kUnfused;
  // The RoPE implementation (framework.rope; sim/model/transformer.h).
  model::RopeKernel rope = model::RopeKernel::kFused;
  // Each ZeRO parameter all-gather is followed by a copy of the gathered buffer into the
  // unsharded parameters on the compute stream (framework.fsdp_copy_out: PyTorch FSDP2's
  // foreach_all_gather_copy_out): read and written once in the parameters' 16-bit dtype.
  bool fsdp_copy_out = false;
  // Each gradient reduce-scatter first copies the bucket's 16-bit gradients into a flat buffer in
  // the reduce dtype, and the compute stream waits for that copy (framework.fsdp_copy_in: PyTorch
  // FSDP2's foreach_reduce_scatter_copy_in, the default stream's wait_event(copy_in_event)).
  bool fsdp_copy_in = false;
  // Before each gradient reduction the bucket's gradients are scaled by 1/DP in a pass of their
  // own on the compute stream, read and written in the reduce dtype (framework.grad_scale_pass:
  // Megatron's `data /= dp` / `grad_data *= gradient_scaling_factor` before the collective,
  // until NCCL's average replaced it with average_in_collective).
  bool grad_scale_pass = false;
  // Every step zeroes the rank's gradient buffer with a memset on the compute stream
  // (framework.zero_grad_buffer): Megatron-LM's zero_grad_buffer() at the start of train_step
  // (contiguous buffers, since 2021-03-08, b4bc51b1e7; Megatron-Core's DDP since), DeepSpeed's
  // BF16_Optimizer.clear_hp_grads() after its step. false: the gradients are freed instead
  // (PyTorch's zero_grad(set_to_none=True), FSDP, DeepSpeed's ZeRO optimizer).
  bool zero_grad_buffer = false;
  // TP overlap splits the GEMM beside a TP collective into TP chunks and pipelines them with the
  // collective's pieces (Transformer Engine userbuffers, MegaScale §3.2); false: the collective
  // runs beside the whole GEMM it does not depend on (bulk overlap).
  bool tp_overlap_decomposed = true;
  // Without TP overlap, the backward's TP collectives still run beside the GEMM that does not
  // need them (framework.tp_async_backward): Megatron-LM's
  // LinearWithGradAccumulationAndAsyncCommunication launches the input's re-gather (SP) before
  // the input-gradient GEMM and the input gradient's reduce-scatter (or all-reduce without SP)
  // before the weight-gradient GEMM, asynchronously, ordered by CUDA_DEVICE_MAX_CONNECTIONS=1
  // (2021-09 for the all-reduce, with SP from 2022-05). The forward's collectives stay exposed.
  bool tp_async_backward = false;
  BucketRule dp_buckets = BucketRule::kScaledWithDp;
  // How a pipeline boundary's activation travels without sequence parallelism (with it, every
  // TP rank sends its s/t shard and nothing is gathered): scatter-gather (Megatron-LM
  // 2021-02 to 2023-03: each TP rank sends 1/t of it through its own NIC and the receivers
  // all-gather it over the TP group before computing) or full (Megatron-Core from 23.04: every
  // TP rank sends the whole tensor).
  PpActivation pp_activation = PpActivation::kScatterGather;
  // NCCL network channels per point-to-point peer (NCCL_NCHANNELS_PER_NET_PEER; NCCL before
  // 2.12 used 1); 0 = as many as fill the NIC. Each moves at most kNcclP2pChannelNetBps.
  int p2p_net_channels = 0;
  // SMs an NCCL collective's kernels hold while they transfer (its channels, one CTA each, as
  // NCCL_MAX_CTAS caps them); 0 = the profile's nccl_channels (exec::nccl_sms).
  int comm_sms = 0;
  // SMs the TP overlap's communication kernels hold (framework.tp_overlap_sms: Transformer
  // Engine's userbuffers are not NCCL); 0 = as an NCCL collective (exec::tp_comm_sms).
  int tp_overlap_sms = 0;
  GradAccumulation grad_accumulation = GradAccumulation::kInGemm;
  // Context parallelism's K/V exchange (framework.cp_comm): false = the ring of point-to-point
  // pieces pipelined with the attention blocks (Transformer Engine's default, `cp_comm_type`
  // p2p); true = K and V all-gathered before attention and dK/dV reduce-scattered after it, the
  // collectives exposed (Llama 3 §3.3.2: "the all-gather communication latency is exposed in the
  // critical path", kept for document masks and because GQA makes K and V small).
  bool cp_all_gather = false;
  bool fused_attention() const { return attention_kernel != model::AttentionKernel::kUnfused; }
};

const char* to_string(Schedule s);
const char* to_string(Optimizer o);

/// How one GPU's share of a layer is cut (model::Sharding) for a run's parallel configuration,
/// training and framework: the one place the analytic fidelity, the Program and the launch plan
/// take it from.
inline model::Sharding sharding_of(const ParallelConfig& par, const TrainingConfig& training,
                                   const Optimizations& opt) {
  model::Sharding s;
  s.micro_batch = training.micro_batch;
  s.tp = par.tp;
  s.cp = par.cp;
  s.cp_all_gather = opt.cp_all_gather;
  s.sp = par.sp && par.tp > 1;
  s.fused_attention = opt.fused_attention();
  s.attention_kernel = opt.attention_kernel;
  s.cross_entropy = opt.cross_entropy;
  s.ep = par.ep;
  s.rope = opt.rope;
  s.activation_unfused = par.activation_unfused;
  s.gqa_kv_repeated = par.gqa_kv_repeated;
  return s;
}

}  // namespace trainsim::plan
