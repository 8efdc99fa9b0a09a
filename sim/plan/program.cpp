#include "sim/plan/program.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/plan/memory.h"

namespace trainsim::plan {

const char* to_string(Stream s) {
  switch (s) {
    case Stream::kCompute: return "compute";
    case Stream::kTp: return "tp";
    case Stream::kCp: return "cp";
    case Stream::kEp: return "ep";
    case Stream::kDp: return "dp";
    case Stream::kPpSendNext: return "pp-send-next";
    case Stream::kPpSendPrev: return "pp-send-prev";
    case Stream::kPpRecvPrev: return "pp-recv-prev";
    case Stream::kPpRecvNext: return "pp-recv-next";
  }
  return "?";
}

const char* to_string(Dim d) {
  switch (d) {
    case Dim::kNone: return "none";
    case Dim::kTp: return "tp";
    case Dim::kCp: return "cp";
    case Dim::kEp: return "ep";
    case Dim::kDp: return "dp";
    case Dim::kExpertDp: return "expert-dp";
    case Dim::kPp: return "pp";
  }
  return "?";
}

const char* to_string(TaskType t) {
  switch (t) {
    case TaskType::kCompute: return "compute";
    case TaskType::kCollective: return "collective";
    case TaskType::kSend: return "send";
    case TaskType::kRecv: return "recv";
  }
  return "?";
}

const char* to_string(Pass p) {
  switch (p) {
    case Pass::kData: return "data";
    case Pass::kForward: return "forward";
    case Pass::kBackward: return "backward";
    case Pass::kRecompute: return "recompute";
    case Pass::kOptimizer: return "optimizer";
  }
  return "?";
}

namespace {
const char* part_name(Part p) {
  switch (p) {
    case Part::kForward: return "fwd";
    case Part::kBackward: return "bwd";
    case Part::kDgrad: return "dgrad";
    case Part::kWgrad: return "wgrad";
    case Part::kWhole: return "";
  }
  return "?";
}
}  // namespace

std::string Program::task_name(const Task& t) const {
  switch (t.type) {
    case TaskType::kCompute: {
      const std::string& op = ops[static_cast<std::size_t>(t.op)].name;
      if (t.part == Part::kWhole) return op;
      const char* suffix = t.pass == Pass::kRecompute ? "recompute" : part_name(t.part);
      return op + " " + suffix;
    }
    case TaskType::kCollective: {
      std::string k = coll::to_string(t.collective);
      return k + " " + to_string(t.dim);
    }
    case TaskType::kSend:
      return t.stream == Stream::kPpSendNext ? "send-next pp" : "send-prev pp";
    case TaskType::kRecv:
      return t.stream == Stream::kPpRecvPrev ? "recv-prev pp" : "recv-next pp";
  }
  return "?";
}

std::size_t Program::count(TaskType type) const {
  return static_cast<std::size_t>(
      std::count_if(tasks.begin(), tasks.end(), [&](const Task& t) { return t.type == type; }));
}

RankCoord ProgramSet::coord(int rank) const {
  const auto& p = layout.par;
  RankCoord c;
  c.tp = rank % p.tp;
  rank /= p.tp;
  c.cp = rank % p.cp;
  rank /= p.cp;
  if (p.order == RankOrder::kTpCpDpPp) {
    c.dp = rank % p.dp;
    c.pp = rank / p.dp;
  } else {
    c.pp = rank % p.pp;
    c.dp = rank / p.pp;
  }
  return c;
}

int ProgramSet::rank_of(const RankCoord& c) const {
  const auto& p = layout.par;
  const int outer = p.order == RankOrder::kTpCpDpPp ? c.dp + p.dp * c.pp : c.pp + p.pp * c.dp;
  return c.tp + p.tp * (c.cp + p.cp * outer);
}

std::vector<int> ProgramSet::group(Dim d, int rank) const {
  const auto& p = layout.par;
  const RankCoord c = coord(rank);
  std::vector<int> out;
  RankCoord m = c;
  switch (d) {
    case Dim::kNone: out.push_back(rank); break;
    case Dim::kTp:
      for (int i = 0; i < p.tp; ++i) { m.tp = i; out.push_back(rank_of(m)); }
      break;
    case Dim::kCp:
      for (int i = 0; i < p.cp; ++i) { m.cp = i; out.push_back(rank_of(m)); }
      break;
    case Dim::kDp:
      // The data-parallel gradient group: every rank holding the same dense weights, DP·CP (the
      // CP ranks of a replica compute gradients of the same weights on other tokens), in rank
      // order. With CP 1 it is the DP group.
      for (int i = 0; i < p.dp; ++i) {
        m.dp = i;
        for (int j = 0; j < p.cp; ++j) { m.cp = j; out.push_back(rank_of(m)); }
      }
      break;
    case Dim::kEp: {  // EP is the fastest-varying part of DP: blocks of `ep` consecutive replicas
      const int base = c.dp - c.dp % p.ep;
      for (int i = 0; i < p.ep; ++i) { m.dp = base + i; out.push_back(rank_of(m)); }
      break;
    }
    case Dim::kExpertDp:  // ranks holding the same experts: stride ep through DP, every CP rank
      for (int i = c.dp % p.ep; i < p.dp; i += p.ep) {
        m.dp = i;
        for (int j = 0; j < p.cp; ++j) { m.cp = j; out.push_back(rank_of(m)); }
      }
      break;
    case Dim::kPp:
      for (int i = 0; i < p.pp; ++i) { m.pp = i; out.push_back(rank_of(m)); }
      break;
  }
  return out;
}

int ProgramSet::peer_on_stage(int rank, int stage) const {
  RankCoord c = coord(rank);
  c.pp = stage;
  return rank_of(c);
}

int ProgramSet::next_stage(int stage) const {
  const auto& p = layout.par;
  if (p.pp <= 1) return -1;
  if (stage + 1 < p.pp) return stage + 1;
  return p.vpp > 1 ? 0 : -1;
}

int ProgramSet::prev_stage(int stage) const {
  const auto& p = layout.par;
  if (p.pp <= 1) return -1;
  if (stage > 0) return stage - 1;
  return p.vpp > 1 ? p.pp - 1 : -1;
}

namespace {

constexpr std::uint32_t kNoTask = 0xffffffffu;

struct Builder {
  Builder(const ProgramSet& set, Program& program, int stage_index)
      : ps(set), P(program), L(set.layout), m(set.model), opt(set.opt), stage(stage_index) {}

  const ProgramSet& ps;
  Program& P;
  const Layout& L;
  const model::ModelConfig& m;
  const Optimizations& opt;
  model::Sharding shard;
  int stage = 0;
  int microbatches = 1;
  double act_bytes = 0;  // one [tokens × h] 16-bit tensor (the TP collectives' buffer)
  double p2p_bytes = 0;  // a pipeline activation per rank (1/tp of it: SP or scatter-gather)
  bool p2p_gather = false;  // scatter-gather: the receivers all-gather it over TP before use

  std::uint32_t last_compute = kNoTask;
  std::vector<std::uint32_t> blockers;  // comm tasks the next compute task must wait for
  std::vector<std::uint32_t> scratch;

  std::uint32_t add(Task t, std::initializer_list<std::uint32_t> deps) {
    scratch.assign(deps.begin(), deps.end());
    return add_v(t, scratch);
  }
  std::uint32_t add_v(Task t, const std::vector<std::uint32_t>& deps) {
    t.dep_begin = static_cast<std::uint32_t>(P.deps.size());
    for (std::uint32_t d : deps) {
      if (d != kNoTask) P.deps.push_back(d);
    }
    // Same-stream dependencies are implied by stream order; keep them anyway (harmless) but drop
    // duplicates.
    auto b = P.deps.begin() + t.dep_begin;
    std::sort(b, P.deps.end());
    P.deps.erase(std::unique(b, P.deps.end()), P.deps.end());
    t.dep_count = static_cast<std::uint32_t>(P.deps.size()) - t.dep_begin;
    t.stream_pos = P.stream_tasks[static_cast<int>(t.stream)]++;
    P.tasks.push_back(t);
    return static_cast<std::uint32_t>(P.tasks.size() - 1);
  }

  int add_op(const model::Op& op) {
    P.ops.push_back(op);
    return static_cast<int>(P.ops.size() - 1);
  }

  // A compute task on the compute stream; it waits for the pending blockers.
  std::uint32_t compute(int op, Pass pass, Part part, int mb, int chunk, int layer,
                        double fraction = 1.0, std::uint32_t extra_dep = kNoTask,
                        std::int16_t piece = -1) {
    Task t;
    t.type = TaskType::kCompute;
    t.stream = Stream::kCompute;
    t.pass = pass;
    t.part = part;
    t.op = op;
    t.fraction = fraction;
    t.microbatch = mb;
    t.chunk = static_cast<std::int16_t>(chunk);
    t.layer = layer;
    t.piece = piece;
    std::vector<std::uint32_t> deps = blockers;
    deps.push_back(extra_dep);
    if (last_compute != kNoTask) deps.push_back(last_compute);
    blockers.clear();
    last_compute = add_v(t, deps);
    return last_compute;
  }

  std::uint32_t collective(coll::Kind kind, Dim dim, Stream stream, double bytes, int mb, int chunk,
                           int layer, std::vector<std::uint32_t> deps, std::int16_t piece = -1) {
    Task t;
    t.type = TaskType::kCollective;
    t.stream = stream;
    t.dim = dim;
    t.collective = kind;
    t.bytes = bytes;
    t.microbatch = mb;
    t.chunk = static_cast<std::int16_t>(chunk);
    t.layer = layer;
    t.piece = piece;
    return add_v(t, deps);
  }

  // --- TP communication around one op ---------------------------------------------------------

  // Decomposed TP overlap pipelines tp pieces of a collective with tp pieces of its GEMM; bulk
  // overlap runs the whole collective beside an independent GEMM (only backward has one).
  int tp_chunks() const {
    return opt.tp_overlap && opt.tp_overlap_decomposed ? std::max(1, L.par.tp) : 1;
  }
  // Whether the backward's TP collectives run beside the GEMM that does not need them: TP
  // overlap, or Megatron's asynchronous backward communication without it.
  bool backward_overlap() const { return opt.tp_overlap || opt.tp_async_backward; }

  // Under fp8 an SP all-gather before an fp8 GEMM moves the tensor's one-byte copy: Transformer
  // Engine casts the local rows and gathers the fp8 tensor (the norm output before QKV and the
  // MLP, the row-parallel layers' output gradient before their dgrad). Reductions stay 16-bit.
  double gathered_bytes(int op) const {
    const model::Op& o = P.ops[static_cast<std::size_t>(op)];
    const bool fp8_gemm = ps.training.precision == Precision::kFp8 && model::fp8_capable(o);
    return fp8_gemm ? act_bytes / 2 : act_bytes;
  }

  // Collective before the computation `part` of op (forward: SP all-gather of the input; backward:
  // the gathered gradient). Chunk i of the collective feeds chunk i of the computation.
  void comm_then_compute(coll::Kind kind, int op, Pass pass, Part part, int mb, int chunk,
                         int layer, double share = 1.0) {
    const int n = tp_chunks();
    const std::uint32_t producer = last_compute;
    const double bytes = kind == coll::Kind::kAllGather ? gathered_bytes(op) : act_bytes;
    std::vector<std::uint32_t> comm(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      comm[static_cast<std::size_t>(i)] =
          collective(kind, Dim::kTp, Stream::kTp, bytes / n, mb, chunk, layer,
                     {producer}, static_cast<std::int16_t>(n > 1 ? i : -1));
    }
    for (int i = 0; i < n; ++i) {
      compute(op, pass, part, mb, chunk, layer, share / n, comm[static_cast<std::size_t>(i)],
              static_cast<std::int16_t>(n > 1 ? i : -1));
    }
  }

  // Computation `part` followed by a collective of its output; chunk i of the collective follows
  // chunk i of the computation. The next compute task waits for the last chunk.
  void compute_then_comm(coll::Kind kind, int op, Pass pass, Part part, int mb, int chunk,
                         int layer) {
    const int n = tp_chunks();
    std::uint32_t c = kNoTask;
    for (int i = 0; i < n; ++i) {
      const std::uint32_t k = compute(op, pass, part, mb, chunk, layer, 1.0 / n, kNoTask,
                                      static_cast<std::int16_t>(n > 1 ? i : -1));
      c = collective(kind, Dim::kTp, Stream::kTp, act_bytes / n, mb, chunk, layer, {k},
                     static_cast<std::int16_t>(n > 1 ? i : -1));
    }
    blockers.push_back(c);
  }

  bool sp() const { return shard.sp; }
  bool tp() const { return L.par.tp > 1; }

  // Forward (or recompute) of one op with its TP communication.
  void op_forward(int op, Pass pass, int mb, int chunk, int layer) {
    const model::Op& o = P.ops[static_cast<std::size_t>(op)];
    if (tp() && o.tp_comm_before && sp()) {
      comm_then_compute(coll::Kind::kAllGather, op, pass, Part::kForward, mb, chunk, layer);
    } else if (tp() && o.tp_comm_after) {
      compute_then_comm(sp() ? coll::Kind::kReduceScatter : coll::Kind::kAllReduce, op, pass,
                        Part::kForward, mb, chunk, layer);
    } else {
      compute(op, pass, Part::kForward, mb, chunk, layer);
    }
  }

  // Backward of one op: GEMMs as input gradient then weight gradient; the TP communication of
  // the forward mirrored (an all-gather becomes a reduce-scatter of the input gradient and vice
  // versa; without SP the input gradient of a column-parallel op is all-reduced).
  void op_backward(int op, int mb, int chunk, int layer) {
    const model::Op& o = P.ops[static_cast<std::size_t>(op)];
    const bool gemm = o.kind == model::OpKind::kGemm;
    const Part first = gemm ? Part::kDgrad : Part::kBackward;
    // Megatron and Transformer Engine keep only the rank's own rows of an SP-gathered input and
    // gather them again for the weight gradient (ParallelConfig::sp_saves_gathered_input): on
    // the TP stream beside the input-gradient GEMM when TP communication overlaps, before it
    // otherwise; the weight gradient waits for it.
    std::uint32_t regather = kNoTask;
    if (tp() && o.tp_comm_before && sp() && gemm && !L.par.sp_saves_gathered_input) {
      regather = collective(coll::Kind::kAllGather, Dim::kTp, Stream::kTp, gathered_bytes(op), mb,
                            chunk, layer, {last_compute});
      if (!backward_overlap()) blockers.push_back(regather);
    }
    if (tp() && o.tp_comm_after && sp()) {
      comm_then_compute(coll::Kind::kAllGather, op, Pass::kBackward, first, mb, chunk, layer);
    } else if (tp() && o.tp_comm_before) {
      compute_then_comm(sp() ? coll::Kind::kReduceScatter : coll::Kind::kAllReduce, op,
                        Pass::kBackward, first, mb, chunk, layer);
      if (gemm && backward_overlap()) {
        // The weight gradient does not need the reduced input gradient: it runs while the
        // reduction finishes (the blocker stays pending for the next op).
        std::vector<std::uint32_t> pending;
        pending.swap(blockers);
        compute(op, Pass::kBackward, Part::kWgrad, mb, chunk, layer, 1.0, regather);
        blockers.swap(pending);
        return;
      }
    } else {
      compute(op, Pass::kBackward, first, mb, chunk, layer);
    }
    if (gemm) compute(op, Pass::kBackward, Part::kWgrad, mb, chunk, layer, 1.0, regather);
  }

  // --- layers -------------------------------------------------------------------------------

  struct LayerOps {
    std::vector<int> ops;  // indices into P.ops, forward order
    int layer = 0;
    bool moe = false;
  };
  std::vector<LayerOps> layer_ops;  // per global layer of this stage (index - first layer)
  int first_layer_of_stage = 0;

  double kv_bytes() const {
    const double tokens = static_cast<double>(shard.micro_batch) * m.seq_len / L.par.cp;
    return 2.0 * tokens * L.par.cp * m.kv_dim() / L.par.tp * 2.0;
  }
  // The rows an MoE layer dispatches, [tokens·top_k × h] 16-bit, of the micro-batch's whole
  // (CP-local) sequence.
  double moe_rows_bytes() const {
    const double tokens = static_cast<double>(shard.micro_batch) * m.seq_len / L.par.cp;
    return tokens * m.top_k * m.hidden * 2.0;
  }
  // Each rank dispatches its own tokens: with TP (which needs sequence parallelism for MoE in
  // Megatron-Core) a TP rank holds tokens/tp of them, and the TP group all-gathers the dispatched
  // rows after the all-to-all for its TP-sharded experts (Megatron-Core's
  // MoEAlltoAllTokenDispatcher, gather_from_sequence_parallel_region over the expert TP group).
  double a2a_bytes() const { return moe_rows_bytes() / std::max(1, L.par.tp); }

  // The part of the attention core's first op a CP pass runs: its forward, or its backward (an
  // unfused score GEMM's input gradient; its weight gradient follows).
  static Part attention_part(const model::Op& o, bool backward) {
    if (!backward) return Part::kForward;
    return o.kind == model::OpKind::kGemm ? Part::kDgrad : Part::kBackward;
  }

  // Attention with context parallelism: K/V all-gathered in cp−1 pieces over the CP ring; block 0
  // (the local K/V) needs none, block i needs piece i. Backward also reduce-scatters dK/dV.
  void attention_cp(int op, Pass pass, bool backward, int mb, int chunk, int layer) {
    if (opt.cp_all_gather) {
      attention_cp_all_gather(op, pass, backward, mb, chunk, layer);
      return;
    }
    const int n = L.par.cp;
    const std::uint32_t producer = last_compute;
    const double piece_bytes = kv_bytes() / (n - 1);
    std::vector<std::uint32_t> ag;
    for (int i = 1; i < n; ++i) {
      ag.push_back(collective(coll::Kind::kAllGather, Dim::kCp, Stream::kCp, piece_bytes, mb,
                              chunk, layer, {producer}, static_cast<std::int16_t>(i)));
    }
    const model::Op& o = P.ops[static_cast<std::size_t>(op)];
    const Part part = attention_part(o, backward);
    std::uint32_t last_rs = kNoTask;
    for (int i = 0; i < n; ++i) {
      const std::uint32_t k =
          compute(op, pass, part, mb, chunk, layer, 1.0 / n,
                  i == 0 ? kNoTask : ag[static_cast<std::size_t>(i - 1)],
                  static_cast<std::int16_t>(i));
      if (backward && i > 0) {
        last_rs = collective(coll::Kind::kReduceScatter, Dim::kCp, Stream::kCp, piece_bytes, mb,
                             chunk, layer, {k}, static_cast<std::int16_t>(i));
      }
    }
    if (backward && o.kind == model::OpKind::kGemm) {
      compute(op, pass, Part::kWgrad, mb, chunk, layer);
    }
    if (last_rs != kNoTask) blockers.push_back(last_rs);
  }

  // All-gather CP (framework.cp_comm all-gather, Llama 3 §3.3.2): the whole K/V gathered before
  // the attention (which waits for it), dK/dV reduce-scattered after its backward (the next op
  // waits), nothing pipelined with the attention blocks.
  void attention_cp_all_gather(int op, Pass pass, bool backward, int mb, int chunk, int layer) {
    const std::uint32_t ag = collective(coll::Kind::kAllGather, Dim::kCp, Stream::kCp, kv_bytes(),
                                        mb, chunk, layer, {last_compute});
    const model::Op& o = P.ops[static_cast<std::size_t>(op)];
    const Part part = attention_part(o, backward);
    const std::uint32_t k = compute(op, pass, part, mb, chunk, layer, 1.0, ag);
    if (backward && o.kind == model::OpKind::kGemm) {
      compute(op, pass, Part::kWgrad, mb, chunk, layer);
    }
    if (backward) {
      blockers.push_back(collective(coll::Kind::kReduceScatter, Dim::kCp, Stream::kCp, kv_bytes(),
                                    mb, chunk, layer, {k}));
    }
  }

  // The EP all-to-all (dispatch before the experts, combine after), blocking the compute stream.
  std::uint32_t all_to_all(int mb, int chunk, int layer, std::uint32_t dep) {
    return collective(coll::Kind::kAllToAll, Dim::kEp, Stream::kEp, a2a_bytes(), mb, chunk, layer,
                      {dep});
  }

  // With TP the experts are TP-sharded: the dispatched rows are all-gathered over the TP group
  // after the dispatch all-to-all, and the experts' output reduce-scattered before the combine
  // one (backward: the other way round), each after the other and blocking the compute stream.
  std::uint32_t moe_tp(coll::Kind kind, int mb, int chunk, int layer, std::uint32_t dep) {
    return collective(kind, Dim::kTp, Stream::kTp, moe_rows_bytes(), mb, chunk, layer, {dep});
  }
  // Before expert_up (forward) or expert_down's backward: the rows arrive.
  void moe_dispatch(int mb, int chunk, int layer) {
    std::uint32_t last = last_compute;
    if (L.par.ep > 1) last = all_to_all(mb, chunk, layer, last);
    if (L.par.tp > 1) last = moe_tp(coll::Kind::kAllGather, mb, chunk, layer, last);
    if (last != last_compute) blockers.push_back(last);
  }
  // After expert_down (forward) or expert_up's backward: the rows go back.
  void moe_combine(int mb, int chunk, int layer) {
    std::uint32_t last = last_compute;
    if (L.par.tp > 1) last = moe_tp(coll::Kind::kReduceScatter, mb, chunk, layer, last);
    if (L.par.ep > 1) last = all_to_all(mb, chunk, layer, last);
    if (last != last_compute) blockers.push_back(last);
  }

  // Block recompute (training.recompute_layers = N): the first N layers of each model chunk
  // recompute (Megatron-Core counts --recompute-num-layers per virtual pipeline stage).
  bool recomputed_in_full(int layer) const {
    const int n = ps.training.recompute_layers;
    if (n <= 0) return true;
    for (int c = 0; c < L.par.vpp; ++c) {
      const auto [first, count] = L.chunk_layers(stage, c);
      if (layer >= first && layer < first + count) return layer - first < n;
    }
    return false;
  }

  bool first_attention_core(const LayerOps& lo, std::size_t i) const {
    for (std::size_t j = 0; j < lo.ops.size(); ++j) {
      if (model::attention_core(P.ops[static_cast<std::size_t>(lo.ops[j])])) return j == i;
    }
    return false;
  }

  void layer_forward(const LayerOps& lo, Pass pass, int mb, int chunk) {
    for (std::size_t i = 0; i < lo.ops.size(); ++i) {
      const int op = lo.ops[i];
      const model::Op& o = P.ops[static_cast<std::size_t>(op)];
      if (lo.moe && o.name == "expert_up") moe_dispatch(mb, chunk, lo.layer);
      if (L.par.cp > 1 && first_attention_core(lo, i)) {
        attention_cp(op, pass, false, mb, chunk, lo.layer);
      } else {
        op_forward(op, pass, mb, chunk, lo.layer);
      }
      if (lo.moe && o.name == "expert_down") moe_combine(mb, chunk, lo.layer);
    }
  }

  void layer_backward(const LayerOps& lo, int mb, int chunk) {
    model::Recompute rc = ps.training.recompute;
    if (rc == model::Recompute::kFull && !recomputed_in_full(lo.layer)) rc = model::Recompute::kNone;
    if (rc == model::Recompute::kFull) {
      layer_forward(lo, Pass::kRecompute, mb, chunk);
    } else if (rc == model::Recompute::kSelective || rc == model::Recompute::kSelectiveOp) {
      // The ops (or, under selective-op, the matmuls' shares) whose outputs are not kept run
      // again in forward order (model::recompute_share); under TP (with SP, CP 1) selective-op
      // replays a column-parallel op's all-gather before its share, while the reduce-scatters'
      // outputs are kept.
      for (int op : lo.ops) {
        const model::Op& o = P.ops[static_cast<std::size_t>(op)];
        const double share = model::recompute_share(ps.model, o, rc);
        if (share <= 0) continue;
        const int n = o.kind == model::OpKind::kGemm && o.batch <= 1 && tp() &&
                              (o.tp_comm_before || o.tp_comm_after)
                          ? tp_chunks()
                          : 1;
        if (tp() && sp() && o.tp_comm_before) {
          comm_then_compute(coll::Kind::kAllGather, op, Pass::kRecompute, Part::kForward, mb,
                            chunk, lo.layer, share);
        } else {
          for (int i = 0; i < n; ++i) {
            compute(op, Pass::kRecompute, Part::kForward, mb, chunk, lo.layer, share / n, kNoTask,
                    static_cast<std::int16_t>(n > 1 ? i : -1));
          }
        }
      }
    }
    for (std::size_t r = lo.ops.size(); r-- > 0;) {
      const int op = lo.ops[r];
      const model::Op& o = P.ops[static_cast<std::size_t>(op)];
      if (lo.moe && o.name == "expert_down") moe_dispatch(mb, chunk, lo.layer);
      if (L.par.cp > 1 && first_attention_core(lo, r)) {
        attention_cp(op, Pass::kBackward, true, mb, chunk, lo.layer);
      } else {
        op_backward(op, mb, chunk, lo.layer);
      }
      if (lo.moe && o.name == "expert_up") moe_combine(mb, chunk, lo.layer);
    }
  }

  // --- pipeline ---------------------------------------------------------------------------

  struct ChunkInfo {
    int first_layer = 0, layers = 0;
    bool embedding = false, head = false;
    bool has_prev = false, has_next = false;  // receives activations / sends them on
    std::vector<int> embedding_ops, head_ops;
    // DP buckets of this chunk: bucket b covers the layers [bucket_first[b], bucket_first[b+1])
    // (relative to first_layer), reduced after the backward of its first layer.
    std::vector<int> bucket_first;
    std::vector<double> bucket_dense, bucket_expert;  // parameters per bucket
    // Per layer of the chunk: the gradient-accumulation op of the chunk's first backward of the
    // iteration and of the others (plan::GradAccumulation), -1 where none runs.
    std::vector<int> accumulate_first, accumulate_other;
    // Per DP bucket: the copy of its gathered parameters into the unsharded ones on the compute
    // stream after each gather (Optimizations::fsdp_copy_out), -1 where none runs.
    std::vector<int> copy_out;
    // Per DP bucket: the copy of its gradients into the reduce-scatter's flat buffer on the
    // compute stream before each reduction (Optimizations::fsdp_copy_in), -1 where none runs.
    std::vector<int> copy_in;
    // Per DP bucket: the 1/DP scaling pass over its gradients on the compute stream before each
    // reduction (Optimizations::grad_scale_pass), -1 where none runs.
    std::vector<int> scale;
    int accumulate_embedding[2] = {-1, -1};  // [first backward, the others]
    int accumulate_head[2] = {-1, -1};
  };
  std::vector<ChunkInfo> chunks;
  std::vector<char> chunk_backward_seen;  // per chunk: a backward of it has been emitted

  // Pipeline point-to-point tasks.
  std::uint32_t recv(Stream s, int mb, int chunk) {
    Task t;
    t.type = TaskType::kRecv;
    t.stream = s;
    t.dim = Dim::kPp;
    t.bytes = p2p_bytes;
    t.microbatch = mb;
    t.chunk = static_cast<std::int16_t>(chunk);
    // Without PP overlap the receive is posted when the compute stream gets to it (together with
    // the send of the previous step, as Megatron's batched send/recv pairs); with it, ahead.
    const std::uint32_t id = opt.pp_overlap ? add(t, {}) : add(t, {last_compute});
    if (!p2p_gather) return id;
    // Scatter-gather: the received 1/tp is all-gathered over the TP group on the receive stream
    // (Megatron-LM's gather_split_1d_tensor after the receive); the compute waits for it.
    return collective(coll::Kind::kAllGather, Dim::kTp, s, act_bytes, mb, chunk, -1, {id});
  }
  void send(Stream s, int mb, int chunk) {
    Task t;
    t.type = TaskType::kSend;
    t.stream = s;
    t.dim = Dim::kPp;
    t.bytes = p2p_bytes;
    t.microbatch = mb;
    t.chunk = static_cast<std::int16_t>(chunk);
    const std::uint32_t id = add(t, {last_compute});
    if (!opt.pp_overlap) blockers.push_back(id);
  }

  // DP bookkeeping
  std::vector<std::uint32_t> grad_reductions;  // every DP gradient task
  std::vector<std::vector<std::uint32_t>> gather_of;  // [chunk][bucket]

  double grad_bytes_per_param() const { return bytes_per_element(ps.training.grad_reduce); }

  // The dense gradients are reduced over DP·CP (Dim::kDp's group), so CP alone needs the
  // reduction too.
  bool dense_dp() const { return L.par.dp * L.par.cp > 1; }

  // What the compute stream does to bucket b's gradients before their reduction: FSDP2's copy
  // into the reduce-scatter's input, Megatron's 1/DP scaling; the reduction follows them.
  void pre_reduce(const ChunkInfo& ci, std::size_t b, int mb, int chunk) {
    const int layer = ci.first_layer + ci.bucket_first[b];
    for (const std::vector<int>* ops : {&ci.copy_in, &ci.scale}) {
      if (b < ops->size() && (*ops)[b] >= 0) {
        compute((*ops)[b], Pass::kBackward, Part::kWhole, mb, chunk, layer);
      }
    }
  }
  // `pre`: run the bucket's pre-reduction passes first (pre_reduce), unless the caller did.
  void dp_grad_bucket(const ChunkInfo& ci, std::size_t b, int mb, int chunk, bool pre = true) {
    if (!dense_dp()) return;
    if (pre) pre_reduce(ci, b, mb, chunk);
    const bool zero = L.par.zero >= 1;
    const coll::Kind kind = zero ? coll::Kind::kReduceScatter : coll::Kind::kAllReduce;
    const double dense = ci.bucket_dense[b], expert = ci.bucket_expert[b];
    const int layer = ci.first_layer + ci.bucket_first[b];
    if (dense > 0) {
      grad_reductions.push_back(collective(kind, Dim::kDp, Stream::kDp,
                                           dense * grad_bytes_per_param(), mb, chunk, layer,
                                           {last_compute}, static_cast<std::int16_t>(b)));
    }
    if (expert > 0 && L.par.dp / L.par.ep * L.par.cp > 1) {
      grad_reductions.push_back(collective(kind, Dim::kExpertDp, Stream::kDp,
                                           expert * grad_bytes_per_param(), mb, chunk, layer,
                                           {last_compute}, static_cast<std::int16_t>(b)));
    }
  }

  std::uint32_t dp_gather_bucket(const ChunkInfo& ci, std::size_t b, int mb, int chunk,
                                 std::uint32_t dep) {
    std::uint32_t last = kNoTask;
    const int layer = ci.first_layer + ci.bucket_first[b];
    if (ci.bucket_dense[b] > 0) {
      last = collective(coll::Kind::kAllGather, Dim::kDp, Stream::kDp, ci.bucket_dense[b] * 2.0,
                        mb, chunk, layer, {dep}, static_cast<std::int16_t>(b));
    }
    if (ci.bucket_expert[b] > 0 && L.par.dp / L.par.ep * L.par.cp > 1) {
      last = collective(coll::Kind::kAllGather, Dim::kExpertDp, Stream::kDp,
                        ci.bucket_expert[b] * 2.0, mb, chunk, layer, {dep},
                        static_cast<std::int16_t>(b));
    }
    return last;
  }

  // FSDP2's copy-out of bucket b's gathered parameters (Optimizations::fsdp_copy_out): a compute
  // task that waits for the gather (the pending blockers) and that the bucket's layers follow.
  void copy_out(const ChunkInfo& ci, std::size_t b, std::uint32_t gather, Pass pass, int mb,
                int chunk) {
    if (gather == kNoTask || b >= ci.copy_out.size() || ci.copy_out[b] < 0) return;
    compute(ci.copy_out[b], pass, Part::kWhole, mb, chunk, ci.first_layer + ci.bucket_first[b]);
  }
  void copy_out_all(const ChunkInfo& ci, const std::vector<std::uint32_t>& gathers, Pass pass,
                    int mb, int chunk) {
    for (std::size_t b = 0; b < gathers.size(); ++b) copy_out(ci, b, gathers[b], pass, mb, chunk);
  }

  // Parameter gathers ahead of a pass (ZeRO-1/2: once per iteration before the first forward;
  // ZeRO-3: before every forward and backward of the chunk). With DP overlap each bucket's gather
  // feeds the first op of its layers; without, the pass waits for all of them.
  // A backward pass issues them in the order it needs them, its last bucket first (FSDP's
  // backward prefetch walks the blocks in reverse); until program-26 it issued them in forward
  // order, so the backward's first layer waited for every gather of the chunk.
  std::vector<std::uint32_t> pass_gathers;  // per bucket of the chunk being computed
  // `after`: a task the gathers wait for, but for the chunk's first bucket when `first_free`.
  void gathers_for_chunk(int chunk, int mb, bool backward_order = false,
                         std::uint32_t after = kNoTask, bool first_free = false) {
    pass_gathers.clear();
    if (!dense_dp() || L.par.zero == 0) return;
    const ChunkInfo& ci = chunks[static_cast<std::size_t>(chunk)];
    const std::size_t n = ci.bucket_first.size();
    pass_gathers.assign(n, kNoTask);
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t b = backward_order ? n - 1 - k : k;
      pass_gathers[b] = dp_gather_bucket(ci, b, mb, chunk, b == 0 && first_free ? kNoTask : after);
    }
  }

  void forward(int mb, int chunk, bool emit_send = true) {
    const ChunkInfo& ci = chunks[static_cast<std::size_t>(chunk)];
    if (ci.has_prev) blockers.push_back(recv(Stream::kPpRecvPrev, mb, chunk));
    // ZeRO-3 without DP overlap gathers on demand: a pass's gathers start when the compute stream
    // reaches it (what `dp_overlap: false` means here: the DP collectives serialized with the
    // compute, as on one stream; FSDP without prefetch would still overlap the next gather with
    // the compute its host has already issued, which is DP overlap in these terms), not
    // ahead of it. (Until program-34 they waited for nothing but the DP stream, so a backward's
    // gathers ran beside its forward: the executed schedule hid one of a micro-batch's two
    // gathers that the closed form, rightly, exposes.)
    if (L.par.zero >= 3) gathers_for_chunk(chunk, mb, false, opt.dp_overlap ? kNoTask : last_compute);
    if (!opt.dp_overlap) {
      for (std::uint32_t g : pass_gathers) blockers.push_back(g);
      copy_out_all(ci, pass_gathers, Pass::kForward, mb, chunk);
    }
    if (ci.embedding) {
      for (int op : ci.embedding_ops) op_forward(op, Pass::kForward, mb, chunk, -1);
    }
    std::size_t bucket = 0;
    for (int i = 0; i < ci.layers; ++i) {
      if (opt.dp_overlap && bucket < pass_gathers.size() &&
          ci.bucket_first[bucket] == i) {
        if (pass_gathers[bucket] != kNoTask) blockers.push_back(pass_gathers[bucket]);
        copy_out(ci, bucket, pass_gathers[bucket], Pass::kForward, mb, chunk);
        ++bucket;
      }
      layer_forward(layer_ops[static_cast<std::size_t>(ci.first_layer + i - first_layer_of_stage)],
                    Pass::kForward, mb, chunk);
    }
    if (ci.head) {
      for (int op : ci.head_ops) op_forward(op, Pass::kForward, mb, chunk, -1);
    }
    if (ci.has_next && emit_send) send(Stream::kPpSendNext, mb, chunk);
    if (L.par.zero < 3) pass_gathers.clear();  // the iteration's gathers were waited for once
  }

  // `pre_recv`: the gradient receive, already posted (batched schedules); kNoTask to post it here.
  void backward(int mb, int chunk, bool last_mb_of_chunk, std::uint32_t pre_recv = kNoTask,
                bool emit_send = true) {
    const ChunkInfo& ci = chunks[static_cast<std::size_t>(chunk)];
    if (ci.has_next) {
      blockers.push_back(pre_recv != kNoTask ? pre_recv : recv(Stream::kPpRecvNext, mb, chunk));
    }
    if (L.par.zero >= 3) {
      gathers_for_chunk(chunk, mb, /*backward_order=*/true,
                        opt.dp_overlap ? kNoTask : last_compute);
      if (!opt.dp_overlap) {
        for (std::uint32_t g : pass_gathers) blockers.push_back(g);
        copy_out_all(ci, pass_gathers, Pass::kBackward, mb, chunk);
      }
    }
    // With DP overlap and a copy-out, a bucket's backward waits for its gather and copy (its
    // first layer in backward is its last); without a copy-out it does not wait (the gather is
    // issued ahead and the Program leaves it unordered, as before program-23).
    const bool wait_gathers = L.par.zero >= 3 && opt.dp_overlap && opt.fsdp_copy_out;
    // Gradients are reduced every micro-batch under ZeRO-2/3 (only a shard is kept), once after
    // the last micro-batch otherwise; with DP overlap bucket by bucket as they complete.
    const bool reduce_now = L.par.zero >= 2 || last_mb_of_chunk;
    char& seen = chunk_backward_seen[static_cast<std::size_t>(chunk)];
    const int which = seen != 0 ? 1 : 0;  // gradient accumulation: the chunk's first backward?
    const std::vector<int>& accumulate = which != 0 ? ci.accumulate_other : ci.accumulate_first;
    seen = 1;
    if (ci.head) {
      for (std::size_t r = ci.head_ops.size(); r-- > 0;) op_backward(ci.head_ops[r], mb, chunk, -1);
      if (ci.accumulate_head[which] >= 0) {
        compute(ci.accumulate_head[which], Pass::kBackward, Part::kWhole, mb, chunk, -1);
      }
      // A chunk without layers reduces its one bucket (the head's) here.
      if (ci.layers == 0 && !ci.embedding && reduce_now && opt.dp_overlap &&
          !ci.bucket_first.empty()) {
        dp_grad_bucket(ci, 0, L.par.zero >= 2 ? mb : -1, chunk);
      }
    }
    int bucket = static_cast<int>(ci.bucket_first.size()) - 1;
    for (int i = ci.layers - 1; i >= 0; --i) {
      const LayerOps& lo =
          layer_ops[static_cast<std::size_t>(ci.first_layer + i - first_layer_of_stage)];
      if (wait_gathers && bucket >= 0) {
        const auto b = static_cast<std::size_t>(bucket);
        const int last = b + 1 < ci.bucket_first.size() ? ci.bucket_first[b + 1] - 1 : ci.layers - 1;
        if (i == last && b < pass_gathers.size()) {
          if (pass_gathers[b] != kNoTask) blockers.push_back(pass_gathers[b]);
          copy_out(ci, b, pass_gathers[b], Pass::kBackward, mb, chunk);
        }
      }
      layer_backward(lo, mb, chunk);
      // The layer's weight gradients summed into the accumulator (its bucket's reduction
      // follows it).
      if (!accumulate.empty() && accumulate[static_cast<std::size_t>(i)] >= 0) {
        compute(accumulate[static_cast<std::size_t>(i)], Pass::kBackward, Part::kWhole, mb, chunk,
                lo.layer);
      }
      if (bucket >= 0 && ci.bucket_first[static_cast<std::size_t>(bucket)] == i) {
        if (reduce_now && opt.dp_overlap && (!ci.embedding || bucket > 0)) {
          dp_grad_bucket(ci, static_cast<std::size_t>(bucket), L.par.zero >= 2 ? mb : -1, chunk);
        }
        --bucket;
      }
    }
    if (ci.embedding) {
      for (std::size_t r = ci.embedding_ops.size(); r-- > 0;) {
        op_backward(ci.embedding_ops[r], mb, chunk, -1);
      }
      if (ci.accumulate_embedding[which] >= 0) {
        compute(ci.accumulate_embedding[which], Pass::kBackward, Part::kWhole, mb, chunk, -1);
      }
      if (reduce_now && opt.dp_overlap && !ci.bucket_first.empty()) {
        dp_grad_bucket(ci, 0, L.par.zero >= 2 ? mb : -1, chunk);
      }
    }
    if (reduce_now && !opt.dp_overlap && L.par.zero >= 2) {
      // Without DP overlap the shard's reduce-scatters run after the backward and the compute
      // stream waits for them (as the ZeRO-3 gathers above): nothing of the next micro-batch
      // hides them, as the analytic fidelity has it.
      const std::size_t before = grad_reductions.size();
      for (std::size_t b = 0; b < ci.bucket_first.size(); ++b) {
        dp_grad_bucket(ci, b, mb, chunk);
      }
      blockers.insert(blockers.end(), grad_reductions.begin() + static_cast<std::ptrdiff_t>(before),
                      grad_reductions.end());
    }
    if (ci.has_prev && emit_send) send(Stream::kPpSendPrev, mb, chunk);
  }

  void build();
};

void Builder::build() {
  const auto& par = L.par;
  const int p = par.pp, v = par.vpp;
  microbatches = L.microbatches;
  const double tokens = static_cast<double>(shard.micro_batch) * m.seq_len / par.cp;
  act_bytes = tokens * m.hidden * 2.0;
  // framework.pp_activation (plan::Optimizations::pp_activation): SP shards the activation, so
  // each TP rank sends its 1/tp; without SP, scatter-gather sends 1/tp and all-gathers it at the
  // receiver, full sends the whole tensor from every TP rank.
  const bool sharded = par.tp == 1 || par.sp;
  const bool whole = !sharded && opt.pp_activation == PpActivation::kFull;
  p2p_gather = !sharded && !whole;
  p2p_bytes = whole ? act_bytes : act_bytes / par.tp;

  // Ops of every layer this stage holds, and of the embedding and head.
  int lo_layer = m.layers, hi_layer = 0;
  for (int c = 0; c < v; ++c) {
    auto [first, n] = L.chunk_layers(stage, c);
    lo_layer = std::min(lo_layer, first);
    hi_layer = std::max(hi_layer, first + n);
  }
  first_layer_of_stage = lo_layer;
  for (int layer = lo_layer; layer < hi_layer; ++layer) {
    LayerOps lo;
    lo.layer = layer;
    lo.moe = m.is_moe_layer(layer);
    for (const model::Op& op : model::layer_forward_ops(m, shard, layer)) {
      lo.ops.push_back(add_op(op));
    }
    layer_ops.push_back(std::move(lo));
  }

  const model::ParamCount pc = model::count_parameters(m);
  const double t = par.tp;
  // Megatron's DDP bucket size (plan::BucketRule).
  const double bucket_params = dp_bucket_params(opt.dp_buckets, par.dp);
  for (int c = 0; c < v; ++c) {
    ChunkInfo ci;
    std::tie(ci.first_layer, ci.layers) = L.chunk_layers(stage, c);
    const int j = c * p + stage;  // model chunk index
    ci.embedding = j == 0;
    ci.head = j == p * v - 1;
    ci.has_prev = p > 1 && j > 0;
    ci.has_next = p > 1 && j < p * v - 1;
    if (ci.embedding) {
      for (const model::Op& op : model::embedding_forward_ops(m, shard)) {
        ci.embedding_ops.push_back(add_op(op));
      }
    }
    if (ci.head) {
      for (const model::Op& op : model::head_forward_ops(m, shard)) {
        ci.head_ops.push_back(add_op(op));
      }
    }
    // Parameters of the chunk (per GPU, before ZeRO sharding) split into DP buckets by layers.
    // The embedding's go with the chunk's first layer, the head's with its last: the output
    // layer, or, tied, the second copy of the table the last stage keeps when PP > 1 (as
    // plan::stage_parameters counts them; with PP 1 the stage's one table is the embedding's).
    const double out = m.tied_embeddings ? static_cast<double>(m.vocab) * m.hidden : pc.output;
    const bool own_output = stage != 0 || !m.tied_embeddings;
    double dense = 0, expert = 0;
    std::vector<double> layer_dense, layer_expert;
    std::vector<double> layer_own;  // the layer's own dense parameters (gradient accumulation)
    for (int i = 0; i < ci.layers; ++i) {
      const bool moe = m.is_moe_layer(ci.first_layer + i);
      double d = pc.attention / t + pc.norms + (moe ? 0.0 : pc.mlp / t);
      double e = moe ? pc.expert_mlp / t / par.ep : 0.0;
      layer_own.push_back(d);
      if (i == 0 && ci.embedding) d += model::embedding_params_per_rank(m, pc, par.tp);
      if (i == ci.layers - 1 && ci.head) {
        if (own_output) d += out / t;
        d += pc.final_norm;
      }
      layer_dense.push_back(d);
      layer_expert.push_back(e);
      dense += d;
      expert += e;
    }
    const double embedding_params =
        ci.embedding ? model::embedding_params_per_rank(m, pc, par.tp) : 0.0;
    const double head_params = ci.head ? (own_output ? out / t : 0.0) + pc.final_norm : 0.0;
    if (opt.grad_accumulation != GradAccumulation::kInGemm) {
      // One op per layer, and one for the embedding and the head, per case (a chunk's first
      // backward or the others): the parameters on this GPU in their tensors. Under ZeRO >= 2
      // the gradients are reduce-scattered every micro-batch (backward()), so the sum runs on
      // this GPU's shard.
      const double dense_shard = par.zero >= 2 ? par.zero_group() : 1;
      const double expert_shard =
          par.zero >= 2 ? std::max(1.0, static_cast<double>(par.zero_group()) / par.ep) : 1;
      const auto ops_for = [&](double params, int tensors, int& first_op, int& other_op) {
        for (const bool first : {true, false}) {
          const double bytes = grad_accumulation_bytes_per_param(opt.grad_accumulation, first);
          int index = -1;
          if (bytes > 0 && params > 0) {
            model::Op o;
            o.name = "grad_accumulate";
            o.kind = model::OpKind::kMemory;
            o.bytes = params * bytes;
            o.kernels = tensors;
            o.kernel = "grad_accumulate";
            index = add_op(o);
          }
          (first ? first_op : other_op) = index;
        }
      };
      for (int i = 0; i < ci.layers; ++i) {
        const bool moe = m.is_moe_layer(ci.first_layer + i);
        const int tensors = pc.attention_tensors + pc.norm_tensors +
                            (moe ? m.experts / par.ep * pc.expert_tensors + 1 : pc.mlp_tensors);
        const double e = layer_expert[static_cast<std::size_t>(i)];
        const double params = layer_own[static_cast<std::size_t>(i)] / dense_shard + e / expert_shard;
        int first_op = -1, other_op = -1;
        ops_for(params, tensors, first_op, other_op);
        ci.accumulate_first.push_back(first_op);
        ci.accumulate_other.push_back(other_op);
      }
      if (ci.embedding) {
        ops_for(embedding_params / dense_shard,
                m.position == model::PositionKind::kLearned ? 2 : 1, ci.accumulate_embedding[0],
                ci.accumulate_embedding[1]);
      }
      if (ci.head) {
        ops_for(head_params / dense_shard, (own_output ? 1 : 0) + pc.final_norm_tensors,
                ci.accumulate_head[0], ci.accumulate_head[1]);
      }
    }
    const int buckets = dp_bucket_count(dense + expert, bucket_params, ci.layers);
    for (int b = 0; b < buckets; ++b) {
      const int from = b * ci.layers / buckets, to = (b + 1) * ci.layers / buckets;
      ci.bucket_first.push_back(from);
      double bd = 0, be = 0;
      for (int i = from; i < to; ++i) {
        bd += layer_dense[static_cast<std::size_t>(i)];
        be += layer_expert[static_cast<std::size_t>(i)];
      }
      // A chunk without layers (first/last_stage_layers below the chunk count) still holds the
      // embedding or the head: its one bucket does.
      if (ci.layers == 0) bd += embedding_params + head_params;
      ci.bucket_dense.push_back(bd);
      ci.bucket_expert.push_back(be);
      int copy = -1;
      if (opt.fsdp_copy_out && par.zero >= 1 && bd + be > 0) {
        // The gathered buffer read and the unsharded parameters written, 16-bit each.
        model::Op o;
        o.name = "param_copy_out";
        o.kind = model::OpKind::kMemory;
        o.bytes = 4.0 * (bd + be);
        o.backward_bytes = o.bytes;
        o.kernel = "copy";
        copy = add_op(o);
      }
      ci.copy_out.push_back(copy);
      // FSDP2's reduce-scatter copy-in: the bucket's 16-bit gradients read, written in the reduce
      // dtype, for the parameters some reduction covers (the dense ones over DP·CP, the expert
      // ones over their expert-data-parallel group).
      int copy_in = -1;
      const double reduced =
          (dense_dp() ? bd : 0.0) + (par.dp / par.ep * par.cp > 1 ? be : 0.0);
      if (opt.fsdp_copy_in && par.zero >= 1 && reduced > 0) {
        model::Op o;
        o.name = "grad_copy_in";
        o.kind = model::OpKind::kMemory;
        o.bytes = (2.0 + bytes_per_element(ps.training.grad_reduce)) * reduced;
        o.backward_bytes = o.bytes;
        o.kernel = "copy";
        copy_in = add_op(o);
      }
      ci.copy_in.push_back(copy_in);
      // Megatron's scaling by 1/DP: the bucket's gradients read and written in the reduce dtype,
      // before the one reduction of the iteration (ZeRO 0/1: Megatron's DDP and distributed
      // optimizer; ZeRO-2/3 reductions are other frameworks' code, whose division is not this).
      int scale = -1;
      if (opt.grad_scale_pass && par.zero <= 1 && reduced > 0) {
        model::Op o;
        o.name = "grad_scale";
        o.kind = model::OpKind::kMemory;
        o.bytes = 2.0 * bytes_per_element(ps.training.grad_reduce) * reduced;
        o.backward_bytes = o.bytes;
        o.kernel = "copy";
        scale = add_op(o);
      }
      ci.scale.push_back(scale);
    }
    chunks.push_back(std::move(ci));
  }
  chunk_backward_seen.assign(chunks.size(), 0);

  // Data loading (host stall) unless the data pipeline is asynchronous.
  std::uint32_t data_loading = kNoTask;
  if (!opt.async_data_pipeline) {
    model::Op data;
    data.name = "data_loading";
    data.kind = model::OpKind::kMemory;
    data.kernels = 0;
    data_loading = compute(add_op(data), Pass::kData, Part::kWhole, -1, -1, -1);
  }

  // ZeRO-1/2: the parameters updated by the previous step's optimizer are gathered before the
  // forward (with DP overlap bucket by bucket, each before its layers). Without DP overlap the
  // step gathers them all (Megatron's distributed optimizer at the end of step()), and the GPU
  // runs them while the host loads the next batch. With it (Megatron-Core's
  // overlap_param_gather) only the first bucket's gather is dispatched before the loading (by
  // optimizer.zero_grad() at the start of the step: distrib_optimizer.py,
  // step_with_ready_grads); each later one is dispatched by the forward pre-hook of the bucket
  // before it, once the host is past the loading (param_and_grad_buffer.py, finish_param_sync).
  // Until program-32 every bucket's gather ran during the loading stall.
  if (par.dp * par.cp > 1 && par.zero >= 1 && par.zero < 3) {
    for (int c = 0; c < v; ++c) {
      if (opt.dp_overlap) {
        gathers_for_chunk(c, -1, false, data_loading, c == 0);
      } else {
        gathers_for_chunk(c, -1);
      }
      gather_of.push_back(pass_gathers);
      // Without DP overlap the first forward waits for the whole gather (and its copy-out).
      if (!opt.dp_overlap) {
        blockers.insert(blockers.end(), pass_gathers.begin(), pass_gathers.end());
        copy_out_all(chunks[static_cast<std::size_t>(c)], pass_gathers, Pass::kForward, 0, c);
      }
    }
    pass_gathers.clear();
  }

  // Pipeline schedule: the order of (micro-batch, chunk) forwards and backwards on this stage.
  struct Step {
    bool fwd;
    int mb, chunk;
  };
  std::vector<Step> steps;
  const int M = microbatches;
  auto fwd_of = [&](int k) {
    if (v == 1) return Step{true, k, 0};
    const int chunk = (k / p) % v;
    return Step{true, (k / (p * v)) * p + k % p, chunk};
  };
  auto bwd_of = [&](int k) {
    if (v == 1) return Step{false, k, 0};
    const int chunk = v - 1 - (k / p) % v;
    return Step{false, (k / (p * v)) * p + k % p, chunk};
  };
  const int total = M * v;
  int warmup = 0;
  switch (par.schedule) {
    case Schedule::kGpipe: warmup = total; break;
    case Schedule::k1F1B: warmup = std::min(p - stage - 1, total); break;
    case Schedule::kInterleaved: warmup = std::min((p - stage - 1) * 2 + (v - 1) * p, total); break;
  }
  for (int k = 0; k < warmup; ++k) steps.push_back(fwd_of(k));
  for (int i = 0; i + warmup < total; ++i) {
    steps.push_back(fwd_of(warmup + i));
    steps.push_back(bwd_of(i));
  }
  for (int i = total - warmup; i < total; ++i) steps.push_back(bwd_of(i));

  // Backward passes left per chunk, to know the last micro-batch of each chunk.
  std::vector<int> backward_left(static_cast<std::size_t>(v), M);
  std::vector<bool> gathered(static_cast<std::size_t>(v), false);
  auto do_forward = [&](const Step& s, bool emit_send) {
    if (opt.dp_overlap && !gather_of.empty() && !gathered[static_cast<std::size_t>(s.chunk)]) {
      pass_gathers = gather_of[static_cast<std::size_t>(s.chunk)];
      gathered[static_cast<std::size_t>(s.chunk)] = true;
    }
    forward(s.mb, s.chunk, emit_send);
  };
  auto last_of_chunk = [&](const Step& s) {
    return --backward_left[static_cast<std::size_t>(s.chunk)] == 0;
  };
  // Interleaved 1F1B without PP overlap runs Megatron's batched exchange in the steady state:
  // after the forward and the backward of a step, both sends and the next receives go out
  // together (send_forward_backward_recv_forward_backward), so the compute stream does not wait
  // between the two halves of a step.
  const bool batched = par.schedule == Schedule::kInterleaved && !opt.pp_overlap && p > 1;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    const bool pair = batched && s.fwd && i + 1 < steps.size() && !steps[i + 1].fwd &&
                      static_cast<int>(i) >= warmup;
    if (pair) {
      const Step& b = steps[i + 1];
      const ChunkInfo& fc = chunks[static_cast<std::size_t>(s.chunk)];
      const ChunkInfo& bc = chunks[static_cast<std::size_t>(b.chunk)];
      const std::uint32_t pre = bc.has_next ? recv(Stream::kPpRecvNext, b.mb, b.chunk) : kNoTask;
      do_forward(s, false);
      backward(b.mb, b.chunk, last_of_chunk(b), pre, false);
      if (fc.has_next) send(Stream::kPpSendNext, s.mb, s.chunk);
      if (bc.has_prev) send(Stream::kPpSendPrev, b.mb, b.chunk);
      ++i;
      continue;
    }
    if (s.fwd) {
      do_forward(s, true);
    } else {
      backward(s.mb, s.chunk, last_of_chunk(s));
    }
  }

  // Without DP overlap the whole gradient is reduced after the last backward (ZeRO-0/1): every
  // buffer scaled first (Megatron-LM's distributed optimizer divides each chunk's buffer, then
  // reduce-scatters them), then the reductions.
  if (!opt.dp_overlap && par.zero < 2) {
    for (int c = 0; c < v; ++c) {
      const ChunkInfo& ci = chunks[static_cast<std::size_t>(c)];
      for (std::size_t b = 0; b < ci.bucket_first.size(); ++b) pre_reduce(ci, b, -1, c);
    }
    for (int c = 0; c < v; ++c) {
      const ChunkInfo& ci = chunks[static_cast<std::size_t>(c)];
      for (std::size_t b = 0; b < ci.bucket_first.size(); ++b) dp_grad_bucket(ci, b, -1, c, false);
    }
  }

  // Optimizer step over this GPU's parameter shard, after every gradient reduction: ZeRO shards
  // the dense parameters over DP, or DP·CP (framework.shard_group dp_cp), and the expert
  // parameters over the ranks holding the same experts, that group / EP, as the analytic
  // fidelity and plan::memory_per_gpu count them.
  {
    const int dense_shard = par.zero >= 1 ? par.zero_group() : 1;
    const int expert_shard = par.zero >= 1 ? std::max(1, dense_shard / par.ep) : 1;
    // The stage's parameters, dense ones divided by `dense` and expert ones by `expert`.
    const auto stage_params = [&](int dense, int expert) {
      double sum = 0;
      for (const ChunkInfo& ci : chunks) {
        for (std::size_t b = 0; b < ci.bucket_dense.size(); ++b) {
          sum += ci.bucket_dense[b] / dense + ci.bucket_expert[b] / expert;
        }
      }
      return sum;
    };
    const double params = stage_params(dense_shard, expert_shard);
    model::Op o;
    o.name = "optimizer";
    o.kind = model::OpKind::kMemory;
    o.kernel = ps.training.optimizer == Optimizer::kLamb ? "lamb" : "adam";
    o.m = params;
    o.bytes = params * model::optimizer_bytes_per_param(ps.training.optimizer == Optimizer::kLamb);
    o.kernels = 10;
    for (std::uint32_t g : grad_reductions) blockers.push_back(g);
    compute(add_op(o), Pass::kOptimizer, Part::kWhole, -1, -1, -1);
    // The gradient buffer's memset (framework.zero_grad_buffer): Megatron zeroes it at the
    // start of the next step, before the first forward, DeepSpeed's bf16 optimizer right after
    // its update; either way it runs on the compute stream between this step's update and the
    // next forward, so it follows the update here. The whole buffer of the stage's
    // parameters, one memset per model chunk's buffer; at ZeRO-2/3 the rank keeps only its
    // gradient shard.
    if (opt.zero_grad_buffer) {
      const double held = par.zero >= 2 ? params : stage_params(1, 1);
      model::Op z;
      z.name = "zero_grad";
      z.kind = model::OpKind::kMemory;
      z.kernel = "copy";
      z.m = held;
      z.bytes = held * grad_bytes_per_param();
      z.kernels = static_cast<int>(chunks.size());
      compute(add_op(z), Pass::kOptimizer, Part::kWhole, -1, -1, -1);
    }
  }
}

}  // namespace

ProgramSet build_programs(const model::ModelConfig& model, const topo::ClusterSpec& cluster,
                          const ParallelConfig& par, const TrainingConfig& training,
                          const Optimizations& opt) {
  ProgramSet ps;
  ps.layout = make_layout(model, cluster, par, training);
  ps.model = model;
  ps.training = training;
  ps.opt = opt;
  ps.roles.resize(static_cast<std::size_t>(par.pp));
  for (int s = 0; s < par.pp; ++s) {
    Program& P = ps.roles[static_cast<std::size_t>(s)];
    P.stage = s;
    Builder b(ps, P, s);
    b.shard = sharding_of(par, training, opt);
    b.build();
  }
  return ps;
}

}  // namespace trainsim::plan
