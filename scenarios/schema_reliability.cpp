#include "scenarios/schema_reliability.h"

namespace trainsim::scen {

// Failure rates are in FIT (failures per 10^9 unit-hours) per component, or per day for the job
// as a whole. The defaults come from Llama 3's 54-day interruption table (Llama Team, "The Llama 3
// Herd of Models", 2024, Table 5: 419 unexpected interruptions on 16,384 H100 GPUs in 2,048
// hosts over 54 days = 1,296 hours, i.e. 21,233,664 GPU-hours and 2,654,208 host-hours), the
// count of each row divided by the unit-hours it happened in. docs/goodput.md maps every row.
std::vector<KeyDef> reliability_keys() {
  using K = KeyType;
  return {
      {.path = "reliability.rate.gpu",
       .type = K::kFloat,
       .unit = "FIT per GPU",
       // Faulty GPU 148 + GPU SRAM 19 + GPU system processor 17 + thermal interface/sensor 6 +
       // silent data corruption 6 = 196 in 21,233,664 GPU-hours (Llama 3 Table 5).
       .default_value = "9230.6",
       .description = "GPU failures (faulty GPU, SRAM, system processor, thermal, silent data "
                      "corruption): the host is evicted",
       .aliases = {"gpu_failure_rate", "gpu_fit"},
       .min_value = 0},
      {.path = "reliability.rate.hbm",
       .type = K::kFloat,
       .unit = "FIT per GPU",
       // GPU HBM3 memory: 72 in 21,233,664 GPU-hours (Llama 3 Table 5).
       .default_value = "3390.8",
       .description = "HBM/ECC failures of GPU memory: the host is evicted",
       .aliases = {"ecc_rate", "hbm_failure_rate", "memory_failure_rate"},
       .min_value = 0},
      {.path = "reliability.rate.nic",
       .type = K::kFloat,
       .unit = "FIT per NIC",
       // NIC: 7 in 21,233,664 NIC-hours (one 400G NIC per GPU; Llama 3 Table 5 and §3.3.1).
       .default_value = "329.67",
       .description = "NIC failures: the host is evicted",
       .aliases = {"nic_failure_rate", "hca_failure_rate"},
       .min_value = 0},
      {.path = "reliability.rate.link",
       .type = K::kFloat,
       .unit = "FIT per cable",
       // Llama 3 Table 5 "network switch/cable": 35 in 54 days on the 16,384-GPU meta-h100-roce
       // fabric (35,408 cables, 1,080 switches in this project's Clos plan), less the switches'
       // share at reliability.rate.switch: (35 − 1,080·9,225e-9·1,296)/(35,408·1,296)·1e9.
       .default_value = "481.34",
       .description = "Optics and cable failures (NIC-ToR and inter-switch cables): the job "
                      "crashes and restarts with the cable out of service (no eviction)",
       .aliases = {"cable_failure_rate", "optics_failure_rate", "transceiver_failure_rate"},
       .min_value = 0},
      {.path = "reliability.rate.switch",
       .type = K::kFloat,
       .unit = "FIT per switch",
       // Singh et al., "Surviving switch failures in cloud datacenters", CCR 51(2), 2021: a 2 %
       // chance of a switch failure within 3 months, −ln(0.98)/2,190 h = 9.225e-6 per hour.
       .default_value = "9225",
       .description = "Switch failures: the job crashes, routing goes around the switch (no "
                      "eviction)",
       .aliases = {"switch_failure_rate"},
       .min_value = 0},
      {.path = "reliability.rate.host",
       .type = K::kFloat,
       .unit = "FIT per host",
       // Unplanned host maintenance 32 + SSD 3 + power supply 3 + chassis 2 + IO expansion board
       // 2 + CPU 2 + system memory 2 = 46 in 2,654,208 host-hours (Llama 3 Table 5).
       .default_value = "17331",
       .description = "Host failures (CPU, DRAM, SSD, power, chassis, unplanned maintenance): "
                      "the host is evicted",
       .aliases = {"node_failure_rate", "server_failure_rate"},
       .min_value = 0},
      {.path = "reliability.rate.nccl_hang",
       .type = K::kFloat,
       .unit = "FIT per host",
       // NCCL watchdog timeouts: 7 in 2,654,208 host-hours (Llama 3 Table 5).
       .default_value = "2637.3",
       .description = "Collective hangs (found by the NCCL timeout); software, no eviction",
       .aliases = {"hang_rate", "nccl_timeout_rate"},
       .min_value = 0},
      {.path = "reliability.rate.framework_crash",
       .type = K::kFloat,
       .unit = "per day",
       // Software bug 54 + dependency 2 = 56 in 54 days for the whole job (Llama 3 Table 5).
       .default_value = "1.037",
       .description = "Framework and dependency crashes of the job (software, no eviction)",
       .aliases = {"software_failure_rate", "crash_rate"},
       .min_value = 0},
      {.path = "reliability.rate.planned",
       .type = K::kFloat,
       .unit = "per day",
       // 47 planned interruptions in 54 days (Llama 3 §3.3.4).
       .default_value = "0.8704",
       .description = "Planned stops (maintenance, configuration, data set updates): an "
                      "on-demand checkpoint and a restart",
       .aliases = {"maintenance_rate", "planned_interruptions"},
       .min_value = 0},
      {.path = "reliability.rate.slow_host",
       .type = K::kFloat,
       .unit = "FIT per host",
       // No published rate of slow hosts: off unless given (MegaScale §5 describes them).
       .default_value = "0",
       .description = "Hosts that turn slow (throttling, a degraded link): every iteration is "
                      "slower until reliability.detection.slow_node finds and evicts the host",
       .aliases = {"straggler_rate", "fail_slow_rate"},
       .min_value = 0},
      {.path = "reliability.slow_node.slowdown",
       .type = K::kFloat,
       // Assumption: a host at 80 % of its speed; the job-level cost comes from the straggler
       // model (docs/goodput.md).
       .default_value = "1.25",
       .description = "Compute slow-down of a slow host (1.25 = 25 % slower); the iteration's "
                      "slow-down follows from the scenario's critical path",
       .aliases = {"straggler_factor", "slow_factor"},
       .min_value = 1,
       .max_value = 100},
      {.path = "reliability.slow_node.model",
       .type = K::kEnum,
       // analytic: the critical path's compute scaled (microseconds); schedule: the straggler
       // model of the event-driven executor (every rank run: minutes at 10,000+ GPUs).
       .default_value = "analytic",
       .description = "How a slow host's iteration is priced: analytic (the critical path's "
                      "compute times the slow-down) or schedule (the schedule fidelity with "
                      "simulation.straggler_host; exact, minutes at 10,000+ GPUs)",
       .choices = {"analytic", "schedule"},
       .aliases = {"straggler_model"}},
      {.path = "reliability.weibull_shape",
       .type = K::kFloat,
       // 1 = exponential gaps, the standard assumption of Young (1974) and Daly (2006).
       .default_value = "1",
       .description = "Shape of the Weibull gaps between failures of a class (1: exponential; "
                      "< 1: bursts)",
       .aliases = {"weibull_k", "failure_shape"},
       .min_value = 0.05,
       .max_value = 20},

      {.path = "reliability.detection.crash",
       .type = K::kFloat,
       .unit = "s",
       // Assumption: a few heartbeat periods of the job controller (MegaScale §4.1: heartbeats
       // with status; detection and diagnosis together stay under 10 minutes).
       .default_value = "30",
       .description = "From a crash to the controller acting (process exit, heartbeat loss)",
       .aliases = {"heartbeat_timeout", "crash_detection"},
       .min_value = 0},
      {.path = "reliability.detection.hang",
       .type = K::kFloat,
       .unit = "s",
       // PyTorch's default NCCL process-group timeout: 10 minutes.
       .default_value = "600",
       .description = "From a hang to its detection (the collective timeout, NCCL watchdog)",
       .aliases = {"nccl_timeout", "hang_detection", "watchdog_timeout"},
       .min_value = 0},
      {.path = "reliability.detection.slow_node",
       .type = K::kFloat,
       .unit = "s",
       // Assumption: half an hour of MFU monitoring before the straggler is isolated.
       .default_value = "1800",
       .description = "From a host turning slow to its eviction",
       .aliases = {"straggler_detection", "slow_node_detection"},
       .min_value = 0},
      {.path = "reliability.diagnosis.automatic",
       .type = K::kBool,
       // MegaScale §4.2: self-check diagnostics after a fault (the lever).
       .default_value = "true",
       .description = "Automatic self-checks find the faulty host (MegaScale); false: every "
                      "fault waits for a manual investigation",
       .aliases = {"auto_diagnosis", "self_check"}},
      {.path = "reliability.diagnosis.auto_share",
       .type = K::kFloat,
       // MegaScale §4: more than 90 % of exceptions were detected and repaired automatically.
       .default_value = "0.9",
       .description = "Share of faults the self-checks pin down; the rest also need a manual "
                      "investigation",
       .aliases = {"auto_repair_share", "automatic_share"},
       .min_value = 0,
       .max_value = 1},
      {.path = "reliability.diagnosis.self_check",
       .type = K::kFloat,
       .unit = "s",
       // MegaScale §4: detection and diagnosis under 10 minutes; 5 minutes of tests.
       .default_value = "300",
       .description = "Duration of the automatic self-checks (intra- and inter-host tests)",
       .aliases = {"self_check_time", "diagnosis_time"},
       .min_value = 0},
      {.path = "reliability.diagnosis.manual",
       .type = K::kFloat,
       .unit = "s",
       // Assumption: two hours of an engineer's investigation.
       .default_value = "7200",
       .description = "A manual investigation, when self-checks are off or do not find the "
                      "fault",
       .aliases = {"manual_diagnosis", "manual_intervention"},
       .min_value = 0},
      {.path = "reliability.spares",
       .type = K::kInt,
       .unit = "hosts",
       // Assumption: 1 % of the job's hosts stand by (auto).
       .default_value = "auto",
       .description = "Hot-spare hosts that replace an evicted one at once; auto = 1 % of the "
                      "job's hosts, rounded up",
       .choices = {"auto"},
       .aliases = {"hot_spares", "spare_nodes", "spare_hosts"},
       .min_value = 0},
      {.path = "reliability.repair_time",
       .type = K::kFloat,
       .unit = "s",
       // Assumption: two days until an evicted host is repaired or replaced and back.
       .default_value = "172800",
       .description = "How long an evicted host is out before it rejoins the spare pool",
       .aliases = {"host_repair_time", "mttr"},
       .min_value = 0},
      {.path = "reliability.restart.relaunch",
       .type = K::kFloat,
       .unit = "s",
       // Assumption: rescheduling the job's pods, starting the processes and building the model,
       // two minutes; communicator initialization and the checkpoint load are added from their
       // models (optimizations.fast_comm_init, reliability.checkpoint.*).
       .default_value = "120",
       .description = "Relaunch of the job's processes before communicator initialization and "
                      "the checkpoint load",
       .aliases = {"relaunch_time", "restart_time"},
       .min_value = 0},
      {.path = "reliability.checkpoint.interval",
       .type = K::kInt,
       .unit = "s",
       .default_value = "auto",
       .description = "Seconds of training between checkpoints; auto = Daly's interval for the "
                      "job's failure rate and the blocking checkpoint time",
       .choices = {"auto"},
       .aliases = {"checkpoint_interval", "save_interval", "ckpt_interval"},
       .min_value = 1},
      {.path = "reliability.checkpoint.in_memory",
       .type = K::kBool,
       // MegaScale §4.3: stage 1 to host memory in seconds, stage 2 to HDFS in the background.
       .default_value = "true",
       .description = "Two-stage checkpoints: a short copy to host memory blocks training, the "
                      "write to storage runs behind it (MegaScale); false: training waits for "
                      "the write to storage",
       .aliases = {"async_checkpoint", "in_memory_checkpoint", "two_stage_checkpoint"}},
      {.path = "reliability.checkpoint.one_replica_load",
       .type = K::kBool,
       // MegaScale §4.3: one GPU of each data-parallel group reads, then broadcasts.
       .default_value = "true",
       .description = "At a restart one data-parallel replica reads the weights and broadcasts "
                      "them (MegaScale); false: every replica reads its own copy",
       .aliases = {"broadcast_load", "single_reader"}},
      {.path = "reliability.checkpoint.host_copy_bandwidth",
       .type = K::kFloat,
       .unit = "GB/s",
       // PCIe 4.0 x16: 31.5 GB/s per direction; about 80 % of it with pinned memory.
       .default_value = "25",
       .description = "GPU to pinned host memory, per GPU (stage 1 of an in-memory checkpoint)",
       .aliases = {"pcie_bandwidth", "d2h_bandwidth"},
       .min_value = 0.001},
      {.path = "reliability.checkpoint.storage_write_bandwidth",
       .type = K::kFloat,
       .unit = "GB/s",
       // Llama 3 §3.3.1: Tectonic sustains 2 TB/s (7 TB/s peak) for the 16K-GPU run.
       .default_value = "2000",
       .description = "Checkpoint storage write bandwidth, all hosts together",
       .aliases = {"storage_bandwidth", "hdfs_bandwidth"},
       .min_value = 0.001},
      {.path = "reliability.checkpoint.storage_read_bandwidth",
       .type = K::kFloat,
       .unit = "GB/s",
       // Llama 3 §3.3.1: the same 2 TB/s sustained.
       .default_value = "2000",
       .description = "Checkpoint storage read bandwidth, all hosts together",
       .aliases = {"storage_read", "hdfs_read_bandwidth"},
       .min_value = 0.001},
      {.path = "reliability.checkpoint.host_storage_bandwidth",
       .type = K::kFloat,
       .unit = "GB/s",
       // Assumption: one 200 Gb/s front-end NIC per host.
       .default_value = "25",
       .description = "One host's bandwidth to the checkpoint storage",
       .aliases = {"frontend_bandwidth", "host_storage"},
       .min_value = 0.001},
  };
}

}  // namespace trainsim::scen
