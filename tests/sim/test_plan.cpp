// sim/plan: layout (placement, feasibility) and the memory model against Korthikanti et al. 2022.
#include <array>

#include <gtest/gtest.h>

#include "tests/support/models.h"

#include "sim/core/error.h"
#include "sim/plan/layout.h"
#include "sim/plan/memory.h"

namespace trainsim::plan {
namespace {

using testing::gpt;

topo::ClusterSpec cluster(int gpus) {
  topo::ClusterSpec c;
  c.gpus = gpus;
  c.gpus_per_node = 8;
  c.gpu.hbm_bytes = 80e9;
  return c;
}

// TP · PP · DP on tp·pp·dp GPUs of 8-GPU servers, global batch `batch`, micro-batch 1.
Layout layout_of(const model::ModelConfig& m, int tp, int pp, int dp, int batch) {
  ParallelConfig p;
  p.tp = tp;
  p.pp = pp;
  p.dp = dp;
  TrainingConfig t;
  t.global_batch = batch;
  return make_layout(m, cluster(tp * pp * dp), p, t);
}

// Megatron order (TP fastest, then CP, DP, PP) on 8-GPU servers.
TEST(Layout, GroupShapes) {
  const Layout L = layout_of(gpt(8, 1024, 16), 2, 4, 16, 64);
  EXPECT_EQ(L.tp.per_node, 2);
  EXPECT_EQ(L.tp.nodes, 1);
  EXPECT_EQ(L.dp.per_node, 4);  // stride 2 → 4 DP peers per server
  EXPECT_EQ(L.dp.nodes, 4);
  EXPECT_EQ(L.pp.per_node, 1);  // stride 32 → one stage per server
  EXPECT_EQ(L.pp.nodes, 4);
  EXPECT_EQ(L.microbatches, 4);
  EXPECT_EQ(L.layers_first_stage, 2);
}

// Groups that do not line up with the servers take the worst group's shape, counted by hand:
// TP 4 on 6-GPU servers puts ranks 4-7 on two servers (4, 5 | 6, 7), ranks 0-3 and 8-11 on
// one; TP 2 on 3-GPU servers splits ranks 2, 3 and 8, 9 one per server; 9 ranks on 8-GPU
// servers leave one on the last. Aligned groups keep the closed form's shape.
TEST(Layout, GroupsAcrossAServerBoundaryTakeTheWorstGroupsShape) {
  topo::ClusterSpec c = cluster(48);
  c.gpus_per_node = 6;
  const coll::GroupShape tp4 = group_shape(4, 1, c);
  EXPECT_EQ(tp4.nodes, 2);
  EXPECT_EQ(tp4.per_node, 2);
  EXPECT_EQ(tp4.min_per_node, 0);
  c.gpus_per_node = 3;
  const coll::GroupShape tp2 = group_shape(2, 1, c);
  EXPECT_EQ(tp2.nodes, 2);
  EXPECT_EQ(tp2.per_node, 1);
  // Stride 2 on 3-GPU servers (CP 3 after TP 2: members 0, 2, 4): 0 | 2 on server 0 and 1.
  const coll::GroupShape cp3 = group_shape(3, 2, c);
  EXPECT_EQ(cp3.nodes, 2);
  EXPECT_EQ(cp3.per_node, 2);
  EXPECT_EQ(cp3.min_per_node, 1);
  c.gpus = 9;
  c.gpus_per_node = 8;
  const coll::GroupShape all = group_shape(9, 1, c);
  EXPECT_EQ(all.nodes, 2);
  EXPECT_EQ(all.per_node, 8);
  EXPECT_EQ(all.min_per_node, 1);
  c.gpus = 64;
  for (const auto& [n, stride, nodes, per_node] :
       {std::array<int, 4>{8, 1, 1, 8}, {16, 1, 2, 8}, {4, 2, 1, 4}, {8, 8, 8, 1}, {4, 16, 4, 1}}) {
    const coll::GroupShape g = group_shape(n, stride, c);
    EXPECT_EQ(g.nodes, nodes) << n << " ranks, stride " << stride;
    EXPECT_EQ(g.per_node, per_node) << n << " ranks, stride " << stride;
    EXPECT_EQ(g.min_per_node, 0) << n << " ranks, stride " << stride;
  }
}

// The two rank orders (parallel.order) on 8-GPU servers in pods of 128 GPUs, TP 8 · PP 4 · DP 16
// (512 GPUs). Megatron's tp-cp-dp-pp: DP replicas 8 ranks apart (one per server, 16 servers,
// span 121 ranks: one pod), stages 128 apart (span 385: 4 pods). Llama 3's tp-cp-pp-dp: stages 8
// apart (span 25: one pod), replicas 32 apart (span 481: 4 pods).
TEST(Layout, RankOrderPlacesStagesOrReplicasTogether) {
  ParallelConfig p;
  p.tp = 8;
  p.pp = 4;
  p.dp = 16;
  TrainingConfig t;
  t.global_batch = 64;
  topo::ClusterSpec c = cluster(512);
  c.fabric.pod_gpus = 128;
  const Layout megatron = make_layout(gpt(8, 1024, 16), c, p, t);
  EXPECT_EQ(megatron.dp.nodes, 16);
  EXPECT_EQ(megatron.dp.pods, 1);
  EXPECT_EQ(megatron.pp.nodes, 4);
  EXPECT_EQ(megatron.pp.pods, 4);
  p.order = RankOrder::kTpCpPpDp;
  EXPECT_EQ(p.pp_stride(), 8);
  EXPECT_EQ(p.dp_stride(), 32);
  EXPECT_EQ(p.stage_of(8 * 4 + 8), 1);  // replica 1's stage 1
  const Layout llama = make_layout(gpt(8, 1024, 16), c, p, t);
  EXPECT_EQ(llama.dp.nodes, 16);
  EXPECT_EQ(llama.dp.pods, 4);
  EXPECT_EQ(llama.dp_cp.pods, 4);
  EXPECT_EQ(llama.pp.nodes, 4);
  EXPECT_EQ(llama.pp.pods, 1);
  // TP 4 · CP 2 · PP 4 · DP 4 (128 GPUs, pods of 64): the DP·CP group has two strides under
  // tp-cp-pp-dp, CP rank j at 4j and replica i at 32i: ranks {0, 4, 32, 36, 64, 68, 96, 100},
  // two per server on 4 servers, in 2 pods.
  p.tp = 4;
  p.cp = 2;
  p.dp = 4;
  c = cluster(128);
  c.fabric.pod_gpus = 64;
  const Layout two = make_layout(gpt(8, 1024, 16), c, p, t);
  EXPECT_EQ(two.dp_cp.ranks, 8);
  EXPECT_EQ(two.dp_cp.per_node, 2);
  EXPECT_EQ(two.dp_cp.nodes, 4);
  EXPECT_EQ(two.dp_cp.pods, 2);
  // Expert parallelism is modelled in Megatron's default order only.
  p.tp = 8;
  p.cp = 1;
  p.dp = 16;
  p.ep = 2;
  p.sp = true;
  model::ModelConfig moe = gpt(8, 1024, 16);
  moe.experts = 8;
  moe.top_k = 2;
  try {
    make_layout(moe, cluster(512), p, t);
    FAIL() << "EP under tp-cp-pp-dp";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, "parallel.order");
  }
}

void expect_infeasible(const ParallelConfig& p, const TrainingConfig& t, int gpus,
                       const std::string& field, const std::string& fragment) {
  try {
    make_layout(gpt(8, 1024, 16), cluster(gpus), p, t);
    FAIL() << "expected an infeasible error on " << field;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInfeasible);
    EXPECT_EQ(e.where().field, field);
    EXPECT_NE(e.message().find(fragment), std::string::npos) << e.message();
  }
}

TEST(Layout, InfeasibleConfigurations) {
  TrainingConfig t;
  t.global_batch = 64;
  ParallelConfig p;
  p.tp = 3;
  p.dp = 1;
  expect_infeasible(p, t, 3, "parallel.tp", "does not divide the 16 attention heads");
  p.tp = 2;
  p.dp = 3;
  expect_infeasible(p, t, 8, "cluster.gpus", "8 GPUs is not TP×PP×DP×CP = 2×1×3×1 = 6");
  p.dp = 4;
  t.global_batch = 10;
  expect_infeasible(p, t, 8, "training.global_batch", "not a multiple of micro_batch × DP");
  t.global_batch = 64;
  p.pp = 16;
  p.dp = 1;
  expect_infeasible(p, t, 32, "parallel.pp", "model chunks for only 8 layers");
  p.pp = 2;
  p.vpp = 2;
  p.dp = 4;
  expect_infeasible(p, t, 16, "parallel.vpp", "needs the interleaved schedule");
  // One stage has no pipeline to interleave (it ran, 3 MFU points apart at the two fidelities).
  p.pp = 1;
  p.dp = 8;
  p.schedule = Schedule::kInterleaved;
  expect_infeasible(p, t, 16, "parallel.vpp", "vpp 2 interleaves a pipeline, and PP 1 has none");
}

// Korthikanti et al. 2022, Table 2: activations per layer, 16-bit, no recompute:
// no parallelism 34·sbh + 5·as²b; TP t without SP sbh(10 + 24/t + 5as/ht); with SP sbh/t(34 +
// 5as/h); selective recompute with SP 34·sbh/t; full recompute 2·sbh (/t with SP).
// A learned position table is a plain embedding beside the vocab-parallel word table: whole on
// every TP rank (Megatron's LanguageModelEmbedding), so the first stage holds V·h/t + s·h (it
// counted (V + s)·h / t). A RoPE model has no table, and the TP 1 stage is the same either way.
TEST(Memory, LearnedPositionsAreWholeOnEveryTpRank) {
  model::ModelConfig m = gpt(4, 1024, 16, 51200, 2048);
  ASSERT_EQ(m.position, model::PositionKind::kLearned);
  const Layout L = layout_of(m, 8, 2, 1, 8);
  const double first = stage_parameters(m, L, true, false, 2).total();
  const double middle = stage_parameters(m, L, false, false, 2).total();
  EXPECT_DOUBLE_EQ(first - middle, 51200.0 * 1024 / 8 + 2048.0 * 1024);
  m.position = model::PositionKind::kRope;
  const Layout R = layout_of(m, 8, 2, 1, 8);
  EXPECT_DOUBLE_EQ(stage_parameters(m, R, true, false, 2).total() -
                       stage_parameters(m, R, false, false, 2).total(),
                   51200.0 * 1024 / 8);
}

TEST(Memory, KorthikantiActivationFormulas) {
  const model::ModelConfig m = gpt(4, 1024, 16, 1000, 512);
  const double s = 512, b = 2, h = 1024, a = 16;
  ParallelConfig p;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, p, 2, model::Recompute::kNone, false),
                   34 * s * b * h + 5 * a * s * s * b);
  p.tp = 4;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, p, 2, model::Recompute::kNone, false),
                   s * b * h * (10 + 24.0 / 4 + 5 * a * s / (h * 4)));
  p.sp = true;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, p, 2, model::Recompute::kNone, false),
                   s * b * h / 4 * (34 + 5 * a * s / h));
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, p, 2, model::Recompute::kSelective, false),
                   34 * s * b * h / 4);
  // FlashAttention keeps no s² scores, only the fp32 log-sum-exp per query and head: 4·a·s·b.
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, p, 2, model::Recompute::kNone, true),
                   34 * s * b * h / 4 + 4 * a * s * b / 4);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, p, 2, model::Recompute::kFull, false),
                   2 * s * b * h / 4);
  // DTensor TP (framework.sp_wgrad_input: saved) keeps the QKV and MLP inputs whole as gathered,
  // 2 + 2 bytes of s·b·h instead of their s/t rows; full recompute keeps only the layer input.
  p.sp_saves_gathered_input = true;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, p, 2, model::Recompute::kSelective, false),
                   34 * s * b * h / 4 + 4 * s * b * h * (1 - 1.0 / 4));
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, p, 2, model::Recompute::kFull, false),
                   2 * s * b * h / 4);
  p.sp_saves_gathered_input = false;
}

// Eager PyTorch keeps more (framework.activation unfused, framework.gqa_kv repeat): SwiGLU as
// F.silu then the product saves SiLU's output besides the gate and up (2f bytes a token more,
// TP-sharded), and GQA keys and values repeated to every query head are saved q wide instead of
// kv (4·(q − kv) bytes a token more). Llama 3 8B's block (q 4,096, kv 1,024, f 14,336), s 4,096,
// b 1, TP 2, SP: by hand, 2·14,336/2 and 4·3,072/2 bytes per token; full recompute keeps the
// layer input alone either way.
TEST(Memory, EagerActivationAndRepeatedKvKeepTheirCopies) {
  model::ModelConfig m = testing::llama3_8b(32, 4096);
  ParallelConfig p;
  p.tp = 2;
  p.sp = true;
  const auto bytes = [&] {
    return layer_activation_bytes(m, p, 1, model::Recompute::kNone, true);
  };
  const double base = bytes();
  p.activation_unfused = true;
  EXPECT_DOUBLE_EQ(bytes() - base, 4096.0 * 2 * 14336 / 2);
  p.activation_unfused = false;
  p.gqa_kv_repeated = true;
  EXPECT_DOUBLE_EQ(bytes() - base, 4096.0 * 4 * (4096 - 1024) / 2);
  p.activation_unfused = true;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, p, 1, model::Recompute::kFull, true),
                   2.0 * 4096 * 4096 / 2);
  m.mlp = model::MlpKind::kGelu;
  m.kv_heads = m.heads;
  const double gelu_mha = bytes();
  p.activation_unfused = false;
  p.gqa_kv_repeated = false;
  EXPECT_DOUBLE_EQ(bytes(), gelu_mha);  // nothing to repeat, no SiLU output to keep
}

// FP8 (Transformer Engine keeps each Linear's input as its FP8 copy): the QKV and MLP inputs
// (2 → 1 byte, replicated), the attention output (2h → h) and the MLP down-projection's input
// (2f → f, f = 4h) lose a byte an element: 34 − 2 − 1 − 4 = 27·sbh/t with SP and selective
// recompute; full recompute keeps its 16-bit layer input.
TEST(Memory, Fp8KeepsLinearInputsInOneByte) {
  const model::ModelConfig m = gpt(4, 1024, 16, 1000, 512);
  const double s = 512, b = 2, h = 1024;
  ParallelConfig p;
  p.tp = 4;
  p.sp = true;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, p, 2, model::Recompute::kSelective, false, true),
                   27 * s * b * h / 4);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, p, 2, model::Recompute::kFull, false, true),
                   2 * s * b * h / 4);
  model::ModelConfig swiglu = m;
  swiglu.mlp = model::MlpKind::kSwiglu;
  // SwiGLU keeps gate and up (16-bit) and their product (the down-projection's input, 1 byte).
  EXPECT_DOUBLE_EQ(layer_activation_bytes(swiglu, p, 2, model::Recompute::kSelective, false, false) -
                       layer_activation_bytes(swiglu, p, 2, model::Recompute::kSelective, false, true),
                   (2 * s * b * h + (s * b * h + s * b * swiglu.ffn_hidden)) / 4);
}

// Without dropout (Llama) the two 1-byte masks (2·sbh) and the attention-dropout mask and output
// (3·a·s²·b) are not stored: 32·sbh + 2·a·s²·b without parallelism (Korthikanti's inventory).
TEST(Memory, DropoutOffDropsItsMasks) {
  model::ModelConfig m = gpt(4, 1024, 16, 1000, 512);
  m.dropout = false;
  const double s = 512, b = 2, h = 1024, a = 16;
  ParallelConfig p;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, p, 2, model::Recompute::kNone, false),
                   32 * s * b * h + 2 * a * s * s * b);
  p.tp = 4;
  p.sp = true;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, p, 2, model::Recompute::kSelective, false),
                   32 * s * b * h / 4);
}

// Stage layers: an even split puts the layers that do not divide on the middle stages, not on
// the first (it holds the most in-flight activations); explicit end counts (Llama 3 405B: 126
// layers on 16 stages, 7 on each end, 8 on the 14 others) are honoured.
TEST(Layout, StageLayers) {
  ParallelConfig p;
  p.pp = 4;
  p.dp = 1;
  TrainingConfig t;
  t.global_batch = 8;
  Layout L = make_layout(gpt(18, 1024, 16), cluster(4), p, t);
  EXPECT_EQ(L.stage_layers, (std::vector<int>{4, 5, 5, 4}));
  EXPECT_EQ(L.chunk_layers(2, 0), (std::pair<int, int>{9, 5}));
  p.pp = 16;
  p.first_stage_layers = 7;
  p.last_stage_layers = 7;
  t.global_batch = 32;
  L = make_layout(gpt(126, 1024, 16), cluster(16), p, t);
  EXPECT_EQ(L.stage_layers.front(), 7);
  EXPECT_EQ(L.stage_layers.back(), 7);
  for (int st = 1; st < 15; ++st) EXPECT_EQ(L.stage_layers[static_cast<std::size_t>(st)], 8);
  EXPECT_EQ(L.chunk_layers(15, 0), (std::pair<int, int>{119, 7}));
  // Interleaved, 2 chunks: the first stage's small chunk comes first, the last stage's last.
  p.vpp = 2;
  p.schedule = Schedule::kInterleaved;
  L = make_layout(gpt(126, 1024, 16), cluster(16), p, t);
  EXPECT_EQ(L.chunk_layers(0, 0), (std::pair<int, int>{0, 3}));
  EXPECT_EQ(L.chunk_layers(1, 0), (std::pair<int, int>{3, 4}));
  EXPECT_EQ(L.chunk_layers(0, 1), (std::pair<int, int>{63, 4}));
  EXPECT_EQ(L.chunk_layers(15, 1), (std::pair<int, int>{123, 3}));
  // Llama 3's own layout (Llama Team 2024, §3.3.2): 8 chunks per stage, one layer each, the
  // first stage's first chunk holding only the embedding and the last stage's last chunk only
  // the output layer and loss: 16 × 8 = 128 chunks for 126 layers.
  p.vpp = 8;
  L = make_layout(gpt(126, 1024, 16), cluster(16), p, t);
  EXPECT_EQ(L.chunk_layers(0, 0), (std::pair<int, int>{0, 0}));
  EXPECT_EQ(L.chunk_layers(0, 1), (std::pair<int, int>{15, 1}));  // after chunk 0 of stages 1..15
  EXPECT_EQ(L.chunk_layers(15, 7), (std::pair<int, int>{126, 0}));
  int total = 0, empty = 0;
  for (int st = 0; st < 16; ++st) {
    for (int c = 0; c < 8; ++c) {
      const int n = L.chunk_layers(st, c).second;
      total += n;
      empty += n == 0 ? 1 : 0;
      if (n == 0) {
        EXPECT_TRUE((st == 0 && c == 0) || (st == 15 && c == 7)) << st << " " << c;
      }
    }
  }
  EXPECT_EQ(total, 126);
  EXPECT_EQ(empty, 2);
  // One end given: the other takes its share of the rest, 7 of 119 over 15 stages, and so the
  // same layout (it was refused as 128 chunks for 126 layers, counting only the given end).
  p.last_stage_layers = 0;
  L = make_layout(gpt(126, 1024, 16), cluster(16), p, t);
  EXPECT_EQ(L.stage_layers.back(), 7);
  EXPECT_EQ(L.chunk_layers(15, 7), (std::pair<int, int>{126, 0}));
  p.last_stage_layers = 7;
  // A chunk with nothing to run is refused: a middle stage short of a layer for its chunks,
  // or end stages not given fewer layers (16 × 8 chunks for 126 layers split evenly).
  p.first_stage_layers = 9;
  p.last_stage_layers = 9;
  try {
    make_layout(gpt(126, 1024, 16), cluster(16), p, t);  // 9 + 108 on 14 stages + 9: some of 7
    FAIL() << "a middle stage of 7 layers cannot fill 8 chunks";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, "parallel.vpp");
    EXPECT_NE(e.message().find("layers for 8 model chunks"), std::string::npos) << e.message();
  }
  p.first_stage_layers = 0;
  p.last_stage_layers = 0;
  try {
    make_layout(gpt(126, 1024, 16), cluster(16), p, t);
    FAIL() << "128 chunks for 126 evenly split layers";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, "parallel.vpp");
    EXPECT_NE(e.message().find("128 model chunks for only 126 layers"), std::string::npos)
        << e.message();
  }
  p.vpp = 2;
  p.first_stage_layers = 7;
  p.last_stage_layers = 7;
  p.first_stage_layers = 115;
  try {
    make_layout(gpt(126, 1024, 16), cluster(16), p, t);
    FAIL() << "115 + 7 of 126 layers on the ends leave too few for 14 stages";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, "parallel.first_stage_layers");
    EXPECT_NE(e.message().find("leave 4 of 126 layers for 14 other stages"), std::string::npos)
        << e.message();
  }
}

// In-flight micro-batches per stage: 1F1B p − s; interleaved ((p − s − 1)·2 + (v − 1)·p + 1)/v.
TEST(Memory, InFlightPerStage) {
  ParallelConfig p;
  p.pp = 8;
  EXPECT_DOUBLE_EQ(in_flight_microbatches(p, 64, 0), 8);
  EXPECT_DOUBLE_EQ(in_flight_microbatches(p, 64, 5), 3);
  EXPECT_DOUBLE_EQ(in_flight_microbatches(p, 2, 0), 2);
  p.schedule = Schedule::kInterleaved;
  p.vpp = 4;
  EXPECT_DOUBLE_EQ(in_flight_microbatches(p, 64, 0), (7 * 2 + 3 * 8 + 1) / 4.0);
  EXPECT_DOUBLE_EQ(in_flight_microbatches(p, 64, 7), (0 + 3 * 8 + 1) / 4.0);
}

// Activations in flight counted per chunk (Llama 3's layout, 30 layers as 7 + 8 + 8 + 7 on 4
// stages of 8 chunks, 32 micro-batches). Stage 0's warm-up holds (4 − 1)·2 + 7·4 + 1 = 35 chunk
// forwards in groups of 4 per chunk: chunk 0 (the embedding alone) 4 + 3 times, chunks 1..7 four
// times one layer: 28 layers, not 7 · 35/8. The last stage holds 7·4 + 1 = 29: chunks 0..6 four
// times, then its head-only chunk: 28, not 7 · 29/8. A middle stage of 8 equal chunks holds
// 8 · (2·2 + 28 + 1)/8 = 33.
TEST(Memory, InFlightLayersPerChunk) {
  ParallelConfig p;
  p.pp = 4;
  p.vpp = 8;
  p.schedule = Schedule::kInterleaved;
  p.first_stage_layers = 7;
  p.last_stage_layers = 7;
  TrainingConfig t;
  t.global_batch = 32;
  const Layout L = make_layout(gpt(30, 1024, 16), cluster(4), p, t);
  ASSERT_EQ(L.microbatches, 32);
  EXPECT_DOUBLE_EQ(in_flight_layers(L, 32, 0), 28);
  EXPECT_DOUBLE_EQ(in_flight_layers(L, 32, 3), 28);
  EXPECT_DOUBLE_EQ(in_flight_layers(L, 32, 1), 33);
  EXPECT_DOUBLE_EQ(in_flight_layers(L, 32, 1), 8 * in_flight_microbatches(p, 32, 1));
}

// Usable memory: the runtime's share is stated (context 512 MiB, cuBLASLt 2 × 4 MiB before
// Hopper, NCCL 16 channels × (4 MiB + 512 KiB + 4,915,200 B) per communicator) and allocator
// fragmentation is 10 % of the activations.
TEST(Memory, RuntimeOverheadByHand) {
  topo::GpuSpec gpu;
  gpu.sms = 108;
  ParallelConfig p;
  p.tp = 8;
  p.pp = 2;
  p.dp = 4;
  const RuntimeOverhead o = runtime_overhead(gpu, p);
  EXPECT_DOUBLE_EQ(o.context_bytes, 512.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(o.workspace_bytes, 8.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(o.nccl_bytes, 3 * 16 * (4.0 * 1024 * 1024 + 512 * 1024 + 4915200.0));
  gpu.sms = 132;
  EXPECT_DOUBLE_EQ(runtime_overhead(gpu, p).workspace_bytes, 64.0 * 1024 * 1024);
}

// Model states: 2 B weights, 4 B fp32 gradients, 12 B optimizer; ZeRO shards them over DP.
TEST(Memory, ZeroStagesShardModelStates) {
  const model::ModelConfig m = gpt(4, 1024, 16, 1000, 512);
  TrainingConfig t;
  t.global_batch = 8;
  t.recompute = model::Recompute::kFull;
  ParallelConfig p;
  p.dp = 8;
  topo::GpuSpec gpu;
  gpu.hbm_bytes = 80e9;
  const double P = model::count_parameters(m).total;
  for (int zero = 0; zero <= 3; ++zero) {
    p.zero = zero;
    const Layout L = make_layout(m, cluster(8), p, t);
    const MemoryUsage u = memory_per_gpu(m, L, t, false, gpu);
    EXPECT_DOUBLE_EQ(u.optimizer_bytes, zero >= 1 ? 12 * P / 8 : 12 * P) << zero;
    EXPECT_DOUBLE_EQ(u.runtime_reserved_bytes,
                     runtime_overhead(gpu, p).context_bytes +
                         runtime_overhead(gpu, p).workspace_bytes +
                         kAllocatorFragmentation * u.activations_bytes);
    EXPECT_DOUBLE_EQ(u.gradients_bytes, zero >= 2 ? 4 * P / 8 : 4 * P) << zero;
    // ZeRO-3 gathers the unit being computed and the next: two of the largest units, here a
    // layer (12.6 M parameters against the embedding's 1.5 M), at 2 B.
    const model::ParamCount pc = model::count_parameters(m);
    const double layer = pc.attention + pc.norms + pc.mlp;
    const double layer_buffers = zero >= 3 ? 2.0 * layer * 2 : 0.0;
    EXPECT_DOUBLE_EQ(u.weights_bytes, (zero >= 3 ? 2 * P / 8 : 2 * P) + layer_buffers) << zero;
    EXPECT_DOUBLE_EQ(u.peak_bytes, u.weights_bytes + u.gradients_bytes + u.optimizer_bytes +
                                       u.activations_bytes + u.comm_buffers_bytes +
                                       u.runtime_reserved_bytes);
  }
}

// In-flight micro-batches on the first stage: 1F1B p, interleaved p·(1 + (p−1)/(p·v)), GPipe m.
TEST(Memory, PipelineInFlightMicrobatches) {
  const model::ModelConfig m = gpt(16, 1024, 16, 1000, 512);
  TrainingConfig t;
  t.global_batch = 32;
  topo::GpuSpec gpu;
  gpu.hbm_bytes = 80e9;
  ParallelConfig p;
  p.pp = 4;
  p.dp = 1;
  p.schedule = Schedule::k1F1B;
  EXPECT_DOUBLE_EQ(memory_per_gpu(m, make_layout(m, cluster(4), p, t), t, false, gpu)
                       .in_flight_microbatches, 4);
  p.schedule = Schedule::kInterleaved;
  p.vpp = 2;
  EXPECT_DOUBLE_EQ(memory_per_gpu(m, make_layout(m, cluster(4), p, t), t, false, gpu)
                       .in_flight_microbatches, 4 * (1 + 3.0 / 8));
  p.schedule = Schedule::kGpipe;
  p.vpp = 1;
  EXPECT_DOUBLE_EQ(memory_per_gpu(m, make_layout(m, cluster(4), p, t), t, false, gpu)
                       .in_flight_microbatches, 32);
}

}  // namespace
}  // namespace trainsim::plan

namespace trainsim::plan {
namespace {

// Published per-GPU model-state memory (ZeRO, Rajbhandari et al. SC'20, Figure 1): a 7.5 B-
// parameter model with fp16 weights and gradients and Adam's fp32 states (K = 12) on 64 DP GPUs
// needs 120 GB without ZeRO, 31.4 GB with optimizer-state sharding, 16.6 GB adding gradients and
// 1.9 GB adding parameters. Megatron's distributed-optimizer table (bf16 weights, fp32 gradients):
// 18 bytes per parameter, 6 + 12/d with the distributed optimizer.
TEST(Memory, PublishedModelStateFigures) {
  model::ModelConfig m = gpt(1, 1024, 16, 1000, 512);
  TrainingConfig t;
  t.global_batch = 64;
  t.recompute = model::Recompute::kFull;
  t.grad_reduce = Precision::kBf16;
  ParallelConfig p;
  p.dp = 64;
  topo::GpuSpec gpu;
  gpu.hbm_bytes = 80e9;
  const double P = model::count_parameters(m).total;
  const double gb_per_7_5b = 7.5e9 / P / 1e9;  // scale this model's bytes to 7.5 B parameters
  const double expected[] = {120, 31.4, 16.6, 1.9};
  for (int zero = 0; zero <= 3; ++zero) {
    p.zero = zero;
    const MemoryUsage u = memory_per_gpu(m, make_layout(m, cluster(64), p, t), t, false, gpu);
    double states = u.weights_bytes + u.gradients_bytes + u.optimizer_bytes;
    // The gathered buffers are not model states: two layers, but never more than the stage,
    // which here is one layer and the embedding (P < 2 layers): P at 2 B.
    const model::ParamCount pc = model::count_parameters(m);
    ASSERT_LT(P, 2.0 * (pc.attention + pc.norms + pc.mlp));
    if (zero == 3) states -= P * 2;
    EXPECT_NEAR(states * gb_per_7_5b, expected[zero], 0.06) << "ZeRO " << zero;
  }
  t.grad_reduce = Precision::kFp32;
  for (int zero : {0, 1}) {
    p.zero = zero;
    const MemoryUsage u = memory_per_gpu(m, make_layout(m, cluster(64), p, t), t, false, gpu);
    EXPECT_DOUBLE_EQ((u.weights_bytes + u.gradients_bytes + u.optimizer_bytes) / P,
                     zero == 0 ? 18.0 : 6.0 + 12.0 / 64);
  }
}

// TorchTitan's per-op checkpointing keeps, per token of a layer: its input (2h), wq's output
// (2q), wv's (2kv), the fused attention's output (2q) and fp32 log-sum-exp per head (4a), w1's
// output (2f) and, of a SwiGLU MLP, w2's (2h). Llama 3 8B: 2·4096 + 2·4096 + 2·1024 + 2·4096 +
// 4·32 + 2·14336 + 2·4096 = 63,616 bytes a token. An unfused attention core keeps nothing; a GeLU
// MLP's w2 runs again.
TEST(Memory, SelectiveOpKeepsWhatTorchtitansPolicyKeeps) {
  const model::ModelConfig m = testing::llama3_8b(2, 1024);
  ParallelConfig p;
  const double tokens = 2 * 1024;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, p, 2, model::Recompute::kSelectiveOp, true),
                   63616.0 * tokens);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, p, 2, model::Recompute::kSelectiveOp, false),
                   (63616.0 - 2 * 4096 - 4 * 32) * tokens);
  const model::ModelConfig g = gpt(4, 1024, 16, 1000, 512);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(g, p, 2, model::Recompute::kSelectiveOp, true),
                   (2.0 * 1024 * 4 + 2.0 * 4096 + 4.0 * 16) * 2 * 512);
  // Under TP 4 with SP: the input and the sharded outputs over t, w2's row-parallel partial sum
  // whole (h wide), and the two reduce-scatters' outputs (h/t each).
  ParallelConfig tp4;
  tp4.tp = 4;
  tp4.sp = true;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, tp4, 2, model::Recompute::kSelectiveOp, true),
                   (2.0 * 4096 / 4 + (2.0 * 4096 + 2 * 1024 + 2 * 4096 + 4 * 32 + 2 * 14336) / 4 +
                    2.0 * 4096 + 2 * 2.0 * 4096 / 4) *
                       tokens);
  // Between none and full: what it keeps is more than the input alone, less than everything.
  EXPECT_GT(layer_activation_bytes(m, p, 2, model::Recompute::kSelectiveOp, true),
            layer_activation_bytes(m, p, 2, model::Recompute::kFull, true));
  EXPECT_LT(layer_activation_bytes(m, p, 2, model::Recompute::kSelectiveOp, true),
            layer_activation_bytes(m, p, 2, model::Recompute::kNone, true));
}

}  // namespace
}  // namespace trainsim::plan
