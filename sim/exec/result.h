// The outcome of simulating one training iteration, whatever the fidelity.
//
// Every time in `Breakdown` is on the critical path of the iteration and they add up to
// `iteration_time_s` (checked in tests). Communication that overlaps compute is not in the
// breakdown; only the part the compute stream waited on ("exposed") is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/plan/memory.h"

namespace trainsim::exec {

struct Breakdown {
  double compute_s = 0;          // GPU kernels of forward, backward and recompute, steady state
  double exposed_tp_s = 0;       // TP/SP collectives the compute stream waited on
  double exposed_cp_s = 0;       // context-parallel K/V exchange
  double exposed_ep_s = 0;       // expert-parallel all-to-all
  double exposed_pp_s = 0;       // pipeline send/recv
  double exposed_dp_s = 0;       // data-parallel gradient reduction and parameter all-gather
  double pipeline_bubble_s = 0;  // pipeline fill and drain
  double optimizer_s = 0;        // optimizer step
  double data_loading_s = 0;     // host data pipeline stall
  double gpu_variation_s = 0;    // the slowest of N GPUs paces the step (sim/exec/scale.h)
  double global_sync_s = 0;      // per-step all-rank agreement (gradient norm, loss)
  double total() const {
    return compute_s + exposed_tp_s + exposed_cp_s + exposed_ep_s + exposed_pp_s + exposed_dp_s +
           pipeline_bubble_s + optimizer_s + data_loading_s + gpu_variation_s + global_sync_s;
  }
};

/// Link statistics over the iteration.
struct NetworkStats {
  double max_link_utilization = 0;   // busiest link class: bytes carried / (capacity · iteration)
  double mean_link_utilization = 0;  // over all GPU-attached links (NVLink and NIC)
  double nvlink_utilization = 0;
  double nic_utilization = 0;
  // ECMP load imbalance (max/mean load over equal-cost uplinks); 1 means perfectly even.
  // The analytic fidelity does not route flows, so it reports none (has_ecmp = false).
  bool has_ecmp = false;
  double ecmp_imbalance = 0;
  double nic_bytes_per_gpu = 0;      // per iteration, sent
  double nvlink_bytes_per_gpu = 0;   // per iteration, sent
  // Flow fidelity only (empty otherwise): utilisation (bytes carried / (capacity · iteration))
  // per class of link, e.g. "gpu->nvswitch", "nic->tor", "tor->agg", in topo::link_class_loads'
  // order: GPU side first, then tier by tier, up before down.
  struct LinkClass {
    std::string name;
    int links = 0;
    int used = 0;  // links that carried anything
    double max_utilization = 0;
    double mean_utilization = 0;  // over every link of the class
  };
  std::vector<LinkClass> link_classes;
  // Several jobs on one fabric (flow fidelity): switch and NIC links that carried more than one
  // job's bytes, and the share of all bytes on switch and NIC links that crossed such a link.
  int jobs = 1;
  int links_shared_by_jobs = 0;
  double shared_link_bytes_fraction = 0;
  // Packet fidelity only (has_packets): what the packet level counted over the run.
  bool has_packets = false;
  struct Packets {
    std::int64_t packets = 0;
    std::int64_t ecn_marks = 0;
    std::int64_t pauses = 0;           // PFC PAUSE frames
    double paused_s = 0;               // Σ over ports of the time they were paused
    double max_queue_bytes = 0;        // the deepest queue at any port
    std::int64_t sprayed_flows = 0;    // flows spread over several paths (routing mode spray)
    std::int64_t reordered = 0;        // packets placed ahead of a gap
    std::int64_t retransmitted_bytes = 0;
    std::int64_t timeouts = 0;
    // Σ over switch ingress links of the time their waiting bytes were above
    // network.packet.buffer_bytes: a lossless port that would have dropped (0 under PFC).
    double time_above_buffer_s = 0;
  } packets;
};

/// The pipeline schedule the analytic fidelity assumes: every stage runs at the pace of the
/// slowest one (the first, with the embedding, or the last, with the loss head). Times are for one
/// micro-batch on that stage, all of its model chunks together; reports draw the schedule from
/// them (reports/pipeline_schedule.h).
struct PipelineTiming {
  int stages = 1;        // pipeline stages (PP)
  int chunks = 1;        // model chunks per stage (VPP)
  int microbatches = 1;  // per pipeline per iteration
  plan::Schedule schedule = plan::Schedule::k1F1B;
  double forward_s = 0;       // forward kernels
  double backward_s = 0;      // backward and recompute kernels
  double exposed_comm_s = 0;  // TP/CP/EP/PP communication the stage waited on
  bool slowest_is_last = false;
  // Exposed PP time outside the slots, over the iteration: with optimizations.pp_overlap the
  // 2(p−1) transfers of the fill and drain (part of Breakdown::exposed_pp_s, not of the
  // (m + (p−1)/v) slots).
  double pp_outside_s = 0;
  double slot_s() const { return forward_s + backward_s + exposed_comm_s; }
};

/// Job start-up before the first iteration (not part of the iteration time).
struct Startup {
  double comm_init_s = 0;     // communicator initialization (sim/collective/comm_init.h)
  std::string store;          // "tcpstore" or "redis"
  bool ordered_groups = false;
  long groups_total = 0;
  int groups_per_rank = 0;
};

/// One task instance on one rank, for traces (reports/trace.h) and sim-vs-real comparison.
struct TraceSpan {
  int rank = 0;
  std::string stream;    // "compute", "tp", "cp", "ep", "dp", "pp-send-next", ...
  std::string name;      // "qkv fwd", "all-gather tp", "send-next pp" ...
  std::string category;  // "compute", "tp", "cp", "ep", "dp", "pp", "data", "optimizer",
                         // "scale" (slowest-GPU pacing, global sync: sim/exec/scale.h)
  double start_s = 0;
  double end_s = 0;
  int microbatch = -1;
  int chunk = -1;
  int layer = -1;
  double bytes = 0;      // communication tasks
  // A compute task slowed by collectives holding SMs (sim/exec/sm_share.cpp): the time it lost,
  // which the breakdown charges to those collectives' exposed communication; its kind's time
  // (task_kinds) and breakdown.compute_s count end_s − start_s − slowed_s.
  double slowed_s = 0;
};

/// Spans of the ranks a trace asked for (a rank filter keeps traces small).
struct Timeline {
  std::vector<int> ranks;
  std::vector<TraceSpan> spans;  // sorted by (rank, start)
};

/// Time of one kind of task on the critical rank (the rank that finished last).
struct TaskKindTime {
  std::string name;      // op and part ("qkv fwd", "qkv dgrad") or collective ("all-gather tp")
  std::string category;  // as TraceSpan::category
  long count = 0;
  double total_s = 0;
};

struct Result {
  std::string fidelity;        // "analytic"
  std::string model_version;   // version of the performance model that computed this
  std::string profile_name;
  std::string profile_version;

  double iteration_time_s = 0;
  double tokens_per_s = 0;
  double mfu = 0;               // model FLOPs / (peak · time · GPUs)
  double hfu = 0;               // hardware FLOPs (with recompute) / (peak · time · GPUs)
  double tflops_per_gpu = 0;    // model TFLOP/s per GPU
  double hw_tflops_per_gpu = 0; // hardware TFLOP/s per GPU (counts recompute)
  double model_flops_per_iteration = 0;
  double hardware_flops_per_iteration = 0;
  double parameters = 0;
  int gpus = 0;
  int microbatches = 0;         // per pipeline per iteration
  double peak_flops_per_gpu = 0;
  // Activation offloading (training.cpu_offload_layers): what the compute stream waited for the
  // copies to host and back, over the iteration (part of breakdown.compute_s).
  double offload_stall_s = 0;

  Breakdown breakdown;
  PipelineTiming pipeline;
  Startup startup;
  plan::MemoryUsage memory;
  NetworkStats network;
  std::vector<std::string> notes;  // assumptions and derived settings worth telling the user

  // Event-driven fidelities only (empty at analytic fidelity).
  std::vector<TaskKindTime> task_kinds;  // per task kind on the critical rank, by total time
  Timeline timeline;                     // filled when a trace was asked for
  struct ExecStats {
    long roles = 0;          // Programs (pipeline stages)
    long tasks_per_role = 0; // largest Program
    long actors = 0;         // rank classes executed (ranks when the symmetry shortcut is off)
    long task_instances = 0; // tasks executed over all actors
    long flows = 0;          // network flows started (flow fidelity)
    long events = 0;         // events dispatched
    long solves = 0;         // flow network re-solves
    long solves_partial = 0;           // ... kept as verified partial re-fills
    long solves_partial_given_up = 0;  // ... tried as one, then searched
    long flows_refilled = 0;           // Σ flows re-filled over the solves
    long flows_replayed = 0; // flows that followed the recorded trajectory of an isolated start
    long replays_materialized = 0;  // replayed transfers that other traffic reached mid-way
    double flows_per_solve = 0;  // mean flows in the re-solved components
    bool symmetry = false;   // whether the symmetry shortcut was used
    // The shortcut's bound on its difference from the every-rank run: the largest sum, along
    // communications that waited on each other, of how far apart their copies ended (0 when
    // every copy ended together, or without the shortcut). docs/program.md, "Symmetry".
    double symmetry_bound_s = 0;
    int critical_rank = 0;   // representative rank of the actor that finished last
  } exec;
};

}  // namespace trainsim::exec
