// Typed units shared by every layer of trainsim.
//
// Time inside the simulator is an integer count of picoseconds (TimePs) so that event ordering is
// exact and reproducible; analytic formulas work in double seconds and convert at the boundary.
// Quantities that cross module boundaries carry their unit in the name (`_bytes`, `_Bps`, `_flops`,
// `_s`, `_ps`); this header is the one place that defines the conversions.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace trainsim {

/// Simulated time in integer picoseconds. The range (±106 days) covers any training run; the
/// largest value, `TimePs::never()`, stands for "no such event".
struct TimePs {
  std::int64_t ps = 0;

  static constexpr TimePs from_seconds(double s) {
    return TimePs{static_cast<std::int64_t>(s * 1e12 + (s >= 0 ? 0.5 : -0.5))};
  }
  static constexpr TimePs from_ns(std::int64_t ns) { return TimePs{ns * 1000}; }
  static constexpr TimePs from_us(std::int64_t us) { return TimePs{us * 1000 * 1000}; }
  static constexpr TimePs from_ms(std::int64_t ms) { return TimePs{ms * 1000 * 1000 * 1000}; }
  static constexpr TimePs never() { return TimePs{std::numeric_limits<std::int64_t>::max()}; }
  constexpr double seconds() const { return static_cast<double>(ps) * 1e-12; }
  constexpr auto operator<=>(const TimePs&) const = default;
  constexpr TimePs operator+(TimePs o) const { return TimePs{ps + o.ps}; }
  constexpr TimePs operator-(TimePs o) const { return TimePs{ps - o.ps}; }
  constexpr TimePs operator*(std::int64_t k) const { return TimePs{ps * k}; }
  constexpr TimePs& operator+=(TimePs o) {
    ps += o.ps;
    return *this;
  }
  constexpr TimePs& operator-=(TimePs o) {
    ps -= o.ps;
    return *this;
  }
};

inline constexpr double kKiB = 1024.0;
inline constexpr double kMiB = 1024.0 * 1024.0;
inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
inline constexpr double kGB = 1e9;    // decimal gigabyte, as in datasheets
inline constexpr double kTera = 1e12;

/// Bytes per element of a training datatype.
enum class Precision { kFp32, kFp16, kBf16, kFp8 };

inline constexpr double bytes_per_element(Precision p) {
  switch (p) {
    case Precision::kFp32: return 4.0;
    case Precision::kFp16:
    case Precision::kBf16: return 2.0;
    case Precision::kFp8: return 1.0;
  }
  return 2.0;
}

inline constexpr const char* to_string(Precision p) {
  switch (p) {
    case Precision::kFp32: return "fp32";
    case Precision::kFp16: return "fp16";
    case Precision::kBf16: return "bf16";
    case Precision::kFp8: return "fp8";
  }
  return "?";
}

/// How Transformer Engine scales a tensor it casts to fp8 for a GEMM (its `recipe` module):
/// `kDelayed` (DelayedScaling, TE's default since 2022) takes the scale from an amax history, so
/// the norm or activation kernel that writes a GEMM input can write the fp8 copy itself;
/// `kCurrent` (Float8CurrentScaling, TE 2.2, 2025; NeMo's "FP8-CS") needs this tensor's own amax
/// first, so every cast reads its input once more (sim/exec/compute_model.h, fp8_cast_time).
enum class Fp8Recipe { kDelayed, kCurrent };

inline constexpr const char* to_string(Fp8Recipe r) {
  return r == Fp8Recipe::kCurrent ? "current" : "delayed";
}

/// Integer ceil(a / b) for positive operands.
inline constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

}  // namespace trainsim
