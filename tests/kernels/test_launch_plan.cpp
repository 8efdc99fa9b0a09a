// The Program → launch translation of the real executor (kernels/exec), on a recording fake GPU.
//
// A tiny GPT (4 layers, hidden 256, 8 heads, seq 128, vocab 1024) at TP 2 · PP 2 · DP 2 runs on 8
// fake GPUs in one process (a thread each), with the overlap levers off (1F1B) and on
// (interleaved, 2 model chunks per stage). Expected, from
// the Program's contract (sim/plan/program.h) and the executor's (kernels/exec/launch_plan.h):
//   - every rank creates exactly the streams its role uses, and joins one communicator per
//     dimension its role's collectives use, whose members are ProgramSet::group of that
//     dimension, plus the pipeline edges {rank, peer_on_stage(next/prev stage)};
//   - each rank launches exactly its role's tasks, stream by stream in stream order (kernels
//     with the op's name, collectives of the task's kind and bytes on the group of its dimension,
//     sends/recvs to the pipeline peer);
//   - every dependency on another stream is an event wait on the dependent's stream before it
//     launches, on an event recorded right after the task depended on;
//   - the k-th send of a direction has the k-th receive of that direction on the peer, same
//     communicator and bytes;
//   - every member of a communicator got the same id, and ids differ between communicators.
// Shapes: a GEMM [m×k]·[k×n] runs as m×n×k forward, m×k×n dgrad, k×n×m wgrad.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <set>

#include "kernels/exec/fake_device.h"
#include "kernels/exec/job.h"
#include "scenarios/scenario.h"
#include "sim/core/error.h"
#include "sim/plan/memory.h"

namespace trainsim::kexec {
namespace {

using plan::Stream;
using plan::Task;
using plan::TaskType;

std::vector<std::string> tiny_sets(bool overlap) {
  std::vector<std::string> s = {"model.layers=4",
                                "model.hidden=256",
                                "model.heads=8",
                                "model.seq_len=128",
                                "model.vocab=1024",
                                "parallel.tp=2",
                                "parallel.pp=2",
                                "parallel.dp=2",
                                "training.global_batch=8",
                                "training.micro_batch=1",
                                "optimizations.system=megatron"};
  // Levers on: the interleaved schedule too (2 chunks per stage, the last stage wraps to stage 0).
  s.push_back(overlap ? "parallel.vpp=2" : "parallel.vpp=1");
  const std::string on = overlap ? "true" : "false";
  for (const char* lever : {"tp_overlap", "pp_overlap", "dp_overlap"}) {
    s.push_back(std::string("optimizations.") + lever + "=" + on);
  }
  // The Megatron presets' TP overlap method is bulk (whole collectives); decomposed splits the
  // GEMMs and collectives into TP pieces, which the chunk shapes below check.
  if (overlap) s.push_back("framework.tp_overlap_method=decomposed");
  return s;
}

plan::ProgramSet tiny(bool overlap, const std::vector<std::string>& more = {}) {
  std::vector<std::string> sets = tiny_sets(overlap);
  sets.insert(sets.end(), more.begin(), more.end());
  const scen::Scenario s = scen::load_scenario_string("", "tiny-gpt", sets);
  return plan::build_programs(s.model, s.cluster, s.parallel, s.training, s.opt);
}

struct FakeJob {
  plan::ProgramSet ps;
  CommTable table;
  std::vector<std::shared_ptr<FakeDevice>> dev;  // by rank
  std::vector<RankMeasure> measures;
};

FakeJob run_fake(bool overlap, int iterations = 2, int warmup = 1,
                 const std::vector<std::string>& more = {}) {
  FakeJob r{tiny(overlap, more), {}, {}, {}};
  r.table = comm_table(r.ps);
  const int world = r.ps.world();
  r.dev.resize(static_cast<std::size_t>(world));
  std::mutex mu;
  int made = 0;
  Backend fake;
  fake.name = "fake";
  fake.devices = world;
  fake.make_id = [&] {
    CommId id{};
    std::snprintf(id.data(), id.size(), "comm-id-%d", made++);
    return id;
  };
  fake.factory = [&](int rank, int device) -> std::shared_ptr<Device> {
    EXPECT_EQ(device, rank);  // one process: rank r on device r
    auto d = std::make_shared<FakeDevice>(rank);
    std::lock_guard<std::mutex> lock(mu);
    r.dev[static_cast<std::size_t>(rank)] = d;
    return d;
  };
  ExecuteOptions opt;
  opt.iterations = iterations;
  opt.warmup = warmup;
  auto group = single_process();
  r.measures = execute_job(r.ps, *group, fake, opt);
  return r;
}

// The calls of the first iteration (between the first "begin" and "end").
std::vector<FakeCall> first_iteration(const FakeDevice& d) {
  std::vector<FakeCall> out;
  bool in = false;
  for (const FakeCall& c : d.calls()) {
    if (c.what == "begin") {
      in = true;
      continue;
    }
    if (c.what == "end") break;
    if (in) out.push_back(c);
  }
  return out;
}

bool is_launch(const FakeCall& c) {
  return c.what == "kernel" || c.what == "collective" || c.what == "send" || c.what == "recv";
}

std::vector<std::vector<std::uint32_t>> tasks_by_stream(const plan::Program& p) {
  std::vector<std::vector<std::uint32_t>> s(plan::kStreamCount);
  for (std::uint32_t i = 0; i < p.tasks.size(); ++i) {
    s[static_cast<std::size_t>(p.tasks[i].stream)].push_back(i);
  }
  return s;
}

class LaunchPlanTest : public ::testing::TestWithParam<bool> {};

TEST_P(LaunchPlanTest, GroupsAgreeWithTheProgramSet) {
  const FakeJob r = run_fake(GetParam());
  ASSERT_EQ(r.ps.world(), 8);
  std::map<int, std::set<int>> members_seen;  // comm → ranks that joined it
  std::map<int, std::set<CommId>> ids;
  for (int rank = 0; rank < 8; ++rank) {
    const FakeDevice& d = *r.dev[static_cast<std::size_t>(rank)];
    const int stage = r.ps.coord(rank).pp;
    const plan::Program& prog = r.ps.roles[static_cast<std::size_t>(stage)];
    std::set<plan::Dim> dims;
    for (const Task& t : prog.tasks) {
      if (t.type == TaskType::kCollective) dims.insert(t.dim);
    }
    std::set<plan::Dim> joined;
    std::size_t comm_calls = 0;
    for (const FakeCall& c : d.calls()) {
      if (c.what != "comm") continue;
      const CommGroup& g = r.table.groups.at(static_cast<std::size_t>(c.id));
      EXPECT_EQ(c.members, g.members);
      EXPECT_EQ(g.members.at(static_cast<std::size_t>(c.peer_index)), rank);
      members_seen[c.id].insert(rank);
      ids[c.id].insert(d.comm_ids.at(comm_calls++));
      if (g.name == "pp-next") {
        // Sender first: this rank sends to the next stage, or receives from the previous one.
        const std::vector<int> send = {rank, r.ps.peer_on_stage(rank, r.ps.next_stage(stage))};
        const std::vector<int> recv = {r.ps.peer_on_stage(rank, r.ps.prev_stage(stage)), rank};
        EXPECT_TRUE(g.members == send || g.members == recv) << "rank " << rank;
      } else if (g.name == "pp-prev") {
        const std::vector<int> send = {rank, r.ps.peer_on_stage(rank, r.ps.prev_stage(stage))};
        const std::vector<int> recv = {r.ps.peer_on_stage(rank, r.ps.next_stage(stage)), rank};
        EXPECT_TRUE(g.members == send || g.members == recv) << "rank " << rank;
      } else {
        EXPECT_EQ(g.members, r.ps.group(g.dim, rank)) << g.name << " of rank " << rank;
        joined.insert(g.dim);
      }
    }
    EXPECT_EQ(joined, dims) << "rank " << rank;
    // Streams: exactly those with tasks.
    std::vector<Stream> streams;
    for (const FakeCall& c : d.calls()) {
      if (c.what == "create_streams") streams.push_back(c.stream);
    }
    std::vector<Stream> want;
    for (int s = 0; s < plan::kStreamCount; ++s) {
      if (prog.stream_tasks[s] > 0) want.push_back(static_cast<Stream>(s));
    }
    EXPECT_EQ(streams, want) << "rank " << rank;
  }
  // Every member joined, all with one id; ids differ between communicators.
  std::set<CommId> distinct;
  for (std::size_t c = 0; c < r.table.groups.size(); ++c) {
    const auto& m = r.table.groups[c].members;
    EXPECT_EQ(members_seen[static_cast<int>(c)], std::set<int>(m.begin(), m.end()));
    EXPECT_EQ(ids[static_cast<int>(c)].size(), 1u) << "communicator " << c;
    distinct.insert(*ids[static_cast<int>(c)].begin());
  }
  EXPECT_EQ(distinct.size(), r.table.groups.size());
  // TP 2 · PP 2 · DP 2: 4 TP groups and 4 DP groups; pipeline edges per direction: 4 ranks of
  // stage 0 → stage 1, and with interleaving 4 more that wrap from stage 1 to stage 0.
  std::map<std::string, int> per_kind;
  for (const CommGroup& g : r.table.groups) ++per_kind[g.name];
  EXPECT_EQ(per_kind["tp"], 4);
  EXPECT_EQ(per_kind["dp"], 4);
  const int edges = GetParam() ? 8 : 4;
  EXPECT_EQ(per_kind["pp-next"], edges);
  EXPECT_EQ(per_kind["pp-prev"], edges);
}

TEST_P(LaunchPlanTest, EachRankLaunchesItsRoleInStreamOrder) {
  const FakeJob r = run_fake(GetParam());
  for (int rank = 0; rank < 8; ++rank) {
    const int stage = r.ps.coord(rank).pp;
    const plan::Program& prog = r.ps.roles[static_cast<std::size_t>(stage)];
    const auto want = tasks_by_stream(prog);
    std::vector<std::vector<FakeCall>> got(plan::kStreamCount);
    for (const FakeCall& c : first_iteration(*r.dev[static_cast<std::size_t>(rank)])) {
      if (is_launch(c)) got[static_cast<std::size_t>(c.stream)].push_back(c);
    }
    for (int s = 0; s < plan::kStreamCount; ++s) {
      const auto& w = want[static_cast<std::size_t>(s)];
      const auto& g = got[static_cast<std::size_t>(s)];
      ASSERT_EQ(g.size(), w.size())
          << "rank " << rank << " stream " << plan::to_string(static_cast<Stream>(s));
      for (std::size_t i = 0; i < w.size(); ++i) {
        const Task& t = prog.tasks[w[i]];
        const FakeCall& c = g[i];
        switch (t.type) {
          case TaskType::kCompute:
            ASSERT_EQ(c.what, "kernel");
            EXPECT_EQ(c.op, prog.ops[static_cast<std::size_t>(t.op)].name);
            if (t.pass != plan::Pass::kData) {
              const KernelLaunch k = kernel_launch(prog, t);
              EXPECT_EQ(c.launch.m, k.m);
              EXPECT_EQ(c.launch.n, k.n);
              EXPECT_EQ(c.launch.k, k.k);
              EXPECT_EQ(c.launch.bytes, k.bytes);
            }
            break;
          case TaskType::kCollective: {
            ASSERT_EQ(c.what, "collective");
            EXPECT_EQ(c.op, coll::to_string(t.collective));
            EXPECT_EQ(c.bytes, t.bytes);
            EXPECT_EQ(r.table.groups.at(static_cast<std::size_t>(c.id)).members,
                      r.ps.group(t.dim, rank));
            break;
          }
          case TaskType::kSend:
          case TaskType::kRecv: {
            ASSERT_EQ(c.what, t.type == TaskType::kSend ? "send" : "recv");
            const bool next = t.stream == Stream::kPpSendNext || t.stream == Stream::kPpRecvNext;
            const int peer =
                r.ps.peer_on_stage(rank, next ? r.ps.next_stage(stage) : r.ps.prev_stage(stage));
            EXPECT_EQ(r.table.groups.at(static_cast<std::size_t>(c.id))
                          .members.at(static_cast<std::size_t>(c.peer_index)),
                      peer);
            EXPECT_EQ(c.bytes, t.bytes);
            break;
          }
        }
      }
    }
  }
}

TEST_P(LaunchPlanTest, EveryCrossStreamDependencyIsAnEventWait) {
  const FakeJob r = run_fake(GetParam());
  int checked = 0;
  for (int rank = 0; rank < 8; ++rank) {
    const plan::Program& prog = r.ps.roles[static_cast<std::size_t>(r.ps.coord(rank).pp)];
    const auto by_stream = tasks_by_stream(prog);
    std::vector<std::size_t> launched(plan::kStreamCount, 0);
    std::vector<std::set<int>> pending_waits(plan::kStreamCount);
    std::map<int, std::uint32_t> recorded_after;      // event → task launched before the record
    std::map<std::uint32_t, std::set<int>> waits_of;  // task → events waited on before it
    std::vector<std::int64_t> last(plan::kStreamCount, -1);
    for (const FakeCall& c : first_iteration(*r.dev[static_cast<std::size_t>(rank)])) {
      const auto s = static_cast<std::size_t>(c.stream);
      if (c.what == "wait") {
        ASSERT_TRUE(recorded_after.count(c.id)) << "wait before the event's record";
        pending_waits[s].insert(c.id);
      } else if (c.what == "record") {
        ASSERT_GE(last[s], 0);
        recorded_after[c.id] = static_cast<std::uint32_t>(last[s]);
      } else if (is_launch(c)) {
        const std::uint32_t t = by_stream[s].at(launched[s]++);
        waits_of[t] = pending_waits[s];
        pending_waits[s].clear();
        last[s] = t;
      }
    }
    for (std::uint32_t i = 0; i < prog.tasks.size(); ++i) {
      const Task& t = prog.tasks[i];
      for (std::uint32_t j = 0; j < t.dep_count; ++j) {
        const std::uint32_t d = prog.deps[t.dep_begin + j];
        if (prog.tasks[d].stream == t.stream) continue;
        bool found = false;
        for (int e : waits_of[i]) found |= recorded_after[e] == d;
        EXPECT_TRUE(found) << "rank " << rank << ": `" << prog.task_name(t) << "` (task " << i
                           << ") does not wait for task " << d;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 0);
}

TEST_P(LaunchPlanTest, EverySendHasTheMatchingReceive) {
  const FakeJob r = run_fake(GetParam());
  // (sender, receiver, stream of the send) → the sends' (comm, bytes), and the receives'.
  std::map<std::tuple<int, int, int>, std::vector<std::pair<int, double>>> sends, recvs;
  for (int rank = 0; rank < 8; ++rank) {
    for (const FakeCall& c : first_iteration(*r.dev[static_cast<std::size_t>(rank)])) {
      if (c.what != "send" && c.what != "recv") continue;
      const int peer = r.table.groups.at(static_cast<std::size_t>(c.id))
                           .members.at(static_cast<std::size_t>(c.peer_index));
      if (c.what == "send") {
        sends[{rank, peer, static_cast<int>(c.stream)}].push_back({c.id, c.bytes});
      } else {
        // recv-prev pairs with the peer's send-next, recv-next with its send-prev.
        const Stream send =
            c.stream == Stream::kPpRecvPrev ? Stream::kPpSendNext : Stream::kPpSendPrev;
        recvs[{peer, rank, static_cast<int>(send)}].push_back({c.id, c.bytes});
      }
    }
  }
  EXPECT_FALSE(sends.empty());
  EXPECT_EQ(sends, recvs);
}

TEST_P(LaunchPlanTest, MeasuresBecomeAResult) {
  const FakeJob r = run_fake(GetParam());
  const exec::Result res = measured_result(r.ps, r.measures, {0, 7});
  EXPECT_EQ(res.fidelity, "real");
  EXPECT_GT(res.iteration_time_s, 0);
  EXPECT_NEAR(res.breakdown.total(), res.iteration_time_s, 1e-9);
  ASSERT_FALSE(res.task_kinds.empty());
  long tasks = 0;
  for (const auto& k : res.task_kinds) tasks += k.count;
  const int crit_stage = r.ps.coord(res.exec.critical_rank).pp;
  EXPECT_EQ(tasks,
            static_cast<long>(r.ps.roles[static_cast<std::size_t>(crit_stage)].tasks.size()));
  EXPECT_EQ(res.timeline.ranks, (std::vector<int>{0, 7}));
  for (const auto& s : res.timeline.spans) {
    EXPECT_GE(s.end_s, s.start_s);
    EXPECT_LE(s.end_s, res.iteration_time_s + 1e-12);
  }
}

// The launcher each compute task of `fake` ran, keyed "op fwd" / "op bwd", with the set of
// shapes seen (rows × cols), checking on the way that no compute task falls back to a copy kernel
// (data loading runs nothing) and that every launcher runs once (a backward has its own
// launcher, `<kind>_bwd`).
struct Launched {
  std::string launcher;
  std::set<std::pair<double, double>> shapes;
  std::set<double> tables;
  bool f32 = false;
};
std::map<std::string, Launched> launchers_of(const plan::ProgramSet& ps, const FakeDevice& dev) {
  std::map<std::string, Launched> out;
  for (const FakeCall& c : first_iteration(dev)) {
    if (c.what != "kernel") continue;
    const KernelLaunch& k = c.launch;
    if (k.kind != model::OpKind::kMemory) {
      EXPECT_TRUE(k.launcher.empty()) << c.op;  // GEMMs and attention: gemm.h / attention
      continue;
    }
    const std::string key = c.op + (k.backward ? " bwd" : " fwd");
    if (c.op == "data_loading") {
      EXPECT_TRUE(k.launcher.empty());
      EXPECT_EQ(k.kernels, 0);
      EXPECT_EQ(k.bytes, 0);
      continue;
    }
    EXPECT_EQ(k.repeats, 1) << key;
    if (c.op == "grad_accumulate" || c.op == "param_copy_out" || c.op == "grad_copy_in" ||
        c.op == "grad_scale" || c.op == "zero_grad") {
      // Streaming passes over gradients or parameters: no calibrated launcher times them, the
      // generic memory-traffic kernel moves their bytes (launch_plan.cpp).
      EXPECT_TRUE(k.launcher.empty()) << key;
      EXPECT_GT(k.bytes, 0) << key;
      out[key].launcher = "(copy)";
      continue;
    }
    EXPECT_FALSE(k.launcher.empty()) << key << " falls back to a copy kernel";
    Launched& l = out[key];
    if (!l.launcher.empty()) {
      EXPECT_EQ(l.launcher, k.launcher) << key;
    }
    l.launcher = k.launcher;
    l.shapes.insert({k.rows, k.cols});
    l.tables.insert(k.table);
    l.f32 = k.f32;
  }
  (void)ps;
  return out;
}

using Shapes = std::set<std::pair<double, double>>;

// Hand-derived shapes for the tiny GPT (hidden 256, 8 heads, seq 128, vocab 1024, ffn 4·256,
// micro-batch 1, TP 2 with sequence parallelism under the Megatron system, unfused attention):
// tokens = 128 on every GPU (CP 1), norms and residual adds on tokens/tp = 64 rows under SP,
// softmax and attention dropout on batch·heads/tp·seq = 4·128 = 512 rows of 128 keys, bias-GeLU
// on tokens × ffn/tp = 128 × 512, embedding and cross-entropy on 128 tokens of a vocab/tp = 512
// shard; with the levers on, TP overlap splits the embedding into tp = 2 chunks of half the
// tokens.
TEST_P(LaunchPlanTest, EveryComputeTaskRunsItsLauncherAtItsShape) {
  const bool levers = GetParam();
  const FakeJob r = run_fake(levers, 1, 0);
  for (int rank = 0; rank < 8; ++rank) {
    const int stage = r.ps.coord(rank).pp;
    const auto got = launchers_of(r.ps, *r.dev[static_cast<std::size_t>(rank)]);
    std::map<std::string, std::pair<std::string, Shapes>> want = {
        {"norm_attn fwd", {"layernorm", {{64, 256}}}},
        {"norm_mlp fwd", {"layernorm", {{64, 256}}}},
        {"softmax fwd", {"softmax", {{512, 128}}}},
        {"attn_dropout fwd", {"dropout", {{512, 128}}}},
        {"attn_bias_dropout_add fwd", {"bias_dropout_add", {{64, 256}}}},
        {"bias_gelu fwd", {"bias_gelu", {{128, 512}}}},
        {"mlp_bias_dropout_add fwd", {"bias_dropout_add", {{64, 256}}}},
        {"optimizer fwd", {"adam", {}}},
    };
    if (stage == 0) want["embedding fwd"] = {"embedding", {{levers ? 64.0 : 128.0, 256}}};
    if (stage == 1) {
      want["final_norm fwd"] = {"layernorm", {{64, 256}}};
      want["cross_entropy fwd"] = {"cross_entropy", {{128, 512}}};
      want["cross_entropy bwd"] = {"cross_entropy", {{128, 512}}};
    }
    // Every element-wise backward runs its kind's backward launcher ("layernorm" →
    // "layernorm_bwd") once at the forward's shape; cross-entropy's is its forward launcher
    // (listed above), the optimizer has no backward.
    for (const auto& [key, w] : std::map<std::string, std::pair<std::string, Shapes>>(want)) {
      const std::string op = key.substr(0, key.size() - 4);
      if (key.ends_with(" fwd") && op != "optimizer" && op != "cross_entropy") {
        want[op + " bwd"] = {w.first + "_bwd", w.second};
      }
    }
    // Megatron's 1/DP scaling of each gradient bucket before its reduction (DP 2 here): a
    // streaming pass on the compute stream (its whole op, not a backward kernel).
    want["grad_scale fwd"] = {"(copy)", {}};
    // Megatron's memset of the gradient buffer after the step (framework.zero_grad_buffer),
    // another streaming pass on the compute stream.
    want["zero_grad fwd"] = {"(copy)", {}};
    ASSERT_EQ(got.size(), want.size()) << "rank " << rank;
    for (const auto& [key, w] : want) {
      const auto it = got.find(key);
      ASSERT_NE(it, got.end()) << "rank " << rank << ": no " << key;
      EXPECT_EQ(it->second.launcher, w.first) << key;
      if (key != "optimizer fwd") {
        EXPECT_EQ(it->second.shapes, w.second) << key;
      }
    }
    if (stage == 0) {
      EXPECT_EQ(got.at("embedding fwd").tables, std::set<double>{512});
    } else {
      EXPECT_EQ(got.at("cross_entropy fwd").tables, std::set<double>{512});
    }
    // The optimizer step: Adam over the parameters the optimizer task updates (op.m), in fp32.
    const plan::Program& prog = r.ps.roles[static_cast<std::size_t>(stage)];
    double params = -1;
    for (const model::Op& op : prog.ops) {
      if (op.name == "optimizer") params = op.m;
    }
    ASSERT_GT(params, 0);
    EXPECT_EQ(got.at("optimizer fwd").shapes, (Shapes{{1, params}}));
    EXPECT_TRUE(got.at("optimizer fwd").f32);
    EXPECT_FALSE(got.at("norm_attn fwd").f32);
  }
}

// A Llama-style MoE variant: RMSNorm, SwiGLU, 4 experts with top-2 routing on every layer,
// LAMB. SwiGLU runs on the expert rows (tokens · top_k = 256) × ffn/tp = 512, the router softmax
// in fp32 on the TP rank's own tokens (SP, TP 2) × experts = 64 × 4.
TEST(LaunchPlan, SwigluRmsnormRouterAndLambLaunchers) {
  std::vector<std::string> sets = tiny_sets(false);
  for (const char* s : {"model.mlp=swiglu", "model.ffn_hidden=1024", "model.norm=rmsnorm",
                        "model.experts=4", "model.top_k=2", "model.moe_every=1",
                        "optimizations.lamb=true", "framework.activation=fused"}) {
    sets.push_back(s);
  }
  const scen::Scenario sc = scen::load_scenario_string("", "tiny-gpt", sets);
  const plan::ProgramSet ps =
      plan::build_programs(sc.model, sc.cluster, sc.parallel, sc.training, sc.opt);
  std::map<std::string, std::pair<std::string, Shapes>> seen;
  for (const plan::Program& prog : ps.roles) {
    for (const Task& t : prog.tasks) {
      if (t.type != TaskType::kCompute) continue;
      const KernelLaunch k = kernel_launch(ps, prog, t);
      if (k.kind != model::OpKind::kMemory || k.launcher.empty()) continue;
      auto& e = seen[prog.ops[static_cast<std::size_t>(t.op)].name + (k.backward ? " bwd" : "")];
      e.first = k.launcher;
      e.second.insert({k.rows, k.cols});
      // Only the router's softmax runs in fp32 (besides the optimizer).
      EXPECT_EQ(k.f32, e.first == "lamb" || prog.ops[static_cast<std::size_t>(t.op)].name ==
                                               "router_topk");
    }
  }
  EXPECT_EQ(seen.at("swiglu"), (std::pair<std::string, Shapes>{"swiglu", {{256, 512}}}));
  EXPECT_EQ(seen.at("norm_attn"), (std::pair<std::string, Shapes>{"rmsnorm", {{64, 256}}}));
  EXPECT_EQ(seen.at("router_topk"), (std::pair<std::string, Shapes>{"softmax", {{64, 4}}}));
  EXPECT_EQ(seen.at("optimizer").first, "lamb");
  // Their backwards: the backward launchers at the same shapes (the router's in fp32 too).
  EXPECT_EQ(seen.at("swiglu bwd"), (std::pair<std::string, Shapes>{"swiglu_bwd", {{256, 512}}}));
  EXPECT_EQ(seen.at("norm_attn bwd"),
            (std::pair<std::string, Shapes>{"rmsnorm_bwd", {{64, 256}}}));
  EXPECT_EQ(seen.at("router_topk bwd"),
            (std::pair<std::string, Shapes>{"softmax_bwd", {{64, 4}}}));
}

// framework.grad_accumulation add-16bit: after each layer's backward (and the embedding's and
// the head's) of every micro-batch but a chunk's first, one generic memory-traffic launch per
// parameter tensor moves 6 B per parameter; the job executes with them. Tiny GPT (h 256, ffn
// 1,024, V 1,024, s 128, biases, LayerNorm, learned positions, tied), TP 2: a layer holds
// (4h² + 4h)/2 + 4h + (8h² + 5h)/2 = 395,392 parameters in 12 tensors, the embedding
// V·h/2 + s·h = 163,840 in 2 (the position table is whole on every TP rank), the head (PP > 1: the last stage's copy of the table) V·h/2 + 2h =
// 131,584 in 3. 2 layers per stage, 4 micro-batches per pipeline (batch 8 over DP 2): 3 × 3
// accumulation tasks per rank and iteration.
TEST(LaunchPlan, GradientAccumulationRunsAsMemoryTraffic) {
  const plan::ProgramSet ps = tiny(false, {"framework.grad_accumulation=add-16bit"});
  for (std::size_t stage = 0; stage < ps.roles.size(); ++stage) {
    const plan::Program& prog = ps.roles[stage];
    std::multiset<std::pair<double, int>> seen;  // (bytes, launches) per task
    for (const Task& t : prog.tasks) {
      if (t.type != TaskType::kCompute) continue;
      const model::Op& op = prog.ops[static_cast<std::size_t>(t.op)];
      if (op.name != "grad_accumulate") continue;
      const KernelLaunch k = kernel_launch(ps, prog, t);
      EXPECT_EQ(k.kind, model::OpKind::kMemory);
      EXPECT_TRUE(k.launcher.empty());
      seen.insert({k.bytes, k.kernels});
    }
    std::multiset<std::pair<double, int>> want;
    for (int i = 0; i < 3; ++i) {
      want.insert({6.0 * 395392, 12});
      want.insert({6.0 * 395392, 12});
      want.insert(stage == 0 ? std::pair{6.0 * 163840, 2} : std::pair{6.0 * 131584, 3});
    }
    EXPECT_EQ(seen, want) << "stage " << stage;
  }
  const FakeJob r = run_fake(false, 1, 0, {"framework.grad_accumulation=add-16bit"});
  ASSERT_EQ(r.measures.size(), 8u);
  // Nothing of the kind without it (Megatron-LM 2023: in the weight-gradient GEMM).
  for (const plan::Program& prog : tiny(false).roles) {
    for (const model::Op& op : prog.ops) EXPECT_NE(op.name, "grad_accumulate");
  }
}

// fp8 training: the executor launches each GEMM in the precision the simulator prices it in:
// fp8 for the layers' GEMMs, bf16 for the ones the model keeps 16-bit (the output layer and, on
// the unfused path, attention's batched score and context GEMMs: model::runs_16bit).
TEST(LaunchPlan, Fp8KeepsThe16BitGemmsIn16Bit) {
  const std::vector<std::string> fp8 = {"cluster.preset=dgx-h100-superpod", "cluster.gpus=8",
                                        "training.precision=fp8"};
  const FakeJob r = run_fake(false, 1, 0, fp8);
  std::map<std::string, std::set<Precision>> seen;
  for (const auto& d : r.dev) {
    for (const FakeCall& c : first_iteration(*d)) {
      if (c.what == "kernel" && c.launch.kind == model::OpKind::kGemm) seen[c.op].insert(c.dtype);
    }
  }
  for (const char* op : {"qkv", "attn_proj", "mlp_up", "mlp_down"}) {
    EXPECT_EQ(seen[op], std::set<Precision>{Precision::kFp8}) << op;
  }
  for (const char* op : {"logits", "attn_scores", "attn_context"}) {
    EXPECT_EQ(seen[op], std::set<Precision>{Precision::kBf16}) << op;
  }
}

INSTANTIATE_TEST_SUITE_P(Overlap, LaunchPlanTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "LeversOn" : "LeversOff"; });

TEST(LaunchPlan, GemmShapesPerPart) {
  plan::Program p;
  model::Op op;
  op.name = "fc1";
  op.kind = model::OpKind::kGemm;
  op.m = 128, op.n = 512, op.k = 256;
  p.ops.push_back(op);
  Task t;
  t.op = 0;
  t.part = plan::Part::kForward;
  KernelLaunch k = kernel_launch(p, t);
  EXPECT_EQ(std::vector<double>({k.m, k.n, k.k}), (std::vector<double>{128, 512, 256}));
  t.part = plan::Part::kDgrad;
  k = kernel_launch(p, t);
  EXPECT_EQ(std::vector<double>({k.m, k.n, k.k}), (std::vector<double>{128, 256, 512}));
  t.part = plan::Part::kWgrad;
  t.fraction = 0.5;  // a TP-overlap chunk: half the tokens
  k = kernel_launch(p, t);
  EXPECT_EQ(std::vector<double>({k.m, k.n, k.k}), (std::vector<double>{256, 512, 64}));
  EXPECT_EQ(k.flops, 2.0 * 256 * 512 * 64);
}

class Procs : public ProcessGroup {
 public:
  Procs(int index, int count, int local) : i_(index), n_(count), l_(local) {}
  int index() const override { return i_; }
  int count() const override { return n_; }
  int local_index() const override { return l_; }
  void broadcast(std::string&) override {}
  std::vector<std::string> allgather(const std::string& m) override { return {m}; }
  void abort(int) override {}

 private:
  int i_, n_, l_;
};

// Memory held as the memory model's inventory says (LaunchPlan::holds): under 1F1B stage s of
// p holds p − s micro-batches' activations at its peak (4 micro-batches, p = 2: stage 0 two,
// stage 1 one), each its two layers (and the embedding output on stage 0); the last stage
// adds one micro-batch's logits. The fake device sums holds and releases in issue order, so
// the peak comes out of the schedule's order, not from the formula.
TEST(LaunchPlan, HoldsTheMemoryModelsInventoryInScheduleOrder) {
  const FakeJob r = run_fake(false);
  const plan::ProgramSet& ps = r.ps;
  ASSERT_EQ(ps.layout.microbatches, 4);
  for (int rank = 0; rank < ps.world(); ++rank) {
    const int stage = ps.coord(rank).pp;
    const plan::StageInventory inv = plan::stage_inventory(ps.model, ps.layout, ps.training,
                                                           ps.opt.fused_attention(), stage);
    ASSERT_EQ(inv.layers, 2);
    ASSERT_GT(inv.per_layer_full, 0);
    const MemoryMeasure& m = r.measures[static_cast<std::size_t>(rank)].memory;
    EXPECT_DOUBLE_EQ(m.states, inv.states()) << "rank " << rank;
    const double in_flight = stage == 0 ? 2 : 1;
    const double expected = stage == 0 ? in_flight * (2 * inv.per_layer_full + inv.embedding_bytes)
                                       : in_flight * 2 * inv.per_layer_full + inv.logits_bytes;
    EXPECT_DOUBLE_EQ(m.activations_peak, expected) << "rank " << rank;
    EXPECT_DOUBLE_EQ(in_flight, plan::in_flight_microbatches(ps.layout.par, 4, stage));
    EXPECT_DOUBLE_EQ(m.peak, m.states + m.activations_peak);
  }
  // The logits are held from the head's forward to its backward only.
  const plan::StageInventory last = plan::stage_inventory(ps.model, ps.layout, ps.training,
                                                          ps.opt.fused_attention(), 1);
  EXPECT_GT(last.logits_bytes, 0);
  EXPECT_EQ(plan::stage_inventory(ps.model, ps.layout, ps.training, ps.opt.fused_attention(), 0)
                .logits_bytes,
            0);
  // Interleaved: every hold is released by the iteration's end (the fake device throws
  // otherwise) and the peak is positive.
  const FakeJob v = run_fake(true);
  for (const RankMeasure& m : v.measures) EXPECT_GT(m.memory.activations_peak, 0);
}

TEST(LaunchPlan, RankToGpuMapping) {
  // One process per node of 4 GPUs: process 1 runs ranks 4..7 on devices 0..3.
  Placement p = place(8, Procs(1, 2, 0), 4);
  EXPECT_EQ(p.ranks, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(p.devices, (std::vector<int>{0, 1, 2, 3}));
  // One process per GPU, 8 per node: process 5 (local 5) runs rank 5 on device 5.
  p = place(8, Procs(5, 8, 5), 8);
  EXPECT_EQ(p.ranks, std::vector<int>{5});
  EXPECT_EQ(p.devices, std::vector<int>{5});
  // More GPUs than the machine has: infeasible (exit 3).
  try {
    place(8, Procs(0, 1, 0), 4);
    FAIL() << "expected an infeasible-configuration error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInfeasible);
    EXPECT_NE(std::string(e.what()).find("needs 8 GPUs"), std::string::npos) << e.what();
  }
  EXPECT_THROW(place(8, Procs(0, 3, 0), 8), Error);  // 8 ranks over 3 processes
}

}  // namespace
}  // namespace trainsim::kexec
