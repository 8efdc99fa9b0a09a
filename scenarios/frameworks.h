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

#include <map>
#include <string>
#include <string_view>
#include <vector>

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
};

const std::vector<FrameworkPreset>& framework_presets();
const FrameworkPreset* find_framework(std::string_view name);
std::vector<std::string> framework_names();

/// The preset an `optimizations.system` name stands for: megatron → megatron-lm-2023 (the
/// "Megatron-LM of early 2023" of published-runs.csv), megascale → megascale-2024,
/// nemo → nemo-2024, deepspeed → deepspeed-2023, none → none.
std::string framework_for_system(std::string_view system);

}  // namespace trainsim::scen
