// Row-wise kernels: LayerNorm, RMSNorm, softmax, cross-entropy and the backwards of the first
// three. Statistics in fp32 through warp-shuffle / block reductions. LayerNorm takes the mean
// first and then the variance about it (two passes over the row held in registers, as the
// reference) rather than E[x²] − E[x]², which cancels badly in fp32 for rows with a large mean.
//
// Three shapes of launch (RowPlan):
//   - warp per row (rows of at most 128 16-byte vectors: ≤ 1024 16-bit or 512 fp32 values),
//     8 rows per 256-thread block, the row in registers, reductions by warp shuffles;
//   - block per row (up to 2048 vectors: ≤ 16384 16-bit or 8192 fp32 values, ≤ 512 threads;
//     the LayerNorm / RMSNorm forwards up to 4096 vectors and 1024 threads), threads holding 1,
//     2 or 4 vectors each, the row in registers (packed in its storage type in the norm
//     forwards): one read and one write;
//   - a looped fallback (longer rows, or rows that are not a whole number of aligned vectors):
//     256 threads per row striding over it, 16-byte accesses where the row allows them, the row
//     re-read from L2 by each pass (softmax and cross-entropy use an online max/sum: one pass
//     for the statistics, one for the output).
// Backward kernels of the norms add their fp32 dgamma/dbeta column sums with atomics (zeroed by
// the launcher): register-path blocks visit rows grid-stride and keep per-column partial sums in
// registers until the end, the fallback sums chunks of 16 rows per column.
#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "kernels/cuda_check.h"
#include "kernels/cuda_types.cuh"
#include "kernels/launchers.h"
#include "kernels/vec.cuh"

namespace trainsim::kernels {
namespace {

constexpr int kLoopThreads = 256;
constexpr int kChunkRows = 16;  // rows per column sum in the fallback backward

// ---------------------------------------------------------------------------------------------
// Launch shapes.

struct RowPlan {
  enum Mode { kWarp, kBlock, kLoopVec, kLoopScalar } mode = kLoopScalar;
  int vpt = 1;          // vectors per thread (register modes)
  unsigned threads = kLoopThreads;
};

// `ptrs` every row pointer the kernel touches (null ones ignored); rows of up to `max_ncv`
// vectors (2048: 512 threads of 4; 4096: 1024 threads of 4) are held in registers.
RowPlan row_plan(int cols, int w, std::initializer_list<const void*> ptrs, int max_ncv) {
  RowPlan p;
  bool aligned = cols % w == 0;
  for (const void* q : ptrs) aligned = aligned && (q == nullptr || aligned16(q));
  if (!aligned) return p;
  const int ncv = cols / w;
  if (ncv <= 128) {
    p.mode = RowPlan::kWarp;
    p.vpt = ncv <= 32 ? 1 : ncv <= 64 ? 2 : 4;
    p.threads = 256;
  } else if (ncv <= max_ncv) {
    p.mode = RowPlan::kBlock;
    p.vpt = ncv <= 512 ? 1 : ncv <= 1024 ? 2 : 4;
    const int t = (ncv + p.vpt - 1) / p.vpt;
    p.threads = static_cast<unsigned>((t + 31) / 32 * 32);
  } else {
    p.mode = RowPlan::kLoopVec;
  }
  return p;
}

// Blocks of a register-mode forward: every row covered (one group per row).
unsigned fwd_blocks(const RowPlan& p, int rows) {
  if (p.mode == RowPlan::kWarp) return static_cast<unsigned>((rows + 7) / 8);
  return static_cast<unsigned>(rows);
}

// Blocks of a register-mode backward with column sums: at most a few waves, the rest by the
// grid-stride row loop, so each block adds its partial sums once.
unsigned bwd_blocks(const RowPlan& p, int rows) {
  const unsigned per_sm = p.mode == RowPlan::kWarp ? 4 : std::max(1u, 1024u / p.threads);
  const unsigned cap = static_cast<unsigned>(sm_count()) * per_sm;
  const unsigned need = fwd_blocks(p, rows);
  return std::max(1u, std::min(need, cap));
}

// ---------------------------------------------------------------------------------------------
// Forward, register modes: W = kVec<T>, rows aligned, VPT vectors per thread.

// The row stays packed in registers (16-bit values take half the registers of floats, so more
// rows are in flight per SM) and is converted where it is used.
template <typename T, int VPT>
struct PackedRow {
  static constexpr int W = kVec<T>;
  Vec<T, W> p[VPT];
  __device__ __forceinline__ float at(int k, int j) const { return to_f(p[k].v[j]); }
};

template <typename T, int VPT, bool WARP>
__global__ void __launch_bounds__(1024)
    layernorm_reg(const T* __restrict__ x, const T* __restrict__ gamma, const T* __restrict__ beta,
                  T* __restrict__ y, float* mean, float* rstd, int rows, int cols, float eps) {
  constexpr int W = kVec<T>;
  __shared__ float red[64];
  const RowGroup<WARP> g;
  const int ncv = cols / W;
  for (int row = g.row; row < rows; row += g.step) {
    const std::size_t base = static_cast<std::size_t>(row) * cols;
    PackedRow<T, VPT> v;
    float s = 0;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int c = g.lane + k * g.size;
      if (c < ncv) {
        v.p[k] = *reinterpret_cast<const Vec<T, W>*>(x + base + static_cast<std::size_t>(c) * W);
#pragma unroll
        for (int j = 0; j < W; ++j) s += v.at(k, j);
      }
    }
    const float mu = g.sum(s, red) / cols;
    float q = 0;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      if (g.lane + k * g.size < ncv) {
#pragma unroll
        for (int j = 0; j < W; ++j) {
          const float d = v.at(k, j) - mu;
          q += d * d;
        }
      }
    }
    const float rs = rsqrtf(g.sum(q, red) / cols + eps);
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int c = g.lane + k * g.size;
      if (c < ncv) {
        float gm[W], bt[W], o[W];
        load_f<T, W>(gamma + static_cast<std::size_t>(c) * W, gm);
        load_f<T, W>(beta + static_cast<std::size_t>(c) * W, bt);
#pragma unroll
        for (int j = 0; j < W; ++j) o[j] = (v.at(k, j) - mu) * rs * gm[j] + bt[j];
        store_f<T, W>(y + base + static_cast<std::size_t>(c) * W, o);
      }
    }
    if (g.lane == 0) {
      if (mean) mean[row] = mu;
      if (rstd) rstd[row] = rs;
    }
  }
}

template <typename T, int VPT, bool WARP>
__global__ void __launch_bounds__(1024)
    rmsnorm_reg(const T* __restrict__ x, const T* __restrict__ gamma, T* __restrict__ y,
                float* rstd, int rows, int cols, float eps) {
  constexpr int W = kVec<T>;
  __shared__ float red[64];
  const RowGroup<WARP> g;
  const int ncv = cols / W;
  for (int row = g.row; row < rows; row += g.step) {
    const std::size_t base = static_cast<std::size_t>(row) * cols;
    PackedRow<T, VPT> v;
    float s = 0;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int c = g.lane + k * g.size;
      if (c < ncv) {
        v.p[k] = *reinterpret_cast<const Vec<T, W>*>(x + base + static_cast<std::size_t>(c) * W);
#pragma unroll
        for (int j = 0; j < W; ++j) s += v.at(k, j) * v.at(k, j);
      }
    }
    const float rs = rsqrtf(g.sum(s, red) / cols + eps);
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int c = g.lane + k * g.size;
      if (c < ncv) {
        float gm[W], o[W];
        load_f<T, W>(gamma + static_cast<std::size_t>(c) * W, gm);
#pragma unroll
        for (int j = 0; j < W; ++j) o[j] = v.at(k, j) * rs * gm[j];
        store_f<T, W>(y + base + static_cast<std::size_t>(c) * W, o);
      }
    }
    if (g.lane == 0 && rstd) rstd[row] = rs;
  }
}

template <typename T, int VPT, bool WARP>
__global__ void __launch_bounds__(1024)
    softmax_reg(const T* __restrict__ x, T* __restrict__ y, int rows, int cols, float scale) {
  constexpr int W = kVec<T>;
  __shared__ float red[64];
  const RowGroup<WARP> g;
  const int ncv = cols / W;
  for (int row = g.row; row < rows; row += g.step) {
    const std::size_t base = static_cast<std::size_t>(row) * cols;
    float v[VPT][W];
    float mx = -INFINITY;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int c = g.lane + k * g.size;
      if (c < ncv) {
        load_f<T, W>(x + base + static_cast<std::size_t>(c) * W, v[k]);
#pragma unroll
        for (int j = 0; j < W; ++j) {
          v[k][j] *= scale;
          mx = fmaxf(mx, v[k][j]);
        }
      }
    }
    mx = g.max(mx, red);
    float s = 0;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      if (g.lane + k * g.size < ncv) {
#pragma unroll
        for (int j = 0; j < W; ++j) {
          v[k][j] = __expf(v[k][j] - mx);
          s += v[k][j];
        }
      }
    }
    const float inv = 1.0f / g.sum(s, red);
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int c = g.lane + k * g.size;
      if (c < ncv) {
        float o[W];
#pragma unroll
        for (int j = 0; j < W; ++j) o[j] = v[k][j] * inv;
        store_f<T, W>(y + base + static_cast<std::size_t>(c) * W, o);
      }
    }
  }
}

template <typename T, int VPT, bool WARP>
__global__ void __launch_bounds__(1024)
    cross_entropy_reg(const T* __restrict__ logits, const std::int32_t* __restrict__ targets,
                      float* __restrict__ loss, T* __restrict__ grad, int rows, int vocab) {
  constexpr int W = kVec<T>;
  __shared__ float red[64];
  const RowGroup<WARP> g;
  const int ncv = vocab / W;
  for (int row = g.row; row < rows; row += g.step) {
    const std::size_t base = static_cast<std::size_t>(row) * vocab;
    float v[VPT][W];
    float mx = -INFINITY;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int c = g.lane + k * g.size;
      if (c < ncv) {
        load_f<T, W>(logits + base + static_cast<std::size_t>(c) * W, v[k]);
#pragma unroll
        for (int j = 0; j < W; ++j) mx = fmaxf(mx, v[k][j]);
      }
    }
    mx = g.max(mx, red);
    float s = 0;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      if (g.lane + k * g.size < ncv) {
#pragma unroll
        for (int j = 0; j < W; ++j) s += __expf(v[k][j] - mx);
      }
    }
    const float lse = mx + logf(g.sum(s, red));
    const int target = targets[row];
    if (g.lane == 0) loss[row] = lse - to_f(logits[base + target]);
    if (grad) {
#pragma unroll
      for (int k = 0; k < VPT; ++k) {
        const int c = g.lane + k * g.size;
        if (c < ncv) {
          float o[W];
#pragma unroll
          for (int j = 0; j < W; ++j) {
            o[j] = __expf(v[k][j] - lse) - (c * W + j == target ? 1.0f : 0.0f);
          }
          store_f<T, W>(grad + base + static_cast<std::size_t>(c) * W, o);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Forward, looped fallback: one 256-thread block per row, W = kVec<T> (aligned rows) or 1.

template <typename T, int W>
__global__ void __launch_bounds__(kLoopThreads)
    layernorm_loop(const T* __restrict__ x, const T* __restrict__ gamma,
                   const T* __restrict__ beta, T* __restrict__ y, float* mean, float* rstd,
                   int cols, float eps) {
  __shared__ float red[64];
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * cols;
  const int ncv = cols / W;
  float s = 0;
  for (int c = threadIdx.x; c < ncv; c += blockDim.x) {
    float a[W];
    load_f<T, W>(x + base + static_cast<std::size_t>(c) * W, a);
#pragma unroll
    for (int j = 0; j < W; ++j) s += a[j];
  }
  const float mu = block_sum(s, red) / cols;
  float q = 0;
  for (int c = threadIdx.x; c < ncv; c += blockDim.x) {
    float a[W];
    load_f<T, W>(x + base + static_cast<std::size_t>(c) * W, a);
#pragma unroll
    for (int j = 0; j < W; ++j) q += (a[j] - mu) * (a[j] - mu);
  }
  const float rs = rsqrtf(block_sum(q, red) / cols + eps);
  for (int c = threadIdx.x; c < ncv; c += blockDim.x) {
    float a[W], gm[W], bt[W], o[W];
    load_f<T, W>(x + base + static_cast<std::size_t>(c) * W, a);
    load_f<T, W>(gamma + static_cast<std::size_t>(c) * W, gm);
    load_f<T, W>(beta + static_cast<std::size_t>(c) * W, bt);
#pragma unroll
    for (int j = 0; j < W; ++j) o[j] = (a[j] - mu) * rs * gm[j] + bt[j];
    store_f<T, W>(y + base + static_cast<std::size_t>(c) * W, o);
  }
  if (threadIdx.x == 0) {
    if (mean) mean[blockIdx.x] = mu;
    if (rstd) rstd[blockIdx.x] = rs;
  }
}

template <typename T, int W>
__global__ void __launch_bounds__(kLoopThreads)
    rmsnorm_loop(const T* __restrict__ x, const T* __restrict__ gamma, T* __restrict__ y,
                 float* rstd, int cols, float eps) {
  __shared__ float red[64];
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * cols;
  const int ncv = cols / W;
  float s = 0;
  for (int c = threadIdx.x; c < ncv; c += blockDim.x) {
    float a[W];
    load_f<T, W>(x + base + static_cast<std::size_t>(c) * W, a);
#pragma unroll
    for (int j = 0; j < W; ++j) s += a[j] * a[j];
  }
  const float rs = rsqrtf(block_sum(s, red) / cols + eps);
  for (int c = threadIdx.x; c < ncv; c += blockDim.x) {
    float a[W], gm[W], o[W];
    load_f<T, W>(x + base + static_cast<std::size_t>(c) * W, a);
    load_f<T, W>(gamma + static_cast<std::size_t>(c) * W, gm);
#pragma unroll
    for (int j = 0; j < W; ++j) o[j] = a[j] * rs * gm[j];
    store_f<T, W>(y + base + static_cast<std::size_t>(c) * W, o);
  }
  if (threadIdx.x == 0 && rstd) rstd[blockIdx.x] = rs;
}

// Online max and sum of exp over a row (Milakov & Gimelshein 2018), then merged over the block.
struct MaxSum {
  float m, s;
};

__device__ __forceinline__ void online_add(MaxSum& a, float v) {
  if (v > a.m) {
    a.s = a.s * __expf(a.m - v) + 1.0f;
    a.m = v;
  } else {
    a.s += __expf(v - a.m);
  }
}

__device__ __forceinline__ MaxSum block_max_sum(MaxSum a, float* red) {
  const float m = block_max(a.m, red);
  const float s = a.m == -INFINITY ? 0.0f : a.s * __expf(a.m - m);
  return {m, block_sum(s, red)};
}

template <typename T, int W>
__global__ void __launch_bounds__(kLoopThreads)
    softmax_loop(const T* __restrict__ x, T* __restrict__ y, int cols, float scale) {
  __shared__ float red[64];
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * cols;
  const int ncv = cols / W;
  MaxSum ms{-INFINITY, 0.0f};
  for (int c = threadIdx.x; c < ncv; c += blockDim.x) {
    float a[W];
    load_f<T, W>(x + base + static_cast<std::size_t>(c) * W, a);
#pragma unroll
    for (int j = 0; j < W; ++j) online_add(ms, scale * a[j]);
  }
  ms = block_max_sum(ms, red);
  const float inv = 1.0f / ms.s;
  for (int c = threadIdx.x; c < ncv; c += blockDim.x) {
    float a[W];
    load_f<T, W>(x + base + static_cast<std::size_t>(c) * W, a);
#pragma unroll
    for (int j = 0; j < W; ++j) a[j] = __expf(scale * a[j] - ms.m) * inv;
    store_f<T, W>(y + base + static_cast<std::size_t>(c) * W, a);
  }
}

template <typename T, int W>
__global__ void __launch_bounds__(kLoopThreads)
    cross_entropy_loop(const T* __restrict__ logits, const std::int32_t* __restrict__ targets,
                       float* __restrict__ loss, T* __restrict__ grad, int vocab) {
  __shared__ float red[64];
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * vocab;
  const int ncv = vocab / W;
  MaxSum ms{-INFINITY, 0.0f};
  for (int c = threadIdx.x; c < ncv; c += blockDim.x) {
    float a[W];
    load_f<T, W>(logits + base + static_cast<std::size_t>(c) * W, a);
#pragma unroll
    for (int j = 0; j < W; ++j) online_add(ms, a[j]);
  }
  ms = block_max_sum(ms, red);
  const float lse = ms.m + logf(ms.s);
  const int target = targets[blockIdx.x];
  if (threadIdx.x == 0) loss[blockIdx.x] = lse - to_f(logits[base + target]);
  if (grad) {
    for (int c = threadIdx.x; c < ncv; c += blockDim.x) {
      float a[W];
      load_f<T, W>(logits + base + static_cast<std::size_t>(c) * W, a);
#pragma unroll
      for (int j = 0; j < W; ++j) {
        a[j] = __expf(a[j] - lse) - (c * W + j == target ? 1.0f : 0.0f);
      }
      store_f<T, W>(grad + base + static_cast<std::size_t>(c) * W, a);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Backward, register modes. x and dy stay packed in registers (16-bit values take half the
// registers of floats); the column partial sums are fp32 registers added atomically at the end.

template <typename T, int VPT, bool WARP>
__global__ void __launch_bounds__(512)
    layernorm_bwd_reg(const T* __restrict__ x, const T* __restrict__ dy,
                      const T* __restrict__ gamma, const float* __restrict__ mean,
                      const float* __restrict__ rstd, T* __restrict__ dx,
                      float* __restrict__ dgamma, float* __restrict__ dbeta, int rows, int cols) {
  constexpr int W = kVec<T>;
  __shared__ float red[64];
  const RowGroup<WARP> g;
  const int ncv = cols / W;
  float dg[VPT][W], db[VPT][W];
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
#pragma unroll
    for (int j = 0; j < W; ++j) dg[k][j] = db[k][j] = 0.0f;
  }
  for (int row = g.row; row < rows; row += g.step) {
    const std::size_t base = static_cast<std::size_t>(row) * cols;
    Vec<T, W> xp[VPT], dp[VPT];
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int c = g.lane + k * g.size;
      if (c < ncv) {
        const std::size_t i = base + static_cast<std::size_t>(c) * W;
        xp[k] = *reinterpret_cast<const Vec<T, W>*>(x + i);
        dp[k] = *reinterpret_cast<const Vec<T, W>*>(dy + i);
      }
    }
    const float mu = mean[row], rs = rstd[row];
    float s1 = 0, s2 = 0;  // Σ γ·dy, Σ γ·dy·x̂
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int c = g.lane + k * g.size;
      if (c < ncv) {
        float gm[W];
        load_f<T, W>(gamma + static_cast<std::size_t>(c) * W, gm);
#pragma unroll
        for (int j = 0; j < W; ++j) {
          const float gd = gm[j] * to_f(dp[k].v[j]);
          s1 += gd;
          s2 += gd * (to_f(xp[k].v[j]) - mu) * rs;
        }
      }
    }
    const float2 sums = g.sum2(s1, s2, red);
    const float m1 = sums.x / cols, m2 = sums.y / cols;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int c = g.lane + k * g.size;
      if (c < ncv) {
        float gm[W], o[W];
        load_f<T, W>(gamma + static_cast<std::size_t>(c) * W, gm);
#pragma unroll
        for (int j = 0; j < W; ++j) {
          const float d = to_f(dp[k].v[j]);
          const float xh = (to_f(xp[k].v[j]) - mu) * rs;
          o[j] = rs * (gm[j] * d - m1 - xh * m2);
          dg[k][j] += d * xh;
          db[k][j] += d;
        }
        store_f<T, W>(dx + base + static_cast<std::size_t>(c) * W, o);
      }
    }
  }
  if (g.row < rows) {
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int c = g.lane + k * g.size;
      if (c < ncv) {
#pragma unroll
        for (int j = 0; j < W; ++j) {
          atomicAdd(&dgamma[c * W + j], dg[k][j]);
          atomicAdd(&dbeta[c * W + j], db[k][j]);
        }
      }
    }
  }
}

template <typename T, int VPT, bool WARP>
__global__ void __launch_bounds__(512)
    rmsnorm_bwd_reg(const T* __restrict__ x, const T* __restrict__ dy,
                    const T* __restrict__ gamma, const float* __restrict__ rstd,
                    T* __restrict__ dx, float* __restrict__ dgamma, int rows, int cols) {
  constexpr int W = kVec<T>;
  __shared__ float red[64];
  const RowGroup<WARP> g;
  const int ncv = cols / W;
  float dg[VPT][W];
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
#pragma unroll
    for (int j = 0; j < W; ++j) dg[k][j] = 0.0f;
  }
  for (int row = g.row; row < rows; row += g.step) {
    const std::size_t base = static_cast<std::size_t>(row) * cols;
    Vec<T, W> xp[VPT], dp[VPT];
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int c = g.lane + k * g.size;
      if (c < ncv) {
        const std::size_t i = base + static_cast<std::size_t>(c) * W;
        xp[k] = *reinterpret_cast<const Vec<T, W>*>(x + i);
        dp[k] = *reinterpret_cast<const Vec<T, W>*>(dy + i);
      }
    }
    const float rs = rstd[row];
    float s = 0;  // Σ γ·dy·x
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int c = g.lane + k * g.size;
      if (c < ncv) {
        float gm[W];
        load_f<T, W>(gamma + static_cast<std::size_t>(c) * W, gm);
#pragma unroll
        for (int j = 0; j < W; ++j) s += gm[j] * to_f(dp[k].v[j]) * to_f(xp[k].v[j]);
      }
    }
    const float coef = g.sum(s, red) * rs * rs * rs / cols;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int c = g.lane + k * g.size;
      if (c < ncv) {
        float gm[W], o[W];
        load_f<T, W>(gamma + static_cast<std::size_t>(c) * W, gm);
#pragma unroll
        for (int j = 0; j < W; ++j) {
          const float d = to_f(dp[k].v[j]), a = to_f(xp[k].v[j]);
          o[j] = rs * gm[j] * d - a * coef;
          dg[k][j] += d * a * rs;
        }
        store_f<T, W>(dx + base + static_cast<std::size_t>(c) * W, o);
      }
    }
  }
  if (g.row < rows) {
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int c = g.lane + k * g.size;
      if (c < ncv) {
#pragma unroll
        for (int j = 0; j < W; ++j) atomicAdd(&dgamma[c * W + j], dg[k][j]);
      }
    }
  }
}

template <typename T, int VPT, bool WARP>
__global__ void __launch_bounds__(512)
    softmax_bwd_reg(const T* __restrict__ y, const T* __restrict__ dy, T* __restrict__ dx,
                    int rows, int cols, float scale) {
  constexpr int W = kVec<T>;
  __shared__ float red[64];
  const RowGroup<WARP> g;
  const int ncv = cols / W;
  for (int row = g.row; row < rows; row += g.step) {
    const std::size_t base = static_cast<std::size_t>(row) * cols;
    float yv[VPT][W], dv[VPT][W];
    float s = 0;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int c = g.lane + k * g.size;
      if (c < ncv) {
        const std::size_t i = base + static_cast<std::size_t>(c) * W;
        load_f<T, W>(y + i, yv[k]);
        load_f<T, W>(dy + i, dv[k]);
#pragma unroll
        for (int j = 0; j < W; ++j) s += yv[k][j] * dv[k][j];
      }
    }
    s = g.sum(s, red);
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int c = g.lane + k * g.size;
      if (c < ncv) {
        float o[W];
#pragma unroll
        for (int j = 0; j < W; ++j) o[j] = scale * yv[k][j] * (dv[k][j] - s);
        store_f<T, W>(dx + base + static_cast<std::size_t>(c) * W, o);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Backward, looped fallback. Norms: blocks take chunks of kChunkRows rows: the row statistics
// first (block reductions, kept in shared memory), then each thread walks its columns down the
// chunk, writing dx and adding the chunk's column sums once.

template <typename T, int W, bool LN>
__global__ void __launch_bounds__(kLoopThreads)
    norm_bwd_loop(const T* __restrict__ x, const T* __restrict__ dy, const T* __restrict__ gamma,
                  const float* __restrict__ mean, const float* __restrict__ rstd,
                  T* __restrict__ dx, float* __restrict__ dgamma, float* __restrict__ dbeta,
                  int rows, int cols) {
  __shared__ float red[64];
  __shared__ float st1[kChunkRows], st2[kChunkRows];
  const int ncv = cols / W;
  const int chunks = (rows + kChunkRows - 1) / kChunkRows;
  for (int ch = blockIdx.x; ch < chunks; ch += gridDim.x) {
    const int r0 = ch * kChunkRows, r1 = min(rows, r0 + kChunkRows);
    for (int r = r0; r < r1; ++r) {
      const std::size_t base = static_cast<std::size_t>(r) * cols;
      const float mu = LN ? mean[r] : 0.0f, rs = rstd[r];
      float s1 = 0, s2 = 0;
      for (int c = threadIdx.x; c < ncv; c += blockDim.x) {
        float a[W], d[W], gm[W];
        load_f<T, W>(x + base + static_cast<std::size_t>(c) * W, a);
        load_f<T, W>(dy + base + static_cast<std::size_t>(c) * W, d);
        load_f<T, W>(gamma + static_cast<std::size_t>(c) * W, gm);
#pragma unroll
        for (int j = 0; j < W; ++j) {
          const float gd = gm[j] * d[j];
          s1 += gd;
          s2 += LN ? gd * (a[j] - mu) * rs : gd * a[j];
        }
      }
      const float2 sums = block_sum2(s1, s2, red);
      if (threadIdx.x == 0) {
        st1[r - r0] = sums.x / cols;
        st2[r - r0] = LN ? sums.y / cols : sums.y * rs * rs * rs / cols;
      }
    }
    __syncthreads();
    for (int c = threadIdx.x; c < ncv; c += blockDim.x) {
      float gm[W], dg[W], db[W];
      load_f<T, W>(gamma + static_cast<std::size_t>(c) * W, gm);
#pragma unroll
      for (int j = 0; j < W; ++j) dg[j] = db[j] = 0.0f;
      for (int r = r0; r < r1; ++r) {
        const std::size_t i = static_cast<std::size_t>(r) * cols + static_cast<std::size_t>(c) * W;
        const float mu = LN ? mean[r] : 0.0f, rs = rstd[r];
        const float m1 = st1[r - r0], m2 = st2[r - r0];
        float a[W], d[W], o[W];
        load_f<T, W>(x + i, a);
        load_f<T, W>(dy + i, d);
#pragma unroll
        for (int j = 0; j < W; ++j) {
          if (LN) {
            const float xh = (a[j] - mu) * rs;
            o[j] = rs * (gm[j] * d[j] - m1 - xh * m2);
            dg[j] += d[j] * xh;
            db[j] += d[j];
          } else {
            o[j] = rs * gm[j] * d[j] - a[j] * m2;
            dg[j] += d[j] * a[j] * rs;
          }
        }
        store_f<T, W>(dx + i, o);
      }
#pragma unroll
      for (int j = 0; j < W; ++j) {
        atomicAdd(&dgamma[c * W + j], dg[j]);
        if (LN) atomicAdd(&dbeta[c * W + j], db[j]);
      }
    }
    __syncthreads();  // st1/st2 are rewritten by the next chunk
  }
}

template <typename T, int W>
__global__ void __launch_bounds__(kLoopThreads)
    softmax_bwd_loop(const T* __restrict__ y, const T* __restrict__ dy, T* __restrict__ dx,
                     int cols, float scale) {
  __shared__ float red[64];
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * cols;
  const int ncv = cols / W;
  float s = 0;
  for (int c = threadIdx.x; c < ncv; c += blockDim.x) {
    float a[W], d[W];
    load_f<T, W>(y + base + static_cast<std::size_t>(c) * W, a);
    load_f<T, W>(dy + base + static_cast<std::size_t>(c) * W, d);
#pragma unroll
    for (int j = 0; j < W; ++j) s += a[j] * d[j];
  }
  s = block_sum(s, red);
  for (int c = threadIdx.x; c < ncv; c += blockDim.x) {
    float a[W], d[W];
    load_f<T, W>(y + base + static_cast<std::size_t>(c) * W, a);
    load_f<T, W>(dy + base + static_cast<std::size_t>(c) * W, d);
#pragma unroll
    for (int j = 0; j < W; ++j) a[j] = scale * a[j] * (d[j] - s);
    store_f<T, W>(dx + base + static_cast<std::size_t>(c) * W, a);
  }
}

// ---------------------------------------------------------------------------------------------
// Dispatch of a register-mode kernel template on (VPT, WARP).

#define TRAINSIM_ROW_DISPATCH(KERNEL, T, plan, blocks, stream, ...)                          \
  do {                                                                                     \
    if ((plan).mode == RowPlan::kWarp) {                                                   \
      if ((plan).vpt == 1)                                                                 \
        KERNEL<T, 1, true><<<(blocks), (plan).threads, 0, (stream)>>>(__VA_ARGS__);        \
      else if ((plan).vpt == 2)                                                            \
        KERNEL<T, 2, true><<<(blocks), (plan).threads, 0, (stream)>>>(__VA_ARGS__);        \
      else                                                                                 \
        KERNEL<T, 4, true><<<(blocks), (plan).threads, 0, (stream)>>>(__VA_ARGS__);        \
    } else {                                                                               \
      if ((plan).vpt == 1)                                                                 \
        KERNEL<T, 1, false><<<(blocks), (plan).threads, 0, (stream)>>>(__VA_ARGS__);       \
      else if ((plan).vpt == 2)                                                            \
        KERNEL<T, 2, false><<<(blocks), (plan).threads, 0, (stream)>>>(__VA_ARGS__);       \
      else                                                                                 \
        KERNEL<T, 4, false><<<(blocks), (plan).threads, 0, (stream)>>>(__VA_ARGS__);       \
    }                                                                                      \
  } while (0)

bool register_mode(const RowPlan& p) { return p.mode == RowPlan::kWarp || p.mode == RowPlan::kBlock; }

}  // namespace

void launch_layernorm(DType t, const void* x, const void* gamma, const void* beta, void* y,
                      float* mean, float* rstd, int rows, int cols, float eps, cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return;
  dispatch_storage(t, "layernorm", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = static_cast<const T*>(x);
    const T* gp = static_cast<const T*>(gamma);
    const T* bp = static_cast<const T*>(beta);
    T* yp = static_cast<T*>(y);
    const RowPlan p = row_plan(cols, kVec<T>, {x, gamma, beta, y}, 4096);
    if (register_mode(p)) {
      TRAINSIM_ROW_DISPATCH(layernorm_reg, T, p, fwd_blocks(p, rows), s, xp, gp, bp, yp, mean,
                            rstd, rows, cols, eps);
    } else if (p.mode == RowPlan::kLoopVec) {
      layernorm_loop<T, kVec<T>>
          <<<rows, kLoopThreads, 0, s>>>(xp, gp, bp, yp, mean, rstd, cols, eps);
    } else {
      layernorm_loop<T, 1><<<rows, kLoopThreads, 0, s>>>(xp, gp, bp, yp, mean, rstd, cols, eps);
    }
  });
  check_launch("layernorm");
}

void launch_rmsnorm(DType t, const void* x, const void* gamma, void* y, float* rstd, int rows,
                    int cols, float eps, cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return;
  dispatch_storage(t, "rmsnorm", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = static_cast<const T*>(x);
    const T* gp = static_cast<const T*>(gamma);
    T* yp = static_cast<T*>(y);
    const RowPlan p = row_plan(cols, kVec<T>, {x, gamma, y}, 4096);
    if (register_mode(p)) {
      TRAINSIM_ROW_DISPATCH(rmsnorm_reg, T, p, fwd_blocks(p, rows), s, xp, gp, yp, rstd, rows,
                            cols, eps);
    } else if (p.mode == RowPlan::kLoopVec) {
      rmsnorm_loop<T, kVec<T>><<<rows, kLoopThreads, 0, s>>>(xp, gp, yp, rstd, cols, eps);
    } else {
      rmsnorm_loop<T, 1><<<rows, kLoopThreads, 0, s>>>(xp, gp, yp, rstd, cols, eps);
    }
  });
  check_launch("rmsnorm");
}

void launch_softmax(DType t, const void* x, void* y, int rows, int cols, float scale,
                    cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return;
  dispatch_storage(t, "softmax", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = static_cast<const T*>(x);
    T* yp = static_cast<T*>(y);
    const RowPlan p = row_plan(cols, kVec<T>, {x, y}, 2048);
    if (register_mode(p)) {
      TRAINSIM_ROW_DISPATCH(softmax_reg, T, p, fwd_blocks(p, rows), s, xp, yp, rows, cols, scale);
    } else if (p.mode == RowPlan::kLoopVec) {
      softmax_loop<T, kVec<T>><<<rows, kLoopThreads, 0, s>>>(xp, yp, cols, scale);
    } else {
      softmax_loop<T, 1><<<rows, kLoopThreads, 0, s>>>(xp, yp, cols, scale);
    }
  });
  check_launch("softmax");
}

void launch_cross_entropy(DType t, const void* logits, const std::int32_t* targets, float* loss,
                          void* grad, int rows, int vocab, cudaStream_t s) {
  if (rows <= 0 || vocab <= 0) return;
  dispatch_storage(t, "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    const T* lp = static_cast<const T*>(logits);
    T* gp = static_cast<T*>(grad);
    const RowPlan p = row_plan(vocab, kVec<T>, {logits, grad}, 2048);
    if (register_mode(p)) {
      TRAINSIM_ROW_DISPATCH(cross_entropy_reg, T, p, fwd_blocks(p, rows), s, lp, targets, loss, gp,
                            rows, vocab);
    } else if (p.mode == RowPlan::kLoopVec) {
      cross_entropy_loop<T, kVec<T>><<<rows, kLoopThreads, 0, s>>>(lp, targets, loss, gp, vocab);
    } else {
      cross_entropy_loop<T, 1><<<rows, kLoopThreads, 0, s>>>(lp, targets, loss, gp, vocab);
    }
  });
  check_launch("cross_entropy");
}

void launch_layernorm_bwd(DType t, const void* x, const void* dy, const void* gamma,
                          const float* mean, const float* rstd, void* dx, float* dgamma,
                          float* dbeta, int rows, int cols, cudaStream_t s) {
  if (cols <= 0) return;
  check_cuda(cudaMemsetAsync(dgamma, 0, static_cast<std::size_t>(cols) * 4, s),
             "layernorm_bwd: zero dgamma");
  check_cuda(cudaMemsetAsync(dbeta, 0, static_cast<std::size_t>(cols) * 4, s),
             "layernorm_bwd: zero dbeta");
  if (rows <= 0) return;
  dispatch_storage(t, "layernorm_bwd", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = static_cast<const T*>(x);
    const T* dp = static_cast<const T*>(dy);
    const T* gp = static_cast<const T*>(gamma);
    T* op = static_cast<T*>(dx);
    const RowPlan p = row_plan(cols, kVec<T>, {x, dy, gamma, dx}, 2048);
    const unsigned loop_blocks =
        std::min(static_cast<unsigned>((rows + kChunkRows - 1) / kChunkRows),
                 static_cast<unsigned>(sm_count()) * 4);
    if (register_mode(p)) {
      TRAINSIM_ROW_DISPATCH(layernorm_bwd_reg, T, p, bwd_blocks(p, rows), s, xp, dp, gp, mean,
                            rstd, op, dgamma, dbeta, rows, cols);
    } else if (p.mode == RowPlan::kLoopVec) {
      norm_bwd_loop<T, kVec<T>, true><<<loop_blocks, kLoopThreads, 0, s>>>(
          xp, dp, gp, mean, rstd, op, dgamma, dbeta, rows, cols);
    } else {
      norm_bwd_loop<T, 1, true><<<loop_blocks, kLoopThreads, 0, s>>>(xp, dp, gp, mean, rstd, op,
                                                                      dgamma, dbeta, rows, cols);
    }
  });
  check_launch("layernorm_bwd");
}

void launch_rmsnorm_bwd(DType t, const void* x, const void* dy, const void* gamma,
                        const float* rstd, void* dx, float* dgamma, int rows, int cols,
                        cudaStream_t s) {
  if (cols <= 0) return;
  check_cuda(cudaMemsetAsync(dgamma, 0, static_cast<std::size_t>(cols) * 4, s),
             "rmsnorm_bwd: zero dgamma");
  if (rows <= 0) return;
  dispatch_storage(t, "rmsnorm_bwd", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = static_cast<const T*>(x);
    const T* dp = static_cast<const T*>(dy);
    const T* gp = static_cast<const T*>(gamma);
    T* op = static_cast<T*>(dx);
    const RowPlan p = row_plan(cols, kVec<T>, {x, dy, gamma, dx}, 2048);
    const unsigned loop_blocks =
        std::min(static_cast<unsigned>((rows + kChunkRows - 1) / kChunkRows),
                 static_cast<unsigned>(sm_count()) * 4);
    if (register_mode(p)) {
      TRAINSIM_ROW_DISPATCH(rmsnorm_bwd_reg, T, p, bwd_blocks(p, rows), s, xp, dp, gp, rstd, op,
                            dgamma, rows, cols);
    } else if (p.mode == RowPlan::kLoopVec) {
      norm_bwd_loop<T, kVec<T>, false><<<loop_blocks, kLoopThreads, 0, s>>>(
          xp, dp, gp, nullptr, rstd, op, dgamma, nullptr, rows, cols);
    } else {
      norm_bwd_loop<T, 1, false><<<loop_blocks, kLoopThreads, 0, s>>>(
          xp, dp, gp, nullptr, rstd, op, dgamma, nullptr, rows, cols);
    }
  });
  check_launch("rmsnorm_bwd");
}

void launch_softmax_bwd(DType t, const void* y, const void* dy, void* dx, int rows, int cols,
                        float scale, cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return;
  dispatch_storage(t, "softmax_bwd", [&](auto tag) {
    using T = decltype(tag);
    const T* yp = static_cast<const T*>(y);
    const T* dp = static_cast<const T*>(dy);
    T* op = static_cast<T*>(dx);
    const RowPlan p = row_plan(cols, kVec<T>, {y, dy, dx}, 2048);
    if (register_mode(p)) {
      TRAINSIM_ROW_DISPATCH(softmax_bwd_reg, T, p, fwd_blocks(p, rows), s, yp, dp, op, rows, cols,
                            scale);
    } else if (p.mode == RowPlan::kLoopVec) {
      softmax_bwd_loop<T, kVec<T>><<<rows, kLoopThreads, 0, s>>>(yp, dp, op, cols, scale);
    } else {
      softmax_bwd_loop<T, 1><<<rows, kLoopThreads, 0, s>>>(yp, dp, op, cols, scale);
    }
  });
  check_launch("softmax_bwd");
}

}  // namespace trainsim::kernels
