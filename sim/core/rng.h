// Seeded random-number streams.
//
// Every random choice in a simulation comes from an `Rng` handed out by its `Simulation`
// (DESIGN.md §3, determinism). A stream is named: `Simulation::rng_stream("ecmp")` always yields
// the same sequence for the same simulation seed, whatever other streams were created before it,
// so adding a new consumer of randomness never perturbs the draws of an existing one.
//
// The generator is xoshiro256** and seeding uses splitmix64 (Blackman & Vigna, "Scrambled linear
// pseudorandom number generators", ACM TOMS 47(4), 2021). The distributions are implemented here,
// not taken from <random>, because the standard library's distributions are
// implementation-defined and would make traces differ between standard libraries.
// An Rng is a small value type; copying it forks the stream. Not thread-safe.
#pragma once

#include <cstdint>
#include <iterator>
#include <string_view>
#include <utility>

namespace trainsim {

/// One step of splitmix64: a bijective 64-bit mixer, used to derive seeds.
std::uint64_t splitmix64(std::uint64_t& state);

/// Seed of the stream `name` of a simulation seeded with `seed`.
std::uint64_t derive_stream_seed(std::uint64_t seed, std::string_view name);

class Rng {
 public:
  explicit Rng(std::uint64_t seed);

  /// 64 uniformly distributed bits.
  std::uint64_t next_u64();
  /// Uniform in [0, 1), 53 bits of resolution.
  double uniform01();
  /// Uniform integer in [0, n); n must be > 0. Unbiased (Lemire, "Fast random integer generation
  /// in an interval", ACM TOMACS 29(1), 2019).
  std::uint64_t uniform_below(std::uint64_t n);
  /// Uniform integer in [lo, hi], lo <= hi.
  std::int64_t uniform_int(std::int64_t lo, std::int64_t hi);
  /// Exponentially distributed with the given mean.
  double exponential(double mean);

  /// Fisher–Yates shuffle driven by this stream (std::shuffle's draws are unspecified).
  template <class RandomIt>
  void shuffle(RandomIt first, RandomIt last) {
    const auto n = std::distance(first, last);
    for (auto i = n - 1; i > 0; --i) {
      const auto j = static_cast<decltype(i)>(uniform_below(static_cast<std::uint64_t>(i) + 1));
      using std::swap;
      swap(first[i], first[j]);
    }
  }

 private:
  std::uint64_t s_[4];
};

}  // namespace trainsim
