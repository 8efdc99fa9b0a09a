#include "sim/exec/analytic.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "sim/collective/analytic.h"
#include "sim/collective/comm_init.h"
#include "sim/core/error.h"
#include "sim/core/units.h"
#include "sim/model/ops.h"
#include "sim/plan/layout.h"
#include "sim/plan/memory.h"
#include "sim/exec/collective_model.h"
#include "sim/exec/compute_model.h"
#include "sim/exec/offload.h"
#include "sim/exec/stage_groups.h"

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
  double comm_sm_share = 0;  // share of the SMs an overlapped NCCL collective occupies
  double tp_sm_share = 0;    // share a TP collective occupies (exec::tp_comm_sms)
  double tp_ring_share = 0;  // share a TP all-gather that feeds its GEMM occupies (tp_ring_sms)
  model::ParamCount pc;      // the model's parameters (per layer, embedding, head)

  // One micro-batch's gradient accumulation over `params` parameters in `tensors` tensors,
  // averaged over the iteration's micro-batches (the first differs: plan::GradAccumulation);
  // 0 when the weight-gradient GEMMs accumulate.
  double accumulate(double params, int tensors) const {
    const plan::GradAccumulation g = cfg.opt.grad_accumulation;
    if (g == plan::GradAccumulation::kInGemm) return 0.0;
    const double n = L.microbatches;
    const double first = cm.grad_accumulate(params, plan::grad_accumulation_bytes_per_param(g, true),
                                            tensors);
    const double other = cm.grad_accumulate(
        params, plan::grad_accumulation_bytes_per_param(g, false), tensors);
    return (first + (n - 1) * other) / n;
  }
  // Under ZeRO >= 2 the gradients are reduce-scattered every micro-batch, so the sum runs on
  // this GPU's shard of them (the Program's accumulation ops).
  // ZeRO >= 2 keeps the gradient shard of the sharding group (DP, or DP·CP), and of its expert
  // part (that group / EP), as plan::memory_per_gpu counts it.
  double dense_shard() const { return L.par.zero >= 2 ? L.par.zero_group() : 1; }
  double expert_shard() const {
    return L.par.zero >= 2 ? std::max(1.0, static_cast<double>(L.par.zero_group()) / L.par.ep)
                           : 1;
  }
  // A layer's parameters on this GPU (as the Program's DP buckets count them) and tensors.
  double layer_accumulate(bool moe) const {
    const double t = L.par.tp;
    const double params = (pc.attention / t + pc.norms + (moe ? 0.0 : pc.mlp / t)) / dense_shard() +
                          (moe ? pc.expert_mlp / t / L.par.ep / expert_shard() : 0.0);
    const int tensors = pc.attention_tensors + pc.norm_tensors +
                        (moe ? cfg.model.experts / L.par.ep * pc.expert_tensors + 1 : pc.mlp_tensors);
    return accumulate(params, tensors);
  }

  // FSDP2's copy of a layer's gathered parameters into the unsharded ones (framework.
  // fsdp_copy_out), on the compute stream after each gather: 4 B a parameter (16-bit read and
  // write), one kernel. Per micro-batch: ZeRO-3 gathers before every forward and backward, so a
  // pass copies once; ZeRO-1/2 gather once an iteration, before the first forward. 0 where no
  // gather runs (DP·CP 1, ZeRO 0) or the parameters are views of the gathered buffer.
  double copy_out(double params) const {
    const auto& par = L.par;
    if (!cfg.opt.fsdp_copy_out || par.zero == 0 || par.dp * par.cp <= 1 || params <= 0) {
      return 0.0;
    }
    model::Op op;
    op.kind = model::OpKind::kMemory;
    op.kernel = "copy";
    op.bytes = 4.0 * params;
    const double once = cm.forward(op);
    return par.zero >= 3 ? once : once / L.microbatches;
  }
  // What the compute stream does to gradients before their reduction, one kernel each: FSDP2's
  // copy of the 16-bit gradients into the reduce-scatter's input in the reduce dtype
  // (framework.fsdp_copy_in; the compute stream waits for it) and Megatron's 1/DP scaling of the
  // buffer, read and written in the reduce dtype (framework.grad_scale_pass; ZeRO 0/1, Megatron's
  // own reductions: its ZeRO-2/3 runs are other frameworks' code). `dense` parameters
  // are reduced over DP·CP, `expert` over their expert-data-parallel group. Per micro-batch:
  // ZeRO >= 2 reduces every micro-batch, ZeRO 0/1 once an iteration (the Program's
  // pre_reduce).
  double pre_reduce(double dense, double expert) const {
    const auto& par = L.par;
    if (par.dp * par.cp <= 1) return 0.0;
    const double params = dense + (par.dp / par.ep * par.cp > 1 ? expert : 0.0);
    if (params <= 0) return 0.0;
    const double gb = bytes_per_element(cfg.training.grad_reduce);
    double once = 0;
    const auto pass = [&](double bytes_per_param) {
      model::Op op;
      op.kind = model::OpKind::kMemory;
      op.kernel = "copy";
      op.bytes = bytes_per_param * params;
      once += cm.forward(op);
    };
    if (cfg.opt.fsdp_copy_in && par.zero >= 1) pass(2.0 + gb);
    if (cfg.opt.grad_scale_pass && par.zero <= 1) pass(2.0 * gb);
    return par.zero >= 2 ? once : once / L.microbatches;
  }
  double layer_pre_reduce(bool moe) const {
    const double t = L.par.tp;
    return pre_reduce(pc.attention / t + pc.norms + (moe ? 0.0 : pc.mlp / t),
                      moe ? pc.expert_mlp / t / L.par.ep : 0.0);
  }
  double layer_copy_out(bool moe) const {
    const double t = L.par.tp;
    return copy_out(pc.attention / t + pc.norms + (moe ? 0.0 : pc.mlp / t) +
                    (moe ? pc.expert_mlp / t / L.par.ep : 0.0));
  }

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
// `feeds`: the collective is an all-gather whose pieces feed the GEMM after it (a ring exchange
// under a decomposed overlap of the framework's own kernels: exec::tp_ring_sms).
double tp_exposed(const Context& c, double t_comm, double t_gemm, bool independent,
                  bool feeds = false) {
  if (!c.cfg.opt.tp_overlap) {
    // Megatron's asynchronous backward collectives (Optimizations::tp_async_backward): a bulk
    // overlap without Transformer Engine.
    if (!independent || !c.cfg.opt.tp_async_backward) return t_comm;
    return ComputeModel::concurrent(t_gemm, t_comm, c.tp_sm_share) - t_gemm;
  }
  if (c.cfg.opt.tp_overlap_decomposed) {
    const double n = std::max(1, c.L.par.tp);
    const double rest = t_comm - t_comm / n;
    const double share = feeds ? c.tp_ring_share : c.tp_sm_share;
    return t_comm / n + ComputeModel::concurrent(t_gemm, rest, share) - t_gemm;
  }
  if (!independent) return t_comm;
  return ComputeModel::concurrent(t_gemm, t_comm, c.tp_sm_share) - t_gemm;
}

// The accumulators of a Slot that a stage's layers, embedding and head add to.
enum Acc { kCompute, kTp, kCp, kEp, kForward, kBackward, kNvlink, kNic, kAccs };

// What one layer (or the embedding, or the head) adds to each accumulator of its stage's slot,
// in the order the additions happen. A stage's slot is these additions replayed layer by layer,
// so every sum is formed exactly as a per-layer evaluation forms it, to the last bit. An
// addition of zero is left out: it changes no sum (the accumulators start at +0 and never hold
// −0).
struct Adds {
  std::vector<double> v[kAccs];
  void clear() {
    for (std::vector<double>& a : v) a.clear();
  }
  void add(int acc, double x) {
    if (x != 0.0) v[acc].push_back(x);
  }
  void traffic(const coll::Cost& c, double times = 1.0) {
    add(kNvlink, c.nvlink_bytes * times);
    add(kNic, c.nic_bytes * times);
  }
};

// A slot's accumulators while its layers are replayed.
struct Acc8 {
  double a[kAccs] = {};
  void apply(const Adds& adds) {
    for (int k = 0; k < kAccs; ++k) {
      double x = a[k];
      for (const double d : adds.v[k]) x += d;
      a[k] = x;
    }
  }
  Slot slot() const {
    Slot s;
    s.compute = a[kCompute];
    s.tp = a[kTp];
    s.cp = a[kCp];
    s.ep = a[kEp];
    s.forward = a[kForward];
    s.backward = a[kBackward];
    s.nvlink_bytes = a[kNvlink];
    s.nic_bytes = a[kNic];
    return s;
  }
};

// Per-thread buffers of the analytic core, kept between calls so that an evaluation allocates
// nothing once they have grown (a sweep evaluates hundreds of thousands of points per thread).
struct Workspace {
  std::vector<Op> layer_ops[2];  // dense, MoE (kept apart so that neither list is rebuilt)
  std::vector<Op> embedding_ops, head_ops;
  Adds layer[4];  // index: (MoE layer ? 2 : 0) + (recomputed in full ? 1 : 0)
  bool layer_ready[4] = {};
  Adds embedding, head;
};

Workspace& workspace() {
  thread_local Workspace w;
  return w;
}

// The TP collectives of one layer's activations and the per-layer CP and EP costs: the same for
// every stage, priced once per evaluation.
struct LayerComm {
  double tokens = 0;
  coll::Cost ag, rs, ar;  // TP all-gather, reduce-scatter, all-reduce of one [tokens × h] tensor
  coll::Cost ag8;         // the all-gather of its one-byte fp8 copy (fp8 runs; = ag otherwise)
  coll::Cost cag, crs;    // CP all-gather / reduce-scatter of K and V
  coll::Cost a2a;         // EP dispatch / combine
  coll::Cost moe_ag, moe_rs;  // TP all-gather / reduce-scatter of an MoE layer's dispatched rows
};

// The additions of pricing `ops` (forward, backward, recompute and their TP communication).
void price_ops(const Context& c, const LayerComm& lc, const std::vector<Op>& ops,
               model::Recompute recompute, Adds& out) {
  const bool recompute_all = recompute == model::Recompute::kFull;
  const auto& par = c.L.par;
  const coll::Cost& rs = lc.rs;
  const coll::Cost& ar = lc.ar;
  for (const Op& op : ops) {
    // A GEMM whose TP collective is overlapped runs as tp chunks (ComputeModel::forward_split).
    const bool split = par.tp > 1 && c.cfg.opt.tp_overlap && c.cfg.opt.tp_overlap_decomposed &&
                       (op.tp_comm_before || op.tp_comm_after);
    // An SP all-gather before an fp8 GEMM (its input forward, its output gradient backward)
    // moves the one-byte copy Transformer Engine casts before gathering.
    const coll::Cost& ag = c.cm.fp8_gemm(op) ? lc.ag8 : lc.ag;
    const double f = split ? c.cm.forward_split(op, par.tp) : c.cm.forward(op);
    const double b = split ? c.cm.backward_split(op, par.tp) : c.cm.backward(op);
    // What recompute runs again of the op's forward before its backward (model::recompute_share).
    const double share = model::recompute_share(c.cfg.model, op, recompute);
    const double r = recompute_all ? f : c.cm.forward_share(op, share, split ? par.tp : 1);
    out.add(kForward, f);
    out.add(kBackward, b + r);
    out.add(kCompute, f + b + r);
    if (par.tp <= 1) continue;
    // Forward: SP gathers before column-parallel GEMMs and reduce-scatters after row-parallel
    // ones; without SP only row-parallel outputs are all-reduced. Backward mirrors it.
    const int passes_fwd = recompute_all ? 2 : 1;
    // The backward's reduction of the input gradient can run beside the weight-gradient GEMM;
    // the forward's collectives feed or follow their GEMM.
    const bool wgrad = op.kind == OpKind::kGemm;
    if (op.tp_comm_before) {
      if (par.sp) {
        out.add(kTp, passes_fwd * tp_exposed(c, ag.time_s, f, false, true) +
                         tp_exposed(c, rs.time_s, b / 2, wgrad));
        out.traffic(ag, passes_fwd);
        if (!recompute_all && recompute == model::Recompute::kSelectiveOp && share > 0) {
          // Per-op checkpointing replays the SP all-gather (not a kept op) before the share.
          out.add(kTp, tp_exposed(c, ag.time_s, r, false, true));
          out.traffic(ag);
        }
        out.traffic(rs);
        if (wgrad && !par.sp_saves_gathered_input) {
          // Megatron and Transformer Engine keep only the rank's own rows of the input and
          // all-gather them again for the weight gradient, beside the input-gradient GEMM.
          out.add(kTp, tp_exposed(c, ag.time_s, b / 2, true));
          out.traffic(ag);
        }
      } else {
        out.add(kTp, tp_exposed(c, ar.time_s, b / 2, wgrad));
        out.traffic(ar);
      }
    }
    if (op.tp_comm_after) {
      if (par.sp) {
        out.add(kTp, passes_fwd * tp_exposed(c, rs.time_s, f, false) +
                         tp_exposed(c, ag.time_s, b / 2, false, true));
        out.traffic(rs, passes_fwd);
        out.traffic(ag);
      } else {
        out.add(kTp, passes_fwd * tp_exposed(c, ar.time_s, f, false));
        out.traffic(ar, passes_fwd);
      }
    }
  }
}

// The additions of one layer: its ops, then the CP exchange of K and V, then the EP all-to-alls.
void layer_adds(const Context& c, const LayerComm& lc, Workspace& w, bool moe, bool full,
                Adds& out) {
  const auto& m = c.cfg.model;
  const auto& par = c.L.par;
  // A layer recomputed in full, or the recompute mode of the rest (block recompute keeps them).
  const model::Recompute rc = c.cfg.training.recompute;
  const model::Recompute mode =
      full ? model::Recompute::kFull : rc == model::Recompute::kFull ? model::Recompute::kNone : rc;
  out.clear();
  // Any layer index of the right kind gives the op list (the index only decides MoE vs dense):
  // layer 0 is an MoE layer of an MoE model (Megatron-Core's i % moe_every == 0), layer 1 a
  // dense one when moe_every > 1. (Until analytic-19 the MoE list came from layer moe_every − 1,
  // the rule before analytic-17: a dense layer, so moe_every > 1 priced no expert.)
  int li = 0;
  while (li < m.moe_every && m.is_moe_layer(li) != moe) ++li;
  std::vector<Op>& ops = w.layer_ops[moe ? 1 : 0];
  model::layer_forward_ops(m, c.shard, li, ops);
  price_ops(c, lc, ops, mode, out);
  // The layer's weight gradients summed into the accumulator, after its backward.
  const double accumulate = c.layer_accumulate(moe);
  out.add(kBackward, accumulate);
  out.add(kCompute, accumulate);
  // The passes over the layer's gradients before their reduction, after its backward.
  const double pre_reduce = c.layer_pre_reduce(moe);
  out.add(kBackward, pre_reduce);
  out.add(kCompute, pre_reduce);
  // FSDP2's copy-out after the layer's parameter gathers (ZeRO-3: before its forward and its
  // backward; ZeRO-1/2: once an iteration, before the first forward).
  const double copy = c.layer_copy_out(moe);
  if (copy > 0) {
    out.add(kForward, copy);
    out.add(kCompute, copy);
    if (par.zero >= 3) {
      out.add(kBackward, copy);
      out.add(kCompute, copy);
    }
  }
  if (par.cp > 1) {
    // K and V of the other CP ranks: all-gathered in forward (and again when recomputed),
    // their gradients reduce-scattered in backward. All-gather CP (framework.cp_comm) runs them
    // before and after attention, exposed. The ring exchange (p2p) pipelines them with the
    // attention core's n = cp blocks, as the Program does (sim/plan/program.cpp: attention_cp):
    // block 0 takes the local K/V, block i waits for the i-th of n − 1 pieces (τ_a = AG/(n−1)
    // each, one after another on the CP stream), and in backward each block i ≥ 1 reduce-scatters
    // its dK/dV piece (τ_r = RS/(n−1)) after it. With β the block's time (the first core op's
    // forward, or its backward: a score GEMM's input-gradient part), forward ends at
    // max(n·β, AG + β), backward at the latest of n·β + τ_r, AG + β + τ_r (the last piece's block
    // and its reduce-scatter) and AG + RS (the stream's own work).
    const double fwd_passes = full ? 2 : 1;
    const double n = par.cp;
    const double ag = lc.cag.time_s, rs = lc.crs.time_s;
    double exposed = fwd_passes * ag + ag + rs;
    if (!c.cfg.opt.cp_all_gather) {
      double core_fwd = 0, core_bwd = 0;
      for (const Op& op : ops) {
        if (!model::attention_core(op)) continue;
        core_fwd = c.cm.forward(op) - c.cm.launch(op);
        core_bwd = op.kind == OpKind::kGemm
                       ? c.cm.backward_cast(op) +
                             c.cm.gemm_time(op.m, op.k, op.n, op.batch,
                                            model::runs_16bit(op) ? c.cm.peak16 : c.cm.gemm_peak)
                       : c.cm.backward(op) - c.cm.launch(op);
        break;
      }
      const double bf = core_fwd / n, bb = core_bwd / n, tr = rs / (n - 1);
      exposed = fwd_passes * std::max(0.0, ag - (n - 1) * bf) +
                std::max({tr, ag + tr - (n - 1) * bb, ag + rs - n * bb});
    }
    out.add(kCp, exposed);
    out.traffic(lc.cag, fwd_passes + 1);
    out.traffic(lc.crs);
  }
  if (moe && par.ep > 1) {
    // Dispatch and combine all-to-alls in forward and backward (and again when recomputed).
    const double n = full ? 6 : 4;
    out.add(kEp, n * lc.a2a.time_s);
    out.traffic(lc.a2a, n);
  }
  if (moe && par.tp > 1) {
    // The TP all-gather of the dispatched rows and the reduce-scatter of the experts' output,
    // in forward and (mirrored) backward, and again when recomputed; blocking, as the
    // all-to-alls they follow and precede.
    const double n = full ? 3 : 2;
    out.add(kTp, n * (lc.moe_ag.time_s + lc.moe_rs.time_s));
    out.traffic(lc.moe_ag, n);
    out.traffic(lc.moe_rs, n);
  }
}

// Replays the layers of a stage, `layers` layers from global layer `first_layer`, building each
// kind of layer's additions on first use; `snapshots[i]` receives the accumulators after the
// first `at[i]` layers (i < n_snapshots).
class StageReplay {
 public:
  StageReplay(const Context& c, const LayerComm& lc, Workspace& w) : c_(c), lc_(lc), w_(w) {
    for (bool& ready : w_.layer_ready) ready = false;
  }

  // Block recompute: `recompute_layers` of each model chunk recompute in full, min(n, N·vpp) of
  // a stage's n layers (plan::recomputed_layers_per_stage), the stage's first ones here.
  void run(int layers, int first_layer, const int* at, Acc8* snapshots, int n_snapshots) {
    const auto& m = c_.cfg.model;
    const model::Recompute rc = c_.cfg.training.recompute;
    const int block = plan::recomputed_layers_per_stage(c_.L.par, c_.cfg.training);
    Acc8 acc;
    for (int s = 0; s < n_snapshots; ++s) {
      if (at[s] == 0) snapshots[s] = acc;
    }
    for (int i = 0; i < layers; ++i) {
      const bool full = rc == model::Recompute::kFull && (block <= 0 || i < block);
      const bool moe = m.is_moe_layer(first_layer + i);
      acc.apply(adds(moe, full));
      for (int s = 0; s < n_snapshots; ++s) {
        if (at[s] == i + 1) snapshots[s] = acc;
      }
    }
  }

  // The layers of pipeline stage `stage` as the Program runs them: model chunk by model chunk
  // (Layout::chunk_layers: interleaved chunks hold layers v·p apart), each layer MoE or dense by
  // its global index, and block recompute on the first N layers of each chunk
  // (sim/plan/program.cpp, recomputed_in_full). For models whose layers differ by index.
  Acc8 run_stage(int stage) {
    const auto& m = c_.cfg.model;
    const model::Recompute rc = c_.cfg.training.recompute;
    const int n = c_.cfg.training.recompute_layers;
    Acc8 acc;
    for (int ch = 0; ch < std::max(1, c_.L.par.vpp); ++ch) {
      const auto [first, count] = c_.L.chunk_layers(stage, ch);
      for (int i = 0; i < count; ++i) {
        const bool full = rc == model::Recompute::kFull && (n <= 0 || i < n);
        acc.apply(adds(m.is_moe_layer(first + i), full));
      }
    }
    return acc;
  }

 private:
  const Adds& adds(bool moe, bool full) {
    const int k = (moe ? 2 : 0) + (full ? 1 : 0);
    if (!w_.layer_ready[k]) {
      layer_adds(c_, lc_, w_, moe, full, w_.layer[k]);
      w_.layer_ready[k] = true;
    }
    return w_.layer[k];
  }
  const Context& c_;
  const LayerComm& lc_;
  Workspace& w_;
};

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

coll::LinkModel link_model(const RunConfig& cfg) {
  coll::LinkModel l = link_model(cfg.cluster, cfg.profile);
  if (cfg.opt.p2p_net_channels > 0) {
    l.p2p_net_Bps = cfg.opt.p2p_net_channels * plan::kNcclP2pChannelNetBps;
  }
  return l;
}

bool try_run_analytic(const RunConfig& cfg, const AnalyticOptions& options, Result& r,
                      plan::Infeasibility& why) {
  const auto& m = cfg.model;
  const auto& gpu = cfg.cluster.gpu;
  const auto& prof = cfg.profile;
  if (cfg.training.precision == Precision::kFp8 && gpu.peak_dense_fp8_flops <= 0) {
    why = {"training.precision", "GPU `" + gpu.name + "` has no fp8 tensor cores", {}};
    return false;
  }
  plan::Layout L;
  if (!plan::try_make_layout(m, cfg.cluster, cfg.parallel, cfg.training, L, &why)) return false;
  const auto& par = L.par;
  // Activation offloading as Megatron-Core allows it (the scenario checks it too; a sweep point
  // that varies pp or recompute meets it here).
  if (cfg.training.cpu_offload_layers > 0 &&
      (par.pp > 1 || cfg.training.recompute != model::Recompute::kNone)) {
    why = {"training.cpu_offload_layers",
           par.pp > 1 ? "activation offloading needs parallel.pp 1 (Megatron-Core)"
                      : "activation offloading does not work with activation recompute "
                        "(Megatron-Core)",
           "set training.cpu_offload_layers 0"};
    return false;
  }

  r = Result{};
  r.fidelity = "analytic";
  r.model_version = kAnalyticModelVersion;
  r.profile_name = prof.name;
  r.profile_version = prof.version;
  r.gpus = cfg.cluster.gpus;
  r.microbatches = L.microbatches;

  r.memory = plan::memory_per_gpu(m, L, cfg.training, cfg.opt.fused_attention(), gpu);
  // Offloaded activations must fit the GPU's share of host memory (whatever options say: no
  // timing of a run that cannot hold them is worth reporting).
  if (r.memory.host_offload_bytes > 0 && gpu.host_memory_bytes > 0 &&
      r.memory.host_offload_bytes > gpu.host_memory_bytes) {
    why = {"training.cpu_offload_layers",
           fmt::format("offloaded activations do not fit in host memory: {:.1f} GiB of the "
                       "GPU's {:.1f} GiB share",
                       r.memory.host_offload_bytes / kGiB, gpu.host_memory_bytes / kGiB),
           "offload fewer layers"};
    return false;
  }
  if (options.enforce_memory && !r.memory.fits()) {
    // With activation offloading, pipeline parallelism and recompute are refused (Megatron-Core
    // refuses them together): offloading more layers is the lever that remains.
    why = {"", memory_shortfall_message(r.memory),
           cfg.training.cpu_offload_layers > 0
               ? "offload more layers (training.cpu_offload_layers, at most layers − 1), more "
                 "tensor parallelism, ZeRO, or a smaller micro-batch (offloading rules out "
                 "pipeline parallelism and recompute)"
               : std::string("try more pipeline or tensor parallelism, ZeRO, recompute, or a "
                             "smaller micro-batch") +
                     (cfg.opt.fused_attention()
                          ? ""
                          : "; or a fused attention kernel (framework.attention_kernel=flash2, "
                            "or optimizations.efficient_operators=true): the unfused kernel "
                            "stores every s×s attention score for the backward")};
    return false;
  }
  const coll::LinkModel links = link_model(cfg);
  if (!options.timings_when_not_fitting && !r.memory.fits() && !cfg.collectives.algorithm &&
      !cfg.collectives.protocol && links.nvlink_busbw_Bps > 0 && links.nic_Bps_per_gpu > 0) {
    // The timings could only end in an input error (no collective implementation for a chosen
    // algorithm or protocol, or a link without bandwidth); with neither possible they are
    // skipped. Otherwise they run, so that such a point reports that error as before.
    return true;
  }

  const double peak16 = gpu.peak_dense_16bit_flops;
  const double gemm_peak =
      cfg.training.precision == Precision::kFp8 ? gpu.peak_dense_fp8_flops : peak16;
  r.peak_flops_per_gpu = gemm_peak;

  Context c{cfg, L,
            ComputeModel{prof, gemm_peak, peak16, gpu.hbm_Bps,
                         cfg.training.precision == Precision::kFp8, cfg.training.fp8_recipe},
            links, {}, 0.0, 0.0, 0.0, {}};
  c.shard = plan::sharding_of(par, cfg.training, cfg.opt);
  // The SMs an overlapped collective takes from the compute beside it, per kind of kernel (the
  // executor's shares, sm_share.cpp, are the same): NCCL's channels for the DP collectives (and
  // the TP ones without a TP overlap of the framework's own), the framework's TP overlap kernels
  // for the TP ones.
  // (The DP sites take the dense gradient group's span; an expert group's may differ, as the
  // executor, which prices each collective by its own group, has it.)
  const CommSpan dp_span{L.dp_cp.nodes > 1, cfg.cluster.nics_per_node};
  const CommSpan tp_span{L.tp.nodes > 1, cfg.cluster.nics_per_node};
  c.comm_sm_share = sm_share(nccl_sms(cfg.opt, prof, dp_span), gpu.sms);
  c.tp_sm_share = sm_share(tp_comm_sms(cfg.opt, prof, tp_span), gpu.sms);
  c.tp_ring_share = sm_share(tp_ring_sms(cfg.opt, prof, tp_span), gpu.sms);
  if (cfg.opt.grad_accumulation != plan::GradAccumulation::kInGemm || cfg.opt.fsdp_copy_out ||
      cfg.opt.fsdp_copy_in || cfg.opt.grad_scale_pass) {
    c.pc = model::count_parameters(m);
  }

  // The communication every layer prices, once (in the order a stage's first layer asks for it,
  // so that an invalid collectives.algorithm/protocol is reported for the same collective).
  LayerComm lc;
  lc.tokens = static_cast<double>(c.shard.micro_batch) * m.seq_len / par.cp;
  {
    const double act_bytes = lc.tokens * m.hidden * 2.0;  // one [tokens × h] 16-bit tensor
    lc.ag = c.cost(Kind::kAllGather, act_bytes, L.tp);
    lc.ag8 = c.cm.fp8 ? c.cost(Kind::kAllGather, act_bytes / 2, L.tp) : lc.ag;
    lc.rs = c.cost(Kind::kReduceScatter, act_bytes, L.tp);
    lc.ar = c.cost(Kind::kAllReduce, act_bytes, L.tp);
    if (par.cp > 1) {
      const double kv_bytes = 2.0 * lc.tokens * par.cp * m.kv_dim() / par.tp * 2.0;
      lc.cag = c.cost(Kind::kAllGather, kv_bytes, L.cp);
      lc.crs = c.cost(Kind::kReduceScatter, kv_bytes, L.cp);
    }
    // An MoE layer's dispatched rows, [tokens·top_k × h]: each rank dispatches its own tokens
    // (tokens/tp under TP, which needs SP for MoE), and with TP the group all-gathers the rows
    // for its TP-sharded experts and reduce-scatters their output (Megatron-Core's alltoall
    // dispatcher; sim/plan/program.cpp prices the same tasks).
    const double rows_bytes = lc.tokens * m.top_k * m.hidden * 2.0;
    if (m.experts > 0 && par.ep > 1) {
      lc.a2a = c.cost(Kind::kAllToAll, rows_bytes / par.tp, L.ep);
    }
    if (m.experts > 0 && par.tp > 1) {
      lc.moe_ag = c.cost(Kind::kAllGather, rows_bytes, L.tp);
      lc.moe_rs = c.cost(Kind::kReduceScatter, rows_bytes, L.tp);
    }
  }

  // Slowest stage per micro-batch (first: embedding, last: loss head, and the most loaded of
  // the stages between them). A stage's slot is its layers' additions replayed in order, then
  // the embedding's or the head's. When every layer is alike whatever its index (a dense model,
  // or every layer MoE) the three stages' layers are prefixes of one replay: it runs once, to
  // the largest of their layer counts, and each stage takes the state at its own count.
  Workspace& w = workspace();
  StageReplay replay(c, lc, w);
  const bool single = par.pp == 1;
  const int n_first = L.layers_first_stage;
  const int n_last = L.layers_last_stage;
  int n_middle = par.pp > 2 ? L.layers_max_middle : 0;
  const int at[3] = {n_first, n_last, n_middle};
  Acc8 part[3];  // layers only: first, last, middle
  // The middle stages' slots summed, less (p − 2) times the one priced (the pipeline's fill and
  // drain run through each of them): 0 where the middle stages are alike.
  double middle_spread = 0;
  const bool alike = m.experts == 0 || m.moe_every == 1;
  if (alike) {
    replay.run(std::max({n_first, single ? 0 : n_last, n_middle}), 0, at, part, single ? 1 : 3);
  } else {
    // MoE every k-th layer: each stage holds the MoE layers its chunks hold, so every stage is
    // replayed, and the slowest middle stage is priced (until analytic-34 the first and last
    // stages were contiguous ranges and stage 1 stood for every middle stage, whatever the
    // interleaving placed where).
    part[0] = replay.run_stage(0);
    if (!single) part[1] = replay.run_stage(par.pp - 1);
    double sum = 0;
    for (int st = 1; st + 1 < par.pp; ++st) {
      const Acc8 a = replay.run_stage(st);
      const double t = a.slot().total();
      sum += t;
      if (st == 1 || t > part[2].slot().total()) {
        part[2] = a;
        n_middle = L.stage_layers[static_cast<std::size_t>(st)];
      }
    }
    if (par.pp > 2) middle_spread = sum - (par.pp - 2) * part[2].slot().total();
  }
  model::embedding_forward_ops(m, c.shard, w.embedding_ops);
  w.embedding.clear();
  price_ops(c, lc, w.embedding_ops, model::Recompute::kNone, w.embedding);
  model::head_forward_ops(m, c.shard, w.head_ops);
  w.head.clear();
  price_ops(c, lc, w.head_ops, model::Recompute::kNone, w.head);
  if (cfg.opt.grad_accumulation != plan::GradAccumulation::kInGemm) {
    // The embedding's and the head's weight gradients (the Program's first and last layer
    // buckets hold them): the table (and learned positions), the untied output projection (or
    // the tied table on a last stage that is not also the first) and the final norm.
    const double t = par.tp;
    const bool learned = m.position == model::PositionKind::kLearned;
    const double emb = c.accumulate(model::embedding_params_per_rank(m, c.pc, L.par.tp) / c.dense_shard(),
                                    learned ? 2 : 1);
    w.embedding.add(kBackward, emb);
    w.embedding.add(kCompute, emb);
    const double out = m.tied_embeddings ? static_cast<double>(m.vocab) * m.hidden : c.pc.output;
    const bool out_here = par.pp > 1 || !m.tied_embeddings;
    const double head = c.accumulate(((out_here ? out / t : 0.0) + c.pc.final_norm) / c.dense_shard(),
                                     (out_here ? 1 : 0) + c.pc.final_norm_tensors);
    w.head.add(kBackward, head);
    w.head.add(kCompute, head);
  }
  if (cfg.opt.fsdp_copy_out) {
    // FSDP2's copy-out of the embedding's and the head's gathered parameters (the Program's
    // first and last layer buckets hold them), as the layers' (Context::copy_out).
    const double t = par.tp;
    const double out = m.tied_embeddings ? static_cast<double>(m.vocab) * m.hidden : c.pc.output;
    const bool out_here = par.pp > 1 || !m.tied_embeddings;
    const double emb = c.copy_out(model::embedding_params_per_rank(m, c.pc, L.par.tp));
    const double head = c.copy_out((out_here ? out / t : 0.0) + c.pc.final_norm);
    for (const auto& [adds, x] : {std::pair<Adds*, double>{&w.embedding, emb}, {&w.head, head}}) {
      if (x <= 0) continue;
      adds->add(kForward, x);
      adds->add(kCompute, x);
      if (par.zero >= 3) {
        adds->add(kBackward, x);
        adds->add(kCompute, x);
      }
    }
  }
  if (cfg.opt.fsdp_copy_in || cfg.opt.grad_scale_pass) {
    // The embedding's and the head's gradients before their reductions (the Program's first and
    // last layer buckets hold them), as the layers' (Context::pre_reduce).
    const double t = par.tp;
    const double out = m.tied_embeddings ? static_cast<double>(m.vocab) * m.hidden : c.pc.output;
    const bool out_here = par.pp > 1 || !m.tied_embeddings;
    const double emb = c.pre_reduce(model::embedding_params_per_rank(m, c.pc, L.par.tp), 0.0);
    const double head = c.pre_reduce((out_here ? out / t : 0.0) + c.pc.final_norm, 0.0);
    w.embedding.add(kBackward, emb);
    w.embedding.add(kCompute, emb);
    w.head.add(kBackward, head);
    w.head.add(kCompute, head);
  }
  part[0].apply(w.embedding);
  if (single) {
    part[0].apply(w.head);
  } else {
    part[1].apply(w.head);
  }
  Slot first = part[0].slot();
  // Activation offloading (pipeline parallelism 1 only): the stalls of the copies to host and
  // back (exec::offload_stalls), on the layers' own compute times.
  if (single && cfg.training.cpu_offload_layers > 0 && cfg.cluster.gpu.host_link_Bps > 0) {
    std::vector<double> f(static_cast<std::size_t>(n_first)), b(f.size());
    for (int i = 0; i < n_first; ++i) {
      const Adds& a = w.layer[m.is_moe_layer(i) ? 2 : 0];
      double x = 0, y = 0;
      for (const double d : a.v[kForward]) x += d;
      for (const double d : a.v[kBackward]) y += d;
      f[static_cast<std::size_t>(i)] = x;
      b[static_cast<std::size_t>(i)] = y;
    }
    const OffloadStalls st =
        offload_stalls(f, b, cfg.training.cpu_offload_layers, offload_copy_seconds(cfg));
    first.compute += st.forward + st.backward;
    first.forward += st.forward;
    first.backward += st.backward;
    r.offload_stall_s = L.microbatches * (st.forward + st.backward);
  }
  Slot last = single ? first : part[1].slot();
  Slot middle;
  if (par.pp > 2) middle = part[2].slot();
  // Pipeline send/recv of one micro-batch's activations, forward and backward, per model chunk:
  // 1/tp per rank when SP shards them or the framework scatter-gathers them (then the receivers
  // all-gather the whole tensor over the TP group before computing: TP communication), the
  // whole tensor per rank otherwise (framework.pp_activation full).
  //
  // Each stage sends over its own two boundaries (to the next stage and the previous one; under
  // interleaving stage p − 1 also sends to stage 0 and back), each inside a server or across one
  // (sim/exec/stage_groups.h). Until analytic-36 every send was priced inside a server whenever
  // two stages shared one, though the pipeline's other boundaries (and the interleaved wrap)
  // cross: a PP 4 pipeline on two servers read its exposed PP 10 times short of the executed one.
  double pp_chain_s = 0;  // the sends of one micro-batch's path through every chunk, both ways
  if (par.pp > 1) {
    const double full = static_cast<double>(cfg.training.micro_batch) * m.seq_len / par.cp *
                        m.hidden * 2.0;
    const bool sharded = c.shard.sp || par.tp == 1;
    const bool whole = !sharded && cfg.opt.pp_activation == plan::PpActivation::kFull;
    const double bytes = whole ? full : full / par.tp;
    const int p = par.pp, v = std::max(1, par.vpp);
    const bool interleaved = par.schedule == plan::Schedule::kInterleaved && v > 1;
    // Stage s of every replica sits where replica 0's does relative to the servers when the
    // pipelines line up with them (plan::groups_line_up); otherwise every boundary is
    // priced at the pipeline's worst pair.
    const long gpn = std::max(1, cfg.cluster.gpus_per_node);
    const long stride = std::max(1, par.pp_stride());
    const bool aligned = plan::groups_line_up(p, stride, gpn);
    const coll::GroupShape worst = pp_pair_shape(L);
    const coll::Cost in_server = c.cost(Kind::kSendRecv, bytes, coll::GroupShape{2, 2, 1, 1});
    const coll::Cost across =
        c.cost(Kind::kSendRecv, bytes, coll::GroupShape{2, 1, 2, std::min(2, L.pp.pods)});
    const auto cost = [&](int a, int b) -> const coll::Cost& {
      const bool crosses = aligned ? (a * stride) / gpn != (b * stride) / gpn : worst.nodes > 1;
      return crosses ? across : in_server;
    };
    const auto next = [&](int st) { return st + 1 < p ? st + 1 : (interleaved ? 0 : st - 1); };
    const auto prev = [&](int st) { return st > 0 ? st - 1 : (interleaved ? p - 1 : st + 1); };
    const auto stage_send = [&](int st) {
      return 0.5 * (cost(st, next(st)).time_s + cost(st, prev(st)).time_s);
    };
    double middle_send = 0;
    for (int st = 1; st + 1 < p; ++st) middle_send = std::max(middle_send, stage_send(st));
    const bool gather = !sharded && !whole;
    const coll::Cost ag = gather ? c.cost(Kind::kAllGather, full, L.tp) : coll::Cost{};
    const std::pair<Slot*, int> slots[] = {{&first, 0}, {&last, p - 1}, {&middle, -1}};
    for (const auto& [sl, st] : slots) {
      if (!cfg.opt.pp_overlap) {
        sl->pp += 2.0 * par.vpp * (st >= 0 ? stage_send(st) : middle_send);
        sl->tp += 2.0 * par.vpp * ag.time_s;
      }
      const int at = st >= 0 ? st : std::min(1, p - 1);
      const coll::Cost& to_next = cost(at, next(at));
      const coll::Cost& to_prev = cost(at, prev(at));
      if (&to_next == &to_prev) {
        add_traffic(*sl, to_next, 2.0 * par.vpp);
      } else {
        add_traffic(*sl, to_next, par.vpp);
        add_traffic(*sl, to_prev, par.vpp);
      }
      if (gather) add_traffic(*sl, ag, 2.0 * par.vpp);
    }
    // One micro-batch's path: v times through boundaries 0 → 1 … p − 2 → p − 1, and v − 1 wraps
    // from the last stage to the first; both ways (2·(v·p − 1) sends).
    long crossing = 0, inside = 0;
    for (int st = 0; st + 1 < p; ++st) (&cost(st, st + 1) == &across ? crossing : inside) += v;
    if (interleaved) (&cost(p - 1, 0) == &across ? crossing : inside) += v - 1;
    pp_chain_s = 2.0 * static_cast<double>(inside) * in_server.time_s +
                 2.0 * static_cast<double>(crossing) * across.time_s;
  }
  const Slot* slowest = first.total() >= last.total() ? &first : &last;
  if (par.pp > 2 && middle.total() > slowest->total()) slowest = &middle;
  const Slot& slot = *slowest;
  r.pipeline = {par.pp, par.vpp, L.microbatches, par.schedule, slot.forward, slot.backward,
                slot.tp + slot.cp + slot.ep + slot.pp, &slot == &last && !single};
  const double mb = L.microbatches;
  // The fill and drain take p − 1 model-chunk steps each way. With layers that split evenly into
  // the v chunks a step is 1/v of the stage's slot; when they do not (Layout::chunk_layers: some
  // chunks hold ⌈n/v⌉ layers, e.g. 8 layers in 7 chunks), the larger chunks set the steps'
  // pace, ⌈n/v⌉/n of the slot each (the schedule fidelity executes the chunks as they are).
  const int slot_layers = &slot == &first ? n_first : &slot == &last ? n_last : n_middle;
  const bool uneven_chunks = par.vpp > 1 && slot_layers > 0 && slot_layers % par.vpp != 0;
  const double bubble_slots =
      uneven_chunks ? static_cast<double>(par.pp - 1) * ((slot_layers + par.vpp - 1) / par.vpp) /
                          slot_layers
                    : static_cast<double>(par.pp - 1) / par.vpp;

  Breakdown& bd = r.breakdown;
  bd.compute_s = mb * slot.compute;
  bd.exposed_tp_s = mb * slot.tp;
  bd.exposed_cp_s = mb * slot.cp;
  bd.exposed_ep_s = mb * slot.ep;
  bd.exposed_pp_s = mb * slot.pp;
  if (cfg.opt.pp_overlap && par.pp > 1) {
    // The sends no compute can hide: the fill's chain of p − 1 forward sends and the drain's of
    // p − 1 backward ones, and with v > 1 chunks the wrap-arounds of the warm-up and cool-down.
    // Megatron's interleaved order runs p micro-batches per chunk, chunk by chunk, and in the
    // warm-up (forwards only) chunk j + 1 of the first micro-batch needs its chunk j from the
    // last stage: that wave took p chunk steps and p sends while the first stage had p chunk
    // steps to run, so the first stage waits p sends at each of its v − 1 chunk changes; the
    // cool-down mirrors it backwards. In all 2·(v·p − 1) sends: one micro-batch's whole path
    // through the v·p model chunks, both ways (v = 1: 2·(p − 1)).
    bd.exposed_pp_s += pp_chain_s;
    r.pipeline.pp_outside_s = pp_chain_s;
  }
  // The fill and drain run through the other stages, not p − 1 copies of the slowest: with stage
  // slots t_i the pipeline takes (m − 1)·max t + Σ t (the first micro-batch through every stage,
  // the rest at the slowest's pace), so the bubble is Σ t − max t, per chunk step as above. With
  // even stages that is (p − 1)·t; a heavy last stage (a large vocabulary's head) or end stages
  // of fewer layers no longer make every fill step as long as the heaviest.
  double others = 0;
  if (par.pp > 1) {
    const double sum =
        first.total() + last.total() + (par.pp - 2) * middle.total() + middle_spread;
    others = std::max(0.0, sum - slot.total()) / (par.pp - 1);
  }
  bd.pipeline_bubble_s = bubble_slots * others;

  // Data parallelism: gradient reduction and (ZeRO) parameter all-gather of the heaviest stage.
  double nvlink_bytes = mb * slot.nvlink_bytes;
  double nic_bytes = mb * slot.nic_bytes;
  const model::ParamCount pc = model::count_parameters(m);
  const plan::StageParams sp_first = plan::stage_parameters(
      m, pc, L, true, single, L.layers_first_stage, plan::moe_layers_of_stage(m, L, 0));
  const plan::StageParams sp_last = plan::stage_parameters(
      m, pc, L, single, true, L.layers_last_stage, plan::moe_layers_of_stage(m, L, par.pp - 1));
  // The part of the DP parameter gathers that the iteration's first forward waits for (it is
  // issued before the host loads the next batch: see the data-loading stall below).
  double first_gather_s = 0;
  // (The dense gradients are reduced over DP·CP, so a CP group alone reduces them too.)
  if (par.dp * par.cp > 1) {
    const bool first_heavier = sp_first.total() >= sp_last.total();
    const plan::StageParams sp = first_heavier ? sp_first : sp_last;
    const double gb = bytes_per_element(cfg.training.grad_reduce);
    // Megatron buckets gradients (plan::dp_bucket_params), each model chunk's apart; the last
    // bucket of the backward pass (and the first of the forward prefetch) cannot hide.
    const double bucket = plan::dp_bucket_params(cfg.opt.dp_buckets, par.dp);
    const double v_chunks =
        par.schedule == plan::Schedule::kInterleaved ? std::max(1, par.vpp) : 1;
    // A chunk's buckets, as the Program cuts them (whole layers, at least one): each is a
    // collective of its own, which pays the ring's latency again (α per step, n − 1 steps: 7.7 ms
    // at DP 768, where a layer's gather moves 9 ms of bytes).
    const double chunk_buckets = plan::dp_bucket_count(
        sp.total() / v_chunks, bucket,
        static_cast<int>((first_heavier ? n_first : n_last) / v_chunks));
    const double collectives = v_chunks * chunk_buckets;
    // Gradients are reduced over every rank that holds the same weights: DP·CP.
    const coll::GroupShape& reduce_group = par.cp > 1 ? L.dp_cp : L.dp;
    auto dp_cost = [&](Kind k, double params, double bytes_per_param, const coll::GroupShape& g) {
      if (params <= 0) return coll::Cost{};
      const coll::Cost one = c.cost(k, params * bytes_per_param / collectives, g);
      return coll::Cost{collectives * one.time_s, collectives * one.nvlink_bytes,
                        collectives * one.nic_bytes, one.algorithm, one.protocol};
    };
    // The embedding's gradients are the last a backward pass makes (its backward is the pass's
    // last op) and its parameters the first a forward pass uses, so the Program's first bucket of
    // the model's first chunk (on stage 0, which ends the iteration's backward) holds them beside
    // the chunk's first layer and can hide behind nothing: its collective is exposed whole.
    // The equal buckets of the rule below leave that tail at one bucket's share; the
    // embedding's own share of a collective's time (at the dense parameters' rate) is added
    // where the rule prices a lone bucket. (Until analytic-35 a small model with a large
    // vocabulary read its DP tail short of the executed schedule's: 6 layers of 2,048 with a
    // 128K vocabulary, 0.75 against 3.56 ms.)
    const double emb_params = model::embedding_params_per_rank(m, pc, par.tp);
    double emb_share = 0;  // per unit of a dense collective's time: the embedding's share
    auto both = [&](Kind k, double bytes_per_param) {
      coll::Cost a = dp_cost(k, sp.dense, bytes_per_param, reduce_group);
      coll::Cost b = dp_cost(k, sp.expert, bytes_per_param, L.expert_dp);
      emb_share = sp.dense > 0 ? a.time_s * emb_params / sp.dense : 0.0;
      return coll::Cost{a.time_s + b.time_s, a.nvlink_bytes + b.nvlink_bytes,
                        a.nic_bytes + b.nic_bytes};
    };
    // The embedding's exposed tail of a collective, with DP overlap (without it the whole
    // collective is exposed already): its share beyond what the rule's lone bucket (one of
    // v·k equal ones) already holds of it.
    const auto emb_tail = [&]() {
      const double lone_buckets =
          v_chunks * std::max(1.0, std::ceil(sp.total() / v_chunks / bucket));
      return cfg.opt.dp_overlap ? emb_share * (1.0 - 1.0 / lone_buckets) : 0.0;
    };
    // Overlapped, each model chunk's reduction runs beside the backward compute that follows
    // its last backward, as concurrent kernels (ComputeModel::chunked_overlap derives it).
    // The exposure keeps the bucket count of the parameters alone (a bucket may split a layer
    // here): what stays exposed of a pass's last bucket is a first-order rule that the executed
    // schedule, where a micro-batch's reduction also runs beside the next micro-batch's
    // compute, bears out with it better than with the Program's whole-layer buckets.
    auto exposed = [&](double t, double window, double chunks) {
      if (!cfg.opt.dp_overlap) return t;
      const double buckets = std::max(1.0, std::ceil(sp.total() / chunks / bucket));
      return ComputeModel::chunked_overlap(t, window, chunks, buckets, par.pp, c.comm_sm_share);
    };
    // A pass lasts its compute plus the TP/CP/EP/PP communication left exposed in it: the DP
    // reduction runs on during both (the stage's passes split in proportion to their compute).
    const double pass_scale =
        slot.forward + slot.backward > 0 ? slot.total() / (slot.forward + slot.backward) : 1.0;
    const double fwd_pass = slot.forward * pass_scale, bwd_pass = slot.backward * pass_scale;
    const double v = par.schedule == plan::Schedule::kInterleaved ? std::max(1, par.vpp) : 1;
    double dp_exposed = 0;
    // A lone bucket with the embedding's tail exposes at most the whole collective.
    const auto exposed_with = [&](double t, double window, double chunks, double tail) {
      return cfg.opt.dp_overlap ? std::min(t, exposed(t, window, chunks) + tail) : t;
    };
    if (par.zero == 0) {
      const coll::Cost ar = both(Kind::kAllReduce, gb);
      dp_exposed = exposed_with(ar.time_s, bwd_pass, v, emb_tail());
      nvlink_bytes += ar.nvlink_bytes;
      nic_bytes += ar.nic_bytes;
    } else {
      const coll::Cost rs = both(Kind::kReduceScatter, gb);
      const double rs_emb = emb_tail();
      const coll::Cost ag = both(Kind::kAllGather, 2.0);
      const double ag_emb = emb_tail();
      // ZeRO-1 reduces once per iteration; ZeRO-2/3 keep only a gradient shard, so every
      // micro-batch's gradients are reduce-scattered; ZeRO-3 also gathers the weights for every
      // forward and backward pass.
      const double rs_times = par.zero >= 2 ? mb : 1.0;
      const double ag_times = par.zero >= 3 ? 2.0 * mb : 1.0;
      // ZeRO-3 gathers before every chunk's forward and backward, and everything queues on the
      // DP stream in issue order, as the Program runs it (one stream; one NCCL communicator
      // serializes them): a chunk pass's forward waits for its first bucket's gather, which
      // waits for the last bucket's reduce-scatter of the backward before it; the rest of the
      // forward's gathers and the backward's own (issued right after them, needed by nothing
      // until the backward: they may run on into it) and the backward's other reduce-scatters
      // run beside the forward and the backward, which the stream can fill no further than it
      // runs. Per micro-batch that is v chunk passes each way, in the Program's buckets
      // of a chunk (whole layers, at most one bucket per layer). Without DP overlap every pass
      // waits for all of its gathers, and the backward for its reduce-scatters. (Before
      // analytic-30 the stage was one pass each way with the bucket count of its parameters
      // alone, not clamped to its layers: with one layer per chunk a ZeRO-3 interleaved stage
      // read its DP all but hidden, up to 4 MFU points above the schedule.)
      const double ag_first = ag.time_s / chunk_buckets, rs_last = rs.time_s / chunk_buckets;
      const double w = (fwd_pass + bwd_pass) / v;  // one chunk's forward and backward
      const double z3 =
          cfg.opt.dp_overlap
              ? v * ((ag_first + rs_last) / v +
                     ComputeModel::concurrent(
                         w, (2.0 * ag.time_s + rs.time_s - ag_first - rs_last) / v,
                         c.comm_sm_share) -
                     w)
              : 2.0 * ag.time_s + rs.time_s;
      // ZeRO-2 with DP overlap: each micro-batch's reduce-scatters queue on the DP stream and
      // nothing of the next micro-batch waits for them (it keeps its parameters), so they run on
      // beside its forward and backward; only the last micro-batch's hide behind its own
      // backward alone. Per chunk step (one chunk's forward and backward, w, of which c is
      // compute) a reduction of r costs max(r − w, s·min(r·c/w, c/(1 − s))) when it runs on
      // beside the next (`beside` below; s·r until analytic-41); the last leaves its last bucket
      // and what outlasts its backward. (Until analytic-30 every micro-batch's reduction was
      // priced behind its own backward alone: TorchTitan's Llama 2 70B at TP 8, ZeRO-2 exposed
      // 4.1 s of DP where the executed schedule exposes 1.3.)
      const auto z2 = [&]() {
        if (!cfg.opt.dp_overlap) return mb * rs.time_s;
        const double steps = mb * v, r = rs.time_s / v;
        const double wb = bwd_pass / v, last_bucket = r / chunk_buckets;
        // What a reduction of `red` takes from a step of `window` whose compute is `compute`: its
        // share of the SMs while it runs beside compute, and only the step's compute slows, not
        // its exposed TP/CP/EP/PP waits: the reduction overlaps the compute for the compute's
        // share of its time, red · compute/window (the waits spread over the step), and at most
        // for the compute's whole slowed length, compute/(1 − s). (analytic-41: s · red, the
        // whole reduction beside compute, read 1.1 MFU points below the executed schedule on
        // TorchTitan's ZeRO-2 runs at NCCL's channels.)
        const double s = c.comm_sm_share;
        const auto beside = [&](double red, double compute, double window) {
          const double overlapped = window > 0 ? red * compute / window : 0.0;
          return s >= 1.0 ? overlapped : s * std::min(overlapped, compute / (1.0 - s));
        };
        const double cw = (slot.forward + slot.backward) / v, cwb = slot.backward / v;
        const double rest = r - last_bucket;
        const double last = last_bucket + std::max(rest - wb, beside(rest, cwb, wb));
        // The priced stage runs its last backward passes without a forward between them (its
        // drain: as many chunk steps as its warm-up, at most all of them), where a reduction
        // runs beside one chunk's backward alone: the first stage's p − 1, or 2(p − 1) +
        // (v − 1)·p interleaved; the last stage's none, or (v − 1)·p (its reductions end p − 1
        // backward steps before the first stage's, in the other stages' drain).
        const bool interleaved = par.schedule == plan::Schedule::kInterleaved;
        const double warmup = first_heavier ? (interleaved ? 2.0 * (par.pp - 1) + (v - 1) * par.pp
                                                           : par.pp - 1.0)
                                            : (interleaved ? (v - 1) * par.pp : 0.0);
        // GPipe runs every backward after every forward: each reduction but the last runs beside
        // the next micro-batch's backward alone (until analytic-35 it took the 1F1B drain, and a
        // ZeRO-2 GPipe run read its DP exposure at a quarter of the schedule's).
        const double drain =
            par.schedule == plan::Schedule::kGpipe ? steps - 1 : std::min(steps - 1, warmup);
        return (steps - 1 - drain) * std::max(r - w, beside(r, cw, w)) +
               drain * std::max(r - wb, beside(r, cwb, wb)) + last;
      };
      // The embedding's tail: ZeRO-1/2 the iteration's last reduce-scatter and its first
      // gather. (ZeRO-3's chain above prices every pass's first gather and last reduce-scatter
      // with equal buckets; the embedding's share is not added to it: over 106 fuzzed ZeRO-3
      // configurations it took more of them away from the executed schedule than toward it.)
      dp_exposed = par.zero >= 3
                       ? mb * z3
                   : par.zero == 2
                       ? std::min(mb * rs.time_s, z2() + rs_emb) +
                             exposed_with(ag.time_s, fwd_pass, v, ag_emb)
                       : exposed_with(rs.time_s, bwd_pass, v, rs_emb) +
                             exposed_with(ag.time_s, fwd_pass, v, ag_emb);
      // Before the first forward: with DP overlap its chunk's first bucket (ZeRO-3: ag_first
      // is a bucket of every chunk), without it the whole gather of the distributed optimizer's
      // step. ZeRO-3 without DP overlap gathers on demand, once the forward is called on the
      // loaded batch: nothing runs during the loader's stall (analytic-38; until then the first
      // chunk's gather was taken as hidden by it, as the Program ran it until program-34).
      first_gather_s =
          cfg.opt.dp_overlap
              ? (par.zero >= 3 ? ag_first / v
                               : std::min(ag.time_s, ag.time_s / v /
                                                         std::max(1.0, std::ceil(sp.total() / v /
                                                                                 bucket)) +
                                                     ag_emb))
              : (par.zero >= 3 ? 0.0 : ag.time_s);
      nvlink_bytes += rs_times * rs.nvlink_bytes + ag_times * ag.nvlink_bytes;
      nic_bytes += rs_times * rs.nic_bytes + ag_times * ag.nic_bytes;
    }
    bd.exposed_dp_s = dp_exposed;
    // With DP overlap at ZeRO 0/1 each stage reduces (and first scales or copies in) its
    // gradients in the last micro-batch's backward, which the pipeline's drain runs through
    // stage by stage, as the Program runs them (a chunk's send follows its backward's compute).
    // The priced (slowest) stage's own passes are in its compute. The chain ends on stage 0:
    // the stages before the priced one wait for it and add their passes whole; a stage after
    // it (earlier in the chain) holds the priced stage back only by what its slack behind it
    // (the difference of their slots) does not absorb: all of it on even stages, none on a
    // light last stage. (Program: a chunk's send follows its backward's compute.)
    if (cfg.opt.dp_overlap && par.zero <= 1 && par.pp > 1 &&
        (cfg.opt.grad_scale_pass || cfg.opt.fsdp_copy_in)) {
      // The priced stage: the first, the last, or the first middle one of the most layers.
      int priced = &slot == &first ? 0 : &slot == &last ? par.pp - 1 : 1;
      if (&slot == &middle) {
        while (priced < par.pp - 2 && L.stage_layers[static_cast<std::size_t>(priced)] != n_middle) {
          ++priced;
        }
      }
      double later = 0;
      int seen_layers = -1, seen_moe = -1;
      double seen = 0;  // a middle stage's passes (those of equal layer and MoE-layer counts)
      for (int st = 0; st < par.pp; ++st) {
        const int layers = L.stage_layers[static_cast<std::size_t>(st)];
        const bool end = st == 0 || st == par.pp - 1;
        if (st == priced) continue;
        const int moe = plan::moe_layers_of_stage(m, L, st);
        double s = 0;
        if (!end && layers == seen_layers && moe == seen_moe) {
          s = seen;
        } else {
          const plan::StageParams sp_st =
              plan::stage_parameters(m, pc, L, st == 0, st == par.pp - 1, layers, moe);
          s = c.pre_reduce(sp_st.dense, sp_st.expert);
          if (!end) seen_layers = layers, seen_moe = moe, seen = s;
        }
        const double t = st == 0 ? first.total()
                         : st == par.pp - 1 ? last.total()
                         : n_middle > 0 ? middle.total() * layers / n_middle : 0.0;
        later += st < priced ? s * L.microbatches
                                : std::max(0.0, s * L.microbatches - (slot.total() - t));
      }
      // (The slot already holds each stage's per-micro-batch share: 1/m of the passes.)
      bd.pipeline_bubble_s += later * (L.microbatches - 1) / L.microbatches;
    }
  }

  // Optimizer step, memory-bound over this GPU's parameter shard (ComputeModel::optimizer).
  // ZeRO shards dense parameters over DP (or DP·CP) and expert parameters over the ranks that
  // hold the same experts, DP (or DP·CP) / EP, as plan::memory_per_gpu counts them.
  {
    const double shard = par.zero >= 1 ? par.zero_group() : 1.0;
    const double eshard = par.zero >= 1 ? std::max(1.0, shard / par.ep) : 1.0;
    const auto updated = [&](const plan::StageParams& sp) {
      return sp.dense / shard + sp.expert / eshard;
    };
    const bool lamb = cfg.training.optimizer == plan::Optimizer::kLamb;
    // The gradient buffer's memset on the compute stream (framework.zero_grad_buffer; the
    // Program's `zero_grad` op after the update): the stage's whole buffer in the reduce
    // dtype, its shard at ZeRO-2/3, one memset per model chunk.
    const double gshard = par.zero >= 2 ? shard : 1.0, geshard = par.zero >= 2 ? eshard : 1.0;
    const double chunks = par.schedule == plan::Schedule::kInterleaved ? std::max(1, par.vpp) : 1;
    const auto step = [&](const plan::StageParams& sp) {
      double t = c.cm.optimizer(updated(sp), lamb);
      if (cfg.opt.zero_grad_buffer) {
        t += c.cm.zero_fill((sp.dense / gshard + sp.expert / geshard) *
                                bytes_per_element(cfg.training.grad_reduce),
                            static_cast<int>(chunks));
      }
      return t;
    };
    bd.optimizer_s = std::max(step(sp_first), step(sp_last));
  }
  bd.data_loading_s = cfg.opt.async_data_pipeline ? 0.0 : prof.data_loading_s;
  // A synchronous loader stalls the host at the start of the iteration, while the GPU runs what
  // was issued before it: the parameter gather of the distributed optimizer (or ZeRO-3), which
  // the step (Megatron-Core: its first bucket, at the end of step()) or the stage's prefetch
  // issued. The first forward waits for both, so the two overlap and the gather shows only
  // where it outlasts the stall, as the Program runs them (data loading on the compute stream,
  // the gathers on the DP stream, the forward after both).
  if (bd.data_loading_s > 0 && first_gather_s > 0) {
    bd.exposed_dp_s -= std::min({bd.data_loading_s, first_gather_s, bd.exposed_dp_s});
  }

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
  r.parameters = pc.total;
  r.model_flops_per_iteration = model::model_flops_per_token(m) * tokens;
  r.hardware_flops_per_iteration =
      model::hardware_flops_per_token(m, cfg.training.recompute, cfg.opt.fused_attention()) * tokens;
  if (cfg.training.recompute == model::Recompute::kFull && cfg.training.recompute_layers > 0) {
    // Block recompute re-runs the forward of recompute_layers of each model chunk's layers.
    const double share =
        std::min(1.0, static_cast<double>(plan::recomputed_layers_per_stage(par, cfg.training)) /
                          std::max(1, L.layers_max_stage));
    r.hardware_flops_per_iteration =
        r.model_flops_per_iteration +
        share * (r.hardware_flops_per_iteration - r.model_flops_per_iteration);
  }
  set_rates(cfg, r);

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
  // Each collective is priced on idle links (docs/analytic-model.md §8): where the dimensions'
  // collectives together need more than a link carries in the iteration (ZeRO-3 gathers beside
  // CP rings on the NICs), the iteration is shorter than the bytes allow. Said, with the flow
  // fidelity as the answer (it shares the links).
  for (const auto& [name, utilization] :
       {std::pair<const char*, double>{"NIC", ns.nic_utilization}, {"NVLink", ns.nvlink_utilization}}) {
    if (utilization > 1) {
      r.notes.push_back(fmt::format(
          "{} utilization {:.2f} is above 1: the collectives of the parallel dimensions move more "
          "bytes per GPU than its {} carry in the {:.3f} s iteration, each priced as if alone "
          "on them, so the iteration is optimistic here; --fidelity flow shares the links",
          name, utilization, name == std::string("NIC") ? "NICs" : "NVLink", r.iteration_time_s));
    }
  }

  if (cfg.training.cpu_offload_layers > 0) {
    r.notes.push_back(fmt::format(
        "activation offloading: {} of {} layers' activations ({:.2f} GiB per micro-batch) to "
        "host memory and back over {:.0f} GB/s each way; the compute stream waits {:.3f} s for "
        "the copies per iteration (in compute)",
        std::min(cfg.training.cpu_offload_layers, std::max(0, L.layers_first_stage - 1)),
        L.layers_first_stage, r.memory.host_offload_bytes / kGiB / std::max(1.0, r.memory.in_flight_microbatches),
        cfg.cluster.gpu.host_link_Bps / 1e9, r.offload_stall_s));
  }
  if (L.layers_first_stage != L.layers_last_stage) {
    r.notes.push_back(fmt::format("uneven pipeline: {} layers on the first stage, {} on the last",
                                  L.layers_first_stage, L.layers_last_stage));
  }
  // The 2022 Triton kernel runs far below the fused rates a profile usually holds (cuDNN's,
  // FlashAttention-2's): a profile without a rate of its own for it prices it optimistically.
  if (cfg.opt.attention_kernel == model::AttentionKernel::kTriton &&
      !cfg.profile.attention_by_kernel.contains("triton")) {
    r.notes.push_back(fmt::format(
        "attention kernel triton: profile `{}` has no rate of its own for it "
        "(compute.attention_by_kernel), so it runs at the profile's fused-attention rates "
        "({:.3f} / {:.3f}), likely optimistic (calibrate/profiles/README.md)",
        cfg.profile.name, cfg.profile.attention_fwd_efficiency,
        cfg.profile.attention_bwd_efficiency));
  }
  r.notes.push_back(fmt::format(
      "analytic fidelity: no link contention or ECMP collisions (use flow fidelity for those); "
      "slowest stage per micro-batch {:.3f} ms",
      slot.total() * 1e3));
  return true;
}

void set_rates(const RunConfig& cfg, Result& r) {
  const double tokens = static_cast<double>(cfg.training.global_batch) * cfg.model.seq_len;
  r.tokens_per_s = tokens / r.iteration_time_s;
  const double gpu_seconds = r.iteration_time_s * cfg.cluster.gpus;
  r.tflops_per_gpu = r.model_flops_per_iteration / gpu_seconds / kTera;
  r.hw_tflops_per_gpu = r.hardware_flops_per_iteration / gpu_seconds / kTera;
  r.mfu = r.model_flops_per_iteration / (gpu_seconds * r.peak_flops_per_gpu);
  r.hfu = r.hardware_flops_per_iteration / (gpu_seconds * r.peak_flops_per_gpu);
  // Above the rate the profile's GEMMs reach, MFU is counting work no kernel runs: the whole
  // s×s attention matrix (Megatron's convention, §1) where a causal kernel skips the masked
  // tiles. Said where it happens (long sequences), with the two shares.
  if (r.mfu > cfg.profile.gemm_peak_efficiency && cfg.opt.fused_attention() &&
      cfg.model.seq_len > 0) {
    const model::ForwardFlops f = model::forward_flops_per_token(cfg.model);
    const double counted = f.total() > 0 ? f.attention / f.total() : 0.0;
    const double executed =
        model::executed_keys_per_query(cfg.model, cfg.opt.attention_kernel) / cfg.model.seq_len;
    r.notes.push_back(fmt::format(
        "MFU {:.1f} % is above the {:.1f} % of peak this profile's GEMMs reach: the model FLOPs "
        "count the whole s×s attention matrix (Megatron's convention), {:.0f} % of them at {} "
        "tokens, while the causal kernel computes {:.0f} % of those scores (HFU counts them the "
        "same way)",
        100 * r.mfu, 100 * cfg.profile.gemm_peak_efficiency, 100 * counted, cfg.model.seq_len,
        100 * executed));
  }
}

Result run_analytic(const RunConfig& cfg, const AnalyticOptions& options) {
  Result r;
  plan::Infeasibility why;
  if (!try_run_analytic(cfg, options, r, why)) {
    throw_infeasible(std::move(why.message), {"", 0, why.field}, std::move(why.hint));
  }
  return r;
}

}  // namespace trainsim::exec
