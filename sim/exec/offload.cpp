#include "sim/exec/offload.h"

#include <algorithm>
#include <cstddef>
#include <vector>

#include "sim/exec/analytic.h"
#include "sim/plan/memory.h"

namespace trainsim::exec {

double offload_copy_seconds(const RunConfig& cfg) {
  if (cfg.cluster.gpu.host_link_Bps <= 0) return 0;
  return plan::layer_activation_bytes(cfg.model, cfg.parallel, cfg.training.micro_batch,
                                      cfg.training.recompute, cfg.opt.fused_attention(),
                                      cfg.training.precision == Precision::kFp8) /
         cfg.cluster.gpu.host_link_Bps;
}

OffloadStalls offload_stalls(std::span<const double> fwd_s, std::span<const double> bwd_s, int n,
                             double copy_s) {
  OffloadStalls out;
  const int layers = static_cast<int>(std::min(fwd_s.size(), bwd_s.size()));
  if (n <= 0 || n >= layers || copy_s <= 0) return out;
  const int slots = layers - n;  // activation sets the GPU may hold at once
  // Forward.
  std::vector<double> copy_end(static_cast<std::size_t>(n), 0.0);
  double t = 0, stream = 0;
  int done = 0;  // offloaded layers whose copy has ended by `t` (copies end in order)
  for (int j = 0; j < layers; ++j) {
    const int kept = std::max(0, j - n);  // layers before j that stay on the GPU
    const int copied = std::min(j, n);    // offloaded layers before j
    while (done < copied && copy_end[static_cast<std::size_t>(done)] <= t) ++done;
    // Sets on the GPU: the kept ones and the offloaded ones still copying, plus layer j's own.
    while (kept + (copied - done) + 1 > slots && done < copied) {
      const double until = copy_end[static_cast<std::size_t>(done)];
      out.forward += until - t;
      t = until;
      while (done < copied && copy_end[static_cast<std::size_t>(done)] <= t) ++done;
    }
    t += fwd_s[static_cast<std::size_t>(j)];
    if (j < n) {
      stream = std::max(stream, t) + copy_s;
      copy_end[static_cast<std::size_t>(j)] = stream;
    }
  }
  // Backward, from the last layer; every slot is taken when it begins.
  std::vector<double> bwd_end(static_cast<std::size_t>(layers), 0.0);
  std::vector<double> reload_end(static_cast<std::size_t>(n), 0.0);
  int next_reload = 0;  // k: the reload of layer n − 1 − k
  for (int j = layers - 1; j >= 0; --j) {
    if (j < n) {
      // Start every reload whose slot has been freed (k + 1 backward passes ended) up to this
      // layer's own.
      while (next_reload <= n - 1 - j) {
        const int freer = layers - 1 - next_reload;  // its slot frees when this layer is done
        stream = std::max(stream, bwd_end[static_cast<std::size_t>(freer)]) + copy_s;
        reload_end[static_cast<std::size_t>(n - 1 - next_reload)] = stream;
        ++next_reload;
      }
      const double ready = reload_end[static_cast<std::size_t>(j)];
      if (ready > t) {
        out.backward += ready - t;
        t = ready;
      }
    }
    t += bwd_s[static_cast<std::size_t>(j)];
    bwd_end[static_cast<std::size_t>(j)] = t;
  }
  return out;
}

}  // namespace trainsim::exec
