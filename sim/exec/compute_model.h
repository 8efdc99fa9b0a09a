// How long a compute op takes on one GPU, from the calibration profile (DESIGN.md §4, "Compute
// time"). Shared by every fidelity so that the analytic formula and the Program executor price
// the very same op the same way (docs/analytic-model.md derives each term).
#pragma once

#include <algorithm>
#include <cstring>
#include <string_view>

#include "calibrate/profile.h"
#include "sim/core/units.h"
#include "sim/model/ops.h"
#include "sim/plan/config.h"

namespace trainsim::exec {

/// NCCL's collective channels on a GPU's server where the calibration profile does not say: 24,
/// its count on the 8-GPU NVSwitch servers of A100 and H100 (NCCL_DEBUG=INFO logs: HGX A100,
/// NVIDIA/nccl-tests#100; H100, where a maintainer ties it to the GPU's 18 NVLinks,
/// NVIDIA/nccl#1429). Each channel is one thread block, so a large collective holds that many
/// SMs while it transfers; no framework modelled here caps them (Megatron-LM's
/// nccl_communicator_config_path unset, NeMo, Composer, TorchTitan outside its deterministic
/// mode). Until analytic-41 every collective held 8, read from NCCL_MIN_CTAS=8 in a partner's
/// MLPerf Training v4.0 configuration, but that variable is only a floor (src/graph/connect.cc).
/// Cross-check: compute beside NCCL collectives slows 18.9 % on average on A100 and H100
/// (arXiv 2507.03114), where 24 of 108 and of 132 SMs are 22 % and 18 %.
inline constexpr int kDefaultNcclChannels = 24;
/// NCCL's channels for a collective whose ring crosses servers: its inter-node ring search finds
/// about one ring per NIC (a channel's bandwidth is capped by its GPU's path to the NIC) and NCCL
/// doubles the rings it found (ncclTopoPostset, src/graph/connect.cc: nChannels · 2), so 2 a NIC,
/// at most the server's own count: 16 on 8-NIC A100 and H100 servers (H100 logs: 16 channels
/// on two servers, NVIDIA/nccl-tests#319, NCCL 2.26; on three, NVIDIA/nccl#1453). Not modelled:
/// Hopper's second doubling below 16 channels where NVLink is fast (NCCL ≥ 2.18.1, servers of
/// fewer than 8 NICs).
inline int nccl_network_channels(int server_channels, int nics_per_node) {
  return std::min(server_channels, 2 * std::max(1, nics_per_node));
}
/// Where a collective's members sit: inside one server, or across servers (its group spans
/// more than one), and the servers' NICs.
struct CommSpan {
  bool across_servers = false;
  int nics_per_node = 8;
};
/// The SMs an NCCL collective holds while it transfers: collectives.comm_sms where set, else the
/// profile's collectives.nccl_channels (kDefaultNcclChannels where it has none) inside a server,
/// nccl_network_channels of it across servers.
inline int nccl_sms(const plan::Optimizations& opt, const calib::Profile& prof, CommSpan span) {
  if (opt.comm_sms > 0) return opt.comm_sms;
  const int server = prof.nccl_channels > 0 ? prof.nccl_channels : kDefaultNcclChannels;
  return span.across_servers ? nccl_network_channels(server, span.nics_per_node) : server;
}
/// The SMs a TP collective holds: under optimizations.tp_overlap the framework's overlap kernels
/// (framework.tp_overlap_sms: Transformer Engine's userbuffers are not NCCL), else (or where the
/// key is 0) an NCCL collective's.
inline int tp_comm_sms(const plan::Optimizations& opt, const calib::Profile& prof, CommSpan span) {
  return opt.tp_overlap && opt.tp_overlap_sms > 0 ? opt.tp_overlap_sms
                                                  : nccl_sms(opt, prof, span);
}
/// The SMs a decomposed TP overlap's all-gather holds where the framework has its own overlap
/// kernels (framework.tp_overlap_sms set): Transformer Engine's ring exchange, which feeds the
/// GEMM after it piece by piece (qkv_fprop and fc1_fprop forward, the row-parallel layers'
/// input-gradient GEMMs backward), moves its pieces by the copy engine and signals them with a
/// one-thread kernel, one SM at most (TE module/base.py initialize_ub: ring_exchange num_sm 1 in
/// TE 1.9–1.13; no SM margin for it from TE 2.0). Elsewhere a TP collective's tp_comm_sms.
inline constexpr int kRingExchangeSms = 1;
inline int tp_ring_sms(const plan::Optimizations& opt, const calib::Profile& prof, CommSpan span) {
  return opt.tp_overlap && opt.tp_overlap_decomposed && opt.tp_overlap_sms > 0
             ? kRingExchangeSms
             : tp_comm_sms(opt, prof, span);
}
/// A count of SMs as a share of the GPU's, at most all of them (a described GPU of fewer SMs than
/// NCCL's channels: overlapping then costs what running in turn does); 0 where the GPU's SM count
/// is unknown (no slowdown is priced).
inline double sm_share(int held, int gpu_sms) {
  return gpu_sms > 0 ? std::min(1.0, static_cast<double>(held) / gpu_sms) : 0.0;
}

struct ComputeModel {
  const calib::Profile& prof;
  double gemm_peak;  // FLOP/s of the GEMM datatype
  double peak16;     // FLOP/s of 16-bit tensor cores (attention)
  double hbm_Bps;
  // fp8 training: GEMMs (not keep_16bit, batch 1) cast their input and output gradient first.
  bool fp8 = false;
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;

  double gemm_eff(double m, double n, double k) const {
    const double d0 = prof.gemm_half_dim;
    return prof.gemm_peak_efficiency * (m / (m + d0)) * (n / (n + d0)) * (k / (k + d0));
  }
  double gemm_time(double m, double n, double k, double batch, double peak) const {
    return 2.0 * m * n * k * batch / (peak * gemm_eff(m, n, k));
  }
  /// Fixed cost of an op's kernels: a GEMM's own (Profile::gemm_launch_s) or a kernel's.
  double launch(const model::Op& op) const {
    return (op.kind == model::OpKind::kGemm ? prof.gemm_launch_s() : prof.kernel_overhead_s) *
           op.kernels;
  }
  /// The same for the op's backward (Op::backward_kernels where set).
  double launch_backward(const model::Op& op) const {
    if (op.backward_kernels < 0) return launch(op);
    return (op.kind == model::OpKind::kGemm ? prof.gemm_launch_s() : prof.kernel_overhead_s) *
           op.backward_kernels;
  }
  /// Whether `op` runs as an fp8 GEMM (attention's batched GEMMs, the output layer and the
  /// router stay 16-bit).
  bool fp8_gemm(const model::Op& op) const {
    return fp8 && model::fp8_capable(op);
  }
  /// Time to cast `elements` bf16 values to fp8 in both layouts (row-wise for one GEMM, transposed
  /// for the weight gradient, as Hopper's fp8 GEMMs take only the TN layout), per Transformer
  /// Engine's kernels (transformer_engine/pytorch/csrc/extensions: cast, normalization,
  /// activation). Delayed scaling knows the scale before the tensor exists: a norm, an activation
  /// or its backward (`fused`) writes the fp8 copies in place of its 16-bit output, at no extra
  /// traffic; any other tensor takes one cast-transpose kernel, reading 2 B and writing 1 + 1 B
  /// an element. Current scaling needs the tensor's own amax first: the fused producer writes
  /// its 16-bit output and the amax, then a quantize kernel reads it and writes both copies
  /// (4 B, one kernel); any other tensor is read once more for its amax (6 B, two kernels).
  /// The per-tensor amax all-reduce across TP (a few bytes) is not charged, nor, under delayed
  /// scaling, the separate transpose TE 1.x runs on a norm's or an activation's fp8 output for
  /// the weight gradient (read 1 B, write 1 B an element; TE 2.x writes both copies at once).
  double fp8_cast_time(double elements, bool fused) const {
    if (elements <= 0) return 0;
    const bool current = fp8_recipe == Fp8Recipe::kCurrent;
    const double bytes_per_element = current ? (fused ? 4.0 : 6.0) : (fused ? 0.0 : 4.0);
    const int kernels = current ? (fused ? 1 : 2) : (fused ? 0 : 1);
    if (kernels == 0) return 0;
    return elements * bytes_per_element / (hbm_Bps * prof.memory_efficiency("fp8_cast")) +
           kernels * prof.kernel_overhead_s;
  }
  /// The casts before an fp8 GEMM's forward (its input) and before its backward (its output
  /// gradient, which both backward GEMMs read); 0 for a 16-bit op.
  double forward_cast(const model::Op& op) const {
    return fp8_gemm(op) ? fp8_cast_time(op.fp8_in_elements, op.fp8_in_fused) : 0.0;
  }
  double backward_cast(const model::Op& op) const {
    return fp8_gemm(op) ? fp8_cast_time(op.fp8_grad_elements, op.fp8_grad_fused) : 0.0;
  }
  double forward(const model::Op& op) const {
    const double launch = this->launch(op);
    switch (op.kind) {
      case model::OpKind::kGemm: {
        // Attention's batched GEMMs and the output layer stay 16-bit under fp8.
        return launch + forward_cast(op) +
               gemm_time(op.m, op.n, op.k, op.batch, model::runs_16bit(op) ? peak16 : gemm_peak);
      }
      case model::OpKind::kAttention:
        // The keys each query computes in one call (op.n: masked tiles skipped, one ring step's
        // under context parallelism) set how far below its plateau the kernel runs
        // (Profile::attention_fwd_overhead_keys), and its head dimension (op.k) which curve.
        return launch + op.flops / (peak16 * prof.attention_rate(op.kernel).fwd_at(op.n, op.k));
      case model::OpKind::kMemory:
        return launch + op.bytes / (hbm_Bps * prof.memory_efficiency(op.kernel));
    }
    return launch;
  }
  // Backward: a GEMM becomes the input-gradient GEMM (m, k, n) and the weight-gradient GEMM
  // (k, n, m); attention runs its backward kernel (2× the forward FLOPs, recomputing scores);
  // element-wise ops read the saved input and the incoming gradient and write one: 2× the bytes.
  double backward(const model::Op& op) const {
    const double launch = this->launch(op);
    switch (op.kind) {
      case model::OpKind::kGemm: {
        const double peak = model::runs_16bit(op) ? peak16 : gemm_peak;
        return 2 * launch + backward_cast(op) + gemm_time(op.m, op.k, op.n, op.batch, peak) +
               gemm_time(op.k, op.n, op.m, op.batch, peak);
      }
      case model::OpKind::kAttention:
        return launch + 2.0 * op.flops / (peak16 * prof.attention_rate(op.kernel).bwd_at(op.n, op.k));
      case model::OpKind::kMemory:
        return launch_backward(op) + memory_backward(op);
    }
    return launch;
  }
  // A memory-bound op's backward: where the profile measured the kind's dedicated backward
  // kernel (`<kind>_bwd`, `calibrate kernels`), that kernel's bytes at its efficiency
  // (model::memory_backward_byte_ratio); otherwise the op's own backward bytes where it states
  // them (cross-entropy, the MoE permutations), else twice the forward bytes, at the forward's
  // efficiency.
  double memory_backward(const model::Op& op) const {
    if (!prof.memory_bw_efficiency_by_kind.empty()) {
      const double ratio = model::memory_backward_byte_ratio(op.kernel);
      if (ratio > 0) {
        // "<kind>_bwd" without a heap allocation (the map takes string_view keys).
        char name[64];
        const std::size_t len = std::strlen(op.kernel);
        const std::size_t n = std::min(len, sizeof name - 5);
        std::memcpy(name, op.kernel, n);
        std::memcpy(name + n, "_bwd", 4);
        const auto it = prof.memory_bw_efficiency_by_kind.find(std::string_view(name, n + 4));
        if (it != prof.memory_bw_efficiency_by_kind.end()) {
          return ratio * op.bytes / (hbm_Bps * it->second);
        }
      }
    }
    const double bytes = op.backward_bytes >= 0 ? op.backward_bytes : 2.0 * op.bytes;
    return bytes / (hbm_Bps * prof.memory_efficiency(op.kernel));
  }
  // TP overlap (MegaScale §3.2; Transformer Engine's userbuffers) runs the collective next to a
  // GEMM as concurrent kernels. A decomposed overlap splits the GEMM into `chunks` pieces that run
  // back-to-back on the compute stream, each feeding (or fed by) a piece of the collective: the
  // pieces add launches, while the tile under-fill that the surface's m/(m+d0) term prices for a
  // lone GEMM happens once, at the pipeline's tail, so the GEMM keeps its whole-shape rate.
  /// A share (0..1) of the op's forward run again by recompute: its launch and that share of the
  /// rest (the whole op's rate), as the Program prices a compute task's fraction; a GEMM split
  /// into `chunks` TP-overlap pieces pays a launch per piece (forward_split).
  double forward_share(const model::Op& op, double share, int chunks = 1) const {
    if (share <= 0) return 0.0;
    const bool split = op.kind == model::OpKind::kGemm && op.batch <= 1 && chunks > 1;
    if (share >= 1) return split ? forward_split(op, chunks) : forward(op);
    const double launch = this->launch(op);
    return (split ? chunks : 1) * launch + (forward(op) - launch) * share;
  }
  double forward_split(const model::Op& op, int chunks) const {
    if (op.kind != model::OpKind::kGemm || op.batch > 1 || chunks <= 1) return forward(op);
    return forward(op) + (chunks - 1) * launch(op);
  }
  double backward_split(const model::Op& op, int chunks) const {
    if (op.kind != model::OpKind::kGemm || op.batch > 1 || chunks <= 1) return backward(op);
    return backward(op) + (chunks - 1) * launch(op);
  }
  /// Time a computation of `t_compute` and a communication of `t_comm` take when they run as
  /// concurrent kernels: the communication kernels hold `sm_share` of the SMs while they run
  /// (NCCL and userbuffers run one thread block per channel), so the computation progresses at
  /// (1 − sm_share) of its rate meanwhile. The pair ends when the later of the two ends:
  /// max(t_compute + sm_share · t_comm, t_comm) when the communication is the shorter.
  static double concurrent(double t_compute, double t_comm, double sm_share) {
    // Overlapped, the computation runs at (1 − sm_share) of its rate: if it outlasts the
    // communication it ends at t_compute + sm_share·t_comm, otherwise the pair ends with the
    // communication.
    return std::max(t_comm, t_compute + sm_share * t_comm);
  }
  /// Exposed time of a data-parallel reduction (or parameter gather) of `t` overlapped with the
  /// pass it follows (precedes): `window` is one micro-batch's pass of the whole stage, `chunks`
  /// the model chunks of an interleaved stage (1 otherwise), `buckets` the gradient buckets of
  /// one chunk (Megatron fills buckets chunk by chunk), `pp` the pipeline depth, `sm_share` the
  /// SMs a collective holds.
  ///
  /// Each chunk's share r = t/chunks is reduced as soon as that chunk's last backward ends (and
  /// gathered before its first forward): Megatron-Core runs a model chunk's grad-sync when its
  /// last micro-batch's backward is done, and MegaScale (NSDI'24 §3.2) leaves only the first
  /// chunk's all-gather and the last chunk's reduce-scatter on the critical path. In the last
  /// round an interleaved stage runs chunk v−1's backward for `pp` micro-batches, then chunk
  /// v−2's, ..., so the chunks' reductions start pp·w apart (w = window/chunks, one chunk's pass
  /// of one micro-batch). The last chunk's reduction is exposed as a lone one: all but its last
  /// bucket runs beside its own pass as concurrent kernels (`concurrent`). The others hide
  /// behind the chunks that follow, queueing when r > pp·w, and slow that compute by the SMs
  /// they hold. With one chunk this is the lone formula.
  static double chunked_overlap(double t, double window, double chunks, double buckets, int pp,
                                double sm_share) {
    const double r = t / chunks, w = window / chunks;
    const double hidden_part = r - r / buckets;
    const double last = r / buckets + concurrent(w, hidden_part, sm_share) - w;
    const double queued = (chunks - 1) * std::max(0.0, r - pp * w);
    const double beside = (chunks - 1) * r - queued;
    return last + queued + sm_share * beside;
  }
  /// Summing one micro-batch's weight gradients into the accumulator, unless the weight-gradient
  /// GEMM does it (plan::GradAccumulation): `params` parameters, `bytes_per_param` of HBM traffic
  /// (plan::grad_accumulation_bytes_per_param), one kernel per parameter tensor.
  double grad_accumulate(double params, double bytes_per_param, int tensors) const {
    if (bytes_per_param <= 0 || params <= 0) return 0.0;
    return params * bytes_per_param / (hbm_Bps * prof.memory_efficiency("grad_accumulate")) +
           tensors * prof.kernel_overhead_s;
  }
  /// A memset of `bytes` in `kernels` launches (the gradient buffer's zeroing), at the copy
  /// kernel's efficiency, as the Program's `zero_grad` op is priced (kind "copy").
  double zero_fill(double bytes, int kernels) const {
    return bytes / (hbm_Bps * prof.memory_efficiency("copy")) + kernels * prof.kernel_overhead_s;
  }
  /// Optimizer step over `params` parameters (memory-bound, model::optimizer_bytes_per_param).
  /// Ten kernel launches.
  double optimizer(double params, bool lamb) const {
    const double bytes_per_param = model::optimizer_bytes_per_param(lamb);
    return params * bytes_per_param / (hbm_Bps * prof.memory_efficiency(lamb ? "lamb" : "adam")) +
           10 * prof.kernel_overhead_s;
  }
};

}  // namespace trainsim::exec
