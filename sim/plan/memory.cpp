#include "sim/plan/memory.h"

#include <algorithm>

#include "sim/core/units.h"

namespace trainsim::plan {

double layer_activation_bytes(const model::ModelConfig& m, const ParallelConfig& par,
                              int micro_batch, model::Recompute recompute, bool fused_attention) {
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
  // Replicated in TP (Korthikanti's 10·sbh): norm inputs 2+2, QKV input 2, MLP input 2, two
  // dropout masks 1+1. A parallel block has one norm whose output feeds both branches: 2+2+1+1.
  const double replicated = (m.parallel_block ? 6.0 : 10.0) * sbh_tokens * h;
  // Sharded by TP (Korthikanti's 24·sbh for ffn = 4h, kv = h): Q and K (2h + 2kv), V (2kv),
  // attention output (2h), and the MLP: GeLU in + out (2f + 2f) or SwiGLU gate, up, product (6f).
  const double mlp = (m.mlp == model::MlpKind::kSwiglu ? 6.0 : 4.0) * f;
  double attention_part = (2.0 * h + 2.0 * kv + 2.0 * kv + 2.0 * h) * sbh_tokens;
  double mlp_part = mlp * sbh_tokens;
  if (m.experts > 0) mlp_part *= m.top_k;  // each token's activations in its top-k experts
  double scores = 0;
  if (!fused_attention && recompute == model::Recompute::kNone) {
    // Softmax output 2, dropout mask 1, dropout output 2 per score: 5·a·s·(keys)·b.
    scores = 5.0 * m.heads * sbh_tokens * m.attended_tokens();
  }
  return replicated / replicated_div + (attention_part + mlp_part + scores) / t;
}

StageParams stage_parameters(const model::ModelConfig& m, const Layout& L, bool first_stage,
                             bool last_stage, int stage_layers) {
  const model::ParamCount pc = model::count_parameters(m);
  const double t = L.par.tp;
  StageParams sp;
  // Dense and MoE layers are interleaved evenly, so a stage holds its share of each.
  const double moe_share = m.layers > 0 ? static_cast<double>(m.moe_layers()) / m.layers : 0.0;
  const double moe_layers = stage_layers * moe_share;
  const double dense_layers = stage_layers - moe_layers;
  sp.dense = stage_layers * (pc.attention / t + pc.norms) + dense_layers * pc.mlp / t;
  sp.expert = moe_layers * pc.expert_mlp / t / L.par.ep;
  // Vocab-parallel embedding on the first stage; the output layer (or, tied, a second copy of the
  // embedding kept for the gradient all-reduce, as Megatron does when PP > 1) on the last.
  if (first_stage) sp.dense += pc.embedding / t;
  if (last_stage) {
    const double out = m.tied_embeddings ? static_cast<double>(m.vocab) * m.hidden : pc.output;
    if (!first_stage || !m.tied_embeddings) sp.dense += out / t;
    sp.dense += pc.final_norm;
  }
  return sp;
}

MemoryUsage memory_per_gpu(const model::ModelConfig& m, const Layout& L,
                           const TrainingConfig& train, bool fused_attention,
                           const topo::GpuSpec& gpu) {
  const ParallelConfig& par = L.par;
  const double weight_b = 2.0;
  const double grad_b = bytes_per_element(train.grad_reduce);
  const double opt_b = 12.0;  // fp32 master copy + two fp32 moments (Adam and LAMB alike)
  const double dp = par.dp;
  const double edp = static_cast<double>(par.dp) / par.ep;

  const double per_layer_act =
      layer_activation_bytes(m, par, train.micro_batch, train.recompute, fused_attention);
  const double p = par.pp, v = par.vpp, mb = L.microbatches;
  double in_flight_first = 1;
  switch (par.schedule) {
    case Schedule::kGpipe: in_flight_first = mb; break;
    case Schedule::k1F1B: in_flight_first = std::min(p, mb); break;
    case Schedule::kInterleaved: in_flight_first = std::min(mb, p * (1.0 + (p - 1.0) / (p * v))); break;
  }
  const double tokens = static_cast<double>(train.micro_batch) * m.seq_len / par.cp;

  MemoryUsage best;
  for (int stage = 0; stage < (par.pp > 1 ? 2 : 1); ++stage) {
    const bool first = stage == 0;
    const bool last = par.pp == 1 || stage == 1;
    const int layers = first ? L.layers_first_stage : L.layers_last_stage;
    const StageParams sp = stage_parameters(m, L, first, last, layers);
    auto shard = [&](double bytes_per_param, int from_stage) {
      if (par.zero < from_stage) return sp.total() * bytes_per_param;
      return sp.dense * bytes_per_param / dp + sp.expert * bytes_per_param / edp;
    };
    MemoryUsage u;
    u.stage = stage;
    u.capacity_bytes = gpu.hbm_bytes;
    u.weights_bytes = shard(weight_b, 3);
    // Under ZeRO-3 the layer being computed is gathered in full: two layers' worth of buffers.
    if (par.zero >= 3 && layers > 0) u.weights_bytes += 2.0 * sp.total() / layers * weight_b;
    u.gradients_bytes = shard(grad_b, 2);
    u.optimizer_bytes = shard(opt_b, 1);
    // The last stage of 1F1B holds one micro-batch; the first holds the schedule's in-flight set.
    u.in_flight_microbatches = (last && !first) ? 1.0 : in_flight_first;
    if (par.schedule == Schedule::kGpipe) u.in_flight_microbatches = mb;
    u.activations_bytes = per_layer_act * layers * u.in_flight_microbatches;
    if (first) u.activations_bytes += tokens * m.hidden * 2.0 / (par.sp ? par.tp : 1) * u.in_flight_microbatches;
    if (last) {
      // Logits in fp32 for the loss plus their 16-bit copy, vocab-parallel.
      u.activations_bytes += tokens * (static_cast<double>(m.vocab) / par.tp) * (4.0 + 2.0);
    }
    // NCCL keeps per channel and peer 4 MiB Simple buffers both ways (NCCL_BUFFSIZE default);
    // 16 channels per communicator, one communicator per parallel dimension in use.
    int comms = 0;
    for (int d : {par.tp, par.pp, par.dp, par.cp, par.ep}) comms += d > 1 ? 1 : 0;
    u.comm_buffers_bytes = comms * 16.0 * 2.0 * 4.0 * kMiB;
    // CUDA context and library workspaces (~1 GiB) and caching-allocator fragmentation (~5 %).
    u.runtime_reserved_bytes = 1.0 * kGiB + 0.05 * gpu.hbm_bytes;
    u.peak_bytes = u.weights_bytes + u.gradients_bytes + u.optimizer_bytes + u.activations_bytes +
                   u.comm_buffers_bytes + u.runtime_reserved_bytes;
    if (u.peak_bytes > best.peak_bytes) best = u;
  }
  return best;
}

}  // namespace trainsim::plan
