#include "scenarios/recompute_search.h"

#include <fmt/format.h>

#include <algorithm>

#include "sim/core/error.h"
#include "sim/model/transformer.h"
#include "sim/plan/layout.h"
#include "sim/plan/memory.h"

namespace trainsim::scen {

exec::RunConfig choose_recompute(exec::RunConfig cfg, std::string* chosen) {
  const plan::Layout L = plan::make_layout(cfg.model, cfg.cluster, cfg.parallel, cfg.training);
  auto fits = [&](model::Recompute r, int layers) {
    cfg.training.recompute = r;
    cfg.training.recompute_layers = layers;
    return plan::memory_per_gpu(cfg.model, L, cfg.training, cfg.opt.fused_attention(),
                                cfg.cluster.gpu);
  };
  auto done = [&](const std::string& text) {
    if (chosen != nullptr) *chosen = text;
    return cfg;
  };
  if (fits(model::Recompute::kNone, 0).fits()) return done("none");
  const model::Recompute selective = cfg.training.selective_mode;
  if (selective == model::Recompute::kSelective && !cfg.opt.fused_attention() &&
      fits(model::Recompute::kSelective, 0).fits()) {
    return done("selective");
  }
  // Per-op checkpointing replays a share of every layer; full recompute of n layers per model
  // chunk replays n/(layers of the chunk) of them. It is tried where its replayed FLOPs fall in
  // that order (a tie goes to full of n layers, the framework's older mode).
  double op_share = -1;  // < 0: not a candidate, or already tried
  if (selective == model::Recompute::kSelectiveOp && plan::selective_op_modelled(cfg.model, L.par)) {
    const bool fused = cfg.opt.fused_attention();
    const double none = model::hardware_flops_per_token(cfg.model, model::Recompute::kNone, fused);
    op_share = (model::hardware_flops_per_token(cfg.model, model::Recompute::kSelectiveOp, fused) -
                none) /
               (model::hardware_flops_per_token(cfg.model, model::Recompute::kFull, fused) - none);
  }
  const auto try_op = [&](double up_to) {
    if (op_share < 0 || op_share >= up_to) return false;
    op_share = -1;
    return fits(model::Recompute::kSelectiveOp, 0).fits();
  };
  // N layers of each model chunk (of each stage when not interleaved), while that leaves some
  // layer of the most loaded stage not recomputed.
  const int v = std::max(1, L.par.vpp);
  for (int n = 1; static_cast<long long>(n) * v < L.layers_max_stage; ++n) {
    if (try_op(static_cast<double>(n) * v / L.layers_max_stage)) return done("selective-op");
    if (fits(model::Recompute::kFull, n).fits()) {
      return done(fmt::format("full ({} layer{} per {})", n, n == 1 ? "" : "s",
                              v > 1 ? "model chunk" : "stage"));
    }
  }
  if (try_op(1.0)) return done("selective-op");
  const plan::MemoryUsage full = fits(model::Recompute::kFull, 0);
  if (full.fits()) return done("full");
  throw_infeasible(exec::memory_shortfall_message(full), {"", 0, "training.recompute"},
                   "even full recompute of every layer does not fit: more pipeline or tensor "
                   "parallelism, ZeRO, or a smaller micro-batch");
}

}  // namespace trainsim::scen
