// Built-in presets: GPUs, clusters and models with published facts (DESIGN.md §5).
//
// Every number here comes from a vendor datasheet or a paper; presets.cpp cites the source next to
// each entry and docs/presets.md lists them for users. Presets are immutable values: each lookup
// returns a fresh copy, so callers may modify what they get.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/model/transformer.h"
#include "topology/hardware.h"

namespace trainsim::scen {

enum class PresetKind { kGpu, kCluster, kModel };

/// What `--list-presets` shows about one preset.
struct PresetInfo {
  std::string name;
  std::string description;  // one line: the facts that identify it
  std::string source;       // where the facts come from
};

/// A cluster preset: the fabric and servers (`cluster.gpus` = 0, `cluster.gpu` empty) and the
/// name of the GPU preset the cluster is built from.
struct ClusterPreset {
  topo::ClusterSpec cluster;
  std::string gpu;
};

std::optional<topo::GpuSpec> gpu_preset(std::string_view name);
std::optional<ClusterPreset> cluster_preset(std::string_view name);
std::optional<model::ModelConfig> model_preset(std::string_view name);
/// A GPT-2/GPT-3-style block (GeLU MLP of 4·hidden, LayerNorm, learned positions, biases, tied
/// embeddings, multi-head attention): the Megatron-LM presets, and the shape the tests' closed
/// forms are written for.
model::ModelConfig gpt_model(std::string name, int layers, int hidden, int heads, int vocab,
                             int seq_len = 2048);

/// The cluster a GPU is usually deployed in, used when a scenario (or a row of
/// `published-runs.csv`) names a GPU but no cluster. "" for an unknown GPU.
/// The GPU preset a common spelling names: case, spaces, underscores and an "nvidia" prefix are
/// ignored, and form-factor or memory suffixes that do not change the preset are dropped
/// ("H100", "h100-sxm5-80gb", "NVIDIA H100 SXM" → h100-sxm; "A100", "a100-sxm4-80gb" →
/// a100-80gb; "A100-SXM4-40GB" → a100-40gb; "h200" → h200-sxm; "H800", "B200"). Returns "" when
/// no preset matches (a PCIe or NVL part, a memory size the family's preset does not have).
std::string canonical_gpu(std::string_view name);

std::string default_cluster_for_gpu(std::string_view gpu);

/// Names in listing order, for suggestions and schema choices.
std::vector<std::string> preset_names(PresetKind kind);
std::vector<PresetInfo> preset_info(PresetKind kind);

/// A readable listing of every GPU, cluster and model preset with its description and source.
std::string list_presets();

}  // namespace trainsim::scen
