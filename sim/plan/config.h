// Parallel layout, training settings and system optimizations: the plain config structs that
// `scenarios/` fills and the planner and executors read.
#pragma once

#include <string>

#include "sim/core/units.h"
#include "sim/model/transformer.h"

namespace trainsim::plan {

enum class Schedule { kGpipe, k1F1B, kInterleaved };
enum class Optimizer { kAdam, kLamb };

struct ParallelConfig {
  int tp = 1;    // tensor parallel
  int pp = 1;    // pipeline stages
  int dp = 1;    // data parallel replicas (the GPU count is tp·pp·dp·cp)
  int vpp = 1;   // virtual pipeline chunks per stage (interleaved 1F1B when > 1)
  int cp = 1;    // context parallel
  int ep = 1;    // expert parallel, carved out of dp (must divide dp)
  bool sp = false;  // sequence parallel (TP regions shard the non-TP activations)
  int zero = 0;     // 0 none, 1 optimizer state, 2 + gradients, 3 + parameters, sharded over dp
  Schedule schedule = Schedule::k1F1B;

  int world() const { return tp * pp * dp * cp; }
};

struct TrainingConfig {
  int global_batch = 0;   // sequences per iteration
  int micro_batch = 1;    // sequences per micro-batch
  Precision precision = Precision::kBf16;
  model::Recompute recompute = model::Recompute::kNone;
  Optimizer optimizer = Optimizer::kAdam;
  Precision grad_reduce = Precision::kFp32;  // datatype of the DP gradient reduction
};

/// MegaScale's system levers (DESIGN.md §4), each changing what the model computes or overlaps.
struct Optimizations {
  bool tp_overlap = false;           // TP/SP all-gather and reduce-scatter fused with GEMMs
  bool pp_overlap = false;           // PP send/recv off the critical path
  bool dp_overlap = false;           // DP reduce-scatter during backward, all-gather prefetch
  bool efficient_operators = false;  // FlashAttention, fused LayerNorm/residual, GeLU in epilogue
  bool async_data_pipeline = false;  // data loading overlapped with the previous iteration
  bool lamb = false;                 // LAMB optimizer (allows a larger global batch)
  bool sliding_window = false;       // attention limited to model.attention_window tokens
  bool parallel_block = false;       // parallel transformer block (attention ∥ MLP)
  bool fast_comm_init = false;       // Redis-like store + ordered group creation at start-up
};

const char* to_string(Schedule s);
const char* to_string(Optimizer o);

}  // namespace trainsim::plan
