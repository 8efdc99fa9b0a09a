// GEMMs through cuBLASLt: the linear layers (qkv, proj, fc1/fc2, logits, router) and the batched
// attention GEMMs of the unfused path. One GemmRunner per device and thread: it owns a cuBLASLt
// handle, a workspace and a cache of plans (descriptors + the heuristic's first algorithm) per
// shape, so timing loops pay no planning cost. Included only where the CUDA toolkit is.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <memory>
#include <tuple>

#include "kernels/dtype.h"

namespace trainsim::kernels {

class GemmRunner {
 public:
  /// On the current device; throws trainsim::Error(kRuntime) when cuBLASLt cannot start.
  explicit GemmRunner(std::size_t workspace_bytes = std::size_t{32} << 20);
  ~GemmRunner();
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;

  /// C[m×n] = X[m×k]·Wᵀ, W [n×k] row-major (a linear layer's [out × in] weight), `batch`
  /// products at strides m·k, n·k, m·n. X and W in `t`; C in output_type(t). fp8 (E4M3) needs
  /// compute capability 8.9 or later and k, n multiples of 16.
  void run(DType t, int m, int n, int k, int batch, const void* x, const void* w, void* c,
           cudaStream_t s);
  /// fp8 GEMMs write bf16; the others write their input type.
  static DType output_type(DType t) { return t == DType::kFp8 ? DType::kBf16 : t; }
  /// Whether the current device runs `t` (fp8: sm_89+).
  static bool supported(DType t);

 private:
  struct Plan;
  using Key = std::tuple<int, int, int, int, int>;  // dtype, m, n, k, batch
  Plan& plan(DType t, int m, int n, int k, int batch);
  void* handle_ = nullptr;  // cublasLtHandle_t
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace trainsim::kernels
