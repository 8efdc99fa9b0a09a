// CUDA error handling for the GPU side: every runtime, cuBLASLt and NCCL status that is not
// success becomes trainsim::Error(kRuntime) naming the call, so the CLI exits 4 with the reason.
// Included only by files compiled with the CUDA toolkit.
#pragma once

#include <cuda_runtime.h>

namespace trainsim::kernels {

[[noreturn]] void throw_cuda(cudaError_t err, const char* what);

inline void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw_cuda(err, what);
}

/// Checks the launch just made (configuration errors surface here, faults at the next sync).
inline void check_launch(const char* kernel) { check_cuda(cudaGetLastError(), kernel); }

}  // namespace trainsim::kernels
