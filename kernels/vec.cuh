// Vectorised memory access for the memory-bound kernels (elementwise.cu, norms.cu): 16-byte
// loads and stores (8 × 16-bit or 4 × fp32 values), the launch-shape helpers that size a grid to
// the GPU, and the warp / block reductions of the row kernels.
//
// A kernel runs its vector path (W = kVec<T>) only when every pointer it touches is 16-byte
// aligned and the row length is a multiple of W; otherwise the same template with W = 1 (plain
// scalar accesses) runs, so odd shapes and offsets stay correct, only slower.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda_check.h"
#include "kernels/cuda_types.cuh"

namespace trainsim::kernels {

/// Elements of T in one 16-byte access.
template <typename T>
inline constexpr int kVec = static_cast<int>(16 / sizeof(T));

/// W consecutive values of T, aligned to their size so that one load or store moves them all.
template <typename T, int W>
struct alignas(sizeof(T) * W) Vec {
  T v[W];
};

template <typename T, int W>
__device__ __forceinline__ Vec<T, W> load_vec(const T* p) {
  return *reinterpret_cast<const Vec<T, W>*>(p);
}

template <typename T, int W>
__device__ __forceinline__ void load_f(const T* p, float (&f)[W]) {
  const Vec<T, W> a = *reinterpret_cast<const Vec<T, W>*>(p);
#pragma unroll
  for (int j = 0; j < W; ++j) f[j] = to_f(a.v[j]);
}

template <typename T, int W>
__device__ __forceinline__ void store_f(T* p, const float (&f)[W]) {
  Vec<T, W> a;
#pragma unroll
  for (int j = 0; j < W; ++j) a.v[j] = from_f<T>(f[j]);
  *reinterpret_cast<Vec<T, W>*>(p) = a;
}

inline bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

/// Streaming multiprocessors of the current device (queried once per device).
inline int sm_count() {
  static int cache[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
    cudaGetLastError();
    return 132;
  }
  if (cache[dev] == 0) {
    int n = 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0) {
      cudaGetLastError();
      n = 132;
    }
    cache[dev] = n;
  }
  return cache[dev];
}

/// Blocks of `threads` for a grid-stride loop over `items`: enough to cover them, at most
/// `per_sm` blocks per SM (the loop takes the rest), at least 1.
inline unsigned grid_for(std::size_t items, int threads, int per_sm = 16) {
  const std::size_t need = (items + threads - 1) / threads;
  const std::size_t cap = static_cast<std::size_t>(sm_count()) * per_sm;
  const std::size_t b = need < cap ? need : cap;
  return static_cast<unsigned>(b > 0 ? b : 1);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/// Block-wide sums of two floats per thread at once (one exchange through shared memory):
/// shared64 holds 64 floats.
__device__ __forceinline__ float2 block_sum2(float a, float b, float* shared64) {
  a = warp_sum(a);
  b = warp_sum(b);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // shared64 may still be read by a previous reduction
  if (lane == 0) {
    shared64[warp] = a;
    shared64[32 + warp] = b;
  }
  __syncthreads();
  const int warps = blockDim.x >> 5;
  a = lane < warps ? shared64[lane] : 0.0f;
  b = lane < warps ? shared64[32 + lane] : 0.0f;
  return make_float2(warp_sum(a), warp_sum(b));
}

/// The threads that share one row: a warp (WARP, blockDim.x / 32 rows per block at a time) or
/// the whole block (one row at a time). Rows are visited grid-stride; `row` is uniform over the
/// group, so a group leaves its loop together and the block reductions stay convergent.
template <bool WARP>
struct RowGroup {
  int lane, size, row, step;
  __device__ __forceinline__ RowGroup() {
    if (WARP) {
      lane = threadIdx.x & 31;
      size = 32;
      row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
      step = gridDim.x * (blockDim.x >> 5);
    } else {
      lane = threadIdx.x;
      size = blockDim.x;
      row = blockIdx.x;
      step = gridDim.x;
    }
  }
  __device__ __forceinline__ float sum(float v, float* red) const {
    return WARP ? warp_sum(v) : block_sum(v, red);
  }
  __device__ __forceinline__ float max(float v, float* red) const {
    return WARP ? warp_max(v) : block_max(v, red);
  }
  /// Two sums at once; red holds 64 floats.
  __device__ __forceinline__ float2 sum2(float a, float b, float* red) const {
    return WARP ? make_float2(warp_sum(a), warp_sum(b)) : block_sum2(a, b, red);
  }
};

}  // namespace trainsim::kernels
