// Each GPU kernel run once from host data on device 0: upload (rounded to the storage type),
// launch, synchronise, download as float. This is the plain C++ face of kernels/launchers.h and
// kernels/gemm.h for the GPU tests (tests/kernels/test_kernels_gpu.cpp), which compare every
// result with kernels/reference.h; it compiles without CUDA, where every call throws
// trainsim::Error(kRuntime) "this build has no CUDA support".
//
// Not for timing (allocates per call) and not thread-safe (uses the default stream of the
// calling thread's current device).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/reference.h"

namespace trainsim::kernels::dev {

/// True when a CUDA device can run kernels; otherwise `why` (if given) says why not.
bool device_available(std::string* why = nullptr);

/// Whether device 0 runs `t` GEMMs (fp8: compute capability 8.9 or later).
bool gemm_supported(DType t);
/// C = X·Wᵀ through cuBLASLt (kernels/gemm.h); fp8 inputs give a bf16 result.
std::vector<float> gemm_nt(const std::vector<float>& x, const std::vector<float>& w, int m, int n,
                           int k, int batch, DType t);
std::vector<float> layernorm(const std::vector<float>& x, const std::vector<float>& gamma,
                             const std::vector<float>& beta, int rows, int cols, float eps,
                             DType t);
std::vector<float> rmsnorm(const std::vector<float>& x, const std::vector<float>& gamma, int rows,
                           int cols, float eps, DType t);
std::vector<float> softmax(const std::vector<float>& x, int rows, int cols, float scale, DType t);
std::vector<float> bias_gelu(const std::vector<float>& x, const std::vector<float>& bias, int rows,
                             int cols, DType t);
std::vector<float> swiglu(const std::vector<float>& gate_up, int rows, int cols, DType t);

struct Masked {
  std::vector<float> y;
  std::vector<std::uint8_t> mask;
};
Masked dropout(const std::vector<float>& x, float p, std::uint64_t seed, DType t);
Masked bias_dropout_add(const std::vector<float>& x, const std::vector<float>& bias,
                        const std::vector<float>& residual, int rows, int cols, float p,
                        std::uint64_t seed, DType t);
std::vector<float> embedding(const std::vector<std::int32_t>& tokens,
                             const std::vector<float>& table, int hidden, DType t);

struct CrossEntropy {
  std::vector<float> loss, grad;
};
CrossEntropy cross_entropy(const std::vector<float>& logits,
                           const std::vector<std::int32_t>& targets, int rows, int vocab, DType t);

struct Attention {
  std::vector<float> o, lse;
};
Attention attention_forward(const ref::AttentionShape& s, const std::vector<float>& q,
                            const std::vector<float>& k, const std::vector<float>& v, DType t);
struct AttentionGrads {
  std::vector<float> dq, dk, dv;
};
AttentionGrads attention_backward(const ref::AttentionShape& s, const std::vector<float>& q,
                                  const std::vector<float>& k, const std::vector<float>& v,
                                  const std::vector<float>& o, const std::vector<float>& d_o,
                                  const std::vector<float>& lse, DType t);

/// fp32 optimizer state after one step; `w_bf16` is the bf16 copy the kernel writes.
struct OptimizerState {
  std::vector<float> w, m, v, w_bf16;
};
OptimizerState adam_step(const OptimizerState& in, const std::vector<float>& g,
                         const ref::AdamParams& p);
OptimizerState lamb_step(const OptimizerState& in, const std::vector<float>& g,
                         const ref::AdamParams& p);

// Backward kernels (launchers.h `launch_<kind>_bwd`); statistics (mean, rstd) and column sums
// (dgamma, dbeta, dbias) in fp32, the rest in `t`.
struct NormGrads {
  std::vector<float> dx, dgamma, dbeta;  // dbeta empty for RMSNorm
};
NormGrads layernorm_bwd(const std::vector<float>& x, const std::vector<float>& dy,
                        const std::vector<float>& gamma, const std::vector<float>& mean,
                        const std::vector<float>& rstd, int rows, int cols, DType t);
NormGrads rmsnorm_bwd(const std::vector<float>& x, const std::vector<float>& dy,
                      const std::vector<float>& gamma, const std::vector<float>& rstd, int rows,
                      int cols, DType t);
std::vector<float> softmax_bwd(const std::vector<float>& y, const std::vector<float>& dy, int rows,
                               int cols, float scale, DType t);
struct BiasGrads {
  std::vector<float> dx, dbias;
};
BiasGrads bias_gelu_bwd(const std::vector<float>& x, const std::vector<float>& bias,
                        const std::vector<float>& dy, int rows, int cols, DType t);
std::vector<float> swiglu_bwd(const std::vector<float>& gate_up, const std::vector<float>& dy,
                              int rows, int cols, DType t);
std::vector<float> dropout_bwd(const std::vector<float>& dy, const std::vector<std::uint8_t>& mask,
                               float p, DType t);
BiasGrads bias_dropout_add_bwd(const std::vector<float>& dy, const std::vector<std::uint8_t>& mask,
                               int rows, int cols, float p, DType t);
/// The fp32 table gradient [vocab × hidden] (zeroed, then the kernel adds dy's rows).
std::vector<float> embedding_bwd(const std::vector<std::int32_t>& tokens,
                                 const std::vector<float>& dy, int vocab, int hidden, DType t);
/// launch_copy of `src` placed `src_offset` bytes into one buffer, to `dst_offset` bytes into
/// another (offsets that break 16-byte alignment take the byte path); returns the copied bytes.
std::vector<unsigned char> copy(const std::vector<unsigned char>& src, int src_offset,
                                int dst_offset);

}  // namespace trainsim::kernels::dev
