// How long a compute op takes on one GPU, from the calibration profile (DESIGN.md §4, "Compute
// time"). Shared by every fidelity so that the analytic formula and the Program executor price
// the very same op the same way (docs/analytic-model.md derives each term).
#pragma once

#include "calibrate/profile.h"
#include "sim/model/ops.h"

namespace trainsim::exec {

struct ComputeModel {
  const calib::Profile& prof;
  double gemm_peak;  // FLOP/s of the GEMM datatype
  double peak16;     // FLOP/s of 16-bit tensor cores (attention)
  double hbm_Bps;

  double gemm_eff(double m, double n, double k) const {
    const double d0 = prof.gemm_half_dim;
    return prof.gemm_peak_efficiency * (m / (m + d0)) * (n / (n + d0)) * (k / (k + d0));
  }
  double gemm_time(double m, double n, double k, double batch, double peak) const {
    return 2.0 * m * n * k * batch / (peak * gemm_eff(m, n, k));
  }
  double forward(const model::Op& op) const {
    const double launch = prof.kernel_overhead_s * op.kernels;
    switch (op.kind) {
      case model::OpKind::kGemm: {
        const bool batched = op.batch > 1;  // attention's batched GEMMs stay 16-bit
        return launch + gemm_time(op.m, op.n, op.k, op.batch, batched ? peak16 : gemm_peak);
      }
      case model::OpKind::kAttention:
        return launch + op.flops / (peak16 * prof.attention_fwd_efficiency);
      case model::OpKind::kMemory:
        return launch + op.bytes / (hbm_Bps * prof.memory_bw_efficiency);
    }
    return launch;
  }
  // Backward: a GEMM becomes the input-gradient GEMM (m, k, n) and the weight-gradient GEMM
  // (k, n, m); attention runs its backward kernel (2× the forward FLOPs, recomputing scores);
  // element-wise ops read the saved input and the incoming gradient and write one: 2× the bytes.
  double backward(const model::Op& op) const {
    const double launch = prof.kernel_overhead_s * op.kernels;
    switch (op.kind) {
      case model::OpKind::kGemm: {
        const double peak = op.batch > 1 ? peak16 : gemm_peak;
        return 2 * launch + gemm_time(op.m, op.k, op.n, op.batch, peak) +
               gemm_time(op.k, op.n, op.m, op.batch, peak);
      }
      case model::OpKind::kAttention:
        return launch + 2.0 * op.flops / (peak16 * prof.attention_bwd_efficiency);
      case model::OpKind::kMemory:
        return launch + 2.0 * op.bytes / (hbm_Bps * prof.memory_bw_efficiency);
    }
    return launch;
  }
  // TP overlap (MegaScale §3.2; Transformer Engine's ring-exchange and pipelined userbuffers
  // overlap) hides a TP collective by splitting the GEMM beside it into `chunks` GEMMs of m/chunks
  // rows, one kernel each, so that chunk i computes while chunk i±1 communicates. The split GEMMs
  // are thinner, so they run at the efficiency surface's value for m/chunks rows. Forward: the
  // whole GEMM is split. Backward: the input-gradient GEMM (m, k, n) is split (it is the one the
  // gathered output gradient feeds); the weight-gradient GEMM (k, n, m) runs whole. Ops other than
  // unbatched GEMMs are not split.
  double forward_split(const model::Op& op, int chunks) const {
    if (op.kind != model::OpKind::kGemm || op.batch > 1 || chunks <= 1) return forward(op);
    const double c = chunks;
    return c * (prof.kernel_overhead_s * op.kernels +
                gemm_time(op.m / c, op.n, op.k, 1, gemm_peak));
  }
  double backward_split(const model::Op& op, int chunks) const {
    if (op.kind != model::OpKind::kGemm || op.batch > 1 || chunks <= 1) return backward(op);
    const double c = chunks;
    const double launch = prof.kernel_overhead_s * op.kernels;
    return (c + 1) * launch + c * gemm_time(op.m / c, op.k, op.n, 1, gemm_peak) +
           gemm_time(op.k, op.n, op.m, 1, gemm_peak);
  }
  /// Optimizer step over `params` parameters (memory-bound): Adam reads and writes the fp32
  /// master weights and both moments (24 B), reads the fp32 gradient (4 B), writes the 16-bit
  /// weights (2 B), and gradient clipping reads the gradients once more (4 B); LAMB adds the
  /// per-tensor weight and update norms (another 8 B). Ten kernel launches.
  double optimizer(double params, bool lamb) const {
    const double bytes_per_param = lamb ? 42.0 : 34.0;
    return params * bytes_per_param / (hbm_Bps * prof.memory_bw_efficiency) +
           10 * prof.kernel_overhead_s;
  }
};

}  // namespace trainsim::exec
