// Model shapes the unit tests share: scen::gpt_model, the GPT block Megatron-LM's papers size
// (multi-head attention, a two-matrix MLP of 4·hidden) and their closed forms are written for.
#pragma once

#include "scenarios/presets.h"

namespace trainsim::testing {

inline model::ModelConfig gpt(int layers, int hidden, int heads, int vocab = 51200,
                              int seq = 2048) {
  return scen::gpt_model("test", layers, hidden, heads, vocab, seq);
}

// Llama 3 8B's block (GQA 32/8, head 128, SwiGLU 14,336, RMSNorm, RoPE, no biases or dropout)
// with `layers` layers and sequence `seq`: the shape the element-wise tests count bytes for.
inline model::ModelConfig llama3_8b(int layers, int seq) {
  model::ModelConfig m = *scen::model_preset("llama3-8b");
  m.layers = layers;
  m.seq_len = seq;
  return m;
}

}  // namespace trainsim::testing
