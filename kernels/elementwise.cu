// Element-wise kernels: bias-GeLU, SwiGLU, dropout, bias-dropout-residual, embedding lookup and
// the Adam / LAMB optimizer steps. Grid-stride loops over elements, float arithmetic, one pass
// over memory each (these are the kernels the bandwidth fit of `calibrate kernels` times).
#include <cuda_fp8.h>

#include <cmath>

#include "kernels/cuda_check.h"
#include "kernels/cuda_types.cuh"
#include "kernels/dropout_hash.h"
#include "kernels/launchers.h"

namespace trainsim::kernels {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(std::size_t n) {
  const std::size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535u * 8 ? (b > 0 ? b : 1) : 65535u * 8);
}

__device__ __forceinline__ float gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

template <typename T>
__global__ void bias_gelu_kernel(const T* x, const T* bias, T* y, std::size_t n, int cols) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    y[i] = from_f<T>(gelu_tanh(to_f(x[i]) + to_f(bias[i % cols])));
  }
}

template <typename T>
__global__ void swiglu_kernel(const T* gu, T* y, std::size_t n, int cols) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t r = i / cols, c = i % cols;
    const float a = to_f(gu[r * 2 * cols + c]);
    y[i] = from_f<T>(a / (1.0f + __expf(-a)) * to_f(gu[r * 2 * cols + cols + c]));
  }
}

template <typename T>
__global__ void dropout_kernel(const T* x, T* y, std::uint8_t* mask, std::size_t n, float p,
                               std::uint64_t seed) {
  const float inv = 1.0f / (1.0f - p);
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const bool keep = dropout_keep(seed, i, p);
    mask[i] = keep ? 1 : 0;
    y[i] = from_f<T>(keep ? to_f(x[i]) * inv : 0.0f);
  }
}

template <typename T>
__global__ void bias_dropout_add_kernel(const T* x, const T* bias, const T* residual, T* y,
                                        std::uint8_t* mask, std::size_t n, int cols, float p,
                                        std::uint64_t seed) {
  const float inv = 1.0f / (1.0f - p);
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const bool keep = dropout_keep(seed, i, p);
    mask[i] = keep ? 1 : 0;
    const float d = keep ? (to_f(x[i]) + to_f(bias[i % cols])) * inv : 0.0f;
    y[i] = from_f<T>(to_f(residual[i]) + d);
  }
}

template <typename T>
__global__ void embedding_kernel(const std::int32_t* tokens, const T* table, T* y, int hidden) {
  const std::size_t t = blockIdx.x;
  const T* row = table + static_cast<std::size_t>(tokens[t]) * hidden;
  for (int c = threadIdx.x; c < hidden; c += blockDim.x) y[t * hidden + c] = row[c];
}

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

__global__ void adam_kernel(float* w, const float* g, float* m, float* v, __nv_bfloat16* w16,
                            std::size_t n, AdamConsts c) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    float mi = m[i], vi = v[i];
    const float dir = adam_direction(g[i], mi, vi, c);
    const float wi = w[i] - c.lr * (dir + c.wd * w[i]);
    m[i] = mi;
    v[i] = vi;
    w[i] = wi;
    if (w16) w16[i] = __float2bfloat16_rn(wi);
  }
}

// LAMB pass 1: moments, and ‖w‖², ‖r‖² summed per block then atomically in double.
__global__ void lamb_moments_kernel(const float* w, const float* g, float* m, float* v,
                                    double* norms, std::size_t n, AdamConsts c) {
  __shared__ float red[32];
  float ws = 0, rs = 0;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    float mi = m[i], vi = v[i];
    const float r = adam_direction(g[i], mi, vi, c) + c.wd * w[i];
    m[i] = mi;
    v[i] = vi;
    ws += w[i] * w[i];
    rs += r * r;
  }
  ws = block_sum(ws, red);
  rs = block_sum(rs, red);
  if (threadIdx.x == 0) {
    atomicAdd(&norms[0], double(ws));
    atomicAdd(&norms[1], double(rs));
  }
}

// LAMB pass 2: recompute r from the updated moments (m, v are final; no bias-corrected step
// again) and apply the trust ratio.
__global__ void lamb_update_kernel(float* w, const float* m, const float* v, __nv_bfloat16* w16,
                                   const double* norms, std::size_t n, AdamConsts c) {
  const double wn = sqrt(norms[0]), rn = sqrt(norms[1]);
  const float trust = wn > 0 && rn > 0 ? static_cast<float>(wn / rn) : 1.0f;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const float r = (m[i] / c.bc1) / (sqrtf(v[i] / c.bc2) + c.eps) + c.wd * w[i];
    const float wi = w[i] - c.lr * trust * r;
    w[i] = wi;
    if (w16) w16[i] = __float2bfloat16_rn(wi);
  }
}

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

void launch_bias_gelu(DType t, const void* x, const void* bias, void* y, int rows, int cols,
                      cudaStream_t s) {
  const std::size_t n = std::size_t(rows) * cols;
  if (n == 0) return;
  dispatch_storage(t, "bias_gelu", [&](auto tag) {
    using T = decltype(tag);
    bias_gelu_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(
        static_cast<const T*>(x), static_cast<const T*>(bias), static_cast<T*>(y), n, cols);
  });
  check_launch("bias_gelu");
}

void launch_swiglu(DType t, const void* gate_up, void* y, int rows, int cols, cudaStream_t s) {
  const std::size_t n = std::size_t(rows) * cols;
  if (n == 0) return;
  dispatch_storage(t, "swiglu", [&](auto tag) {
    using T = decltype(tag);
    swiglu_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(gate_up),
                                                        static_cast<T*>(y), n, cols);
  });
  check_launch("swiglu");
}

void launch_dropout(DType t, const void* x, void* y, std::uint8_t* mask, std::size_t n, float p,
                    std::uint64_t seed, cudaStream_t s) {
  if (n == 0) return;
  dispatch_storage(t, "dropout", [&](auto tag) {
    using T = decltype(tag);
    dropout_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x),
                                                         static_cast<T*>(y), mask, n, p, seed);
  });
  check_launch("dropout");
}

void launch_bias_dropout_add(DType t, const void* x, const void* bias, const void* residual,
                             void* y, std::uint8_t* mask, int rows, int cols, float p,
                             std::uint64_t seed, cudaStream_t s) {
  const std::size_t n = std::size_t(rows) * cols;
  if (n == 0) return;
  dispatch_storage(t, "bias_dropout_add", [&](auto tag) {
    using T = decltype(tag);
    bias_dropout_add_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(
        static_cast<const T*>(x), static_cast<const T*>(bias), static_cast<const T*>(residual),
        static_cast<T*>(y), mask, n, cols, p, seed);
  });
  check_launch("bias_dropout_add");
}

void launch_embedding(DType t, const std::int32_t* tokens, const void* table, void* y, int n_tokens,
                      int hidden, cudaStream_t s) {
  if (n_tokens <= 0) return;
  dispatch_storage(t, "embedding", [&](auto tag) {
    using T = decltype(tag);
    embedding_kernel<T><<<n_tokens, kThreads, 0, s>>>(tokens, static_cast<const T*>(table),
                                                      static_cast<T*>(y), hidden);
  });
  check_launch("embedding");
}

void launch_adam(float* w, const float* g, float* m, float* v, void* w_bf16, std::size_t n,
                 const ref::AdamParams& p, cudaStream_t s) {
  if (n == 0) return;
  adam_kernel<<<blocks_for(n), kThreads, 0, s>>>(w, g, m, v, static_cast<__nv_bfloat16*>(w_bf16), n,
                                                 adam_consts(p));
  check_launch("adam");
}

void launch_lamb(float* w, const float* g, float* m, float* v, void* w_bf16, double* norms,
                 std::size_t n, const ref::AdamParams& p, cudaStream_t s) {
  if (n == 0) return;
  check_cuda(cudaMemsetAsync(norms, 0, 2 * sizeof(double), s), "lamb: zero the norms");
  const AdamConsts c = adam_consts(p);
  // Fewer blocks for the reduction pass: each block adds two atomics.
  const unsigned blocks = blocks_for(n) < 1024 ? blocks_for(n) : 1024;
  lamb_moments_kernel<<<blocks, kThreads, 0, s>>>(w, g, m, v, norms, n, c);
  check_launch("lamb_moments");
  lamb_update_kernel<<<blocks_for(n), kThreads, 0, s>>>(
      w, m, v, static_cast<__nv_bfloat16*>(w_bf16), norms, n, c);
  check_launch("lamb_update");
}

}  // namespace trainsim::kernels
