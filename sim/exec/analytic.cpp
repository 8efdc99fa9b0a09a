#include "sim/exec/analytic.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sim/collective/analytic.h"
#include "sim/collective/comm_init.h"
#include "sim/core/error.h"
#include "sim/core/units.h"
#include "sim/model/ops.h"
#include "sim/plan/layout.h"
#include "sim/plan/memory.h"
#include "sim/exec/collective_model.h"
#include "sim/exec/compute_model.h"

namespace trainsim::exec {
namespace {

using coll::Kind;
using model::Op;
using model::OpKind;

// Time and traffic of one micro-batch on one pipeline stage.
struct Slot {
  double compute = 0;  // forward + backward + recompute kernels
  double tp = 0, cp = 0, ep = 0, pp = 0;  // exposed communication
  double forward = 0, backward = 0;  // compute split, for DP overlap windows
  double nvlink_bytes = 0, nic_bytes = 0;
  double total() const { return compute + tp + cp + ep + pp; }
};

struct Context {
  const RunConfig& cfg;
  const plan::Layout& L;
  ComputeModel cm;
  coll::LinkModel links;
  model::Sharding shard;
  double comm_sm_share = 0;  // share of the SMs an overlapped collective occupies

  // NCCL_ALGO applies to all-reduce (other collectives run rings); NCCL_PROTO to every
  // collective but the point-to-point ones.
  coll::Cost cost(Kind k, double bytes, const coll::GroupShape& g) const {
    coll::Choice c;
    if (k == Kind::kAllReduce) c.algorithm = cfg.collectives.algorithm;
    if (k != Kind::kAllToAll && k != Kind::kSendRecv) c.protocol = cfg.collectives.protocol;
    return priced_collective(cfg.profile, k, bytes, g, links, c);
  }
};

void add_traffic(Slot& s, const coll::Cost& c, double times = 1.0) {
  s.nvlink_bytes += c.nvlink_bytes * times;
  s.nic_bytes += c.nic_bytes * times;
}

// Exposed time of a TP collective of `t_comm` next to a GEMM of `t_gemm` it overlaps with
// (ComputeModel::concurrent: the collective's kernels take their SMs from the GEMM). A decomposed
// overlap (MegaScale §3.2, Transformer Engine's ring exchange) pipelines TP pieces: the first
// piece of the collective cannot overlap, the rest runs beside the GEMM. A bulk overlap runs the
// whole collective beside an independent GEMM, which only the backward pass has (the weight
// gradient beside the input gradient's reduction); `independent` says whether one exists.
double tp_exposed(const Context& c, double t_comm, double t_gemm, bool independent) {
  if (!c.cfg.opt.tp_overlap) return t_comm;
  if (c.cfg.opt.tp_overlap_decomposed) {
    const double n = std::max(1, c.L.par.tp);
    const double rest = t_comm - t_comm / n;
    return t_comm / n + ComputeModel::concurrent(t_gemm, rest, c.comm_sm_share) - t_gemm;
  }
  if (!independent) return t_comm;
  return ComputeModel::concurrent(t_gemm, t_comm, c.comm_sm_share) - t_gemm;
}

// One stage's slot: `layers` layers (starting at global layer index `first_layer`) and optionally
// the embedding and the loss head.
Slot stage_slot(const Context& c, int layers, int first_layer, bool embedding, bool head) {
  const auto& m = c.cfg.model;
  const auto& par = c.L.par;
  const model::Recompute rc = c.cfg.training.recompute;
  Slot s;
  const double tokens = static_cast<double>(c.shard.micro_batch) * m.seq_len / par.cp;
  const double act_bytes = tokens * m.hidden * 2.0;  // one [tokens × h] 16-bit tensor (TP group)

  const coll::Cost ag = c.cost(Kind::kAllGather, act_bytes, c.L.tp);
  const coll::Cost rs = c.cost(Kind::kReduceScatter, act_bytes, c.L.tp);
  const coll::Cost ar = c.cost(Kind::kAllReduce, act_bytes, c.L.tp);

  auto price_ops = [&](const std::vector<Op>& ops, bool recompute_all, bool recompute_attention) {
    for (const Op& op : ops) {
      // A GEMM whose TP collective is overlapped runs as tp chunks (ComputeModel::forward_split).
      const bool split = par.tp > 1 && c.cfg.opt.tp_overlap && c.cfg.opt.tp_overlap_decomposed &&
                         (op.tp_comm_before || op.tp_comm_after);
      const double f = split ? c.cm.forward_split(op, par.tp) : c.cm.forward(op);
      const double b = split ? c.cm.backward_split(op, par.tp) : c.cm.backward(op);
      const bool attention_core = op.kind == OpKind::kAttention || op.name == "attn_scores" ||
                                  op.name == "softmax" || op.name == "attn_dropout" ||
                                  op.name == "attn_context";
      double r = 0;
      if (recompute_all || (recompute_attention && attention_core)) r = f;
      s.forward += f;
      s.backward += b + r;
      s.compute += f + b + r;
      if (par.tp <= 1) continue;
      // Forward: SP gathers before column-parallel GEMMs and reduce-scatters after row-parallel
      // ones; without SP only row-parallel outputs are all-reduced. Backward mirrors it.
      const int passes_fwd = recompute_all ? 2 : 1;
      // The backward's reduction of the input gradient can run beside the weight-gradient GEMM;
      // the forward's collectives feed or follow their GEMM.
      const bool wgrad = op.kind == OpKind::kGemm;
      if (op.tp_comm_before) {
        if (par.sp) {
          s.tp += passes_fwd * tp_exposed(c, ag.time_s, f, false) +
                  tp_exposed(c, rs.time_s, b / 2, wgrad);
          add_traffic(s, ag, passes_fwd);
          add_traffic(s, rs);
        } else {
          s.tp += tp_exposed(c, ar.time_s, b / 2, wgrad);
          add_traffic(s, ar);
        }
      }
      if (op.tp_comm_after) {
        if (par.sp) {
          s.tp += passes_fwd * tp_exposed(c, rs.time_s, f, false) +
                  tp_exposed(c, ag.time_s, b / 2, false);
          add_traffic(s, rs, passes_fwd);
          add_traffic(s, ag);
        } else {
          s.tp += passes_fwd * tp_exposed(c, ar.time_s, f, false);
          add_traffic(s, ar, passes_fwd);
        }
      }
    }
  };

  const bool selective = rc == model::Recompute::kSelective;
  const int block = c.cfg.training.recompute_layers;
  for (int i = 0; i < layers; ++i) {
    const int li = first_layer + i;
    // Block recompute: only the stage's first `recompute_layers` layers recompute in full.
    const bool full = rc == model::Recompute::kFull && (block <= 0 || i < block);
    const std::vector<Op> ops = model::layer_forward_ops(m, c.shard, li);
    price_ops(ops, full, selective);
    double attention_time = 0;
    for (const Op& op : ops) {
      if (op.kind == OpKind::kAttention || op.name.rfind("attn_", 0) == 0 || op.name == "softmax")
        attention_time += c.cm.forward(op);
    }
    if (par.cp > 1) {
      // K and V of the other CP ranks: all-gathered in forward (and again when recomputed),
      // their gradients reduce-scattered in backward; the ring exchange overlaps attention blocks.
      const double kv_bytes = 2.0 * tokens * par.cp * m.kv_dim() / par.tp * 2.0;
      const coll::Cost cag = c.cost(Kind::kAllGather, kv_bytes, c.L.cp);
      const coll::Cost crs = c.cost(Kind::kReduceScatter, kv_bytes, c.L.cp);
      const double fwd_passes = full ? 2 : 1;
      s.cp += fwd_passes * std::max(0.0, cag.time_s - attention_time) +
              std::max(0.0, cag.time_s + crs.time_s - 2.0 * attention_time);
      add_traffic(s, cag, fwd_passes + 1);
      add_traffic(s, crs);
    }
    if (m.is_moe_layer(li) && par.ep > 1) {
      // Dispatch and combine all-to-alls in forward and backward (and again when recomputed).
      const double a2a_bytes = tokens * m.top_k * m.hidden * 2.0;
      const coll::Cost a2a = c.cost(Kind::kAllToAll, a2a_bytes, c.L.ep);
      const double n = full ? 6 : 4;
      s.ep += n * a2a.time_s;
      add_traffic(s, a2a, n);
    }
  }
  if (embedding) price_ops(model::embedding_forward_ops(m, c.shard), false, false);
  if (head) price_ops(model::head_forward_ops(m, c.shard), false, false);
  return s;
}

}  // namespace

std::string memory_shortfall_message(const plan::MemoryUsage& u) {
  return fmt::format(
      "does not fit in memory: needs {:.1f} GiB of {:.1f} GiB per GPU (weights {:.1f}, gradients "
      "{:.1f}, optimizer {:.1f}, activations {:.1f} for {:.2f} micro-batches in flight, "
      "communication buffers {:.1f}, runtime reserve {:.1f} GiB)",
      u.peak_bytes / kGiB, u.capacity_bytes / kGiB, u.weights_bytes / kGiB,
      u.gradients_bytes / kGiB, u.optimizer_bytes / kGiB, u.activations_bytes / kGiB,
      u.in_flight_microbatches, u.comm_buffers_bytes / kGiB, u.runtime_reserved_bytes / kGiB);
}

coll::LinkModel link_model(const topo::ClusterSpec& cluster, const calib::Profile& prof) {
  coll::LinkModel l;
  l.nvlink_busbw_Bps = prof.nvlink.busbw_Bps;
  l.nvls_busbw_Bps = cluster.gpu.has_nvls ? prof.nvls_busbw_Bps : 0.0;
  l.nic_Bps_per_gpu = cluster.nic_Bps() * prof.nic_efficiency * cluster.nics_per_node /
                      std::max(1, cluster.gpus_per_node);
  l.set_ring_simple(prof.collective_base_latency_s, prof.nvlink.step_latency_s,
                    prof.net_step_latency_s);
  l.above_pod_oversubscription = cluster.fabric.above_pod_oversubscription;
  return l;
}

Result run_analytic(const RunConfig& cfg, const AnalyticOptions& options) {
  const auto& m = cfg.model;
  const auto& gpu = cfg.cluster.gpu;
  const auto& prof = cfg.profile;
  if (cfg.training.precision == Precision::kFp8 && gpu.peak_dense_fp8_flops <= 0) {
    throw_infeasible("GPU `" + gpu.name + "` has no fp8 tensor cores", {"", 0, "training.precision"});
  }
  const plan::Layout L = plan::make_layout(m, cfg.cluster, cfg.parallel, cfg.training);
  const auto& par = L.par;

  Result r;
  r.fidelity = "analytic";
  r.model_version = kAnalyticModelVersion;
  r.profile_name = prof.name;
  r.profile_version = prof.version;
  r.gpus = cfg.cluster.gpus;
  r.microbatches = L.microbatches;

  r.memory = plan::memory_per_gpu(m, L, cfg.training, cfg.opt.fused_attention(), gpu);
  if (options.enforce_memory && !r.memory.fits()) {
    throw_infeasible(memory_shortfall_message(r.memory), {"", 0, ""},
                     "try more pipeline or tensor parallelism, ZeRO, recompute, or a smaller "
                     "micro-batch");
  }

  const double peak16 = gpu.peak_dense_16bit_flops;
  const double gemm_peak =
      cfg.training.precision == Precision::kFp8 ? gpu.peak_dense_fp8_flops : peak16;
  r.peak_flops_per_gpu = gemm_peak;

  Context c{cfg, L, ComputeModel{prof, gemm_peak, peak16, gpu.hbm_Bps}, {}, {}};
  c.links = link_model(cfg.cluster, prof);
  c.shard.micro_batch = cfg.training.micro_batch;
  c.shard.tp = par.tp;
  c.shard.cp = par.cp;
  c.shard.sp = par.sp && par.tp > 1;
  c.shard.fused_attention = cfg.opt.fused_attention();
  c.shard.attention_kernel = cfg.opt.attention_kernel;
  c.shard.fused_elementwise = cfg.opt.efficient_operators;
  c.comm_sm_share = gpu.sms > 0 ? static_cast<double>(kOverlapCommSms) / gpu.sms : 0.0;

  // Slowest stage per micro-batch (first: embedding, last: loss head, and the most loaded of
  // the stages between them).
  const bool single = par.pp == 1;
  Slot first = stage_slot(c, L.layers_first_stage, 0, true, single);
  Slot last = single ? first
                     : stage_slot(c, L.layers_last_stage, m.layers - L.layers_last_stage, false,
                                  true);
  Slot middle;
  if (par.pp > 2) middle = stage_slot(c, L.layers_max_middle, L.layers_first_stage, false, false);
  // Pipeline send/recv of one micro-batch's activations (SP-sharded or scatter-gathered: 1/tp
  // per rank), forward and backward, per model chunk.
  double t_p2p = 0;
  coll::Cost p2p;
  if (par.pp > 1) {
    const double bytes = static_cast<double>(cfg.training.micro_batch) * m.seq_len / par.cp *
                         m.hidden * 2.0 / par.tp;
    coll::GroupShape peer{2, L.pp.per_node > 1 ? 2 : 1, L.pp.per_node > 1 ? 1 : 2,
                          std::min(2, L.pp.pods)};
    p2p = c.cost(Kind::kSendRecv, bytes, peer);
    t_p2p = p2p.time_s;
    for (Slot* s : {&first, &last, &middle}) {
      if (!cfg.opt.pp_overlap) s->pp += 2.0 * par.vpp * t_p2p;
      add_traffic(*s, p2p, 2.0 * par.vpp);
    }
  }
  const Slot* slowest = first.total() >= last.total() ? &first : &last;
  if (par.pp > 2 && middle.total() > slowest->total()) slowest = &middle;
  const Slot& slot = *slowest;
  r.pipeline = {par.pp, par.vpp, L.microbatches, par.schedule, slot.forward, slot.backward,
                slot.tp + slot.cp + slot.ep + slot.pp, &slot == &last && !single};
  const double mb = L.microbatches;
  const double bubble_slots = static_cast<double>(par.pp - 1) / par.vpp;

  Breakdown& bd = r.breakdown;
  bd.compute_s = mb * slot.compute;
  bd.exposed_tp_s = mb * slot.tp;
  bd.exposed_cp_s = mb * slot.cp;
  bd.exposed_ep_s = mb * slot.ep;
  bd.exposed_pp_s = mb * slot.pp;
  if (cfg.opt.pp_overlap && par.pp > 1) bd.exposed_pp_s += 2.0 * (par.pp - 1) * t_p2p;
  bd.pipeline_bubble_s = bubble_slots * slot.total();

  // Data parallelism: gradient reduction and (ZeRO) parameter all-gather of the heaviest stage.
  double nvlink_bytes = mb * slot.nvlink_bytes;
  double nic_bytes = mb * slot.nic_bytes;
  if (par.dp > 1) {
    const plan::StageParams sp_first =
        plan::stage_parameters(m, L, true, single, L.layers_first_stage);
    const plan::StageParams sp_last =
        plan::stage_parameters(m, L, single, true, L.layers_last_stage);
    const plan::StageParams sp = sp_first.total() >= sp_last.total() ? sp_first : sp_last;
    const double gb = bytes_per_element(cfg.training.grad_reduce);
    // Megatron buckets gradients (plan::dp_bucket_params); the last bucket of the backward pass
    // (and the first of the forward prefetch) cannot hide behind compute.
    const double bucket = plan::dp_bucket_params(cfg.opt.dp_buckets, par.dp);
    const double buckets = std::max(1.0, std::ceil(sp.total() / bucket));
    // Gradients are reduced over every rank that holds the same weights: DP·CP.
    const coll::GroupShape& reduce_group = par.cp > 1 ? L.dp_cp : L.dp;
    auto dp_cost = [&](Kind k, double params, double bytes_per_param, const coll::GroupShape& g) {
      return c.cost(k, params * bytes_per_param, g);
    };
    auto both = [&](Kind k, double bytes_per_param) {
      coll::Cost a = dp_cost(k, sp.dense, bytes_per_param, reduce_group);
      coll::Cost b = dp_cost(k, sp.expert, bytes_per_param, L.expert_dp);
      return coll::Cost{a.time_s + b.time_s, a.nvlink_bytes + b.nvlink_bytes,
                        a.nic_bytes + b.nic_bytes};
    };
    // Overlapped, the reduction of all but the last bucket runs beside the backward compute as
    // concurrent kernels (ComputeModel::concurrent): what does not fit in the window is exposed,
    // and the compute it overlaps is slowed by the SMs its kernels hold.
    auto exposed = [&](double t, double window) {
      if (!cfg.opt.dp_overlap) return t;
      const double hidden_part = t - t / buckets;
      return t / buckets + ComputeModel::concurrent(window, hidden_part, c.comm_sm_share) - window;
    };
    double dp_exposed = 0;
    if (par.zero == 0) {
      const coll::Cost ar = both(Kind::kAllReduce, gb);
      dp_exposed = exposed(ar.time_s, slot.backward);
      nvlink_bytes += ar.nvlink_bytes;
      nic_bytes += ar.nic_bytes;
    } else {
      const coll::Cost rs = both(Kind::kReduceScatter, gb);
      const coll::Cost ag = both(Kind::kAllGather, 2.0);
      // ZeRO-1 reduces once per iteration; ZeRO-2/3 keep only a gradient shard, so every
      // micro-batch's gradients are reduce-scattered; ZeRO-3 also gathers the weights for every
      // forward and backward pass.
      const double rs_times = par.zero >= 2 ? mb : 1.0;
      const double ag_times = par.zero >= 3 ? 2.0 * mb : 1.0;
      dp_exposed = rs_times * exposed(rs.time_s, slot.backward) +
                   (par.zero >= 3 ? mb * (exposed(ag.time_s, slot.forward) +
                                          exposed(ag.time_s, slot.backward))
                                  : exposed(ag.time_s, slot.forward));
      nvlink_bytes += rs_times * rs.nvlink_bytes + ag_times * ag.nvlink_bytes;
      nic_bytes += rs_times * rs.nic_bytes + ag_times * ag.nic_bytes;
    }
    bd.exposed_dp_s = dp_exposed;
  }

  // Optimizer step, memory-bound over this GPU's parameter shard (ComputeModel::optimizer).
  {
    const plan::StageParams sp_first =
        plan::stage_parameters(m, L, true, single, L.layers_first_stage);
    const plan::StageParams sp_last =
        plan::stage_parameters(m, L, single, true, L.layers_last_stage);
    const double shard = par.dp * (par.shard_over_cp ? par.cp : 1);
    const double params = std::max(sp_first.total(), sp_last.total()) /
                          (par.zero >= 1 ? shard : 1.0);
    bd.optimizer_s = c.cm.optimizer(params, cfg.training.optimizer == plan::Optimizer::kLamb);
  }
  bd.data_loading_s = cfg.opt.async_data_pipeline ? 0.0 : prof.data_loading_s;

  {
    const coll::CommInitTime ci = coll::comm_init_time(
        {cfg.cluster.gpus, par.tp, par.pp, par.dp, par.cp, par.ep},
        cfg.opt.fast_comm_init ? coll::StoreKind::kRedis : coll::StoreKind::kTcpStore,
        cfg.opt.fast_comm_init);
    r.startup = {ci.total_s, cfg.opt.fast_comm_init ? "redis" : "tcpstore", cfg.opt.fast_comm_init,
                 ci.groups_total, ci.groups_per_rank};
  }
  {
    const ScaleCosts sc =
        scale_costs(cfg.scale, bd, L, cfg.cluster, c.links, cfg.training.precision);
    bd.gpu_variation_s = sc.gpu_variation_s;
    bd.global_sync_s = sc.global_sync_s;
  }
  r.iteration_time_s = bd.total();
  const double tokens = static_cast<double>(cfg.training.global_batch) * m.seq_len;
  r.parameters = model::count_parameters(m).total;
  r.model_flops_per_iteration = model::model_flops_per_token(m) * tokens;
  r.hardware_flops_per_iteration =
      model::hardware_flops_per_token(m, cfg.training.recompute) * tokens;
  if (cfg.training.recompute == model::Recompute::kFull && cfg.training.recompute_layers > 0) {
    // Block recompute re-runs the forward of recompute_layers of each stage's layers.
    const double share = std::min(1.0, static_cast<double>(cfg.training.recompute_layers) /
                                           std::max(1, L.layers_max_stage));
    r.hardware_flops_per_iteration =
        r.model_flops_per_iteration +
        share * (r.hardware_flops_per_iteration - r.model_flops_per_iteration);
  }
  r.tokens_per_s = tokens / r.iteration_time_s;
  const double gpu_seconds = r.iteration_time_s * cfg.cluster.gpus;
  r.tflops_per_gpu = r.model_flops_per_iteration / gpu_seconds / kTera;
  r.hw_tflops_per_gpu = r.hardware_flops_per_iteration / gpu_seconds / kTera;
  r.mfu = r.model_flops_per_iteration / (gpu_seconds * gemm_peak);
  r.hfu = r.hardware_flops_per_iteration / (gpu_seconds * gemm_peak);

  // Link utilisation of the GPU-attached links: NVLink per GPU and the GPU's share of NICs.
  NetworkStats& ns = r.network;
  ns.nvlink_bytes_per_gpu = nvlink_bytes;
  ns.nic_bytes_per_gpu = nic_bytes;
  ns.nvlink_utilization = gpu.nvlink_Bps > 0 ? nvlink_bytes / (gpu.nvlink_Bps * r.iteration_time_s) : 0;
  const double nic_share = cfg.cluster.nic_Bps() * cfg.cluster.nics_per_node /
                           std::max(1, cfg.cluster.gpus_per_node);
  ns.nic_utilization = nic_share > 0 ? nic_bytes / (nic_share * r.iteration_time_s) : 0;
  ns.max_link_utilization = std::max(ns.nvlink_utilization, ns.nic_utilization);
  ns.mean_link_utilization = (ns.nvlink_utilization + ns.nic_utilization) / 2.0;
  ns.has_ecmp = false;

  if (L.layers_first_stage != L.layers_last_stage) {
    r.notes.push_back(fmt::format("uneven pipeline: {} layers on the first stage, {} on the last",
                                  L.layers_first_stage, L.layers_last_stage));
  }
  r.notes.push_back(fmt::format(
      "analytic fidelity: no link contention or ECMP collisions (use flow fidelity for those); "
      "slowest stage per micro-batch {:.3f} ms",
      slot.total() * 1e3));
  return r;
}

}  // namespace trainsim::exec
