// kernels/bench_plan: the kernels `calibrate kernels` times for a scenario. Expected shapes by
// hand for MegaScale 175B at TP 8 (h 12288, 96 heads, s 2048, micro-batch 1): qkv is
// [2048 × 12288]·[12288 × 3·12288/8 = 4608], attention 96/8 = 12 heads of 128 over 2048 tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "calibrate/gemm_fit.h"
#include "kernels/bench_plan.h"
#include "scenarios/scenario.h"
#include "sim/core/error.h"
#include "sim/model/ops.h"

namespace trainsim::kernels {
namespace {

model::ModelConfig gpt175b() {
  model::ModelConfig m;
  m.layers = 96;
  m.hidden = 12288;
  m.heads = 96;
  m.kv_heads = 96;
  m.ffn_hidden = 4 * 12288;
  m.vocab = 51200;
  m.seq_len = 2048;
  return m;
}

const BenchItem* find(const std::vector<BenchItem>& v, const std::string& label,
                      const std::string& op = "") {
  for (const BenchItem& b : v) {
    if (b.label == label && (op.empty() || b.op == op)) return &b;
  }
  return nullptr;
}

TEST(BenchPlan, MegaScaleShapesFusedPath) {
  model::Sharding s;
  s.tp = 8;
  s.sp = true;
  s.fused_attention = true;
  const auto items = bench_items_for_model(gpt175b(), s, DType::kBf16, DType::kBf16);
  const BenchItem* qkv = find(items, "qkv");
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(qkv->op, "gemm");
  EXPECT_EQ(qkv->m, 2048);
  EXPECT_EQ(qkv->n, 4608);
  EXPECT_EQ(qkv->k, 12288);
  EXPECT_DOUBLE_EQ(qkv->flops, 2.0 * 2048 * 4608 * 12288);
  // Backward GEMMs as compute_model.h prices them: dgrad (m, k, n), wgrad (k, n, m).
  const BenchItem* dgrad = find(items, "qkv.dgrad");
  ASSERT_NE(dgrad, nullptr);
  EXPECT_EQ(dgrad->n, 12288);
  EXPECT_EQ(dgrad->k, 4608);
  const BenchItem* wgrad = find(items, "qkv.wgrad");
  ASSERT_NE(wgrad, nullptr);
  EXPECT_EQ(wgrad->m, 12288);
  EXPECT_EQ(wgrad->k, 2048);
  const BenchItem* fwd = find(items, "attention", "attention_fwd");
  const BenchItem* bwd = find(items, "attention", "attention_bwd");
  ASSERT_NE(fwd, nullptr);
  ASSERT_NE(bwd, nullptr);
  EXPECT_EQ(fwd->batch, 12);
  EXPECT_EQ(fwd->m, 2048);
  EXPECT_EQ(fwd->n, 2048);
  EXPECT_EQ(fwd->k, 128);
  // The FLOPs a causal fused kernel executes: 16 query blocks of 128, block i computes i + 1 key
  // blocks, Σ = 136 blocks → 1,088 keys per query (model::executed_keys_per_query).
  EXPECT_DOUBLE_EQ(fwd->flops, 4.0 * 12 * 2048 * 1088 * 128);
  EXPECT_DOUBLE_EQ(bwd->flops, 2 * fwd->flops);
  // Under SP the norm runs on 2048/8 = 256 rows of 12288.
  const BenchItem* norm = find(items, "norm_attn");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->op, "layernorm");
  EXPECT_EQ(norm->m, 256);
  EXPECT_EQ(norm->n, 12288);
  // Vocab-parallel cross-entropy over 51200/8 = 6400 columns.
  const BenchItem* ce = find(items, "cross_entropy");
  ASSERT_NE(ce, nullptr);
  EXPECT_EQ(ce->m, 2048);
  EXPECT_EQ(ce->n, 6400);
  // The norm_mlp has the norm_attn shape: timed once.
  EXPECT_EQ(find(items, "norm_mlp"), nullptr);
}

// The loss kernel is one row per token whichever implementation's bytes the model op counts
// (framework.cross_entropy): 2,048 rows of 51,200 / 8 = 6,400 logits each time.
TEST(BenchPlan, CrossEntropyRowsAreTokensForEveryImplementation) {
  for (const model::CrossEntropyKernel k :
       {model::CrossEntropyKernel::kUnfused, model::CrossEntropyKernel::kNative,
        model::CrossEntropyKernel::kTe}) {
    model::Sharding s;
    s.tp = 8;
    s.sp = true;
    s.cross_entropy = k;
    const auto items = bench_items_for_model(gpt175b(), s, DType::kBf16, DType::kBf16);
    const BenchItem* ce = find(items, "cross_entropy");
    ASSERT_NE(ce, nullptr) << model::to_string(k);
    EXPECT_EQ(ce->m, 2048) << model::to_string(k);
    EXPECT_EQ(ce->n, 6400) << model::to_string(k);
  }
}

// The MoE permutations are timed as the copy kernel over [rows × h]: the copy moves exactly the
// bytes the model op counts (2 bytes read and 2 written an element).
TEST(BenchPlan, MoePermutationsAreCopies) {
  model::ModelConfig m = gpt175b();
  m.experts = 8;
  m.top_k = 2;
  model::Sharding s;
  s.tp = 8;
  s.sp = true;
  const auto items = bench_items_for_model(m, s, DType::kBf16, DType::kBf16);
  for (const char* name : {"moe_permute", "moe_unpermute"}) {
    const BenchItem* b = find(items, name);
    ASSERT_NE(b, nullptr) << name;
    EXPECT_EQ(b->op, "copy");
    EXPECT_EQ(b->n, 12288);
    EXPECT_DOUBLE_EQ(b->bytes, memory_kernel_bytes("copy", b->m, b->n, DType::kBf16));
  }
  // The gather of the TP rank's own 2,048 / 8 × 2 routed rows (SP) and the sort of all 2,048 × 2
  // rows gathered over TP.
  EXPECT_EQ(find(items, "moe_permute")->m, 2048.0 / 8 * 2 + 2048.0 * 2);
}

// Every memory-bound model op maps to a kernel whose shape moves the bytes the model counts
// (cross-entropy aside: the model counts an unfused fp32 pipeline, the kernel is fused).
TEST(BenchPlan, UnfusedLlamaMoeShapesMoveTheModelsBytes) {
  model::ModelConfig m = gpt175b();
  m.mlp = model::MlpKind::kSwiglu;
  m.norm = model::NormKind::kRmsNorm;
  m.kv_heads = 8;
  m.experts = 8;
  m.top_k = 2;
  m.moe_every = 2;
  m.attention_window = 1024;
  model::Sharding s;
  s.tp = 4;
  s.micro_batch = 2;
  const auto items = bench_items_for_model(m, s, DType::kBf16, DType::kFp8);
  std::map<std::string, double> model_bytes;
  for (int layer = 0; layer < 2; ++layer) {
    for (const model::Op& op : model::layer_forward_ops(m, s, layer)) {
      // The first layer's op of a name is the one the plan keeps under that label (layer 0 is the
      // MoE layer: its SwiGLU runs on top_k× the rows under the same label, as its own sample).
      if (op.kind == model::OpKind::kMemory) model_bytes.emplace(op.name, op.bytes);
    }
  }
  int checked = 0;
  for (const auto& [name, bytes] : model_bytes) {
    // Same kernel and shape as norm_attn / attn_bias_dropout_add: timed once, under that name.
    if (name == "norm_mlp" || name == "mlp_bias_dropout_add") continue;
    const BenchItem* b = find(items, name);
    ASSERT_NE(b, nullptr) << name;
    // Parameters (gamma, bias) are the only extra traffic: under 0.1 %.
    EXPECT_NEAR(b->bytes / bytes, 1.0, 1e-3) << name << " as " << b->op;
    ++checked;
  }
  EXPECT_GE(checked, 6);  // norm, softmax, dropout, 2 residual adds, swiglu, router_topk
  EXPECT_EQ(find(items, "swiglu")->op, "swiglu");
  EXPECT_EQ(find(items, "norm_attn")->op, "rmsnorm");
  EXPECT_EQ(find(items, "attn_dropout")->op, "dropout");
  // GEMMs in fp8, batched attention GEMMs stay bf16.
  EXPECT_EQ(find(items, "qkv")->dtype, DType::kFp8);
  EXPECT_EQ(find(items, "attn_scores")->dtype, DType::kBf16);
  EXPECT_EQ(find(items, "attn_scores")->batch, 2 * 96 / 4);
  EXPECT_NE(find(items, "expert_up"), nullptr);
}

TEST(BenchPlan, SlidingWindowAttentionKeepsFullKeysAndWindow) {
  model::ModelConfig m = gpt175b();
  m.attention_window = 512;
  model::Sharding s;
  s.tp = 8;
  s.fused_attention = true;
  const BenchItem* a = nullptr;
  const auto items = bench_items_for_model(m, s, DType::kBf16, DType::kBf16);
  a = find(items, "attention", "attention_fwd");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->n, 2048);
  EXPECT_EQ(a->window, 512);
  // The model's executed count: a 512-token window is 4 key blocks; query block i computes
  // min(i, 4) + 1 blocks, Σ = 15 + 11·5 = 70 → 560 keys per query.
  EXPECT_DOUBLE_EQ(a->flops, 4.0 * 12 * 2048 * 560 * 128);
}

// Every scenario shipped in the repository, on both operator paths, maps to kernels the attention
// kernel and cuBLASLt can run (head dims 64/96/128).
TEST(BenchPlan, EveryShippedScenarioMaps) {
  const std::string dir = std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/";
  for (const char* f :
       {"megascale-175b-12288.yaml", "examples/llama3-8b-64xh100.yaml",
        "examples/megascale-175b-256-ablation.yaml", "examples/megatron-1.7b-32xa100.yaml"}) {
    const scen::Scenario sc = scen::load_scenario_file(dir + f);
    for (bool fused : {false, true}) {
      model::Sharding s;
      s.micro_batch = sc.training.micro_batch;
      s.tp = sc.parallel.tp;
      s.cp = sc.parallel.cp;
      s.sp = sc.parallel.sp && sc.parallel.tp > 1;
      s.fused_attention = fused;
      std::vector<BenchItem> items;
      ASSERT_NO_THROW(items = bench_items_for_model(sc.model, s, DType::kBf16, DType::kBf16)) << f;
      EXPECT_GE(items.size(), 15u) << f;
      for (const BenchItem& b : items) {
        EXPECT_GT(b.m * b.n * b.batch, 0) << f << " " << b.label;
        if (b.op == "attention_fwd") {
          EXPECT_TRUE(b.k == 64 || b.k == 96 || b.k == 128) << f << " head dim " << b.k;
        }
      }
    }
  }
}

TEST(BenchPlan, GridCoversEveryKernelAndFitsItsOwnModel) {
  const auto g = standard_grid(DType::kBf16, DType::kBf16);
  std::map<std::string, int> kinds;
  for (const BenchItem& b : g) ++kinds[b.op];
  for (const char* k :
       {"gemm", "attention_fwd", "attention_bwd", "layernorm", "rmsnorm", "softmax", "dropout",
        "bias_dropout_add", "bias_gelu", "swiglu", "embedding", "cross_entropy", "adam", "lamb"}) {
    EXPECT_GT(kinds[k], 0) << k;
  }
  EXPECT_GE(kinds["gemm"], 40);
  // Times made by the profile model for the grid fit back to the model's constants.
  std::vector<calib::MeasuredKernel> samples;
  for (const BenchItem& b : g) {
    double t = 3e-6;
    if (b.op == "gemm") {
      const double d0 = 80, e = 0.75;
      t += b.flops / (989e12 * e * (b.m / (b.m + d0)) * (b.n / (b.n + d0)) * (b.k / (b.k + d0)));
    } else if (b.op == "attention_fwd") {
      t += b.flops / (989e12 * 0.5);
    } else if (b.op == "attention_bwd") {
      t += b.flops / (989e12 * 0.4);
    } else {
      t += b.bytes / (4.8e12 * 0.85);
    }
    samples.push_back(to_measured(b, t, 30));
  }
  calib::PeakRates peaks;
  peaks.dense_16bit_flops = 989e12;
  peaks.hbm_Bps = 4.8e12;
  const calib::KernelFits f = calib::fit_kernels(samples, peaks);
  EXPECT_NEAR(f.gemm.peak_efficiency, 0.75, 1e-3);
  EXPECT_NEAR(f.gemm.half_dim, 80, 0.5);
  EXPECT_NEAR(f.memory.efficiency, 0.85, 1e-6);
  EXPECT_NEAR(f.attention_fwd_efficiency, 0.5, 1e-6);
  EXPECT_NEAR(f.attention_bwd_efficiency, 0.4, 1e-6);
}

// A small model's GEMMs alone do not pin the surface: its shapes share most of their
// dimensions, so with 2.5 % timing noise e_max and d0 trade off against each other. With the
// grid's GEMMs (what calibrate kernels always times) the same noisy samples give them back.
TEST(BenchPlan, GemmGridConditionsASmallModelsFit) {
  model::ModelConfig m = gpt175b();
  m.layers = 24;
  m.hidden = 2304;
  m.heads = 24;
  m.kv_heads = 24;
  m.ffn_hidden = 4 * 2304;
  model::Sharding s;
  std::vector<BenchItem> model_gemms;
  for (const BenchItem& b : bench_items_for_model(m, s, DType::kBf16, DType::kBf16)) {
    if (b.op == "gemm" && b.batch == 1) model_gemms.push_back(b);
  }
  const std::vector<BenchItem> grid = standard_gemm_grid(DType::kBf16);
  ASSERT_GE(grid.size(), 40u);
  for (const BenchItem& b : grid) EXPECT_EQ(b.op, "gemm");
  EXPECT_EQ(grid.size(), [] {
    std::size_t n = 0;
    for (const BenchItem& b : standard_grid(DType::kBf16, DType::kBf16)) n += b.op == "gemm";
    return n;
  }());
  const double e = 0.80, d0 = 90, o = 10e-6;
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0.0, 0.025);
  auto samples = [&](const std::vector<BenchItem>& items) {
    std::vector<calib::GemmSample> out;
    for (const BenchItem& b : items) {
      calib::GemmSample x{b.m, b.n, b.k, 1, 989e12, 0};
      x.seconds = (o + calib::gemm_surface_time(x, e, d0)) * std::exp(noise(rng));
      out.push_back(x);
    }
    return out;
  };
  std::vector<calib::GemmSample> with_grid = samples(model_gemms);
  const calib::GemmFit alone = calib::fit_gemm_surface_and_overhead(with_grid);
  for (const calib::GemmSample& x : samples(grid)) with_grid.push_back(x);
  const calib::GemmFit both = calib::fit_gemm_surface_and_overhead(with_grid);
  EXPECT_NEAR(both.peak_efficiency, e, 0.05 * e);
  EXPECT_NEAR(both.half_dim, d0, 0.3 * d0);
  EXPECT_NEAR(both.overhead_s, o, 0.3 * o);
  // The model's shapes alone miss at least one constant by far more.
  EXPECT_TRUE(std::abs(alone.peak_efficiency / e - 1) > 0.1 ||
              std::abs(alone.half_dim / d0 - 1) > 0.5 || std::abs(alone.overhead_s / o - 1) > 0.5)
      << alone.peak_efficiency << " " << alone.half_dim << " " << alone.overhead_s;
}

TEST(BenchPlan, MeasuredSampleCarriesTheRightQuantity) {
  const auto g = standard_grid(DType::kBf16, DType::kBf16);
  const calib::MeasuredKernel gemm = to_measured(g.front(), 1e-5, 20);
  EXPECT_EQ(gemm.op, "gemm");
  EXPECT_GT(gemm.flops, 0);
  EXPECT_EQ(gemm.bytes, 0);
  EXPECT_EQ(gemm.dtype, "bf16");
  const calib::MeasuredKernel adam = to_measured(g.back(), 1e-3, 20);
  EXPECT_EQ(adam.op, "lamb");
  EXPECT_EQ(adam.dtype, "fp32");
  EXPECT_DOUBLE_EQ(adam.bytes, 42.0 * 134217728);
  EXPECT_EQ(adam.flops, 0);
  EXPECT_THROW(memory_kernel_bytes("gemm", 1, 1, DType::kBf16), Error);
}

// Each memory-bound op's backward is timed as its own kind at the forward's shape, with the
// bytes its kernel moves (kernels/bench_plan.cpp states them): LayerNorm on 256 × 12288 in bf16
// reads x and dy and writes dx (3·256·12288·2 B), reads gamma (12288·2 B) and the fp32 mean and
// rstd (8·256 B) and writes the fp32 dgamma and dbeta (8·12288 B).
TEST(BenchPlan, BackwardItemsAreTheirOwnKindsAtTheForwardShapes) {
  model::Sharding s;
  s.tp = 8;
  s.sp = true;
  s.fused_attention = true;
  const auto items = bench_items_for_model(gpt175b(), s, DType::kBf16, DType::kBf16);
  const BenchItem* norm = find(items, "norm_attn.bwd");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->op, "layernorm_bwd");
  EXPECT_EQ(norm->m, 256);
  EXPECT_EQ(norm->n, 12288);
  EXPECT_DOUBLE_EQ(norm->bytes, 3.0 * 256 * 12288 * 2 + 12288 * 2 + 8 * 256 + 8 * 12288);
  // GeLU on 2048 tokens × 49152/8 columns: x, dy in, dx out, bias in, fp32 dbias out.
  const BenchItem* gelu = find(items, "bias_gelu.bwd");
  ASSERT_NE(gelu, nullptr);
  EXPECT_EQ(gelu->op, "bias_gelu_bwd");
  EXPECT_EQ(gelu->n, 6144);
  EXPECT_DOUBLE_EQ(gelu->bytes, 3.0 * gelu->m * 6144 * 2 + 6144 * 2 + 4 * 6144);
  for (const char* op : {"attn_bias_dropout_add.bwd", "embedding.bwd"}) {
    const BenchItem* b = find(items, op);
    ASSERT_NE(b, nullptr) << op;
    EXPECT_TRUE(b->op.ends_with("_bwd")) << op;
  }
  // Cross-entropy's forward kernel writes the gradient: its backward is the same sample.
  EXPECT_EQ(find(items, "cross_entropy.bwd"), nullptr);
  EXPECT_TRUE(has_backward_kernel("swiglu"));
  EXPECT_FALSE(has_backward_kernel("cross_entropy"));
  EXPECT_FALSE(has_backward_kernel("adam"));
  // Swiglu backward: gate, up, dy in; dgate, dup out: 5 values per output element.
  EXPECT_DOUBLE_EQ(memory_kernel_bytes("swiglu_bwd", 10, 8, DType::kBf16), 5.0 * 80 * 2);
  EXPECT_DOUBLE_EQ(memory_kernel_bytes("dropout_bwd", 10, 8, DType::kBf16), 80.0 * 5);
}

// The grid times the copy roofline at 64 MiB, 256 MiB and 1 GiB (and smaller), moving twice the
// buffer, and every memory-bound kind, backward kernels included, at ≥ 64 MiB of traffic.
TEST(BenchPlan, GridHasTheCopyRooflineAndEveryKindAtScale) {
  const auto g = standard_grid(DType::kBf16, DType::kBf16);
  std::set<double> copies;
  std::map<std::string, double> largest;
  for (const BenchItem& b : g) {
    if (b.op == "copy") {
      EXPECT_EQ(b.n, 4096);
      copies.insert(b.m * b.n * 2);
      EXPECT_DOUBLE_EQ(b.bytes, 2 * b.m * b.n * 2);
    }
    if (b.bytes > 0) largest[b.op] = std::max(largest[b.op], b.bytes);
  }
  for (double mib : {64.0, 256.0, 1024.0}) EXPECT_EQ(copies.count(mib * 1048576), 1u) << mib;
  EXPECT_GE(copies.size(), 5u);
  for (const char* k : {"layernorm", "rmsnorm", "softmax", "dropout", "bias_dropout_add",
                        "bias_gelu", "swiglu", "embedding", "cross_entropy", "adam", "lamb",
                        "layernorm_bwd", "rmsnorm_bwd", "softmax_bwd", "dropout_bwd",
                        "bias_dropout_add_bwd", "bias_gelu_bwd", "swiglu_bwd", "embedding_bwd"}) {
    EXPECT_GE(largest[k], 64.0 * 1048576) << k;
  }
  // lamb stays last (MeasuredSampleCarriesTheRightQuantity).
  EXPECT_EQ(g.back().op, "lamb");
}

// The simulator prices a timed backward kernel with model::memory_backward_byte_ratio of the
// forward's bytes: the large-shape ratio of this file's byte counts (bf16), within 0.1 % at a
// model's shapes, so that what calibrate times and what the simulator charges stay in step.
TEST(BenchPlan, SimulatorsBackwardByteRatiosMatchTheKernels) {
  for (const char* kind : {"layernorm", "rmsnorm", "softmax", "dropout", "bias_dropout_add",
                           "bias_gelu", "swiglu", "embedding"}) {
    ASSERT_TRUE(has_backward_kernel(kind)) << kind;
    const double fwd = memory_kernel_bytes(kind, 16384, 12288, DType::kBf16);
    const double bwd = memory_kernel_bytes(std::string(kind) + "_bwd", 16384, 12288, DType::kBf16);
    EXPECT_NEAR(model::memory_backward_byte_ratio(kind), bwd / fwd,
                1e-3 * model::memory_backward_byte_ratio(kind))
        << kind;
  }
  EXPECT_EQ(model::memory_backward_byte_ratio("cross_entropy"), 0);
  EXPECT_EQ(model::memory_backward_byte_ratio("adam"), 0);
  EXPECT_FALSE(has_backward_kernel("cross_entropy"));
}

}  // namespace
}  // namespace trainsim::kernels
