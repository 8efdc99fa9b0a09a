// Activation offloading to host memory (training.cpu_offload_layers): the stalls Transformer
// Engine's default offload schedule adds to one micro-batch, shared by the analytic fidelity and
// the Program's task times so that both price the same copies the same way.
//
// The schedule, as Transformer Engine's CPU-offloading guide states it
// (docs/features/other_optimizations/cpu_offloading, "Default Offloading Scheduling"): of L layers
// the first n have their activations offloaded; at most L − n layers' activations are on the GPU
// at any time, and compute and reloads stall to keep to it; a reload completes before its layer's
// backward. One offload stream carries the copies in order, device to host in the forward pass,
// host to device in the backward. Modelled here:
//   forward   layer j waits until fewer than L − n activation sets are on the GPU (the layers
//             before it that are not offloaded, and the offloaded ones whose copy has not ended);
//             layer i < n starts its copy when its forward ends and the stream is free;
//   backward  layers L−1 … 0; the k-th reload (layer n−1−k) starts when the stream is free and
//             k + 1 sets have been freed, i.e. when the backward of layer L−1−k has ended (every
//             slot is taken when the backward begins); layer i < n waits for its reload.
// A copy starts when its layer's forward ends (Transformer Engine starts it as tensors are saved,
// a little earlier), so the forward stall is an upper bound; the copies' HBM traffic is not
// charged (the guide notes it competes with memory-bound kernels).
#pragma once

#include <span>

namespace trainsim::exec {

struct RunConfig;

struct OffloadStalls {
  double forward = 0;   // seconds the forward pass waits for copies to host
  double backward = 0;  // seconds the backward pass waits for reloads
};

/// Stalls of one micro-batch: `fwd_s[j]` and `bwd_s[j]` are layer j's forward and backward
/// compute, `n` (0 ≤ n < L) layers offloaded, each copy taking `copy_s` each way.
OffloadStalls offload_stalls(std::span<const double> fwd_s, std::span<const double> bwd_s, int n,
                             double copy_s);

/// One offloaded layer's copy, each way: its activations of one micro-batch (the memory model's
/// per-layer bytes) over the GPU's host link; 0 without a host link.
double offload_copy_seconds(const RunConfig& cfg);

}  // namespace trainsim::exec
