// The dropout mask as a pure function of (seed, element index), shared by the CUDA kernels and the
// CPU reference so both draw the very same mask: a SplitMix64 finaliser (Steele et al., "Fast
// splittable pseudorandom number generators", OOPSLA 2014) of seed + index·golden ratio, whose top
// 24 bits give a uniform number in [0, 1). Counter-based, so no generator state crosses threads.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define TRAINSIM_HD __host__ __device__ __forceinline__
#else
#define TRAINSIM_HD inline
#endif

namespace trainsim::kernels {

/// The golden-ratio increment: element index i starts from z = seed + (i + 1)·kDropoutStep, so
/// consecutive elements' z differ by kDropoutStep (kernels step z by an addition).
inline constexpr std::uint64_t kDropoutStep = 0x9E3779B97F4A7C15ull;

/// The finaliser of a starting value z (dropout_uniform of z = seed + (index + 1)·kDropoutStep).
TRAINSIM_HD float dropout_uniform_z(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
}

TRAINSIM_HD float dropout_uniform(std::uint64_t seed, std::uint64_t index) {
  return dropout_uniform_z(seed + (index + 1) * kDropoutStep);
}

/// True when element `index` is kept at drop probability `p`.
TRAINSIM_HD bool dropout_keep(std::uint64_t seed, std::uint64_t index, float p) {
  return dropout_uniform(seed, index) >= p;
}

}  // namespace trainsim::kernels
