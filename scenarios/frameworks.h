// Framework presets: dated, versioned capability sets (DESIGN.md §3, docs/presets.md).
//
// A published run is modelled with the software it ran on. Each preset states, for one framework
// at one date, what a run of it does unless the scenario says otherwise: sequence parallelism,
// the distributed optimizer and the group it shards over, the attention kernel, the default
// recompute, which overlaps exist and how TP overlap is done, the gradient-reduction datatype and
// the DP bucket rule. A preset is a set of scenario-key defaults; keys the scenario gives win.
// `optimizations.system` names (megatron, megascale, nemo, deepspeed, none) remain as aliases of
// presets (framework_for_system).
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trainsim::model {
struct ModelConfig;
}

namespace trainsim::scen {

struct FrameworkPreset {
  std::string name;     // framework.preset value, e.g. "megatron-lm-2023"
  std::string label;    // "Megatron-LM, January 2023 (commit 285068c8)"
  std::string date;     // the version's date, YYYY-MM
  std::string sources;  // where its capabilities are documented
  // Scenario keys it sets (canonical text), applied to keys the scenario does not give.
  std::map<std::string, std::string> values;
  // The fused attention kernel this framework runs when efficient operators are on.
  std::string fused_attention = "flash2";
  // The `optimizations.system` family it belongs to (several Megatron-LM versions share one).
  std::string system;
  // What the framework's own throughput log counts as TFLOP/s (a validation-table convention):
  // "megatron-recompute" where the recompute forward pass is counted (Megatron-LM SC21 Eq. 3,
  // Megatron-DeepSpeed's throughput calculator), "megatron" where only model FLOPs are.
  std::string logged_tflops = "megatron";
  // Whether its pipeline engine has an interleaved (virtual-stage) schedule: Megatron-LM since
  // 2021-02 (SC21 §2.2), TorchTitan's Interleaved1F1B; DeepSpeed's PipelineEngine runs plain
  // 1F1B only. A blank `vpp` of a validation row is searched only where it has.
  bool interleaved_pp = true;
  // Capabilities a published run's own configuration can require (dates in docs/presets.md):
  // selective activation recompute (Megatron-LM 2022-05, with sequence parallelism), a sharded
  // optimizer (ZeRO / Megatron's distributed optimizer, 2022-06) and context parallelism
  // (Megatron-Core 2023-10).
  bool selective_recompute = true;
  bool sharded_optimizer = true;
  bool context_parallel = true;
  // The highest ZeRO stage it has: Megatron-LM's distributed optimizer (2022-06) shards the
  // optimizer states and keeps the whole gradient buffer on every rank (ZeRO-1 in this model's
  // terms); parameter sharding came to Megatron-Core as Megatron FSDP in 2025 (the nemo-2025
  // GB200 recipes that use it). DeepSpeed, FSDP (TorchTitan, LLM Foundry): 3.
  int max_zero = 3;
  // PyTorch's per-op selective activation checkpointing with TorchTitan's policy
  // (training.recompute selective-op; TorchTitan since 2024-04, `selective_ac_option = "op"`):
  // with `selective_recompute` it sets framework.selective_recompute (op, attention or none).
  bool op_recompute = false;
  // (Listed last: the preset table initialises the fields above by position.)
  // The model blocks it could build (Megatron-LM history, docs/presets.md): rotary positions
  // (`--use-rotary-position-embeddings`, commit 1e0e555c43, 2023-03-31), gated SwiGLU MLPs
  // (`--swiglu`, 2cc3dac719, 2023-04-01), grouped-query attention (`--group-query-attention`,
  // 6902465a83, 2023-06-05) and RMSNorm (6ff46266a5, 2023-07-31). Megatron-LM of 2021 and of
  // January 2023 had none of them; every later preset, and the FSDP stacks that train Hugging
  // Face-style models, has all four.
  bool rotary = true;
  bool gated_mlp = true;
  bool gqa = true;
  bool rmsnorm = true;
};

/// Notes for a scenario that asks its framework preset for what that version did not have
/// (selective recompute before 2022-05, a sharded optimizer before 2022-06, context parallelism
/// before 2023-10, a ZeRO stage above its own): the run is simulated as asked, and says so.
/// The model's blocks count too (rotary positions, a gated MLP, grouped-query attention,
/// RMSNorm: Megatron-LM from 2023-03 to 2023-07).
std::vector<std::string> capability_notes(const FrameworkPreset& fw, int zero, int cp,
                                          bool selective_recompute,
                                          const model::ModelConfig* model = nullptr);

/// What a run's stated configuration requires of the framework it ran on.
struct FrameworkNeeds {
  bool selective_recompute = false;  // recompute = selective
  bool sharded_optimizer = false;    // zero >= 1
  bool context_parallel = false;     // cp > 1
  bool parameter_sharding = false;   // zero >= 3 (max_zero)
  bool rotary = false;               // RoPE
  bool gated_mlp = false;            // SwiGLU
  bool gqa = false;                  // kv_heads < heads
  bool rmsnorm = false;
  bool any() const {
    return selective_recompute || sharded_optimizer || context_parallel || parameter_sharding ||
           rotary || gated_mlp || gqa || rmsnorm;
  }
  /// What `fw` lacks of these needs, as a comma-separated list ("" when it has them all).
  std::string lacking(const FrameworkPreset& fw) const;
  std::vector<std::string> lacking_items(const FrameworkPreset& fw) const;
  std::size_t missing(const FrameworkPreset& fw) const;
};

const std::vector<FrameworkPreset>& framework_presets();
const FrameworkPreset* find_framework(std::string_view name);
std::vector<std::string> framework_names();

/// The preset an `optimizations.system` name stands for: megatron → megatron-lm-2023 (the
/// "Megatron-LM of early 2023" of published-runs.csv), megascale → megascale-2024,
/// nemo → nemo-2024, deepspeed → deepspeed-2023, none → none.
std::string framework_for_system(std::string_view system);

/// The publication year a source names ("Megatron-LM SC21 Table 1" → 2021, "NSDI'24" → 2024,
/// "arXiv 2407.21783 (2024)" → 2024), if it names one.
std::optional<int> publication_year(std::string_view source);

/// The preset a published run of `system` most likely ran, from its source's date: the latest
/// preset of that family dated no later than June of the year before publication when the source
/// names a reviewed venue ("SC21", "NSDI'24": the software a paper measures is frozen at its
/// submission, 5-8 months before the meeting), or no later than the January of its year for a
/// report, preprint or recipe ("Llama 3 ... 2024"); the family's earliest when all are later;
/// framework_for_system() when the source names no year. A run ran on software that had what its
/// configuration uses: presets lacking a capability in `needs` are passed over, and when every
/// preset dated by the cut-off lacks one, the family's earliest preset that has them all is
/// taken (a 2022 report of selective recompute ran Megatron-LM of 2022-05 or later, not the
/// 2021 release). `why` receives the reasoning, for the row's `assumed` list.
std::string framework_for_run(std::string_view system, std::string_view source, std::string* why,
                              const FrameworkNeeds& needs = {});

}  // namespace trainsim::scen
