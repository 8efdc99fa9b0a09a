// Event-driven execution of the Programs (sim/plan/program.h) on the event core: every rank's
// streams advance task by task; compute tasks take their time from the calibration profile
// (ComputeModel, the same pricing as the analytic fidelity); collectives start when every member
// has reached them and point-to-point transfers when both ends are posted; communication goes
// through a communication backend (sim/exec/comm_backend.h), chosen once by `backend`:
//
//   kAnalytic  each collective and transfer takes its closed-form time (no contention;
//              closed_form_backend.h);
//   kFlow      collectives and transfers that leave a server become flows on the cluster graph
//              (ECMP-hashed per queue pair, max-min rates, the scenario's congestion control),
//              all ranks' flows sharing the fabric at once; groups inside one server use NVLink
//              through the closed form (NVLink ports are not shared between groups;
//              flow_backend.h).
//
// The executor (executor.h, program_exec.cpp, sm_share.cpp; run_jobs.cpp builds it) keeps the streams,
// dependencies, rendezvous and the breakdown;
// the backend its network state and statistics; role_index.h, task_time.h and stage_groups.h
// what the executor reads off the Programs and the layout.
//
// Symmetry shortcut (on by default, `symmetry = false` turns it off): when no rank differs from
// the others (no straggler, no jitter), all ranks of a pipeline stage run in lockstep, so one actor
// per stage executes the stage's Program, and each of its communications stands for the copies of
// every rank of the stage: at flow fidelity all of those copies' flows are started, and the
// communication completes when the slowest copy does. With symmetric transfers this equals the
// per-rank run exactly (tested); with ECMP collisions it is conservative (a stage waits for its
// slowest copy). Stragglers and jitter switch to one actor per rank.
//
// The breakdown of DESIGN.md §5 comes from the timeline of the rank that finished last: each
// gap in its compute stream is charged to what the next compute task waited for (a collective of
// dimension D → exposed D; a pipeline transfer → exposed PP while the transfer ran, pipeline
// bubble while it waited for the peer), and its components add up to the iteration time.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/exec/analytic.h"
#include "sim/network/congestion.h"
#include "sim/network/packet_network.h"
#include "topology/routing.h"

namespace trainsim::exec {

/// Version of the event-driven performance model (the Program, its executor, the backends).
/// program-2: the flow level's Swift and MegaScale η fitted to packet incasts (1 / 0 and
/// 0.995 / 0 instead of the [D] 0.98 / 0.02 and 0.98 / 0.01).
/// program-4: congestion control derates switch egress ports only (NVLink, PCIe and NIC egress
/// are sender links, coll::sender_links); flow results under dcqcn and megascale move. The
/// packet level's pacer keeps each flow's schedule (rate-limited flows sharing a NIC).
/// program-5: a gradient-accumulation task after each layer's backward where the framework does
/// not fuse it into the weight-gradient GEMM (framework.grad_accumulation).
/// program-6: at flow fidelity each ring channel's queue pair is one flow over all its edges in
/// lock step (NCCL's ring moves a step only as fast as its slowest edge), not an independent
/// flow per edge; the packet level keeps one flow per edge. And the optimizer step shards expert
/// parameters over DP·CP / EP under framework.shard_group dp_cp (it used DP / EP), as the
/// analytic fidelity and the memory model do.
/// program-7: the loss task is priced as its implementation moves it, and MoE layers have their
/// dispatcher's permutation tasks (analytic-11).
/// program-8: attention at its kernel's own rate (analytic-12).
/// program-9: the data-parallel gradient reduction and the ZeRO gathers run over DP·CP, every
/// rank holding the same dense weights (they ran over DP alone with CP > 1: an 8-rank ring
/// with one rank per server where Megatron-Core reduces over 32, and nothing with DP 1), as the
/// analytic fidelity does (analytic-13).
/// program-10: the MoE dispatch under TP as analytic-14 prices it (a2a of tokens/tp, then a TP
/// all-gather of the rows; a TP reduce-scatter, then the combine a2a, each after the other).
/// program-11: the GPipe memory of analytic-15.
/// program-12: block recompute per model chunk, and the memory of analytic-16; ZeRO-2 without DP
/// overlap holds the compute stream for each micro-batch's gradient reduce-scatters.
/// program-13: the MoE layer placement and memory of analytic-17.
/// program-14: a described GPU's fp8 peak as analytic-18 sets it.
/// program-17: NVLS priced as analytic-22 prices it.
/// program-18: the SP re-gather for the weight gradient of analytic-23, a TP-stream task beside
/// the input-gradient GEMM that the weight-gradient GEMM waits for.
/// program-19: framework.tp_async_backward as analytic-24.
/// program-20: bulk TP overlap (framework.tp_overlap_method bulk) runs whole collectives, as the
/// analytic fidelity prices it; it was split into TP pieces like the decomposed method.
/// program-21: the gradient accumulation shard of analytic-25.
/// program-22: the RoPE, GQA-repeat and eager-SwiGLU ops of analytic-26.
/// program-23: FSDP2's copy-out tasks after each parameter gather (analytic-27).
/// program-24: selective-op recompute (TorchTitan's per-op policy) runs its shares again (analytic-28).
/// program-25: training.recompute auto follows the framework's selective recompute (analytic-29).
/// program-26: a ZeRO-3 backward issues its parameter gathers last bucket first, the order it
/// needs them (FSDP's backward prefetch); with FSDP2's copy-out the backward's first layer waited
/// for every gather of the chunk (0.69 s per micro-batch on TorchTitan's 70B at TP 4, PP 1).
/// program-27: under the symmetry shortcut a collective is routed as flows when any group of its
/// dimension on the stage leaves a server (groups that do not line up with the servers); a
/// routed collective's shape counts the most and the fewest ranks on one server, as the closed
/// form does (NCCL's protocol and an all-to-all's network steps followed the mean).
/// program-28: in an every-rank flow run a group inside a server is priced in the closed form at
/// an inside shape (it took the dimension's worst, crossing group's); a routed TP-overlap or CP
/// piece takes its share of one collective's latency and that collective's NCCL protocol (every
/// piece paid a whole ring's latency: TP overlap across servers read 12 % slower than without).
/// program-29: the compute stream's wait on a chain of collectives (MoE's dispatch all-to-all,
/// then the TP all-gather of its rows) is charged to each link of the chain for its own part
/// (the whole wait went to the last one's dimension: exposed TP above all TP traffic); the
/// iteration does not change.
/// program-30: every queue pair of a capped transfer keeps its bound (NCCL's per-peer rate over
/// the queue pairs): the first of an empty list had none, so a point-to-point transfer's first
/// queue pair ran at line rate (hidden at flow fidelity on an idle fabric, where the capped
/// ones end last; +14 % at packet fidelity, where it flooded its NIC).
/// program-31: a pipeline transfer is priced (closed form) on its own pair of GPUs, not as
/// inside a server whenever two stages share one.
/// program-32: with DP overlap, ZeRO-1/2's parameter gathers but the first wait for the host's
/// data loading (Megatron-Core dispatches each from the forward pre-hook of the bucket before);
/// every one ran during the loading stall.
/// program-33: compute tasks the gradient reductions follow: FSDP2's copy-in of each bucket's
/// gradients (framework.fsdp_copy_in) and Megatron's 1/DP scaling pass
/// (framework.grad_scale_pass).
/// program-34: ZeRO-3 without DP overlap gathers on demand: a pass's parameter gathers wait for
/// the compute stream to reach the pass (a backward's no longer ran beside its forward).
/// program-35: fused attention runs below its plateau rate by the thread blocks' fixed cost
/// (calib::Profile::attention_fwd_overhead_keys), as analytic-39.
/// program-36: its head dimension picks the curve, and collectives.comm_sms the SMs a
/// collective holds, as analytic-40.
/// program-37: the SMs per kind of kernel (NCCL's channels, the TP overlap's own kernels, its
/// ring exchanges), as analytic-41.
/// program-38: a context-parallel ring's merges of its steps' partial results
/// (cp_out_correction) and the gradient buffer's memset (framework.zero_grad_buffer), as
/// analytic-42.
inline constexpr const char* kProgramModelVersion = "program-38";

enum class NetworkBackend { kAnalytic, kFlow, kPacket };

/// Progress of an event-driven run: the simulated time and the analytic estimate of its end, in
/// seconds.
using ProgressFn = std::function<void(double simulated_s, double estimate_s)>;

/// A slow GPU (rank ≥ 0) or a slow server (host ≥ 0: every GPU of server `host`): its compute
/// tasks take `factor` times as long.
struct Straggler {
  int rank = -1;
  int host = -1;
  double factor = 1.0;
};

struct ExecOptions {
  NetworkBackend backend = NetworkBackend::kAnalytic;
  bool symmetry = true;              // the symmetry shortcut (see above)
  std::vector<Straggler> stragglers;
  double jitter = 0;                 // relative spread of compute task times per rank (log-normal σ)
  std::uint64_t seed = 1;            // jitter and the flow network
  bool free_communication = false;   // every collective and transfer takes no time (tests)
  bool enforce_memory = true;        // as AnalyticOptions::enforce_memory
  std::vector<int> trace_ranks;      // ranks whose task spans go into Result::timeline
  // Flow backend.
  topo::RoutingConfig routing;
  net::NetworkConfig network;
  net::PacketConfig packet;  // the packet backend's ports, PFC and ECN
  // Called with the simulated time (seconds) and the analytic estimate of the whole run as the
  // simulation advances (about every hundredth of the estimate); empty: the run goes in one
  // piece. Results are the same either way.
  ProgressFn progress;
};

/// Runs one iteration. Throws trainsim::Error(kInfeasible) for configurations that cannot run,
/// kInput for bad options (a straggler rank outside the job).
Result run_program(const RunConfig& cfg, const ExecOptions& options);

/// One job of a shared cluster (run_jobs): its configuration (cfg->cluster.gpus = its ranks), the
/// cluster GPU each of its ranks runs on, and when its iteration starts.
struct JobRun {
  const RunConfig* cfg = nullptr;
  std::vector<int> gpus;  // rank r runs on cluster GPU gpus[r]
  double start_s = 0;
  int iterations = 1;     // back to back; its Result is the mean iteration
};

/// Several jobs run together (docs/network.md "Several jobs on one fabric").
struct JobsResult {
  std::vector<Result> jobs;  // each as run_program's, its iterations measured from its start
                             // (the mean one); the network statistics are the fabric's, below
  NetworkStats fabric;       // flow fidelity: every link over [0, makespan], all jobs together
  Result::ExecStats exec;    // the shared run's counters (flows, solver, events)
  double makespan_s = 0;     // the last job's end (all its iterations)
  std::string fidelity;
};

/// Runs one iteration of every job on one Simulation and one communication backend built for
/// `cluster` (cluster.cluster.gpus = the cluster's GPUs): at flow fidelity their flows share the
/// fabric; at schedule fidelity each communication takes its closed-form time and jobs do not
/// meet. Stragglers and jitter are per job rank (the options apply to every job). Throws as
/// run_program, and kInput for a placement outside the cluster.
JobsResult run_jobs(const RunConfig& cluster, const std::vector<JobRun>& jobs,
                    const ExecOptions& options);

}  // namespace trainsim::exec
