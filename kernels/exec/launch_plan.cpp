#include "kernels/exec/launch_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "kernels/bench_plan.h"
#include "sim/plan/memory.h"
#include "sim/core/error.h"

namespace trainsim::kexec {
namespace {

using plan::Dim;
using plan::Stream;
using plan::Task;
using plan::TaskType;

// Collective kinds in table order.
constexpr Dim kCollectiveDims[] = {Dim::kTp, Dim::kCp,       Dim::kEp,
                                   Dim::kDp, Dim::kExpertDp, Dim::kPp};

[[noreturn]] void contract(const std::string& what) {
  throw Error(ErrorKind::kRuntime, "the Program breaks the executor's contract: " + what, {},
              "this is a bug in sim/plan; please report it with the scenario");
}

}  // namespace

int CommTable::find(const std::string& name, int rank) const {
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const CommGroup& g = groups[i];
    if (g.name == name && std::find(g.members.begin(), g.members.end(), rank) != g.members.end()) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

CommTable comm_table(const plan::ProgramSet& ps) {
  std::set<Dim> dims;
  bool p2p = false;
  for (const plan::Program& prog : ps.roles) {
    for (const Task& t : prog.tasks) {
      if (t.type == TaskType::kCollective) dims.insert(t.dim);
      if (t.type == TaskType::kSend || t.type == TaskType::kRecv) p2p = true;
    }
  }
  CommTable table;
  const int world = ps.world();
  for (Dim d : kCollectiveDims) {
    if (!dims.count(d)) continue;
    std::vector<bool> placed(static_cast<std::size_t>(world), false);
    for (int r = 0; r < world; ++r) {
      if (placed[static_cast<std::size_t>(r)]) continue;
      CommGroup g{plan::to_string(d), d, ps.group(d, r)};
      for (int m : g.members) placed[static_cast<std::size_t>(m)] = true;
      table.groups.push_back(std::move(g));
    }
  }
  if (p2p) {
    // One two-rank communicator per pipeline edge and direction: sender first.
    for (const char* name : {"pp-next", "pp-prev"}) {
      const bool forward = std::string(name) == "pp-next";
      for (int r = 0; r < world; ++r) {
        const int stage = ps.coord(r).pp;
        const int to = forward ? ps.next_stage(stage) : ps.prev_stage(stage);
        if (to < 0) continue;
        table.groups.push_back({name, Dim::kPp, {r, ps.peer_on_stage(r, to)}});
      }
    }
  }
  return table;
}

Precision kernel_precision(const plan::ProgramSet& ps, const model::Op& op) {
  const Precision p = ps.training.precision;
  return p == Precision::kFp8 && op.kind == model::OpKind::kGemm && model::runs_16bit(op)
             ? Precision::kBf16
             : p;
}

KernelLaunch kernel_launch(const plan::Program& prog, const Task& t) {
  if (t.op < 0 || static_cast<std::size_t>(t.op) >= prog.ops.size()) {
    contract(fmt::format("compute task with op index {} of {}", t.op, prog.ops.size()));
  }
  const model::Op& op = prog.ops[static_cast<std::size_t>(t.op)];
  const double f = t.fraction;
  KernelLaunch k;
  k.kind = op.kind;
  k.batch = op.batch;
  k.kernels = op.kernels;
  k.backward = t.part == plan::Part::kBackward || t.part == plan::Part::kDgrad ||
               t.part == plan::Part::kWgrad;
  switch (op.kind) {
    case model::OpKind::kGemm:
      if (t.part == plan::Part::kDgrad) {
        k.m = op.m * f, k.n = op.k, k.k = op.n;
      } else if (t.part == plan::Part::kWgrad) {
        k.m = op.k, k.n = op.n, k.k = op.m * f;
      } else {
        k.m = op.m * f, k.n = op.n, k.k = op.k;
      }
      k.flops = 2 * k.m * k.n * k.k * k.batch;
      break;
    case model::OpKind::kAttention:
      k.m = op.m * f, k.n = op.n, k.k = op.k;
      k.flops = op.flops * f * (k.backward ? 2.5 : 1.0);
      break;
    case model::OpKind::kMemory:
      k.bytes = op.bytes * f * (k.backward ? 2.0 : 1.0);
      break;
  }
  return k;
}

KernelLaunch kernel_launch(const plan::ProgramSet& ps, const plan::Program& prog,
                           const Task& t) {
  KernelLaunch k = kernel_launch(prog, t);
  if (t.pass == plan::Pass::kData) {
    // The host pipeline's stall: an empty kernel stands for it.
    KernelLaunch empty;
    empty.kernels = 0;
    return empty;
  }
  if (k.kind == model::OpKind::kAttention) {
    const model::ModelConfig& m = ps.model;
    if (m.kv_heads > 0 && m.kv_heads < m.heads && m.heads % m.kv_heads == 0) {
      k.q_per_kv = m.heads / m.kv_heads;
    }
    if (m.attention_window > 0 && m.attention_window < m.seq_len) k.window = m.attention_window;
  }
  if (k.kind != model::OpKind::kMemory) return k;
  const model::Op& op = prog.ops[static_cast<std::size_t>(t.op)];
  if (t.pass == plan::Pass::kOptimizer && op.name != "zero_grad") {
    k.launcher = ps.training.optimizer == plan::Optimizer::kLamb ? "lamb" : "adam";
    k.rows = 1;
    k.cols = std::round(op.m);
    k.f32 = true;
    return k;
  }
  // Gradient accumulation (plan::GradAccumulation) moves its bytes in one kernel per parameter
  // tensor: the generic memory-traffic kernel, as no calibrated launcher times it.
  // FSDP2's copy-out of gathered parameters and copy-in of gradients, and Megatron's 1/DP
  // scaling of a gradient bucket, are such streaming passes too, and so is the gradient
  // buffer's memset (`zero_grad`, framework.zero_grad_buffer).
  if (op.name == "grad_accumulate" || op.name == "param_copy_out" || op.name == "grad_copy_in" ||
      op.name == "grad_scale" || op.name == "zero_grad") {
    return k;
  }
  // A backward runs the op's dedicated backward launcher (`<kind>_bwd`, launchers.h) once at
  // the forward's shape, the kernel `calibrate kernels` times as that kind
  // (kernels::memory_backward_bench_item); cross-entropy's forward launcher writes the logits
  // gradient itself, so its backward is that launcher again.
  const model::Sharding shard = plan::sharding_of(ps.layout.par, ps.training, ps.opt);
  // ops.cpp counts activation bytes at 2 per element: recover the rows in bf16.
  const kernels::BenchItem b =
      k.backward ? kernels::memory_backward_bench_item(ps.model, shard, op, kernels::DType::kBf16)
                 : kernels::memory_bench_item(ps.model, shard, op, kernels::DType::kBf16);
  k.launcher = b.op;
  k.rows = std::max(1.0, std::round(b.m * t.fraction));
  k.cols = b.n;
  k.f32 = b.dtype == kernels::DType::kF32;
  if (b.op == "embedding" || b.op == "embedding_bwd" || b.op == "cross_entropy") {
    k.table = static_cast<double>(ps.model.vocab) / shard.tp;
  }
  return k;
}

const char* to_string(CmdType c) {
  switch (c) {
    case CmdType::kKernel:
      return "kernel";
    case CmdType::kCollective:
      return "collective";
    case CmdType::kSend:
      return "send";
    case CmdType::kRecv:
      return "recv";
    case CmdType::kRecord:
      return "record";
    case CmdType::kWait:
      return "wait";
  }
  return "?";
}

const char* task_category(const Task& t) {
  if (t.type == TaskType::kCompute) {
    if (t.pass == plan::Pass::kData) return "data";
    if (t.pass == plan::Pass::kOptimizer) return "optimizer";
    return "compute";
  }
  if (t.type != TaskType::kCollective) return "pp";
  if (t.dim == Dim::kExpertDp) return "dp";
  return plan::to_string(t.dim);
}

namespace {

// The holds of LaunchPlan: the memory model's inventory of the rank's stage spread over the
// Program's (micro-batch, chunk) spans. Block recompute keeps everything for the layers of each
// model chunk beyond its first N, and an MoE layer its top-k expert copies, as the memory model
// counts them.
void plan_memory(const plan::ProgramSet& ps, LaunchPlan& lp) {
  const plan::Program& prog = *lp.program;
  const plan::StageInventory inv = plan::stage_inventory(
      ps.model, ps.layout, ps.training, ps.opt.fused_attention(), lp.stage);
  lp.state_bytes = inv.states();
  const std::size_t n = prog.tasks.size();
  lp.hold_begin.assign(n, -1);
  lp.hold_end.assign(n, -1);
  struct Span {
    std::uint32_t first = 0, last = 0;
    bool has_forward = false, has_backward = false;
    std::set<int> layers;
    bool embedding = false;
    Stream stream = Stream::kCompute;
  };
  std::map<std::pair<int, int>, Span> spans;  // (micro-batch, chunk)
  std::map<int, Span> logits;                 // micro-batch
  auto is_backward = [](const Task& t) {
    return t.pass == plan::Pass::kBackward || t.pass == plan::Pass::kRecompute;
  };
  for (std::size_t i = 0; i < n; ++i) {
    const Task& t = prog.tasks[i];
    if (t.type != TaskType::kCompute || t.microbatch < 0) continue;
    const auto task = static_cast<std::uint32_t>(i);
    const std::string& op = prog.ops[static_cast<std::size_t>(t.op)].name;
    auto note = [&](Span& s) {
      if (t.pass == plan::Pass::kForward && !s.has_forward) {
        s.first = task;
        s.has_forward = true;
        s.stream = t.stream;
      }
      if (is_backward(t)) {
        s.last = task;
        s.has_backward = true;
      }
    };
    Span& s = spans[{t.microbatch, t.chunk}];
    note(s);
    if (t.pass == plan::Pass::kForward) {
      if (t.layer >= 0) s.layers.insert(t.layer);
      if (op == "embedding") s.embedding = true;
    }
    if (op == "logits") note(logits[t.microbatch]);
  }
  auto add = [&](const Span& s, double bytes) {
    if (!s.has_forward || !s.has_backward || bytes <= 0 || s.last < s.first) return;
    if (lp.hold_begin[s.first] >= 0 || lp.hold_end[s.last] >= 0) {
      // Two spans cannot share a first forward or a last backward task (each task belongs to
      // one micro-batch and chunk; the logits' span lies strictly inside its chunk's).
      contract(fmt::format("two activation holds start or end at task {}", s.first));
    }
    const int id = static_cast<int>(lp.holds.size());
    lp.holds.push_back({s.first, s.last, bytes, s.stream});
    lp.hold_begin[s.first] = id;
    lp.hold_end[s.last] = id;
  };
  for (const auto& [key, s] : spans) {
    double bytes = 0;
    // Block recompute takes the first N layers of each model chunk (StageInventory::recomputed).
    const int chunk_first = ps.layout.chunk_layers(lp.stage, std::max(0, key.second)).first;
    for (int l : s.layers) {
      bytes += inv.layer_bytes(inv.recomputed(l - chunk_first), ps.model.is_moe_layer(l));
    }
    if (s.embedding) bytes += inv.embedding_bytes;
    add(s, bytes);
  }
  for (const auto& [mb, s] : logits) add(s, inv.logits_bytes);
}

}  // namespace

LaunchPlan make_launch_plan(const plan::ProgramSet& ps, const CommTable& table, int rank) {
  if (rank < 0 || rank >= ps.world()) contract(fmt::format("rank {} outside the job", rank));
  LaunchPlan lp;
  lp.rank = rank;
  lp.stage = ps.coord(rank).pp;
  const plan::Program& prog = ps.roles.at(static_cast<std::size_t>(lp.stage));
  lp.program = &prog;
  for (int s = 0; s < plan::kStreamCount; ++s) {
    if (prog.stream_tasks[s] > 0) lp.streams.push_back(static_cast<Stream>(s));
  }

  // This rank's communicators: collective groups by dimension, pipeline edges by direction.
  std::map<Dim, int> by_dim;
  std::map<std::tuple<std::string, int, int>, int> edge;  // (name, sender, receiver)
  for (std::size_t i = 0; i < table.groups.size(); ++i) {
    const CommGroup& g = table.groups[i];
    if (std::find(g.members.begin(), g.members.end(), rank) == g.members.end()) continue;
    lp.comms.push_back(static_cast<int>(i));
    if (g.name == "pp-next" || g.name == "pp-prev") {
      edge[{g.name, g.members[0], g.members[1]}] = static_cast<int>(i);
    } else {
      by_dim[g.dim] = static_cast<int>(i);
    }
  }
  auto edge_comm = [&](const char* name, int sender, int receiver) {
    const auto it = edge.find({name, sender, receiver});
    if (it == edge.end()) {
      contract(fmt::format("no {} communicator from rank {} to rank {}", name, sender, receiver));
    }
    return it->second;
  };

  // Tasks whose completion another stream waits for get an event.
  const std::size_t n = prog.tasks.size();
  std::vector<int> event(n, -1);
  for (std::size_t i = 0; i < n; ++i) {
    const Task& t = prog.tasks[i];
    for (std::uint32_t j = 0; j < t.dep_count; ++j) {
      const std::uint32_t d = prog.deps[t.dep_begin + j];
      if (d >= i) contract(fmt::format("task {} depends on later task {}", i, d));
      if (prog.tasks[d].stream != t.stream && event[d] < 0) event[d] = 0;
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (event[i] == 0) event[i] = lp.events++ + 1;  // stored +1 so that 0 stays "marked"
  }
  for (int& e : event) e = e > 0 ? e - 1 : -1;

  std::vector<std::uint32_t> waited;
  for (std::size_t i = 0; i < n; ++i) {
    const Task& t = prog.tasks[i];
    const auto task = static_cast<std::uint32_t>(i);
    waited.clear();
    for (std::uint32_t j = 0; j < t.dep_count; ++j) {
      const std::uint32_t d = prog.deps[t.dep_begin + j];
      if (prog.tasks[d].stream == t.stream) continue;
      if (std::find(waited.begin(), waited.end(), d) != waited.end()) continue;
      waited.push_back(d);
      Command w;
      w.type = CmdType::kWait;
      w.stream = t.stream;
      w.task = d;
      w.event = event[d];
      lp.commands.push_back(w);
    }
    Command c;
    c.stream = t.stream;
    c.task = task;
    switch (t.type) {
      case TaskType::kCompute:
        c.type = CmdType::kKernel;
        break;
      case TaskType::kCollective: {
        c.type = CmdType::kCollective;
        const auto it = by_dim.find(t.dim);
        if (it == by_dim.end()) {
          contract(fmt::format("collective `{}` over dimension {} that has no group",
                               prog.task_name(t), plan::to_string(t.dim)));
        }
        c.comm = it->second;
        break;
      }
      case TaskType::kSend:
      case TaskType::kRecv: {
        const bool send = t.type == TaskType::kSend;
        c.type = send ? CmdType::kSend : CmdType::kRecv;
        // Activations flow to the next stage (send-next / recv-prev: the "pp-next" edge),
        // gradients to the previous one (send-prev / recv-next: the "pp-prev" edge).
        bool to_next;
        const char* name;
        if (t.stream == Stream::kPpSendNext || t.stream == Stream::kPpRecvNext) {
          to_next = true;
        } else if (t.stream == Stream::kPpSendPrev || t.stream == Stream::kPpRecvPrev) {
          to_next = false;
        } else {
          contract(fmt::format("`{}` on stream {}", prog.task_name(t), plan::to_string(t.stream)));
        }
        const int other = to_next ? ps.next_stage(lp.stage) : ps.prev_stage(lp.stage);
        if (other < 0) {
          contract(fmt::format("`{}` on stage {} which has no {} stage", prog.task_name(t),
                               lp.stage, to_next ? "next" : "previous"));
        }
        c.peer = ps.peer_on_stage(rank, other);
        if (send) {
          name = to_next ? "pp-next" : "pp-prev";
          c.comm = edge_comm(name, rank, c.peer);
          c.peer_index = 1;
        } else {
          // recv-next takes gradients sent back by the next stage; recv-prev activations.
          name = to_next ? "pp-prev" : "pp-next";
          c.comm = edge_comm(name, c.peer, rank);
          c.peer_index = 0;
        }
        break;
      }
    }
    lp.commands.push_back(c);
    ++lp.launches;
    if (event[i] >= 0) {
      Command r;
      r.type = CmdType::kRecord;
      r.stream = t.stream;
      r.task = task;
      r.event = event[i];
      lp.commands.push_back(r);
    }
  }
  plan_memory(ps, lp);
  return lp;
}

}  // namespace trainsim::kexec
