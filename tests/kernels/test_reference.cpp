// kernels/reference: the CPU yardsticks of the GPU kernels, checked against values derived by hand
// (each test states the derivation) and, for the attention backward, against finite differences
// of the forward.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/dropout_hash.h"
#include "kernels/reference.h"

namespace trainsim::kernels::ref {
namespace {

TEST(Reference, RoundToStorageTypes) {
  // bf16 keeps 8 mantissa bits: 1 + 2^-9 is halfway between 1 and 1 + 2^-8 → even (1).
  EXPECT_EQ(round_to(1.0f + std::ldexp(1.0f, -9), DType::kBf16), 1.0f);
  EXPECT_EQ(round_to(1.0f + 3 * std::ldexp(1.0f, -9), DType::kBf16), 1.0f + std::ldexp(1.0f, -7));
  // fp16 keeps 11 significant bits: 2049 → 2048 (tie to even), 2051 → 2052.
  EXPECT_EQ(round_to(2049.0f, DType::kF16), 2048.0f);
  EXPECT_EQ(round_to(2051.0f, DType::kF16), 2052.0f);
  EXPECT_EQ(round_to(1e-8f, DType::kF16), 0.0f);  // below half the smallest subnormal 2^-24
  // E4M3: 4 significant bits, max 448; 1.0625 = 1 + 1/16 is a tie → 1; 17 → 16; 1000 → 448.
  EXPECT_EQ(round_to(1.0625f, DType::kFp8), 1.0f);
  EXPECT_EQ(round_to(17.0f, DType::kFp8), 16.0f);
  EXPECT_EQ(round_to(-1000.0f, DType::kFp8), -448.0f);
  EXPECT_EQ(round_to(0.3f, DType::kF32), 0.3f);
}

// The bytes the GPU reads: hand-derived bit patterns. fp16 1.0 = 0x3C00 (exponent 15), −2 =
// 0xC000; bf16 1.0 = 0x3F80 (top half of fp32 0x3F800000); E4M3 1.0 = 0 0111 000 = 0x38, 448 =
// 0 1111 110 = 0x7E (the largest finite), −2 = 1 1000 000 = 0xC0, 2^-9 = subnormal 0x01,
// 0.75·2^-6 = subnormal 0 0000 110 = 0x06.
TEST(Reference, StorageEncodings) {
  auto bytes16 = [](const std::vector<unsigned char>& b, std::size_t i) {
    return b[2 * i] | (b[2 * i + 1] << 8);  // little-endian
  };
  const std::vector<float> x = {1.0f, -2.0f};
  const auto h = encode(x, DType::kF16);
  EXPECT_EQ(bytes16(h, 0), 0x3C00);
  EXPECT_EQ(bytes16(h, 1), 0xC000);
  const auto b = encode(x, DType::kBf16);
  EXPECT_EQ(bytes16(b, 0), 0x3F80);
  EXPECT_EQ(bytes16(b, 1), 0xC000);
  const std::vector<float> f8 = {1.0f, 448.0f, -2.0f, std::ldexp(1.0f, -9), 0.75f / 64, 0.0f};
  const auto e = encode(f8, DType::kFp8);
  const std::vector<unsigned char> want = {0x38, 0x7E, 0xC0, 0x01, 0x06, 0x00};
  EXPECT_EQ(e, want);
  EXPECT_EQ(decode(e, DType::kFp8), f8);
  // Round trip of random values through every type equals round_to.
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-300, 300);
  std::vector<float> r(1000);
  for (float& v : r) v = u(rng) * std::pow(10.0f, static_cast<float>(rng() % 5) - 3.0f);
  for (DType t : {DType::kF32, DType::kF16, DType::kBf16, DType::kFp8}) {
    EXPECT_EQ(decode(encode(r, t), t), round_to(r, t)) << dtype_name(t);
  }
  EXPECT_TRUE(std::isnan(decode({0x7F}, DType::kFp8)[0]));
}

TEST(Reference, GemmOfSmallMatrices) {
  // X = [[1,2],[3,4]], W = [[5,6],[7,8]] (rows are output features): C = X·Wᵀ =
  // [[1·5+2·6, 1·7+2·8], [3·5+4·6, 3·7+4·8]] = [[17, 23], [39, 53]].
  const float x[] = {1, 2, 3, 4}, w[] = {5, 6, 7, 8};
  float c[4];
  gemm_nt(x, w, c, 2, 2, 2);
  EXPECT_EQ(c[0], 17);
  EXPECT_EQ(c[1], 23);
  EXPECT_EQ(c[2], 39);
  EXPECT_EQ(c[3], 53);
}

TEST(Reference, LayerNormOfKnownVector) {
  // x = [1,2,3,4]: mean 2.5, biased variance (2.25+0.25+0.25+2.25)/4 = 1.25, so y = (x−2.5)/√1.25
  // = [−1.341641, −0.447214, 0.447214, 1.341641]; gamma 2, beta 1 → 2y + 1.
  const float x[] = {1, 2, 3, 4}, gamma[] = {2, 2, 2, 2}, beta[] = {1, 1, 1, 1};
  float y[4], mean, rstd;
  layernorm(x, gamma, beta, y, &mean, &rstd, 1, 4, 0.0f);
  EXPECT_FLOAT_EQ(mean, 2.5f);
  EXPECT_FLOAT_EQ(rstd, 1.0f / std::sqrt(1.25f));
  const float want[] = {-1.3416408f, -0.4472136f, 0.4472136f, 1.3416408f};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], 2 * want[i] + 1, 1e-6);
}

TEST(Reference, RmsNormOfKnownVector) {
  // x = [1,2,3,4]: mean square 30/4 = 7.5, rms √7.5 = 2.738613 → y = x / 2.738613.
  const float x[] = {1, 2, 3, 4}, gamma[] = {1, 1, 1, 1};
  float y[4];
  rmsnorm(x, gamma, y, nullptr, 1, 4, 0.0f);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], (i + 1) / 2.7386128f, 1e-6);
}

TEST(Reference, SoftmaxOfZeroAndLn2) {
  // e^0 : e^ln2 = 1 : 2 → [1/3, 2/3]; a second row shifted by 100 gives the same (stability).
  const float x[] = {0, std::log(2.0f), 100, 100 + std::log(2.0f)};
  float y[4];
  softmax(x, y, 2, 2, 1.0f);
  EXPECT_NEAR(y[0], 1.0 / 3, 1e-7);
  EXPECT_NEAR(y[1], 2.0 / 3, 1e-7);
  EXPECT_NEAR(y[2], 1.0 / 3, 1e-6);
  EXPECT_NEAR(y[3], 2.0 / 3, 1e-6);
  // scale 2 on [0, ln 2] is softmax of [0, ln 4] = [1/5, 4/5].
  softmax(x, y, 1, 2, 2.0f);
  EXPECT_NEAR(y[0], 0.2, 1e-7);
}

TEST(Reference, CrossEntropyIsMinusLogP) {
  // Logits [0, ln 2] → p = [1/3, 2/3]; target 1 → loss −ln(2/3) = 0.405465, grad = p − e₁ =
  // [1/3, −1/3]; target 0 → −ln(1/3) = ln 3.
  const float x[] = {0, std::log(2.0f), 0, std::log(2.0f)};
  const std::int32_t t[] = {1, 0};
  float loss[2], grad[4];
  cross_entropy(x, t, loss, grad, 2, 2);
  EXPECT_NEAR(loss[0], -std::log(2.0 / 3), 1e-6);
  EXPECT_NEAR(loss[1], std::log(3.0), 1e-6);
  EXPECT_NEAR(grad[0], 1.0 / 3, 1e-7);
  EXPECT_NEAR(grad[1], -1.0 / 3, 1e-7);
  EXPECT_NEAR(grad[2], -2.0 / 3, 1e-7);
}

TEST(Reference, GeluAndSwiglu) {
  // gelu(0) = 0; gelu(1) = ½(1 + tanh(√(2/π)·1.044715)) = ½(1 + tanh(0.833540)) = 0.841192;
  // gelu(−1) = −1 + gelu(1) (odd part) = −0.158808.
  EXPECT_EQ(gelu_tanh(0), 0);
  EXPECT_NEAR(gelu_tanh(1), 0.841192, 1e-6);
  EXPECT_NEAR(gelu_tanh(-1), -0.158808, 1e-6);
  const float x[] = {0.5f, -0.5f}, bias[] = {0.5f, -0.5f};
  float y[2];
  bias_gelu(x, bias, y, 1, 2);
  EXPECT_NEAR(y[0], 0.841192, 1e-6);
  EXPECT_NEAR(y[1], -0.158808, 1e-6);
  // silu(1)·2 = 2/(1 + e^−1) = 1.462117; silu(0)·5 = 0.
  const float gu[] = {1, 0, 2, 5};
  float s[2];
  swiglu(gu, s, 1, 2);
  EXPECT_NEAR(s[0], 1.4621172, 1e-6);
  EXPECT_EQ(s[1], 0);
}

TEST(Reference, DropoutKeepsExpectedFractionAndScales) {
  const std::size_t n = 100000;
  std::vector<float> x(n, 1.0f), y(n);
  std::vector<std::uint8_t> mask(n);
  dropout(x.data(), y.data(), mask.data(), n, 0.1f, 42);
  std::size_t kept = 0;
  for (std::size_t i = 0; i < n; ++i) {
    kept += mask[i];
    EXPECT_FLOAT_EQ(y[i], mask[i] ? 1.0f / 0.9f : 0.0f);
  }
  // Binomial(1e5, 0.9): σ = √(1e5·0.09) ≈ 95; allow 5σ.
  EXPECT_NEAR(static_cast<double>(kept), 90000.0, 475.0);
  // The mask is a function of (seed, index): same seed, same mask; another seed, another mask.
  EXPECT_EQ(dropout_keep(42, 7, 0.1f), mask[7] == 1);
  int same = 0;
  for (std::size_t i = 0; i < 1000; ++i)
    same += dropout_keep(43, i, 0.5f) == dropout_keep(42, i, 0.5f);
  EXPECT_LT(same, 600);
  // bias_dropout_add with p = 0: residual + x + bias.
  const float a[] = {1, 2}, b[] = {10, 20}, r[] = {100, 200};
  float out[2];
  std::uint8_t m2[2];
  bias_dropout_add(a, b, r, out, m2, 1, 2, 0.0f, 1);
  EXPECT_EQ(out[0], 111);
  EXPECT_EQ(out[1], 222);
}

TEST(Reference, EmbeddingGathersRows) {
  const float table[] = {0, 1, 10, 11, 20, 21};
  const std::int32_t tok[] = {2, 0, 2};
  float y[6];
  embedding(tok, table, y, 3, 2);
  const float want[] = {20, 21, 0, 1, 20, 21};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y[i], want[i]);
}

TEST(Reference, AttentionHandCases) {
  // One key: softmax over one score is 1, so O = V and lse = the score q·k·scale = 2·3·0.5 = 3.
  {
    AttentionShape s{1, 1, 1, 1, false, 0, 0.5f};
    const float q[] = {2}, k[] = {3}, v[] = {7};
    float o[1], lse[1];
    attention_forward(s, q, k, v, o, lse);
    EXPECT_FLOAT_EQ(o[0], 7);
    EXPECT_FLOAT_EQ(lse[0], 3);
  }
  // Two keys with scores 0 and ln 2 → weights 1/3, 2/3: O = (1·v0 + 2·v1)/3 = (3 + 2·6)/3 = 5;
  // causal with sq = sk = 2: query 0 sees only key 0 → O = 3.
  {
    AttentionShape s{1, 2, 2, 1, false, 0, 1.0f};
    const float q[] = {1, 1}, k[] = {0, std::log(2.0f)}, v[] = {3, 6};
    float o[2], lse[2];
    attention_forward(s, q, k, v, o, lse);
    EXPECT_NEAR(o[0], 5, 1e-6);
    EXPECT_NEAR(lse[0], std::log(3.0), 1e-6);
    s.causal = true;
    attention_forward(s, q, k, v, o, lse);
    EXPECT_NEAR(o[0], 3, 1e-6);
    EXPECT_NEAR(o[1], 5, 1e-6);
    // Window 1: each query sees only itself.
    s.window = 1;
    attention_forward(s, q, k, v, o, lse);
    EXPECT_NEAR(o[1], 6, 1e-6);
  }
}

// dL/dθ for L = Σ dO ∘ O(θ), by central differences of the forward, must match the backward.
TEST(Reference, AttentionBackwardMatchesFiniteDifferences) {
  AttentionShape s{2, 5, 7, 4, true, 4, 0.5f};
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 1.0f);
  auto rnd = [&](std::size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = g(rng);
    return v;
  };
  const std::size_t nq = 2 * 5 * 4, nk = 2 * 7 * 4;
  std::vector<float> q = rnd(nq), k = rnd(nk), v = rnd(nk), d_o = rnd(nq);
  std::vector<float> o(nq), lse(2 * 5), dq(nq), dk(nk), dv(nk);
  attention_forward(s, q.data(), k.data(), v.data(), o.data(), lse.data());
  attention_backward(s, q.data(), k.data(), v.data(), o.data(), d_o.data(), lse.data(), dq.data(),
                     dk.data(), dv.data());
  auto loss = [&]() {
    std::vector<float> oo(nq), ll(10);
    attention_forward(s, q.data(), k.data(), v.data(), oo.data(), ll.data());
    double sum = 0;
    for (std::size_t i = 0; i < nq; ++i) sum += double(oo[i]) * d_o[i];
    return sum;
  };
  auto check = [&](std::vector<float>& param, const std::vector<float>& grad, const char* name) {
    const float h = 1e-2f;
    for (std::size_t i = 0; i < param.size(); ++i) {
      const float keep = param[i];
      param[i] = keep + h;
      const double up = loss();
      param[i] = keep - h;
      const double down = loss();
      param[i] = keep;
      EXPECT_NEAR(grad[i], (up - down) / (2 * h), 2e-3 * (1 + std::fabs(grad[i])))
          << name << "[" << i << "]";
    }
  };
  check(q, dq, "dq");
  check(k, dk, "dk");
  check(v, dv, "dv");
}

TEST(Reference, AdamStepsClosedForm) {
  // Step 1: m = 0.1·g, v = 0.001·g², m̂ = g, v̂ = g² → w −= lr·g/(|g| + eps) ≈ lr·sign(g):
  // w = 1, g = 0.5, lr = 0.1 → 0.9.
  AdamParams p;
  p.lr = 0.1f;
  float w = 1, m = 0, v = 0;
  float g = 0.5f;
  adam_step(&w, &g, &m, &v, 1, p);
  EXPECT_NEAR(w, 0.9, 1e-6);
  // Moments are stored in float, and β₂ = 0.999f is 0.99900001, so 1 − β₂ is off by 1.3e-5
  // relative.
  EXPECT_NEAR(m, 0.05, 0.05 * 1e-6);
  EXPECT_NEAR(v, 0.00025, 0.00025 * 3e-5);
  // Step 2 with g = 0.25: m = 0.9·0.05 + 0.1·0.25 = 0.07, m̂ = 0.07/0.19 = 0.368421;
  // v = 0.999·0.00025 + 0.001·0.0625 = 0.00031225, v̂ = 0.00031225/0.001999 = 0.156203;
  // step = 0.1·0.368421/√0.156203 = 0.1·0.368421/0.395225 = 0.093218 → w = 0.806782.
  g = 0.25f;
  p.step = 2;
  adam_step(&w, &g, &m, &v, 1, p);
  EXPECT_NEAR(m, 0.07, 0.07 * 1e-6);
  EXPECT_NEAR(v, 0.00031225, 0.00031225 * 3e-5);
  EXPECT_NEAR(w, 0.9 - 0.093218, 2e-6);
  // Decoupled weight decay 0.01 adds lr·wd·w = 0.1·0.01·2 = 0.002 to a first step from w = 2.
  AdamParams d;
  d.lr = 0.1f;
  d.weight_decay = 0.01f;
  float w2 = 2, m2 = 0, v2 = 0, g2 = -1;
  adam_step(&w2, &g2, &m2, &v2, 1, d);
  EXPECT_NEAR(w2, 2 + 0.1 - 0.002, 1e-6);
}

TEST(Reference, LambTrustRatio) {
  // w = [3, 4] (‖w‖ = 5), g = [1, 1]: first step r = m̂/(√v̂+eps) ≈ [1, 1], ‖r‖ = √2, trust ratio
  // 5/√2 = 3.535534, w ← w − lr·3.535534·[1, 1] with lr 0.01 → [2.964645, 3.964645].
  AdamParams p;
  p.lr = 0.01f;
  float w[] = {3, 4}, g[] = {1, 1}, m[] = {0, 0}, v[] = {0, 0};
  const float trust = lamb_step(w, g, m, v, 2, p);
  EXPECT_NEAR(trust, 5 / std::sqrt(2.0), 1e-5);
  EXPECT_NEAR(w[0], 2.964645, 1e-6);
  EXPECT_NEAR(w[1], 3.964645, 1e-6);
  // Zero weights: the ratio falls back to 1 (plain Adam direction).
  float z[] = {0, 0}, zm[] = {0, 0}, zv[] = {0, 0};
  EXPECT_EQ(lamb_step(z, g, zm, zv, 2, p), 1.0f);
  EXPECT_NEAR(z[0], -0.01, 1e-7);
}

}  // namespace
}  // namespace trainsim::kernels::ref
