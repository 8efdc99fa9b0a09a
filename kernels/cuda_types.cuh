// Storage-type helpers shared by the .cu files: float conversions and the DType dispatch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "kernels/dtype.h"
#include "sim/core/error.h"

namespace trainsim::kernels {

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T from_f(float x);
template <>
__device__ __forceinline__ float from_f<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half from_f<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

/// Calls f(T{}) with T the CUDA type of `t` (fp32, fp16, bf16); fp8 is GEMM-only and throws.
template <typename F>
void dispatch_storage(DType t, const char* what, F&& f) {
  switch (t) {
    case DType::kF32:
      f(float{});
      return;
    case DType::kF16:
      f(__half{});
      return;
    case DType::kBf16:
      f(__nv_bfloat16{});
      return;
    case DType::kFp8:
      break;
  }
  throw Error(ErrorKind::kRuntime, std::string(what) + " has no " + dtype_name(t) + " kernel", {},
              "fp8 is for GEMM inputs; run it in bf16 or fp16");
}

/// Block-wide sum of one float per thread (blockDim.x a multiple of 32, at most 1024).
__device__ __forceinline__ float block_sum(float v, float* shared32) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // shared32 may still be read by a previous reduction
  if (lane == 0) shared32[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  v = lane < warps ? shared32[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/// Block-wide max, as block_sum.
__device__ __forceinline__ float block_max(float v, float* shared32) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) shared32[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  v = lane < warps ? shared32[lane] : -INFINITY;
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

}  // namespace trainsim::kernels
