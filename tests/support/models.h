// Model shapes the unit tests share: scen::gpt_model, the GPT block Megatron-LM's papers size
// (multi-head attention, a two-matrix MLP of 4·hidden) and their closed forms are written for.
#pragma once

#include "scenarios/presets.h"

namespace trainsim::testing {

inline model::ModelConfig gpt(int layers, int hidden, int heads, int vocab = 51200,
                              int seq = 2048) {
  return scen::gpt_model("test", layers, hidden, heads, vocab, seq);
}

}  // namespace trainsim::testing
