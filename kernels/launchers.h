// Launchers of trainsim's own CUDA kernels, one per compute op kind of sim/model (the GEMMs go
// through cuBLASLt, kernels/gemm.h). Every launcher takes device pointers and a stream, checks the
// launch and throws trainsim::Error(kRuntime) on failure; it does not synchronise. Tensors are
// row-major in the storage type `t` (fp32, fp16 or bf16) with float arithmetic inside; the math of
// each is the CPU reference of the same name in kernels/reference.h, which the GPU tests compare
// against. Included only where the CUDA toolkit is (CUDA types in the signatures).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/dtype.h"
#include "kernels/reference.h"

namespace trainsim::kernels {

// Row-wise kernels (one thread block per row): kernels/norms.cu.
void launch_layernorm(DType t, const void* x, const void* gamma, const void* beta, void* y,
                      float* mean, float* rstd, int rows, int cols, float eps, cudaStream_t s);
void launch_rmsnorm(DType t, const void* x, const void* gamma, void* y, float* rstd, int rows,
                    int cols, float eps, cudaStream_t s);
void launch_softmax(DType t, const void* x, void* y, int rows, int cols, float scale,
                    cudaStream_t s);
/// loss [rows] in fp32; grad (may be null) in `t`.
void launch_cross_entropy(DType t, const void* logits, const std::int32_t* targets, float* loss,
                          void* grad, int rows, int vocab, cudaStream_t s);

// Element-wise kernels: kernels/elementwise.cu.
void launch_bias_gelu(DType t, const void* x, const void* bias, void* y, int rows, int cols,
                      cudaStream_t s);
void launch_swiglu(DType t, const void* gate_up, void* y, int rows, int cols, cudaStream_t s);
void launch_dropout(DType t, const void* x, void* y, std::uint8_t* mask, std::size_t n, float p,
                    std::uint64_t seed, cudaStream_t s);
void launch_bias_dropout_add(DType t, const void* x, const void* bias, const void* residual,
                             void* y, std::uint8_t* mask, int rows, int cols, float p,
                             std::uint64_t seed, cudaStream_t s);
void launch_embedding(DType t, const std::int32_t* tokens, const void* table, void* y, int n_tokens,
                      int hidden, cudaStream_t s);
/// fp32 master weights, gradients and moments; `w_bf16` (may be null) receives the bf16 copy of
/// the updated weights that the next forward reads.
void launch_adam(float* w, const float* g, float* m, float* v, void* w_bf16, std::size_t n,
                 const ref::AdamParams& p, cudaStream_t s);
/// Two kernels: moments and the norms ‖w‖², ‖r‖² (accumulated in `norms`, two doubles, zeroed
/// here), then the update with the trust ratio read on the device.
void launch_lamb(float* w, const float* g, float* m, float* v, void* w_bf16, double* norms,
                 std::size_t n, const ref::AdamParams& p, cudaStream_t s);

// Synthetic inputs for timing (kernels/elementwise.cu): uniform values in [lo, hi) from the
// dropout hash of (seed, index), and token ids in [0, bound). Benchmarks never run on zeros.
void launch_fill_uniform(DType t, void* p, std::size_t n, float lo, float hi, std::uint64_t seed,
                         cudaStream_t s);
void launch_fill_tokens(std::int32_t* p, std::size_t n, int bound, std::uint64_t seed,
                        cudaStream_t s);

// Fused attention (FlashAttention-2 style, kernels/attention.cu). Head dims 64, 96, 128; q, o
// [bh×sq×d], k, v [bh×sk×d] in fp16 or bf16; lse [bh×sq] fp32. causal needs sk ≥ sq.
bool attention_supported(const ref::AttentionShape& shape, DType t);
void launch_attention_forward(DType t, const ref::AttentionShape& shape, const void* q,
                              const void* k, const void* v, void* o, float* lse, cudaStream_t s);
/// Scratch the backward needs: fp32 dQ accumulator and the row statistic D = rowsum(dO∘O).
std::size_t attention_backward_workspace_bytes(const ref::AttentionShape& shape);
void launch_attention_backward(DType t, const ref::AttentionShape& shape, const void* q,
                               const void* k, const void* v, const void* o, const void* d_o,
                               const float* lse, void* dq, void* dk, void* dv, void* workspace,
                               cudaStream_t s);

}  // namespace trainsim::kernels
