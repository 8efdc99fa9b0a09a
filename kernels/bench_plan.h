// What `trainsim calibrate kernels` times: the kernels a scenario's layer, embedding and head
// need at the exact shapes one GPU sees (sim/model/ops.h), plus a standard grid of shapes that
// spans the GEMM surface, attention lengths and memory-bound sizes so the fits
// (calibrate/gemm_fit.h) are well conditioned. Plain C++: the plan is built and tested on any
// machine; kernels/bench.h runs it on a GPU.
#pragma once

#include <string>
#include <vector>

#include "calibrate/profile.h"
#include "kernels/dtype.h"
#include "sim/model/ops.h"
#include "sim/model/transformer.h"

namespace trainsim::kernels {

/// One kernel launch to time. Shape conventions are those of calib::MeasuredKernel: GEMM
/// [m×k]·[k×n] with `batch`; attention batch = sequences·heads, m queries, n keys, k head dim;
/// memory-bound kernels m rows × n columns (optimizers: n parameters, m = 0).
struct BenchItem {
  std::string op;     // calib::measured_kernel_ops() kind
  std::string label;  // model op ("qkv", "qkv.dgrad"), or "grid"
  DType dtype = DType::kBf16;
  double m = 0, n = 0, k = 0, batch = 1;
  double flops = 0;  // the simulator's count (GEMM 2mnk·batch; attention 4·b·h·s·keys·d, ×2 bwd)
  double bytes = 0;    // HBM bytes the kernel moves (memory-bound kinds)
  bool causal = true;  // attention
  int window = 0;      // attention: sliding window, 0 = none
};

/// The kernels of one micro-batch of `model` cut by `shard`: every GEMM forward and its two
/// backward GEMMs (dgrad (m,k,n) and wgrad (k,n,m), as sim/exec/compute_model.h prices them),
/// attention forward and backward (or the unfused scores/softmax/dropout/context), the norms,
/// activations, residual adds, embedding and cross-entropy. GEMMs run in `gemm_dtype`
/// (batched ones in `act`), element-wise kernels in `act`. Duplicate shapes are timed once.
/// Throws trainsim::Error(kInput) for a model op with no kernel here, naming it.
std::vector<BenchItem> bench_items_for_model(const model::ModelConfig& m, const model::Sharding& s,
                                             DType act, DType gemm_dtype);

/// The kernel of one memory-bound model op (sim/model/ops.cpp, by name) at the shape one GPU
/// sees under `shard`: its kind ("layernorm", "softmax", "swiglu", ...) and m rows × n columns,
/// the rows recovered from the op's bytes. The mapping bench_items_for_model uses, and the one
/// the real executor (kernels/exec) launches. Throws trainsim::Error(kInput) for an op with none.
BenchItem memory_bench_item(const model::ModelConfig& m, const model::Sharding& shard,
                            const model::Op& op, DType act);
/// Whether a memory-bound kernel kind has its own backward kernel `<kind>_bwd` (launchers.h):
/// the norms, softmax, dropout, bias-dropout-add, bias-GeLU, SwiGLU and embedding.
bool has_backward_kernel(const std::string& kind);
/// The backward of the same op at the same shape, labelled "<op>.bwd": kind `<kind>_bwd` with
/// its own byte count, or for cross-entropy (whose forward kernel writes the logits gradient)
/// the forward item itself.
BenchItem memory_backward_bench_item(const model::ModelConfig& m, const model::Sharding& shard,
                                     const model::Op& op, DType act);

/// The standard grid: GEMMs over m, n, k ∈ {256, 1024, 4096, 16384} (up to 2^38 multiply-adds)
/// in `gemm_dtype`, causal attention over 1K–8K tokens at head dims 64 and 128, memory-bound
/// kernels from 16 KiB to 1 GiB (each kind, backward kernels included, at ≥ 64 MiB), the copy
/// roofline ("copy") from 1 MiB to 1 GiB, Adam and LAMB from 1M to 128M parameters.
std::vector<BenchItem> standard_grid(DType act, DType gemm_dtype);
/// Its GEMMs alone (the first items of standard_grid): `calibrate kernels` times them even with
/// --no-grid, because a GEMM surface fitted on one model's few shapes is ill-conditioned (three
/// constants from shapes that share most of their dimensions; the H200 record's small-GPT fit
/// came out above 1 and was clamped).
std::vector<BenchItem> standard_gemm_grid(DType gemm_dtype);

/// Bytes a memory-bound kernel of this kind and shape moves (see kernels/launchers.h).
double memory_kernel_bytes(const std::string& op, double rows, double cols, DType t);

/// The profile sample of a timed item.
calib::MeasuredKernel to_measured(const BenchItem& item, double median_s, int repeats);

}  // namespace trainsim::kernels
