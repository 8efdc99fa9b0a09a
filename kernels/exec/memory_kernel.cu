// A memory-bound kernel of a given byte count: reads the first half of a buffer and writes the
// second half (16-byte vectors, grid-stride), so an op priced by its HBM traffic moves exactly
// that many bytes.
#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/cuda_check.h"
#include "kernels/exec/memory_kernel.h"

namespace trainsim::kexec {
namespace {

__global__ void copy_half(const uint4* __restrict__ in, uint4* __restrict__ out, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    out[i] = in[i];
  }
}

}  // namespace

void launch_memory_traffic(void* buffer, std::size_t bytes, cudaStream_t s) {
  const std::size_t n = bytes / 2 / sizeof(uint4);  // vectors read (and written)
  if (n == 0) return;
  const auto* in = static_cast<const uint4*>(buffer);
  auto* out = static_cast<uint4*>(buffer) + n;
  const int threads = 256;
  const std::size_t want = (n + threads - 1) / threads;
  const unsigned blocks = static_cast<unsigned>(want < 65535 * 8 ? want : 65535 * 8);
  copy_half<<<blocks, threads, 0, s>>>(in, out, n);
  kernels::check_launch("memory_traffic kernel");
}

}  // namespace trainsim::kexec
