// Analytic fidelity: one training iteration in closed form, no event queue and no contention.
//
// The iteration is built from the same pieces the detailed fidelities use (the op list of
// sim/model, the layout and memory of sim/plan, the collective costs of sim/collective) composed
// by the pipeline formula of Narayanan et al. (SC21 §2.2): with m micro-batches, p stages and v
// virtual chunks the pipeline runs (m + (p−1)/v) slots of the slowest stage. A slot is the forward,
// backward and recompute compute of one micro-batch plus the communication it could not hide.
// docs/analytic-model.md derives every term; the model version below changes when they change.
#pragma once

#include "calibrate/profile.h"
#include "sim/collective/analytic.h"
#include "sim/exec/result.h"
#include "sim/exec/scale.h"
#include "sim/model/transformer.h"
#include "sim/plan/config.h"
#include "sim/plan/layout.h"
#include "topology/hardware.h"

namespace trainsim::exec {

/// analytic-9: gradient accumulation over micro-batches priced where the framework does not fuse
/// it into the weight-gradient GEMM (framework.grad_accumulation; Megatron-LM SC21, DeepSpeed,
/// TorchTitan presets).
/// analytic-10: the optimizer step under ZeRO updates expert parameters sharded over DP (or
/// DP·CP) / EP, the ranks that hold the same experts, as the memory model counts them (it
/// divided them by the whole DP group).
/// analytic-11: the loss is priced as its implementation moves it (framework.cross_entropy:
/// Megatron's unfused vocab-parallel cross-entropy, Megatron-Core's fused one, Transformer
/// Engine's), with its own backward bytes; MoE layers pay the dispatcher's token permutations.
/// analytic-12: a fused attention kernel runs at its own rate where the profile rates it
/// (calib::Profile::attention_by_kernel): FlashAttention-2 on Hopper, FlashAttention's Triton
/// kernel of 2022 (framework.attention_kernel triton, the llm-foundry-2023 preset's); and
/// activation offloading to host memory (training.cpu_offload_layers, exec::offload_stalls).
/// analytic-13: ZeRO-3's backward weight gather and gradient reduce-scatter share the links, so
/// they hide together behind the backward pass (each hid behind it alone, which could print an
/// iteration shorter than its NIC bytes take); and a job with CP > 1 and DP 1 reduces its
/// gradients over the CP ranks (it skipped them).
/// analytic-14: an MoE layer under TP dispatches each TP rank's own tokens/tp through the EP
/// all-to-all, and the TP group all-gathers the dispatched rows for its TP-sharded experts and
/// reduce-scatters their output (every TP rank sent all the rows, and no TP collective ran).
/// analytic-15: under GPipe the last stage holds every micro-batch's logits (plan::memory_per_gpu).
/// analytic-16: training.recompute_layers counts per model chunk (Megatron-Core's per virtual
/// stage); an MoE model's activations count top_k only in its MoE layers (model.moe_every); the
/// ZeRO-3 gather buffer is two of the stage's largest units, at most the stage, none at DP·CP 1;
/// the context-parallel ring hides behind the attention blocks after the first, as the Program
/// pipelines it (it hid behind the whole attention).
/// analytic-17: MoE layers sit where Megatron-Core puts them (layer i when i % moe_every == 0,
/// ⌈L/n⌉ of them), each pipeline stage counts its own; an MoE layer keeps its tokens' top-k
/// permuted input rows and expert output rows; MoE under TP without SP is refused.
/// analytic-18: an overlapped collective takes at most the whole GPU's SMs (a described GPU of
/// fewer SMs than its channels); a described GPU's new bf16 peak carries its fp8 peak along.
/// analytic-19: with PP overlap, the sends no compute hides are one micro-batch's whole path
/// through the v·p model chunks both ways, 2·(v·p − 1) (the interleaved warm-up and cool-down
/// wait p sends at each chunk change), where 2·(p − 1) was charged whatever v; each DP bucket
/// (whole layers, as the Program cuts them) is a collective of its own and pays the ring's
/// latency again; the pipeline fill and drain run through the other stages (Σ t − max t, not
/// (p − 1)·max t); MoE layers every moe_every > 1 price their experts.
/// analytic-22: an NVLS all-reduce's algorithm bandwidth is the same at any group size (the
/// profile's 8-GPU bus bandwidth × 8/14), and NCCL runs NVLS only with more than two of the
/// group's GPUs on a server.
/// analytic-23: under SP the column-parallel layers' inputs are all-gathered again for their
/// weight gradients, as Megatron and Transformer Engine do (framework.sp_wgrad_input regather;
/// saved keeps the gathered input whole in memory instead, as DTensor TP does).
/// analytic-24: Megatron's asynchronous backward TP collectives (framework.tp_async_backward)
/// run beside the GEMM that does not need them without TP overlap.
/// analytic-25: ZeRO >= 2 sums each micro-batch's gradients on the shard of its sharding group
/// (DP·CP under framework.shard_group dp_cp), not on a 1/DP one.
/// analytic-26: element-wise work the framework runs its own way: RoPE rotates queries and keys
/// (framework.rope: fused, Megatron's unfused ops, or the complex fp32 path of eager TorchTitan),
/// SwiGLU may run as SiLU then the product (framework.activation) and GQA keys and values may be
/// repeated to every query head (framework.gqa_kv), with what each keeps for backward.
/// analytic-27: FSDP2's copy-out of gathered parameters on the compute stream
/// (framework.fsdp_copy_out, the TorchTitan presets).
/// analytic-28: training.recompute selective-op, PyTorch's per-op checkpointing with TorchTitan's
/// policy (model::recompute_share, plan::layer_activation_bytes); no earlier result moves.
/// analytic-29: training.recompute auto (and sweep --auto) tries the framework's own selective
/// recompute (framework.selective_recompute): TorchTitan's selective-op, placed among full
/// recompute of n layers by the FLOPs it replays, and none where the framework has no selective
/// mode; pricing unchanged, a run that states its recompute gives the same result.
/// analytic-30: ZeRO-3's DP exposure per chunk pass of every micro-batch, as the Program's one DP
/// stream runs it: each forward waits for its first bucket's gather behind the last
/// reduce-scatter before it, the backward leaves its last bucket's reduce-scatter, in the
/// Program's buckets of a chunk (ZeRO-3 rows move by at most 0.3 points, interleaved ZeRO-3 by up
/// to 4, toward the schedule); under ZeRO-2 a micro-batch's reduce-scatters run on beside the next
/// micro-batch, only the last one's behind its own backward alone.
/// analytic-31: under ZeRO-2 the priced end stage's drain (its last backward passes, as many
/// chunk steps as its warm-up) hides each reduce-scatter behind one chunk's backward alone, not a
/// forward and a backward; and Llama 3's layout (end chunks holding only the embedding or the
/// output layer) is accepted. One validation row moves (Llama 3 405B at 16,384 GPUs, −0.20).
/// analytic-32: groups that do not line up with the servers (TP 4 on 6-GPU servers, 72-GPU NVLink
/// domains) are priced at the worst group's shape, where the group at rank 0 decided; the
/// data-loading stall overlaps the parameter gather the first forward waits for (ZeRO-1/2/3), as
/// the Program runs them; a NIC or NVLink utilization above 1 is said in the notes.
/// analytic-33: an all-to-all's latency takes one network step per other server (a lone rank on a
/// partly filled last server paid n − 1: 9 ranks on DGX H100 144 µs at 1 KiB, 16 ranks 46).
/// analytic-34: with MoE every k-th layer, each pipeline stage is priced with the MoE layers its
/// model chunks hold (the first and last stages were contiguous ranges and stage 1 stood for
/// every middle stage, whatever the interleaving placed where: up to 27 % fast against the
/// executed schedule); the bubble sums the middle stages as they are.
/// analytic-35: the embedding's gradients (its parameters) make the data-parallel tail a
/// backward pass cannot hide (the first gather a forward pass waits for): at ZeRO 0-2 its share
/// of the DP collectives is exposed beside the rule's last bucket, as the Program's first bucket
/// holds it (a small model with a 128K vocabulary read its exposed DP 2.3× short of the
/// schedule); ZeRO-2 under GPipe reduces each micro-batch's gradients beside the next backward
/// alone.
/// analytic-36: a pipeline that spans servers prices its transfers across them (with two or more
/// stages on a server every pair counted as inside one, the interleaved wrap from the last stage
/// to the first included).
/// analytic-37: what the compute stream does to gradients before their reduction: FSDP2's copy
/// into the reduce-scatter's input (framework.fsdp_copy_in, the TorchTitan presets) and
/// Megatron's 1/DP scaling pass (framework.grad_scale_pass, the Megatron presets until NeMo 2's
/// average_in_collective).
/// analytic-38: ZeRO-3 without DP overlap gathers on demand, after the batch is loaded: the
/// loader's stall no longer hides the first chunk's gather.
/// analytic-39: a fused attention pass whose queries compute K keys runs at the profile's rate
/// × K / (K + the thread block's fixed cost in keys): short sequences and the first blocks of a
/// causal mask run below the plateau (the FlashAttention-2/-3 papers' kernel charts).
/// analytic-40: the attention curve depends on the head dimension (a second curve at 64,
/// interpolated up to 128: FlashAttention-1 is faster at 64, FlashAttention-2 slower); an
/// overlapped collective holds collectives.comm_sms SMs (8 unless set).
/// analytic-41: the SMs priced per kind of kernel: an NCCL collective holds NCCL's channels on
/// the GPU's server (the profile's collectives.nccl_channels: 24 on A100 and H100, 16 on
/// A800/H800, 32 on Blackwell), not 8; a TP overlap of the framework's own kernels
/// framework.tp_overlap_sms (Transformer Engine's userbuffers: 16), its ring exchanges 1.
/// analytic-42: a context-parallel ring (p2p) merges its steps' partial outputs after the last
/// step and adds each step's dQ, dK and dV into running sums (Transformer Engine's
/// AttnFuncWithCPAndKVP2P: 2 + 3·(cp − 1) passes over the rank's output, and over its query and
/// key/value gradients, on the slowest ring rank); the Megatron presets and DeepSpeed's bf16
/// optimizer zero the gradient buffer with a memset every step (framework.zero_grad_buffer,
/// counted in the optimizer step).
inline constexpr const char* kAnalyticModelVersion = "analytic-42";

/// Everything one evaluation needs; filled by scenarios/ from YAML, presets and --set.
struct RunConfig {
  model::ModelConfig model;
  topo::ClusterSpec cluster;
  plan::ParallelConfig parallel;
  plan::TrainingConfig training;
  plan::Optimizations opt;
  calib::Profile profile;
  coll::Choice collectives;  // NCCL_ALGO/NCCL_PROTO-style: algorithm for all-reduce, protocol
  ScaleConfig scale;         // costs that grow with the GPU count (scale.*)
};

struct AnalyticOptions {
  /// When true, a configuration whose peak memory exceeds the GPU's HBM throws
  /// trainsim::Error(kInfeasible) "does not fit: needs X GiB of Y GiB"; when false the result is
  /// returned with `memory.fits() == false` (sweeps keep such points with their reason).
  bool enforce_memory = true;
  /// With enforce_memory false: when false too, a configuration that does not fit returns right
  /// after its memory is known (version strings, GPUs, micro-batches and `memory` set, no
  /// timings), for callers that keep only the memory of such points (sweeps). Not when the
  /// timings could throw an input error (a collectives.algorithm or .protocol is chosen, or a
  /// link has no bandwidth): such a point still reports that error.
  bool timings_when_not_fitting = true;
};

/// The collective model's view of a cluster with a calibration profile: NVLink and NVLS bus
/// bandwidths and Ring/Simple latencies from the profile, per-GPU NIC bandwidth from the cluster's
/// NICs at the profile's achieved fraction of line rate.
coll::LinkModel link_model(const topo::ClusterSpec& cluster, const calib::Profile& profile);
/// The run's link model: the cluster's and profile's, with the point-to-point bound of its
/// NCCL channels per net peer (collectives.p2p_net_channels × kNcclP2pChannelNetBps).
coll::LinkModel link_model(const RunConfig& cfg);

/// Evaluates one iteration. Throws trainsim::Error(kInfeasible) for configurations that cannot run.
Result run_analytic(const RunConfig& cfg, const AnalyticOptions& options = {});

/// The rates of an iteration from r.iteration_time_s, r's FLOP counts and r.peak_flops_per_gpu:
/// tokens/s, model and hardware TFLOP/s per GPU, MFU and HFU (every fidelity uses this).
void set_rates(const RunConfig& cfg, Result& r);

/// run_analytic without an exception for a configuration that cannot run: returns false with
/// `why` holding the field, message and hint run_analytic would throw as
/// trainsim::Error(kInfeasible); otherwise fills `out` and returns true. Input errors (an
/// impossible collectives.algorithm/protocol) still throw. For sweeps, where half of the --auto
/// points fail a layout check.
bool try_run_analytic(const RunConfig& cfg, const AnalyticOptions& options, Result& out,
                      plan::Infeasibility& why);

/// "does not fit in memory: needs 93.1 GiB of 80.0 GiB per GPU (weights ..., activations ...)".
std::string memory_shortfall_message(const plan::MemoryUsage& mem);

}  // namespace trainsim::exec
