// Element types the kernels run in, as plain C++ (no CUDA headers), so that the CPU side (the
// benchmark plan, the tests, the profile writer) can name them.
#pragma once

#include <cstddef>
#include <string>

namespace trainsim::kernels {

enum class DType { kF32, kF16, kBf16, kFp8 };  // kFp8 = E4M3 (GEMM inputs only)

/// "fp32", "fp16", "bf16", "fp8": the names of the profile's `kernels_measured[].dtype`.
const char* dtype_name(DType t);
/// Bytes of one element.
std::size_t dtype_bytes(DType t);
/// Parses a dtype_name; throws trainsim::Error(kInput) naming `field` otherwise.
DType parse_dtype(const std::string& name, const std::string& field);

}  // namespace trainsim::kernels
