#include "kernels/reference.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/dropout_hash.h"
#include "sim/core/error.h"

namespace trainsim::kernels {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32:
      return "fp32";
    case DType::kF16:
      return "fp16";
    case DType::kBf16:
      return "bf16";
    case DType::kFp8:
      return "fp8";
  }
  return "?";
}

std::size_t dtype_bytes(DType t) {
  switch (t) {
    case DType::kF32:
      return 4;
    case DType::kF16:
    case DType::kBf16:
      return 2;
    case DType::kFp8:
      return 1;
  }
  return 0;
}

DType parse_dtype(const std::string& name, const std::string& field) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBf16, DType::kFp8}) {
    if (name == dtype_name(t)) return t;
  }
  throw Error(ErrorKind::kInput, "unknown dtype `" + name + "`", {"", 0, field},
              "one of: fp32, fp16, bf16, fp8");
}

namespace ref {
namespace {

// Round to a float format with `mant` explicit mantissa bits and exponent range [emin, emax]
// (normal numbers), round to nearest even, subnormals kept, overflow to ±max (saturating).
float round_generic(float x, int mant, int emin, int emax, float max_value) {
  if (!std::isfinite(x) || x == 0) return x;
  const float a = std::fabs(x);
  int e = 0;
  std::frexp(a, &e);  // a = f·2^e, f in [0.5, 1)
  const int exp = std::max(e - 1, emin);
  const float quantum = std::ldexp(1.0f, exp - mant);
  float r = std::nearbyint(a / quantum) * quantum;  // default rounding: to nearest even
  if (exp > emax || r > max_value) r = max_value;
  return std::copysign(r, x);
}

}  // namespace

float round_to(float x, DType t) {
  switch (t) {
    case DType::kF32:
      return x;
    case DType::kF16:
      return round_generic(x, 10, -14, 15, 65504.0f);
    case DType::kBf16: {
      if (!std::isfinite(x)) return x;
      std::uint32_t u = std::bit_cast<std::uint32_t>(x);
      u += 0x7FFFu + ((u >> 16) & 1u);  // round to nearest even on the dropped 16 bits
      return std::bit_cast<float>(u & 0xFFFF0000u);
    }
    case DType::kFp8:
      return round_generic(x, 3, -6, 8, 448.0f);
  }
  return x;
}

std::vector<float> round_to(const std::vector<float>& x, DType t) {
  std::vector<float> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = round_to(x[i], t);
  return y;
}

namespace {

std::uint8_t encode_e4m3(float x) {  // x already representable
  if (x == 0) return std::signbit(x) ? 0x80 : 0;
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const float a = std::fabs(x);
  int e = 0;
  const float f = std::frexp(a, &e);  // a = f·2^e, f in [0.5, 1)
  const int exp = e - 1;
  if (exp < -6) {  // subnormal: a = mant · 2^-9
    return sign | static_cast<std::uint8_t>(std::lround(a * 512.0f));
  }
  const int mant = static_cast<int>(std::lround((f * 2 - 1) * 8));
  return sign | static_cast<std::uint8_t>(((exp + 7) << 3) | mant);
}

}  // namespace

std::vector<unsigned char> encode(const std::vector<float>& x, DType t) {
  std::vector<unsigned char> out(x.size() * dtype_bytes(t));
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float r = ref::round_to(x[i], t);
    switch (t) {
      case DType::kF32:
        std::memcpy(&out[i * 4], &r, 4);
        break;
      case DType::kF16: {
        const _Float16 h = static_cast<_Float16>(r);
        std::memcpy(&out[i * 2], &h, 2);
        break;
      }
      case DType::kBf16: {
        const auto u = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(r) >> 16);
        std::memcpy(&out[i * 2], &u, 2);
        break;
      }
      case DType::kFp8:
        out[i] = encode_e4m3(r);
        break;
    }
  }
  return out;
}

std::vector<float> decode(const std::vector<unsigned char>& b, DType t) {
  const std::size_t n = b.size() / dtype_bytes(t);
  std::vector<float> y(n);
  for (std::size_t i = 0; i < n; ++i) {
    switch (t) {
      case DType::kF32:
        std::memcpy(&y[i], &b[i * 4], 4);
        break;
      case DType::kF16: {
        _Float16 h;
        std::memcpy(&h, &b[i * 2], 2);
        y[i] = static_cast<float>(h);
        break;
      }
      case DType::kBf16: {
        std::uint16_t u;
        std::memcpy(&u, &b[i * 2], 2);
        y[i] = std::bit_cast<float>(static_cast<std::uint32_t>(u) << 16);
        break;
      }
      case DType::kFp8: {
        const std::uint8_t v = b[i];
        const int e = (v >> 3) & 0xF, m = v & 7;
        const float mag = e == 0                ? std::ldexp(static_cast<float>(m), -9)
                          : (e == 15 && m == 7) ? std::numeric_limits<float>::quiet_NaN()
                                                : std::ldexp(1.0f + m / 8.0f, e - 7);
        y[i] = (v & 0x80) ? -mag : mag;
        break;
      }
    }
  }
  return y;
}

void gemm_nt(const float* x, const float* w, float* c, int m, int n, int k, int batch) {
  for (int b = 0; b < batch; ++b) {
    const float* xb = x + static_cast<std::size_t>(b) * m * k;
    const float* wb = w + static_cast<std::size_t>(b) * n * k;
    float* cb = c + static_cast<std::size_t>(b) * m * n;
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) {
        double s = 0;
        for (int p = 0; p < k; ++p) s += double(xb[i * k + p]) * wb[j * k + p];
        cb[i * n + j] = static_cast<float>(s);
      }
    }
  }
}

void layernorm(const float* x, const float* gamma, const float* beta, float* y, float* mean,
               float* rstd, int rows, int cols, float eps) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<std::size_t>(r) * cols;
    double mu = 0;
    for (int c = 0; c < cols; ++c) mu += xr[c];
    mu /= cols;
    double var = 0;
    for (int c = 0; c < cols; ++c) var += (xr[c] - mu) * (xr[c] - mu);
    var /= cols;
    const double rs = 1.0 / std::sqrt(var + eps);
    for (int c = 0; c < cols; ++c) {
      y[static_cast<std::size_t>(r) * cols + c] =
          static_cast<float>((xr[c] - mu) * rs * gamma[c] + beta[c]);
    }
    if (mean) mean[r] = static_cast<float>(mu);
    if (rstd) rstd[r] = static_cast<float>(rs);
  }
}

void rmsnorm(const float* x, const float* gamma, float* y, float* rstd, int rows, int cols,
             float eps) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<std::size_t>(r) * cols;
    double ss = 0;
    for (int c = 0; c < cols; ++c) ss += double(xr[c]) * xr[c];
    const double rs = 1.0 / std::sqrt(ss / cols + eps);
    for (int c = 0; c < cols; ++c) {
      y[static_cast<std::size_t>(r) * cols + c] = static_cast<float>(xr[c] * rs * gamma[c]);
    }
    if (rstd) rstd[r] = static_cast<float>(rs);
  }
}

void softmax(const float* x, float* y, int rows, int cols, float scale) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<std::size_t>(r) * cols;
    float* yr = y + static_cast<std::size_t>(r) * cols;
    double mx = -std::numeric_limits<double>::infinity();
    for (int c = 0; c < cols; ++c) mx = std::max(mx, double(scale) * xr[c]);
    double sum = 0;
    for (int c = 0; c < cols; ++c) sum += std::exp(double(scale) * xr[c] - mx);
    for (int c = 0; c < cols; ++c) {
      yr[c] = static_cast<float>(std::exp(double(scale) * xr[c] - mx) / sum);
    }
  }
}

float gelu_tanh(float x) {
  const double u = 0.7978845608028654 * (x + 0.044715 * double(x) * x * x);  // √(2/π)
  return static_cast<float>(0.5 * x * (1.0 + std::tanh(u)));
}

void bias_gelu(const float* x, const float* bias, float* y, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const std::size_t i = static_cast<std::size_t>(r) * cols + c;
      y[i] = gelu_tanh(x[i] + bias[c]);
    }
  }
}

void swiglu(const float* gate_up, float* y, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    const float* g = gate_up + static_cast<std::size_t>(r) * 2 * cols;
    for (int c = 0; c < cols; ++c) {
      const double a = g[c];
      y[static_cast<std::size_t>(r) * cols + c] =
          static_cast<float>(a / (1.0 + std::exp(-a)) * g[cols + c]);
    }
  }
}

void dropout(const float* x, float* y, std::uint8_t* mask, std::size_t n, float p,
             std::uint64_t seed) {
  const float inv = 1.0f / (1.0f - p);
  for (std::size_t i = 0; i < n; ++i) {
    const bool keep = dropout_keep(seed, i, p);
    mask[i] = keep ? 1 : 0;
    y[i] = keep ? x[i] * inv : 0.0f;
  }
}

void bias_dropout_add(const float* x, const float* bias, const float* residual, float* y,
                      std::uint8_t* mask, int rows, int cols, float p, std::uint64_t seed) {
  const float inv = 1.0f / (1.0f - p);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const std::size_t i = static_cast<std::size_t>(r) * cols + c;
      const bool keep = dropout_keep(seed, i, p);
      mask[i] = keep ? 1 : 0;
      y[i] = residual[i] + (keep ? (x[i] + bias[c]) * inv : 0.0f);
    }
  }
}

void embedding(const std::int32_t* tokens, const float* table, float* y, int n_tokens, int hidden) {
  for (int t = 0; t < n_tokens; ++t) {
    std::copy_n(table + static_cast<std::size_t>(tokens[t]) * hidden, hidden,
                y + static_cast<std::size_t>(t) * hidden);
  }
}

void cross_entropy(const float* logits, const std::int32_t* targets, float* loss, float* grad,
                   int rows, int vocab) {
  for (int r = 0; r < rows; ++r) {
    const float* x = logits + static_cast<std::size_t>(r) * vocab;
    double mx = -std::numeric_limits<double>::infinity();
    for (int c = 0; c < vocab; ++c) mx = std::max(mx, double(x[c]));
    double sum = 0;
    for (int c = 0; c < vocab; ++c) sum += std::exp(x[c] - mx);
    const double lse = mx + std::log(sum);
    loss[r] = static_cast<float>(lse - x[targets[r]]);
    if (grad) {
      for (int c = 0; c < vocab; ++c) {
        grad[static_cast<std::size_t>(r) * vocab + c] =
            static_cast<float>(std::exp(x[c] - lse) - (c == targets[r] ? 1.0 : 0.0));
      }
    }
  }
}

void layernorm_bwd(const float* x, const float* dy, const float* gamma, const float* mean,
                   const float* rstd, float* dx, float* dgamma, float* dbeta, int rows, int cols) {
  std::vector<double> dg(static_cast<std::size_t>(cols), 0.0), db(dg);
  for (int r = 0; r < rows; ++r) {
    const std::size_t o = static_cast<std::size_t>(r) * cols;
    const double mu = mean[r], rs = rstd[r];
    double s1 = 0, s2 = 0;  // Σ γ·dy, Σ γ·dy·x̂
    for (int c = 0; c < cols; ++c) {
      const double xh = (x[o + c] - mu) * rs;
      s1 += double(gamma[c]) * dy[o + c];
      s2 += double(gamma[c]) * dy[o + c] * xh;
    }
    for (int c = 0; c < cols; ++c) {
      const double xh = (x[o + c] - mu) * rs;
      dx[o + c] = static_cast<float>(rs * (double(gamma[c]) * dy[o + c] - s1 / cols - xh * s2 / cols));
      dg[static_cast<std::size_t>(c)] += dy[o + c] * xh;
      db[static_cast<std::size_t>(c)] += dy[o + c];
    }
  }
  for (int c = 0; c < cols; ++c) {
    dgamma[c] = static_cast<float>(dg[static_cast<std::size_t>(c)]);
    dbeta[c] = static_cast<float>(db[static_cast<std::size_t>(c)]);
  }
}

void rmsnorm_bwd(const float* x, const float* dy, const float* gamma, const float* rstd,
                 float* dx, float* dgamma, int rows, int cols) {
  std::vector<double> dg(static_cast<std::size_t>(cols), 0.0);
  for (int r = 0; r < rows; ++r) {
    const std::size_t o = static_cast<std::size_t>(r) * cols;
    const double rs = rstd[r];
    double s = 0;  // Σ γ·dy·x
    for (int c = 0; c < cols; ++c) s += double(gamma[c]) * dy[o + c] * x[o + c];
    for (int c = 0; c < cols; ++c) {
      dx[o + c] = static_cast<float>(rs * gamma[c] * dy[o + c] - x[o + c] * rs * rs * rs * s / cols);
      dg[static_cast<std::size_t>(c)] += double(dy[o + c]) * x[o + c] * rs;
    }
  }
  for (int c = 0; c < cols; ++c) dgamma[c] = static_cast<float>(dg[static_cast<std::size_t>(c)]);
}

void softmax_bwd(const float* y, const float* dy, float* dx, int rows, int cols, float scale) {
  for (int r = 0; r < rows; ++r) {
    const std::size_t o = static_cast<std::size_t>(r) * cols;
    double s = 0;
    for (int c = 0; c < cols; ++c) s += double(y[o + c]) * dy[o + c];
    for (int c = 0; c < cols; ++c) {
      dx[o + c] = static_cast<float>(double(scale) * y[o + c] * (dy[o + c] - s));
    }
  }
}

float gelu_tanh_grad(float x) {
  const double k = 0.7978845608028654, a = 0.044715, u = x;
  const double t = std::tanh(k * (u + a * u * u * u));
  return static_cast<float>(0.5 * (1 + t) + 0.5 * u * (1 - t * t) * k * (1 + 3 * a * u * u));
}

void bias_gelu_bwd(const float* x, const float* bias, const float* dy, float* dx, float* dbias,
                   int rows, int cols) {
  std::vector<double> db(static_cast<std::size_t>(cols), 0.0);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const std::size_t i = static_cast<std::size_t>(r) * cols + c;
      const double d = double(dy[i]) * gelu_tanh_grad(x[i] + bias[c]);
      dx[i] = static_cast<float>(d);
      db[static_cast<std::size_t>(c)] += d;
    }
  }
  for (int c = 0; c < cols; ++c) dbias[c] = static_cast<float>(db[static_cast<std::size_t>(c)]);
}

void swiglu_bwd(const float* gate_up, const float* dy, float* dgate_up, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    const float* g = gate_up + static_cast<std::size_t>(r) * 2 * cols;
    float* dg = dgate_up + static_cast<std::size_t>(r) * 2 * cols;
    for (int c = 0; c < cols; ++c) {
      const double a = g[c], u = g[cols + c], d = dy[static_cast<std::size_t>(r) * cols + c];
      const double sg = 1.0 / (1.0 + std::exp(-a));
      dg[c] = static_cast<float>(d * u * sg * (1.0 + a * (1.0 - sg)));
      dg[cols + c] = static_cast<float>(d * a * sg);
    }
  }
}

void dropout_bwd(const float* dy, const std::uint8_t* mask, float* dx, std::size_t n, float p) {
  const float inv = 1.0f / (1.0f - p);
  for (std::size_t i = 0; i < n; ++i) dx[i] = mask[i] ? dy[i] * inv : 0.0f;
}

void bias_dropout_add_bwd(const float* dy, const std::uint8_t* mask, float* dx, float* dbias,
                          int rows, int cols, float p) {
  dropout_bwd(dy, mask, dx, static_cast<std::size_t>(rows) * cols, p);
  for (int c = 0; c < cols; ++c) {
    double s = 0;
    for (int r = 0; r < rows; ++r) s += dx[static_cast<std::size_t>(r) * cols + c];
    dbias[c] = static_cast<float>(s);
  }
}

void embedding_bwd(const std::int32_t* tokens, const float* dy, float* dtable, int n_tokens,
                   int hidden) {
  for (int t = 0; t < n_tokens; ++t) {
    float* row = dtable + static_cast<std::size_t>(tokens[t]) * hidden;
    for (int c = 0; c < hidden; ++c) row[c] += dy[static_cast<std::size_t>(t) * hidden + c];
  }
}

namespace {

bool visible(const AttentionShape& s, int i, int j) {
  if (!s.causal) return true;
  const int last = i + (s.sk - s.sq);
  return j <= last && (s.window <= 0 || j > last - s.window);
}

}  // namespace

void attention_forward(const AttentionShape& s, const float* q, const float* k, const float* v,
                       float* o, float* lse) {
  std::vector<double> p(static_cast<std::size_t>(s.sk));
  for (int b = 0; b < s.bh; ++b) {
    const float* qb = q + static_cast<std::size_t>(b) * s.sq * s.d;
    const int bkv = b / std::max(1, s.q_per_kv);  // the k/v batch-head of this query head
    const float* kb = k + static_cast<std::size_t>(bkv) * s.sk * s.d;
    const float* vb = v + static_cast<std::size_t>(bkv) * s.sk * s.d;
    for (int i = 0; i < s.sq; ++i) {
      double mx = -std::numeric_limits<double>::infinity();
      for (int j = 0; j < s.sk; ++j) {
        if (!visible(s, i, j)) continue;
        double dot = 0;
        for (int c = 0; c < s.d; ++c) dot += double(qb[i * s.d + c]) * kb[j * s.d + c];
        p[static_cast<std::size_t>(j)] = dot * s.scale;
        mx = std::max(mx, p[static_cast<std::size_t>(j)]);
      }
      double sum = 0;
      for (int j = 0; j < s.sk; ++j) {
        p[static_cast<std::size_t>(j)] =
            visible(s, i, j) ? std::exp(p[static_cast<std::size_t>(j)] - mx) : 0.0;
        sum += p[static_cast<std::size_t>(j)];
      }
      float* orow = o + (static_cast<std::size_t>(b) * s.sq + i) * s.d;
      for (int c = 0; c < s.d; ++c) {
        double acc = 0;
        for (int j = 0; j < s.sk; ++j) acc += p[static_cast<std::size_t>(j)] * vb[j * s.d + c];
        orow[c] = sum > 0 ? static_cast<float>(acc / sum) : 0.0f;
      }
      lse[static_cast<std::size_t>(b) * s.sq + i] = sum > 0
                                                        ? static_cast<float>(mx + std::log(sum))
                                                        : -std::numeric_limits<float>::infinity();
    }
  }
}

void attention_backward(const AttentionShape& s, const float* q, const float* k, const float* v,
                        const float* o, const float* d_o, const float* lse, float* dq, float* dk,
                        float* dv) {
  const std::size_t nq = static_cast<std::size_t>(s.bh) * s.sq * s.d;
  const int g = std::max(1, s.q_per_kv);  // query heads per k/v head; dk, dv sum over them
  const std::size_t nk = static_cast<std::size_t>(s.bh / g) * s.sk * s.d;
  std::vector<double> gq(nq, 0.0), gk(nk, 0.0), gv(nk, 0.0);
  for (int b = 0; b < s.bh; ++b) {
    const std::size_t qo = static_cast<std::size_t>(b) * s.sq * s.d;
    const std::size_t ko = static_cast<std::size_t>(b / g) * s.sk * s.d;
    for (int i = 0; i < s.sq; ++i) {
      const float l = lse[static_cast<std::size_t>(b) * s.sq + i];
      if (!std::isfinite(l)) continue;
      double delta = 0;  // rowsum(dO ∘ O)
      for (int c = 0; c < s.d; ++c) delta += double(d_o[qo + i * s.d + c]) * o[qo + i * s.d + c];
      for (int j = 0; j < s.sk; ++j) {
        if (!visible(s, i, j)) continue;
        double dot = 0, dp = 0;
        for (int c = 0; c < s.d; ++c) {
          dot += double(q[qo + i * s.d + c]) * k[ko + j * s.d + c];
          dp += double(d_o[qo + i * s.d + c]) * v[ko + j * s.d + c];
        }
        const double pij = std::exp(dot * s.scale - l);
        const double ds = pij * (dp - delta);
        for (int c = 0; c < s.d; ++c) {
          gv[ko + j * s.d + c] += pij * d_o[qo + i * s.d + c];
          gk[ko + j * s.d + c] += ds * s.scale * q[qo + i * s.d + c];
          gq[qo + i * s.d + c] += ds * s.scale * k[ko + j * s.d + c];
        }
      }
    }
  }
  for (std::size_t i = 0; i < nq; ++i) dq[i] = static_cast<float>(gq[i]);
  for (std::size_t i = 0; i < nk; ++i) {
    dk[i] = static_cast<float>(gk[i]);
    dv[i] = static_cast<float>(gv[i]);
  }
}

namespace {

// Bias-corrected Adam direction m̂ / (√v̂ + eps) after updating the moments in place.
double adam_direction(float g, float& m, float& v, const AdamParams& p) {
  m = p.beta1 * m + (1 - p.beta1) * g;
  v = p.beta2 * v + (1 - p.beta2) * g * g;
  const double mhat = m / (1.0 - std::pow(double(p.beta1), p.step));
  const double vhat = v / (1.0 - std::pow(double(p.beta2), p.step));
  return mhat / (std::sqrt(vhat) + p.eps);
}

}  // namespace

void adam_step(float* w, const float* g, float* m, float* v, std::size_t n, const AdamParams& p) {
  for (std::size_t i = 0; i < n; ++i) {
    const double dir = adam_direction(g[i], m[i], v[i], p);
    w[i] = static_cast<float>(w[i] - p.lr * (dir + double(p.weight_decay) * w[i]));
  }
}

float lamb_step(float* w, const float* g, float* m, float* v, std::size_t n, const AdamParams& p) {
  std::vector<double> r(n);
  double wn = 0, rn = 0;
  for (std::size_t i = 0; i < n; ++i) {
    r[i] = adam_direction(g[i], m[i], v[i], p) + double(p.weight_decay) * w[i];
    wn += double(w[i]) * w[i];
    rn += r[i] * r[i];
  }
  const double trust = wn > 0 && rn > 0 ? std::sqrt(wn) / std::sqrt(rn) : 1.0;
  for (std::size_t i = 0; i < n; ++i) w[i] = static_cast<float>(w[i] - p.lr * trust * r[i]);
  return static_cast<float>(trust);
}

}  // namespace ref
}  // namespace trainsim::kernels
