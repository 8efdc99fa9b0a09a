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

// Grouped-query attention: with q_per_kv = 2, query batch-heads 2n and 2n+1 read k/v batch-head n.
// That equals plain attention (q_per_kv = 1) against k, v with every batch-head duplicated, and the
// GQA dk, dv are the sums of the duplicated copies' gradients.
TEST(Reference, AttentionGroupedQueryMatchesDuplicatedKv) {
  AttentionShape gqa{4, 3, 5, 2, true, 0, 0.7f};
  gqa.q_per_kv = 2;
  AttentionShape mha = gqa;
  mha.q_per_kv = 1;
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 1.0f);
  auto rnd = [&](std::size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = g(rng);
    return v;
  };
  const std::size_t head_q = 3 * 2, head_k = 5 * 2;
  const std::vector<float> q = rnd(4 * head_q), k = rnd(2 * head_k), v = rnd(2 * head_k),
                           d_o = rnd(4 * head_q);
  std::vector<float> k2, v2;  // batch-heads 0,0,1,1
  for (int b = 0; b < 4; ++b) {
    k2.insert(k2.end(), k.begin() + (b / 2) * head_k, k.begin() + (b / 2 + 1) * head_k);
    v2.insert(v2.end(), v.begin() + (b / 2) * head_k, v.begin() + (b / 2 + 1) * head_k);
  }
  std::vector<float> o(4 * head_q), lse(12), o2(4 * head_q), lse2(12);
  attention_forward(gqa, q.data(), k.data(), v.data(), o.data(), lse.data());
  attention_forward(mha, q.data(), k2.data(), v2.data(), o2.data(), lse2.data());
  for (std::size_t i = 0; i < o.size(); ++i) EXPECT_FLOAT_EQ(o[i], o2[i]) << i;
  for (std::size_t i = 0; i < lse.size(); ++i) EXPECT_FLOAT_EQ(lse[i], lse2[i]) << i;

  std::vector<float> dq(4 * head_q), dk(2 * head_k), dv(2 * head_k);
  std::vector<float> dq2(4 * head_q), dk2(4 * head_k), dv2(4 * head_k);
  attention_backward(gqa, q.data(), k.data(), v.data(), o.data(), d_o.data(), lse.data(),
                     dq.data(), dk.data(), dv.data());
  attention_backward(mha, q.data(), k2.data(), v2.data(), o2.data(), d_o.data(), lse2.data(),
                     dq2.data(), dk2.data(), dv2.data());
  for (std::size_t i = 0; i < dq.size(); ++i) EXPECT_NEAR(dq[i], dq2[i], 1e-6) << "dq " << i;
  for (std::size_t n = 0; n < 2; ++n) {
    for (std::size_t i = 0; i < head_k; ++i) {
      const std::size_t a = (2 * n) * head_k + i, b = (2 * n + 1) * head_k + i;
      EXPECT_NEAR(dk[n * head_k + i], dk2[a] + dk2[b], 1e-5) << "dk " << n << " " << i;
      EXPECT_NEAR(dv[n * head_k + i], dv2[a] + dv2[b], 1e-5) << "dv " << n << " " << i;
    }
  }
  // Hand case, sq = sk = 1, d = 1: every score is alone in its row, so P = 1, O = V, and
  // dv = Σ over the group of dO; with dO = 1, 2 for the two query heads dv = 3.
  AttentionShape one{2, 1, 1, 1, false, 0, 1.0f};
  one.q_per_kv = 2;
  const float q1[] = {0.5f, -1.0f}, k1[] = {2.0f}, v1[] = {4.0f}, do1[] = {1.0f, 2.0f};
  float o1[2], l1[2], dq1[2], dk1[1], dv1[1];
  attention_forward(one, q1, k1, v1, o1, l1);
  EXPECT_FLOAT_EQ(o1[0], 4);
  EXPECT_FLOAT_EQ(o1[1], 4);
  EXPECT_FLOAT_EQ(l1[0], 1);   // 0.5·2
  EXPECT_FLOAT_EQ(l1[1], -2);  // −1·2
  attention_backward(one, q1, k1, v1, o1, do1, l1, dq1, dk1, dv1);
  EXPECT_FLOAT_EQ(dv1[0], 3);
  EXPECT_FLOAT_EQ(dk1[0], 0);  // dS = P(dP − rowsum(dO∘O)) = 1·(dO·V − dO·V) = 0
  EXPECT_FLOAT_EQ(dq1[0], 0);
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

// The memory-bound backwards against central differences of their forward: for L(θ) = Σ dy∘y(θ)
// the gradient is dL/dθ ≈ (L(θ + h) − L(θ − h)) / 2h, with error O(h²) (h = 1e-2, second
// derivatives of order 1) plus the float rounding of L (~1e-6 / 2h): a bound of 2e-3 on values of
// order 1. Small odd shapes (3 × 7) so that every element is perturbed.
std::vector<float> random_values(std::size_t n, unsigned seed, float lo = -1.5f, float hi = 1.5f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Central difference of loss() with respect to v[i].
template <typename F>
double central_difference(std::vector<float>& v, std::size_t i, F&& loss) {
  const float h = 1e-2f, keep = v[i];
  v[i] = keep + h;
  const double up = loss();
  v[i] = keep - h;
  const double down = loss();
  v[i] = keep;
  return (up - down) / (2.0 * h);
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
  return s;
}

constexpr double kFdTol = 2e-3;

TEST(Reference, LayerNormBackwardMatchesFiniteDifferences) {
  const int rows = 3, cols = 7;
  auto x = random_values(rows * cols, 50, -2, 3);
  auto gamma = random_values(cols, 51, 0.5f, 1.5f), beta = random_values(cols, 52);
  const auto dy = random_values(rows * cols, 53);
  std::vector<float> y(x.size()), mean(rows), rstd(rows);
  layernorm(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), rows, cols,
            1e-5f);
  std::vector<float> dx(x.size()), dg(cols), db(cols);
  layernorm_bwd(x.data(), dy.data(), gamma.data(), mean.data(), rstd.data(), dx.data(), dg.data(),
                db.data(), rows, cols);
  auto loss = [&] {
    layernorm(x.data(), gamma.data(), beta.data(), y.data(), nullptr, nullptr, rows, cols, 1e-5f);
    return dot(dy, y);
  };
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(dx[i], central_difference(x, i, loss), kFdTol) << "dx " << i;
  }
  for (std::size_t c = 0; c < static_cast<std::size_t>(cols); ++c) {
    EXPECT_NEAR(dg[c], central_difference(gamma, c, loss), kFdTol) << "dgamma " << c;
    EXPECT_NEAR(db[c], central_difference(beta, c, loss), kFdTol) << "dbeta " << c;
  }
  // Each row of dx sums to 0 (y is invariant to adding a constant to the row).
  for (int r = 0; r < rows; ++r) {
    double s = 0;
    for (int c = 0; c < cols; ++c) s += dx[static_cast<std::size_t>(r * cols + c)];
    EXPECT_NEAR(s, 0.0, 1e-5);
  }
}

TEST(Reference, RmsNormBackwardMatchesFiniteDifferences) {
  const int rows = 3, cols = 7;
  auto x = random_values(rows * cols, 54, -2, 3);
  auto gamma = random_values(cols, 55, 0.5f, 1.5f);
  const auto dy = random_values(rows * cols, 56);
  std::vector<float> y(x.size()), rstd(rows);
  rmsnorm(x.data(), gamma.data(), y.data(), rstd.data(), rows, cols, 1e-6f);
  std::vector<float> dx(x.size()), dg(cols);
  rmsnorm_bwd(x.data(), dy.data(), gamma.data(), rstd.data(), dx.data(), dg.data(), rows, cols);
  auto loss = [&] {
    rmsnorm(x.data(), gamma.data(), y.data(), nullptr, rows, cols, 1e-6f);
    return dot(dy, y);
  };
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(dx[i], central_difference(x, i, loss), kFdTol) << "dx " << i;
  }
  for (std::size_t c = 0; c < static_cast<std::size_t>(cols); ++c) {
    EXPECT_NEAR(dg[c], central_difference(gamma, c, loss), kFdTol) << "dgamma " << c;
  }
}

TEST(Reference, SoftmaxBackwardMatchesFiniteDifferences) {
  const int rows = 3, cols = 7;
  const float scale = 0.7f;
  auto x = random_values(rows * cols, 57, -3, 3);
  const auto dy = random_values(rows * cols, 58);
  std::vector<float> y(x.size()), dx(x.size());
  softmax(x.data(), y.data(), rows, cols, scale);
  softmax_bwd(y.data(), dy.data(), dx.data(), rows, cols, scale);
  auto loss = [&] {
    softmax(x.data(), y.data(), rows, cols, scale);
    return dot(dy, y);
  };
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(dx[i], central_difference(x, i, loss), kFdTol) << "dx " << i;
  }
  // A dy constant along the row changes nothing (softmax sums to 1): dx = 0.
  const std::vector<float> ones(x.size(), 1.0f);
  softmax_bwd(y.data(), ones.data(), dx.data(), rows, cols, scale);
  for (float v : dx) EXPECT_NEAR(v, 0.0f, 1e-6f);
}

TEST(Reference, BiasGeluBackwardMatchesFiniteDifferences) {
  // gelu'(0) = 0.5 (the tanh term vanishes); far out it tends to 1 (x ≫ 0) and 0 (x ≪ 0).
  EXPECT_FLOAT_EQ(gelu_tanh_grad(0.0f), 0.5f);
  EXPECT_NEAR(gelu_tanh_grad(8.0f), 1.0f, 1e-6);
  EXPECT_NEAR(gelu_tanh_grad(-8.0f), 0.0f, 1e-6);
  const int rows = 3, cols = 7;
  auto x = random_values(rows * cols, 59, -3, 3);
  auto bias = random_values(cols, 60);
  const auto dy = random_values(rows * cols, 61);
  std::vector<float> y(x.size()), dx(x.size()), db(cols);
  bias_gelu_bwd(x.data(), bias.data(), dy.data(), dx.data(), db.data(), rows, cols);
  auto loss = [&] {
    bias_gelu(x.data(), bias.data(), y.data(), rows, cols);
    return dot(dy, y);
  };
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(dx[i], central_difference(x, i, loss), kFdTol) << "dx " << i;
  }
  for (std::size_t c = 0; c < static_cast<std::size_t>(cols); ++c) {
    EXPECT_NEAR(db[c], central_difference(bias, c, loss), kFdTol) << "dbias " << c;
  }
}

TEST(Reference, SwigluBackwardMatchesFiniteDifferences) {
  const int rows = 3, cols = 7;
  auto gu = random_values(static_cast<std::size_t>(rows) * 2 * cols, 62, -3, 3);
  const auto dy = random_values(rows * cols, 63);
  std::vector<float> y(static_cast<std::size_t>(rows) * cols), dgu(gu.size());
  swiglu_bwd(gu.data(), dy.data(), dgu.data(), rows, cols);
  auto loss = [&] {
    swiglu(gu.data(), y.data(), rows, cols);
    return dot(dy, y);
  };
  for (std::size_t i = 0; i < gu.size(); ++i) {
    EXPECT_NEAR(dgu[i], central_difference(gu, i, loss), kFdTol) << "dgate_up " << i;
  }
}

TEST(Reference, DropoutBackwardsClosedForm) {
  // p = 0.5: kept elements scale by 1/(1 − p) = 2, dropped ones get 0.
  const std::uint8_t mask[] = {1, 0, 1, 1, 0, 1};
  const float dy[] = {1, 2, 3, 4, 5, 6};
  float dx[6];
  dropout_bwd(dy, mask, dx, 6, 0.5f);
  const float want[] = {2, 0, 6, 8, 0, 12};
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(dx[i], want[i]) << i;
  // As 2 rows × 3 columns: dbias = column sums of dx = [2 + 8, 0 + 0, 6 + 12] = [10, 0, 18].
  float dx2[6], dbias[3];
  bias_dropout_add_bwd(dy, mask, dx2, dbias, 2, 3, 0.5f);
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(dx2[i], want[i]) << i;
  EXPECT_FLOAT_EQ(dbias[0], 10);
  EXPECT_FLOAT_EQ(dbias[1], 0);
  EXPECT_FLOAT_EQ(dbias[2], 18);
  // Against the forward's own mask: the gradient of Σ dy∘dropout(x) is dropout_bwd(dy).
  std::vector<float> x(100, 1.0f), y(100), ones(100, 1.0f), g(100);
  std::vector<std::uint8_t> m(100);
  dropout(x.data(), y.data(), m.data(), 100, 0.3f, 7);
  dropout_bwd(ones.data(), m.data(), g.data(), 100, 0.3f);
  EXPECT_EQ(g, y);  // y = keep ? 1/(1 − p) : 0 for x = 1, the same as the gradient for dy = 1
}

TEST(Reference, EmbeddingBackwardAddsRowsAtTokens) {
  // tokens [2, 0, 2], hidden 2: row 2 gets dy0 + dy2, row 0 gets dy1, row 1 stays 0; the
  // table's previous contents are added to (the caller zeroes it).
  const std::int32_t tokens[] = {2, 0, 2};
  const float dy[] = {1, 2, 3, 4, 5, 6};
  float dtable[] = {0, 0, 0, 0, 0.5f, 0};
  embedding_bwd(tokens, dy, dtable, 3, 2);
  const float want[] = {3, 4, 0, 0, 6.5f, 8};
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(dtable[i], want[i]) << i;
}

// The kernels draw a vector's masks from one starting value stepped by additions of
// kDropoutStep (seed + (i + 1 + j)·step = seed + (i + 1)·step + j·step modulo 2^64): the same
// numbers as dropout_uniform per index, also across the 2^64 wrap-around.
TEST(Reference, DropoutHashStepsByAddition) {
  for (std::uint64_t seed : {0ull, 99ull, 0xFFFFFFFFFFFFFFF0ull}) {
    for (std::uint64_t i : {0ull, 8ull, 12345ull, (1ull << 40) + 3}) {
      const std::uint64_t z = seed + (i + 1) * kDropoutStep;
      for (int j = 0; j < 8; ++j) {
        EXPECT_EQ(dropout_uniform_z(z + j * kDropoutStep), dropout_uniform(seed, i + j))
            << seed << " " << i << " " << j;
      }
    }
  }
}

}  // namespace
}  // namespace trainsim::kernels::ref
