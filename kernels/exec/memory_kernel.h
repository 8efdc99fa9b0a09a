// A kernel that moves `bytes` of HBM traffic (half read, half written) in `buffer`, which must
// hold at least `bytes`. Included only where the CUDA toolkit is.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace trainsim::kexec {

void launch_memory_traffic(void* buffer, std::size_t bytes, cudaStream_t s);

}  // namespace trainsim::kexec
