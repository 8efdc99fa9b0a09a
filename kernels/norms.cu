// Row-wise kernels: LayerNorm, RMSNorm, softmax, cross-entropy. One thread block per row, 256
// threads striding over the columns; statistics in fp32 through block reductions. LayerNorm takes
// the mean first and then the variance about it (two passes, as the reference) rather than
// E[x²] − E[x]², which cancels badly in fp32 for rows with a large mean.
#include <cmath>

#include "kernels/cuda_check.h"
#include "kernels/cuda_types.cuh"
#include "kernels/launchers.h"

namespace trainsim::kernels {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void layernorm_kernel(const T* x, const T* gamma, const T* beta, T* y, float* mean,
                                 float* rstd, int cols, float eps) {
  __shared__ float red[32];
  const std::size_t row = blockIdx.x;
  const T* xr = x + row * cols;
  float s = 0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += to_f(xr[c]);
  const float mu = block_sum(s, red) / cols;
  float v = 0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float d = to_f(xr[c]) - mu;
    v += d * d;
  }
  const float rs = rsqrtf(block_sum(v, red) / cols + eps);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    y[row * cols + c] = from_f<T>((to_f(xr[c]) - mu) * rs * to_f(gamma[c]) + to_f(beta[c]));
  }
  if (threadIdx.x == 0) {
    if (mean) mean[row] = mu;
    if (rstd) rstd[row] = rs;
  }
}

template <typename T>
__global__ void rmsnorm_kernel(const T* x, const T* gamma, T* y, float* rstd, int cols, float eps) {
  __shared__ float red[32];
  const std::size_t row = blockIdx.x;
  const T* xr = x + row * cols;
  float s = 0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float a = to_f(xr[c]);
    s += a * a;
  }
  const float rs = rsqrtf(block_sum(s, red) / cols + eps);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    y[row * cols + c] = from_f<T>(to_f(xr[c]) * rs * to_f(gamma[c]));
  }
  if (threadIdx.x == 0 && rstd) rstd[row] = rs;
}

template <typename T>
__global__ void softmax_kernel(const T* x, T* y, int cols, float scale) {
  __shared__ float red[32];
  const std::size_t row = blockIdx.x;
  const T* xr = x + row * cols;
  float mx = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) mx = fmaxf(mx, scale * to_f(xr[c]));
  mx = block_max(mx, red);
  float s = 0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += __expf(scale * to_f(xr[c]) - mx);
  const float inv = 1.0f / block_sum(s, red);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    y[row * cols + c] = from_f<T>(__expf(scale * to_f(xr[c]) - mx) * inv);
  }
}

template <typename T>
__global__ void cross_entropy_kernel(const T* logits, const std::int32_t* targets, float* loss,
                                     T* grad, int vocab) {
  __shared__ float red[32];
  const std::size_t row = blockIdx.x;
  const T* xr = logits + row * vocab;
  float mx = -INFINITY;
  for (int c = threadIdx.x; c < vocab; c += blockDim.x) mx = fmaxf(mx, to_f(xr[c]));
  mx = block_max(mx, red);
  float s = 0;
  for (int c = threadIdx.x; c < vocab; c += blockDim.x) s += __expf(to_f(xr[c]) - mx);
  const float lse = mx + logf(block_sum(s, red));
  const int target = targets[row];
  if (threadIdx.x == 0) loss[row] = lse - to_f(xr[target]);
  if (grad) {
    for (int c = threadIdx.x; c < vocab; c += blockDim.x) {
      grad[row * vocab + c] = from_f<T>(__expf(to_f(xr[c]) - lse) - (c == target ? 1.0f : 0.0f));
    }
  }
}

}  // namespace

void launch_layernorm(DType t, const void* x, const void* gamma, const void* beta, void* y,
                      float* mean, float* rstd, int rows, int cols, float eps, cudaStream_t s) {
  if (rows <= 0) return;
  dispatch_storage(t, "layernorm", [&](auto tag) {
    using T = decltype(tag);
    layernorm_kernel<T><<<rows, kThreads, 0, s>>>(
        static_cast<const T*>(x), static_cast<const T*>(gamma), static_cast<const T*>(beta),
        static_cast<T*>(y), mean, rstd, cols, eps);
  });
  check_launch("layernorm");
}

void launch_rmsnorm(DType t, const void* x, const void* gamma, void* y, float* rstd, int rows,
                    int cols, float eps, cudaStream_t s) {
  if (rows <= 0) return;
  dispatch_storage(t, "rmsnorm", [&](auto tag) {
    using T = decltype(tag);
    rmsnorm_kernel<T><<<rows, kThreads, 0, s>>>(static_cast<const T*>(x),
                                                static_cast<const T*>(gamma), static_cast<T*>(y),
                                                rstd, cols, eps);
  });
  check_launch("rmsnorm");
}

void launch_softmax(DType t, const void* x, void* y, int rows, int cols, float scale,
                    cudaStream_t s) {
  if (rows <= 0) return;
  dispatch_storage(t, "softmax", [&](auto tag) {
    using T = decltype(tag);
    softmax_kernel<T>
        <<<rows, kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), cols, scale);
  });
  check_launch("softmax");
}

void launch_cross_entropy(DType t, const void* logits, const std::int32_t* targets, float* loss,
                          void* grad, int rows, int vocab, cudaStream_t s) {
  if (rows <= 0) return;
  dispatch_storage(t, "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    cross_entropy_kernel<T><<<rows, kThreads, 0, s>>>(static_cast<const T*>(logits), targets, loss,
                                                      static_cast<T*>(grad), vocab);
  });
  check_launch("cross_entropy");
}

}  // namespace trainsim::kernels
