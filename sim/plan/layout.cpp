#include "sim/plan/layout.h"

#include <algorithm>
#include <array>
#include <numeric>
#include <string>
#include <vector>

#include "sim/core/error.h"

namespace trainsim::plan {
namespace {

std::string str(int x) { return std::to_string(x); }

}  // namespace

bool groups_line_up(long n, long stride, long gpus_per_node) {
  const long s = std::max(1L, stride), gpn = std::max(1L, gpus_per_node), block = n * s;
  return s >= gpn || (gpn % s == 0 && (gpn % block == 0 || block % gpn == 0));
}

coll::GroupShape group_shape(int n, int stride, const topo::ClusterSpec& cluster) {
  coll::GroupShape g;
  g.ranks = n;
  const int gpn = std::max(1, cluster.gpus_per_node);
  const int s = std::max(1, stride);
  const long block = static_cast<long>(n) * s;
  g.per_node = s >= gpn ? 1 : std::max(1, std::min(n, gpn / s));
  g.nodes = (n + g.per_node - 1) / g.per_node;
  // The formula above holds for groups that line up with the servers: members s apart from
  // bases i + j·n·s (i < s; the rank numbering is mixed-radix, so every group of a dimension
  // of n members at stride s starts at such a base), and either a server holds whole groups
  // (n·s divides gpus_per_node) or whole servers of one group (gpus_per_node divides n·s), s
  // dividing gpus_per_node. Otherwise some groups straddle a server boundary (TP 4 on 6-GPU
  // servers: ranks 4-7 on two servers), and the collective runs at the pace of the worst
  // group, so the shape is that group's: the most servers, then the fewest members on one.
  const bool aligned = groups_line_up(n, s, gpn);
  if (!aligned) {
    const long world = cluster.gpus > 0 ? cluster.gpus : block * gpn;
    const long period = gpn / std::gcd(block, static_cast<long>(gpn));
    std::vector<char> seen(static_cast<std::size_t>(gpn), 0);
    std::vector<int> count;
    int worst_nodes = 0, worst_min = 0, worst_max = 0;
    for (long j = 0; j < period; ++j) {
      for (long i = 0; i < s; ++i) {
        const long base = i + j * block;
        if (base + static_cast<long>(n - 1) * s >= world) continue;
        const auto offset = static_cast<std::size_t>(base % gpn);
        if (seen[offset] != 0) continue;
        seen[offset] = 1;
        count.clear();
        long node = -1;
        for (int k = 0; k < n; ++k) {  // members in increasing rank order
          const long here = (static_cast<long>(offset) + static_cast<long>(k) * s) / gpn;
          if (here != node) count.push_back(0);
          node = here;
          ++count.back();
        }
        const int nodes = static_cast<int>(count.size());
        const int lo = *std::min_element(count.begin(), count.end());
        const int hi = *std::max_element(count.begin(), count.end());
        if (nodes > worst_nodes || (nodes == worst_nodes && lo < worst_min)) {
          worst_nodes = nodes;
          worst_min = lo;
          worst_max = hi;
        }
      }
    }
    if (worst_nodes > 0) {
      g.nodes = worst_nodes;
      g.per_node = worst_max;
      g.min_per_node = worst_min < worst_max ? worst_min : 0;
    }
  }
  const long span = static_cast<long>(n - 1) * stride + 1;
  const int pod = cluster.fabric.pod_gpus;
  g.pods = pod > 0 ? static_cast<int>(std::min<long>(g.nodes, (span + pod - 1) / pod)) : 1;
  return g;
}

// A group of two strides: CP rank j at offset tp·j and the i-th of `replicas` DP replicas at
// offset dp_stride·step·i (step: ep for the replicas holding the same experts, 1 for the dense
// DP·CP group), placed as ranks are (consecutive on a server of gpus_per_node, pods of
// fabric.pod_gpus).
coll::GroupShape cp_dp_shape(const ParallelConfig& par, int replicas, int step,
                             const topo::ClusterSpec& cluster) {
  coll::GroupShape g;
  g.ranks = replicas * par.cp;
  const long gpn = std::max(1, cluster.gpus_per_node);
  const long pod = cluster.fabric.pod_gpus;
  // The shape depends on these alone, and a sweep asks for the same one at every micro-batch,
  // recompute, ZeRO and vpp value of a layout: the last answer of this thread is kept.
  const std::array<long, 7> key{par.tp, par.cp, par.dp_stride(), step, replicas, gpn, pod};
  thread_local std::array<long, 7> last_key{};
  thread_local coll::GroupShape last;
  if (key == last_key) return last;
  // Members in increasing rank order (a replica's CP ranks span tp·(cp−1) < its DP stride):
  // servers and pods are counted as they change, and the longest run on one server is the
  // most members a server holds. No allocation: a sweep prices this for every CP point.
  long node = -1, pod_of = -1;
  int nodes = 0, pods = 0, run = 0, per_node = 1;
  for (int i = 0; i < replicas; ++i) {
    for (int j = 0; j < par.cp; ++j) {
      const long r = static_cast<long>(par.tp) * j +
                     static_cast<long>(par.dp_stride()) * step * i;
      const long here = r / gpn;
      run = here == node ? run + 1 : 1;
      if (here != node) ++nodes;
      node = here;
      per_node = std::max(per_node, run);
      if (pod > 0 && r / pod != pod_of) {
        ++pods;
        pod_of = r / pod;
      }
    }
  }
  g.per_node = per_node;
  g.nodes = nodes;
  g.pods = pod > 0 ? pods : 1;
  last_key = key;
  last = g;
  return g;
}

// Each check builds its message and hint only when its condition fails: a sweep point that passes
// them allocates no string.
#define TRAINSIM_REQUIRE(ok, field_name, ...)                          \
  do {                                                                \
    if (!(ok)) return fail(why, field_name, __VA_ARGS__);              \
  } while (false)

namespace {
bool fail(Infeasibility* why, const char* field, std::string message, std::string hint = {}) {
  if (why != nullptr) *why = {field, std::move(message), std::move(hint)};
  return false;
}
}  // namespace

bool selective_op_modelled(const model::ModelConfig& m, const ParallelConfig& par) {
  return (par.tp == 1 || par.sp) && par.cp == 1 && m.experts == 0 && !m.parallel_block;
}

bool try_make_layout(const model::ModelConfig& m, const topo::ClusterSpec& cluster,
                     const ParallelConfig& par, const TrainingConfig& train, Layout& L,
                     Infeasibility* why) {
  for (auto [v, f] : {std::pair{par.tp, "parallel.tp"}, {par.pp, "parallel.pp"},
                      {par.dp, "parallel.dp"}, {par.vpp, "parallel.vpp"}, {par.cp, "parallel.cp"},
                      {par.ep, "parallel.ep"}}) {
    TRAINSIM_REQUIRE(v >= 1, f, "must be at least 1, is " + str(v));
  }
  TRAINSIM_REQUIRE(m.heads % par.tp == 0, "parallel.tp",
          "TP " + str(par.tp) + " does not divide the " + str(m.heads) + " attention heads",
          "use a TP that divides model.heads");
  TRAINSIM_REQUIRE(m.kv_heads % par.tp == 0, "parallel.tp",
          "TP " + str(par.tp) + " does not divide the " + str(m.kv_heads) +
              " key/value heads (query groups)");
  TRAINSIM_REQUIRE(m.ffn_hidden % par.tp == 0, "parallel.tp",
          "TP " + str(par.tp) + " does not divide the MLP size " + str(m.ffn_hidden));
  TRAINSIM_REQUIRE(par.world() == cluster.gpus, "cluster.gpus",
          str(cluster.gpus) + " GPUs is not TP×PP×DP×CP = " + str(par.tp) + "×" + str(par.pp) + "×" +
              str(par.dp) + "×" + str(par.cp) + " = " + str(par.world()));
  // Every model chunk holds at least one layer, but for the two that may hold only the
  // embedding (the first stage's first chunk) or only the output layer and loss (the last
  // stage's last chunk) when an end stage has a layer fewer than its chunks: Llama 3's layout
  // (Llama Team 2024, §3.3.2: 126 layers on 16 stages of 8 chunks). With stage layers given,
  // the per-stage checks below decide (an end left at 0 takes its share of the rest, which may
  // be the one fewer); otherwise every chunk needs a layer.
  const bool ends_given = par.pp > 1 && (par.first_stage_layers > 0 || par.last_stage_layers > 0);
  TRAINSIM_REQUIRE((ends_given && par.vpp > 1) || par.pp * par.vpp <= m.layers,
          par.vpp > 1 ? "parallel.vpp" : "parallel.pp",
          "PP " + str(par.pp) + " × VPP " + str(par.vpp) + " = " + str(par.pp * par.vpp) +
              " model chunks for only " + str(m.layers) + " layers");
  TRAINSIM_REQUIRE(par.cp == 1 || m.seq_len % (2 * par.cp) == 0, "parallel.cp",
          "CP " + str(par.cp) + " needs the sequence length " + str(m.seq_len) +
              " to divide into 2·CP load-balanced chunks");
  TRAINSIM_REQUIRE(m.experts == 0 || (m.top_k >= 1 && m.top_k <= m.experts), "model.top_k",
          "each token goes to " + str(m.top_k) + " experts, but the model has " + str(m.experts),
          "set model.top_k between 1 and model.experts");
  // (Layer 0 is always an MoE layer, as Megatron-Core places them: any moe_every ≥ 1 has one.)
  TRAINSIM_REQUIRE(m.experts == 0 || m.moe_every >= 1, "model.moe_every",
          "must be at least 1, is " + str(m.moe_every));
  // Megatron-Core refuses MoE under TP without SP ("When using MoE and tensor parallelism,
  // sequence parallelism must be used", TransformerConfig.__post_init__): each TP rank
  // dispatches its own tokens/tp, which only SP gives it.
  TRAINSIM_REQUIRE(m.experts == 0 || par.tp == 1 || par.sp, "parallel.sp",
          "an MoE model under TP " + str(par.tp) + " needs sequence parallelism",
          "set parallel.sp=true (Megatron-Core requires it), or parallel.tp=1");
  TRAINSIM_REQUIRE(par.ep == 1 || m.experts > 0, "parallel.ep", "expert parallelism needs an MoE model");
  TRAINSIM_REQUIRE(par.ep == 1 || m.experts % par.ep == 0, "parallel.ep",
          "EP " + str(par.ep) + " does not divide the " + str(m.experts) + " experts");
  TRAINSIM_REQUIRE(par.dp % par.ep == 0, "parallel.ep",
          "EP " + str(par.ep) + " must divide DP " + str(par.dp) + " (experts shard the DP group)");
  TRAINSIM_REQUIRE(par.zero >= 0 && par.zero <= 3, "parallel.zero", "ZeRO stage must be 0..3");
  // Megatron's tp-cp-ep-pp-dp puts the expert groups inside the pipeline; only the dense groups
  // of that order are modelled.
  TRAINSIM_REQUIRE(par.ep == 1 || par.order == RankOrder::kTpCpDpPp, "parallel.order",
          "expert parallelism (EP " + str(par.ep) + ") is modelled in the tp-cp-dp-pp rank order only",
          "set parallel.order tp-cp-dp-pp, or parallel.ep 1");
  // TorchTitan's per-op checkpointing policy is modelled on the layer it was written for: one
  // GPU's whole dense, sequential layer (model::recompute_share counts its matmuls in order).
  TRAINSIM_REQUIRE(train.recompute != model::Recompute::kSelectiveOp ||
                       selective_op_modelled(m, par),
          "training.recompute",
          "selective-op (TorchTitan's per-op policy) is modelled for CP 1, dense sequential "
          "layers and TP with sequence parallelism (TorchTitan's); this run has TP " +
              str(par.tp) + (par.tp > 1 && !par.sp ? " without SP" : "") + ", CP " + str(par.cp) +
              (m.experts > 0 ? ", experts" : "") + (m.parallel_block ? ", a parallel block" : ""),
          "use none, selective or full");
  TRAINSIM_REQUIRE(train.micro_batch >= 1, "training.micro_batch", "must be at least 1");
  TRAINSIM_REQUIRE(train.global_batch >= 1, "training.global_batch", "must be at least 1");
  const long per_step = static_cast<long>(train.micro_batch) * par.dp;
  TRAINSIM_REQUIRE(train.global_batch % per_step == 0, "training.global_batch",
          "global batch " + str(train.global_batch) + " is not a multiple of micro_batch × DP = " +
              str(train.micro_batch) + "×" + str(par.dp) + " = " + std::to_string(per_step));
  L.par = par;
  L.microbatches = static_cast<int>(train.global_batch / per_step);
  const int p = par.pp;
  TRAINSIM_REQUIRE(par.first_stage_layers >= 0 && par.last_stage_layers >= 0, "parallel.first_stage_layers",
          "stage layer counts cannot be negative");
  TRAINSIM_REQUIRE(p > 1 || (par.first_stage_layers == 0 && par.last_stage_layers == 0),
          "parallel.first_stage_layers", "uneven stages need pipeline parallelism (PP > 1)");
  L.stage_layers.assign(static_cast<std::size_t>(p), 0);
  if (p > 1 && (par.first_stage_layers > 0 || par.last_stage_layers > 0)) {
    // Given ends; the middle stages share the rest evenly (an end left at 0 takes an even share).
    const int given_ends = (par.first_stage_layers > 0 ? 1 : 0) + (par.last_stage_layers > 0 ? 1 : 0);
    const int rest = m.layers - par.first_stage_layers - par.last_stage_layers;
    const int sharing = p - given_ends;
    TRAINSIM_REQUIRE(rest >= sharing && (sharing > 0 || rest == 0), "parallel.first_stage_layers",
            str(par.first_stage_layers) + " + " + str(par.last_stage_layers) +
                " layers on the end stages leave " + str(rest) + " of " + str(m.layers) +
                " layers for " + str(sharing) + " other stages");
    std::vector<int> shared;
    for (int i = 0; i < sharing; ++i) shared.push_back(rest / sharing + (i < rest % sharing ? 1 : 0));
    std::size_t next = 0;
    for (int st = 0; st < p; ++st) {
      const int given = st == 0 ? par.first_stage_layers : st == p - 1 ? par.last_stage_layers : 0;
      L.stage_layers[static_cast<std::size_t>(st)] = given > 0 ? given : shared[next++];
    }
  } else {
    // Even split; the layers that do not divide go to the stages after the first (it holds the
    // most in-flight micro-batches), from the second stage on.
    const int base = m.layers / p, extra = m.layers % p;
    for (int st = 0; st < p; ++st) {
      const int order = p == 1 ? 0 : (st == 0 ? p - 1 : st - 1);  // the first stage is served last
      L.stage_layers[static_cast<std::size_t>(st)] = base + (order < extra ? 1 : 0);
    }
  }
  if (par.schedule == Schedule::kInterleaved) {
    TRAINSIM_REQUIRE(par.vpp > 1, "parallel.vpp", "the interleaved schedule needs vpp > 1");
    // One stage has no pipeline to interleave (it ran, as model chunks that wait on nothing,
    // 3 MFU points apart at the two fidelities).
    TRAINSIM_REQUIRE(par.pp > 1, "parallel.vpp",
            "vpp " + str(par.vpp) + " interleaves a pipeline, and PP 1 has none",
            "set parallel.vpp 1 (or auto), or parallel.pp above 1");
    TRAINSIM_REQUIRE(L.microbatches % par.pp == 0, "training.global_batch",
            "the interleaved schedule needs the " + str(L.microbatches) +
                " micro-batches per pipeline to be a multiple of PP " + str(par.pp),
            "Megatron-LM requirement");
    const bool uneven = par.first_stage_layers > 0 || par.last_stage_layers > 0;
    if (!uneven && m.layers % (par.pp * par.vpp) != 0) {
      // Name the counts that do split (the built-in default's vpp 6 is MegaScale's 175B layout,
      // which a scenario that does not set vpp inherits).
      std::string fits;
      if (why != nullptr && m.layers % par.pp == 0) {
        for (int v = 1; v <= m.layers / par.pp; ++v) {
          if (m.layers % (par.pp * v) == 0) fits += (fits.empty() ? "" : ", ") + str(v);
        }
      }
      return fail(why, "parallel.vpp",
                  str(m.layers) + " layers do not split evenly into PP×VPP = " +
                      str(par.pp * par.vpp) + " model chunks",
                  fits.empty() ? "set parallel.first_stage_layers / last_stage_layers, or "
                                 "another PP"
                               : "parallel.vpp " + fits + " split them (1: not interleaved), or "
                                 "parallel.vpp: auto picks the fastest that fits");
    }
    // A chunk with no layer only where it still runs something: the embedding (the first
    // stage's first chunk) or the output layer and loss (the last stage's last chunk).
    for (int st = 0; st < p; ++st) {
      const int least = st == 0 || st == p - 1 ? par.vpp - 1 : par.vpp;
      TRAINSIM_REQUIRE(L.stage_layers[static_cast<std::size_t>(st)] >= least, "parallel.vpp",
              "stage " + str(st) + " has " + str(L.stage_layers[static_cast<std::size_t>(st)]) +
                  " layers for " + str(par.vpp) + " model chunks" +
                  (st == 0 || st == p - 1 ? " (one of them may hold only the " +
                                                std::string(st == 0 ? "embedding" : "output layer") + ")"
                                          : ""));
    }
  } else {
    TRAINSIM_REQUIRE(par.vpp == 1, "parallel.vpp",
            "vpp " + str(par.vpp) + " needs the interleaved schedule");
  }
  L.layers_first_stage = L.stage_layers.front();
  L.layers_last_stage = L.stage_layers.back();
  L.layers_max_stage = *std::max_element(L.stage_layers.begin(), L.stage_layers.end());
  L.layers_max_middle = p > 2 ? *std::max_element(L.stage_layers.begin() + 1, L.stage_layers.end() - 1) : 0;

  L.tp = group_shape(par.tp, 1, cluster);
  L.cp = group_shape(par.cp, par.tp, cluster);
  L.dp = group_shape(par.dp, par.dp_stride(), cluster);
  // DP·CP is one stride (tp) when DP follows CP in the rank order, two when PP sits between.
  L.dp_cp = par.order == RankOrder::kTpCpDpPp || par.cp == 1
                ? group_shape(par.dp * par.cp, par.cp == 1 ? par.dp_stride() : par.tp, cluster)
                : cp_dp_shape(par, par.dp, 1, cluster);
  L.ep = group_shape(par.ep, par.dp_stride(), cluster);
  // The ranks that hold the same experts: the replicas `ep` apart through DP and, like the dense
  // gradients' DP·CP group, every CP rank of them (they compute gradients of the same experts
  // on other tokens). Two strides (tp for CP, tp·cp·ep for DP), so with CP > 1 the shape is
  // counted from the members; it reduced over DP / EP alone, leaving the CP ranks' expert
  // gradients unreduced.
  L.expert_dp = par.cp > 1 ? cp_dp_shape(par, std::max(1, par.dp / par.ep), par.ep, cluster)
                           : group_shape(par.dp / par.ep, par.dp_stride() * par.ep, cluster);
  L.pp = group_shape(par.pp, par.pp_stride(), cluster);
  return true;
}

#undef TRAINSIM_REQUIRE

Layout make_layout(const model::ModelConfig& m, const topo::ClusterSpec& cluster,
                   const ParallelConfig& par, const TrainingConfig& train) {
  Layout L;
  Infeasibility why;
  if (!try_make_layout(m, cluster, par, train, L, &why)) {
    throw_infeasible(std::move(why.message), {"", 0, why.field}, std::move(why.hint));
  }
  return L;
}

// Chunk sizes of one stage: n/v each, the remainder on the later chunks of the first stage and
// on the earlier chunks of the others (so the first stage's first chunk and the last stage's
// last chunk are the small ones).
int Layout::chunk_size(int stage, int chunk) const {
  const int n = stage_layers[static_cast<std::size_t>(stage)];
  const int v = std::max(1, par.vpp);
  if (par.vpp <= 1) return n;
  const int base = n / v, extra = n % v;
  const bool big = stage == 0 ? chunk >= v - extra : chunk < extra;
  return base + (big ? 1 : 0);
}

// n/v layers per chunk with the remainder on `extra` of them: equal exactly when v divides n.
bool Layout::even_chunks(int stage) const {
  return par.vpp <= 1 || stage_layers[static_cast<std::size_t>(stage)] % par.vpp == 0;
}

std::pair<int, int> Layout::chunk_layers(int stage, int chunk) const {
  const int p = par.pp, v = par.vpp;
  int start_of_stage = 0;  // non-interleaved: layers before this stage
  for (int st = 0; st < stage; ++st) start_of_stage += stage_layers[static_cast<std::size_t>(st)];
  if (v <= 1) return {start_of_stage, stage_layers[static_cast<std::size_t>(stage)]};
  // Model chunk j = c·p + st; the layers of all earlier model chunks come first.
  int first = 0;
  const int j = chunk * p + stage;
  for (int jj = 0; jj < j; ++jj) first += chunk_size(jj % p, jj / p);
  return {first, chunk_size(stage, chunk)};
}

}  // namespace trainsim::plan
