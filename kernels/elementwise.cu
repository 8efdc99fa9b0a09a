// Element-wise kernels: bias-GeLU, SwiGLU, dropout, bias-dropout-residual, embedding lookup, the
// Adam / LAMB optimizer steps, their backwards, and a plain copy (the bandwidth roofline). Float
// arithmetic, one pass over memory each (these are the kernels the bandwidth fit of `calibrate
// kernels` times), 16-byte accesses (kernels/vec.cuh) whenever the pointers and shape allow.
//
// Two launch shapes:
//   - flat (dropout, copy, optimizers): a grid-stride loop over 16-byte vectors, then the
//     elements past the last whole vector one by one; the grid is capped at 16 blocks per SM;
//   - by column (kernels with a per-column operand or a per-row layout: bias-GeLU, SwiGLU,
//     bias-dropout-add and their backwards): `lanes` × (the row's vectors) threads, one full
//     wave at the kernel's occupancy; thread t owns column vector t mod ncv and walks down the rows t / ncv,
//     + lanes, + 2·lanes, ... with 2 rows' loads in flight at a time (kept packed). Consecutive threads read
//     consecutive memory (the grid sweeps the matrix like a flat loop), the bias is loaded once
//     per thread and column sums (dbias) stay in registers until one atomic add per thread.
// Rows that are not a whole number of aligned vectors run the same templates with W = 1.
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <type_traits>

#include "kernels/cuda_check.h"
#include "kernels/cuda_types.cuh"
#include "kernels/dropout_hash.h"
#include "kernels/launchers.h"
#include "kernels/vec.cuh"

namespace trainsim::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kRowUnroll = 2;  // rows in flight per thread in the by-column kernels

template <int V>
using IntC = std::integral_constant<int, V>;

unsigned blocks_for(std::size_t n) {
  const std::size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535u * 8 ? (b > 0 ? b : 1) : 65535u * 8);
}

// Flat loop: body(IntC<W>, i) for each whole vector at element i, then body(IntC<1>, i) for
// the tail elements.
template <int W, typename F>
__device__ __forceinline__ void flat_loop(std::size_t n, F&& body) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t tid = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const std::size_t nv = n / W;
  for (std::size_t v = tid; v < nv; v += stride) body(IntC<W>{}, v * W);
  if (W > 1) {
    for (std::size_t i = nv * W + tid; i < n; i += stride) body(IntC<1>{}, i);
  }
}

unsigned flat_blocks(std::size_t n, int w) { return grid_for((n + w - 1) / w, kThreads, 16); }

// Blocks of kThreads of `kernel` that fit on one SM at once (registers, shared memory), asked
// of the runtime once per kernel.
int resident_blocks(const void* kernel) {
  static std::mutex mu;
  static std::map<const void*, int> known;
  const std::lock_guard<std::mutex> lock(mu);
  auto it = known.find(kernel);
  if (it != known.end()) return it->second;
  int n = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kThreads, 0) != cudaSuccess ||
      n <= 0) {
    cudaGetLastError();
    n = 2048 / kThreads;
  }
  known[kernel] = n;
  return n;
}

// The by-column launch shape: `lanes` threads per column vector, as many as fill every SM once
// (one wave at the kernel's occupancy; at most one per row), in blocks of kThreads.
struct ColGrid {
  unsigned blocks = 1;
  int lanes = 1;
};

template <typename K>
ColGrid col_grid(int rows, int ncv, K* kernel) {
  const long long wave = static_cast<long long>(sm_count()) * kThreads *
                         resident_blocks(reinterpret_cast<const void*>(kernel));
  const long long lanes = std::max(1LL, std::min<long long>(rows, wave / ncv));
  const long long threads = lanes * ncv;
  ColGrid g;
  g.blocks = static_cast<unsigned>((threads + kThreads - 1) / kThreads);
  g.lanes = static_cast<int>(lanes);
  return g;
}

// This thread's column vector and first row; false when the thread has none.
__device__ __forceinline__ bool col_pos(int ncv, int lanes, int& cv, int& lane) {
  const long long t = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  cv = static_cast<int>(t % ncv);
  lane = static_cast<int>(t / ncv);
  return lane < lanes;
}

// This thread's rows lane, lane + lanes, ...: load(u, row) for up to kRowUnroll rows, then
// store(u, row) for the same rows (all loads issued before any store).
template <typename Load, typename Store>
__device__ __forceinline__ void col_rows(int rows, int lane, int lanes, Load&& load,
                                         Store&& store) {
  for (int r = lane; r < rows; r += kRowUnroll * lanes) {
#pragma unroll
    for (int u = 0; u < kRowUnroll; ++u) {
      if (r + u * lanes < rows) load(u, r + u * lanes);
    }
#pragma unroll
    for (int u = 0; u < kRowUnroll; ++u) {
      if (r + u * lanes < rows) store(u, r + u * lanes);
    }
  }
}

// Adds this thread's W column sums into dsum[cv·W + j].
template <int W>
__device__ __forceinline__ void add_column_sums(const float (&acc)[W], int cv, float* dsum) {
#pragma unroll
  for (int j = 0; j < W; ++j) atomicAdd(&dsum[static_cast<std::size_t>(cv) * W + j], acc[j]);
}

// tanh(u) = 1 − 2/(e^{2u} + 1) with the hardware exponential and an approximate division
// (absolute error ~1e-7; tanhf's software path made the GeLU kernels compute-bound). e^{2u} is
// capped at e^80 so the denominator stays finite: tanh is 1 in float well before.
__device__ __forceinline__ float tanh_fast(float u) {
  return 1.0f - __fdividef(2.0f, __expf(fminf(2.0f * u, 80.0f)) + 1.0f);
}

// 1 / (1 + e^{-a}), the exponent capped likewise (σ → 0 for a ≪ 0).
__device__ __forceinline__ float sigmoid_fast(float a) {
  return __fdividef(1.0f, 1.0f + __expf(fminf(-a, 80.0f)));
}

__device__ __forceinline__ float gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanh_fast(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

// d gelu_tanh / dx.
__device__ __forceinline__ float gelu_tanh_grad(float x) {
  const float k = 0.7978845608028654f;
  const float t = tanh_fast(k * (x + 0.044715f * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * k * (1.0f + 3.0f * 0.044715f * x * x);
}

// ---------------------------------------------------------------------------------------------
// Forward kernels.

template <typename T, int W>
__global__ void __launch_bounds__(kThreads)
    bias_gelu_kernel(const T* __restrict__ x, const T* __restrict__ bias, T* __restrict__ y,
                     int rows, int cols, int lanes) {
  const int ncv = cols / W;
  int cv = 0, lane = 0;
  if (!col_pos(ncv, lanes, cv, lane)) return;
  float b[W];
  load_f<T, W>(bias + static_cast<std::size_t>(cv) * W, b);
  Vec<T, W> a[kRowUnroll];
  auto at = [&](int r) { return static_cast<std::size_t>(r) * cols + static_cast<std::size_t>(cv) * W; };
  col_rows(
      rows, lane, lanes, [&](int u, int r) { a[u] = load_vec<T, W>(x + at(r)); },
      [&](int u, int r) {
        float o[W];
#pragma unroll
        for (int j = 0; j < W; ++j) o[j] = gelu_tanh(to_f(a[u].v[j]) + b[j]);
        store_f<T, W>(y + at(r), o);
      });
}

template <typename T, int W>
__global__ void __launch_bounds__(kThreads)
    swiglu_kernel(const T* __restrict__ gu, T* __restrict__ y, int rows, int cols, int lanes) {
  const int ncv = cols / W;
  int cv = 0, lane = 0;
  if (!col_pos(ncv, lanes, cv, lane)) return;
  Vec<T, W> a[kRowUnroll], b[kRowUnroll];
  const std::size_t c = static_cast<std::size_t>(cv) * W;
  col_rows(
      rows, lane, lanes,
      [&](int u, int r) {
        const std::size_t g = static_cast<std::size_t>(r) * 2 * cols + c;
        a[u] = load_vec<T, W>(gu + g);
        b[u] = load_vec<T, W>(gu + g + cols);
      },
      [&](int u, int r) {
        float o[W];
#pragma unroll
        for (int j = 0; j < W; ++j) {
          const float g = to_f(a[u].v[j]);
          o[j] = g * sigmoid_fast(g) * to_f(b[u].v[j]);
        }
        store_f<T, W>(y + static_cast<std::size_t>(r) * cols + c, o);
      });
}

template <typename T, int W>
__global__ void __launch_bounds__(kThreads)
    dropout_kernel(const T* __restrict__ x, T* __restrict__ y, std::uint8_t* __restrict__ mask,
                   std::size_t n, float p, std::uint64_t seed) {
  const float inv = 1.0f / (1.0f - p);
  flat_loop<W>(n, [&](auto wc, std::size_t i) {
    constexpr int V = decltype(wc)::value;
    float a[V];
    load_f<T, V>(x + i, a);
    Vec<std::uint8_t, V> mk;
    const std::uint64_t z = seed + (i + 1) * kDropoutStep;  // dropout_keep(seed, i + j, p)
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const bool keep = dropout_uniform_z(z + j * kDropoutStep) >= p;
      mk.v[j] = keep ? 1 : 0;
      a[j] = keep ? a[j] * inv : 0.0f;
    }
    store_f<T, V>(y + i, a);
    *reinterpret_cast<Vec<std::uint8_t, V>*>(mask + i) = mk;
  });
}

template <typename T, int W>
__global__ void __launch_bounds__(kThreads)
    bias_dropout_add_kernel(const T* __restrict__ x, const T* __restrict__ bias,
                            const T* __restrict__ residual, T* __restrict__ y,
                            std::uint8_t* __restrict__ mask, int rows, int cols, int lanes,
                            float p, std::uint64_t seed) {
  const int ncv = cols / W;
  int cv = 0, lane = 0;
  if (!col_pos(ncv, lanes, cv, lane)) return;
  const float inv = 1.0f / (1.0f - p);
  float b[W];
  load_f<T, W>(bias + static_cast<std::size_t>(cv) * W, b);
  Vec<T, W> a[kRowUnroll], res[kRowUnroll];
  auto at = [&](int r) { return static_cast<std::size_t>(r) * cols + static_cast<std::size_t>(cv) * W; };
  col_rows(
      rows, lane, lanes,
      [&](int u, int r) {
        a[u] = load_vec<T, W>(x + at(r));
        res[u] = load_vec<T, W>(residual + at(r));
      },
      [&](int u, int r) {
        const std::size_t i = at(r);
        float o[W];
        Vec<std::uint8_t, W> mk;
        const std::uint64_t z = seed + (i + 1) * kDropoutStep;  // dropout_keep(seed, i + j, p)
#pragma unroll
        for (int j = 0; j < W; ++j) {
          const bool keep = dropout_uniform_z(z + j * kDropoutStep) >= p;
          mk.v[j] = keep ? 1 : 0;
          o[j] = to_f(res[u].v[j]) + (keep ? (to_f(a[u].v[j]) + b[j]) * inv : 0.0f);
        }
        store_f<T, W>(y + i, o);
        *reinterpret_cast<Vec<std::uint8_t, W>*>(mask + i) = mk;
      });
}

template <typename T, int W>
__global__ void embedding_kernel(const std::int32_t* __restrict__ tokens, const T* __restrict__ table,
                                 T* __restrict__ y, int hidden) {
  const std::size_t t = blockIdx.x;
  const T* row = table + static_cast<std::size_t>(tokens[t]) * hidden;
  T* out = y + t * hidden;
  const int ncv = hidden / W;
  for (int c = threadIdx.x; c < ncv; c += blockDim.x) {
    *reinterpret_cast<Vec<T, W>*>(out + static_cast<std::size_t>(c) * W) =
        *reinterpret_cast<const Vec<T, W>*>(row + static_cast<std::size_t>(c) * W);
  }
}

// The copy roofline: four 16-byte loads in flight per thread, then the bytes past the last
// whole vector (all of them when a pointer is not 16-byte aligned).
__global__ void __launch_bounds__(kThreads)
    copy_kernel(const void* src_bytes, void* dst_bytes, std::size_t nv, std::size_t bytes) {
  const uint4* __restrict__ src = static_cast<const uint4*>(src_bytes);
  uint4* __restrict__ dst = static_cast<uint4*>(dst_bytes);
  const unsigned char* sb = static_cast<const unsigned char*>(src_bytes);
  unsigned char* db = static_cast<unsigned char*>(dst_bytes);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t tid = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  std::size_t v = tid;
  for (; v + 3 * stride < nv; v += 4 * stride) {
    const uint4 a0 = src[v], a1 = src[v + stride], a2 = src[v + 2 * stride],
                a3 = src[v + 3 * stride];
    dst[v] = a0;
    dst[v + stride] = a1;
    dst[v + 2 * stride] = a2;
    dst[v + 3 * stride] = a3;
  }
  for (; v < nv; v += stride) dst[v] = src[v];
  for (std::size_t i = nv * 16 + tid; i < bytes; i += stride) db[i] = sb[i];
}

// ---------------------------------------------------------------------------------------------
// Backward kernels.

template <typename T, int W>
__global__ void __launch_bounds__(kThreads)
    bias_gelu_bwd_kernel(const T* __restrict__ x, const T* __restrict__ bias,
                         const T* __restrict__ dy, T* __restrict__ dx, float* __restrict__ dbias,
                         int rows, int cols, int lanes) {
  const int ncv = cols / W;
  int cv = 0, lane = 0;
  if (!col_pos(ncv, lanes, cv, lane)) return;
  float acc[W];
#pragma unroll
  for (int j = 0; j < W; ++j) acc[j] = 0.0f;
  {
    float b[W];
    load_f<T, W>(bias + static_cast<std::size_t>(cv) * W, b);
    Vec<T, W> a[kRowUnroll], d[kRowUnroll];
    auto at = [&](int r) { return static_cast<std::size_t>(r) * cols + static_cast<std::size_t>(cv) * W; };
    col_rows(
        rows, lane, lanes,
        [&](int u, int r) {
          a[u] = load_vec<T, W>(x + at(r));
          d[u] = load_vec<T, W>(dy + at(r));
        },
        [&](int u, int r) {
          float o[W];
#pragma unroll
          for (int j = 0; j < W; ++j) {
            o[j] = to_f(d[u].v[j]) * gelu_tanh_grad(to_f(a[u].v[j]) + b[j]);
            acc[j] += o[j];
          }
          store_f<T, W>(dx + at(r), o);
        });
  }
  add_column_sums<W>(acc, cv, dbias);
}

template <typename T, int W>
__global__ void __launch_bounds__(kThreads)
    swiglu_bwd_kernel(const T* __restrict__ gu, const T* __restrict__ dy, T* __restrict__ dgu,
                      int rows, int cols, int lanes) {
  const int ncv = cols / W;
  int cv = 0, lane = 0;
  if (!col_pos(ncv, lanes, cv, lane)) return;
  Vec<T, W> a[kRowUnroll], b[kRowUnroll], d[kRowUnroll];
  const std::size_t c = static_cast<std::size_t>(cv) * W;
  col_rows(
      rows, lane, lanes,
      [&](int u, int r) {
        const std::size_t g = static_cast<std::size_t>(r) * 2 * cols + c;
        a[u] = load_vec<T, W>(gu + g);
        b[u] = load_vec<T, W>(gu + g + cols);
        d[u] = load_vec<T, W>(dy + static_cast<std::size_t>(r) * cols + c);
      },
      [&](int u, int r) {
        float dg[W], du[W];
#pragma unroll
        for (int j = 0; j < W; ++j) {
          const float g = to_f(a[u].v[j]), up = to_f(b[u].v[j]), dyj = to_f(d[u].v[j]);
          const float sg = sigmoid_fast(g);
          du[j] = dyj * g * sg;                            // dy · silu(a)
          dg[j] = dyj * up * sg * (1.0f + g * (1.0f - sg));  // dy · up · silu'(a)
        }
        const std::size_t g = static_cast<std::size_t>(r) * 2 * cols + c;
        store_f<T, W>(dgu + g, dg);
        store_f<T, W>(dgu + g + cols, du);
      });
}

template <typename T, int W>
__global__ void __launch_bounds__(kThreads)
    dropout_bwd_kernel(const T* __restrict__ dy, const std::uint8_t* __restrict__ mask,
                       T* __restrict__ dx, std::size_t n, float p) {
  const float inv = 1.0f / (1.0f - p);
  flat_loop<W>(n, [&](auto wc, std::size_t i) {
    constexpr int V = decltype(wc)::value;
    float a[V];
    load_f<T, V>(dy + i, a);
    const Vec<std::uint8_t, V> mk = *reinterpret_cast<const Vec<std::uint8_t, V>*>(mask + i);
#pragma unroll
    for (int j = 0; j < V; ++j) a[j] = mk.v[j] ? a[j] * inv : 0.0f;
    store_f<T, V>(dx + i, a);
  });
}

template <typename T, int W>
__global__ void __launch_bounds__(kThreads)
    bias_dropout_add_bwd_kernel(const T* __restrict__ dy, const std::uint8_t* __restrict__ mask,
                                T* __restrict__ dx, float* __restrict__ dbias, int rows, int cols,
                                int lanes, float p) {
  const int ncv = cols / W;
  int cv = 0, lane = 0;
  if (!col_pos(ncv, lanes, cv, lane)) return;
  const float inv = 1.0f / (1.0f - p);
  float acc[W];
#pragma unroll
  for (int j = 0; j < W; ++j) acc[j] = 0.0f;
  {
    Vec<T, W> d[kRowUnroll];
    Vec<std::uint8_t, W> mk[kRowUnroll];
    auto at = [&](int r) { return static_cast<std::size_t>(r) * cols + static_cast<std::size_t>(cv) * W; };
    col_rows(
        rows, lane, lanes,
        [&](int u, int r) {
          d[u] = load_vec<T, W>(dy + at(r));
          mk[u] = *reinterpret_cast<const Vec<std::uint8_t, W>*>(mask + at(r));
        },
        [&](int u, int r) {
          float o[W];
#pragma unroll
          for (int j = 0; j < W; ++j) {
            o[j] = mk[u].v[j] ? to_f(d[u].v[j]) * inv : 0.0f;
            acc[j] += o[j];
          }
          store_f<T, W>(dx + at(r), o);
        });
  }
  add_column_sums<W>(acc, cv, dbias);
}

template <typename T, int W>
__global__ void embedding_bwd_kernel(const std::int32_t* __restrict__ tokens,
                                     const T* __restrict__ dy, float* __restrict__ dtable,
                                     int hidden) {
  const std::size_t t = blockIdx.x;
  float* row = dtable + static_cast<std::size_t>(tokens[t]) * hidden;
  const T* in = dy + t * hidden;
  const int ncv = hidden / W;
  for (int c = threadIdx.x; c < ncv; c += blockDim.x) {
    float a[W];
    load_f<T, W>(in + static_cast<std::size_t>(c) * W, a);
#pragma unroll
    for (int j = 0; j < W; ++j) atomicAdd(&row[static_cast<std::size_t>(c) * W + j], a[j]);
  }
}

// ---------------------------------------------------------------------------------------------
// Optimizers (fp32 state, float4 accesses).

struct AdamConsts {
  float lr, beta1, beta2, eps, wd, bc1, bc2;  // bc = 1 − β^step
};

AdamConsts adam_consts(const ref::AdamParams& p) {
  return {p.lr,
          p.beta1,
          p.beta2,
          p.eps,
          p.weight_decay,
          static_cast<float>(1.0 - std::pow(double(p.beta1), p.step)),
          static_cast<float>(1.0 - std::pow(double(p.beta2), p.step))};
}

__device__ __forceinline__ float adam_direction(float g, float& m, float& v, const AdamConsts& c) {
  m = c.beta1 * m + (1 - c.beta1) * g;
  v = c.beta2 * v + (1 - c.beta2) * g * g;
  return (m / c.bc1) / (sqrtf(v / c.bc2) + c.eps);
}

template <int W>
__global__ void __launch_bounds__(kThreads)
    adam_kernel(float* __restrict__ w, const float* __restrict__ g, float* __restrict__ m,
                float* __restrict__ v, __nv_bfloat16* __restrict__ w16, std::size_t n,
                AdamConsts c) {
  flat_loop<W>(n, [&](auto wc, std::size_t i) {
    constexpr int V = decltype(wc)::value;
    float wv[V], gv[V], mv[V], vv[V];
    load_f<float, V>(w + i, wv);
    load_f<float, V>(g + i, gv);
    load_f<float, V>(m + i, mv);
    load_f<float, V>(v + i, vv);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float dir = adam_direction(gv[j], mv[j], vv[j], c);
      wv[j] = wv[j] - c.lr * (dir + c.wd * wv[j]);
    }
    store_f<float, V>(m + i, mv);
    store_f<float, V>(v + i, vv);
    store_f<float, V>(w + i, wv);
    if (w16) store_f<__nv_bfloat16, V>(w16 + i, wv);
  });
}

// LAMB pass 1: moments, and ‖w‖², ‖r‖² summed per block then atomically in double.
template <int W>
__global__ void __launch_bounds__(kThreads)
    lamb_moments_kernel(const float* __restrict__ w, const float* __restrict__ g,
                        float* __restrict__ m, float* __restrict__ v, double* norms,
                        std::size_t n, AdamConsts c) {
  __shared__ float red[32];
  float ws = 0, rs = 0;
  flat_loop<W>(n, [&](auto wc, std::size_t i) {
    constexpr int V = decltype(wc)::value;
    float wv[V], gv[V], mv[V], vv[V];
    load_f<float, V>(w + i, wv);
    load_f<float, V>(g + i, gv);
    load_f<float, V>(m + i, mv);
    load_f<float, V>(v + i, vv);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float r = adam_direction(gv[j], mv[j], vv[j], c) + c.wd * wv[j];
      ws += wv[j] * wv[j];
      rs += r * r;
    }
    store_f<float, V>(m + i, mv);
    store_f<float, V>(v + i, vv);
  });
  ws = block_sum(ws, red);
  rs = block_sum(rs, red);
  if (threadIdx.x == 0) {
    atomicAdd(&norms[0], double(ws));
    atomicAdd(&norms[1], double(rs));
  }
}

// LAMB pass 2: recompute r from the updated moments (m, v are final; no bias-corrected step
// again) and apply the trust ratio.
template <int W>
__global__ void __launch_bounds__(kThreads)
    lamb_update_kernel(float* __restrict__ w, const float* __restrict__ m,
                       const float* __restrict__ v, __nv_bfloat16* __restrict__ w16,
                       const double* norms, std::size_t n, AdamConsts c) {
  const double wn = sqrt(norms[0]), rn = sqrt(norms[1]);
  const float trust = wn > 0 && rn > 0 ? static_cast<float>(wn / rn) : 1.0f;
  flat_loop<W>(n, [&](auto wc, std::size_t i) {
    constexpr int V = decltype(wc)::value;
    float wv[V], mv[V], vv[V];
    load_f<float, V>(w + i, wv);
    load_f<float, V>(m + i, mv);
    load_f<float, V>(v + i, vv);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float r = (mv[j] / c.bc1) / (sqrtf(vv[j] / c.bc2) + c.eps) + c.wd * wv[j];
      wv[j] = wv[j] - c.lr * trust * r;
    }
    store_f<float, V>(w + i, wv);
    if (w16) store_f<__nv_bfloat16, V>(w16 + i, wv);
  });
}

// ---------------------------------------------------------------------------------------------
// Synthetic inputs.

template <typename T>
__global__ void fill_kernel(T* p, std::size_t n, float lo, float hi, std::uint64_t seed) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    p[i] = T(lo + (hi - lo) * dropout_uniform(seed, i));
  }
}

__global__ void fill_int_kernel(std::int32_t* p, std::size_t n, int bound, std::uint64_t seed) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    p[i] = min(bound - 1, static_cast<int>(dropout_uniform(seed, i) * bound));
  }
}

bool all_aligned(std::initializer_list<const void*> ptrs) {
  for (const void* q : ptrs) {
    if (q != nullptr && !aligned16(q)) return false;
  }
  return true;
}

// The vector width a launch may use: kVec<T> when every pointer is 16-byte aligned and the
// rows (`cols` elements; 0 for flat kernels) are whole vectors, else 1.
template <typename T>
bool vector_ok(int cols, std::initializer_list<const void*> ptrs) {
  return (cols == 0 || cols % kVec<T> == 0) && all_aligned(ptrs);
}

}  // namespace

void launch_fill_uniform(DType t, void* p, std::size_t n, float lo, float hi, std::uint64_t seed,
                         cudaStream_t s) {
  if (n == 0) return;
  switch (t) {
    case DType::kF32:
      fill_kernel<float>
          <<<blocks_for(n), kThreads, 0, s>>>(static_cast<float*>(p), n, lo, hi, seed);
      break;
    case DType::kF16:
      fill_kernel<__half>
          <<<blocks_for(n), kThreads, 0, s>>>(static_cast<__half*>(p), n, lo, hi, seed);
      break;
    case DType::kBf16:
      fill_kernel<__nv_bfloat16>
          <<<blocks_for(n), kThreads, 0, s>>>(static_cast<__nv_bfloat16*>(p), n, lo, hi, seed);
      break;
    case DType::kFp8:
      fill_kernel<__nv_fp8_e4m3>
          <<<blocks_for(n), kThreads, 0, s>>>(static_cast<__nv_fp8_e4m3*>(p), n, lo, hi, seed);
      break;
  }
  check_launch("fill_uniform");
}

void launch_fill_tokens(std::int32_t* p, std::size_t n, int bound, std::uint64_t seed,
                        cudaStream_t s) {
  if (n == 0) return;
  fill_int_kernel<<<blocks_for(n), kThreads, 0, s>>>(p, n, bound, seed);
  check_launch("fill_tokens");
}

void launch_copy(const void* src, void* dst, std::size_t bytes, cudaStream_t s) {
  if (bytes == 0) return;
  const std::size_t nv = all_aligned({src, dst}) ? bytes / 16 : 0;
  const std::size_t items = nv > 0 ? (nv + 3) / 4 : bytes;
  copy_kernel<<<grid_for(items, kThreads, 8), kThreads, 0, s>>>(src, dst, nv, bytes);
  check_launch("copy");
}

void launch_bias_gelu(DType t, const void* x, const void* bias, void* y, int rows, int cols,
                      cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return;
  dispatch_storage(t, "bias_gelu", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = static_cast<const T*>(x);
    const T* bp = static_cast<const T*>(bias);
    T* yp = static_cast<T*>(y);
    if (vector_ok<T>(cols, {x, bias, y})) {
      const ColGrid g = col_grid(rows, cols / kVec<T>, bias_gelu_kernel<T, kVec<T>>);
      bias_gelu_kernel<T, kVec<T>><<<g.blocks, kThreads, 0, s>>>(xp, bp, yp, rows, cols, g.lanes);
    } else {
      const ColGrid g = col_grid(rows, cols, bias_gelu_kernel<T, 1>);
      bias_gelu_kernel<T, 1><<<g.blocks, kThreads, 0, s>>>(xp, bp, yp, rows, cols, g.lanes);
    }
  });
  check_launch("bias_gelu");
}

void launch_swiglu(DType t, const void* gate_up, void* y, int rows, int cols, cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return;
  dispatch_storage(t, "swiglu", [&](auto tag) {
    using T = decltype(tag);
    const T* gp = static_cast<const T*>(gate_up);
    T* yp = static_cast<T*>(y);
    if (vector_ok<T>(cols, {gate_up, y})) {
      const ColGrid g = col_grid(rows, cols / kVec<T>, swiglu_kernel<T, kVec<T>>);
      swiglu_kernel<T, kVec<T>><<<g.blocks, kThreads, 0, s>>>(gp, yp, rows, cols, g.lanes);
    } else {
      const ColGrid g = col_grid(rows, cols, swiglu_kernel<T, 1>);
      swiglu_kernel<T, 1><<<g.blocks, kThreads, 0, s>>>(gp, yp, rows, cols, g.lanes);
    }
  });
  check_launch("swiglu");
}

void launch_dropout(DType t, const void* x, void* y, std::uint8_t* mask, std::size_t n, float p,
                    std::uint64_t seed, cudaStream_t s) {
  if (n == 0) return;
  dispatch_storage(t, "dropout", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = static_cast<const T*>(x);
    T* yp = static_cast<T*>(y);
    if (vector_ok<T>(0, {x, y, mask})) {
      dropout_kernel<T, kVec<T>>
          <<<flat_blocks(n, kVec<T>), kThreads, 0, s>>>(xp, yp, mask, n, p, seed);
    } else {
      dropout_kernel<T, 1><<<flat_blocks(n, 1), kThreads, 0, s>>>(xp, yp, mask, n, p, seed);
    }
  });
  check_launch("dropout");
}

void launch_bias_dropout_add(DType t, const void* x, const void* bias, const void* residual,
                             void* y, std::uint8_t* mask, int rows, int cols, float p,
                             std::uint64_t seed, cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return;
  dispatch_storage(t, "bias_dropout_add", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = static_cast<const T*>(x);
    const T* bp = static_cast<const T*>(bias);
    const T* rp = static_cast<const T*>(residual);
    T* yp = static_cast<T*>(y);
    if (vector_ok<T>(cols, {x, bias, residual, y, mask})) {
      const ColGrid g = col_grid(rows, cols / kVec<T>, bias_dropout_add_kernel<T, kVec<T>>);
      bias_dropout_add_kernel<T, kVec<T>>
          <<<g.blocks, kThreads, 0, s>>>(xp, bp, rp, yp, mask, rows, cols, g.lanes, p, seed);
    } else {
      const ColGrid g = col_grid(rows, cols, bias_dropout_add_kernel<T, 1>);
      bias_dropout_add_kernel<T, 1>
          <<<g.blocks, kThreads, 0, s>>>(xp, bp, rp, yp, mask, rows, cols, g.lanes, p, seed);
    }
  });
  check_launch("bias_dropout_add");
}

void launch_embedding(DType t, const std::int32_t* tokens, const void* table, void* y, int n_tokens,
                      int hidden, cudaStream_t s) {
  if (n_tokens <= 0 || hidden <= 0) return;
  dispatch_storage(t, "embedding", [&](auto tag) {
    using T = decltype(tag);
    const T* tp = static_cast<const T*>(table);
    T* yp = static_cast<T*>(y);
    const bool vec = vector_ok<T>(hidden, {table, y});
    const int ncv = vec ? hidden / kVec<T> : hidden;
    const unsigned threads = static_cast<unsigned>(std::min(kThreads, (ncv + 31) / 32 * 32));
    if (vec) {
      embedding_kernel<T, kVec<T>><<<n_tokens, threads, 0, s>>>(tokens, tp, yp, hidden);
    } else {
      embedding_kernel<T, 1><<<n_tokens, threads, 0, s>>>(tokens, tp, yp, hidden);
    }
  });
  check_launch("embedding");
}

void launch_bias_gelu_bwd(DType t, const void* x, const void* bias, const void* dy, void* dx,
                          float* dbias, int rows, int cols, cudaStream_t s) {
  if (cols <= 0) return;
  check_cuda(cudaMemsetAsync(dbias, 0, static_cast<std::size_t>(cols) * 4, s),
             "bias_gelu_bwd: zero dbias");
  if (rows <= 0) return;
  dispatch_storage(t, "bias_gelu_bwd", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = static_cast<const T*>(x);
    const T* bp = static_cast<const T*>(bias);
    const T* dp = static_cast<const T*>(dy);
    T* op = static_cast<T*>(dx);
    if (vector_ok<T>(cols, {x, bias, dy, dx})) {
      const ColGrid g = col_grid(rows, cols / kVec<T>, bias_gelu_bwd_kernel<T, kVec<T>>);
      bias_gelu_bwd_kernel<T, kVec<T>>
          <<<g.blocks, kThreads, 0, s>>>(xp, bp, dp, op, dbias, rows, cols, g.lanes);
    } else {
      const ColGrid g = col_grid(rows, cols, bias_gelu_bwd_kernel<T, 1>);
      bias_gelu_bwd_kernel<T, 1>
          <<<g.blocks, kThreads, 0, s>>>(xp, bp, dp, op, dbias, rows, cols, g.lanes);
    }
  });
  check_launch("bias_gelu_bwd");
}

void launch_swiglu_bwd(DType t, const void* gate_up, const void* dy, void* dgate_up, int rows,
                       int cols, cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return;
  dispatch_storage(t, "swiglu_bwd", [&](auto tag) {
    using T = decltype(tag);
    const T* gp = static_cast<const T*>(gate_up);
    const T* dp = static_cast<const T*>(dy);
    T* op = static_cast<T*>(dgate_up);
    if (vector_ok<T>(cols, {gate_up, dy, dgate_up})) {
      const ColGrid g = col_grid(rows, cols / kVec<T>, swiglu_bwd_kernel<T, kVec<T>>);
      swiglu_bwd_kernel<T, kVec<T>><<<g.blocks, kThreads, 0, s>>>(gp, dp, op, rows, cols, g.lanes);
    } else {
      const ColGrid g = col_grid(rows, cols, swiglu_bwd_kernel<T, 1>);
      swiglu_bwd_kernel<T, 1><<<g.blocks, kThreads, 0, s>>>(gp, dp, op, rows, cols, g.lanes);
    }
  });
  check_launch("swiglu_bwd");
}

void launch_dropout_bwd(DType t, const void* dy, const std::uint8_t* mask, void* dx,
                        std::size_t n, float p, cudaStream_t s) {
  if (n == 0) return;
  dispatch_storage(t, "dropout_bwd", [&](auto tag) {
    using T = decltype(tag);
    const T* dp = static_cast<const T*>(dy);
    T* op = static_cast<T*>(dx);
    if (vector_ok<T>(0, {dy, mask, dx})) {
      dropout_bwd_kernel<T, kVec<T>><<<flat_blocks(n, kVec<T>), kThreads, 0, s>>>(dp, mask, op, n, p);
    } else {
      dropout_bwd_kernel<T, 1><<<flat_blocks(n, 1), kThreads, 0, s>>>(dp, mask, op, n, p);
    }
  });
  check_launch("dropout_bwd");
}

void launch_bias_dropout_add_bwd(DType t, const void* dy, const std::uint8_t* mask, void* dx,
                                 float* dbias, int rows, int cols, float p, cudaStream_t s) {
  if (cols <= 0) return;
  check_cuda(cudaMemsetAsync(dbias, 0, static_cast<std::size_t>(cols) * 4, s),
             "bias_dropout_add_bwd: zero dbias");
  if (rows <= 0) return;
  dispatch_storage(t, "bias_dropout_add_bwd", [&](auto tag) {
    using T = decltype(tag);
    const T* dp = static_cast<const T*>(dy);
    T* op = static_cast<T*>(dx);
    if (vector_ok<T>(cols, {dy, mask, dx})) {
      const ColGrid g = col_grid(rows, cols / kVec<T>, bias_dropout_add_bwd_kernel<T, kVec<T>>);
      bias_dropout_add_bwd_kernel<T, kVec<T>>
          <<<g.blocks, kThreads, 0, s>>>(dp, mask, op, dbias, rows, cols, g.lanes, p);
    } else {
      const ColGrid g = col_grid(rows, cols, bias_dropout_add_bwd_kernel<T, 1>);
      bias_dropout_add_bwd_kernel<T, 1>
          <<<g.blocks, kThreads, 0, s>>>(dp, mask, op, dbias, rows, cols, g.lanes, p);
    }
  });
  check_launch("bias_dropout_add_bwd");
}

void launch_embedding_bwd(DType t, const std::int32_t* tokens, const void* dy, float* dtable,
                          int n_tokens, int hidden, cudaStream_t s) {
  if (n_tokens <= 0 || hidden <= 0) return;
  dispatch_storage(t, "embedding_bwd", [&](auto tag) {
    using T = decltype(tag);
    const T* dp = static_cast<const T*>(dy);
    const bool vec = vector_ok<T>(hidden, {dy});
    const int ncv = vec ? hidden / kVec<T> : hidden;
    const unsigned threads = static_cast<unsigned>(std::min(kThreads, (ncv + 31) / 32 * 32));
    if (vec) {
      embedding_bwd_kernel<T, kVec<T>><<<n_tokens, threads, 0, s>>>(tokens, dp, dtable, hidden);
    } else {
      embedding_bwd_kernel<T, 1><<<n_tokens, threads, 0, s>>>(tokens, dp, dtable, hidden);
    }
  });
  check_launch("embedding_bwd");
}

void launch_adam(float* w, const float* g, float* m, float* v, void* w_bf16, std::size_t n,
                 const ref::AdamParams& p, cudaStream_t s) {
  if (n == 0) return;
  auto* w16 = static_cast<__nv_bfloat16*>(w_bf16);
  const bool vec = all_aligned({w, g, m, v, w_bf16});
  if (vec) {
    adam_kernel<4><<<flat_blocks(n, 4), kThreads, 0, s>>>(w, g, m, v, w16, n, adam_consts(p));
  } else {
    adam_kernel<1><<<flat_blocks(n, 1), kThreads, 0, s>>>(w, g, m, v, w16, n, adam_consts(p));
  }
  check_launch("adam");
}

void launch_lamb(float* w, const float* g, float* m, float* v, void* w_bf16, double* norms,
                 std::size_t n, const ref::AdamParams& p, cudaStream_t s) {
  if (n == 0) return;
  check_cuda(cudaMemsetAsync(norms, 0, 2 * sizeof(double), s), "lamb: zero the norms");
  const AdamConsts c = adam_consts(p);
  auto* w16 = static_cast<__nv_bfloat16*>(w_bf16);
  const bool vec = all_aligned({w, g, m, v, w_bf16});
  // The reduction pass: at most 4 blocks per SM, each adds two atomics.
  if (vec) {
    lamb_moments_kernel<4><<<grid_for((n + 3) / 4, kThreads, 4), kThreads, 0, s>>>(w, g, m, v,
                                                                                   norms, n, c);
    check_launch("lamb_moments");
    lamb_update_kernel<4><<<flat_blocks(n, 4), kThreads, 0, s>>>(w, m, v, w16, norms, n, c);
  } else {
    lamb_moments_kernel<1><<<grid_for(n, kThreads, 4), kThreads, 0, s>>>(w, g, m, v, norms, n, c);
    check_launch("lamb_moments");
    lamb_update_kernel<1><<<flat_blocks(n, 1), kThreads, 0, s>>>(w, m, v, w16, norms, n, c);
  }
  check_launch("lamb_update");
}

}  // namespace trainsim::kernels
