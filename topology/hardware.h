// Hardware description of a cluster: the GPU model and the fabric that joins the GPUs.
//
// These are plain value structs filled by `scenarios/` (from presets, YAML and --set) and read by
// the simulator. They describe what the hardware *is* (datasheet numbers, fabric shape); how fast
// software actually runs on it is the calibration profile's business (`calibrate/`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainsim::topo {

/// One GPU model, from the vendor datasheet.
struct GpuSpec {
  std::string name;                 // preset name, e.g. "h100-sxm", or cluster.gpu_spec.name
  double peak_dense_16bit_flops = 0;  // dense bf16/fp16 tensor-core FLOP/s
  double peak_dense_fp8_flops = 0;    // 0 when the GPU has no fp8 tensor cores
  double hbm_bytes = 0;               // HBM the driver exposes (nvidia-smi memory.total), bytes
  double hbm_Bps = 0;                 // HBM bandwidth, bytes/s
  double nvlink_Bps = 0;              // NVLink bandwidth per GPU per direction, bytes/s
  bool has_nvls = false;              // NVSwitch multicast/reduction (NVLink SHARP)
  int sms = 0;                        // streaming multiprocessors (datasheet); 0 = unknown
  double host_link_Bps = 0;           // link to host memory per direction (PCIe, NVLink-C2C); 0 = unknown
  double host_memory_bytes = 0;       // the GPU's share of its server's host memory; 0 = unknown
  // The GPU preset whose datasheet calibration profile and architecture this GPU takes: its own
  // name for a preset, the cluster.gpu preset for a GPU described by cluster.gpu_spec.* keys.
  std::string base{};
};

/// Shape of the scale-out fabric, enough to size it and to find where bandwidth narrows.
struct FabricSpec {
  int tiers = 3;                     // switch layers (ToR/leaf, spine, core)
  int switch_radix = 64;             // ports per switch at switch_port_Gbps
  double switch_port_Gbps = 400;     // native switch port speed
  int port_split = 1;                // ToR downlink split (2 = a 400G port as 2 x 200G)
  std::vector<double> oversubscription;  // down:up ratio per tier from the bottom; empty = 1:1
  int pod_gpus = 0;                  // GPUs behind one full-bisection pod; 0 = whole fabric
  int pods = 0;                      // pods joined above the pod tier; 0 = as many as radix allows
  double above_pod_oversubscription = 1.0;  // down:up ratio above the pod tier
  bool rail_optimized = true;        // NIC i of every server goes to a rail-i switch
  // Servers per ToR (rail-optimized: per group of one ToR per rail); 0 = as many as the ToR's
  // downlinks hold. Meta's racks hold 2 servers under one rack switch.
  int servers_per_tor = 0;
  // Ports of the switches above the ToR tier; 0 = switch_radix. Modular chassis (Meta's cluster
  // and aggregation switches) have far more ports than the ToR.
  int spine_radix = 0;
  // Failed parts of the fabric, routed around at flow and packet fidelity (topo::Router): this
  // many switch-to-switch cables picked at random by `failure_seed`, and switches by the names
  // `trainsim topo` prints (leaf0, spine3, ...).
  int failed_cables = 0;
  std::uint64_t failure_seed = 1;
  std::vector<std::string> failed_switches;
  // A fabric file (GraphML or GraphViz, topology/fabric_file.h) the flow and packet fidelities
  // run on instead of the Clos the keys above build; empty: the built Clos.
  std::string file;
};

/// A cluster: homogeneous servers of `gpus_per_node` GPUs with NICs into a fabric.
struct ClusterSpec {
  std::string name;          // preset name or "custom"
  GpuSpec gpu;
  int gpus = 0;              // GPUs the job uses
  int gpus_per_node = 8;
  int nics_per_node = 8;
  double nic_Gbps = 200;     // line rate per NIC, Gbit/s
  double nic_latency_s = 0.5e-6;
  double switch_latency_s = 0.6e-6;
  FabricSpec fabric;

  double nic_Bps() const { return nic_Gbps * 1e9 / 8.0; }
  int nodes() const { return (gpus + gpus_per_node - 1) / gpus_per_node; }
  /// Largest number of GPUs the fabric described by `fabric` can attach: the same rules as the
  /// Clos builder (clos.h, docs/topology.md); 0 when the fabric cannot be built at all.
  std::int64_t max_gpus() const;
};

}  // namespace trainsim::topo
