#include "scenarios/schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "scenarios/frameworks.h"
#include "scenarios/presets.h"
#include "scenarios/schema_reliability.h"
#include "scenarios/sizes.h"
#include "sim/core/limits.h"
#include "sim/core/parse.h"

namespace trainsim::scen {
namespace {

std::vector<std::string> with_auto(std::vector<std::string> names) {
  names.insert(names.begin(), "auto");
  return names;
}

std::vector<std::string> with_none(std::vector<std::string> names) {
  names.insert(names.begin(), "none");
  return names;
}

// Defaults describe the project's default run, MegaScale 175B on 12,288 GPUs
// (validation/README.md), so that an empty scenario is that run;
// scenarios/megascale-175b-12288.yaml spells it out.
std::vector<KeyDef> build_schema() {
  using K = KeyType;
  std::vector<KeyDef> keys = {
      // model
      {.path = "model.preset",
       .type = K::kEnum,
       .default_value = "megascale-175b",
       .description = "Model preset that fills every model.* key not given (docs/presets.md). The "
                      "default applies only when none of model.layers, model.hidden, model.heads "
                      "is given; `none` describes the model by its keys alone",
       .choices = with_none(preset_names(PresetKind::kModel)),
       .aliases = {"model_name", "model_preset", "arch", "architecture"}},
      {.path = "model.layers",
       .type = K::kInt,
       .default_value = "0",
       .description = "Transformer layers (0 = from model.preset)",
       .aliases = {"num_layers", "n_layer", "n_layers", "num_hidden_layers", "depth"},
       .min_value = 0,
       .max_value = static_cast<double>(limits::kMaxModelLayers)},
      {.path = "model.hidden",
       .type = K::kInt,
       .default_value = "0",
       .description = "Hidden size h (0 = from model.preset)",
       .aliases = {"hidden_size", "d_model", "n_embd", "model_dim", "dim", "embed_dim"},
       .min_value = 0,
       .max_value = static_cast<double>(limits::kMaxModelWidth)},
      {.path = "model.heads",
       .type = K::kInt,
       .default_value = "0",
       .description = "Attention (query) heads; must divide model.hidden unless model.head_dim "
                      "is given (0 = from model.preset)",
       .aliases = {"num_attention_heads", "n_head", "n_heads", "attention_heads", "num_heads"},
       .min_value = 0},
      {.path = "model.head_dim",
       .type = K::kInt,
       .default_value = "0",
       .description = "Width of one attention head (0 = model.hidden / model.heads); queries "
                      "and the attention output are model.heads x this wide, keys and values "
                      "model.kv_heads x this (Qwen 3, Gemma, GPT-OSS differ from hidden / heads)",
       .aliases = {"kv_channels", "head_size", "attention_head_dim", "d_head"},
       .min_value = 0},
      {.path = "model.kv_heads",
       .type = K::kInt,
       .default_value = "0",
       .description = "Key/value heads; fewer than model.heads is GQA and must divide it "
                      "(0 = model.heads)",
       .aliases = {"num_query_groups", "num_key_value_heads", "n_kv_heads", "kv_groups",
                   "query_groups", "group_query_attention"},
       .min_value = 0},
      {.path = "model.ffn_hidden",
       .type = K::kInt,
       .default_value = "0",
       .description = "MLP inner size, per expert for MoE (0 = 4 x model.hidden; SwiGLU models "
                      "must give it)",
       .aliases = {"ffn_hidden_size", "intermediate_size", "d_ff", "ffn_dim", "ffn", "n_inner"},
       .min_value = 0,
       .max_value = static_cast<double>(limits::kMaxModelWidth)},
      {.path = "model.vocab",
       .type = K::kInt,
       .default_value = "0",
       .description = "Vocabulary size as trained, padding included (0 = from model.preset)",
       .aliases = {"vocab_size", "padded_vocab_size", "n_vocab"},
       .min_value = 0,
       .max_value = static_cast<double>(limits::kMaxModelVocab)},
      {.path = "model.seq_len",
       .type = K::kInt,
       .unit = "tokens",
       .default_value = "0",
       .description = "Sequence length of a training sample (0 = from model.preset)",
       .aliases = {"seq_length", "sequence_length", "max_position_embeddings", "context_length",
                   "seq", "n_ctx", "max_seq_len", "seqlen"},
       .min_value = 0,
       .max_value = static_cast<double>(limits::kMaxModelSeqLen)},
      {.path = "model.mlp",
       .type = K::kEnum,
       .default_value = "gelu",
       .description = "MLP kind: GeLU (2 GEMMs) or SwiGLU (3 GEMMs)",
       .choices = {"gelu", "swiglu"},
       .aliases = {"activation", "hidden_act", "activation_function", "swiglu"}},
      {.path = "model.norm",
       .type = K::kEnum,
       .default_value = "layernorm",
       .description = "Normalization layer",
       .choices = {"layernorm", "rmsnorm"},
       .aliases = {"normalization", "norm_type"}},
      {.path = "model.position",
       .type = K::kEnum,
       .default_value = "learned",
       .description = "Position encoding: learned absolute embeddings or rotary",
       .choices = {"learned", "rope"},
       .aliases = {"position_embedding_type", "positional_encoding", "pos_emb"}},
      {.path = "model.bias",
       .type = K::kBool,
       .default_value = "true",
       .description = "Linear layers and norms carry biases",
       .aliases = {"add_bias_linear", "use_bias", "bias_linear"}},
      {.path = "model.tied_embeddings",
       .type = K::kBool,
       .default_value = "true",
       .description = "The output projection shares the input embedding matrix",
       .aliases = {"tie_word_embeddings", "share_embeddings", "tie_embeddings",
                   "untie_embeddings_and_output_weights"}},
      {.path = "model.attention_window",
       .type = K::kInt,
       .unit = "tokens",
       .default_value = "0",
       .description = "Sliding-window size; used only when optimizations.sliding_window is true "
                      "(0 = full attention)",
       .aliases = {"sliding_window_size", "window_size", "attention_window_size"},
       .min_value = 0},
      {.path = "model.experts",
       .type = K::kInt,
       .default_value = "0",
       .description = "Experts per MoE layer (0 = dense model)",
       .aliases = {"num_experts", "moe_experts", "n_experts", "num_local_experts"},
       .min_value = 0},
      {.path = "model.top_k",
       .type = K::kInt,
       .default_value = "1",
       .description = "Experts each token is routed to",
       .aliases = {"moe_router_topk", "topk", "num_experts_per_tok", "router_topk"},
       .min_value = 1},
      {.path = "model.moe_every",
       .type = K::kInt,
       .default_value = "1",
       .description = "Layers 0, n, 2n, ... are MoE layers (when model.experts > 0), as "
                      "Megatron-Core's moe_layer_freq places them",
       .aliases = {"moe_layer_freq", "expert_interval", "moe_frequency"},
       .min_value = 1},
      {.path = "model.dropout",
       .type = K::kBool,
       .default_value = "true",
       .description = "Dropout after attention and MLP and on the attention probabilities "
                      "(GPT-3 and Megatron's GPT: on; Llama: off); its masks are stored for "
                      "backward",
       .aliases = {"hidden_dropout", "attention_dropout", "use_dropout"}},

      // cluster
      {.path = "cluster.preset",
       .type = K::kEnum,
       .default_value = "megascale-ampere",
       .description = "Cluster preset that fills every cluster.* key not given. When cluster.gpu "
                      "is given without a preset, the default is that GPU's usual cluster "
                      "(a100-80gb and a100-40gb: selene-a100, a800: megascale-ampere, h100-sxm, "
                      "h800, h200-sxm and b200: dgx-h100-superpod, b300: dgx-b300-superpod, gb200: "
                      "dgx-gb200-nvl72, gb300: dgx-gb300-nvl72); `none` describes the cluster by "
                      "its keys alone",
       .choices = with_none(preset_names(PresetKind::kCluster)),
       .aliases = {"cluster_name", "cluster_preset", "fabric_preset"}},
      {.path = "cluster.gpu",
       .type = K::kEnum,
       .default_value = "a100-80gb",
       .description = "GPU preset (datasheet peak FLOP/s, HBM, NVLink)",
       .choices = preset_names(PresetKind::kGpu),
       .aliases = {"gpu_type", "accelerator", "device", "gpu_model"}},
      // A GPU the presets do not hold: the cluster.gpu preset of the same architecture, with the
      // datasheet numbers these keys give (scenario.cpp: build_cluster; its calibration in
      // run_config.cpp: datasheet_profile_for; docs/calibration.md, "A GPU the presets do not hold").
      {.path = "cluster.gpu_spec.name",
       .type = K::kString,
       .default_value = "none",
       .description = "Name of a GPU described by the cluster.gpu_spec.* keys on the cluster.gpu "
                      "preset of its architecture (none: the preset's name, or `<preset>-custom` "
                      "once a cluster.gpu_spec number is given); a measured calibration profile "
                      "for it must carry this name",
       .aliases = {"gpu_name", "device_name"}},
      {.path = "cluster.gpu_spec.bf16_tflops",
       .type = K::kFloat,
       .unit = "TFLOP/s",
       .default_value = "0",
       .description = "Dense 16-bit (bf16/fp16) tensor-core peak from the GPU's datasheet, without "
                      "sparsity; 0 = the cluster.gpu preset's",
       .aliases = {"peak_tflops", "bf16_peak", "fp16_tflops", "tensor_tflops"},
       .min_value = 0,
       .max_value = 1e6},
      {.path = "cluster.gpu_spec.fp8_tflops",
       .type = K::kFloat,
       .unit = "TFLOP/s",
       .default_value = "0",
       .description = "Dense fp8 tensor-core peak, without sparsity; 0 = the cluster.gpu preset's, "
                      "at its fp8:bf16 ratio to cluster.gpu_spec.bf16_tflops when that is given "
                      "(a preset without fp8 keeps none)",
       .aliases = {"fp8_peak"},
       .min_value = 0,
       .max_value = 1e6},
      {.path = "cluster.gpu_spec.hbm_gib",
       .type = K::kFloat,
       .unit = "GiB",
       .default_value = "0",
       .description = "Device memory the driver exposes (nvidia-smi memory.total); 0 = the "
                      "cluster.gpu preset's",
       .aliases = {"hbm_capacity", "gpu_memory", "memory_gb", "hbm_gb"},
       .min_value = 0,
       .max_value = 1e5},
      {.path = "cluster.gpu_spec.hbm_tb_per_s",
       .type = K::kFloat,
       .unit = "TB/s",
       .default_value = "0",
       .description = "Device-memory bandwidth from the datasheet; 0 = the cluster.gpu preset's",
       .aliases = {"hbm_bandwidth", "memory_bandwidth", "hbm_tbps"},
       .min_value = 0,
       .max_value = 1e4},
      {.path = "cluster.gpu_spec.nvlink_gb_per_s",
       .type = K::kFloat,
       .unit = "GB/s",
       .default_value = "0",
       .description = "Bandwidth per GPU per direction into the server's GPU-to-GPU fabric "
                      "(NVLink; half the bidirectional figure datasheets quote; PCIe where there "
                      "is no NVLink); 0 = the cluster.gpu preset's",
       .aliases = {"nvlink_bandwidth", "nvlink_gbps", "intra_node_bandwidth"},
       .min_value = 0,
       .max_value = 1e6},
      {.path = "cluster.gpu_spec.nvls",
       .type = K::kEnum,
       .default_value = "preset",
       .description = "Whether the NVLink switches reduce and multicast (NVLink SHARP); preset = "
                      "the cluster.gpu preset's",
       .choices = {"preset", "true", "false"},
       .aliases = {"nvlink_sharp"}},
      {.path = "cluster.gpu_spec.sms",
       .type = K::kInt,
       .default_value = "0",
       .description = "Streaming multiprocessors (an overlapped collective's NCCL channels take "
                      "some of them); 0 = the cluster.gpu preset's",
       .aliases = {"sm_count", "multiprocessors"},
       .min_value = 0,
       .max_value = 100000},
      {.path = "cluster.gpu_spec.host_link_gb_per_s",
       .type = K::kFloat,
       .unit = "GB/s",
       .default_value = "0",
       .description = "Link to host memory per direction (PCIe, NVLink-C2C), for activation "
                      "offloading; 0 = the cluster.gpu preset's",
       .aliases = {"pcie_bandwidth", "host_bandwidth"},
       .min_value = 0,
       .max_value = 1e6},
      {.path = "cluster.gpu_spec.host_memory_gb",
       .type = K::kFloat,
       .unit = "GB",
       .default_value = "0",
       .description = "The GPU's share of its server's host memory; 0 = the cluster.gpu preset's",
       .aliases = {"cpu_memory", "host_ram"},
       .min_value = 0,
       .max_value = 1e7},
      {.path = "cluster.gpus",
       .type = K::kInt,
       .default_value = "12288",
       .description = "GPUs the job uses. The default applies only while parallel.dp is auto; "
                      "0 or absent with a numeric parallel.dp means tp x pp x dp x cp",
       .aliases = {"world_size", "num_gpus", "n_gpus", "gpu_count", "total_gpus", "ngpus"},
       .min_value = 0,
       .max_value = static_cast<double>(limits::kMaxClusterGpus)},
      {.path = "cluster.gpus_per_node",
       .type = K::kInt,
       .default_value = "8",
       .description = "GPUs per server, joined by NVLink",
       .aliases = {"gpus_per_server", "nproc_per_node", "devices_per_node", "gpus_node"},
       .min_value = 1},
      {.path = "cluster.nics_per_node",
       .type = K::kInt,
       .default_value = "8",
       .description = "Scale-out NICs per server (one per rail when rail-optimized)",
       .aliases = {"nics_per_server", "rails", "nics"},
       .min_value = 1},
      {.path = "cluster.nic_gbps",
       .type = K::kFloat,
       .unit = "Gbit/s",
       .default_value = "200",
       .description = "Line rate of one NIC",
       .aliases = {"nic_speed", "nic_bandwidth", "link_speed", "nic_rate"},
       .min_value = 1,
       .max_value = limits::kMaxNicGbps},
      {.path = "cluster.fabric.tiers",
       .type = K::kInt,
       .default_value = "3",
       .description = "Switch layers of the folded Clos (ToR/leaf, spine, core)",
       .aliases = {"switch_layers", "levels", "switch_tiers"},
       .min_value = 1,
       .max_value = 5},
      {.path = "cluster.fabric.switch_radix",
       .type = K::kInt,
       .unit = "ports",
       .default_value = "64",
       .description = "Ports per switch at switch_port_gbps",
       .aliases = {"radix", "switch_ports", "ports_per_switch"},
       .min_value = 2,
       .max_value = 1024},
      {.path = "cluster.fabric.switch_port_gbps",
       .type = K::kFloat,
       .unit = "Gbit/s",
       .default_value = "400",
       .description = "Native switch port speed",
       .aliases = {"port_speed", "port_gbps", "switch_speed"},
       .min_value = 1,
       .max_value = limits::kMaxNicGbps},
      {.path = "cluster.fabric.port_split",
       .type = K::kInt,
       .default_value = "2",
       .description = "ToR downlink split (2 = each 400G port serves 2 x 200G NICs)",
       .aliases = {"split", "breakout", "port_breakout"},
       .min_value = 1,
       .max_value = 8},
      {.path = "cluster.fabric.oversubscription",
       .type = K::kFloat,
       .unit = "down:up",
       .default_value = "1",
       .description = "One down:up ratio applied at every tier that has uplinks (1 = "
                      "non-blocking)",
       .aliases = {"oversub", "oversubscription_ratio", "blocking_ratio", "oversubscribe"},
       .min_value = 1},
      {.path = "cluster.fabric.pod_gpus",
       .type = K::kInt,
       .default_value = "0",
       .description = "GPUs behind one full-bisection pod (0 = the whole fabric is one pod)",
       .aliases = {"pod_size", "gpus_per_pod"},
       .min_value = 0},
      {.path = "cluster.fabric.pods",
       .type = K::kInt,
       .default_value = "0",
       .description = "Pods joined above the pod tier (0 = as many as the radix allows)",
       .aliases = {"num_pods", "n_pods"},
       .min_value = 0},
      {.path = "cluster.fabric.above_pod_oversubscription",
       .type = K::kFloat,
       .unit = "down:up",
       .default_value = "1",
       .description = "Down:up ratio of the layer above the pods",
       .aliases = {"pod_oversubscription", "aggregation_oversubscription"},
       .min_value = 1},
      {.path = "cluster.fabric.rail_optimized",
       .type = K::kBool,
       .default_value = "true",
       .description = "NIC i of every server goes to a rail-i switch (multi-rail)",
       .aliases = {"multi_rail", "rail", "rail_optimised"}},
      {.path = "cluster.fabric.servers_per_tor",
       .type = K::kInt,
       .default_value = "0",
       .description = "Servers under one ToR (rail-optimized: under one group of one ToR per "
                      "rail); 0 = as many as the ToR's down ports hold",
       .aliases = {"servers_per_rack", "hosts_per_tor", "nodes_per_rack"},
       .min_value = 0},
      {.path = "cluster.fabric.spine_radix",
       .type = K::kInt,
       .unit = "ports",
       .default_value = "0",
       .description = "Ports of the switches above the ToR tier (modular chassis); 0 = "
                      "switch_radix",
       .aliases = {"chassis_radix", "aggregation_radix", "upper_radix"},
       .min_value = 0,
       .max_value = 4096},
      {.path = "cluster.fabric.failed_cables",
       .type = K::kInt,
       .default_value = "0",
       .description = "Switch-to-switch cables taken out of the fabric, picked at random by "
                      "cluster.fabric.failure_seed (as `trainsim topo --fail-links`); flows route "
                      "around them at flow and packet fidelity (the analytic and schedule "
                      "fidelities price collectives in closed form and do not see them)",
       .aliases = {"failed_links", "fail_links"},
       .min_value = 0},
      {.path = "cluster.fabric.failure_seed",
       .type = K::kInt,
       .default_value = "1",
       .description = "Seed of the cables cluster.fabric.failed_cables picks (the same seed "
                      "fails the same cables)",
       .min_value = 0},
      {.path = "cluster.fabric.failed_switches",
       .type = K::kString,
       .default_value = "none",
       .description = "Switches taken out of the fabric (none: no switch), by the names "
                      "`trainsim topo --export json` lists, separated by commas or '+' "
                      "(leaf0,spine3; spine0+spine1 in a --compare value); routed around at flow "
                      "and packet fidelity like cluster.fabric.failed_cables",
       .aliases = {"failed_switch", "fail_switches"}},
      {.path = "cluster.fabric.file",
       .type = K::kString,
       .default_value = "none",
       .description = "A fabric file (GraphML or GraphViz, docs/topology.md) that flow and "
                      "packet fidelity run the job on instead of the Clos the cluster.fabric "
                      "keys build (none: the built Clos); it must hold cluster.gpus GPUs in "
                      "servers of cluster.gpus_per_node. `trainsim topo --export dot` writes a "
                      "built fabric in this format, to edit",
       .aliases = {"fabric_file", "topology_file"}},

      // parallel
      {.path = "parallel.tp",
       .type = K::kInt,
       .default_value = "8",
       .description = "Tensor-parallel degree",
       .aliases = {"tensor_parallel", "tensor_model_parallel_size", "tensor_parallel_size",
                   "tp_size", "tensor", "tensor_parallelism"},
       .min_value = 1},
      {.path = "parallel.pp",
       .type = K::kInt,
       .default_value = "8",
       .description = "Pipeline stages",
       .aliases = {"pipeline_parallel", "pipeline_model_parallel_size", "pipeline_parallel_size",
                   "pp_size", "pipeline", "pipeline_parallelism", "pipeline_stages"},
       .min_value = 1},
      {.path = "parallel.dp",
       .type = K::kInt,
       .default_value = "auto",
       .description = "Data-parallel replicas; auto = cluster.gpus / (tp x pp x cp)",
       .choices = {"auto"},
       .aliases = {"data_parallel", "data_parallel_size", "dp_size", "data_parallelism"},
       .min_value = 1},
      {.path = "parallel.vpp",
       .type = K::kInt,
       .default_value = "6",
       .description = "Virtual pipeline chunks per stage (> 1 = interleaved 1F1B); auto = the "
                      "fastest count that fits in memory (analytic; the layers must divide into "
                      "pp·vpp chunks)",
       .choices = {"auto"},
       .aliases = {"virtual_pipeline", "virtual_pipeline_model_parallel_size",
                   "virtual_pipeline_parallel", "virtual_stages", "interleave", "num_model_chunks",
                   "virtual_pipeline_stages"},
       .min_value = 1},
      {.path = "parallel.cp",
       .type = K::kInt,
       .default_value = "1",
       .description = "Context-parallel degree (sequence split across GPUs in attention)",
       .aliases = {"context_parallel", "context_parallel_size", "cp_size"},
       .min_value = 1},
      {.path = "parallel.ep",
       .type = K::kInt,
       .default_value = "1",
       .description = "Expert-parallel degree, carved out of parallel.dp",
       .aliases = {"expert_parallel", "expert_model_parallel_size", "expert_parallel_size",
                   "ep_size", "moe_expert_parallel"},
       .min_value = 1},
      {.path = "parallel.sp",
       .type = K::kBool,
       .default_value = "true",
       .description = "Sequence parallelism in the TP regions (Korthikanti et al.)",
       .aliases = {"sequence_parallel", "sequence_parallelism"}},
      {.path = "parallel.zero",
       .type = K::kInt,
       .default_value = "1",
       .description = "Sharding over DP: 0 none, 1 optimizer state (Megatron distributed "
                      "optimizer), 2 + gradients, 3 + parameters",
       .aliases = {"zero_stage", "use_distributed_optimizer", "distributed_optimizer", "sharding",
                   "fsdp", "zero_optimization"},
       .min_value = 0,
       .max_value = 3},
      {.path = "parallel.schedule",
       .type = K::kEnum,
       .default_value = "auto",
       .description = "Pipeline schedule; auto = interleaved when parallel.vpp > 1, else 1f1b",
       .choices = {"auto", "gpipe", "1f1b", "interleaved"},
       .aliases = {"pipeline_schedule", "pp_schedule", "schedule_type"}},
      {.path = "parallel.first_stage_layers",
       .type = K::kInt,
       .default_value = "0",
       .description = "Layers on the first pipeline stage; 0 = an even split (Llama 3 405B: one "
                      "fewer on the first and the last stage)",
       .aliases = {"decoder_first_pipeline_num_layers", "num_layers_in_first_pipeline_stage"},
       .min_value = 0},
      {.path = "parallel.last_stage_layers",
       .type = K::kInt,
       .default_value = "0",
       .description = "Layers on the last pipeline stage; 0 = an even split",
       .aliases = {"decoder_last_pipeline_num_layers", "num_layers_in_last_pipeline_stage"},
       .min_value = 0},
      {.path = "parallel.order",
       .type = K::kEnum,
       .default_value = "tp-cp-dp-pp",
       .description = "The order ranks are numbered in, fastest first, so which groups share a "
                      "server or a pod: tp-cp-dp-pp (Megatron-LM's default; pipeline stages the "
                      "farthest apart) or tp-cp-pp-dp (Llama 3's, Megatron-LM's "
                      "--use-tp-pp-dp-mapping: a pipeline's stages close together, DP replicas "
                      "the farthest apart)",
       .choices = {"tp-cp-dp-pp", "tp-cp-pp-dp"},
       .aliases = {"rank_order", "parallel_order", "use_tp_pp_dp_mapping"}},

      // training
      {.path = "training.global_batch",
       .type = K::kInt,
       .unit = "sequences",
       .default_value = "6144",
       .description = "Sequences per iteration",
       .aliases = {"global_batch_size", "gbs", "batch_size", "train_batch_size"},
       .min_value = 1},
      {.path = "training.global_batch_tokens",
       .type = K::kSize,
       .unit = "tokens",
       .default_value = "0",
       .description = "Global batch in tokens (e.g. 16M); when > 0, training.global_batch = this "
                      "/ model.seq_len (0 = use training.global_batch)",
       .aliases = {"tokens_per_batch", "batch_tokens", "global_batch_size_tokens"},
       .min_value = 0},
      {.path = "training.micro_batch",
       .type = K::kInt,
       .unit = "sequences",
       .default_value = "1",
       .description = "Sequences per micro-batch; auto = the fastest of 1, 2, 4, 8, 16 that the "
                      "batch per replica divides into and that fits in memory (analytic, jointly "
                      "with parallel.vpp auto)",
       .choices = {"auto"},
       .aliases = {"micro_batch_size", "mbs", "train_micro_batch_size_per_gpu", "microbatch"},
       .min_value = 1},
      {.path = "training.precision",
       .type = K::kEnum,
       .default_value = "bf16",
       .description = "Datatype of the GEMMs (fp8 needs a GPU with fp8 tensor cores)",
       .choices = {"fp16", "bf16", "fp8"},
       .aliases = {"dtype", "mixed_precision", "params_dtype", "torch_dtype"}},
      {.path = "training.fp8_recipe",
       .type = K::kEnum,
       .default_value = "delayed",
       .description = "With fp8: how Transformer Engine scales each GEMM input it casts; delayed "
                      "(DelayedScaling, TE's default: norms and activations write the fp8 copy "
                      "themselves) or current (Float8CurrentScaling, NeMo's FP8-CS: every cast "
                      "first reads its input for the amax)",
       .choices = {"delayed", "current"},
       .aliases = {"fp8_scaling", "fp8_format"}},
      {.path = "training.recompute",
       .type = K::kEnum,
       .default_value = "selective",
       .description = "Activation recompute: none, selective (attention core), full (every "
                      "layer's forward, or training.recompute_layers of each model chunk), "
                      "selective-op (PyTorch per-op checkpointing with TorchTitan's policy: each "
                      "layer keeps the fused attention output and every second matmul output, "
                      "the rest runs again; CP 1, dense models, TP with SP), or auto (the least "
                      "recompute that fits in memory: none, the framework's selective "
                      "(framework.selective_recompute), full of 1, 2, ... layers per model chunk, "
                      "full; selective-op is tried where its replayed FLOPs fall among full's)",
       .choices = {"auto", "none", "selective", "full", "selective-op"},
       .aliases = {"recompute_granularity", "activation_checkpointing", "checkpoint_activations",
                   "recompute_activations", "gradient_checkpointing"}},
      {.path = "training.recompute_layers",
       .type = K::kInt,
       .default_value = "0",
       .description = "With full recompute: recompute only this many layers of each model chunk "
                      "(of each pipeline stage when not interleaved; Megatron-Core's "
                      "--recompute-method block, whose --recompute-num-layers counts per virtual "
                      "pipeline stage); 0 = every layer",
       .aliases = {"recompute_num_layers", "recompute_method"},
       .min_value = 0},
      {.path = "training.cpu_offload_layers",
       .type = K::kInt,
       .default_value = "0",
       .description = "Activation offloading (Megatron-Core's cpu_offloading_num_layers, "
                      "Transformer Engine's CPU offload): the activations of the first N layers "
                      "are copied to host memory in the forward pass and back for the backward, "
                      "over the GPU's host link, overlapped with compute; at most layers - N "
                      "layers' activations stay on the GPU. Needs pipeline parallelism 1 and no "
                      "activation recompute, as Megatron-Core requires; 0 = off",
       .aliases = {"cpu_offloading_num_layers", "activation_offload_layers", "offload_layers"},
       .min_value = 0},
      {.path = "training.optimizer",
       .type = K::kEnum,
       .default_value = "auto",
       .description = "Optimizer; auto = lamb when optimizations.lamb is true, else adam",
       .choices = {"auto", "adam", "lamb"},
       .aliases = {"optim", "optimizer_type"}},
      {.path = "training.grad_reduce_dtype",
       .type = K::kEnum,
       .default_value = "fp32",
       .description = "Datatype of the DP gradient reduction",
       .choices = {"fp32", "bf16", "fp16"},
       .aliases = {"grad_reduce_in_fp32", "grad_dtype", "reduce_dtype",
                   "accumulate_allreduce_grads_in_fp32"}},

      // framework: a dated, versioned capability set (scenarios/frameworks.h, docs/presets.md)
      {.path = "framework.preset",
       .type = K::kEnum,
       .default_value = "auto",
       .description = "The training framework and version the run uses; it sets sequence "
                      "parallelism, ZeRO/distributed optimizer and its group, the attention "
                      "kernel, the default recompute, the overlaps and the DP bucket rule unless "
                      "those keys are given. auto = the preset optimizations.system names",
       .choices = with_auto(framework_names()),
       .aliases = {"framework", "framework_version", "software", "stack"}},
      {.path = "framework.attention_kernel",
       .type = K::kEnum,
       .default_value = "auto",
       .description = "Attention kernel: unfused (QKᵀ GEMM, softmax, ·V GEMM over the full s×s "
                      "matrix), flash2, flash3, cudnn or triton (FlashAttention's Triton kernel "
                      "of 2022, as MPT ran it) (fused: masked tiles skipped, no scores stored; "
                      "each at its own rate where the profile rates it). auto = the framework's "
                      "fused kernel when optimizations.efficient_operators is on, unfused "
                      "otherwise",
       .choices = {"auto", "unfused", "flash2", "flash3", "cudnn", "triton"},
       .aliases = {"attention_backend", "attention_impl", "attn_implementation", "sdpa_backend"}},
      {.path = "framework.cross_entropy",
       .type = K::kEnum,
       .default_value = "unfused",
       .description = "Cross-entropy over the vocab-parallel logits: unfused (Megatron's "
                      "VocabParallelCrossEntropy as separate ops, 38 + 14 B per 16-bit logit), "
                      "native (Megatron-Core's fused_vocab_parallel_cross_entropy, 22 + 6 B) or "
                      "te (Transformer Engine's Triton parallel cross-entropy, 6 + 4 B)",
       .choices = {"unfused", "native", "te"},
       .aliases = {"cross_entropy_fusion_impl", "cross_entropy_loss_fusion", "loss_fusion"}},
      {.path = "framework.rope",
       .type = K::kEnum,
       .default_value = "fused",
       .description = "How rotary position embeddings (model.position rope) rotate the queries "
                      "and keys: fused (one kernel per tensor each way: Transformer Engine's "
                      "fused RoPE, Megatron-Core's default since 2024-01, torch.compile), "
                      "unfused (Megatron's apply_rotary_pos_emb as PyTorch ops, six kernels and "
                      "24 B per 16-bit element forward, seven and 26 B backward) or complex "
                      "(Meta's reference Llama code as TorchTitan runs it eagerly: fp32 complex "
                      "multiply, three kernels and 20 B each way); none prices no rotation (what the "
                      "Program ran before program-22, and records made then)",
       .choices = {"fused", "unfused", "complex", "none"},
       .aliases = {"apply_rope_fusion", "rope_fusion", "rotary_impl"}},
      {.path = "framework.activation",
       .type = K::kEnum,
       .default_value = "fused",
       .description = "How a SwiGLU MLP's activation runs: fused (SiLU and the product in one "
                      "kernel: Megatron-Core's bias_swiglu_impl, default since 2024-01; "
                      "Transformer Engine) or unfused (F.silu then the product as two PyTorch "
                      "ops, 10 B per 16-bit element forward and 18 B backward, SiLU's output "
                      "kept for backward: eager PyTorch, Megatron-LM before 2024-01). GeLU "
                      "MLPs move the same bytes either way",
       .choices = {"fused", "unfused"},
       .aliases = {"bias_swiglu_fusion", "swiglu_fusion", "activation_fusion"}},
      {.path = "framework.gqa_kv",
       .type = K::kEnum,
       .default_value = "native",
       .description = "How attention reads GQA keys and values (kv_heads < heads): native (the "
                      "kernel shares each key/value head among its query heads: FlashAttention, "
                      "cuDNN, Transformer Engine) or repeat (copied to every query head before "
                      "the attention call and saved so, as TorchTitan's repeat_kv does for "
                      "PyTorch's scaled_dot_product_attention before 2.5)",
       .choices = {"native", "repeat"},
       .aliases = {"repeat_kv", "enable_gqa"}},
      {.path = "framework.selective_recompute",
       .type = K::kEnum,
       .default_value = "attention",
       .description = "The framework's own selective recompute, what training.recompute auto and "
                      "sweep --auto try between none and full: attention (Megatron's attention "
                      "core, training.recompute selective; Megatron-LM since 2022-05), op "
                      "(PyTorch's per-op activation checkpointing with TorchTitan's policy, "
                      "selective-op) or none (the framework has neither: DeepSpeed, LLM Foundry, "
                      "Megatron-LM of 2021). Set by the framework preset; a run that states its "
                      "recompute is simulated as stated",
       .choices = {"attention", "op", "none"},
       .aliases = {"selective_ac_option", "selective_recompute_mode"}},
      {.path = "framework.shard_group",
       .type = K::kEnum,
       .default_value = "dp",
       .description = "The group ZeRO / the distributed optimizer shards over: dp, or dp_cp "
                      "(Megatron-Core since October 2023: the CP ranks of a replica share it). "
                      "ZeRO-2/3 with CP > 1 shards over dp_cp, the group its collectives run "
                      "over: a default or preset dp becomes dp_cp there, a stated dp is refused",
       .choices = {"dp", "dp_cp"},
       .aliases = {"data_parallel_group_with_cp", "dist_opt_group"}},
      {.path = "framework.sp_wgrad_input",
       .type = K::kEnum,
       .default_value = "regather",
       .description = "Under sequence parallelism, what a column-parallel layer (QKV, MLP up) "
                      "keeps of its all-gathered input for the weight gradient: regather (its own "
                      "s/tp rows, all-gathered again in backward beside the input-gradient GEMM: "
                      "Megatron-LM since 2022, Transformer Engine) or saved (the whole gathered "
                      "tensor, tp times the memory, no second all-gather: PyTorch DTensor TP, "
                      "TorchTitan)",
       .choices = {"regather", "saved"},
       .aliases = {"sp_backward_input", "save_gathered_input"}},
      {.path = "framework.dp_buckets",
       .type = K::kEnum,
       .default_value = "scaled",
       .description = "DP gradient buckets: fixed-40m (40 M parameters, Megatron before "
                      "Megatron-Core 0.7) or scaled (max(40 M, 1 M x DP) parameters)",
       .choices = {"fixed-40m", "scaled"},
       .aliases = {"ddp_bucket_size", "bucket_size", "reduce_bucket_size"}},
      {.path = "framework.tp_overlap_method",
       .type = K::kEnum,
       .default_value = "decomposed",
       .description = "How TP overlap hides a TP collective: decomposed (the GEMM beside it split "
                      "into TP pieces pipelined with the collective's pieces) or bulk (the "
                      "collective beside an independent GEMM; only backward has one)",
       .choices = {"decomposed", "bulk"},
       .aliases = {"tp_comm_overlap_method", "ub_overlap_method"}},
      {.path = "framework.tp_async_backward",
       .type = K::kBool,
       .default_value = "false",
       .description = "Without optimizations.tp_overlap, the backward's TP collectives still run "
                      "beside the GEMM that does not need them (the input's SP re-gather beside "
                      "the input-gradient GEMM, the input gradient's reduce-scatter or all-reduce "
                      "beside the weight-gradient GEMM): Megatron-LM's asynchronous "
                      "tensor-parallel communication with CUDA_DEVICE_MAX_CONNECTIONS=1 (2021-09, "
                      "with SP from 2022-05); the forward's stay exposed",
       .aliases = {"async_tensor_model_parallel_allreduce", "tp_async_grad"}},
      {.path = "framework.tp_overlap_sms",
       .type = K::kInt,
       .default_value = "0",
       .description = "SMs the TP overlap's communication kernels hold beside the GEMMs they "
                      "overlap (optimizations.tp_overlap): Transformer Engine's userbuffers take "
                      "16 by default (num_sm of its pipelined and bulk overlaps; its ring exchange "
                      "copies by copy engine). 0 = as an NCCL collective (collectives.comm_sms)",
       .aliases = {"tp_comm_overlap_sms", "ub_num_sm"},
       .min_value = 0,
       .max_value = 1024},
      {.path = "framework.fsdp_copy_out",
       .type = K::kBool,
       .default_value = "false",
       .description = "After each parameter all-gather of ZeRO / FSDP, the gathered buffer is "
                      "copied out into the unsharded parameters on the compute stream (read and "
                      "written once, 4 B a bf16 parameter): PyTorch FSDP2's "
                      "foreach_all_gather_copy_out (per-parameter sharding). false: the "
                      "parameters are views of the gathered buffer (FSDP1's flat parameter, "
                      "Megatron's parameter buffer, DeepSpeed's partitions)",
       .aliases = {"all_gather_copy_out", "param_copy_out"}},
      {.path = "framework.fsdp_copy_in",
       .type = K::kBool,
       .default_value = "false",
       .description = "Before each gradient reduce-scatter of ZeRO / FSDP, the bucket's 16-bit "
                      "gradients are copied into a flat buffer in the reduce dtype (2 B read and "
                      "2 or 4 B written a parameter), and the compute stream waits for the copy: "
                      "PyTorch FSDP2's foreach_reduce_scatter_copy_in. false: the gradients "
                      "already sit in the reduced buffer (Megatron's grad buffer, FSDP1's flat "
                      "parameter)",
       .aliases = {"reduce_scatter_copy_in", "grad_copy_in"}},
      {.path = "framework.grad_scale_pass",
       .type = K::kBool,
       .default_value = "false",
       .description = "Before each gradient all-reduce or reduce-scatter the bucket's gradients "
                      "are divided by the data-parallel size in a pass of their own on the "
                      "compute stream, read and written in the reduce dtype: Megatron-LM's "
                      "`gbuf.data /= dp` (2022-2023) and Megatron-Core's bucket scaling before "
                      "the collective (until --ddp-average-in-collective, 2024-06, which NeMo 2 "
                      "turns on); at ZeRO 0/1, Megatron's own reductions. false: the collective "
                      "averages (NCCL's avg) or the scaling is elsewhere",
       .aliases = {"gradient_scaling_pass", "grad_prescale"}},
      {.path = "framework.zero_grad_buffer",
       .type = K::kBool,
       .default_value = "false",
       .description = "Every step zeroes the rank's whole gradient buffer (its parameters' "
                      "gradients in the reduce dtype; the shard of them at ZeRO-2/3) with a "
                      "memset on the compute stream, counted in the optimizer step: "
                      "Megatron-LM's zero_grad_buffer() at the start of train_step (contiguous "
                      "buffers since 2021-03), DeepSpeed's BF16_Optimizer.clear_hp_grads(). "
                      "false: the gradients are freed instead (PyTorch's "
                      "zero_grad(set_to_none=True): FSDP, DeepSpeed's ZeRO optimizer)",
       .aliases = {"zero_grad_memset"}},
      {.path = "framework.pp_activation",
       .type = K::kEnum,
       .default_value = "scatter-gather",
       .description = "How a pipeline boundary's activation travels when sequence parallelism is "
                      "off (with it each TP rank sends its s/t shard): scatter-gather (each TP "
                      "rank sends 1/t through its own NIC, the receivers all-gather it over the "
                      "TP group before computing: Megatron-LM 2021-02 to 2023-03) or full (every "
                      "TP rank sends the whole tensor: Megatron-Core from 23.04)",
       .choices = {"scatter-gather", "full"},
       .aliases = {"scatter_gather_tensors_in_pipeline", "p2p_scatter_gather"}},
      {.path = "framework.grad_accumulation",
       .type = K::kEnum,
       .default_value = "in-gemm",
       .description = "How weight gradients are summed over micro-batches: in-gemm (the "
                      "weight-gradient GEMM adds into the buffer: Megatron-LM's gradient "
                      "accumulation fusion, default since 2022-02), add-16bit (autograd adds "
                      "each new gradient into the 16-bit .grad, one pass of 6 B per parameter "
                      "from the second micro-batch) or add-fp32 (into an fp32 accumulator: 6 B "
                      "the first micro-batch, 10 B the others)",
       .choices = {"in-gemm", "add-16bit", "add-fp32"},
       .aliases = {"gradient_accumulation_fusion", "grad_accumulation_fusion"}},
      {.path = "framework.cp_comm",
       .type = K::kEnum,
       .default_value = "p2p",
       .description = "How context parallelism exchanges K and V: p2p (a ring of pieces, each "
                      "overlapped with an attention block: Transformer Engine's default) or "
                      "all-gather (K and V all-gathered before attention and their gradients "
                      "reduce-scattered after it, exposed: Llama 3)",
       .choices = {"p2p", "all-gather"},
       .aliases = {"cp_comm_type", "context_parallel_comm"}},

      // costs that grow with the number of GPUs (sim/exec/scale.h, docs/scale.md)
      {.path = "scale.gpu_speed_sigma",
       .type = K::kFloat,
       .default_value = "0.01",
       .description = "Standard deviation of persistent per-GPU speed; the step runs at the "
                      "slowest of N GPUs' pace (0 = off)",
       .aliases = {"gpu_variation", "speed_variation", "gpu_speed_variation"},
       .min_value = 0,
       .max_value = 0.5},
      {.path = "scale.global_sync",
       .type = K::kBool,
       .default_value = "true",
       .description = "Price the per-step all-rank agreements (gradient-norm all-reduce, fp16 "
                      "found-inf check, loss average)",
       .aliases = {"grad_norm_allreduce", "global_barrier"}},

      // optimizations
      {.path = "optimizations.system",
       .type = K::kEnum,
       .default_value = "megascale",
       .description = "Alias of a framework preset (framework.preset auto follows it): megatron = "
                      "megatron-lm-2023, megascale = megascale-2024, nemo = nemo-2024, deepspeed "
                      "= deepspeed-2023, none = every lever off",
       .choices = {"none", "megatron", "megascale", "nemo", "deepspeed"},
       .aliases = {"optimization_preset"}},
      {.path = "optimizations.tp_overlap",
       .type = K::kBool,
       .default_value = "false",
       .description = "TP/SP all-gather and reduce-scatter overlapped with the GEMMs; needs "
                      "parallel.sp when TP > 1 (Megatron-LM refuses it without)",
       .aliases = {"tp_comm_overlap", "overlap_tp", "tp_overlap_comm"}},
      {.path = "optimizations.pp_overlap",
       .type = K::kBool,
       .default_value = "false",
       .description = "Pipeline send/recv taken off the critical path",
       .aliases = {"overlap_p2p_comm", "overlap_pp", "pp_comm_overlap"}},
      {.path = "optimizations.dp_overlap",
       .type = K::kBool,
       .default_value = "false",
       .description = "DP reduce-scatter during backward and parameter all-gather prefetch",
       .aliases = {"overlap_grad_reduce", "overlap_param_gather", "overlap_dp", "dp_comm_overlap"}},
      {.path = "optimizations.efficient_operators",
       .type = K::kBool,
       .default_value = "false",
       .description = "The framework's fused attention kernel (framework.attention_kernel auto); "
                      "norms, activations and residual adds stay one kernel each",
       .aliases = {"fused_kernels", "kernel_fusion", "flash_attention", "use_flash_attn",
                   "fused_operators"}},
      {.path = "optimizations.async_data_pipeline",
       .type = K::kBool,
       .default_value = "false",
       .description = "Data loading overlapped with the previous iteration",
       .aliases = {"data_pipeline", "async_data", "dataloader_overlap", "async_dataloader"}},
      {.path = "optimizations.lamb",
       .type = K::kBool,
       .default_value = "false",
       .description = "LAMB optimizer, which keeps convergence at a larger global batch",
       .aliases = {"use_lamb", "lamb_optimizer"}},
      {.path = "optimizations.sliding_window",
       .type = K::kBool,
       .default_value = "false",
       .description = "Attention limited to model.attention_window tokens",
       .aliases = {"swa", "use_sliding_window", "sliding_window_attention"}},
      {.path = "optimizations.parallel_block",
       .type = K::kBool,
       .default_value = "false",
       .description = "Parallel transformer block: attention and MLP read the same norm output",
       .aliases = {"parallel_attention", "parallel_transformer_block", "use_parallel_residual",
                   "parallel_residual"}},

      {.path = "optimizations.fast_comm_init",
       .type = K::kBool,
       .default_value = "false",
       .description = "MegaScale's fast communicator initialization: a Redis-like asynchronous "
                      "store and group creation ordered to avoid global barriers (start-up time "
                      "only; reported as startup.comm_init_s)",
       .aliases = {"fast_init", "redis_store", "comm_init"}},

      // collectives
      {.path = "collectives.algorithm",
       .type = K::kEnum,
       .default_value = "auto",
       .description = "NCCL algorithm for all-reduce, as NCCL_ALGO: auto = the fastest (NCCL's "
                      "tuner), or ring, tree, nvls (NVLS only on GPUs with NVLink SHARP)",
       .choices = {"auto", "ring", "tree", "nvls"},
       .aliases = {"nccl_algo", "algo", "algorithm"}},
      {.path = "collectives.protocol",
       .type = K::kEnum,
       .default_value = "auto",
       .description = "NCCL protocol, as NCCL_PROTO: auto = the fastest, or LL, LL128, Simple",
       .choices = {"auto", "LL", "LL128", "Simple"},
       .aliases = {"nccl_proto", "proto", "protocol"}},
      {.path = "collectives.p2p_net_channels",
       .type = K::kInt,
       .default_value = "0",
       .description = "NCCL channels per point-to-point peer over the network, as "
                      "NCCL_NCHANNELS_PER_NET_PEER (NCCL before 2.12: 1); each moves at most "
                      "14 GB/s (NCCL's NCCL_P2P_PER_CHANNEL_NET_BW). 0 = enough to fill the NIC. "
                      "A framework preset sets its NCCL's count (1 or 2, docs/presets.md), as the "
                      "built-in default scenario's megascale-2024 does: 2, 28 GB/s",
       .aliases = {"nchannels_per_net_peer", "p2p_channels"},
       .min_value = 0,
       .max_value = 64},
      {.path = "collectives.comm_sms",
       .type = K::kInt,
       .default_value = "0",
       .description = "SMs an NCCL collective holds while it transfers: its channels, one "
                      "thread block each (as NCCL_MAX_CTAS / NCCL_MAX_NCHANNELS cap them); a "
                      "compute kernel beside it runs on the rest. 0 = NCCL's own count on the "
                      "GPU's server (the calibration profile's collectives.nccl_channels; 24 "
                      "where the profile has none). TP overlap kernels: framework.tp_overlap_sms",
       .aliases = {"nccl_ctas", "comm_ctas"},
       .min_value = 0,
       .max_value = 1024},


      // congestion control (sim/network/congestion.h; docs/network-model.md §4–5). [D] marks a
      // flow-level parameter derived from the mechanism, to be fitted against a packet level.
      {.path = "network.congestion_control",
       .type = K::kEnum,
       .default_value = "ideal",
       .description = "Flow-level congestion-control model: ideal (exact max-min), dcqcn, swift, "
                      "megascale (the Swift + DCQCN hybrid)",
       .choices = {"ideal", "dcqcn", "swift", "megascale"},
       .aliases = {"cc", "congestion", "congestion_control_algorithm"}},
      {.path = "network.dcqcn.contended_efficiency",
       .type = K::kFloat,
       .default_value = "0.95",
       .description = "Fraction of a link two or more dcqcn flows get [D]",
       .min_value = 0,
       .max_value = 1,
       .min_exclusive = true},
      {.path = "network.dcqcn.incast_penalty",
       .type = K::kFloat,
       .default_value = "0.06",
       .description = "Efficiency lost per doubling of the flows sharing a link beyond 2 [D]",
       .min_value = 0,
       .max_value = 1},
      {.path = "network.swift.contended_efficiency",
       .type = K::kFloat,
       .default_value = "1",
       .description = "Fraction of a link two or more swift flows get [F: packet incasts]",
       .min_value = 0,
       .max_value = 1,
       .min_exclusive = true},
      {.path = "network.swift.incast_penalty",
       .type = K::kFloat,
       .default_value = "0",
       .description = "Efficiency lost per doubling of the flows sharing a link beyond 2 [F]",
       .min_value = 0,
       .max_value = 1},
      {.path = "network.megascale.contended_efficiency",
       .type = K::kFloat,
       .default_value = "0.995",
       .description = "Fraction of a link two or more megascale flows get [F: packet incasts]",
       .min_value = 0,
       .max_value = 1,
       .min_exclusive = true},
      {.path = "network.megascale.incast_penalty",
       .type = K::kFloat,
       .default_value = "0",
       .description = "Efficiency lost per doubling of the flows sharing a link beyond 2 [F]",
       .min_value = 0,
       .max_value = 1},
      {.path = "network.dcqcn.rate_increase_timer",
       .type = K::kFloat,
       .unit = "us",
       .default_value = "55",
       .description = "DCQCN rate-increase timer period T (HPCC ns-3 dcqcn_paper set)",
       .min_value = 0,
       .max_value = limits::kMaxControlTime_us,
       .min_exclusive = true},
      {.path = "network.dcqcn.fast_recovery_steps",
       .type = K::kInt,
       .default_value = "5",
       .description = "DCQCN fast-recovery timer periods F",
       .min_value = 0},
      {.path = "network.dcqcn.rate_ai",
       .type = K::kFloat,
       .unit = "MB/s",
       .default_value = "5",
       .description = "DCQCN additive-increase step R_AI",
       .min_value = 0,
       .min_exclusive = true},
      {.path = "network.dcqcn.rate_hai",
       .type = K::kFloat,
       .unit = "MB/s",
       .default_value = "50",
       .description = "DCQCN hyper-increase step R_HAI",
       .min_value = 0,
       .min_exclusive = true},
      // The packet level (sim/network/packet_network.h; docs/network.md "Packet level").
      {.path = "network.packet.mtu_bytes",
       .type = K::kInt,  // a packet carries whole bytes (4096.5 ran)
       .unit = "bytes",
       .default_value = "4096",
       .description = "Packet level: payload bytes per packet (RoCE MTU)",
       .min_value = 64,
       .max_value = 65536},
      {.path = "network.packet.buffer_bytes",
       .type = K::kFloat,
       .unit = "bytes",
       .default_value = "1048576",
       .description = "Packet level: buffer per ingress link of a switch [D]",
       .min_value = 64},
      {.path = "network.packet.pfc",
       .type = K::kBool,
       .default_value = "true",
       .description = "Packet level: PFC pauses an ingress link above pfc_xoff_bytes (lossless)"},
      {.path = "network.packet.pfc_xoff_bytes",
       .type = K::kFloat,
       .unit = "bytes",
       .default_value = "524288",
       .description = "Packet level: PFC XOFF threshold per ingress link [D]",
       .min_value = 64},
      {.path = "network.packet.pfc_xon_bytes",
       .type = K::kFloat,
       .unit = "bytes",
       .default_value = "516096",
       .description = "Packet level: PFC XON threshold per ingress link [D]",
       .min_value = 0},
      {.path = "network.packet.kmin_bytes",
       .type = K::kFloat,
       .unit = "bytes",
       .default_value = "5000",
       .description = "Packet level: ECN marking starts above this queue (DCQCN paper)",
       .min_value = 0},
      {.path = "network.packet.kmax_bytes",
       .type = K::kFloat,
       .unit = "bytes",
       .default_value = "200000",
       .description = "Packet level: every packet is marked above this queue (DCQCN paper)",
       .min_value = 0},
      {.path = "network.packet.pmax",
       .type = K::kFloat,
       .default_value = "0.01",
       .description = "Packet level: marking probability at kmax_bytes (DCQCN paper)",
       .min_value = 0,
       .max_value = 1},
      {.path = "network.packet.dcqcn_g",
       .type = K::kFloat,
       .default_value = "0.00390625",
       .description = "Packet level: DCQCN's α gain g (DCQCN paper, 1/256)",
       .min_value = 0,
       .max_value = 1,
       .min_exclusive = true},
      {.path = "network.packet.alpha_timer",
       .type = K::kFloat,
       .unit = "us",
       .default_value = "55",
       .description = "Packet level: DCQCN's α update period (DCQCN paper)",
       .min_value = 0,
       .max_value = limits::kMaxControlTime_us,
       .min_exclusive = true},
      {.path = "network.packet.cnp_interval",
       .type = K::kFloat,
       .unit = "us",
       .default_value = "50",
       .description = "Packet level: at most one CNP per flow per interval (DCQCN paper)",
       .min_value = 0,
       .max_value = limits::kMaxControlTime_us},
      {.path = "network.packet.byte_counter_bytes",
       .type = K::kFloat,
       .unit = "bytes",
       .default_value = "10000000",
       .description = "Packet level: DCQCN's byte counter B (DCQCN paper, 10 MB)",
       .min_value = 1},
      {.path = "network.packet.dcqcn_clamp_target_always",
       .type = K::kBool,
       .default_value = "true",
       .description = "Packet level: every CNP resets DCQCN's target rate (the paper); false = "
                      "only the first CNP after an increase (ConnectX clamp_tgt_rate 0)"},
      {.path = "network.packet.swift_beta",
       .type = K::kFloat,
       .default_value = "0.8",
       .description = "Packet level: Swift's multiplicative-decrease factor beta [D: csg-htsim default]",
       .min_value = 0,
       .max_value = 1,
       .min_exclusive = true},
      {.path = "network.packet.swift_max_mdf",
       .type = K::kFloat,
       .default_value = "0.5",
       .description = "Packet level: Swift's largest cut per RTT [D: csg-htsim default]",
       .min_value = 0,
       .max_value = 1,
       .min_exclusive = true,
       .max_exclusive = true},
      {.path = "network.packet.swift_hop_scale",
       .type = K::kFloat,
       .unit = "us",
       .default_value = "1.36",
       .description = "Packet level: Swift's target delay per switch passed [D]",
       .min_value = 0,
       .max_value = limits::kMaxControlTime_us},
      {.path = "network.packet.swift_fs_range",
       .type = K::kFloat,
       .default_value = "5",
       .description = "Packet level: Swift's flow-scaling range, times the base target [D: csg-htsim default]",
       .min_value = 0},
      {.path = "network.packet.swift_fs_min_cwnd",
       .type = K::kFloat,
       .unit = "packets",
       .default_value = "0.1",
       .description = "Packet level: window at which flow scaling is largest [D: csg-htsim default]",
       .min_value = 0,
       .min_exclusive = true},
      {.path = "network.packet.swift_fs_max_cwnd",
       .type = K::kFloat,
       .unit = "packets",
       .default_value = "100",
       .description = "Packet level: window above which flow scaling is zero [D: csg-htsim default]",
       .min_value = 0,
       .min_exclusive = true},
      {.path = "network.packet.swift_min_cwnd",
       .type = K::kFloat,
       .unit = "packets",
       .default_value = "0.001",
       .description = "Packet level: smallest Swift window (below one packet the sender paces) [D]",
       .min_value = 0,
       .min_exclusive = true},
      {.path = "network.packet.swift_max_cwnd",
       .type = K::kFloat,
       .unit = "packets",
       .default_value = "1000",
       .description = "Packet level: largest Swift window [D]",
       .min_value = 1},
      {.path = "network.packet.priority_classes",
       .type = K::kInt,
       .default_value = "1",
       .description = "Packet level: priority classes per port (IEEE 802.1Q, 1 to 8), served in "
                      "strict priority with ECN and PFC per class",
       .min_value = 1,
       .max_value = 8},
      {.path = "network.packet.priority_by",
       .type = K::kEnum,
       .default_value = "none",
       .description = "Packet level: which traffic goes in which class: none (all in class 0), "
                      "job (job i in class i), dimension (TP, CP, EP, PP, DP in classes 0-4); "
                      "classes beyond the last share it",
       .choices = {"none", "job", "dimension"}},
      {.path = "network.packet.scheduling",
       .type = K::kEnum,
       .default_value = "strict",
       .description = "Packet level: service between a switch port's classes: strict priority "
                      "(class 0 first) or ets (IEEE 802.1Qaz: deficit round robin with "
                      "network.packet.class_weights)",
       .choices = {"strict", "ets"}},
      {.path = "network.packet.class_weights",
       .type = K::kString,
       .default_value = "1,1,1,1,1,1,1,1",
       .description = "Packet level, ets: the classes' weights, comma-separated from class 0 "
                      "(a backlogged class gets its weight's share of the link; missing ones "
                      "are 1)"},
      {.path = "network.swift.base_rtt",
       .type = K::kFloat,
       .unit = "us",
       .default_value = "10",
       .description = "Unloaded fabric round-trip time [D]",
       .min_value = 0,
       .max_value = limits::kMaxControlTime_us,
       .min_exclusive = true},
      {.path = "network.swift.additive_increase",
       .type = K::kFloat,
       .unit = "packets",
       .default_value = "1",
       .description = "Window increase per RTT [D]",
       .min_value = 0,
       .min_exclusive = true},
      {.path = "network.swift.mtu_bytes",
       .type = K::kFloat,
       .unit = "bytes",
       .default_value = "4096",
       .description = "Bytes per packet (RoCE MTU)",
       .min_value = 1,
       .max_value = limits::kMaxMtuBytes},
      {.path = "network.megascale.base_rtt",
       .type = K::kFloat,
       .unit = "us",
       .default_value = "10",
       .description = "Unloaded fabric round-trip time [D]",
       .min_value = 0,
       .max_value = limits::kMaxControlTime_us,
       .min_exclusive = true},
      {.path = "network.megascale.additive_increase",
       .type = K::kFloat,
       .unit = "packets",
       .default_value = "1",
       .description = "Window increase per RTT [D]",
       .min_value = 0,
       .min_exclusive = true},
      {.path = "network.megascale.mtu_bytes",
       .type = K::kFloat,
       .unit = "bytes",
       .default_value = "4096",
       .description = "Bytes per packet (RoCE MTU)",
       .min_value = 1,
       .max_value = limits::kMaxMtuBytes},
      {.path = "network.retransmit.timeout",
       .type = K::kInt,
       .default_value = "20",
       .description = "RoCE retransmit-timeout exponent t: RTO = 4.096 us x 2^t (NCCL_IB_TIMEOUT; MegaScale tuned it)",
       .min_value = 0,
       .max_value = 31},
      {.path = "network.retransmit.retry_count",
       .type = K::kInt,
       .default_value = "7",
       .description = "Retries before a connection fails (NCCL_IB_RETRY_CNT, at most 7)",
       .min_value = 0,
       .max_value = 7},

      // network
      {.path = "network.routing.mode",
       .type = K::kEnum,
       .default_value = "ecmp",
       .description = "How a flow's path is chosen among the equal-cost paths: ecmp (per-switch "
                      "hash of the 5-tuple), pinned (by the destination's ToR port), spray "
                      "(packet spraying over all paths: an even split in `topo`, a random path per "
                      "packet at packet fidelity, refused at flow fidelity), least-loaded (greedy "
                      "placement)",
       .choices = {"ecmp", "pinned", "spray", "least-loaded"},
       .aliases = {"routing", "load_balancing", "path_selection", "lb_mode"}},
      {.path = "network.routing.hash",
       .type = K::kEnum,
       .default_value = "crc32",
       .description = "Switch ECMP hash of the RoCEv2 5-tuple (docs/topology.md)",
       .choices = {"crc32", "xor-fold", "toeplitz"},
       .aliases = {"hash_algorithm", "ecmp_hash", "hash_function"}},
      {.path = "network.routing.qps_per_connection",
       .type = K::kInt,
       .default_value = "1",
       .description = "Queue pairs per NCCL connection, each its own ECMP flow "
                      "(NCCL_IB_QPS_PER_CONNECTION)",
       .aliases = {"NCCL_IB_QPS_PER_CONNECTION", "qps", "qps_per_conn", "ib_qps_per_connection"},
       .min_value = 1,
       .max_value = 1024},
      {.path = "network.routing.seed",
       .type = K::kInt,
       .default_value = "0",
       .description = "Base seed of the switch hash functions",
       .aliases = {"hash_seed", "ecmp_seed", "universal_id"},
       .min_value = 0,
       .max_value = 4294967295.0},
      {.path = "network.ring_lockstep",
       .type = K::kBool,
       .default_value = "true",
       .description = "Flow fidelity: each NCCL ring channel's queue pair is one flow over all its "
                      "edges, at the slowest edge's pace (a ring forwards step by step, at most "
                      "NCCL_STEPS slots ahead; docs/network-model.md §3.1); false: an independent "
                      "flow per edge (the model before program-6)",
       .aliases = {"ring_lock_step", "lockstep_rings"}},
      {.path = "network.routing.seed_scope",
       .type = K::kEnum,
       .default_value = "per-switch",
       .description = "Seeds of the switch hashes: global (one for all switches: hash "
                      "polarization), per-tier, or per-switch",
       .choices = {"global", "per-tier", "per-switch"},
       .aliases = {"hash_seed_scope", "seed_per"}},

      // simulation
      {.path = "simulation.fidelity",
       .type = K::kEnum,
       .default_value = "analytic",
       .description = "analytic (closed form, no event core), schedule (every rank's Program on "
                      "the event core, closed-form communication), flow (the same with max-min "
                      "fluid flows over ECMP paths) or packet (the same Program over switch queues with "
                      "ECN, PFC and the congestion-control algorithms; docs/network.md)",
       .choices = {"analytic", "schedule", "flow", "packet"},
       .aliases = {"backend", "network_model", "network_backend"}},
      {.path = "simulation.symmetry",
       .type = K::kBool,
       .default_value = "true",
       .description = "Symmetry shortcut of the event-driven fidelities: one actor per pipeline "
                      "stage while every rank behaves alike (switches itself off for stragglers "
                      "and jitter); false runs every rank (docs/program.md)",
       .aliases = {"symmetry_shortcut", "lockstep"}},
      {.path = "simulation.jitter",
       .type = K::kFloat,
       .default_value = "0",
       .description = "Per-rank random spread of compute task times (log-normal sigma, mean 1); "
                      "event-driven fidelities only",
       .aliases = {"compute_jitter", "noise"},
       .min_value = 0,
       .max_value = 1},
      {.path = "simulation.straggler_rank",
       .type = K::kInt,
       .default_value = "-1",
       .description = "A slow GPU: this rank's compute takes straggler_factor times as long "
                      "(-1: none); event-driven fidelities only",
       .aliases = {"slow_rank", "straggler"},
       .min_value = -1},
      {.path = "simulation.straggler_host",
       .type = K::kInt,
       .default_value = "-1",
       .description = "A slow server: every GPU of this server index is slowed by "
                      "straggler_factor (-1: none)",
       .aliases = {"slow_host", "slow_server"},
       .min_value = -1},
      {.path = "simulation.straggler_factor",
       .type = K::kFloat,
       .default_value = "1",
       .description = "Slow-down of the straggler's compute (1.25 = 25 % slower)",
       .aliases = {"slowdown", "straggler_slowdown"},
       .min_value = 0.01,
       .max_value = 100},
      {.path = "simulation.seed",
       .type = K::kInt,
       .default_value = "1",
       .description = "Seed of the simulation's random number generator",
       .aliases = {"random_seed", "rng_seed"},
       .min_value = 0},

      // calibration
      {.path = "calibration.profile",
       .type = K::kString,
       .default_value = "datasheet",
       .description = "Compute and communication speeds: `datasheet` = the GPU's built-in "
                      "profile, `datasheet-GPU` a built-in profile by name (`trainsim info` "
                      "lists them), else the path of a profile JSON",
       .aliases = {"calibration_profile", "profile_path"}},
  };
  const std::vector<KeyDef> reliability = reliability_keys();  // schema_reliability.cpp
  keys.insert(keys.end(), reliability.begin(), reliability.end());
  return keys;
}

// Lower case with `-` read as `_`, so that `--tensor-model-parallel-size` style names and key
// spellings compare equal.
std::string fold(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (c == '-') c = '_';
  }
  return out;
}

// Optimal string alignment distance: edits, with a swap of neighbours counting as one.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  const std::size_t n = a.size();
  const std::size_t m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

constexpr std::size_t kNoMatch = static_cast<std::size_t>(-1);

// How far `wrong` is from `target` (both folded), or kNoMatch when too far to suggest. About
// one edit in three characters is still a typo; a prefix of three or more characters ("selene" for
// "selene-a100") counts as close too.
std::size_t closeness(const std::string& wrong, const std::string& target) {
  const std::size_t d = edit_distance(wrong, target);
  const std::size_t limit = std::max<std::size_t>(1, target.size() / 3);
  if (d <= limit) return d;
  if (wrong.size() >= 3 && target.compare(0, wrong.size(), wrong) == 0) return limit;
  return kNoMatch;
}

std::string_view leaf_of(std::string_view path) {
  const std::size_t dot = path.rfind('.');
  return dot == std::string_view::npos ? path : path.substr(dot + 1);
}

std::string_view section_of(std::string_view path) {
  const std::size_t dot = path.find('.');
  return dot == std::string_view::npos ? std::string_view() : path.substr(0, dot);
}

[[noreturn]] void bad_value(std::string_view text, const std::string& expected,
                            const ErrorContext& where, const std::string& hint = {}) {
  throw_input("expected " + expected + ", got `" + clip_name(text) + "`", where, hint);
}

std::string format_number(double v) { return fmt::format("{}", v); }

std::string type_text(const KeyDef& k) {
  std::string out = to_string(k.type);
  const bool numeric =
      k.type == KeyType::kInt || k.type == KeyType::kFloat || k.type == KeyType::kSize;
  if (numeric) {
    const bool has_min = k.min_value != std::numeric_limits<double>::lowest();
    const bool has_max = k.max_value != std::numeric_limits<double>::max();
    if (has_min && has_max) {
      // 0..1 when both bounds are allowed, interval brackets when one is not: (0..1]
      if (k.min_exclusive || k.max_exclusive) {
        out += fmt::format(" {}{}..{}{}", k.min_exclusive ? "(" : "[", k.min_value, k.max_value,
                           k.max_exclusive ? ")" : "]");
      } else {
        out += fmt::format(" {}..{}", k.min_value, k.max_value);
      }
    } else if (has_min) {
      out += fmt::format(" {}{}", k.min_exclusive ? ">" : ">=", k.min_value);
    }
  }
  if (k.type == KeyType::kInt && !k.choices.empty()) {
    out += fmt::format(" or {}", fmt::join(k.choices, "|"));
  }
  return out;
}

std::string choices_text(const KeyDef& k, bool brief) {
  if (k.type != KeyType::kEnum) return "";
  std::string all = fmt::format("{}", fmt::join(k.choices, "|"));
  // Preset lists are long; the table points to the full entry instead of wrapping.
  if (brief && all.size() > 40) {
    return fmt::format("{} names, see `trainsim explain {}`", k.choices.size(), k.path);
  }
  return all;
}

std::string key_block(const KeyDef& k) {
  std::string out = k.path + "\n";
  out += fmt::format("  type:        {}\n", type_text(k));
  if (!k.unit.empty()) out += fmt::format("  unit:        {}\n", k.unit);
  out += fmt::format("  default:     {}\n", k.default_value);
  if (k.type == KeyType::kEnum) out += fmt::format("  choices:     {}\n", choices_text(k, false));
  out += fmt::format("  description: {}\n", k.description);
  if (!k.aliases.empty()) {
    out += fmt::format("  also known as (not accepted as keys): {}\n", fmt::join(k.aliases, ", "));
  }
  return out;
}

std::string key_table(const std::vector<const KeyDef*>& keys) {
  std::vector<std::vector<std::string>> rows = {
      {"KEY", "TYPE", "UNIT", "DEFAULT", "CHOICES", "DESCRIPTION"}};
  for (const KeyDef* k : keys) {
    rows.push_back({k->path, type_text(*k), k->unit, k->default_value, choices_text(*k, true),
                    k->description});
  }
  std::vector<std::size_t> width(rows.front().size(), 0);
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c + 1 < row.size(); ++c) {
      line += fmt::format("{:<{}}  ", row[c], width[c]);
    }
    line += row.back();
    out += line + "\n";
  }
  return out;
}

}  // namespace

const std::vector<KeyDef>& schema() {
  static const std::vector<KeyDef> kSchema = build_schema();
  return kSchema;
}

const std::map<std::string, std::string>& values_before_key_existed() {
  // program-22 (2026-12-06): RoPE, the GQA key/value repeat and eager SwiGLU as ops of their own;
  // before, no rotation was run and SwiGLU was one kernel in every framework.
  static const std::map<std::string, std::string> kBefore = {
      {"framework.rope", "none"}, {"framework.activation", "fused"}, {"framework.gqa_kv", "native"},
      // program-23: FSDP2's copy-out of gathered parameters.
      {"framework.fsdp_copy_out", "false"},
      // program-33: FSDP2's copy-in of gradients before each reduce-scatter.
      {"framework.fsdp_copy_in", "false"},
      // analytic-37 / program-33: Megatron's 1/DP scaling pass before each gradient reduction.
      {"framework.grad_scale_pass", "false"},
      // analytic-42 / program-38: the gradient buffer's memset at every step.
      {"framework.zero_grad_buffer", "false"}};
  return kBefore;
}

const KeyDef* find_key(std::string_view path) {
  for (const KeyDef& k : schema()) {
    if (k.path == path) return &k;
  }
  return nullptr;
}

bool is_section(std::string_view prefix) {
  if (prefix.empty()) return false;
  for (const KeyDef& k : schema()) {
    if (k.path.size() > prefix.size() && k.path.compare(0, prefix.size(), prefix) == 0 &&
        k.path[prefix.size()] == '.') {
      return true;
    }
  }
  return false;
}

std::string suggest_key(std::string_view wrong) {
  // Edit distances are quadratic in the lengths: a name far longer than any key is no typo.
  if (wrong.size() > limits::kMaxSuggestLength) return {};
  const std::string whole = fold(wrong);
  const std::string leaf(leaf_of(whole));
  const std::string_view section = section_of(whole);
  std::string best;
  std::size_t best_score = kNoMatch;
  bool best_same_section = false;
  const auto offer = [&](const std::string& path, std::size_t score) {
    if (score == kNoMatch) return;
    // On a tie, a key of the section the user was writing in is the likelier one.
    const bool same_section = !section.empty() && section_of(path) == section;
    if (score < best_score || (score == best_score && same_section && !best_same_section)) {
      best = path;
      best_score = score;
      best_same_section = same_section;
    }
  };
  for (const KeyDef& k : schema()) {
    std::size_t score = closeness(whole, k.path);
    const auto consider = [&](const std::string& target) {
      score = std::min({score, closeness(whole, target), closeness(leaf, target)});
    };
    consider(std::string(leaf_of(k.path)));
    for (const std::string& alias : k.aliases) consider(fold(alias));
    offer(k.path, score);
    // A misspelt section ("paralel") is close to a prefix of the key, not to the key.
    for (std::size_t dot = k.path.find('.'); dot != std::string::npos;
         dot = k.path.find('.', dot + 1)) {
      offer(k.path.substr(0, dot), closeness(whole, k.path.substr(0, dot)));
    }
  }
  return best.empty() ? std::string() : "did you mean `" + best + "`?";
}

std::string did_you_mean(std::string_view wrong, const std::vector<std::string>& candidates) {
  if (wrong.size() > limits::kMaxSuggestLength) return {};
  const std::string w = fold(wrong);
  const std::string* best = nullptr;
  std::size_t best_score = kNoMatch;
  // A value that starts a candidate's name ("h100" of `h100-sxm`) is that candidate, before one a
  // letter away (`h800`); the shortest (then the first) of several.
  if (w.size() >= 3) {
    for (const std::string& c : candidates) {
      const std::string f = fold(c);
      // ... but not where the value's last digit runs on into the candidate's ("h20" is not
      // `h200-sxm`: another product).
      const bool digit_runs_on = f.size() > w.size() &&
                                 std::isdigit(static_cast<unsigned char>(w.back())) != 0 &&
                                 std::isdigit(static_cast<unsigned char>(f[w.size()])) != 0;
      if (f.size() > w.size() && f.compare(0, w.size(), w) == 0 && !digit_runs_on &&
          (best == nullptr || c.size() < best->size())) {
        best = &c;
      }
    }
    if (best != nullptr) return "did you mean `" + *best + "`?";
  }
  for (const std::string& c : candidates) {
    if (c.size() > limits::kMaxSuggestLength) continue;
    const std::size_t score = closeness(w, fold(c));
    if (score < best_score) {
      best = &c;
      best_score = score;
    }
  }
  return best == nullptr ? std::string() : "did you mean `" + *best + "`?";
}

std::string normalize_value(const KeyDef& key, std::string_view text, const ErrorContext& where) {
  const std::string word = fold(text);
  const auto check_range = [&](double v, const std::string& what) {
    if (v < key.min_value || v > key.max_value || (key.min_exclusive && v == key.min_value) ||
        (key.max_exclusive && v == key.max_value)) {
      bad_value(text, what + " in " + type_text(key), where);
    }
  };
  switch (key.type) {
    case KeyType::kInt: {
      for (const std::string& choice : key.choices) {
        if (word == choice) return choice;
      }
      const IntResult r = to_int64(text);
      const std::string what = key.choices.empty() ? "an integer" : "an integer or `auto`";
      if (r.problem == NumberProblem::kTooLarge) {
        bad_value(text, what + " in " + type_text(key) + " (this one overflows 64 bits)", where);
      }
      if (r.problem != NumberProblem::kNone) {
        bad_value(text, what + " (" + type_text(key) + ")", where);
      }
      check_range(static_cast<double>(r.value), what);
      return std::to_string(r.value);
    }
    case KeyType::kFloat: {
      // The one checked conversion (sim/core/parse.h): whole text, finite, not subnormal, so
      // that the canonical text reads back (1e-320 would not), and at most kMaxMagnitude when
      // the key states no maximum of its own (docs/reliability.md).
      const NumberResult r = to_double(text);
      if (r.problem == NumberProblem::kSubnormal) {
        bad_value(text, "a number in " + type_text(key) + ", not one below 2.2e-308", where,
                  "write 0 or a larger value");
      }
      if (r.problem != NumberProblem::kNone) {
        bad_value(text, "a finite number (" + type_text(key) + ")", where);
      }
      check_range(r.value, "a number");
      const bool has_max = key.max_value != std::numeric_limits<double>::max();
      if (!has_max && std::fabs(r.value) > limits::kMaxMagnitude) {
        bad_value(text, "a number of magnitude at most 1e15 (docs/reliability.md)", where);
      }
      return format_number(r.value);
    }
    case KeyType::kBool:
      if (word == "true" || word == "yes" || word == "on") return "true";
      if (word == "false" || word == "no" || word == "off") return "false";
      bad_value(text, "a boolean (true or false)", where);
    case KeyType::kEnum:
      for (const std::string& choice : key.choices) {
        if (word == fold(choice)) return choice;
      }
      if (key.path == "cluster.gpu") {
        // A GPU the presets do not hold is described on its architecture's preset.
        // A suggestion whose model number differs is another product (`h20` is not
        // `h200-sxm`, nor `h800`): none is made then.
        std::string guess = did_you_mean(text, key.choices);
        const auto model_number = [](std::string_view x) {  // the first run of digits
          std::string d;
          for (const char c : x) {
            if (std::isdigit(static_cast<unsigned char>(c)) != 0) {
              d += c;
            } else if (!d.empty()) {
              break;
            }
          }
          return d;
        };
        if (const auto open = guess.find('`'), close = guess.rfind('`');
            open != std::string::npos && close > open &&
            model_number(guess.substr(open + 1, close - open - 1)) != model_number(text)) {
          guess.clear();
        }
        bad_value(text, "one of " + choices_text(key, false), where,
                  (guess.empty() ? std::string() : guess + " ") +
                      "A GPU no preset holds: the preset of its architecture with the "
                      "cluster.gpu_spec.* keys (its datasheet peaks, memory, links and SMs; "
                      "docs/scenario-schema.md)");
      }
      bad_value(text, "one of " + choices_text(key, false), where, did_you_mean(text, key.choices));
    case KeyType::kSize: {
      const std::int64_t v = parse_size(text, where);
      check_range(static_cast<double>(v), "a size");
      return format_size(v);
    }
    case KeyType::kString:
      break;
  }
  if (text.empty()) bad_value(text, "a non-empty string", where);
  return std::string(text);
}

// The keys of one `jobs:` entry (scenarios/jobs.h; parsed in scenario.cpp's load_job), which
// are not scenario keys: `explain jobs` lists them, `explain jobs.KEY` prints one.
constexpr JobEntryKey kJobEntryKeys[] = {
    {"name", "string", "job0, job1, ...", "Shown in the output"},
    {"gpus", "int >=1", "", "The job's GPUs, whole servers (cluster.gpus_per_node each); with "
                            "`hosts` it may be left out"},
    {"placement", "enum", "packed",
     "Where the job's servers are: packed, spread, random, fragmented or hosts"},
    {"hosts", "list", "", "The job's servers, e.g. [0, 1, 4-7] or \"0-383,512\" (placement hosts)"},
    {"start_s", "float >=0", "0", "When its first iteration starts, seconds after time 0"},
    {"iterations", "int 1..1000", "1", "Iterations run back to back; the result is the mean one"},
};

std::span<const JobEntryKey> job_entry_keys() { return kJobEntryKeys; }

namespace {

std::string explain_jobs(std::string_view key_or_prefix) {
  const std::string_view leaf =
      key_or_prefix == "jobs" ? std::string_view() : key_or_prefix.substr(5);
  std::string out;
  for (const JobEntryKey& k : job_entry_keys()) {
    if (!leaf.empty() && leaf != k.name) continue;
    out += fmt::format("jobs[].{:<12} {:<12} default {:<16} {}\n", k.name, k.type,
                       *k.default_value ? k.default_value : "-", k.description);
  }
  if (out.empty()) {
    throw_input("unknown key of a `jobs:` entry", {"", 0, std::string(key_or_prefix)},
                "an entry has name, gpus, placement, hosts, start_s, iterations, and any model, "
                "parallel, training or optimizations key of its job");
  }
  if (leaf.empty()) {
    out +=
        "An entry also takes any model, parallel, training, optimizations or framework key of "
        "its job, over the file's top level (docs/scenario-schema.md, \"Several jobs\").\n";
  }
  return out;
}

}  // namespace

std::string explain(std::string_view key_or_prefix) {
  if (key_or_prefix == "jobs" || key_or_prefix.rfind("jobs.", 0) == 0) {
    return explain_jobs(key_or_prefix);
  }
  if (const KeyDef* k = find_key(key_or_prefix)) return key_block(*k);
  std::vector<const KeyDef*> keys;
  const std::string prefix = std::string(key_or_prefix) + ".";
  for (const KeyDef& k : schema()) {
    if (key_or_prefix.empty() || k.path.compare(0, prefix.size(), prefix) == 0) keys.push_back(&k);
  }
  if (keys.empty()) {
    throw_input("unknown scenario key or section", {"", 0, std::string(key_or_prefix)},
                suggest_key(key_or_prefix));
  }
  return key_table(keys);
}

const char* to_string(KeyType type) {
  switch (type) {
    case KeyType::kInt:
      return "int";
    case KeyType::kFloat:
      return "float";
    case KeyType::kBool:
      return "bool";
    case KeyType::kString:
      return "string";
    case KeyType::kEnum:
      return "enum";
    case KeyType::kSize:
      return "size";
  }
  return "?";
}

}  // namespace trainsim::scen
