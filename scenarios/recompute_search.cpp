#include "scenarios/recompute_search.h"

#include <fmt/format.h>

#include <algorithm>

#include "sim/core/error.h"
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
  if (!cfg.opt.fused_attention() && fits(model::Recompute::kSelective, 0).fits()) {
    return done("selective");
  }
  // N layers of each model chunk (of each stage when not interleaved), while that leaves some
  // layer of the most loaded stage not recomputed.
  const int v = std::max(1, L.par.vpp);
  for (int n = 1; static_cast<long long>(n) * v < L.layers_max_stage; ++n) {
    if (fits(model::Recompute::kFull, n).fits()) {
      return done(fmt::format("full ({} layer{} per {})", n, n == 1 ? "" : "s",
                              v > 1 ? "model chunk" : "stage"));
    }
  }
  const plan::MemoryUsage full = fits(model::Recompute::kFull, 0);
  if (full.fits()) return done("full");
  throw_infeasible(exec::memory_shortfall_message(full), {"", 0, "training.recompute"},
                   "even full recompute of every layer does not fit: more pipeline or tensor "
                   "parallelism, ZeRO, or a smaller micro-batch");
}

}  // namespace trainsim::scen
