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

// Backward kernels (row-wise ones in kernels/norms.cu, the others in kernels/elementwise.cu),
// each the gradient of the forward of the same name (reference.h, `<kind>_bwd`). Column sums
// (dgamma, dbeta, dbias) are fp32 [cols], zeroed by the launcher and accumulated with atomics
// (their order of addition varies from run to run).
void launch_layernorm_bwd(DType t, const void* x, const void* dy, const void* gamma,
                          const float* mean, const float* rstd, void* dx, float* dgamma,
                          float* dbeta, int rows, int cols, cudaStream_t s);
void launch_rmsnorm_bwd(DType t, const void* x, const void* dy, const void* gamma,
                        const float* rstd, void* dx, float* dgamma, int rows, int cols,
                        cudaStream_t s);
/// dx = scale·y∘(dy − rowsum(dy∘y)) from the forward's output y.
void launch_softmax_bwd(DType t, const void* y, const void* dy, void* dx, int rows, int cols,
                        float scale, cudaStream_t s);
void launch_bias_gelu_bwd(DType t, const void* x, const void* bias, const void* dy, void* dx,
                          float* dbias, int rows, int cols, cudaStream_t s);
/// dgate_up [rows × 2·cols] (gate then up per row, as the forward's input).
void launch_swiglu_bwd(DType t, const void* gate_up, const void* dy, void* dgate_up, int rows,
                       int cols, cudaStream_t s);
void launch_dropout_bwd(DType t, const void* dy, const std::uint8_t* mask, void* dx,
                        std::size_t n, float p, cudaStream_t s);
/// dx = dropout_bwd(dy) and dbias its column sums; the residual's gradient is dy itself.
void launch_bias_dropout_add_bwd(DType t, const void* dy, const std::uint8_t* mask, void* dx,
                                 float* dbias, int rows, int cols, float p, cudaStream_t s);
/// Adds dy's rows into dtable (fp32 [vocab × hidden], zeroed by the caller) at the token ids.
void launch_embedding_bwd(DType t, const std::int32_t* tokens, const void* dy, float* dtable,
                          int n_tokens, int hidden, cudaStream_t s);

/// A plain device-to-device copy of `bytes` (16-byte accesses when both pointers allow): the
/// bandwidth roofline the memory-bound kernels are measured against (bench op "copy").
void launch_copy(const void* src, void* dst, std::size_t bytes, cudaStream_t s);

// Synthetic inputs for timing (kernels/elementwise.cu): uniform values in [lo, hi) from the
// dropout hash of (seed, index), and token ids in [0, bound). Benchmarks never run on zeros.
void launch_fill_uniform(DType t, void* p, std::size_t n, float lo, float hi, std::uint64_t seed,
                         cudaStream_t s);
void launch_fill_tokens(std::int32_t* p, std::size_t n, int bound, std::uint64_t seed,
                        cudaStream_t s);

// Fused attention (kernels/attention.cu): q, o [bh×sq×d], k, v [(bh/q_per_kv)×sk×d] in fp16 or
// bf16; lse [bh×sq] fp32. shape.impl picks the implementation: kAuto = cuDNN's fused SDPA
// (kernels/cudnn_sdpa.h: head dims ≤ 128, multiple of 8, GQA) when libcudnn.so.9 loads and cuDNN
// accepts the shape, else the own FlashAttention-2-style kernel (head dims 64, 96, 128, causal
// needs sk ≥ sq, q_per_kv 1); kCudnn / kOwn force one (unsupported → false / an error).
bool attention_supported(const ref::AttentionShape& shape, DType t);
/// The implementation the launchers below run for this shape: "cudnn-sdpa",
/// "own-flash2-cuda-cores", or "none" when attention_supported is false.
const char* attention_impl_name(const ref::AttentionShape& shape, DType t);
void launch_attention_forward(DType t, const ref::AttentionShape& shape, const void* q,
                              const void* k, const void* v, void* o, float* lse, cudaStream_t s);
/// Scratch the own backward needs: fp32 dQ accumulator and the row statistic D = rowsum(dO∘O).
/// The cuDNN path ignores `workspace` and uses scratch it caches per shape.
std::size_t attention_backward_workspace_bytes(const ref::AttentionShape& shape);
void launch_attention_backward(DType t, const ref::AttentionShape& shape, const void* q,
                               const void* k, const void* v, const void* o, const void* d_o,
                               const float* lse, void* dq, void* dk, void* dv, void* workspace,
                               cudaStream_t s);

}  // namespace trainsim::kernels
