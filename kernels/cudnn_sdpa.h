// Fused scaled-dot-product attention through cuDNN 9's backend (graph) API: the operation graph
// that cuDNN's fused flash-attention engines recognise (matmul, scale, mask, softmax with its
// log-sum-exp statistic, matmul; and the matching backward graph) is built descriptor by
// descriptor with cudnnBackend* calls, planned once per shape and cached.
//
// cuDNN is not linked: libcudnn.so.9 is loaded with dlopen on first use, so the GPU module loads
// and every other kernel works where cuDNN is missing (then cudnn_sdpa_available says why and
// kernels/attention.cu falls back to trainsim's own kernel).
//
// Layout and math are those of the own kernel (kernels/launchers.h, ref::attention_forward):
// q, o, dq [bh×sq×d] and k, v, dk, dv [(bh/q_per_kv)×sk×d] contiguous row-major in fp16 or bf16;
// lse [bh×sq] fp32 is the row's log-sum-exp of the scaled, masked scores (natural log), which is
// what cuDNN's softmax "Stats" output holds (max + log Σ exp(s − max)). Masks: none, causal
// (bottom-right aligned, as the reference), causal with a sliding window (window > 0).
//
// Every function that can fail throws trainsim::Error(kRuntime) carrying the cuDNN status string,
// the last-error text cuDNN gives and the descriptor attribute being set; the two query functions
// never throw and say why in `why` instead. Plans, handles and device buffers are cached per
// (device, direction, dtype, shape) and reused; the first call of a shape pays for the planning
// and one cudaMalloc. Safe for one host thread per device (a mutex guards the shared state).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "kernels/dtype.h"
#include "kernels/reference.h"

namespace trainsim::kernels {

/// libcudnn.so.9 loads, its version is ≥ 9.0, a handle can be made and the current device is
/// sm80 or newer. Cached after the first call (per device for the device part).
bool cudnn_sdpa_available(std::string* why = nullptr);
/// The version libcudnn reports (e.g. 91900 for 9.19.0), 0 when it cannot be loaded.
std::size_t cudnn_sdpa_version();

/// Asks cuDNN: builds the forward and backward graphs for this shape and checks that the
/// heuristics give an engine configuration whose execution plan finalizes. fp16/bf16, head dim ≤
/// 128 and a multiple of 8, bh a multiple of q_per_kv; masks as above (window only with causal;
/// causal with sk < sq is refused). The answer is cached per shape.
bool cudnn_sdpa_supported(const ref::AttentionShape& shape, DType t, std::string* why = nullptr);

void launch_cudnn_sdpa_forward(DType t, const ref::AttentionShape& shape, const void* q,
                               const void* k, const void* v, void* o, float* lse, cudaStream_t s);

/// Device scratch the backward needs: the plan's workspace, the fp32 dQ accumulator and the row
/// statistic rowsum(dO∘O). launch_cudnn_sdpa_backward uses `workspace` when it is not null (it
/// must hold this many bytes, 256-byte aligned), else a buffer it allocates once per shape.
std::size_t cudnn_sdpa_backward_workspace_bytes(const ref::AttentionShape& shape, DType t);
void launch_cudnn_sdpa_backward(DType t, const ref::AttentionShape& shape, const void* q,
                                const void* k, const void* v, const void* o, const void* d_o,
                                const float* lse, void* dq, void* dk, void* dv, void* workspace,
                                cudaStream_t s);

/// Diagnostic that needs no GPU: builds and finalizes every tensor and operation descriptor of
/// the forward (backward = false) or backward graph, and the operation graph too when a handle
/// can be made (`graph_finalized` then true). False with cuDNN's reason otherwise.
bool cudnn_sdpa_check_descriptors(const ref::AttentionShape& shape, DType t, bool backward,
                                  std::string* why, bool* graph_finalized = nullptr);

}  // namespace trainsim::kernels
