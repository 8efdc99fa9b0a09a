#include "sim/plan/memory.h"

#include <algorithm>

#include "sim/core/error.h"
#include "sim/core/units.h"

#include <fmt/format.h>

namespace trainsim::plan {

double layer_activation_bytes(const model::ModelConfig& m, const ParallelConfig& par,
                              int micro_batch, model::Recompute recompute, bool fused_attention,
                              bool fp8_inputs, LayerKind which) {
  const double t = par.tp;
  const double sbh_tokens = static_cast<double>(micro_batch) * m.seq_len / par.cp;  // s·b per rank
  const double h = m.hidden;
  const double replicated_div = par.sp ? t : 1.0;  // SP shards what TP replicates
  if (recompute == model::Recompute::kFull) {
    // Only the layer input is kept (2·s·b·h bytes), sharded by SP.
    return 2.0 * sbh_tokens * h / replicated_div;
  }
  const double kv = m.kv_dim();
  const double f = m.ffn_hidden;
  if (recompute == model::Recompute::kSelectiveOp) {
    // TorchTitan's per-op policy (model::recompute_share; CP 1, dense layers, TP with SP): the
    // checkpoint's input (the layer input, SP-sharded) and the outputs the policy keeps, 16-bit:
    // wq (q/t), wv (kv/t), the fused attention's output (q/t) with its fp32 log-sum-exp per head
    // (an unfused core keeps nothing), w1 (f/t) and, of a SwiGLU MLP, w2's local output, which
    // under TP is the row-parallel partial sum, h wide before its reduce-scatter; under TP the two
    // reduce-scatters' outputs (h/t each) are kept too. Dropout masks are drawn again.
    const bool swiglu = m.mlp == model::MlpKind::kSwiglu;
    const double q = m.q_dim();
    const double sharded = 2.0 * q + 2.0 * kv + 2.0 * f + (fused_attention ? 2.0 * q + 4.0 * m.heads : 0.0);
    const double reduce_scattered = t > 1 ? 2.0 * 2.0 * h / t : 0.0;
    return sbh_tokens * (2.0 * h / replicated_div + sharded / t + (swiglu ? 2.0 * h : 0.0) +
                         reduce_scattered);
  }
  const double drop = m.dropout ? 1.0 : 0.0;  // one byte per element for each dropout mask
  // Replicated in TP (Korthikanti's 10·sbh): norm inputs 2+2, QKV input 2, MLP input 2, and the
  // two 1-byte dropout masks after attention and MLP. A parallel block has one norm whose output
  // feeds both branches and one dropout after their sum: 2+2+1+1 with dropout.
  // Under FP8 the Linear inputs are kept in one byte: the QKV and MLP inputs (one shared norm
  // output in a parallel block), the attention output (the projection's input) and the MLP
  // down-projection's input (GeLU output or SwiGLU product).
  const double in_b = fp8_inputs ? 1.0 : 2.0;
  const double replicated =
      (m.parallel_block ? 2.0 + in_b + 2.0 * drop : 4.0 + 2.0 * in_b + 2.0 * drop) * sbh_tokens * h;
  // Sharded by TP (Korthikanti's 24·sbh for ffn = 4h, kv = h): Q and K (2q + 2kv), V (2kv),
  // attention output (2q), and the MLP: GeLU in + out (2f + 2f) or SwiGLU gate, up, product (6f);
  // q = heads·head_dim is h unless model.head_dim says otherwise.
  const double q = m.q_dim();
  // SwiGLU as two PyTorch ops also keeps SiLU's output for the product's gradient (2f).
  const bool swiglu = m.mlp == model::MlpKind::kSwiglu;
  const double mlp = (swiglu ? (par.activation_unfused ? 6.0 : 4.0) : 2.0) * f + in_b * f;
  // GQA keys and values repeated to every query head (framework.gqa_kv repeat) are what the
  // attention call saves: q wide each, not kv.
  const double kv_saved = par.gqa_kv_repeated ? std::max(q, kv) : kv;
  double attention_part = (2.0 * q + 2.0 * kv_saved + 2.0 * kv_saved + in_b * q) * sbh_tokens;
  double mlp_part = mlp * sbh_tokens;
  // An MoE layer (Megatron-Core's MoELayer with the all-to-all dispatcher and grouped GEMMs)
  // keeps, for each token's top-k expert copies: the permuted rows the experts' first GEMM reads
  // (a tensor of its own beside the norm output the router reads; its weight gradient needs
  // them), the expert MLP's own activations, and the experts' output rows, which unpermute
  // multiplies by the routing probabilities and saves for their gradient. Under TP (with SP, as
  // MoE requires) the dispatched rows are all-gathered over the TP group before the TP-sharded
  // experts, so each TP rank holds its group's rows, k·h per token not divided by t; the expert
  // output is reduce-scattered back to the rank's tokens before unpermute.
  double moe_share = 0;
  if (m.experts > 0 && m.layers > 0) {
    moe_share = which == LayerKind::kMoe     ? 1.0
                : which == LayerKind::kDense ? 0.0
                                             : static_cast<double>(m.moe_layers()) / m.layers;
  }
  double expert_rows = 0;
  if (moe_share > 0) {
    mlp_part *= 1.0 + (m.top_k - 1.0) * moe_share;
    expert_rows = moe_share * m.top_k * sbh_tokens * h * (in_b * t + 2.0);
  }
  double scores = 0;
  if (fused_attention) {
    // FlashAttention keeps no scores, only the fp32 log-sum-exp of every query row and head
    // (Dao 2023, Alg. 1-2): 4 bytes × heads × s·b.
    scores = 4.0 * m.heads * sbh_tokens;
  } else if (recompute == model::Recompute::kNone) {
    // Softmax output 2 per score, plus with dropout its 1-byte mask and 2-byte output:
    // 5·a·s·(keys)·b (Korthikanti), 2·a·s·(keys)·b without dropout. The unfused kernel stores
    // every score of the s × s matrix, whatever the mask.
    scores = (2.0 + 3.0 * drop) * m.heads * sbh_tokens * m.seq_len;
  }
  double bytes = replicated / replicated_div + (attention_part + mlp_part + scores) / t;
  if (par.sp && par.sp_saves_gathered_input && t > 1) {
    // The column-parallel layers keep their all-gathered input whole (DTensor TP): the QKV and
    // MLP inputs (one shared norm output in a parallel block) are s·b·h each, not s·b·h/t.
    const double linear_inputs = (m.parallel_block ? 1.0 : 2.0) * in_b * sbh_tokens * h;
    bytes += linear_inputs - linear_inputs / t;
  }
  return expert_rows > 0 ? bytes + expert_rows / t : bytes;
}

StageParams stage_parameters(const model::ModelConfig& m, const Layout& L, bool first_stage,
                             bool last_stage, int stage_layers, double moe_layers) {
  return stage_parameters(m, model::count_parameters(m), L, first_stage, last_stage, stage_layers,
                          moe_layers);
}

int moe_layers_of_stage(const model::ModelConfig& m, const Layout& L, int stage) {
  if (m.experts <= 0) return 0;
  int n = 0;
  for (int c = 0; c < std::max(1, L.par.vpp); ++c) {
    const auto [first, count] = L.chunk_layers(stage, c);
    n += m.moe_layers_in(first, count);
  }
  return n;
}

StageParams stage_parameters(const model::ModelConfig& m, const model::ParamCount& pc,
                             const Layout& L, bool first_stage, bool last_stage,
                             int stage_layers, double moe_layers) {
  const double t = L.par.tp;
  StageParams sp;
  // Without the stage's own count, its share of the model's MoE layers.
  if (moe_layers < 0) {
    moe_layers = m.layers > 0 ? stage_layers * (static_cast<double>(m.moe_layers()) / m.layers)
                              : 0.0;
  }
  const double dense_layers = stage_layers - moe_layers;
  sp.dense = stage_layers * (pc.attention / t + pc.norms) + dense_layers * pc.mlp / t;
  sp.expert = moe_layers * pc.expert_mlp / t / L.par.ep;
  // Vocab-parallel embedding on the first stage; the output layer (or, tied, a second copy of the
  // embedding kept for the gradient all-reduce, as Megatron does when PP > 1) on the last.
  if (first_stage) sp.dense += model::embedding_params_per_rank(m, pc, L.par.tp);
  if (last_stage) {
    const double out = m.tied_embeddings ? static_cast<double>(m.vocab) * m.hidden : pc.output;
    if (!first_stage || !m.tied_embeddings) sp.dense += out / t;
    sp.dense += pc.final_norm;
  }
  return sp;
}

double in_flight_microbatches(const ParallelConfig& par, int microbatches, int stage) {
  const double p = par.pp, v = par.vpp, mb = microbatches;
  switch (par.schedule) {
    case Schedule::kGpipe: return mb;
    case Schedule::k1F1B: return std::min(mb, p - stage);
    case Schedule::kInterleaved: {
      // Megatron's interleaved warm-up runs (p − s − 1)·2 + (v − 1)·p chunk forwards before the
      // first backward, plus the one in flight: chunk-micro-batches of 1/v of the stage's layers.
      // Stage 0: (v·p + p − 1)/v = p·(1 + (p − 1)/(p·v)) stage-micro-batches (Korthikanti §4.2.3).
      const double chunk_mbs = std::min(mb * v, (p - stage - 1) * 2 + (v - 1) * p + 1);
      return chunk_mbs / v;
    }
  }
  return 1;
}

RuntimeOverhead runtime_overhead(const topo::GpuSpec& gpu, const ParallelConfig& par) {
  RuntimeOverhead o;
  // CUDA context with lazy module loading (CUDA ≥ 11.7), about 300 MiB (PyTorch issue #107667),
  // plus cuBLAS/cuDNN/NCCL handles and kernels loaded on first use: 512 MiB in all [D].
  o.context_bytes = 512.0 * kMiB;
  // cuBLASLt workspace per stream that runs GEMMs (compute, and the TP-overlap side stream):
  // 32 MiB on Hopper, 4 MiB before (cuBLAS docs' recommendation, PyTorch's defaults).
  const bool hopper = gpu.sms >= 132;
  o.workspace_bytes = 2.0 * (hopper ? 32.0 : 4.0) * kMiB;
  // NCCL: per communicator and channel one receive buffer per protocol: Simple 4 MiB, LL 512 KiB,
  // LL128 4.69 MiB (NCCL's defaults, src/include/device.h); 16 channels, one communicator per
  // parallel dimension in use (the pipeline's neighbours share one).
  int comms = 0;
  for (int d : {par.tp, par.pp, par.dp, par.cp, par.ep}) comms += d > 1 ? 1 : 0;
  o.nccl_bytes = comms * 16.0 * (4.0 * kMiB + 512.0 * 1024 + 4915200.0);
  return o;
}

namespace {

// The pieces of a stage's inventory that do not depend on the stage.
struct InventoryBase {
  double per_layer_full = 0, per_layer_kept = 0, tokens = 0;
  double moe_extra_full = 0, moe_extra_kept = 0;  // an MoE layer's bytes beyond a dense one's
  double shard = 1, eshard = 1, grad_b = 2;
};

InventoryBase inventory_base(const model::ModelConfig& m, const Layout& L,
                             const TrainingConfig& train, bool fused_attention) {
  const ParallelConfig& par = L.par;
  InventoryBase b;
  b.grad_b = bytes_per_element(train.grad_reduce);
  // ZeRO / the distributed optimizer shards over DP, or DP·CP (ParallelConfig::shard_over_cp).
  b.shard = par.zero_group();
  b.eshard = b.shard / par.ep;
  const bool fp8 = train.precision == Precision::kFp8;
  const LayerKind dense = m.experts > 0 ? LayerKind::kDense : LayerKind::kAverage;
  b.per_layer_full = layer_activation_bytes(m, par, train.micro_batch, train.recompute,
                                            fused_attention, fp8, dense);
  // Block recompute: N layers per model chunk keep only their input, the others everything.
  const bool block = train.recompute == model::Recompute::kFull && train.recompute_layers > 0;
  b.per_layer_kept = block ? layer_activation_bytes(m, par, train.micro_batch,
                                                    model::Recompute::kNone, fused_attention, fp8,
                                                    dense)
                           : b.per_layer_full;
  if (m.experts > 0) {
    b.moe_extra_full = layer_activation_bytes(m, par, train.micro_batch, train.recompute,
                                              fused_attention, fp8, LayerKind::kMoe) -
                       b.per_layer_full;
    b.moe_extra_kept = block ? layer_activation_bytes(m, par, train.micro_batch,
                                                      model::Recompute::kNone, fused_attention,
                                                      fp8, LayerKind::kMoe) -
                                   b.per_layer_kept
                             : b.moe_extra_full;
  }
  b.tokens = static_cast<double>(train.micro_batch) * m.seq_len / par.cp;
  return b;
}

StageInventory inventory_of(const model::ModelConfig& m, const model::ParamCount& pc,
                            const Layout& L, const TrainingConfig& train, const InventoryBase& b,
                            int stage) {
  const ParallelConfig& par = L.par;
  const double weight_b = 2.0;
  const double opt_b = 12.0;  // fp32 master copy + two fp32 moments (Adam and LAMB alike)
  const bool first = stage == 0;
  const bool last = stage == par.pp - 1;
  const int layers = L.stage_layers[static_cast<std::size_t>(stage)];
  const StageParams sp =
      stage_parameters(m, pc, L, first, last, layers, moe_layers_of_stage(m, L, stage));
  auto sharded = [&](double bytes_per_param, int from_stage) {
    if (par.zero < from_stage) return sp.total() * bytes_per_param;
    return sp.dense * bytes_per_param / b.shard + sp.expert * bytes_per_param / b.eshard;
  };
  StageInventory v;
  v.weights_bytes = sharded(weight_b, 3);
  // Under ZeRO-3 the unit being computed is gathered in full while the next one is fetched: two
  // of the stage's largest units (a layer, or the embedding or output layer where they are
  // bigger), never more than the whole stage; with nothing sharded (DP·CP 1) nothing is gathered.
  if (par.zero >= 3 && layers > 0 && b.shard > 1) {
    // (An MoE layer where the stage holds one: the larger unit.)
    const double layer =
        stage_parameters(m, pc, L, false, false, 1, moe_layers_of_stage(m, L, stage) > 0 ? 1 : 0)
            .total();
    double unit = layer;
    if (first) unit = std::max(unit, model::embedding_params_per_rank(m, pc, par.tp));
    if (last) {
      unit = std::max(unit, sp.total() - layers * layer - (first ? model::embedding_params_per_rank(m, pc, par.tp) : 0.0));
    }
    v.weights_bytes += std::min(2.0 * unit, sp.total()) * weight_b;
  }
  v.gradients_bytes = sharded(b.grad_b, 2);
  v.optimizer_bytes = sharded(opt_b, 1);
  v.per_layer_full = b.per_layer_full;
  v.per_layer_kept = b.per_layer_kept;
  v.layers = layers;
  v.recomputed_layers = train.recompute == model::Recompute::kFull && train.recompute_layers > 0
                            ? std::min(layers, recomputed_layers_per_stage(par, train))
                            : layers;
  v.offloaded_layers = std::clamp(train.cpu_offload_layers, 0, std::max(0, layers - 1));
  if (train.recompute == model::Recompute::kFull && train.recompute_layers > 0) {
    v.recompute_per_chunk = train.recompute_layers;
  }
  if (m.experts > 0) {
    v.moe_extra_full = b.moe_extra_full;
    v.moe_extra_kept = b.moe_extra_kept;
    // The recomputed layers are the first N of each model chunk.
    for (int c = 0; c < std::max(1, par.vpp); ++c) {
      const auto [first_layer, count] = L.chunk_layers(stage, c);
      const int recomputed = v.recomputed_of(count);
      v.moe_recomputed += m.moe_layers_in(first_layer, recomputed);
      v.moe_kept += m.moe_layers_in(first_layer + recomputed, count - recomputed);
    }
    // Offloading runs without pipeline parallelism: the stage's first layers are the model's.
    v.moe_offloaded = m.moe_layers_in(L.chunk_layers(stage, 0).first, v.offloaded_layers);
  }
  if (first) {
    // Embedding output (and its dropout mask) for every in-flight micro-batch.
    v.embedding_bytes = b.tokens * m.hidden * (2.0 + (m.dropout ? 1.0 : 0.0)) /
                        (par.sp ? par.tp : 1);
  }
  if (last) {
    // Logits in fp32 for the loss plus their 16-bit copy, vocab-parallel.
    v.logits_bytes = b.tokens * (static_cast<double>(m.vocab) / par.tp) * (4.0 + 2.0);
  }
  return v;
}

}  // namespace

StageInventory stage_inventory(const model::ModelConfig& m, const Layout& L,
                               const TrainingConfig& train, bool fused_attention, int stage) {
  if (stage < 0 || stage >= L.par.pp) {
    throw Error(ErrorKind::kInput, fmt::format("stage {} of a {}-stage pipeline", stage, L.par.pp));
  }
  return inventory_of(m, model::count_parameters(m), L, train,
                      inventory_base(m, L, train, fused_attention), stage);
}

namespace {

// in_flight_layers over what the even split assumes (layers · in-flight micro-batches): 1 when
// the stage's chunks are equal or it is not interleaved.
double in_flight_layer_factor(const Layout& L, int microbatches, int stage) {
  const ParallelConfig& par = L.par;
  if (par.schedule != Schedule::kInterleaved || par.vpp <= 1 || L.even_chunks(stage)) return 1.0;
  const int n = L.stage_layers[static_cast<std::size_t>(stage)];
  if (n <= 0) return 1.0;
  return in_flight_layers(L, microbatches, stage) /
         (static_cast<double>(n) * in_flight_microbatches(par, microbatches, stage));
}

}  // namespace

double in_flight_layers(const Layout& L, int microbatches, int stage) {
  const ParallelConfig& par = L.par;
  const int n = L.stage_layers[static_cast<std::size_t>(stage)];
  if (par.schedule != Schedule::kInterleaved || par.vpp <= 1 || L.even_chunks(stage)) {
    return n * in_flight_microbatches(par, microbatches, stage);
  }
  const int p = par.pp, v = par.vpp;
  const long window = std::min(static_cast<long>(microbatches) * v,
                               static_cast<long>(p - stage - 1) * 2 + static_cast<long>(v - 1) * p + 1);
  double held = 0;
  for (long k = 0; k < window; ++k) {
    held += L.chunk_size(stage, static_cast<int>((k / p) % v));
  }
  return held;
}

MemoryUsage memory_per_gpu(const model::ModelConfig& m, const Layout& L,
                           const TrainingConfig& train, bool fused_attention,
                           const topo::GpuSpec& gpu) {
  const ParallelConfig& par = L.par;
  const RuntimeOverhead ro = runtime_overhead(gpu, par);
  const InventoryBase base = inventory_base(m, L, train, fused_attention);
  const model::ParamCount pc = model::count_parameters(m);
  MemoryUsage best;
  const int p = par.pp;
  // Layer counts of the middle stages evaluated so far (a stage split has one or two distinct
  // counts; past kSeen of them the earlier stages are searched instead).
  constexpr int kSeen = 8;
  int seen_counts[kSeen];
  int seen_n = 0;
  for (int stage = 0; stage < p; ++stage) {
    const bool first = stage == 0;
    const bool last = stage == p - 1;
    // Middle stages differ only by layers and in-flight count, which falls with the stage index:
    // of the middle stages with the same layer count the earliest holds the most.
    // (With MoE layers every n-th, equal layer counts may hold different numbers of them.)
    if (!first && !last && (m.experts == 0 || m.moe_every == 1)) {
      const int n = L.stage_layers[static_cast<std::size_t>(stage)];
      bool seen = false;
      if (seen_n <= kSeen) {
        for (int e = 0; e < seen_n && !seen; ++e) seen = seen_counts[e] == n;
        if (!seen) {
          if (seen_n < kSeen) seen_counts[seen_n] = n;
          ++seen_n;
        }
      } else {
        for (int e = 1; e < stage && !seen; ++e) {
          seen = L.stage_layers[static_cast<std::size_t>(e)] == n;
        }
      }
      if (seen) continue;
    }
    const StageInventory v = inventory_of(m, pc, L, train, base, stage);
    MemoryUsage u;
    u.stage = stage;
    u.stages = p;
    u.capacity_bytes = gpu.hbm_bytes;
    u.weights_bytes = v.weights_bytes;
    u.gradients_bytes = v.gradients_bytes;
    u.optimizer_bytes = v.optimizer_bytes;
    u.in_flight_microbatches = in_flight_microbatches(par, L.microbatches, stage);
    // The layers' share, counted by the chunks in flight where they differ (1 otherwise: the
    // same bits).
    const double layer_flight =
        u.in_flight_microbatches * in_flight_layer_factor(L, L.microbatches, stage);
    // (Summed in this order, as before the inventory was factored out: same bits.)
    u.activations_bytes = (v.recomputed_layers * v.per_layer_full +
                           (v.layers - v.recomputed_layers) * v.per_layer_kept) *
                          layer_flight;
    if (m.experts > 0) {
      u.activations_bytes += v.moe_extra_bytes() * layer_flight;
    }
    if (v.offloaded_layers > 0) {
      // Offloaded to host memory (a separate subtraction, so that every other run keeps its bits).
      u.activations_bytes -= v.offloaded_bytes_per_microbatch() * layer_flight;
      u.host_offload_bytes = v.offloaded_bytes_per_microbatch() * layer_flight;
    }
    if (first) u.activations_bytes += v.embedding_bytes * u.in_flight_microbatches;
    // The loss keeps its logits until its backward: right after the forward in 1F1B and
    // interleaved schedules (one micro-batch's), after every forward under GPipe (all of them).
    if (last) {
      u.activations_bytes += par.schedule == Schedule::kGpipe
                                 ? v.logits_bytes * u.in_flight_microbatches
                                 : v.logits_bytes;
    }
    u.comm_buffers_bytes = ro.nccl_bytes;
    // The caching allocator's fragmentation grows with what is allocated and freed every
    // iteration (activations): 10 % of them, the lower part of what GMLake (Guo et al.,
    // ASPLOS'24) measured for PyTorch's allocator (15 % average, highest with recompute) [D].
    u.runtime_reserved_bytes =
        ro.context_bytes + ro.workspace_bytes + kAllocatorFragmentation * u.activations_bytes;
    u.peak_bytes = u.weights_bytes + u.gradients_bytes + u.optimizer_bytes + u.activations_bytes +
                   u.comm_buffers_bytes + u.runtime_reserved_bytes;
    if (u.peak_bytes > best.peak_bytes) best = u;
  }
  return best;
}

}  // namespace trainsim::plan
