#include "scenarios/presets.h"

#include <fmt/format.h>

#include <array>
#include <cctype>

#include <utility>

namespace trainsim::scen {
model::ModelConfig gpt_model(std::string name, int layers, int hidden, int heads, int vocab,
                             int seq_len) {
  model::ModelConfig m;
  m.name = std::move(name);
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = heads;
  m.ffn_hidden = 4 * hidden;
  m.vocab = vocab;
  m.seq_len = seq_len;
  return m;
}

namespace {

struct GpuEntry {
  topo::GpuSpec spec;
  std::string label;
  std::string source;
  std::string default_cluster;
};

struct ClusterEntry {
  ClusterPreset preset;
  std::string description;
  std::string source;
};

struct ModelEntry {
  model::ModelConfig config;
  std::string label;
  std::string source;
};

topo::GpuSpec gpu(std::string name, double tflops16, double tflops8, double hbm_mib, int sms,
                  double hbm_tbps, double nvlink_gbps, bool nvls) {
  topo::GpuSpec g;
  g.name = std::move(name);
  g.base = g.name;
  g.peak_dense_16bit_flops = tflops16 * 1e12;
  g.peak_dense_fp8_flops = tflops8 * 1e12;
  g.hbm_bytes = hbm_mib * 1024.0 * 1024.0;
  g.sms = sms;
  g.hbm_Bps = hbm_tbps * 1e12;
  g.nvlink_Bps = nvlink_gbps * 1e9;
  g.has_nvls = nvls;
  return g;
}

// Dense peaks are the datasheet figures without structured sparsity; NVLink is per GPU per
// direction (the datasheets quote both directions: 600, 400 and 900 GB/s). Memory is what the
// driver exposes, as `nvidia-smi` prints it (memory.total): 81,920 MiB on an A100/A800 SXM4 80GB,
// 81,559 MiB on an H100 SXM5 80GB (both as printed in public nvidia-smi listings), 143,771 MiB on
// the H200 this project measured (docs/validation/h200-2026-11-30/machine-2.txt). "80 GB" in a
// datasheet is this capacity rounded, not 80·10⁹ bytes. SMs: 108 (A100 whitepaper), 132 (H100 SXM5
// whitepaper; the H200 is the same GH100 configuration).
// The GPU's link to host memory, per direction (activation offloading copies over it,
// training.cpu_offload_layers): PCIe Gen4 x16 on the A100/A800 SXM4 (16 GT/s × 16 lanes, 32 GB/s
// per direction, half of Gen5's), PCIe Gen5 x16 on the H100/H200/H800 and B200 (128 GB/s
// bidirectional: Transformer Engine's CPU-offloading guide, docs/features/other_optimizations/
// cpu_offloading), NVLink-C2C to the Grace CPU on the GB200 and GB300 superchips (900 GB/s
// bidirectional per link, the same guide). The B300's host interface is not in these sources:
// taken as the B200's PCIe Gen5 [D].
// Host memory per GPU, what offloaded activations may fill (the whole share: the operating
// system's and the framework's own use are not subtracted): DGX A100 1 TB (1,024 GB) for 8 GPUs
// (128 GB), DGX H100 / H200 / B200 / B300 2 TB (2,048 GB) for 8 (256 GB; the DGX datasheets' base
// configurations, and
// the A800's and H800's as theirs), a GB200 or GB300 superchip's Grace 480 GB LPDDR5X for its two
// GPUs (240 GB; Transformer Engine's CPU-offloading guide, the GB300 NVL72's 17 TB for 72 GPUs).
topo::GpuSpec host_link(topo::GpuSpec g, double gbytes_per_s, double host_gb) {
  g.host_link_Bps = gbytes_per_s * 1e9;
  g.host_memory_bytes = host_gb * 1e9;
  return g;
}

const std::vector<GpuEntry>& gpus() {
  static const std::vector<GpuEntry> kGpus = {
      {host_link(gpu("a100-80gb", 312, 0, 81920, 108, 2.04, 300, false), 32, 128), "NVIDIA A100 SXM4 80GB",
       "NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB column)", "selene-a100"},
      // The 40 GB A100 is the same GA100 (108 SMs, 1,410 MHz boost, 400 W) with HBM2 at 1,555
      // GB/s; 40,536 MiB as nvidia-smi prints it for A100-SXM4-40GB. The first DGX A100 (320 GB)
      // carried it with Selene's network (8 x 200 Gb/s HDR per node).
      {host_link(gpu("a100-40gb", 312, 0, 40536, 108, 1.555, 300, false), 32, 128), "NVIDIA A100 SXM4 40GB",
       "NVIDIA A100 Tensor Core GPU datasheet (SXM4 40GB column)", "selene-a100"},
      // The A800 is the A100 with NVLink cut to 8 links; MegaScale's Ampere cluster (8 x 200 G
      // RoCE per server) is the closest published fabric for it.
      {host_link(gpu("a800", 312, 0, 81920, 108, 2.04, 200, false), 32, 128), "NVIDIA A800 SXM4 80GB",
       "NVIDIA A800 Tensor Core GPU datasheet (SXM 80GB)", "megascale-ampere"},
      {host_link(gpu("h100-sxm", 989, 1979, 81559, 132, 3.35, 450, true), 64, 256), "NVIDIA H100 SXM5 80GB",
       "NVIDIA H100 Tensor Core GPU datasheet (SXM column)", "dgx-h100-superpod"},
      // The H800 is the H100 SXM5 with NVLink cut to 400 GB/s (both directions), as the A800 is
      // the A100's; DeepSeek-V3's H800 nodes (8 GPUs, 400 Gb/s InfiniBand per GPU, §3.1 of its
      // report) are the DGX H100 network. NVLink SHARP is not claimed for it.
      {host_link(gpu("h800", 989, 1979, 81559, 132, 3.35, 200, false), 64, 256), "NVIDIA H800 SXM5 80GB",
       "NVIDIA H800 Tensor Core GPU datasheet (SXM5); DeepSeek-V3 technical report §3.1 (cluster)",
       "dgx-h100-superpod"},
      // DGX H200 keeps the DGX H100 network (8 x 400 G NDR, rail-optimized), hence its cluster.
      {host_link(gpu("h200-sxm", 989, 1979, 143771, 132, 4.8, 450, true), 64, 256), "NVIDIA H200 SXM 141GB",
       "NVIDIA H200 Tensor Core GPU datasheet (SXM column)", "dgx-h100-superpod"},
      // B200 (HGX/DGX B200): 2,250 TFLOP/s dense bf16 and 4,500 fp8 (half the sparse figures),
      // HBM3e at 8 TB/s ("180 GB" per GPU in the DGX B200 datasheet's 1,440 GB; 183,359 MiB as
      // nvidia-smi prints it on a 1,000 W B200), NVLink 5 at 1.8 TB/s (both directions) through
      // NVSwitch with SHARP, 148 SMs; DGX B200 has 8 x 400 Gb/s ConnectX-7 per node, the DGX
      // H100 network.
      {host_link(gpu("b200", 2250, 4500, 183359, 148, 8.0, 900, true), 64, 256), "NVIDIA B200 SXM 180GB",
       "NVIDIA DGX B200 / HGX B200 datasheets; SM count: CUDA device properties of a B200 "
       "(148 SMs, as tile-ai/TileFoundry#76 records them)",
       "dgx-h100-superpod"},
      // B300 (HGX/DGX B300, Blackwell Ultra at up to 1,100 W): 2,250 / 4,500 TFLOP/s dense bf16 /
      // fp8 (DGX B300 datasheet: 72 PFLOP/s fp8 per 8 GPUs with sparsity; ML Engineering, note
      // 21), HBM3e "288 GB" at 8 TB/s (275,040 MiB as nvidia-smi prints "NVIDIA B300 SXM6 AC" in
      // public logs), NVLink 5 at 900 GB/s a direction through NVSwitch, 148 SMs (CUDA, public
      // kernel notes). DGX B300 has 8 x 800 Gb/s ConnectX-8 per node.
      {host_link(gpu("b300", 2250, 4500, 275040, 148, 8.0, 900, true), 64, 256), "NVIDIA B300 SXM 288GB",
       "NVIDIA DGX B300 datasheet; ML Engineering accelerator tables; 148 SMs and 275,040 MiB as "
       "CUDA and nvidia-smi report them on B300 nodes",
       "dgx-b300-superpod"},
      // GB200 (the Blackwell GPU of a GB200 superchip, run at up to 1,200 W): 2,500 TFLOP/s dense
      // bf16 and 5,000 fp8 (the GB200 NVL72 page's 360 and 720 PFLOP/s per 72 GPUs with
      // sparsity, halved; S. Bekman, *ML Engineering*, accelerator table, note 23), HBM3e "186 GB"
      // at 8 TB/s (189,471 MiB as nvidia-smi prints it on GB200 nodes in public logs), NVLink 5 at
      // 1.8 TB/s both directions to all 72 GPUs of the rack through NVLink switches, 152 SMs (as
      // CUDA reports them in public GB200 benchmark notes). Its usual cluster is the NVL72 rack.
      {host_link(gpu("gb200", 2500, 5000, 189471, 152, 8.0, 900, true), 450, 240), "NVIDIA GB200 (Blackwell GPU of a GB200 NVL72)",
       "NVIDIA GB200 NVL72 specifications (per GPU: the rack's figures / 72, dense); memory and "
       "bandwidth: ML Engineering accelerator tables; 152 SMs and 189,471 MiB as CUDA and "
       "nvidia-smi report them on GB200 nodes",
       "dgx-gb200-nvl72"},
      // GB300 (the Blackwell Ultra GPU of a GB300 superchip, up to 1,400 W): 2,500 / 5,000
      // TFLOP/s dense bf16 / fp8 (the GB300 NVL72 page's figures per GPU without sparsity; ML
      // Engineering, note 24), HBM3e "288 GB" at 8 TB/s (284,208 MiB as nvidia-smi prints it on
      // GB300 nodes in public logs), NVLink 5 to all 72 GPUs of the rack, 148 SMs (as CUDA reports
      // them in public GB300 kernel notes). Its usual cluster is the GB300 NVL72 rack.
      {host_link(gpu("gb300", 2500, 5000, 284208, 148, 8.0, 900, true), 450, 240), "NVIDIA GB300 (Blackwell Ultra GPU of a GB300 NVL72)",
       "NVIDIA GB300 NVL72 specifications (per GPU, dense); memory and bandwidth: ML Engineering "
       "accelerator tables; 148 SMs and 284,208 MiB as CUDA and nvidia-smi report them on GB300 "
       "nodes",
       "dgx-gb300-nvl72"},
  };
  return kGpus;
}

ClusterPreset cluster(std::string name, std::string gpu_name, int nics, double nic_gbps, int tiers,
                      int radix, double port_gbps, int port_split, bool rail_optimized) {
  ClusterPreset c;
  c.cluster.name = std::move(name);
  c.cluster.gpus = 0;
  c.cluster.gpus_per_node = 8;
  c.cluster.nics_per_node = nics;
  c.cluster.nic_Gbps = nic_gbps;
  c.cluster.fabric.tiers = tiers;
  c.cluster.fabric.switch_radix = radix;
  c.cluster.fabric.switch_port_Gbps = port_gbps;
  c.cluster.fabric.port_split = port_split;
  c.cluster.fabric.rail_optimized = rail_optimized;
  c.gpu = std::move(gpu_name);
  return c;
}

ClusterPreset meta_h100_roce() {
  // Minipack2 rack switches are 25.6 Tb/s parts, modelled as 64 x 400 G; pods of 3,072 GPUs are
  // non-blocking and 8 pods meet at the aggregation layer at 1:7.
  ClusterPreset c = cluster("meta-h100-roce", "h100-sxm", 8, 400, 3, 64, 400, 1, false);
  c.cluster.fabric.pod_gpus = 3072;
  c.cluster.fabric.pods = 8;
  c.cluster.fabric.above_pod_oversubscription = 7;
  // Two servers (16 GPUs) per rack switch; the cluster and aggregation switches are modular
  // chassis (Arista 7800R3 class, up to 576 x 400 G ports), not 64-port parts.
  c.cluster.fabric.servers_per_tor = 2;
  c.cluster.fabric.spine_radix = 576;
  return c;
}

// An NVL72 rack: the NVLink domain is the rack, 72 GPUs behind the NVLink switch trays, which
// the model takes as its server (`gpus_per_node`). Each GPU has its own NIC (4 per compute
// tray) and rail i joins the i-th GPU of every rack, three tiers of `radix`-port switches at 1:1:
// GB200 with ConnectX-7 at 400 G on QM9700-class 64-port NDR switches, GB300 with ConnectX-8 at
// 800 G on 144-port Quantum-X800 switches.
ClusterPreset nvl72_rack(std::string name, std::string gpu_name, double nic_gbps, int radix) {
  ClusterPreset c =
      cluster(std::move(name), std::move(gpu_name), 72, nic_gbps, 3, radix, nic_gbps, 1, true);
  c.cluster.gpus_per_node = 72;
  return c;
}

const std::vector<ClusterEntry>& clusters() {
  static const std::vector<ClusterEntry> kClusters = {
      {cluster("selene-a100", "a100-80gb", 8, 200, 3, 40, 200, 1, true),
       "DGX A100 nodes, 8 x 200 Gb/s HDR InfiniBand per node (one per GPU, rail-optimized), "
       "non-blocking 3-tier fat tree of 40-port HDR switches",
       "Narayanan et al., SC21 (Megatron-LM) §5; NVIDIA DGX A100 SuperPOD reference "
       "architecture (40-port QM8790 HDR switches)"},
      {cluster("megascale-ampere", "a100-80gb", 8, 200, 3, 64, 400, 2, true),
       "8 Ampere GPUs + 8 x 200 Gb/s RoCE NICs per server, each NIC to a different ToR; 3 tiers "
       "of 64 x 400 G Tomahawk 4 at 1:1; ToR downlinks split into 2 x 200 G. The paper says "
       "only \"Ampere\": modelled as A100 80GB",
       "Jiang et al., NSDI'24 (MegaScale) §3.6 (network topology)"},
      {cluster("dgx-h100-superpod", "h100-sxm", 8, 400, 3, 64, 400, 1, true),
       "DGX H100 nodes, 8 x 400 Gb/s NDR InfiniBand per node, rail-optimized; 64-port NDR "
       "switches, 1:1 at every tier (2 tiers up to 2,048 GPUs, a core tier above)",
       "NVIDIA DGX SuperPOD reference architecture (DGX H100; scalable unit of 32 nodes)"},
      // Jean Zay's gpu_p5 partition, where BLOOM 176B trained (BigScience, 2022): 8 A100 80GB
      // per node and 4 x 100 Gb/s Omni-Path links per node (the tr11-176B-ml README's hardware
      // section; the BLOOM paper's §3.4). Omni-Path's 48-port edge switches; the machine's
      // "enhanced hypercube" wiring is modelled as a non-blocking fat tree (its extra hops and
      // its bisection are not modelled).
      {cluster("jean-zay-a100", "a100-80gb", 4, 100, 3, 48, 100, 1, false),
       "8 x A100 80GB per node, 4 x 100 Gb/s Omni-Path per node (not one per GPU), modelled as "
       "a non-blocking fat tree of 48-port switches (the real fabric is an enhanced hypercube)",
       "BigScience tr11-176B-ml README, hardware (Jean Zay, IDRIS); Le Scao et al. 2022 "
       "(BLOOM) §3.4"},
      {cluster("dgx-b300-superpod", "b300", 8, 800, 3, 144, 800, 1, true),
       "DGX B300 nodes, 8 x 800 Gb/s XDR ConnectX-8 per node, rail-optimized; 144-port 800 G "
       "Quantum-X800 switches, 1:1 at every tier (scalable unit of 72 nodes: 8 leaves, one per "
       "rail)",
       "NVIDIA DGX SuperPOD reference architecture with DGX B300 systems (XDR): 72 nodes, 576 "
       "GPUs, 8 leaf switches per scalable unit; DGX B300 datasheet (ConnectX-8 SuperNICs)"},
      {nvl72_rack("dgx-gb200-nvl72", "gb200", 400, 64),
       "DGX GB200 NVL72 racks: 72 GPUs per NVLink domain (18 trays of 4), one 400 Gb/s NDR "
       "ConnectX-7 per GPU, rail-optimized, 64-port NDR switches, 1:1 at every tier (8 racks per "
       "scalable unit)",
       "NVIDIA DGX SuperPOD reference architecture featuring DGX GB200 (scalable unit of 8 DGX "
       "GB200 racks, NDR 400 Gb/s InfiniBand across racks, NVLink 5 inside each); GB200 NVL72 "
       "specifications"},
      {nvl72_rack("dgx-gb300-nvl72", "gb300", 800, 144),
       "GB300 NVL72 racks: 72 GPUs per NVLink domain (18 trays of 4), one 800 Gb/s XDR "
       "ConnectX-8 per GPU, rail-optimized, 3 tiers of 144-port 800 G Quantum-X800 switches, "
       "1:1 at every tier",
       "NVIDIA NVL72 AI factory enterprise reference architecture, components (GB300 NVL compute "
       "tray: 4 Blackwell Ultra GPUs and 4 ConnectX-8 HCAs); ConnectX-8 SuperNIC (800 Gb/s XDR); "
       "Quantum-X800 Q3400 (144 ports of 800 Gb/s)"},
      {meta_h100_roce(),
       "8 x H100 + 8 x 400 Gb/s RoCE per server, 2 servers per rack switch; pods of 3,072 GPUs "
       "at full bisection, 8 pods joined at 1:7; not rail-optimized",
       "Llama 3 Herd of Models (Dubey et al., 2024) §3.3.1; Gangidi et al., SIGCOMM'24"},
  };
  return kClusters;
}

model::ModelConfig gpt(std::string name, int layers, int hidden, int heads, int vocab) {
  return gpt_model(std::move(name), layers, hidden, heads, vocab);
}

// Llama 3 (Table 3 of the paper): GQA with 8 KV heads, SwiGLU, RMSNorm, RoPE, no biases,
// untied output projection, 128K vocabulary, 8K context.
model::ModelConfig llama3(std::string name, int layers, int hidden, int heads, int ffn) {
  model::ModelConfig m;
  m.name = std::move(name);
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = 8;
  m.ffn_hidden = ffn;
  m.vocab = 128000;
  m.seq_len = 8192;
  m.mlp = model::MlpKind::kSwiglu;
  m.norm = model::NormKind::kRmsNorm;
  m.position = model::PositionKind::kRope;
  m.bias = false;
  m.tied_embeddings = false;
  m.dropout = false;  // Llama trains without dropout (no dropout layers in its reference model)
  return m;
}

// Megatron-LM pads GPT-2's 50,257-token BPE vocabulary to a multiple of 128 x TP (51,200 at TP 8);
// the SC21 and GPT-3 presets use the padded size, as Megatron's FLOP counts do.
constexpr int kGpt2PaddedVocab = 51200;
constexpr int kMegaScaleVocab = 64000;

const std::vector<ModelEntry>& models() {
  static const std::vector<ModelEntry> kModels = [] {
    const std::string sc21 = "Narayanan et al., SC21 (Megatron-LM) Table 1";
    const std::string gpt3 = "Brown et al., 2020 (GPT-3) Table 2.1";
    const std::string megascale = "Jiang et al., NSDI'24 (MegaScale) §6";
    const std::string llama = "Llama 3 Herd of Models (Dubey et al., 2024) Table 3";
    return std::vector<ModelEntry>{
        {gpt("megatron-1.7b", 24, 2304, 24, kGpt2PaddedVocab), "Megatron-LM 1.7B", sc21},
        {gpt("megatron-3.6b", 30, 3072, 32, kGpt2PaddedVocab), "Megatron-LM 3.6B", sc21},
        {gpt("megatron-7.5b", 36, 4096, 32, kGpt2PaddedVocab), "Megatron-LM 7.5B", sc21},
        {gpt("megatron-18.4b", 40, 6144, 48, kGpt2PaddedVocab), "Megatron-LM 18.4B", sc21},
        {gpt("megatron-39.1b", 48, 8192, 64, kGpt2PaddedVocab), "Megatron-LM 39.1B", sc21},
        {gpt("megatron-76.1b", 60, 10240, 80, kGpt2PaddedVocab), "Megatron-LM 76.1B", sc21},
        {gpt("megatron-145.6b", 80, 12288, 96, kGpt2PaddedVocab), "Megatron-LM 145.6B", sc21},
        {gpt("megatron-310.1b", 96, 16384, 128, kGpt2PaddedVocab), "Megatron-LM 310.1B", sc21},
        {gpt("megatron-529.6b", 105, 20480, 128, kGpt2PaddedVocab), "Megatron-LM 529.6B", sc21},
        {gpt("megatron-1008b", 128, 25600, 160, kGpt2PaddedVocab), "Megatron-LM 1T", sc21},
        // GPT-3 1.3B (2048/24) and 13B (5140/40) are left out: their published head counts do
        // not divide the hidden size.
        {gpt("gpt3-125m", 12, 768, 12, kGpt2PaddedVocab), "GPT-3 Small", gpt3},
        {gpt("gpt3-350m", 24, 1024, 16, kGpt2PaddedVocab), "GPT-3 Medium", gpt3},
        {gpt("gpt3-760m", 24, 1536, 16, kGpt2PaddedVocab), "GPT-3 Large", gpt3},
        {gpt("gpt3-2.7b", 32, 2560, 32, kGpt2PaddedVocab), "GPT-3 2.7B", gpt3},
        {gpt("gpt3-6.7b", 32, 4096, 32, kGpt2PaddedVocab), "GPT-3 6.7B", gpt3},
        {gpt("gpt3-175b", 96, 12288, 96, kGpt2PaddedVocab), "GPT-3 175B", gpt3},
        // MegaScale publishes only the shape; the rest follows GPT-3, which the paper compares to.
        {gpt("megascale-175b", 96, 12288, 128, kMegaScaleVocab), "MegaScale 175B", megascale},
        {gpt("megascale-530b", 105, 20480, 160, kMegaScaleVocab), "MegaScale 530B", megascale},
        {llama3("llama3-8b", 32, 4096, 32, 14336), "Llama 3 8B", llama},
        {llama3("llama3-70b", 80, 8192, 64, 28672), "Llama 3 70B", llama},
        {llama3("llama3-405b", 126, 16384, 128, 53248), "Llama 3 405B", llama},
    };
  }();
  return kModels;
}

const GpuEntry* find_gpu(std::string_view name) {
  for (const GpuEntry& e : gpus()) {
    if (e.spec.name == name) return &e;
  }
  return nullptr;
}

const ClusterEntry* find_cluster(std::string_view name) {
  for (const ClusterEntry& e : clusters()) {
    if (e.preset.cluster.name == name) return &e;
  }
  return nullptr;
}

const ModelEntry* find_model(std::string_view name) {
  for (const ModelEntry& e : models()) {
    if (e.config.name == name) return &e;
  }
  return nullptr;
}

std::string describe(const topo::GpuSpec& g) {
  std::string fp8 = g.peak_dense_fp8_flops > 0
                        ? fmt::format("{:g} fp8", g.peak_dense_fp8_flops / 1e12)
                        : std::string("no fp8");
  std::string host;
  if (g.host_link_Bps > 0) {
    host = fmt::format(", host link {:g} GB/s/dir, host memory {:g} GB", g.host_link_Bps / 1e9,
                       g.host_memory_bytes / 1e9);
  }
  return fmt::format("{:g} TFLOP/s bf16, {}, {:.1f} GiB HBM at {:g} TB/s, NVLink {:g} GB/s/dir{}{}",
                     g.peak_dense_16bit_flops / 1e12, fp8, g.hbm_bytes / (1024.0 * 1024 * 1024),
                     g.hbm_Bps / 1e12,
                     g.nvlink_Bps / 1e9, g.has_nvls ? ", NVLS" : "", host);
}

std::string describe(const model::ModelConfig& m) {
  std::string heads = m.kv_heads == m.heads ? fmt::format("{} heads", m.heads)
                                            : fmt::format("{} heads ({} KV)", m.heads, m.kv_heads);
  return fmt::format("{} layers, hidden {}, {}, ffn {}, seq {}, vocab {}, {}/{}", m.layers,
                     m.hidden, heads, m.ffn_hidden, m.seq_len, m.vocab, model::to_string(m.mlp),
                     model::to_string(m.norm));
}

}  // namespace

std::optional<topo::GpuSpec> gpu_preset(std::string_view name) {
  const GpuEntry* e = find_gpu(name);
  if (e == nullptr) return std::nullopt;
  return e->spec;
}

std::optional<ClusterPreset> cluster_preset(std::string_view name) {
  const ClusterEntry* e = find_cluster(name);
  if (e == nullptr) return std::nullopt;
  return e->preset;
}

std::optional<model::ModelConfig> model_preset(std::string_view name) {
  const ModelEntry* e = find_model(name);
  if (e == nullptr) return std::nullopt;
  return e->config;
}

std::string canonical_gpu(std::string_view name) {
  if (find_gpu(name) != nullptr) return std::string(name);
  std::string n;
  for (char c : name) {
    if (c == ' ' || c == '_') c = '-';
    n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (n.rfind("nvidia-", 0) == 0) n.erase(0, 7);
  if (find_gpu(n) != nullptr) return n;
  // A family, the SXM form factor (and its generation), and at most one memory size: the preset
  // of that size, or of the family's only size when none is written.
  struct Family {
    const char* family;
    const char* preset;        // no size written, or `size_gb`
    int size_gb;
    const char* other = "";    // a second size of the family has a preset of its own
    int other_gb = 0;
    std::array<const char*, 3> system_suffixes = {"", "", ""};
  };
  static const Family kFamilies[] = {{"a100", "a100-80gb", 80, "a100-40gb", 40},
                                     {"a800", "a800", 80},
                                     {"h100", "h100-sxm", 80},
                                     {"h800", "h800", 80},
                                     {"h200", "h200-sxm", 141},
                                     {"b200", "b200", 180},
                                     {"b300", "b300", 288, "", 0, {"-ac", "-dc", ""}},
                                     {"gb200", "gb200", 186, "", 0, {"-nvl72", "-nvl36", "-nvl4"}},
                                     {"gb300", "gb300", 288, "", 0, {"-nvl72", "", ""}}};
  for (const Family& f : kFamilies) {
    if (n.rfind(f.family, 0) != 0) continue;
    std::string rest = n.substr(std::string_view(f.family).size());
    // Form factor, the memory's type and, for the rack-scale parts, the system (a GB200 of an
    // NVL72 or an NVL4 is the same GPU; an "H100 NVL" is a PCIe card, another GPU) do not
    // change the preset. nvidia-smi prints an H100 SXM5 as "NVIDIA H100 80GB HBM3" and a B300
    // as "NVIDIA B300 SXM6 AC".
    for (const char* drop : {"-sxm6", "-sxm5", "-sxm4", "-sxm", "-hbm3e", "-hbm3", "-hbm2e", "-hbm2"}) {
      const std::size_t at = rest.find(drop);
      if (at != std::string::npos) rest.erase(at, std::string_view(drop).size());
    }
    for (const char* drop : f.system_suffixes) {
      if (*drop == '\0') continue;
      const std::size_t at = rest.find(drop);
      if (at != std::string::npos) rest.erase(at, std::string_view(drop).size());
    }
    if (rest.empty()) return f.preset;
    // "-<n>gb" or "-<n>g", and nothing else (a PCIe or NVL part is another GPU).
    std::size_t digits = 1;
    while (digits < rest.size() && std::isdigit(static_cast<unsigned char>(rest[digits]))) ++digits;
    const std::string unit = rest.substr(digits);
    if (rest[0] != '-' || digits == 1 || digits > 5 || (unit != "gb" && unit != "g")) return "";
    const int gb = std::stoi(rest.substr(1, digits - 1));
    if (gb == f.size_gb) return f.preset;
    if (f.other_gb != 0 && gb == f.other_gb) return f.other;
    return "";  // a memory size no preset of the family has
  }
  return "";
}

std::string default_cluster_for_gpu(std::string_view name) {
  const GpuEntry* e = find_gpu(name);
  return e == nullptr ? std::string() : e->default_cluster;
}

std::vector<PresetInfo> preset_info(PresetKind kind) {
  std::vector<PresetInfo> out;
  switch (kind) {
    case PresetKind::kGpu:
      for (const auto& g : gpus()) {
        out.push_back({g.spec.name, g.label + ": " + describe(g.spec), g.source});
      }
      break;
    case PresetKind::kCluster:
      for (const auto& c : clusters()) {
        const topo::ClusterSpec& spec = c.preset.cluster;
        out.push_back({spec.name,
                       fmt::format("{} [{}; fabric holds up to {} GPUs]", c.description,
                                   c.preset.gpu, spec.max_gpus()),
                       c.source});
      }
      break;
    case PresetKind::kModel:
      for (const auto& m : models()) {
        out.push_back({m.config.name, m.label + ": " + describe(m.config), m.source});
      }
      break;
  }
  return out;
}

std::vector<std::string> preset_names(PresetKind kind) {
  std::vector<std::string> names;
  for (const auto& info : preset_info(kind)) names.push_back(info.name);
  return names;
}

std::string list_presets() {
  std::string out;
  const std::pair<PresetKind, const char*> sections[] = {
      {PresetKind::kGpu, "GPUs (cluster.gpu)"},
      {PresetKind::kCluster, "Clusters (cluster.preset)"},
      {PresetKind::kModel, "Models (model.preset)"}};
  for (const auto& [kind, title] : sections) {
    if (!out.empty()) out += "\n";
    out += std::string(title) + "\n";
    for (const auto& info : preset_info(kind)) {
      out += fmt::format("  {:<19} {}\n  {:<19} source: {}\n", info.name, info.description, "",
                         info.source);
    }
  }
  return out;
}

}  // namespace trainsim::scen
