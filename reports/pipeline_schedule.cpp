#include "reports/pipeline_schedule.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace trainsim::reports {
namespace {

struct Key {
  int microbatch;
  int chunk;
  bool forward;
};

// Megatron-LM's issue order of one stage (schedules.py: forward_backward_pipelining_*).
std::vector<Key> stage_order(const exec::PipelineTiming& t, int s) {
  const int p = t.stages, v = t.chunks, m = t.microbatches;
  std::vector<Key> order;
  if (t.schedule == plan::Schedule::kGpipe) {
    for (int mb = 0; mb < m; ++mb) order.push_back({mb, 0, true});
    for (int mb = 0; mb < m; ++mb) order.push_back({mb, 0, false});
    return order;
  }
  const int total = m * v;
  // Virtual micro-batch k runs chunk (k mod p·v) / p of micro-batch (k / p·v)·p + k mod p;
  // backward visits the chunks in reverse.
  auto fwd = [&](int k) { return Key{(k / (p * v)) * p + k % p, (k % (p * v)) / p, true}; };
  auto bwd = [&](int k) {
    return Key{(k / (p * v)) * p + k % p, v - 1 - (k % (p * v)) / p, false};
  };
  int warmup = v == 1 ? p - s - 1 : 2 * (p - s - 1) + (v - 1) * p;
  if (v > 1 && m == p) warmup = total;  // Megatron: all warm-up when m equals p
  warmup = std::min(warmup, total);
  for (int k = 0; k < warmup; ++k) order.push_back(fwd(k));
  for (int k = 0; k < total - warmup; ++k) {
    order.push_back(fwd(warmup + k));
    order.push_back(bwd(k));
  }
  for (int k = total - warmup; k < total; ++k) order.push_back(bwd(k));
  return order;
}

}  // namespace

std::vector<double> chunk_weights(const model::ModelConfig& m, const plan::Layout& layout) {
  const int p = std::max(1, layout.par.pp), v = std::max(1, layout.par.vpp);
  const model::ForwardFlops f = model::forward_flops_per_token(m);
  const double per_layer = (f.dense_gemm + f.attention) / std::max(1, m.layers);
  std::vector<double> w(static_cast<std::size_t>(p) * v, 0.0);
  double heaviest = 0;
  for (int s = 0; s < p; ++s) {
    double stage = 0;
    for (int c = 0; c < v; ++c) {
      double x = layout.chunk_layers(s, c).second * per_layer;
      if (s == p - 1 && c == v - 1) x += f.logits;
      w[static_cast<std::size_t>(s) * v + c] = x;
      stage += x;
    }
    heaviest = std::max(heaviest, stage);
  }
  if (heaviest <= 0) return {};
  bool alike = true;
  for (double& x : w) {
    x *= v / heaviest;
    alike = alike && std::fabs(x - w.front()) < 1e-12;
  }
  return alike ? std::vector<double>{} : w;
}

std::vector<ScheduleOp> analytic_pipeline_schedule(const exec::PipelineTiming& t,
                                                   std::span<const double> chunk_weight) {
  const int p = std::max(1, t.stages), v = std::max(1, t.chunks), m = std::max(1, t.microbatches);
  exec::PipelineTiming tt = t;
  tt.stages = p;
  tt.chunks = v;
  tt.microbatches = m;
  const double compute = t.forward_s + t.backward_s;
  const double fwd_share = compute > 0 ? t.forward_s / compute : 0.5;
  const double f = (t.forward_s + t.exposed_comm_s * fwd_share) / v;
  const double b = (t.backward_s + t.exposed_comm_s * (1 - fwd_share)) / v;

  const double kNotYet = std::numeric_limits<double>::quiet_NaN();
  auto slot = [&](int s, int mb, int c, bool fw) {
    return ((static_cast<std::size_t>(s) * m + mb) * v + c) * 2 + (fw ? 1 : 0);
  };
  std::vector<double> end(static_cast<std::size_t>(p) * m * v * 2, kNotYet);
  // The op an op waits for, or -1 for none.
  auto dependency = [&](int s, const Key& k) -> long {
    if (k.forward) {
      if (s > 0) return static_cast<long>(slot(s - 1, k.microbatch, k.chunk, true));
      if (k.chunk > 0) return static_cast<long>(slot(p - 1, k.microbatch, k.chunk - 1, true));
      return -1;
    }
    if (s < p - 1) return static_cast<long>(slot(s + 1, k.microbatch, k.chunk, false));
    if (k.chunk < v - 1) return static_cast<long>(slot(0, k.microbatch, k.chunk + 1, false));
    return static_cast<long>(slot(p - 1, k.microbatch, v - 1, true));
  };

  std::vector<std::vector<Key>> orders;
  for (int s = 0; s < p; ++s) orders.push_back(stage_order(tt, s));
  std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
  std::vector<double> free_at(static_cast<std::size_t>(p), 0.0);
  std::vector<std::vector<ScheduleOp>> per_stage(static_cast<std::size_t>(p));
  std::size_t remaining = 0;
  for (const auto& o : orders) remaining += o.size();
  while (remaining > 0) {
    bool progress = false;
    for (int s = 0; s < p; ++s) {
      const auto su = static_cast<std::size_t>(s);
      while (next[su] < orders[su].size()) {
        const Key& k = orders[su][next[su]];
        const long dep = dependency(s, k);
        if (dep >= 0 && std::isnan(end[static_cast<std::size_t>(dep)])) break;
        const double start =
            std::max(free_at[su], dep >= 0 ? end[static_cast<std::size_t>(dep)] : 0.0);
        const std::size_t at = static_cast<std::size_t>(s) * v + k.chunk;
        const double weight = at < chunk_weight.size() ? chunk_weight[at] : 1.0;
        const double finish = start + (k.forward ? f : b) * weight;
        end[slot(s, k.microbatch, k.chunk, k.forward)] = finish;
        per_stage[su].push_back({s, k.microbatch, k.chunk, k.forward, start, finish});
        free_at[su] = finish;
        ++next[su];
        --remaining;
        progress = true;
      }
    }
    if (!progress) throw std::logic_error("pipeline schedule deadlocks");
  }
  std::vector<ScheduleOp> out;
  for (auto& ops : per_stage) out.insert(out.end(), ops.begin(), ops.end());
  return out;
}

double schedule_makespan(const std::vector<ScheduleOp>& ops) {
  double end = 0;
  for (const ScheduleOp& op : ops) end = std::max(end, op.end_s);
  return end;
}

}  // namespace trainsim::reports
