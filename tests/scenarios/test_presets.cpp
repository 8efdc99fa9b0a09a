// Tests of the built-in presets (scenarios/presets.h) against their published sources.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "scenarios/presets.h"

namespace trainsim::scen {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Vendor datasheets (validation/README.md): dense bf16 and fp8 peaks, HBM capacity as nvidia-smi
// reports it (MiB: 81,920 A100/A800, 81,559 H100, 143,771 H200), SMs,
// HBM and NVLink bandwidth per direction, NVLS only on Hopper. Units are bytes and bytes/s.
TEST(GpuPresets, MatchDatasheets) {
  const auto a100 = gpu_preset("a100-80gb");
  ASSERT_TRUE(a100.has_value());
  EXPECT_DOUBLE_EQ(a100->peak_dense_16bit_flops, 312e12);
  EXPECT_DOUBLE_EQ(a100->peak_dense_fp8_flops, 0);
  EXPECT_DOUBLE_EQ(a100->hbm_bytes, 81920.0 * 1024 * 1024);
  EXPECT_EQ(a100->sms, 108);
  EXPECT_DOUBLE_EQ(a100->hbm_Bps, 2.04e12);
  EXPECT_DOUBLE_EQ(a100->nvlink_Bps, 300e9);
  EXPECT_FALSE(a100->has_nvls);

  const auto a800 = gpu_preset("a800");
  ASSERT_TRUE(a800.has_value());
  EXPECT_DOUBLE_EQ(a800->peak_dense_16bit_flops, 312e12);
  EXPECT_DOUBLE_EQ(a800->hbm_bytes, 81920.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(a800->hbm_Bps, 2.04e12);
  EXPECT_DOUBLE_EQ(a800->nvlink_Bps, 200e9);

  const auto h100 = gpu_preset("h100-sxm");
  ASSERT_TRUE(h100.has_value());
  EXPECT_DOUBLE_EQ(h100->peak_dense_16bit_flops, 989e12);
  EXPECT_DOUBLE_EQ(h100->peak_dense_fp8_flops, 1979e12);
  EXPECT_DOUBLE_EQ(h100->hbm_bytes, 81559.0 * 1024 * 1024);
  EXPECT_EQ(h100->sms, 132);
  EXPECT_DOUBLE_EQ(h100->hbm_Bps, 3.35e12);
  EXPECT_DOUBLE_EQ(h100->nvlink_Bps, 450e9);
  // Host links per direction: PCIe Gen4 x16, Gen5 x16 (128 GB/s both ways), NVLink-C2C (900).
  EXPECT_DOUBLE_EQ(h100->host_link_Bps, 128e9 / 2);
  EXPECT_DOUBLE_EQ(gpu_preset("a100-80gb")->host_link_Bps, 32e9);
  EXPECT_DOUBLE_EQ(gpu_preset("gb200")->host_link_Bps, 900e9 / 2);
  EXPECT_DOUBLE_EQ(gpu_preset("gb300")->host_link_Bps, 900e9 / 2);
  // Host memory per GPU: a Grace's 480 GB for two GPUs; a DGX H100's 2 TB (2,048 GB) for eight.
  EXPECT_DOUBLE_EQ(gpu_preset("gb200")->host_memory_bytes, 480e9 / 2);
  EXPECT_DOUBLE_EQ(h100->host_memory_bytes, 2048e9 / 8);
  for (const char* g : {"a100-40gb", "a800", "h800", "h200-sxm", "b200", "b300"}) {
    EXPECT_GT(gpu_preset(g)->host_link_Bps, 0) << g;
  }
  EXPECT_TRUE(h100->has_nvls);

  const auto h200 = gpu_preset("h200-sxm");
  ASSERT_TRUE(h200.has_value());
  EXPECT_DOUBLE_EQ(h200->peak_dense_16bit_flops, 989e12);
  EXPECT_DOUBLE_EQ(h200->peak_dense_fp8_flops, 1979e12);
  EXPECT_DOUBLE_EQ(h200->hbm_bytes, 143771.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(h200->hbm_Bps, 4.8e12);
  EXPECT_DOUBLE_EQ(h200->nvlink_Bps, 450e9);
  EXPECT_TRUE(h200->has_nvls);

  // A100 SXM4 40GB: the A100's compute, 40,536 MiB of HBM2 at 1,555 GB/s.
  const auto a100_40 = gpu_preset("a100-40gb");
  ASSERT_TRUE(a100_40.has_value());
  EXPECT_DOUBLE_EQ(a100_40->peak_dense_16bit_flops, 312e12);
  EXPECT_DOUBLE_EQ(a100_40->hbm_bytes, 40536.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(a100_40->hbm_Bps, 1.555e12);
  EXPECT_DOUBLE_EQ(a100_40->nvlink_Bps, 300e9);
  // H800: the H100's compute and memory, NVLink 400 GB/s both ways.
  const auto h800 = gpu_preset("h800");
  ASSERT_TRUE(h800.has_value());
  EXPECT_DOUBLE_EQ(h800->peak_dense_16bit_flops, 989e12);
  EXPECT_DOUBLE_EQ(h800->peak_dense_fp8_flops, 1979e12);
  EXPECT_DOUBLE_EQ(h800->hbm_bytes, h100->hbm_bytes);
  EXPECT_DOUBLE_EQ(h800->nvlink_Bps, 200e9);
  EXPECT_FALSE(h800->has_nvls);
  // B200: 2,250 / 4,500 TFLOP/s dense, 183,359 MiB at 8 TB/s, NVLink 5 at 900 GB/s a direction.
  const auto b200 = gpu_preset("b200");
  ASSERT_TRUE(b200.has_value());
  EXPECT_DOUBLE_EQ(b200->peak_dense_16bit_flops, 2250e12);
  EXPECT_DOUBLE_EQ(b200->peak_dense_fp8_flops, 4500e12);
  EXPECT_DOUBLE_EQ(b200->hbm_bytes, 183359.0 * 1024 * 1024);
  EXPECT_EQ(b200->sms, 148);
  EXPECT_DOUBLE_EQ(b200->hbm_Bps, 8e12);
  EXPECT_DOUBLE_EQ(b200->nvlink_Bps, 900e9);
  EXPECT_TRUE(b200->has_nvls);
  // GB200: the NVL72 rack's 360 / 720 PFLOP/s (with sparsity) per 72 GPUs, halved: 2,500 / 5,000
  // TFLOP/s dense; 189,471 MiB at 8 TB/s, 152 SMs, NVLink 5 at 900 GB/s a direction.
  const auto gb200 = gpu_preset("gb200");
  ASSERT_TRUE(gb200.has_value());
  EXPECT_DOUBLE_EQ(gb200->peak_dense_16bit_flops, 360e15 / 72 / 2);
  EXPECT_DOUBLE_EQ(gb200->peak_dense_fp8_flops, 720e15 / 72 / 2);
  EXPECT_DOUBLE_EQ(gb200->hbm_bytes, 189471.0 * 1024 * 1024);
  EXPECT_EQ(gb200->sms, 152);
  EXPECT_DOUBLE_EQ(gb200->hbm_Bps, 8e12);
  EXPECT_DOUBLE_EQ(gb200->nvlink_Bps, 900e9);
  EXPECT_TRUE(gb200->has_nvls);
  // B300: the B200's dense peaks; 275,040 MiB at 8 TB/s, 148 SMs.
  const auto b300 = gpu_preset("b300");
  ASSERT_TRUE(b300.has_value());
  EXPECT_DOUBLE_EQ(b300->peak_dense_16bit_flops, 2250e12);
  EXPECT_DOUBLE_EQ(b300->peak_dense_fp8_flops, 72e15 / 8 / 2);
  EXPECT_DOUBLE_EQ(b300->hbm_bytes, 275040.0 * 1024 * 1024);
  EXPECT_EQ(b300->sms, 148);
  // GB300: the same dense peaks; 284,208 MiB at 8 TB/s, 148 SMs.
  const auto gb300 = gpu_preset("gb300");
  ASSERT_TRUE(gb300.has_value());
  EXPECT_DOUBLE_EQ(gb300->peak_dense_16bit_flops, 2500e12);
  EXPECT_DOUBLE_EQ(gb300->peak_dense_fp8_flops, 5000e12);
  EXPECT_DOUBLE_EQ(gb300->hbm_bytes, 284208.0 * 1024 * 1024);
  EXPECT_EQ(gb300->sms, 148);
  EXPECT_DOUBLE_EQ(gb300->nvlink_Bps, 900e9);

  EXPECT_FALSE(gpu_preset("h100").has_value());
  EXPECT_EQ(gpu_preset("h100-sxm")->name, "h100-sxm");
}

// Cluster facts from Megatron-LM SC21, MegaScale NSDI'24, the DGX SuperPOD reference architecture
// and the Llama 3 paper. The fabric sizes follow the k-ary fat tree 2·(k/2)^L NIC ports:
// selene 2·20^3 = 16,000 ports / 8 NICs = 2,000 servers = 16,000 GPUs; MegaScale 2·32^3 = 65,536
// switch ports split in two = 131,072 NIC ports = 131,072 GPUs; SuperPOD 65,536; Meta is
// 8 pods x 3,072 = 24,576.
TEST(ClusterPresets, MatchPublishedFabrics) {
  const auto selene = cluster_preset("selene-a100");
  ASSERT_TRUE(selene.has_value());
  EXPECT_EQ(selene->gpu, "a100-80gb");
  EXPECT_EQ(selene->cluster.gpus, 0);
  EXPECT_EQ(selene->cluster.gpus_per_node, 8);
  EXPECT_EQ(selene->cluster.nics_per_node, 8);
  EXPECT_DOUBLE_EQ(selene->cluster.nic_Gbps, 200);
  EXPECT_EQ(selene->cluster.fabric.tiers, 3);
  EXPECT_EQ(selene->cluster.fabric.switch_radix, 40);
  EXPECT_DOUBLE_EQ(selene->cluster.fabric.switch_port_Gbps, 200);
  EXPECT_TRUE(selene->cluster.fabric.oversubscription.empty());
  EXPECT_TRUE(selene->cluster.fabric.rail_optimized);
  EXPECT_EQ(selene->cluster.max_gpus(), 16000);

  const auto megascale = cluster_preset("megascale-ampere");
  ASSERT_TRUE(megascale.has_value());
  EXPECT_EQ(megascale->gpu, "a100-80gb");
  EXPECT_DOUBLE_EQ(megascale->cluster.nic_Gbps, 200);
  EXPECT_EQ(megascale->cluster.fabric.switch_radix, 64);
  EXPECT_DOUBLE_EQ(megascale->cluster.fabric.switch_port_Gbps, 400);
  EXPECT_EQ(megascale->cluster.fabric.port_split, 2);
  EXPECT_TRUE(megascale->cluster.fabric.rail_optimized);
  EXPECT_EQ(megascale->cluster.max_gpus(), 131072);

  const auto superpod = cluster_preset("dgx-h100-superpod");
  ASSERT_TRUE(superpod.has_value());
  EXPECT_EQ(superpod->gpu, "h100-sxm");
  EXPECT_DOUBLE_EQ(superpod->cluster.nic_Gbps, 400);
  EXPECT_EQ(superpod->cluster.fabric.port_split, 1);
  EXPECT_EQ(superpod->cluster.max_gpus(), 65536);

  const auto meta = cluster_preset("meta-h100-roce");
  ASSERT_TRUE(meta.has_value());
  EXPECT_EQ(meta->gpu, "h100-sxm");
  EXPECT_DOUBLE_EQ(meta->cluster.nic_Gbps, 400);
  EXPECT_EQ(meta->cluster.fabric.pod_gpus, 3072);
  EXPECT_EQ(meta->cluster.fabric.pods, 8);
  EXPECT_DOUBLE_EQ(meta->cluster.fabric.above_pod_oversubscription, 7);
  EXPECT_FALSE(meta->cluster.fabric.rail_optimized);
  EXPECT_EQ(meta->cluster.max_gpus(), 24576);

  // DGX GB200 NVL72: the 72-GPU rack is the NVLink domain (the model's server), one 400 G NIC per
  // GPU on 72 rails of 64-port switches at 1:1. A ToR has 32 ports down (one rack each), a spine
  // 32 ToRs below it and the top tier 64 ports: 32 · 64 = 2,048 ToRs, floor(2,048 / 72) = 28
  // whole groups of one ToR per rail, each holding 32 racks: 28 · 32 · 72 = 64,512 GPUs.
  const auto nvl72 = cluster_preset("dgx-gb200-nvl72");
  ASSERT_TRUE(nvl72.has_value());
  EXPECT_EQ(nvl72->gpu, "gb200");
  EXPECT_EQ(nvl72->cluster.gpus_per_node, 72);
  EXPECT_EQ(nvl72->cluster.nics_per_node, 72);
  EXPECT_DOUBLE_EQ(nvl72->cluster.nic_Gbps, 400);
  EXPECT_TRUE(nvl72->cluster.fabric.rail_optimized);
  EXPECT_EQ(nvl72->cluster.max_gpus(), 28 * 32 * 72);
  // DGX B300: 8 x 800 G per node on 8 rails, three tiers of 144-port switches at 1:1: a ToR has
  // 72 nodes below it, a spine 72 ToRs, the top 144 ports: 10,368 ToRs / 8 rails = 1,296 rail
  // groups of 72 nodes of 8 GPUs.
  const auto b300 = cluster_preset("dgx-b300-superpod");
  ASSERT_TRUE(b300.has_value());
  EXPECT_EQ(b300->gpu, "b300");
  EXPECT_EQ(b300->cluster.gpus_per_node, 8);
  EXPECT_DOUBLE_EQ(b300->cluster.nic_Gbps, 800);
  EXPECT_EQ(b300->cluster.max_gpus(), 1296LL * 72 * 8);
  // GB300 NVL72: 800 G ConnectX-8 per GPU, three tiers of 144-port switches at 1:1: a ToR has 72
  // racks below it, a spine 72 ToRs, the top tier 144 ports: 72 · 144 = 10,368 ToRs,
  // floor(10,368 / 72) = 144 rail groups of 72 racks: 144 · 72 · 72 GPUs.
  const auto gb300 = cluster_preset("dgx-gb300-nvl72");
  ASSERT_TRUE(gb300.has_value());
  EXPECT_EQ(gb300->gpu, "gb300");
  EXPECT_EQ(gb300->cluster.gpus_per_node, 72);
  EXPECT_DOUBLE_EQ(gb300->cluster.nic_Gbps, 800);
  EXPECT_EQ(gb300->cluster.max_gpus(), 144 * 72 * 72);

  EXPECT_FALSE(cluster_preset("selene").has_value());
}

// A GPU named without a cluster gets the cluster it is usually deployed in.
TEST(ClusterPresets, DefaultClusterPerGpu) {
  EXPECT_EQ(default_cluster_for_gpu("a100-80gb"), "selene-a100");
  EXPECT_EQ(default_cluster_for_gpu("a800"), "megascale-ampere");
  EXPECT_EQ(default_cluster_for_gpu("h100-sxm"), "dgx-h100-superpod");
  EXPECT_EQ(default_cluster_for_gpu("h200-sxm"), "dgx-h100-superpod");
  EXPECT_EQ(default_cluster_for_gpu("a100-40gb"), "selene-a100");
  EXPECT_EQ(default_cluster_for_gpu("h800"), "dgx-h100-superpod");
  EXPECT_EQ(default_cluster_for_gpu("b200"), "dgx-h100-superpod");
  EXPECT_EQ(default_cluster_for_gpu("gb200"), "dgx-gb200-nvl72");
  EXPECT_EQ(default_cluster_for_gpu("gb300"), "dgx-gb300-nvl72");
  EXPECT_EQ(default_cluster_for_gpu("b300"), "dgx-b300-superpod");
  EXPECT_EQ(default_cluster_for_gpu("v100"), "");
  for (const std::string& gpu : preset_names(PresetKind::kGpu)) {
    EXPECT_TRUE(cluster_preset(default_cluster_for_gpu(gpu)).has_value()) << gpu;
  }
}

// Megatron-LM SC21 Table 1: the shapes of published-runs.csv, and each size name is the paper's
// Eq. 2 count 12lh²(1 + 13/12h + (V+s)/12lh) with V = 51,200 and s = 2,048, to the digit shown.
TEST(ModelPresets, MegatronTable1) {
  struct Row {
    const char* name;
    int layers, hidden, heads;
    double billions;
  };
  const Row rows[] = {
      {"megatron-1.7b", 24, 2304, 24, 1.7},        {"megatron-3.6b", 30, 3072, 32, 3.6},
      {"megatron-7.5b", 36, 4096, 32, 7.5},        {"megatron-18.4b", 40, 6144, 48, 18.4},
      {"megatron-39.1b", 48, 8192, 64, 39.1},      {"megatron-76.1b", 60, 10240, 80, 76.1},
      {"megatron-145.6b", 80, 12288, 96, 145.6},   {"megatron-310.1b", 96, 16384, 128, 310.1},
      {"megatron-529.6b", 105, 20480, 128, 529.6}, {"megatron-1008b", 128, 25600, 160, 1008}};
  for (const Row& r : rows) {
    const auto m = model_preset(r.name);
    ASSERT_TRUE(m.has_value()) << r.name;
    EXPECT_EQ(m->layers, r.layers) << r.name;
    EXPECT_EQ(m->hidden, r.hidden) << r.name;
    EXPECT_EQ(m->heads, r.heads) << r.name;
    EXPECT_EQ(m->kv_heads, r.heads) << r.name;
    EXPECT_EQ(m->ffn_hidden, 4 * r.hidden) << r.name;
    EXPECT_EQ(m->vocab, 51200) << r.name;
    EXPECT_EQ(m->seq_len, 2048) << r.name;
    EXPECT_EQ(m->mlp, model::MlpKind::kGelu) << r.name;
    EXPECT_EQ(m->norm, model::NormKind::kLayerNorm) << r.name;
    EXPECT_EQ(m->position, model::PositionKind::kLearned) << r.name;
    EXPECT_TRUE(m->bias) << r.name;
    EXPECT_TRUE(m->tied_embeddings) << r.name;
    const double eq2 = model::megatron_eq2_parameters(m->layers, m->hidden, m->vocab, m->seq_len);
    const double digit = r.billions >= 1000 ? 0.5 : 0.05;
    EXPECT_NEAR(eq2 / 1e9, r.billions, digit) << r.name;
  }
}

// The other models' parameter counts land on their names within 3% (GPT-3 2.7B counts 2.65B with
// the padded vocabulary; Llama 3 8B 8.03B), which checks shape, vocabulary and MLP kind together.
TEST(ModelPresets, ParameterCountsMatchNames) {
  const std::pair<const char*, double> sizes[] = {
      {"gpt3-125m", 0.125}, {"gpt3-350m", 0.35}, {"gpt3-760m", 0.76},     {"gpt3-2.7b", 2.7},
      {"gpt3-6.7b", 6.7},   {"gpt3-175b", 175},  {"megascale-175b", 175}, {"megascale-530b", 530},
      {"llama3-8b", 8},     {"llama3-70b", 70},  {"llama3-405b", 405}};
  for (const auto& [name, billions] : sizes) {
    const auto m = model_preset(name);
    ASSERT_TRUE(m.has_value()) << name;
    EXPECT_NEAR(model::count_parameters(*m).total / 1e9 / billions, 1.0, 0.03) << name;
  }
}

// Published shapes: GPT-3 Table 2.1 (heads dividing hidden), MegaScale §6, Llama 3 Table 3 with
// GQA, SwiGLU, RMSNorm, RoPE, no biases and untied embeddings.
TEST(ModelPresets, PublishedShapes) {
  const auto gpt3 = model_preset("gpt3-175b");
  ASSERT_TRUE(gpt3.has_value());
  EXPECT_EQ(gpt3->layers, 96);
  EXPECT_EQ(gpt3->heads, 96);
  EXPECT_EQ(gpt3->vocab, 51200);

  const auto ms175 = model_preset("megascale-175b");
  ASSERT_TRUE(ms175.has_value());
  EXPECT_EQ(ms175->layers, 96);
  EXPECT_EQ(ms175->hidden, 12288);
  EXPECT_EQ(ms175->heads, 128);
  EXPECT_EQ(ms175->seq_len, 2048);
  EXPECT_EQ(ms175->vocab, 64000);

  const auto ms530 = model_preset("megascale-530b");
  ASSERT_TRUE(ms530.has_value());
  EXPECT_EQ(ms530->layers, 105);
  EXPECT_EQ(ms530->hidden, 20480);
  EXPECT_EQ(ms530->heads, 160);
  EXPECT_EQ(ms530->vocab, 64000);

  const auto llama = model_preset("llama3-405b");
  ASSERT_TRUE(llama.has_value());
  EXPECT_EQ(llama->layers, 126);
  EXPECT_EQ(llama->hidden, 16384);
  EXPECT_EQ(llama->heads, 128);
  EXPECT_EQ(llama->kv_heads, 8);
  EXPECT_EQ(llama->ffn_hidden, 53248);
  EXPECT_EQ(llama->vocab, 128000);
  EXPECT_EQ(llama->seq_len, 8192);
  EXPECT_EQ(llama->mlp, model::MlpKind::kSwiglu);
  EXPECT_EQ(llama->norm, model::NormKind::kRmsNorm);
  EXPECT_EQ(llama->position, model::PositionKind::kRope);
  EXPECT_FALSE(llama->bias);
  EXPECT_FALSE(llama->tied_embeddings);
  EXPECT_EQ(model_preset("llama3-70b")->ffn_hidden, 28672);
  EXPECT_EQ(model_preset("llama3-8b")->ffn_hidden, 14336);

  for (const std::string& name : preset_names(PresetKind::kModel)) {
    const auto m = model_preset(name);
    ASSERT_TRUE(m.has_value()) << name;
    EXPECT_EQ(m->name, name);
    EXPECT_EQ(m->hidden % m->heads, 0) << name;
    EXPECT_EQ(m->heads % m->kv_heads, 0) << name;
  }
}

// --list-presets shows every preset of the three kinds (DESIGN.md §5) with a source.
TEST(Presets, ListingNamesEverything) {
  EXPECT_EQ(preset_names(PresetKind::kGpu).size(), 10u);
  EXPECT_EQ(preset_names(PresetKind::kCluster).size(), 8u);
  EXPECT_EQ(preset_names(PresetKind::kModel).size(), 21u);
  const std::string listing = list_presets();
  for (PresetKind kind : {PresetKind::kGpu, PresetKind::kCluster, PresetKind::kModel}) {
    for (const PresetInfo& info : preset_info(kind)) {
      EXPECT_TRUE(contains(listing, info.name)) << info.name;
      EXPECT_FALSE(info.description.empty()) << info.name;
      EXPECT_FALSE(info.source.empty()) << info.name;
    }
  }
  EXPECT_TRUE(contains(listing, "source: Jiang et al., NSDI'24"));
  EXPECT_TRUE(contains(listing, "\"Ampere\""));
}

}  // namespace
}  // namespace trainsim::scen
