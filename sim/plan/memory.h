// Memory per GPU of a parallel training configuration.
//
// Model states follow mixed-precision training as Megatron-LM does it (ZeRO paper, Rajbhandari et
// al. 2020, §3): 16-bit weights (2 B/param), gradients accumulated in the reduction datatype
// (fp32: 4 B, bf16: 2 B), fp32 master weights + Adam/LAMB moments (12 B/param); ZeRO stage 1
// shards the optimizer state over DP, stage 2 also the gradients, stage 3 also the weights.
// Activations follow Korthikanti et al. 2022 ("Reducing Activation Recomputation", §4), generalised
// from 34·s·b·h + 5·a·s²·b to GQA, SwiGLU, MoE and the parallel block, with tensor, sequence and
// context parallelism, selective and full recompute, and FlashAttention (no s² scores kept).
// Pipeline schedules keep several micro-batches in flight on the first stage: PP for 1F1B,
// PP·(1 + (PP−1)/(PP·VPP)) for interleaved 1F1B, all micro-batches for GPipe.
#pragma once

#include <algorithm>
#include <limits>

#include "sim/model/transformer.h"
#include "sim/plan/config.h"
#include "sim/plan/layout.h"
#include "topology/hardware.h"

namespace trainsim::plan {

/// Memory of the most loaded GPU, bytes.
struct MemoryUsage {
  double weights_bytes = 0;
  double gradients_bytes = 0;
  double optimizer_bytes = 0;
  double activations_bytes = 0;       // all in-flight micro-batches of the schedule
  double comm_buffers_bytes = 0;      // NCCL channel buffers of every communicator
  double runtime_reserved_bytes = 0;  // CUDA context, workspaces, allocator fragmentation
  double peak_bytes = 0;              // sum of the above
  double capacity_bytes = 0;          // HBM of the GPU
  double in_flight_microbatches = 0;  // on the stage with the peak
  int stage = 0;                      // pipeline stage with the peak (0 = first)
  int stages = 1;                     // pipeline stages (stage == stages − 1: the last)
  /// "first", "last" or "middle": where `stage` sits (a one-stage pipeline's is "first").
  const char* stage_name() const {
    return stage == 0 ? "first" : stage == stages - 1 ? "last" : "middle";
  }
  double host_offload_bytes = 0;      // offloaded activations in host memory (not in peak_bytes)
  bool fits() const { return peak_bytes <= capacity_bytes; }
};

/// What the runtime holds besides the model and its activations (docs/analytic-model.md §6).
struct RuntimeOverhead {
  double context_bytes = 0;    // CUDA context and library handles
  double workspace_bytes = 0;  // cuBLASLt workspaces
  double nccl_bytes = 0;       // NCCL channel buffers of every communicator
};
RuntimeOverhead runtime_overhead(const topo::GpuSpec& gpu, const ParallelConfig& par);
/// Share of the activation memory the caching allocator loses to fragmentation [D].
inline constexpr double kAllocatorFragmentation = 0.10;

/// Micro-batches whose activations stage `stage` holds at its peak (warm-up of the schedule):
/// 1F1B p − s, interleaved ((p − s − 1)·2 + (v − 1)·p + 1)/v, GPipe all; never more than exist.
double in_flight_microbatches(const ParallelConfig& par, int microbatches, int stage);
/// Layers' worth of activations a stage holds at its peak, counted per chunk in flight: the
/// in-flight micro-batches times its layers when its chunks are equal; otherwise, interleaved,
/// the layers of the chunk forwards of its warm-up as they run (in groups of pp micro-batches
/// per chunk): Llama 3's end chunks holding only the embedding or the output layer hold none
/// (a 7-layer first stage of 8 chunks on 4 stages holds 28, not 7 · 35/8).
double in_flight_layers(const Layout& L, int microbatches, int stage);

/// Layers of a stage that block recompute (training.recompute_layers = N) recomputes: N of each
/// of its model chunks, as Megatron-Core's --recompute-num-layers counts per virtual pipeline
/// stage (a TransformerBlock is one chunk; NeMo's docs: "the number of layers per virtual
/// pipeline stage"). A stage's chunks differ by at most one layer (Layout::chunk_layers), so
/// that is min(n, N·vpp) of its n layers. 0 when N is 0 (every layer).
inline int recomputed_layers_per_stage(const ParallelConfig& par, const TrainingConfig& train) {
  const long long n = static_cast<long long>(train.recompute_layers) * std::max(1, par.vpp);
  return static_cast<int>(std::min<long long>(n, std::numeric_limits<int>::max()));
}

/// Activation bytes of one layer for one micro-batch on one GPU. `fp8_inputs`: the inputs of
/// the Linear layers (QKV, attention projection, MLP up and down) are kept as their FP8 copies,
/// one byte an element, as Transformer Engine saves them under fp8 autocast for the weight
/// gradient; the other saved tensors stay 16-bit.
/// `which`: a dense layer, an MoE layer, or (kAverage) the mean over the model's layers.
enum class LayerKind { kAverage, kDense, kMoe };
double layer_activation_bytes(const model::ModelConfig& m, const ParallelConfig& par,
                              int micro_batch, model::Recompute recompute, bool fused_attention,
                              bool fp8_inputs = false, LayerKind which = LayerKind::kAverage);

/// Parameters held by one GPU of pipeline stage `stage_layers` (before ZeRO sharding), and
/// which part of them are expert parameters (sharded by EP, reduced over the expert-DP group).
/// `moe_layers`: how many of the stage's layers are MoE layers; < 0: the model's share of them
/// (for a stage whose layers are not given; moe_layers_of_stage counts a real stage's).
struct StageParams {
  double dense = 0;
  double expert = 0;
  double total() const { return dense + expert; }
};
StageParams stage_parameters(const model::ModelConfig& m, const Layout& L, bool first_stage,
                             bool last_stage, int stage_layers, double moe_layers = -1);
/// The same with the model's parameter count already made (model::count_parameters(m)).
StageParams stage_parameters(const model::ModelConfig& m, const model::ParamCount& pc,
                             const Layout& L, bool first_stage, bool last_stage, int stage_layers,
                             double moe_layers = -1);
/// MoE layers held by pipeline stage `stage` (over its model chunks, Layout::chunk_layers).
int moe_layers_of_stage(const model::ModelConfig& m, const Layout& L, int stage);

/// What one GPU of pipeline stage `stage` holds, by the memory model's inventory: the model
/// states (sharded as ZeRO / the distributed optimizer shard them) and the activations one
/// micro-batch leaves behind until its backward. memory_per_gpu adds these up over the in-flight
/// micro-batches; the real executor allocates them as a framework would (kernels/exec), so that
/// measured peak memory is compared with the same inventory.
struct StageInventory {
  double weights_bytes = 0, gradients_bytes = 0, optimizer_bytes = 0;
  double per_layer_full = 0;   // one dense layer's activations of one micro-batch (recompute
                               // setting)
  double per_layer_kept = 0;   // the same for a layer that keeps everything (block recompute)
  int layers = 0;              // layers of the stage
  int recomputed_layers = 0;   // of them, the ones at per_layer_full (the rest at per_layer_kept)
  // MoE layers keep more than dense ones (their tokens' top-k expert copies): the extra bytes of
  // an MoE layer at per_layer_full and at per_layer_kept, and how many of the stage's MoE layers
  // are among the recomputed, the kept and the offloaded layers.
  double moe_extra_full = 0, moe_extra_kept = 0;
  int moe_recomputed = 0, moe_kept = 0, moe_offloaded = 0;
  /// Whether the layer at `position` (from 0) within its model chunk is recomputed in full:
  /// block recompute takes the first N layers of each chunk (Megatron-Core's
  /// recompute_method=block per virtual stage); every layer otherwise.
  int recompute_per_chunk = -1;  // N; < 0: every layer
  bool recomputed(int position) const {
    return recompute_per_chunk < 0 || position < recompute_per_chunk;
  }
  /// How many of a chunk's `count` layers are recomputed in full (the first ones, as above).
  int recomputed_of(int count) const {
    return recompute_per_chunk < 0 ? count : std::min(count, recompute_per_chunk);
  }
  // Of them, the ones whose activations are offloaded to host memory (training.
  // cpu_offload_layers; no recompute then, so each holds per_layer_full): at most layers −
  // offloaded layers' activations are on the GPU at any time (Transformer Engine's schedule).
  int offloaded_layers = 0;
  double embedding_bytes = 0;  // first stage: the embedding output (and dropout mask) per mb
  // Last stage: fp32 logits and their 16-bit copy of one micro-batch. Held from the head's
  // forward to its backward, which follows at once (the last stage runs a micro-batch's forward
  // and backward back to back), so only one micro-batch's logits are ever live.
  double logits_bytes = 0;
  double states() const { return weights_bytes + gradients_bytes + optimizer_bytes; }
  /// Activations one micro-batch leaves on the stage until its backward (logits aside).
  double activations_per_microbatch() const {
    return recomputed_layers * per_layer_full + (layers - recomputed_layers) * per_layer_kept +
           embedding_bytes + moe_extra_bytes() - offloaded_bytes_per_microbatch();
  }
  /// What the stage's MoE layers keep beyond as many dense layers (0 for a dense model).
  double moe_extra_bytes() const {
    return moe_recomputed * moe_extra_full + moe_kept * moe_extra_kept;
  }
  /// One layer's activations of one micro-batch: recomputed in full or not, MoE or dense.
  double layer_bytes(bool recomputed_in_full, bool moe) const {
    return recomputed_in_full ? per_layer_full + (moe ? moe_extra_full : 0.0)
                              : per_layer_kept + (moe ? moe_extra_kept : 0.0);
  }
  /// Host memory the offloaded activations of one micro-batch take.
  double offloaded_bytes_per_microbatch() const {
    return offloaded_layers * per_layer_full + moe_offloaded * moe_extra_full;
  }
};
StageInventory stage_inventory(const model::ModelConfig& m, const Layout& L,
                               const TrainingConfig& train, bool fused_attention, int stage);

/// Peak memory over the pipeline stages. Capacity is the HBM the driver exposes; the CUDA
/// context, workspaces, NCCL buffers and allocator fragmentation are counted against it.
MemoryUsage memory_per_gpu(const model::ModelConfig& m, const Layout& L,
                           const TrainingConfig& train, bool fused_attention,
                           const topo::GpuSpec& gpu);

}  // namespace trainsim::plan
