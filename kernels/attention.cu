// Fused attention in the FlashAttention-2 style (Dao 2023): the s×s score matrix never reaches
// HBM. Forward: a block owns 64 queries, one thread per query row; K and V stream through shared
// memory in tiles of 64 keys and each thread keeps a running max, sum and output row (online
// softmax, Milakov & Gimelshein 2018), writing O and the row log-sum-exp. Backward (FA2 Alg. 2):
// D = rowsum(dO∘O) first; then a block owns 64 keys, one thread per key row holding dK, dV, and
// walks the query tiles that can see them, recomputing P = exp(S − lse); dQ is reduced over the
// block in shared memory and added to an fp32 accumulator with atomics, then cast.
//
// It is written for correctness and plain CUDA cores (no tensor-core MMA, no warp specialisation),
// so it is slower than FlashAttention-2/3; docs/kernels.md says what that means for calibration.
// Head dims 64, 96 and 128 (template), fp16 and bf16 storage, float math.
//
// The public launchers at the end dispatch on AttentionShape::impl: kAuto runs cuDNN's fused
// SDPA (kernels/cudnn_sdpa.h, built when cudnn.h is found, libcudnn loaded at run time) when it is
// available and accepts the shape, else this kernel; kCudnn / kOwn force one.
#include <cmath>
#include <string>
#include <type_traits>

#include "kernels/cuda_check.h"
#include "kernels/cuda_types.cuh"
#include "kernels/launchers.h"
#if TRAINSIM_HAVE_CUDNN
#include "kernels/cudnn_sdpa.h"
#endif

namespace trainsim::kernels {
namespace {

constexpr int kFwdRows = 64;  // queries per forward block (= threads)
constexpr int kFwdKeys = 64;  // keys per shared-memory tile
constexpr int kBwdKeys = 64;  // keys per backward block (= threads)
constexpr int kBwdRows = 32;  // queries per backward tile

__device__ __forceinline__ bool visible(int i, int j, int off, int causal, int window) {
  if (!causal) return true;
  const int last = i + off;
  return j <= last && (window <= 0 || j > last - window);
}

template <typename T, int D>
__global__ void __launch_bounds__(kFwdRows)
    flash_fwd_kernel(const T* q, const T* k, const T* v, T* o, float* lse, int sq, int sk,
                     float scale, int causal, int window) {
  __shared__ T ks[kFwdKeys * D];
  __shared__ T vs[kFwdKeys * D];
  const int bh = blockIdx.y;
  const int q0 = blockIdx.x * kFwdRows;
  const int i = q0 + threadIdx.x;
  const bool active = i < sq;
  const int off = sk - sq;
  const T* kb = k + static_cast<std::size_t>(bh) * sk * D;
  const T* vb = v + static_cast<std::size_t>(bh) * sk * D;
  float qr[D], acc[D];
  const std::size_t row = (static_cast<std::size_t>(bh) * sq + (active ? i : 0)) * D;
#pragma unroll
  for (int c = 0; c < D; ++c) {
    qr[c] = active ? to_f(q[row + c]) * scale : 0.0f;
    acc[c] = 0.0f;
  }
  float mrow = -INFINITY, l = 0.0f;
  int lo = 0, hi = sk;
  if (causal) {
    hi = min(sk, q0 + kFwdRows + off);
    if (window > 0) lo = max(0, q0 + off - window + 1);
  }
  for (int k0 = lo; k0 < hi; k0 += kFwdKeys) {
    __syncthreads();
    for (int idx = threadIdx.x; idx < kFwdKeys * D; idx += blockDim.x) {
      const int r = idx / D;
      const bool in = k0 + r < sk;
      ks[idx] = in ? kb[static_cast<std::size_t>(k0) * D + idx] : from_f<T>(0.0f);
      vs[idx] = in ? vb[static_cast<std::size_t>(k0) * D + idx] : from_f<T>(0.0f);
    }
    __syncthreads();
    if (!active) continue;
    const int n = min(kFwdKeys, hi - k0);
    for (int jj = 0; jj < n; ++jj) {
      if (!visible(i, k0 + jj, off, causal, window)) continue;
      float s = 0.0f;
#pragma unroll
      for (int c = 0; c < D; ++c) s += qr[c] * to_f(ks[jj * D + c]);
      if (s > mrow) {
        const float corr = __expf(mrow - s);
        l *= corr;
#pragma unroll
        for (int c = 0; c < D; ++c) acc[c] *= corr;
        mrow = s;
      }
      const float p = __expf(s - mrow);
      l += p;
#pragma unroll
      for (int c = 0; c < D; ++c) acc[c] += p * to_f(vs[jj * D + c]);
    }
  }
  if (!active) return;
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
  for (int c = 0; c < D; ++c) o[row + c] = from_f<T>(acc[c] * inv);
  lse[static_cast<std::size_t>(bh) * sq + i] = l > 0.0f ? mrow + logf(l) : -INFINITY;
}

// D_i = Σ_c dO[i,c]·O[i,c], one warp per row.
template <typename T, int D>
__global__ void flash_bwd_delta_kernel(const T* o, const T* d_o, float* delta, std::size_t rows) {
  const std::size_t r = blockIdx.x * std::size_t(blockDim.x / 32) + threadIdx.x / 32;
  if (r >= rows) return;
  const int lane = threadIdx.x & 31;
  float s = 0.0f;
  for (int c = lane; c < D; c += 32) s += to_f(o[r * D + c]) * to_f(d_o[r * D + c]);
  for (int w = 16; w > 0; w >>= 1) s += __shfl_xor_sync(0xffffffffu, s, w);
  if (lane == 0) delta[r] = s;
}

template <typename T, int D>
__global__ void __launch_bounds__(kBwdKeys)
    flash_bwd_kernel(const T* q, const T* k, const T* v, const T* d_o, const float* lse,
                     const float* delta, float* dq_acc, T* dk, T* dv, int sq, int sk, float scale,
                     int causal, int window) {
  __shared__ T qs[kBwdRows * D];
  __shared__ T dos[kBwdRows * D];
  __shared__ T ks[kBwdKeys * D];
  __shared__ float ds[kBwdRows][kBwdKeys + 1];
  __shared__ float lse_s[kBwdRows], delta_s[kBwdRows];
  const int bh = blockIdx.y;
  const int k0 = blockIdx.x * kBwdKeys;
  const int j = k0 + threadIdx.x;
  const bool active = j < sk;
  const int off = sk - sq;
  const std::size_t kbase = static_cast<std::size_t>(bh) * sk * D;
  const std::size_t qbase = static_cast<std::size_t>(bh) * sq * D;
  for (int idx = threadIdx.x; idx < kBwdKeys * D; idx += blockDim.x) {
    ks[idx] =
        k0 + idx / D < sk ? k[kbase + static_cast<std::size_t>(k0) * D + idx] : from_f<T>(0.0f);
  }
  float kr[D], vr[D], gk[D], gv[D];
#pragma unroll
  for (int c = 0; c < D; ++c) {
    kr[c] = active ? to_f(k[kbase + static_cast<std::size_t>(j) * D + c]) : 0.0f;
    vr[c] = active ? to_f(v[kbase + static_cast<std::size_t>(j) * D + c]) : 0.0f;
    gk[c] = 0.0f;
    gv[c] = 0.0f;
  }
  int q_lo = 0, q_hi = sq;
  if (causal) {
    q_lo = max(0, k0 - off);
    if (window > 0) q_hi = min(sq, min(sk, k0 + kBwdKeys) - 1 - off + window);
  }
  for (int q0 = q_lo; q0 < q_hi; q0 += kBwdRows) {
    __syncthreads();
    for (int idx = threadIdx.x; idx < kBwdRows * D; idx += blockDim.x) {
      const bool in = q0 + idx / D < sq;
      qs[idx] = in ? q[qbase + static_cast<std::size_t>(q0) * D + idx] : from_f<T>(0.0f);
      dos[idx] = in ? d_o[qbase + static_cast<std::size_t>(q0) * D + idx] : from_f<T>(0.0f);
    }
    if (threadIdx.x < kBwdRows) {
      const int i = q0 + threadIdx.x;
      lse_s[threadIdx.x] = i < sq ? lse[static_cast<std::size_t>(bh) * sq + i] : 0.0f;
      delta_s[threadIdx.x] = i < sq ? delta[static_cast<std::size_t>(bh) * sq + i] : 0.0f;
    }
    __syncthreads();
    for (int r = 0; r < kBwdRows; ++r) {
      const int i = q0 + r;
      float dsv = 0.0f;
      if (active && i < sq && visible(i, j, off, causal, window)) {
        float s = 0.0f, dp = 0.0f;
#pragma unroll
        for (int c = 0; c < D; ++c) {
          s += to_f(qs[r * D + c]) * kr[c];
          dp += to_f(dos[r * D + c]) * vr[c];
        }
        const float p = __expf(s * scale - lse_s[r]);
        dsv = p * (dp - delta_s[r]);
#pragma unroll
        for (int c = 0; c < D; ++c) {
          gv[c] += p * to_f(dos[r * D + c]);
          gk[c] += dsv * scale * to_f(qs[r * D + c]);
        }
      }
      ds[r][threadIdx.x] = dsv;
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < kBwdRows * D; idx += blockDim.x) {
      const int r = idx / D, c = idx % D;
      if (q0 + r >= sq) continue;
      float a = 0.0f;
      for (int jj = 0; jj < kBwdKeys; ++jj) a += ds[r][jj] * to_f(ks[jj * D + c]);
      atomicAdd(&dq_acc[qbase + static_cast<std::size_t>(q0 + r) * D + c], a * scale);
    }
  }
  if (!active) return;
#pragma unroll
  for (int c = 0; c < D; ++c) {
    dk[kbase + static_cast<std::size_t>(j) * D + c] = from_f<T>(gk[c]);
    dv[kbase + static_cast<std::size_t>(j) * D + c] = from_f<T>(gv[c]);
  }
}

template <typename T>
__global__ void cast_kernel(const float* x, T* y, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    y[i] = from_f<T>(x[i]);
  }
}

bool own_supported(const ref::AttentionShape& s, DType t) {
  return (t == DType::kF16 || t == DType::kBf16) && (s.d == 64 || s.d == 96 || s.d == 128) &&
         s.bh > 0 && s.bh <= 65535 && s.sq > 0 && s.sk > 0 && (!s.causal || s.sk >= s.sq) &&
         s.q_per_kv == 1;
}

void check_shape(const ref::AttentionShape& s, DType t) {
  if (!own_supported(s, t)) {
    throw Error(ErrorKind::kRuntime,
                "attention kernel: unsupported shape or dtype (head dim " + std::to_string(s.d) +
                    ", " + dtype_name(t) + ", sq " + std::to_string(s.sq) + ", sk " +
                    std::to_string(s.sk) + ")",
                {}, "head dim 64, 96 or 128, fp16 or bf16, causal needs sk >= sq, no GQA "
                    "(q_per_kv 1)");
  }
}

// Calls f(T{}, std::integral_constant<int, D>{}) for the 6 compiled variants.
template <typename F>
void dispatch_attention(const ref::AttentionShape& s, DType t, F&& f) {
  dispatch_storage(t, "attention", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float>) {
      return;  // rejected by check_shape
    } else if (s.d == 64) {
      f(tag, std::integral_constant<int, 64>{});
    } else if (s.d == 96) {
      f(tag, std::integral_constant<int, 96>{});
    } else {
      f(tag, std::integral_constant<int, 128>{});
    }
  });
}

void own_forward(DType t, const ref::AttentionShape& s, const void* q, const void* k,
                 const void* v, void* o, float* lse, cudaStream_t stream) {
  check_shape(s, t);
  const dim3 grid((s.sq + kFwdRows - 1) / kFwdRows, s.bh);
  dispatch_attention(s, t, [&](auto tag, auto dim) {
    using T = decltype(tag);
    constexpr int D = decltype(dim)::value;
    flash_fwd_kernel<T, D><<<grid, kFwdRows, 0, stream>>>(
        static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v),
        static_cast<T*>(o), lse, s.sq, s.sk, s.scale, s.causal ? 1 : 0, s.window);
  });
  check_launch("attention_forward");
}

void own_backward(DType t, const ref::AttentionShape& s, const void* q, const void* k,
                  const void* v, const void* o, const void* d_o, const float* lse, void* dq,
                  void* dk, void* dv, void* workspace, cudaStream_t stream) {
  check_shape(s, t);
  const std::size_t rows = static_cast<std::size_t>(s.bh) * s.sq;
  float* dq_acc = static_cast<float*>(workspace);
  float* delta = dq_acc + rows * s.d;
  check_cuda(cudaMemsetAsync(dq_acc, 0, rows * s.d * sizeof(float), stream),
             "attention_backward: zero dQ");
  dispatch_attention(s, t, [&](auto tag, auto dim) {
    using T = decltype(tag);
    constexpr int D = decltype(dim)::value;
    flash_bwd_delta_kernel<T, D><<<static_cast<unsigned>((rows + 7) / 8), 256, 0, stream>>>(
        static_cast<const T*>(o), static_cast<const T*>(d_o), delta, rows);
    check_launch("attention_backward_delta");
    const dim3 grid((s.sk + kBwdKeys - 1) / kBwdKeys, s.bh);
    flash_bwd_kernel<T, D><<<grid, kBwdKeys, 0, stream>>>(
        static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v),
        static_cast<const T*>(d_o), lse, delta, dq_acc, static_cast<T*>(dk), static_cast<T*>(dv),
        s.sq, s.sk, s.scale, s.causal ? 1 : 0, s.window);
    check_launch("attention_backward");
    const std::size_t n = rows * s.d;
    const std::size_t blocks = (n + 255) / 256;
    cast_kernel<T><<<static_cast<unsigned>(blocks < 65535 ? blocks : 65535), 256, 0, stream>>>(
        dq_acc, static_cast<T*>(dq), n);
    check_launch("attention_backward_cast");
  });
}

// Which implementation runs a shape (ref::AttentionImpl), with the reason when none can.
enum class Impl { kCudnn, kOwn, kNone };

bool cudnn_usable(const ref::AttentionShape& s, DType t, std::string* why) {
#if TRAINSIM_HAVE_CUDNN
  return cudnn_sdpa_supported(s, t, why);
#else
  (void)s;
  (void)t;
  if (why) *why = "this build has no cuDNN (cudnn.h not found or TRAINSIM_WITH_CUDNN=OFF)";
  return false;
#endif
}

Impl resolve(const ref::AttentionShape& s, DType t, std::string* why) {
  std::string cudnn_why;
  switch (s.impl) {
    case ref::AttentionImpl::kOwn:
      if (own_supported(s, t)) return Impl::kOwn;
      if (why) {
        *why = "the own kernel runs head dims 64, 96, 128 in fp16/bf16, sk >= sq when causal, "
               "q_per_kv 1";
      }
      return Impl::kNone;
    case ref::AttentionImpl::kCudnn:
      if (cudnn_usable(s, t, &cudnn_why)) return Impl::kCudnn;
      if (why) *why = "cuDNN: " + cudnn_why;
      return Impl::kNone;
    case ref::AttentionImpl::kAuto:
    default:
      if (cudnn_usable(s, t, &cudnn_why)) return Impl::kCudnn;
      if (own_supported(s, t)) return Impl::kOwn;
      if (why) *why = "cuDNN: " + cudnn_why + "; own kernel: head dims 64, 96, 128 in fp16/bf16, "
                      "sk >= sq when causal, q_per_kv 1";
      return Impl::kNone;
  }
}

[[noreturn]] void unsupported(const ref::AttentionShape& s, DType t, const std::string& why) {
  throw Error(ErrorKind::kRuntime,
              "attention: no implementation runs head dim " + std::to_string(s.d) + ", " +
                  dtype_name(t) + ", sq " + std::to_string(s.sq) + ", sk " + std::to_string(s.sk) +
                  ", q_per_kv " + std::to_string(s.q_per_kv) + ": " + why,
              {}, "AttentionImpl kAuto picks cuDNN's fused attention, else the own kernel");
}

}  // namespace

bool attention_supported(const ref::AttentionShape& s, DType t) {
  return resolve(s, t, nullptr) != Impl::kNone;
}

const char* attention_impl_name(const ref::AttentionShape& s, DType t) {
  switch (resolve(s, t, nullptr)) {
    case Impl::kCudnn: return "cudnn-sdpa";
    case Impl::kOwn: return "own-flash2-cuda-cores";
    default: return "none";
  }
}

void launch_attention_forward(DType t, const ref::AttentionShape& s, const void* q, const void* k,
                              const void* v, void* o, float* lse, cudaStream_t stream) {
  std::string why;
  switch (resolve(s, t, &why)) {
#if TRAINSIM_HAVE_CUDNN
    case Impl::kCudnn:
      launch_cudnn_sdpa_forward(t, s, q, k, v, o, lse, stream);
      return;
#endif
    case Impl::kOwn:
      own_forward(t, s, q, k, v, o, lse, stream);
      return;
    default:
      unsupported(s, t, why);
  }
}

std::size_t attention_backward_workspace_bytes(const ref::AttentionShape& s) {
  // The own kernel's scratch; the cuDNN path keeps its own per-shape scratch (kernels/
  // cudnn_sdpa.h), so this is what a caller provides whichever implementation runs.
  const std::size_t rows = static_cast<std::size_t>(s.bh) * s.sq;
  return rows * s.d * sizeof(float) + rows * sizeof(float);
}

void launch_attention_backward(DType t, const ref::AttentionShape& s, const void* q, const void* k,
                               const void* v, const void* o, const void* d_o, const float* lse,
                               void* dq, void* dk, void* dv, void* workspace, cudaStream_t stream) {
  std::string why;
  switch (resolve(s, t, &why)) {
#if TRAINSIM_HAVE_CUDNN
    case Impl::kCudnn:
      // nullptr: the plan's cached scratch (the caller's is sized for the own kernel).
      launch_cudnn_sdpa_backward(t, s, q, k, v, o, d_o, lse, dq, dk, dv, nullptr, stream);
      return;
#endif
    case Impl::kOwn:
      own_backward(t, s, q, k, v, o, d_o, lse, dq, dk, dv, workspace, stream);
      return;
    default:
      unsupported(s, t, why);
  }
}

}  // namespace trainsim::kernels
