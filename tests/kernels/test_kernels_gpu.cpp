// Every GPU kernel of kernels/ against its CPU reference (kernels/reference.h) on random inputs,
// per storage type. Inputs are rounded to the storage type first and the reference runs on the
// rounded values, so the bound covers only what the kernel itself adds: output rounding (2^-11
// relative for fp16, 2^-8 for bf16) and float-vs-double accumulation order. A NaN or infinity
// never passes. On a machine without a usable CUDA device every test is skipped and says why.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <random>
#include <utility>

#include "kernels/bench.h"
#include "kernels/device_ops.h"
#include "kernels/nccl_bench.h"
#include "kernels/reference.h"

namespace trainsim::kernels {
namespace {

#define REQUIRE_DEVICE()                                                         \
  do {                                                                           \
    std::string why;                                                             \
    if (!dev::device_available(&why)) GTEST_SKIP() << "no CUDA device: " << why; \
  } while (0)

std::vector<float> random_vector(std::size_t n, unsigned seed, float lo = -2, float hi = 2) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Relative bound by dtype for values of order 1 (scaled by the largest reference magnitude).
double tolerance(DType t) {
  switch (t) {
    case DType::kF32:
      return 2e-5;
    case DType::kF16:
      return 4e-3;
    case DType::kBf16:
      return 2.5e-2;
    case DType::kFp8:
      return 0.15;
  }
  return 0;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, DType t,
                  const std::string& what, double scale = 1.0) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double peak = 0;
  for (float w : want) peak = std::max(peak, double(std::fabs(w)));
  const double tol = tolerance(t) * scale;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const bool finite = std::isfinite(got[i]);
    const double err = std::fabs(double(got[i]) - want[i]);
    if (!finite || err > tol * (std::fabs(want[i]) + 0.05 * peak + 1e-6)) {
      if (++bad <= 5) {
        ADD_FAILURE() << what << " (" << dtype_name(t) << ") [" << i << "]: got " << got[i]
                      << ", want " << want[i];
      }
    }
  }
  EXPECT_EQ(bad, 0u) << what << " (" << dtype_name(t) << "): " << bad << " of " << got.size()
                     << " outside the bound";
}

const DType kStorage[] = {DType::kF32, DType::kF16, DType::kBf16};

TEST(KernelsGpu, GemmMatchesReference) {
  REQUIRE_DEVICE();
  const int m = 64, n = 48, k = 96, batch = 3;
  for (DType t : {DType::kF32, DType::kF16, DType::kBf16}) {
    const auto x = ref::round_to(random_vector(std::size_t(batch) * m * k, 1), t);
    const auto w = ref::round_to(random_vector(std::size_t(batch) * n * k, 2), t);
    std::vector<float> want(std::size_t(batch) * m * n);
    ref::gemm_nt(x.data(), w.data(), want.data(), m, n, k, batch);
    // fp32 GEMMs may run on TF32 tensor cores: bound like bf16 inputs.
    expect_close(dev::gemm_nt(x, w, m, n, k, batch, t), want, t == DType::kF32 ? DType::kF16 : t,
                 "gemm");
  }
}

// fp8 (E4M3) inputs, bf16 output: the reference runs on the E4M3-rounded inputs, so only the
// bf16 rounding of the result and the accumulation order remain. Dimensions multiples of 16.
TEST(KernelsGpu, Fp8GemmMatchesReference) {
  REQUIRE_DEVICE();
  if (!dev::gemm_supported(DType::kFp8))
    GTEST_SKIP() << "fp8 GEMMs need sm_89+ (this GPU is older)";
  const int m = 64, n = 48, k = 128;
  const auto x = ref::round_to(random_vector(std::size_t(m) * k, 3), DType::kFp8);
  const auto w = ref::round_to(random_vector(std::size_t(n) * k, 4), DType::kFp8);
  std::vector<float> want(std::size_t(m) * n);
  ref::gemm_nt(x.data(), w.data(), want.data(), m, n, k);
  expect_close(dev::gemm_nt(x, w, m, n, k, 1, DType::kFp8), want, DType::kBf16, "fp8 gemm");
}

TEST(KernelsGpu, LayerNormAndRmsNorm) {
  REQUIRE_DEVICE();
  const int rows = 37, cols = 1000;  // cols not a multiple of the block
  for (DType t : kStorage) {
    const auto x = ref::round_to(random_vector(std::size_t(rows) * cols, 3, -3, 5), t);
    const auto g = ref::round_to(random_vector(cols, 4, 0.5f, 1.5f), t);
    const auto b = ref::round_to(random_vector(cols, 5), t);
    std::vector<float> want(x.size());
    ref::layernorm(x.data(), g.data(), b.data(), want.data(), nullptr, nullptr, rows, cols, 1e-5f);
    expect_close(dev::layernorm(x, g, b, rows, cols, 1e-5f, t), want, t, "layernorm");
    ref::rmsnorm(x.data(), g.data(), want.data(), nullptr, rows, cols, 1e-6f);
    expect_close(dev::rmsnorm(x, g, rows, cols, 1e-6f, t), want, t, "rmsnorm");
  }
}

TEST(KernelsGpu, SoftmaxAndCrossEntropy) {
  REQUIRE_DEVICE();
  const int rows = 19, cols = 3001;
  for (DType t : kStorage) {
    const auto x = ref::round_to(random_vector(std::size_t(rows) * cols, 6, -8, 8), t);
    std::vector<float> want(x.size());
    ref::softmax(x.data(), want.data(), rows, cols, 0.7f);
    expect_close(dev::softmax(x, rows, cols, 0.7f, t), want, t, "softmax");
    std::vector<std::int32_t> targets(rows);
    for (int r = 0; r < rows; ++r) targets[std::size_t(r)] = (r * 977) % cols;
    std::vector<float> loss(rows), grad(x.size());
    ref::cross_entropy(x.data(), targets.data(), loss.data(), grad.data(), rows, cols);
    const dev::CrossEntropy got = dev::cross_entropy(x, targets, rows, cols, t);
    expect_close(got.loss, loss, DType::kF32, "cross_entropy loss", 50);  // fp32 out, __expf
    expect_close(got.grad, grad, t, "cross_entropy grad", 2);
  }
}

TEST(KernelsGpu, BiasGeluSwigluEmbedding) {
  REQUIRE_DEVICE();
  const int rows = 33, cols = 515;
  for (DType t : kStorage) {
    const auto x = ref::round_to(random_vector(std::size_t(rows) * cols, 7, -4, 4), t);
    const auto bias = ref::round_to(random_vector(cols, 8), t);
    std::vector<float> want(x.size());
    ref::bias_gelu(x.data(), bias.data(), want.data(), rows, cols);
    expect_close(dev::bias_gelu(x, bias, rows, cols, t), want, t, "bias_gelu", 2);
    const auto gu = ref::round_to(random_vector(std::size_t(rows) * 2 * cols, 9, -4, 4), t);
    ref::swiglu(gu.data(), want.data(), rows, cols);
    expect_close(dev::swiglu(gu, rows, cols, t), want, t, "swiglu", 2);
    const int vocab = 301, hidden = 96;
    const auto table = ref::round_to(random_vector(std::size_t(vocab) * hidden, 10), t);
    std::vector<std::int32_t> tokens = {0, 300, 17, 17, 299, 5};
    std::vector<float> emb(tokens.size() * hidden);
    ref::embedding(tokens.data(), table.data(), emb.data(), int(tokens.size()), hidden);
    const auto got = dev::embedding(tokens, table, hidden, t);
    EXPECT_EQ(got, emb) << "embedding is a copy: exact";
  }
}

TEST(KernelsGpu, DropoutMasksMatchTheReferenceExactly) {
  REQUIRE_DEVICE();
  const int rows = 64, cols = 777;
  for (DType t : kStorage) {
    const auto x = ref::round_to(random_vector(std::size_t(rows) * cols, 11), t);
    const auto bias = ref::round_to(random_vector(cols, 12), t);
    const auto res = ref::round_to(random_vector(x.size(), 13), t);
    std::vector<float> want(x.size());
    std::vector<std::uint8_t> mask(x.size());
    ref::dropout(x.data(), want.data(), mask.data(), x.size(), 0.1f, 99);
    dev::Masked got = dev::dropout(x, 0.1f, 99, t);
    EXPECT_EQ(got.mask, mask);
    expect_close(got.y, want, t, "dropout");
    ref::bias_dropout_add(x.data(), bias.data(), res.data(), want.data(), mask.data(), rows, cols,
                          0.1f, 5);
    got = dev::bias_dropout_add(x, bias, res, rows, cols, 0.1f, 5, t);
    EXPECT_EQ(got.mask, mask);
    expect_close(got.y, want, t, "bias_dropout_add", 2);
  }
}

TEST(KernelsGpu, FlashAttentionForwardAndBackward) {
  REQUIRE_DEVICE();
  struct Case {
    ref::AttentionShape s;
  };
  // Odd lengths (partial tiles), causal with sk > sq, sliding window, both head dims.
  const ref::AttentionShape shapes[] = {
      {3, 77, 77, 64, true, 0, 0.125f},     {2, 50, 130, 128, true, 0, 0.0883883f},
      {2, 100, 100, 64, true, 33, 0.125f},  {1, 65, 90, 128, false, 0, 0.0883883f},
      {2, 70, 70, 96, true, 0, 0.1020621f},
  };
  for (DType t : {DType::kF16, DType::kBf16}) {
    for (ref::AttentionShape s : shapes) {
      s.impl = ref::AttentionImpl::kOwn;  // the own kernel (kAuto may pick cuDNN, tested below)
      const std::size_t nq = std::size_t(s.bh) * s.sq * s.d, nk = std::size_t(s.bh) * s.sk * s.d;
      const auto q = ref::round_to(random_vector(nq, 20), t);
      const auto k = ref::round_to(random_vector(nk, 21), t);
      const auto v = ref::round_to(random_vector(nk, 22), t);
      const auto d_o = ref::round_to(random_vector(nq, 23), t);
      std::vector<float> o(nq), lse(std::size_t(s.bh) * s.sq);
      ref::attention_forward(s, q.data(), k.data(), v.data(), o.data(), lse.data());
      const std::string name = "attention d" + std::to_string(s.d) + " sq" + std::to_string(s.sq) +
                               " sk" + std::to_string(s.sk) + " w" + std::to_string(s.window);
      const dev::Attention got = dev::attention_forward(s, q, k, v, t);
      expect_close(got.o, o, t, name + " O", 2);
      expect_close(got.lse, lse, DType::kF32, name + " lse", 100);
      // Backward from the reference O and lse rounded as the forward stores them.
      const auto o_t = ref::round_to(o, t);
      std::vector<float> dq(nq), dk(nk), dv(nk);
      ref::attention_backward(s, q.data(), k.data(), v.data(), o_t.data(), d_o.data(), lse.data(),
                              dq.data(), dk.data(), dv.data());
      const dev::AttentionGrads g = dev::attention_backward(s, q, k, v, o_t, d_o, lse, t);
      expect_close(g.dq, dq, t, name + " dQ", 3);
      expect_close(g.dk, dk, t, name + " dK", 3);
      expect_close(g.dv, dv, t, name + " dV", 3);
    }
  }
}

// cuDNN's fused SDPA (kernels/cudnn_sdpa.h, forced with AttentionImpl::kCudnn) against the CPU
// reference: no mask, causal, GQA, sliding window; fp16 and bf16; head dims 64 and 128; sq = sk
// in {128, 256}. Skips, saying why, when libcudnn.so.9 cannot be loaded or the build has no cuDNN.
// A refusal of a shape is a failure that prints cuDNN's reason, except for the sliding window and
// the bottom-right (sq < sk) case, which cuDNN may refuse: then the reason is printed and checked
// to be non-empty.
TEST(KernelsGpu, CudnnFusedAttentionForwardAndBackward) {
  REQUIRE_DEVICE();
  auto error_of = [](const ref::AttentionShape& s, DType t) -> std::string {
    const std::size_t nq = std::size_t(s.bh) * s.sq * s.d;
    const std::size_t nk = std::size_t(s.bh / s.q_per_kv) * s.sk * s.d;
    try {
      dev::attention_forward(s, std::vector<float>(nq, 0.0f), std::vector<float>(nk, 0.0f),
                             std::vector<float>(nk, 0.0f), t);
      return {};
    } catch (const std::exception& e) {  // trainsim::Error from the module
      return e.what();
    }
  };
  {
    ref::AttentionShape probe{2, 128, 128, 64, false, 0, 0.125f};
    probe.impl = ref::AttentionImpl::kCudnn;
    const std::string e = error_of(probe, DType::kBf16);
    for (const char* absent : {"cannot load libcudnn", "this build has no cuDNN", "lacks cudnn",
                               "cuDNN >= 9.0 needed", "needs sm80"}) {
      if (e.find(absent) != std::string::npos) GTEST_SKIP() << "cuDNN not usable: " << e;
    }
  }
  struct Case {
    ref::AttentionShape s;
    bool may_refuse;
  };
  auto shape = [](int bh, int sq, int sk, int d, bool causal, int window, int q_per_kv) {
    ref::AttentionShape s{bh, sq, sk, d, causal, window, float(1.0 / std::sqrt(double(d)))};
    s.q_per_kv = q_per_kv;
    s.impl = ref::AttentionImpl::kCudnn;
    return s;
  };
  const Case cases[] = {
      {shape(4, 128, 128, 64, false, 0, 1), false},  {shape(4, 256, 256, 128, false, 0, 1), false},
      {shape(4, 128, 128, 128, true, 0, 1), false},  {shape(4, 256, 256, 64, true, 0, 1), false},
      {shape(8, 128, 128, 64, true, 0, 2), false},   {shape(8, 256, 256, 128, false, 0, 4), false},
      {shape(8, 256, 256, 64, true, 0, 4), false},   {shape(2, 256, 256, 64, true, 64, 1), true},
      {shape(4, 128, 128, 128, true, 32, 2), true},  {shape(2, 128, 256, 64, true, 0, 1), true},
  };
  int ran = 0;
  for (DType t : {DType::kF16, DType::kBf16}) {
    for (const Case& c : cases) {
      const ref::AttentionShape& s = c.s;
      const std::string name = std::string("cudnn sdpa ") + dtype_name(t) + " bh" +
                               std::to_string(s.bh) + " g" + std::to_string(s.q_per_kv) + " d" +
                               std::to_string(s.d) + " sq" + std::to_string(s.sq) + " sk" +
                               std::to_string(s.sk) + (s.causal ? " causal" : "") + " w" +
                               std::to_string(s.window);
      const std::string refused = error_of(s, t);
      if (!refused.empty()) {
        if (c.may_refuse) {
          std::cout << "[ INFO ] " << name << ": refused by cuDNN: " << refused << "\n";
          EXPECT_GT(refused.size(), 20u) << name;
        } else {
          ADD_FAILURE() << name << ": cuDNN refused or failed: " << refused;
        }
        continue;
      }
      ++ran;
      const std::size_t nq = std::size_t(s.bh) * s.sq * s.d;
      const std::size_t nk = std::size_t(s.bh / s.q_per_kv) * s.sk * s.d;
      const auto q = ref::round_to(random_vector(nq, 40), t);
      const auto k = ref::round_to(random_vector(nk, 41), t);
      const auto v = ref::round_to(random_vector(nk, 42), t);
      const auto d_o = ref::round_to(random_vector(nq, 43), t);
      std::vector<float> o(nq), lse(std::size_t(s.bh) * s.sq);
      ref::attention_forward(s, q.data(), k.data(), v.data(), o.data(), lse.data());
      try {
        const dev::Attention got = dev::attention_forward(s, q, k, v, t);
        expect_close(got.o, o, t, name + " O", 2);
        // Stats: max + ln Σ exp(s − max) of the scaled scores, the reference's lse.
        expect_close(got.lse, lse, DType::kF32, name + " lse", 100);
        const auto o_t = ref::round_to(o, t);
        std::vector<float> dq(nq), dk(nk), dv(nk);
        ref::attention_backward(s, q.data(), k.data(), v.data(), o_t.data(), d_o.data(),
                                lse.data(), dq.data(), dk.data(), dv.data());
        const dev::AttentionGrads g = dev::attention_backward(s, q, k, v, o_t, d_o, lse, t);
        expect_close(g.dq, dq, t, name + " dQ", 3);
        expect_close(g.dk, dk, t, name + " dK", 3);
        expect_close(g.dv, dv, t, name + " dV", 3);
      } catch (const std::exception& e) {
        ADD_FAILURE() << name << ": " << e.what();
      }
    }
  }
  EXPECT_GT(ran, 0) << "cuDNN ran none of the shapes";
}

TEST(KernelsGpu, AdamAndLambSteps) {
  REQUIRE_DEVICE();
  const std::size_t n = 100003;
  dev::OptimizerState s;
  s.w = random_vector(n, 30);
  s.m = random_vector(n, 31, -0.1f, 0.1f);
  s.v = random_vector(n, 32, 1e-4f, 1e-2f);
  const auto g = random_vector(n, 33);
  ref::AdamParams p;
  p.lr = 1e-3f;
  p.step = 7;
  p.weight_decay = 0.01f;
  for (bool lamb : {false, true}) {
    dev::OptimizerState want = s;
    if (lamb) {
      ref::lamb_step(want.w.data(), g.data(), want.m.data(), want.v.data(), n, p);
    } else {
      ref::adam_step(want.w.data(), g.data(), want.m.data(), want.v.data(), n, p);
    }
    const dev::OptimizerState got = lamb ? dev::lamb_step(s, g, p) : dev::adam_step(s, g, p);
    const char* name = lamb ? "lamb" : "adam";
    expect_close(got.m, want.m, DType::kF32, std::string(name) + " m", 5);
    expect_close(got.v, want.v, DType::kF32, std::string(name) + " v", 5);
    // The weights move by ~lr: compare the update, not the weight, for a meaningful bound.
    std::vector<float> du_got(n), du_want(n);
    for (std::size_t i = 0; i < n; ++i) {
      du_got[i] = got.w[i] - s.w[i];
      du_want[i] = want.w[i] - s.w[i];
    }
    expect_close(du_got, du_want, DType::kF16, std::string(name) + " update");
    expect_close(got.w_bf16, ref::round_to(want.w, DType::kBf16), DType::kBf16,
                 std::string(name) + " bf16 copy");
  }
}

// Row lengths that take every launch shape of the row kernels (kernels/norms.cu) in every
// storage type: a warp per row (≤ 128 16-byte vectors), a block per row holding 1, 2 or 4
// vectors per thread (≤ 2048), the looped fallback with 16-byte accesses (longer rows) and with
// scalar ones (1001: not a whole number of vectors); rows × cols about 1M values.
const int kRowCols[] = {200, 768, 1001, 4096, 12288, 40000};
int rows_for(int cols) { return std::max(3, (1 << 20) / cols); }

TEST(KernelsGpu, VectorisedRowKernelsMatchReferenceOnEveryPath) {
  REQUIRE_DEVICE();
  for (int cols : kRowCols) {
    const int rows = rows_for(cols);
    const std::string at = " " + std::to_string(rows) + "x" + std::to_string(cols);
    const std::size_t n = std::size_t(rows) * cols;
    for (DType t : kStorage) {
      const auto x = ref::round_to(random_vector(n, 100, -3, 5), t);
      const auto g = ref::round_to(random_vector(cols, 101, 0.5f, 1.5f), t);
      const auto b = ref::round_to(random_vector(cols, 102), t);
      std::vector<float> want(n);
      ref::layernorm(x.data(), g.data(), b.data(), want.data(), nullptr, nullptr, rows, cols, 1e-5f);
      expect_close(dev::layernorm(x, g, b, rows, cols, 1e-5f, t), want, t, "layernorm" + at);
      ref::rmsnorm(x.data(), g.data(), want.data(), nullptr, rows, cols, 1e-6f);
      expect_close(dev::rmsnorm(x, g, rows, cols, 1e-6f, t), want, t, "rmsnorm" + at);
      const auto z = ref::round_to(random_vector(n, 103, -8, 8), t);
      ref::softmax(z.data(), want.data(), rows, cols, 0.7f);
      expect_close(dev::softmax(z, rows, cols, 0.7f, t), want, t, "softmax" + at);
      std::vector<std::int32_t> targets(static_cast<std::size_t>(rows));
      for (int r = 0; r < rows; ++r) targets[std::size_t(r)] = (r * 7919) % cols;
      std::vector<float> loss(static_cast<std::size_t>(rows)), grad(n);
      ref::cross_entropy(z.data(), targets.data(), loss.data(), grad.data(), rows, cols);
      const dev::CrossEntropy ce = dev::cross_entropy(z, targets, rows, cols, t);
      expect_close(ce.loss, loss, DType::kF32, "cross_entropy loss" + at, 50);
      expect_close(ce.grad, grad, t, "cross_entropy grad" + at, 2);
    }
  }
}

// The element-wise kernels on the 16-byte path (column counts that are whole vectors, a flat
// length with a tail) and on the scalar one (odd column counts).
TEST(KernelsGpu, VectorisedElementwiseKernelsMatchReference) {
  REQUIRE_DEVICE();
  for (const auto& [rows, cols] : std::vector<std::pair<int, int>>{{5, 8}, {257, 1024}, {300, 1536}, {33, 515}, {1000, 3}}) {
    const std::string at = " " + std::to_string(rows) + "x" + std::to_string(cols);
    const std::size_t n = std::size_t(rows) * cols;
    for (DType t : kStorage) {
      const auto x = ref::round_to(random_vector(n, 110, -4, 4), t);
      const auto bias = ref::round_to(random_vector(cols, 111), t);
      const auto res = ref::round_to(random_vector(n, 112), t);
      std::vector<float> want(n);
      ref::bias_gelu(x.data(), bias.data(), want.data(), rows, cols);
      expect_close(dev::bias_gelu(x, bias, rows, cols, t), want, t, "bias_gelu" + at, 2);
      const auto gu = ref::round_to(random_vector(2 * n, 113, -4, 4), t);
      ref::swiglu(gu.data(), want.data(), rows, cols);
      expect_close(dev::swiglu(gu, rows, cols, t), want, t, "swiglu" + at, 2);
      std::vector<std::uint8_t> mask(n);
      ref::bias_dropout_add(x.data(), bias.data(), res.data(), want.data(), mask.data(), rows, cols,
                            0.1f, 17);
      const dev::Masked got = dev::bias_dropout_add(x, bias, res, rows, cols, 0.1f, 17, t);
      EXPECT_EQ(got.mask, mask) << "bias_dropout_add" << at;
      expect_close(got.y, want, t, "bias_dropout_add" + at, 2);
      // Embedding rows of `cols` values gathered from a 97-row table: an exact copy.
      const auto table = ref::round_to(random_vector(std::size_t(97) * cols, 114), t);
      std::vector<std::int32_t> tokens(std::min(rows, 300));
      for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::int32_t>((i * 31) % 97);
      std::vector<float> emb(tokens.size() * cols);
      ref::embedding(tokens.data(), table.data(), emb.data(), int(tokens.size()), cols);
      EXPECT_EQ(dev::embedding(tokens, table, cols, t), emb) << "embedding" << at;
    }
  }
  // Flat dropout: whole vectors and a tail of 5.
  const std::size_t n = (std::size_t(1) << 20) + 5;
  for (DType t : kStorage) {
    const auto x = ref::round_to(random_vector(n, 115), t);
    std::vector<float> want(n);
    std::vector<std::uint8_t> mask(n);
    ref::dropout(x.data(), want.data(), mask.data(), n, 0.25f, 3);
    const dev::Masked got = dev::dropout(x, 0.25f, 3, t);
    EXPECT_EQ(got.mask, mask);
    expect_close(got.y, want, t, "dropout 2^20+5");
  }
}

// The backward kernels against their references (kernels/reference.h `<kind>_bwd`) on every
// launch shape. Column sums (dgamma, dbeta, dbias) are fp32 sums over hundreds of rows in
// another order (atomics): bound as fp32 with room for that order.
TEST(KernelsGpu, NormAndSoftmaxBackwardsMatchReference) {
  REQUIRE_DEVICE();
  for (int cols : kRowCols) {
    const int rows = rows_for(cols);
    const std::string at = " " + std::to_string(rows) + "x" + std::to_string(cols);
    const std::size_t n = std::size_t(rows) * cols;
    for (DType t : kStorage) {
      const auto x = ref::round_to(random_vector(n, 120, -3, 5), t);
      const auto dy = ref::round_to(random_vector(n, 121), t);
      const auto g = ref::round_to(random_vector(cols, 122, 0.5f, 1.5f), t);
      const auto b = ref::round_to(random_vector(cols, 123), t);
      std::vector<float> y(n), mean(static_cast<std::size_t>(rows)), rstd(mean.size());
      ref::layernorm(x.data(), g.data(), b.data(), y.data(), mean.data(), rstd.data(), rows, cols,
                     1e-5f);
      std::vector<float> dx(n), dg(static_cast<std::size_t>(cols)), db(dg.size());
      ref::layernorm_bwd(x.data(), dy.data(), g.data(), mean.data(), rstd.data(), dx.data(),
                         dg.data(), db.data(), rows, cols);
      dev::NormGrads got = dev::layernorm_bwd(x, dy, g, mean, rstd, rows, cols, t);
      expect_close(got.dx, dx, t, "layernorm_bwd dx" + at, 3);
      expect_close(got.dgamma, dg, DType::kF32, "layernorm_bwd dgamma" + at, 50);
      expect_close(got.dbeta, db, DType::kF32, "layernorm_bwd dbeta" + at, 50);

      ref::rmsnorm(x.data(), g.data(), y.data(), rstd.data(), rows, cols, 1e-6f);
      ref::rmsnorm_bwd(x.data(), dy.data(), g.data(), rstd.data(), dx.data(), dg.data(), rows,
                       cols);
      got = dev::rmsnorm_bwd(x, dy, g, rstd, rows, cols, t);
      expect_close(got.dx, dx, t, "rmsnorm_bwd dx" + at, 3);
      expect_close(got.dgamma, dg, DType::kF32, "rmsnorm_bwd dgamma" + at, 50);

      const auto z = ref::round_to(random_vector(n, 124, -8, 8), t);
      ref::softmax(z.data(), y.data(), rows, cols, 0.7f);
      const auto yt = ref::round_to(y, t);  // the forward's output as stored
      ref::softmax_bwd(yt.data(), dy.data(), dx.data(), rows, cols, 0.7f);
      expect_close(dev::softmax_bwd(yt, dy, rows, cols, 0.7f, t), dx, t, "softmax_bwd" + at, 3);
    }
  }
}

TEST(KernelsGpu, ElementwiseBackwardsMatchReference) {
  REQUIRE_DEVICE();
  for (const auto& [rows, cols] : std::vector<std::pair<int, int>>{{5, 8}, {257, 1024}, {300, 1536}, {33, 515}, {1000, 3}}) {
    const std::string at = " " + std::to_string(rows) + "x" + std::to_string(cols);
    const std::size_t n = std::size_t(rows) * cols;
    for (DType t : kStorage) {
      const auto x = ref::round_to(random_vector(n, 130, -4, 4), t);
      const auto bias = ref::round_to(random_vector(cols, 131), t);
      const auto dy = ref::round_to(random_vector(n, 132), t);
      std::vector<float> dx(n), dbias(static_cast<std::size_t>(cols));
      ref::bias_gelu_bwd(x.data(), bias.data(), dy.data(), dx.data(), dbias.data(), rows, cols);
      dev::BiasGrads got = dev::bias_gelu_bwd(x, bias, dy, rows, cols, t);
      expect_close(got.dx, dx, t, "bias_gelu_bwd dx" + at, 5);
      expect_close(got.dbias, dbias, DType::kF32, "bias_gelu_bwd dbias" + at, 50);

      const auto gu = ref::round_to(random_vector(2 * n, 133, -4, 4), t);
      std::vector<float> dgu(2 * n);
      ref::swiglu_bwd(gu.data(), dy.data(), dgu.data(), rows, cols);
      expect_close(dev::swiglu_bwd(gu, dy, rows, cols, t), dgu, t, "swiglu_bwd" + at, 5);

      std::vector<std::uint8_t> mask(n);
      std::vector<float> y(n);
      ref::dropout(x.data(), y.data(), mask.data(), n, 0.1f, 9);
      ref::dropout_bwd(dy.data(), mask.data(), dx.data(), n, 0.1f);
      expect_close(dev::dropout_bwd(dy, mask, 0.1f, t), dx, t, "dropout_bwd" + at);
      ref::bias_dropout_add_bwd(dy.data(), mask.data(), dx.data(), dbias.data(), rows, cols, 0.1f);
      got = dev::bias_dropout_add_bwd(dy, mask, rows, cols, 0.1f, t);
      expect_close(got.dx, dx, t, "bias_dropout_add_bwd dx" + at);
      expect_close(got.dbias, dbias, DType::kF32, "bias_dropout_add_bwd dbias" + at, 50);

      // Embedding: repeated tokens add up; untouched rows stay 0.
      const int vocab = 97;
      std::vector<std::int32_t> tokens(static_cast<std::size_t>(rows));
      for (int i = 0; i < rows; ++i) tokens[std::size_t(i)] = (i * 13) % 50;
      std::vector<float> dtable(std::size_t(vocab) * cols, 0.0f);
      ref::embedding_bwd(tokens.data(), dy.data(), dtable.data(), rows, cols);
      expect_close(dev::embedding_bwd(tokens, dy, vocab, cols, t), dtable, DType::kF32,
                   "embedding_bwd" + at, 20);
    }
  }
}

// The copy roofline moves every byte, on the 16-byte path (aligned ends, with a tail) and the
// byte path (offsets that break the alignment).
TEST(KernelsGpu, CopyKernelCopiesEveryByte) {
  REQUIRE_DEVICE();
  for (std::size_t bytes : {std::size_t(1), std::size_t(15), std::size_t(16), std::size_t(17),
                            std::size_t(4103), (std::size_t(1) << 22) + 3}) {
    std::vector<unsigned char> src(bytes);
    for (std::size_t i = 0; i < bytes; ++i) src[i] = static_cast<unsigned char>((i * 131 + 7) & 0xFF);
    for (const auto& [so, dof] : std::vector<std::pair<int, int>>{{0, 0}, {1, 0}, {0, 3}, {5, 5}}) {
      EXPECT_EQ(dev::copy(src, so, dof), src) << bytes << " bytes, offsets " << so << ", " << dof;
    }
  }
}

// Not a check: with TRAINSIM_BANDWIDTH_REPORT set, times the copy roofline and every memory-bound
// kind at its largest grid shape (≥ 64 MiB moved) and prints each one's bandwidth and its
// fraction of the copy's at the largest size (the target: ≥ 0.85).
TEST(KernelsGpu, MemoryBandwidthReport) {
  REQUIRE_DEVICE();
  if (std::getenv("TRAINSIM_BANDWIDTH_REPORT") == nullptr) {
    GTEST_SKIP() << "set TRAINSIM_BANDWIDTH_REPORT=1 to time the memory-bound kernels";
  }
  std::map<std::string, BenchItem> largest;
  std::vector<BenchItem> items;
  for (const BenchItem& b : standard_grid(DType::kBf16, DType::kBf16)) {
    if (!(b.bytes > 0)) continue;
    if (b.op == "copy" && b.bytes >= 64.0 * 1048576) items.push_back(b);
    auto it = largest.find(b.op);
    if (b.op != "copy" && (it == largest.end() || b.bytes > it->second.bytes)) largest[b.op] = b;
  }
  for (const auto& [op, b] : largest) items.push_back(b);
  BenchOptions o;
  o.repeats = 20;
  o.warmup = 3;
  const BenchResult r = run_kernel_bench(items, o, {});
  for (const std::string& s : r.skipped) ADD_FAILURE() << "skipped: " << s;
  double copy_bps = 0;
  for (const calib::MeasuredKernel& k : r.samples) {
    if (k.op == "copy") copy_bps = std::max(copy_bps, k.bytes / k.median_s);
  }
  ASSERT_GT(copy_bps, 0);
  std::printf("%-22s %10s %10s %10s %9s %8s\n", "kind", "rows", "cols", "MiB", "GB/s", "/copy");
  for (const calib::MeasuredKernel& k : r.samples) {
    const double bps = k.bytes / k.median_s;
    std::printf("%-22s %10.0f %10.0f %10.1f %9.1f %8.3f\n", k.op.c_str(), k.m, k.n,
                k.bytes / 1048576, bps / 1e9, bps / copy_bps);
  }
  std::printf("%s\n", r.provenance.gpu_name.c_str());
}

// The timing driver of `calibrate kernels` on the smallest grid item of every kernel kind: each
// gives one finite, positive median and nothing is skipped.
TEST(KernelsGpu, BenchDriverTimesEveryKind) {
  REQUIRE_DEVICE();
  std::map<std::string, BenchItem> smallest;
  for (const BenchItem& b : standard_grid(DType::kBf16, DType::kBf16)) {
    const double size = b.flops + b.bytes;
    auto it = smallest.find(b.op);
    if (it == smallest.end() || size < it->second.flops + it->second.bytes) smallest[b.op] = b;
  }
  std::vector<BenchItem> items;
  for (const auto& [op, b] : smallest) items.push_back(b);
  BenchOptions o;
  o.repeats = 3;
  o.warmup = 1;
  o.rotate_bytes = 1e6;
  int seen = 0;
  const BenchResult r = run_kernel_bench(items, o, [&](const calib::MeasuredKernel&) { ++seen; });
  for (const std::string& s : r.skipped) ADD_FAILURE() << "skipped: " << s;
  ASSERT_EQ(r.samples.size(), items.size());
  EXPECT_EQ(seen, static_cast<int>(items.size()));
  for (const calib::MeasuredKernel& k : r.samples) {
    EXPECT_TRUE(std::isfinite(k.median_s) && k.median_s > 0) << k.op << " " << k.median_s;
    EXPECT_LT(k.median_s, 1.0) << k.op;
  }
  EXPECT_FALSE(r.provenance.gpu_name.empty());
  EXPECT_FALSE(r.provenance.driver_version.empty());
}

TEST(KernelsGpu, NcclAllReduceOverLocalGpus) {
  REQUIRE_DEVICE();
  if (!nccl_built()) GTEST_SKIP() << "this build has no NCCL";
  const std::vector<float> x = random_vector(4099, 40);
  // One rank: the sum of one contribution is itself.
  EXPECT_EQ(nccl_all_reduce_check(x, 1), x);
  EXPECT_FALSE(nccl_version().empty());
}

}  // namespace
}  // namespace trainsim::kernels
