#include "scenarios/frameworks.h"

#include <algorithm>
#include <cctype>
#include <limits>

#include "sim/model/transformer.h"

namespace trainsim::scen {
namespace {

// Levers every preset states explicitly, so that no lever keeps the schema's default by accident.
std::map<std::string, std::string> levers(std::initializer_list<const char*> on) {
  std::map<std::string, std::string> v;
  for (const char* k :
       {"tp_overlap", "pp_overlap", "dp_overlap", "efficient_operators", "async_data_pipeline",
        "lamb", "sliding_window", "parallel_block", "fast_comm_init"}) {
    v[std::string("optimizations.") + k] = "false";
  }
  for (const char* k : on) v[std::string("optimizations.") + k] = "true";
  return v;
}

std::map<std::string, std::string> with(std::map<std::string, std::string> base,
                                        std::initializer_list<std::pair<const char*, const char*>> more) {
  for (const auto& [k, v] : more) base[k] = v;
  return base;
}

// NeMo's capability set, the same in the 2024 and the 2025 containers as modelled.
std::map<std::string, std::string> nemo_values() {
  return with(levers({"tp_overlap", "pp_overlap", "dp_overlap", "efficient_operators",
                      "async_data_pipeline"}),
              {{"parallel.sp", "true"},
               {"parallel.zero", "1"},
               {"training.recompute", "selective"},
               {"training.grad_reduce_dtype", "fp32"},
               {"framework.shard_group", "dp_cp"},
               {"framework.dp_buckets", "scaled"},
               {"framework.tp_overlap_method", "decomposed"},
               {"framework.tp_async_backward", "true"},
               {"framework.tp_overlap_sms", "16"},
               {"framework.grad_scale_pass", "true"},
               {"framework.zero_grad_buffer", "true"},
               {"framework.pp_activation", "full"},
               {"framework.grad_accumulation", "in-gemm"},
               {"framework.cp_comm", "p2p"},
               {"framework.rope", "fused"},
               {"framework.activation", "fused"},
               {"framework.gqa_kv", "native"},
               {"collectives.p2p_net_channels", "2"}});
}

// TorchTitan's capability set as Llama 3 trained (the torchtitan-2024 preset); the April 2024
// version differs in its element-wise work and ZeRO stage only.
std::map<std::string, std::string> torchtitan_values() {
  return with(levers({"pp_overlap", "dp_overlap", "efficient_operators", "async_data_pipeline"}),
              {{"parallel.sp", "true"},
               {"parallel.zero", "2"},
               {"training.recompute", "none"},
               {"training.grad_reduce_dtype", "fp32"},
               {"framework.shard_group", "dp_cp"},
               {"framework.dp_buckets", "scaled"},
               {"framework.tp_overlap_method", "decomposed"},
               {"framework.pp_activation", "full"},
               {"framework.grad_accumulation", "add-fp32"},
               {"framework.cp_comm", "all-gather"},
               {"framework.rope", "fused"},
               {"framework.activation", "fused"},
               {"framework.gqa_kv", "native"},
               {"framework.fsdp_copy_out", "true"},
               {"framework.fsdp_copy_in", "true"},
               {"collectives.p2p_net_channels", "2"}});
}

}  // namespace

// Dates and capabilities from the Megatron-LM history (feature commits and release tags), the
// NeMo and TorchTitan documentation, and the papers; docs/presets.md lists each with its source.
namespace {

std::vector<FrameworkPreset> framework_presets_listed() {
  static const std::vector<FrameworkPreset> kPresets = {
      {"none", "No framework capabilities: every lever off", "", "",
       levers({}), "flash2", "none", "megatron", false},
      {"megatron-lm-2021", "Megatron-LM v2.5 (SC21)", "2021-08",
       "Narayanan et al. SC21 §3-§5; Megatron-LM tag v2.5 (2021-08-10): interleaved 1F1B merged "
       "2021-02; no sequence parallelism (2022-05), no distributed optimizer (2022-06), fused "
       "softmax/bias-GeLU/bias-dropout-add kernels, full activation recompute in the paper's runs; "
       "fp16 with local DDP and no contiguous gradient buffers (examples/sc21/CONFIG.sh), so "
       "autograd adds each micro-batch's gradient into the 16-bit .grad (gradient-accumulation "
       "fusion came 2022-02)",
       with(levers({}), {{"parallel.sp", "false"},
                         {"parallel.zero", "0"},
                         {"training.recompute", "full"},
                         {"training.grad_reduce_dtype", "fp32"},
                         {"framework.shard_group", "dp"},
                         {"framework.dp_buckets", "fixed-40m"},
                         {"framework.tp_overlap_method", "bulk"},
                         {"framework.pp_activation", "scatter-gather"},
                         {"framework.grad_accumulation", "add-16bit"},
                         {"framework.cp_comm", "p2p"},
                         {"framework.rope", "unfused"},
                         {"framework.activation", "unfused"},
                         {"framework.gqa_kv", "native"},
                         {"collectives.p2p_net_channels", "1"}}),
       "flash2", "megatron", "megatron-recompute", true,
       /*selective_recompute=*/false, /*sharded_optimizer=*/false, /*context_parallel=*/false},
      {"megatron-lm-2023", "Megatron-LM of January 2023 (commit 285068c8, MegaScale's baseline)",
       "2023-01",
       "Megatron-LM: sequence parallelism and selective recompute merged 2022-05-20, distributed "
       "optimizer over DP merged 2022-06-08, FlashAttention merged 2023-01-11 (commit 285068c8, "
       "the commit MegaScale §6.1 builds on) but off by default; grad-reduce overlap (2023-09), "
       "TP overlap (2023-10) and param-gather overlap (2023-11) not yet; gradient-accumulation "
       "fusion into the weight-gradient GEMM on by default since 2022-02 (commit 83b1e42f); "
       "the backward's TP collectives asynchronous beside the GEMM that does not need them "
       "(LinearWithGradAccumulationAndAsyncCommunication, with CUDA_DEVICE_MAX_CONNECTIONS=1)",
       with(levers({}), {{"parallel.sp", "true"},
                         {"framework.tp_async_backward", "true"},
                         {"framework.grad_scale_pass", "true"},
                         {"framework.zero_grad_buffer", "true"},
                         {"parallel.zero", "1"},
                         {"training.recompute", "selective"},
                         {"training.grad_reduce_dtype", "fp32"},
                         {"framework.shard_group", "dp"},
                         {"framework.dp_buckets", "fixed-40m"},
                         {"framework.tp_overlap_method", "bulk"},
                         {"framework.pp_activation", "scatter-gather"},
                         {"framework.grad_accumulation", "in-gemm"},
                         {"framework.cp_comm", "p2p"},
                         {"framework.rope", "unfused"},
                         {"framework.activation", "unfused"},
                         {"framework.gqa_kv", "native"},
                         {"collectives.p2p_net_channels", "2"}}),
       "flash2", "megatron", "megatron", true,
       /*selective_recompute=*/true, /*sharded_optimizer=*/true, /*context_parallel=*/false},
      {"megatron-core-2023", "Megatron-Core 0.4 (December 2023) with its overlaps on", "2023-12",
       "Megatron-LM tag core_v0.4.0 (2023-12-11): --overlap-grad-reduce (2023-09), "
       "--tp-comm-overlap with Transformer Engine userbuffers (2023-10), --overlap-param-gather "
       "(2023-11), context parallelism and the distributed optimizer over DP·CP (2023-10), TE "
       "fused attention (cuDNN); DDP buckets of 40 M parameters; RoPE and SwiGLU as PyTorch "
       "ops (their fusions came as opt-in flags on 2023-11-15/19 and on by default on "
       "2024-01-18, commit de9428a701)",
       with(levers({"tp_overlap", "pp_overlap", "dp_overlap", "efficient_operators"}),
            {{"parallel.sp", "true"},
             {"parallel.zero", "1"},
             {"training.recompute", "selective"},
             {"training.grad_reduce_dtype", "fp32"},
             {"framework.shard_group", "dp_cp"},
             {"framework.dp_buckets", "fixed-40m"},
             {"framework.tp_overlap_method", "decomposed"},
             {"framework.tp_async_backward", "true"},
             {"framework.tp_overlap_sms", "16"},
             {"framework.grad_scale_pass", "true"},
             {"framework.zero_grad_buffer", "true"},
             {"framework.pp_activation", "full"},
             {"framework.grad_accumulation", "in-gemm"},
             {"framework.cp_comm", "p2p"},
             {"framework.rope", "unfused"},
             {"framework.activation", "unfused"},
             {"framework.gqa_kv", "native"},
             {"collectives.p2p_net_channels", "2"}}),
       "cudnn", "megatron", "megatron"},
      {"megatron-core-2024", "Megatron-Core 0.8 (mid 2024) with its overlaps on", "2024-07",
       "Megatron-LM core_r0.8.0 (the release the Megatron-LM README's H100 table of 2024-07-15 "
       "names): the megatron-core-2023 levers, with RoPE and SwiGLU fused by default "
       "(--no-rope-fusion, --no-bias-swiglu-fusion since 2024-01-18, commit de9428a701) and DDP "
       "buckets of max(40 M, 1 M·DP) parameters (distributed_data_parallel.py, core_v0.7.0, "
       "2024-04-11)",
       // NeMo 2024 is this Megatron-Core with NeMo's asynchronous data loading on top.
       with(nemo_values(), {{"optimizations.async_data_pipeline", "false"}}),
       "cudnn", "megatron", "megatron"},
      {"nemo-2024", "NeMo 2024 (Megatron-Core 0.7+)", "2024-05",
       "NeMo Megatron GPT recipes (DGX Cloud GPT-3 175B): TP/PP/DP overlap on, Transformer "
       "Engine's attention with cuDNN's turned off, so flash-attn's FlashAttention-2 "
       "(NVTE_FUSED_ATTN=0: NeMo-Framework-Launcher's config.yaml, 24.01-24.07, and the DGX "
       "Cloud GPT-3 recipe's own launch.sh, NeMo 24.05, until its v25.02 with NeMo 24.12), "
       "distributed optimizer over DP·CP; Megatron-Core 0.7 (2024-05): DDP buckets of "
       "max(40 M, 1 M·DP) parameters; asynchronous data loading",
       nemo_values(), "flash2", "nemo", "megatron"},
      {"nemo-2025", "NeMo 25.09-25.11 (Megatron-Bridge)", "2025-09",
       "Megatron-Bridge performance recipes (scripts/performance/configs, NeMo 25.09/25.11 "
       "containers): the nemo-2024 levers as modelled; its throughput log counts causal "
       "attention (half the s x s scores: Megatron-LM commit 8873b55d, 2025-03-06, in "
       "num_floating_point_operations; Megatron-Bridge training/utils/flop_utils.py), which is "
       "what makes the published TFLOP/s and tokens/s of its performance tables agree; those "
       "scripts reduce gradients in bf16 for every model family (grad_reduce_in_fp32 = False in "
       "llama3/llama31/qwen3/deepseek/gpt_oss/nemotronh _llm_pretrain.py, Megatron-Bridge "
       "c5dd4b6b), where the library recipes keep fp32; and they run Transformer Engine's "
       "fused cross-entropy (GPTModelProvider cross_entropy_loss_fusion = True; "
       "cross_entropy_fusion_impl = \"te\" in scripts/performance/utils/overrides.py)",
       with(nemo_values(),
            {{"training.grad_reduce_dtype", "bf16"},
             {"framework.cross_entropy", "te"},
             {"framework.grad_scale_pass", "false"}}),
       "cudnn", "nemo", "causal"},
      {"megascale-2024", "MegaScale (NSDI'24)", "2024-02",
       "Jiang et al., NSDI'24 §3: Megatron-LM of 2023-01 plus the parallel transformer block, "
       "sliding-window attention, TP overlap by decomposed GEMMs, PP send/recv overlap, DP "
       "all-gather prefetch and reduce-scatter overlap, FlashAttention-2 and fused operators, "
       "asynchronous data pipeline, LAMB, fast communicator initialization",
       with(levers({"tp_overlap", "pp_overlap", "dp_overlap", "efficient_operators",
                    "async_data_pipeline", "lamb", "parallel_block", "fast_comm_init"}),
            {{"parallel.sp", "true"},
             {"parallel.zero", "1"},
             {"training.recompute", "selective"},
             {"training.grad_reduce_dtype", "fp32"},
             {"framework.shard_group", "dp"},
             {"framework.dp_buckets", "fixed-40m"},
             {"framework.tp_overlap_method", "decomposed"},
             {"framework.tp_async_backward", "true"},
             {"framework.grad_scale_pass", "true"},
             {"framework.zero_grad_buffer", "true"},
             {"framework.pp_activation", "scatter-gather"},
             {"framework.grad_accumulation", "in-gemm"},
             {"framework.cp_comm", "p2p"},
             {"framework.rope", "fused"},
             {"framework.activation", "fused"},
             {"framework.gqa_kv", "native"},
             {"collectives.p2p_net_channels", "2"}}),
       "flash2", "megascale", "megatron", true,
       /*selective_recompute=*/true, /*sharded_optimizer=*/true, /*context_parallel=*/false},
      {"deepspeed-2023", "DeepSpeed ZeRO (2023)", "2023-01",
       "DeepSpeed ZeRO stage 1 with overlap_comm (gradient reduction overlapped with backward), "
       "activation checkpointing of every layer, no sequence parallelism; between accumulation "
       "boundaries autograd adds each micro-batch's gradient into the 16-bit .grad",
       with(levers({"dp_overlap"}), {{"parallel.sp", "false"},
                                     {"parallel.zero", "1"},
                                     {"training.recompute", "full"},
                                     {"training.grad_reduce_dtype", "fp32"},
                                     {"framework.shard_group", "dp"},
                                     {"framework.dp_buckets", "fixed-40m"},
                                     {"framework.tp_overlap_method", "bulk"},
                                     {"framework.pp_activation", "scatter-gather"},
                                     {"framework.grad_accumulation", "add-16bit"},
                                     {"framework.cp_comm", "p2p"},
                                     {"framework.rope", "unfused"},
                                     {"framework.activation", "unfused"},
                                     {"framework.gqa_kv", "native"},
                                     {"collectives.p2p_net_channels", "2"}}),
       "flash2", "deepspeed", "megatron-recompute", false,
       /*selective_recompute=*/false, /*sharded_optimizer=*/true, /*context_parallel=*/false},
      {"torchtitan-2024", "TorchTitan (FSDP2 + TP + PP), as Llama 3 trained", "2024-10",
       "Liang et al. 2024 (TorchTitan); Dubey et al. 2024 (Llama 3) §3.3.2: FSDP shards optimizer "
       "state and gradients but does not reshard parameters after forward (ZeRO-2-like), "
       "gradients reduce-scattered in fp32, asynchronous P2P, no activation recompute at 8K "
       "sequences; PyTorch SDPA's FlashAttention-2 kernel; FP32 gradient accumulation across "
       "micro-batches (Llama 3 §3.3.2; FSDP2 keeps unsharded_accumulated_grad in the reduce "
       "dtype while gradient sync is off); context parallelism by all-gathering K and V, the "
       "all-gather exposed (Llama 3 §3.3.2); its 405B config compiles each block "
       "(train_configs/llama3_405b.toml compile = true, 2024-10), which fuses RoPE and "
       "SiLU·mul; GQA keys and values read natively, not repeated: TorchTitan's code of the "
       "time repeats them for SDPA (repeat_kv), but saved at the queries' width they would "
       "not let Llama 3 405B train at 8K without recompute as §3.3.2 says it did",
       torchtitan_values(),
       "flash2", "torchtitan", "megatron", true, /*selective_recompute=*/false,
       /*sharded_optimizer=*/true, /*context_parallel=*/true, /*max_zero=*/3,
       /*op_recompute=*/true},
      {"torchtitan-2024-04", "TorchTitan of April 2024 (FSDP2, eager PyTorch)", "2024-04",
       "pytorch/torchtitan commit 1ea476e9f (2024-04-24), whose docs/performance.md publishes the "
       "64-GPU A100 FSDP2 runs: train_configs compile = false (eager PyTorch) with norm_type "
       "fused_rmsnorm; model.py applies RoPE as Meta's reference code does (xq.float(), "
       "view_as_complex, a complex multiply, type_as), runs the MLP as "
       "w2(F.silu(w1(x)) * w3(x)) and repeats GQA keys and values (repeat_kv) for PyTorch's "
       "scaled_dot_product_attention (FlashAttention-2 backend); fully_shard per block with "
       "reshard_after_forward (ZeRO-3), bf16 parameters, fp32 reduce-scatter; otherwise the "
       "torchtitan-2024 levers",
       with(torchtitan_values(), {{"parallel.zero", "3"},
                                  {"framework.rope", "complex"},
                                  {"framework.activation", "unfused"},
                                  {"framework.gqa_kv", "repeat"}}),
       "flash2", "torchtitan", "megatron", true, /*selective_recompute=*/false,
       /*sharded_optimizer=*/true, /*context_parallel=*/true, /*max_zero=*/3,
       /*op_recompute=*/true},
      {"llm-foundry-2023", "MosaicML LLM Foundry on Composer (PyTorch FSDP), as its MPT benchmarks ran",
       "2023-10",
       "LLM Foundry scripts/train/benchmarking (README tables and submit_benchmarks.py, "
       "2023-10 to 2024-01): PyTorch FSDP (FULL_SHARD, or SHARD_GRAD_OP per run: the row's "
       "zero 3 or 2) with no tensor or pipeline parallelism, low-precision LayerNorm, "
       "activation checkpointing per run, limit_all_gathers with backward prefetch; attention "
       "by attn_impl triton, the script's default at the tables' commits: MPT's copy of "
       "FlashAttention's Triton kernel of 2022 on pre-MLIR Triton (triton_pre_mlir_sm90), the "
       "`triton` attention kernel; "
       "Composer's FSDP mixed precision DEFAULT keeps parameters in the 16-bit dtype and reduces "
       "gradients in fp32 (PURE: 16-bit), composer/distributed/mosaic_parallelism.py "
       "get_mixed_precision; an FSDP model has no no_sync in Composer's _train_microbatches, so "
       "gradients are reduce-scattered every micro-batch, as ZeRO-2/3 do here; MFU counted as "
       "6N plus full s x s attention (the README's formula, no recompute); torch.autocast "
       "(amp_bf16) not modelled",
       with(levers({"dp_overlap", "efficient_operators", "async_data_pipeline"}),
            {{"parallel.sp", "false"},
             {"parallel.zero", "3"},
             {"training.recompute", "none"},
             {"training.grad_reduce_dtype", "fp32"},
             {"framework.shard_group", "dp"},
             {"framework.dp_buckets", "scaled"},
             {"framework.tp_overlap_method", "bulk"},
             {"framework.pp_activation", "full"},
             {"framework.grad_accumulation", "add-fp32"},
             {"framework.cp_comm", "p2p"},
             {"collectives.p2p_net_channels", "2"}}),
       "triton", "llm-foundry", "megatron", false,
       /*selective_recompute=*/false, /*sharded_optimizer=*/true, /*context_parallel=*/false},
  };
  return kPresets;
}

}  // namespace

const std::vector<FrameworkPreset>& framework_presets() {
  static const std::vector<FrameworkPreset> kWithStages = [] {
    std::vector<FrameworkPreset> v = framework_presets_listed();
    for (FrameworkPreset& p : v) {
      // Megatron-LM and the stacks built on it before Megatron FSDP (2025): the distributed
      // optimizer at most (none before 2022-06: sharded_optimizer is false there).
      if (p.name == "megatron-lm-2021") p.max_zero = 0;
      if (p.name == "megatron-lm-2023" || p.name == "megatron-core-2023" ||
          p.name == "megatron-core-2024" || p.name == "nemo-2024" || p.name == "megascale-2024") {
        p.max_zero = 1;
      }
      // Megatron-LM before RoPE (2023-03-31), SwiGLU (2023-04-01), GQA (2023-06-05) and RMSNorm
      // (2023-07-31): the commits FrameworkPreset names.
      if (p.name == "megatron-lm-2021" || p.name == "megatron-lm-2023") {
        p.rotary = p.gated_mlp = p.gqa = p.rmsnorm = false;
      }
    }
    return v;
  }();
  return kWithStages;
}

std::string FrameworkNeeds::lacking(const FrameworkPreset& fw) const {
  std::string what;
  for (const std::string& item : lacking_items(fw)) what += (what.empty() ? "" : ", ") + item;
  return what;
}

std::size_t FrameworkNeeds::missing(const FrameworkPreset& fw) const {
  return lacking_items(fw).size();
}

std::vector<std::string> FrameworkNeeds::lacking_items(const FrameworkPreset& fw) const {
  std::vector<std::string> what;
  const auto add = [&](bool need, bool had, const char* name) {
    if (need && !had) what.emplace_back(name);
  };
  add(selective_recompute, fw.selective_recompute, "selective recompute");
  add(sharded_optimizer, fw.sharded_optimizer, "a sharded optimizer (zero >= 1)");
  add(context_parallel, fw.context_parallel, "context parallelism");
  add(parameter_sharding, fw.max_zero >= 3, "parameter sharding (zero 3)");
  add(rotary, fw.rotary, "rotary positions");
  add(gated_mlp, fw.gated_mlp, "a SwiGLU MLP");
  add(gqa, fw.gqa, "grouped-query attention");
  add(rmsnorm, fw.rmsnorm, "RMSNorm");
  return what;
}

std::vector<std::string> capability_notes(const FrameworkPreset& fw, int zero, int cp,
                                          bool selective_recompute,
                                          const model::ModelConfig* model) {
  std::vector<std::string> notes;
  if (fw.name == "none") return notes;
  const std::string head = "framework.preset " + fw.name + " (" + fw.date + ") had no ";
  if (model != nullptr) {
    // A model block the version could not build (Megatron-LM before 2023-03..07): priced with
    // the preset's implementations of the later code, as asked.
    FrameworkNeeds blocks;
    blocks.rotary = model->position == model::PositionKind::kRope;
    blocks.gated_mlp = model->mlp == model::MlpKind::kSwiglu;
    blocks.gqa = model->kv_heads > 0 && model->kv_heads < model->heads;
    blocks.rmsnorm = model->norm == model::NormKind::kRmsNorm;
    if (const std::string what = blocks.lacking(fw); !what.empty()) {
      notes.push_back(head + what + " (Megatron-LM added them from 2023-03 to 2023-07, "
                                    "docs/presets.md); the model is simulated as asked, and a "
                                    "run of it used later software: name a later "
                                    "framework.preset");
    }
  }
  if (selective_recompute && !fw.selective_recompute) {
    // TorchTitan checkpoints whole layers or per op, never Megatron's attention core alone
    // (torchtitan parallelize_llama.py: activation_checkpoint.mode full or selective with
    // selective_ac_option `op` or a layer interval).
    notes.push_back(head + "selective recompute (Megatron-LM's attention core, 2022-05)" +
                    (fw.system == "torchtitan"
                         ? "; its own selective checkpointing is training.recompute selective-op "
                           "(per op) or full with training.recompute_layers (per layer)"
                         : "") +
                    "; simulated as asked");
  }
  if (zero >= 1 && !fw.sharded_optimizer) {
    notes.push_back(head + "sharded optimizer (Megatron-LM's distributed optimizer, 2022-06); "
                           "parallel.zero " + std::to_string(zero) + " is simulated as asked");
  } else if (zero > fw.max_zero) {
    notes.push_back(head + "ZeRO-" + std::to_string(zero) +
                    " (its distributed optimizer shards the optimizer states only: ZeRO-" +
                    std::to_string(fw.max_zero) + "; parameter sharding came with Megatron "
                    "FSDP in 2025); simulated as asked");
  }
  if (cp > 1 && !fw.context_parallel) {
    notes.push_back(head + "context parallelism (Megatron-Core 2023-10); parallel.cp " +
                    std::to_string(cp) + " is simulated as asked");
  }
  return notes;
}

const FrameworkPreset* find_framework(std::string_view name) {
  for (const FrameworkPreset& p : framework_presets()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::vector<std::string> framework_names() {
  std::vector<std::string> out;
  for (const FrameworkPreset& p : framework_presets()) out.push_back(p.name);
  return out;
}

std::string framework_for_system(std::string_view system) {
  if (system == "megatron") return "megatron-lm-2023";
  if (system == "megascale") return "megascale-2024";
  if (system == "nemo") return "nemo-2024";
  if (system == "deepspeed") return "deepspeed-2023";
  return "none";
}

namespace {

// Peer-reviewed venues of this field: their submission deadlines fall 5-8 months before the
// meeting, so the software a paper measured is older than its year says.
bool reviewed_venue(std::string_view head) {
  static const char* kVenues[] = {"SC",     "NSDI",   "OSDI",  "SOSP",    "ATC",   "EUROSYS",
                                  "MLSYS",  "ISCA",   "ASPLOS", "MICRO",  "HPCA",  "PPOPP",
                                  "SIGCOMM", "NEURIPS", "ICML", "ICLR",   "IPDPS", "HPDC",
                                  "ICS",    "SOCC",   "VLDB",  "SIGMOD",  "KDD",   "ACL",
                                  "EMNLP"};
  std::string up;
  for (char c : head) {
    if (c != '\'') up += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  for (const char* v : kVenues) {
    if (up == v) return true;
  }
  return false;
}

struct SourceDate {
  int year = 0;
  bool reviewed = false;  // a venue with a review cycle named the year
};

std::optional<SourceDate> source_date(std::string_view source) {
  // Tokens split at anything but letters, digits and the apostrophe of "NSDI'24".
  std::optional<SourceDate> year;
  bool venue_seen = false;
  size_t i = 0;
  while (i < source.size()) {
    const auto is_tok = [&](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '\'';
    };
    if (!is_tok(source[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < source.size() && is_tok(source[j])) ++j;
    const std::string_view tok = source.substr(i, j - i);
    i = j;
    size_t d = tok.size();
    while (d > 0 && std::isdigit(static_cast<unsigned char>(tok[d - 1])) != 0) --d;
    const std::string_view digits = tok.substr(d);
    const std::string_view head = tok.substr(0, d);
    int y = 0;
    bool reviewed = false;
    if (digits.empty() && reviewed_venue(head)) venue_seen = true;  // "NeurIPS 2023"
    if (head.empty() && digits.size() == 4 && digits.substr(0, 2) == "20") {
      y = std::stoi(std::string(digits));  // "2024"
      reviewed = venue_seen;
    } else if (digits.size() == 4 && digits.substr(0, 2) == "20" && reviewed_venue(head)) {
      y = std::stoi(std::string(digits));  // "SC2021"
      reviewed = true;
    } else if (digits.size() == 2 && !head.empty() &&
               std::all_of(head.begin(), head.end(), [](char c) {
                 return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '\'';
               }) &&
               std::isalpha(static_cast<unsigned char>(head[0])) != 0) {
      y = 2000 + std::stoi(std::string(digits));  // a venue and its year: "SC21", "NSDI'24"
      if (y < 2015) y = 0;  // "T5", "GPT3"-like names are not years; nor is a two-digit 00-14
      reviewed = reviewed_venue(head);
    }
    // The last year named wins: "arXiv 2104.04473, SC21" names its venue after the preprint.
    if (y >= 2015 && y <= 2099) year = SourceDate{y, reviewed};
  }
  return year;
}

}  // namespace

std::optional<int> publication_year(std::string_view source) {
  const auto d = source_date(source);
  if (!d) return std::nullopt;
  return d->year;
}

std::string framework_for_run(std::string_view system, std::string_view source, std::string* why,
                              const FrameworkNeeds& needs) {
  std::vector<const FrameworkPreset*> family;
  for (const FrameworkPreset& p : framework_presets()) {
    if (p.system == system) family.push_back(&p);
  }
  std::sort(family.begin(), family.end(),
            [](const FrameworkPreset* a, const FrameworkPreset* b) { return a->date < b->date; });
  const std::string alias = framework_for_system(system);
  const auto say = [&](const std::string& text) {
    if (why != nullptr) *why = text;
  };
  if (family.size() <= 1) {
    say(alias + " (blank: the preset optimizations.system " + std::string(system) + " stands for)");
    return alias;
  }
  // What no preset of the family has (ZeRO-3 on Megatron-LM) does not decide: the presets
  // that lack the fewest of the needs are the candidates (all of them when none lacks any).
  std::size_t fewest = std::numeric_limits<std::size_t>::max();
  for (const FrameworkPreset* p : family) fewest = std::min(fewest, needs.missing(*p));
  const auto has = [&](const FrameworkPreset* p) { return needs.missing(*p) == fewest; };
  // What `to` has of the needs that `from` lacks.
  const auto gained = [&](const FrameworkPreset* from, const FrameworkPreset* to) {
    std::string what;
    const std::vector<std::string> still = needs.lacking_items(*to);
    for (const std::string& item : needs.lacking_items(*from)) {
      if (std::find(still.begin(), still.end(), item) == still.end()) {
        what += (what.empty() ? "" : ", ") + item;
      }
    }
    return what;
  };
  const auto none_has = [&](const FrameworkPreset* p) {
    return fewest > 0 ? "; no " + std::string(system) + " preset has " + needs.lacking(*p)
                      : std::string();
  };
  const std::optional<SourceDate> date = source_date(source);
  if (!date) {
    // No year: the alias, unless it lacks more of what the row uses than another preset; then
    // the family's earliest that lacks the fewest (a Llama-style Megatron run is not the
    // January 2023 code).
    const FrameworkPreset* named = find_framework(alias);
    if (named != nullptr && !has(named)) {
      for (const FrameworkPreset* p : family) {
        if (!has(p)) continue;
        say(p->name + " (blank, and the source names no year: the row uses " + gained(named, p) +
            ", which " + alias + ", the preset optimizations.system " + std::string(system) +
            " stands for, lacks; the earliest " + std::string(system) +
            " preset that has it, dated " + p->date + none_has(p) + ")");
        return p->name;
      }
    }
    say(alias + " (blank, and the source names no year: the preset optimizations.system " +
        std::string(system) + " stands for)");
    return alias;
  }
  // A reviewed venue: software frozen by June of the year before (review lag, see the header);
  // a report, preprint or recipe: software released by the January of its year.
  const std::string cutoff =
      date->reviewed ? std::to_string(date->year - 1) + "-06" : std::to_string(date->year) + "-01";
  const FrameworkPreset* dated = family.front();  // by the date alone
  for (const FrameworkPreset* p : family) {
    if (p->date <= cutoff) dated = p;
  }
  const FrameworkPreset* chosen = nullptr;
  for (const FrameworkPreset* p : family) {
    if (p->date <= cutoff && has(p)) chosen = p;
  }
  const std::string era = ", for a " + std::string(date->reviewed ? "venue" : "report") + " of " +
                          std::to_string(date->year);
  if (chosen == nullptr) {
    for (const FrameworkPreset* p : family) {
      if (has(p)) {
        chosen = p;
        break;
      }
    }
  }
  if (chosen != nullptr && chosen != dated) {
    say(chosen->name + " (blank: the row uses " + gained(dated, chosen) + ", which " + dated->name +
        ", the latest " + std::string(system) + " preset dated by " + cutoff + era +
        ", lacks; the earliest " + std::string(system) + " preset that has it, dated " +
        chosen->date + none_has(chosen) + ")");
    return chosen->name;
  }
  say(chosen->name + " (blank: the latest " + std::string(system) + " preset dated by " + cutoff +
      era + (chosen->date > cutoff ? "; none is that old, so the earliest" : "") +
      none_has(chosen) + ")");
  return chosen->name;
}

}  // namespace trainsim::scen
