#include "sim/exec/task_time.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "sim/core/error.h"
#include "sim/core/units.h"
#include "sim/exec/compute_model.h"
#include "sim/exec/offload.h"

namespace trainsim::exec {

namespace {

// Activation offloading (pipeline parallelism 1): each micro-batch's stalls for the copies to
// host and back (exec::offload_stalls, as the analytic fidelity prices them), on its layers'
// compute tasks as priced; the forward stall lengthens the micro-batch's last forward task, the
// backward stall its last backward task.
void add_offload_stalls(const RunConfig& cfg, const plan::Program& P, std::vector<std::int64_t>& out) {
  const int n = cfg.training.cpu_offload_layers;
  const int layers = cfg.model.layers;
  if (n <= 0 || cfg.parallel.pp != 1 || cfg.cluster.gpu.host_link_Bps <= 0) return;
  int mbs = 0;
  for (const plan::Task& t : P.tasks) mbs = std::max(mbs, t.microbatch + 1);
  const std::size_t L = static_cast<std::size_t>(layers);
  std::vector<double> f(static_cast<std::size_t>(mbs) * L, 0.0), b(f.size(), 0.0);
  std::vector<std::size_t> last_fwd(static_cast<std::size_t>(mbs), P.tasks.size()),
      last_bwd(static_cast<std::size_t>(mbs), P.tasks.size());
  for (std::size_t ti = 0; ti < P.tasks.size(); ++ti) {
    const plan::Task& t = P.tasks[ti];
    if (t.type != plan::TaskType::kCompute || t.microbatch < 0) continue;
    const auto mb = static_cast<std::size_t>(t.microbatch);
    const bool fwd = t.pass == plan::Pass::kForward;
    const bool bwd = t.pass == plan::Pass::kBackward;
    if (!fwd && !bwd) continue;
    if (t.layer >= 0 && t.layer < layers) {
      (fwd ? f : b)[mb * L + static_cast<std::size_t>(t.layer)] += TimePs{out[ti]}.seconds();
    }
    (fwd ? last_fwd : last_bwd)[mb] = ti;
  }
  const double copy_s = offload_copy_seconds(cfg);
  for (std::size_t mb = 0; mb < static_cast<std::size_t>(mbs); ++mb) {
    const OffloadStalls st =
        offload_stalls(std::span<const double>(f).subspan(mb * L, L),
                       std::span<const double>(b).subspan(mb * L, L), n, copy_s);
    if (last_fwd[mb] < out.size()) out[last_fwd[mb]] += TimePs::from_seconds(st.forward).ps;
    if (last_bwd[mb] < out.size()) out[last_bwd[mb]] += TimePs::from_seconds(st.backward).ps;
  }
}

}  // namespace

std::vector<std::int64_t> compute_durations_ps(const RunConfig& cfg, const plan::Program& P) {
  using plan::Part;
  using plan::Pass;
  const auto& gpu = cfg.cluster.gpu;
  const double peak16 = gpu.peak_dense_16bit_flops;
  const double gemm_peak =
      cfg.training.precision == Precision::kFp8 ? gpu.peak_dense_fp8_flops : peak16;
  const bool fp8 = cfg.training.precision == Precision::kFp8;
  const ComputeModel cm{cfg.profile, gemm_peak, peak16, gpu.hbm_Bps, fp8, cfg.training.fp8_recipe};
  std::vector<std::int64_t> out(P.tasks.size(), 0);
  for (std::size_t ti = 0; ti < P.tasks.size(); ++ti) {
    const plan::Task& t = P.tasks[ti];
    if (t.type != plan::TaskType::kCompute) continue;
    const model::Op& op = P.ops[static_cast<std::size_t>(t.op)];
    const double launch = cm.launch(op);
    const double peak = model::runs_16bit(op) ? peak16 : gemm_peak;
    // A share of a GEMM (a TP-overlap chunk, an attention block under CP) takes its share of
    // the whole GEMM's time plus its own launch (ComputeModel::forward_split: the pipelined
    // chunks keep the whole shape's rate).
    const double rows = op.m;
    const double share = t.fraction;
    double s = 0;
    if (op.kind == model::OpKind::kAttention &&
        (t.part == Part::kForward || t.part == Part::kBackward)) {
      // A context-parallel ring's attention is cp calls, one launch each (the op's `kernels`),
      // run as cp tasks of 1/cp: each takes its call's launch and its share of the time.
      out[ti] = TimePs::from_seconds(
                    (t.part == Part::kForward ? cm.forward(op) : cm.backward(op)) * t.fraction)
                    .ps;
      continue;
    }
    switch (t.part) {
      case Part::kForward:
        s = op.kind == model::OpKind::kGemm
                ? launch + (cm.forward_cast(op) + cm.gemm_time(rows, op.n, op.k, op.batch, peak)) * share
                : launch + (cm.forward(op) - launch) * t.fraction;
        break;
      case Part::kBackward: {
        const double lb = cm.launch_backward(op);
        s = lb + (cm.backward(op) - lb) * t.fraction;
        break;
      }
      case Part::kDgrad:
        // The output gradient's fp8 cast precedes the input-gradient GEMM.
        s = launch + (cm.backward_cast(op) + cm.gemm_time(rows, op.k, op.n, op.batch, peak)) * share;
        break;
      case Part::kWgrad:
        s = launch + cm.gemm_time(op.k, op.n, op.m, op.batch, peak) * t.fraction;
        break;
      case Part::kWhole:
        s = t.pass == Pass::kData ? cfg.profile.data_loading_s : cm.forward(op);
        break;
    }
    out[ti] = TimePs::from_seconds(s).ps;
  }
  add_offload_stalls(cfg, P, out);
  return out;
}

std::vector<double> straggler_factors(std::span<const Straggler> stragglers, int world, int gpn) {
  std::vector<double> factor(static_cast<std::size_t>(world), 1.0);
  for (const Straggler& s : stragglers) {
    if (s.factor <= 0 || !std::isfinite(s.factor)) {
      throw_input("a straggler's factor must be positive, is " + fmt::format("{}", s.factor),
                  {"", 0, "simulation.straggler_factor"});
    }
    if (s.rank >= 0) {
      if (s.rank >= world) {
        throw_input(fmt::format("straggler rank {} is outside the job's {} ranks", s.rank, world),
                    {"", 0, "simulation.straggler_rank"});
      }
      factor[static_cast<std::size_t>(s.rank)] *= s.factor;
    }
    if (s.host >= 0) {
      if (s.host >= (world + gpn - 1) / gpn) {
        throw_input(fmt::format("straggler host {} is outside the job's {} servers", s.host,
                                (world + gpn - 1) / gpn),
                    {"", 0, "simulation.straggler_host"});
      }
      for (int g = 0; g < gpn && s.host * gpn + g < world; ++g) {
        factor[static_cast<std::size_t>(s.host * gpn + g)] *= s.factor;
      }
    }
  }
  return factor;
}

double jitter_factor(Rng& rng, double sigma) {
  // Log-normal with mean 1: exp(σ·z − σ²/2), z standard normal (Box–Muller).
  const double u1 = std::max(1e-300, rng.uniform01());
  const double u2 = rng.uniform01();
  const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  return std::exp(sigma * z - 0.5 * sigma * sigma);
}

}  // namespace trainsim::exec
