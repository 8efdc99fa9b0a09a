#include "sim/plan/layout.h"

#include <algorithm>
#include <string>

#include "sim/core/error.h"

namespace trainsim::plan {
namespace {

std::string str(int x) { return std::to_string(x); }

void require(bool ok, const char* field, const std::string& message, const std::string& hint = {}) {
  if (!ok) throw_infeasible(message, {"", 0, field}, hint);
}

}  // namespace

coll::GroupShape group_shape(int n, int stride, const topo::ClusterSpec& cluster) {
  coll::GroupShape g;
  g.ranks = n;
  const int gpn = std::max(1, cluster.gpus_per_node);
  g.per_node = stride >= gpn ? 1 : std::max(1, std::min(n, gpn / std::max(1, stride)));
  g.nodes = (n + g.per_node - 1) / g.per_node;
  const long span = static_cast<long>(n - 1) * stride + 1;
  const int pod = cluster.fabric.pod_gpus;
  g.pods = pod > 0 ? static_cast<int>(std::min<long>(g.nodes, (span + pod - 1) / pod)) : 1;
  return g;
}

Layout make_layout(const model::ModelConfig& m, const topo::ClusterSpec& cluster,
                   const ParallelConfig& par, const TrainingConfig& train) {
  for (auto [v, f] : {std::pair{par.tp, "parallel.tp"}, {par.pp, "parallel.pp"},
                      {par.dp, "parallel.dp"}, {par.vpp, "parallel.vpp"}, {par.cp, "parallel.cp"},
                      {par.ep, "parallel.ep"}}) {
    require(v >= 1, f, "must be at least 1, is " + str(v));
  }
  require(m.heads % par.tp == 0, "parallel.tp",
          "TP " + str(par.tp) + " does not divide the " + str(m.heads) + " attention heads",
          "use a TP that divides model.heads");
  require(m.kv_heads % par.tp == 0, "parallel.tp",
          "TP " + str(par.tp) + " does not divide the " + str(m.kv_heads) +
              " key/value heads (query groups)");
  require(m.ffn_hidden % par.tp == 0, "parallel.tp",
          "TP " + str(par.tp) + " does not divide the MLP size " + str(m.ffn_hidden));
  require(par.world() == cluster.gpus, "cluster.gpus",
          str(cluster.gpus) + " GPUs is not TP×PP×DP×CP = " + str(par.tp) + "×" + str(par.pp) + "×" +
              str(par.dp) + "×" + str(par.cp) + " = " + str(par.world()));
  require(par.pp * par.vpp <= m.layers, "parallel.pp",
          "PP " + str(par.pp) + " × VPP " + str(par.vpp) + " = " + str(par.pp * par.vpp) +
              " model chunks for only " + str(m.layers) + " layers");
  require(par.cp == 1 || m.seq_len % (2 * par.cp) == 0, "parallel.cp",
          "CP " + str(par.cp) + " needs the sequence length " + str(m.seq_len) +
              " to divide into 2·CP load-balanced chunks");
  require(par.ep == 1 || m.experts > 0, "parallel.ep", "expert parallelism needs an MoE model");
  require(par.ep == 1 || m.experts % par.ep == 0, "parallel.ep",
          "EP " + str(par.ep) + " does not divide the " + str(m.experts) + " experts");
  require(par.dp % par.ep == 0, "parallel.ep",
          "EP " + str(par.ep) + " must divide DP " + str(par.dp) + " (experts shard the DP group)");
  require(par.zero >= 0 && par.zero <= 3, "parallel.zero", "ZeRO stage must be 0..3");
  require(train.micro_batch >= 1, "training.micro_batch", "must be at least 1");
  require(train.global_batch >= 1, "training.global_batch", "must be at least 1");
  const long per_step = static_cast<long>(train.micro_batch) * par.dp;
  require(train.global_batch % per_step == 0, "training.global_batch",
          "global batch " + str(train.global_batch) + " is not a multiple of micro_batch × DP = " +
              str(train.micro_batch) + "×" + str(par.dp) + " = " + std::to_string(per_step));
  Layout L;
  L.par = par;
  L.microbatches = static_cast<int>(train.global_batch / per_step);
  if (par.schedule == Schedule::kInterleaved) {
    require(par.vpp > 1, "parallel.vpp", "the interleaved schedule needs vpp > 1");
    require(L.microbatches % par.pp == 0, "training.global_batch",
            "the interleaved schedule needs the " + str(L.microbatches) +
                " micro-batches per pipeline to be a multiple of PP " + str(par.pp),
            "Megatron-LM requirement");
    require(m.layers % (par.pp * par.vpp) == 0, "parallel.vpp",
            str(m.layers) + " layers do not split evenly into PP×VPP = " + str(par.pp * par.vpp) +
                " model chunks");
  } else {
    require(par.vpp == 1, "parallel.vpp",
            "vpp " + str(par.vpp) + " needs the interleaved schedule");
  }
  // Layers split as evenly as possible; the heavy stages carry one more (Llama 3 uses uneven
  // stages when pp does not divide the layers).
  const int chunks = par.pp;
  L.layers_max_stage = (m.layers + chunks - 1) / chunks;
  L.layers_first_stage = m.layers / chunks + (m.layers % chunks > 0 ? 1 : 0);
  L.layers_last_stage = m.layers / chunks;

  L.tp = group_shape(par.tp, 1, cluster);
  L.cp = group_shape(par.cp, par.tp, cluster);
  L.dp = group_shape(par.dp, par.tp * par.cp, cluster);
  L.ep = group_shape(par.ep, par.tp * par.cp, cluster);
  L.expert_dp = group_shape(par.dp / par.ep, par.tp * par.cp * par.ep, cluster);
  L.pp = group_shape(par.pp, par.tp * par.cp * par.dp, cluster);
  return L;
}

}  // namespace trainsim::plan
