// CPU reference implementations of every kernel trainsim runs on the GPU (kernels/launchers.h),
// in plain C++ with float storage and double accumulation, compiled on every machine.
//
// They are the yardstick of the GPU tests (tests/kernels/test_kernels_gpu.cpp), so they are
// written for clarity, not speed, and are themselves tested against hand-derived values
// (tests/kernels/test_reference.cpp). Layouts are row-major; attention tensors are
// [batch·heads][sequence][head_dim]. No function allocates beyond its own temporaries; outputs
// are caller-sized (sizes in the comments).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/dtype.h"

namespace trainsim::kernels::ref {

/// The value `x` becomes when stored in `t` (round to nearest even; fp8 = E4M3, saturating).
float round_to(float x, DType t);
std::vector<float> round_to(const std::vector<float>& x, DType t);
/// The bytes of x stored in `t` (after round_to): IEEE fp32/fp16, bf16 = the top half of the fp32
/// bits, fp8 = E4M3 (bias 7, no infinities, S.1111.111 is NaN). What the GPU kernels read.
std::vector<unsigned char> encode(const std::vector<float>& x, DType t);
/// The values of bytes stored in `t`.
std::vector<float> decode(const std::vector<unsigned char>& bytes, DType t);

/// C[m×n] = X[m×k] · Wᵀ with W [n×k] (a linear layer: weight [out × in]); `batch` independent
/// products at strides m·k, n·k, m·n.
void gemm_nt(const float* x, const float* w, float* c, int m, int n, int k, int batch = 1);

/// LayerNorm over each row of x [rows×cols]: y = (x − mean)·rstd·gamma + beta, rstd =
/// 1/√(var + eps) with the biased variance. mean and rstd [rows] may be null.
void layernorm(const float* x, const float* gamma, const float* beta, float* y, float* mean,
               float* rstd, int rows, int cols, float eps);
/// RMSNorm (Zhang & Sennrich 2019): y = x · gamma / √(mean(x²) + eps). rstd [rows] may be null.
void rmsnorm(const float* x, const float* gamma, float* y, float* rstd, int rows, int cols,
             float eps);
/// Row-wise softmax of scale·x.
void softmax(const float* x, float* y, int rows, int cols, float scale);

/// GeLU, tanh approximation (Hendrycks & Gimpel 2016), as Megatron's fused bias-GeLU.
float gelu_tanh(float x);
/// y = gelu(x + bias) over [rows×cols], bias [cols].
void bias_gelu(const float* x, const float* bias, float* y, int rows, int cols);
/// SwiGLU (Shazeer 2020): input [rows × 2·cols] holds gate then up per row; y [rows×cols] =
/// silu(gate) · up, silu(a) = a / (1 + e^−a).
void swiglu(const float* gate_up, float* y, int rows, int cols);
/// Inverted dropout: y = keep ? x / (1 − p) : 0, mask[i] = keep (kernels/dropout_hash.h).
void dropout(const float* x, float* y, std::uint8_t* mask, std::size_t n, float p,
             std::uint64_t seed);
/// y = residual + dropout(x + bias): the residual branch after attention and MLP.
void bias_dropout_add(const float* x, const float* bias, const float* residual, float* y,
                      std::uint8_t* mask, int rows, int cols, float p, std::uint64_t seed);
/// y[t] = table[tokens[t]] ([n_tokens × hidden]).
void embedding(const std::int32_t* tokens, const float* table, float* y, int n_tokens, int hidden);
/// Per-row loss = logsumexp(row) − row[target]; grad [rows×vocab] (may be null) =
/// softmax(row) − onehot(target), the gradient of the loss.
void cross_entropy(const float* logits, const std::int32_t* targets, float* loss, float* grad,
                   int rows, int vocab);

// Backward of the memory-bound forwards above (`<kind>_bwd`): given the forward's inputs (or
// saved statistics) and dy, the gradient of Σ dy∘y. Column sums (dgamma, dbeta, dbias [cols])
// are written, not accumulated.
/// LayerNorm: x̂ = (x − mean)·rstd, dx = rstd·(γ∘dy − mean(γ∘dy) − x̂·mean(γ∘dy∘x̂)),
/// dgamma = Σ_rows dy∘x̂, dbeta = Σ_rows dy; mean, rstd [rows] as the forward returns them.
void layernorm_bwd(const float* x, const float* dy, const float* gamma, const float* mean,
                   const float* rstd, float* dx, float* dgamma, float* dbeta, int rows, int cols);
/// RMSNorm: dx = rstd·γ∘dy − x·rstd³·Σ(γ∘dy∘x)/cols, dgamma = Σ_rows dy∘x·rstd.
void rmsnorm_bwd(const float* x, const float* dy, const float* gamma, const float* rstd,
                 float* dx, float* dgamma, int rows, int cols);
/// Softmax of scale·x, from its output y: dx = scale·y∘(dy − rowsum(dy∘y)).
void softmax_bwd(const float* y, const float* dy, float* dx, int rows, int cols, float scale);
/// d gelu_tanh / dx.
float gelu_tanh_grad(float x);
/// dx = dy∘gelu'(x + bias), dbias = Σ_rows dx.
void bias_gelu_bwd(const float* x, const float* bias, const float* dy, float* dx, float* dbias,
                   int rows, int cols);
/// dgate_up [rows × 2·cols]: d gate = dy∘up∘silu'(gate), d up = dy∘silu(gate), silu'(a) =
/// σ(a)·(1 + a·(1 − σ(a))).
void swiglu_bwd(const float* gate_up, const float* dy, float* dgate_up, int rows, int cols);
/// dx = mask ? dy / (1 − p) : 0.
void dropout_bwd(const float* dy, const std::uint8_t* mask, float* dx, std::size_t n, float p);
/// dx = dropout_bwd(dy), dbias = Σ_rows dx (the residual's gradient is dy itself).
void bias_dropout_add_bwd(const float* dy, const std::uint8_t* mask, float* dx, float* dbias,
                          int rows, int cols, float p);
/// dtable [vocab × hidden] += dy's rows at the token ids (the caller zeroes it first).
void embedding_bwd(const std::int32_t* tokens, const float* dy, float* dtable, int n_tokens,
                   int hidden);

/// Attention O = softmax(scale·Q·Kᵀ + mask)·V per batch-head; q, o [bh×sq×d], k, v [bh×sk×d],
/// lse [bh×sq] the log-sum-exp of each row (the statistic FlashAttention keeps for backward).
/// causal: query i sees keys j ≤ i + (sk − sq) (bottom-right aligned); window > 0 additionally
/// limits it to j > i + (sk − sq) − window (sliding window). A row with no visible key gives 0.
/// Grouped-query attention (GQA/MQA): q_per_kv query heads share one key/value head, so k, v
/// (and dk, dv) hold bh / q_per_kv batch-heads and query batch-head b reads k/v batch-head
/// b / q_per_kv (consecutive query heads form a group); bh must be a multiple of q_per_kv.
/// `impl` picks the GPU implementation (kernels/attention.cu); the CPU reference ignores it.
enum class AttentionImpl {
  kAuto,   // cuDNN's fused SDPA when it is available and supports the shape, else kOwn
  kCudnn,  // cuDNN's fused SDPA (kernels/cudnn_sdpa.h) or an error
  kOwn,    // trainsim's own FlashAttention-2-style kernel
};
struct AttentionShape {
  int bh = 1, sq = 1, sk = 1, d = 1;
  bool causal = false;
  int window = 0;
  float scale = 1;
  int q_per_kv = 1;
  AttentionImpl impl = AttentionImpl::kAuto;
};
void attention_forward(const AttentionShape& s, const float* q, const float* k, const float* v,
                       float* o, float* lse);
/// Gradients of the above given dO; uses the forward's o and lse like the FlashAttention-2
/// backward (Dao 2023, Alg. 2): dS = P ∘ (dP − rowsum(dO ∘ O)).
void attention_backward(const AttentionShape& s, const float* q, const float* k, const float* v,
                        const float* o, const float* d_o, const float* lse, float* dq, float* dk,
                        float* dv);

/// Optimizer hyper-parameters; `step` is the 1-based step being taken (bias correction).
struct AdamParams {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0;
  int step = 1;
};
/// One Adam step (Kingma & Ba 2015, Alg. 1) with decoupled weight decay (AdamW, Loshchilov &
/// Hutter 2019): m, v updated in place, w ← w − lr·(m̂/(√v̂ + eps) + wd·w).
void adam_step(float* w, const float* g, float* m, float* v, std::size_t n, const AdamParams& p);
/// One LAMB step (You et al. 2020, Alg. 2) treating the n values as one tensor: r = m̂/(√v̂+eps)
/// + wd·w, w ← w − lr·(‖w‖/‖r‖)·r (trust ratio 1 when either norm is 0). Returns the ratio.
float lamb_step(float* w, const float* g, float* m, float* v, std::size_t n, const AdamParams& p);

}  // namespace trainsim::kernels::ref
