// The launch plan: what one GPU does to run its role's Program (sim/plan/program.h) for real.
//
// The Program is the contract (DESIGN.md §1): the real executor replays the same tasks the
// simulator times. This file turns one rank's view of a ProgramSet into a flat list of device
// commands, in the Program's issue order:
//   - one device stream per Program stream that has tasks;
//   - a compute task → one kernel launch of the op's shape (KernelLaunch: GEMM m×n×k, fused
//     attention, or the kernels/launchers.h launcher of a memory-bound op at rows × cols — a copy
//     kernel of the op's byte count only for the backward of element-wise ops);
//   - a collective → one call on the communicator of the rank's group of that dimension
//     (ProgramSet::group; members in ring order);
//   - a send/recv → one point-to-point call on the communicator of that pipeline edge: a two-rank
//     group {rank on stage s, peer_on_stage(rank, next_stage(s))}, one per direction ("pp-next"
//     carries activations s → next, "pp-prev" gradients back), so that the two directions never
//     share a communicator or a stream;
//   - a dependency on a task of another stream → an event recorded after that task and waited on
//     by the dependent's stream before it starts (same-stream dependencies are stream order).
// Communicators are identified globally (CommTable: every group of the job in one deterministic
// order), so that every process of a job numbers them the same way and can create them in the
// same order without deadlock (the lowest-numbered communicator not yet created always has all
// of its members waiting on it).
//
// Pure C++ (no CUDA): tested on the CPU with a recording fake device (kernels/exec/device.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "sim/plan/program.h"

namespace trainsim::kexec {

/// The element type of a training precision: what the executor runs its GEMMs in (fp8 only
/// where the GEMM runner supports it; activations of fp8 training stay bf16).
constexpr kernels::DType dtype_of(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return kernels::DType::kF32;
    case Precision::kFp16:
      return kernels::DType::kF16;
    case Precision::kFp8:
      return kernels::DType::kFp8;
    case Precision::kBf16:
      break;
  }
  return kernels::DType::kBf16;
}

/// The precision a compute task's kernels run in: the training precision, except that under fp8
/// the GEMMs the model keeps 16-bit (attention's batched GEMMs, the output layer:
/// model::runs_16bit) run in bf16, as the simulator prices them.
Precision kernel_precision(const plan::ProgramSet& ps, const model::Op& op);

/// One communicator of the job.
struct CommGroup {
  std::string name;  // "tp", "cp", "ep", "dp", "expert-dp", "pp-next", "pp-prev"
  plan::Dim dim = plan::Dim::kNone;
  std::vector<int> members;  // global ranks, ring order (index = the member's NCCL rank)
};

/// Every communicator of the job, each once, in a fixed order: by kind (the order of `name`
/// above), then by the lowest member rank.
struct CommTable {
  std::vector<CommGroup> groups;
  /// Index of the group of kind `name` that holds `rank`, -1 if none.
  int find(const std::string& name, int rank) const;
};

CommTable comm_table(const plan::ProgramSet& ps);

/// What a compute task launches. GEMM: C[m×n] = A[m×k]·B[k×n], `batch` times; attention:
/// `batch` = batch·heads, m queries, n keys, k head dimension; memory: `bytes` moved.
struct KernelLaunch {
  model::OpKind kind = model::OpKind::kMemory;
  double m = 0, n = 0, k = 0, batch = 1;
  double bytes = 0;  // memory-bound kernels: HBM bytes read + written
  double flops = 0;  // of this launch
  bool backward = false;
  int kernels = 1;  // kernels the op stands for (the executor launches one per launch)
  // Memory-bound ops: the kernels/launchers.h launcher that runs the task ("layernorm",
  // "rmsnorm", "softmax", "dropout", "bias_dropout_add", "bias_gelu", "swiglu", "embedding",
  // "cross_entropy", "adam", "lamb"; a backward: "<kind>_bwd", e.g. "layernorm_bwd", or
  // "cross_entropy", whose forward writes the gradient), or "" for a copy kernel of `bytes`.
  // Shape: rows × cols (optimizers:
  // rows 1, cols the parameters updated); `table` the embedding table's rows (vocab / tp), which
  // also bounds the token ids of the embedding and the cross-entropy targets; `f32` the launcher
  // runs in fp32 (router softmax; optimizers always keep fp32 state).
  std::string launcher;
  double rows = 0, cols = 0, table = 0;
  // Attention: query heads per key/value head (GQA; 1 for multi-head attention) and the sliding
  // window in keys (0: none), from the ProgramSet's model.
  int q_per_kv = 1;
  int window = 0;
  bool f32 = false;
  // Times the launcher runs for this task (1: every backward has its own launcher now).
  int repeats = 1;
};

/// The shape a task runs: the op's shape for its part (forward [m×k]·[k×n]; dgrad [m×n]·[n×k];
/// wgrad [k×m]·[m×n]) with the task's fraction applied to the token dimension m; a backward of a
/// memory-bound op moves twice the forward bytes (reads the saved input and the gradient, writes
/// the input gradient); a fused-attention backward is 2.5× the forward FLOPs (FlashAttention-2).
KernelLaunch kernel_launch(const plan::Program& prog, const plan::Task& t);

/// The same, with the launcher of a memory-bound op chosen from the op's name through
/// kernels::memory_bench_item (the mapping `calibrate kernels` times) at the shape of the
/// ProgramSet's model, parallel and training config: rows scaled by the task's fraction; the
/// optimizer step is adam or lamb over op.m parameters; a backward runs the op's backward
/// launcher "<kind>_bwd" once at the forward's shape (kernels::memory_backward_bench_item),
/// except cross-entropy, whose forward launcher writes the logits gradient.
/// Data loading launches nothing (kernels 0, bytes 0).
KernelLaunch kernel_launch(const plan::ProgramSet& ps, const plan::Program& prog,
                           const plan::Task& t);

enum class CmdType : std::uint8_t { kKernel, kCollective, kSend, kRecv, kRecord, kWait };
const char* to_string(CmdType c);

struct Command {
  CmdType type = CmdType::kKernel;
  plan::Stream stream = plan::Stream::kCompute;
  std::uint32_t task = 0;  // the Program task launched (kRecord/kWait: the task the event marks)
  int event = -1;          // kRecord/kWait: event id (one per task with a cross-stream consumer)
  int comm = -1;           // kCollective/kSend/kRecv: index into CommTable::groups
  int peer = -1;           // kSend/kRecv: global rank of the other end
  int peer_index = -1;     // kSend/kRecv: the other end's index in the communicator
};

/// Activations a framework keeps from a forward until the backward that consumes them, sized by
/// the memory model's inventory (plan::stage_inventory): one hold per (micro-batch, model
/// chunk), from before its first forward compute task to after its last backward compute task,
/// with the bytes of that chunk's layers (and the embedding output on the first stage); and one
/// per micro-batch for the logits on the last stage, from the `logits` forward to its last
/// backward part. Allocated and freed on the task's stream, stream-ordered, so that the peak the
/// allocator sees is the peak the schedule really reaches.
struct ActivationHold {
  std::uint32_t first_task = 0, last_task = 0;
  double bytes = 0;
  plan::Stream stream = plan::Stream::kCompute;
};

/// One rank's launch plan.
struct LaunchPlan {
  int rank = 0;
  int stage = 0;
  const plan::Program* program = nullptr;  // the role's Program (owned by the ProgramSet)
  std::vector<plan::Stream> streams;       // streams with tasks, in enum order
  std::vector<int> comms;                  // communicators this rank belongs to (CommTable order)
  std::vector<Command> commands;           // issue order
  int events = 0;                          // event ids are 0 .. events-1
  std::size_t launches = 0;                // kernel/collective/send/recv commands (= tasks)
  // Memory as a framework holds it (plan::stage_inventory of the rank's stage): the model
  // states for the whole run, the activation holds per iteration; hold_begin[task] /
  // hold_end[task]: index into `holds` begun before / ended after that task, -1 for none.
  double state_bytes = 0;
  std::vector<ActivationHold> holds;
  std::vector<int> hold_begin, hold_end;
};

/// Builds the plan of `rank`. Throws trainsim::Error(kRuntime) when the Program breaks its own
/// contract (a dependency on a later task, a send without a pipeline neighbour).
LaunchPlan make_launch_plan(const plan::ProgramSet& ps, const CommTable& table, int rank);

/// "compute", "tp", "dp", "pp", "data", "optimizer": the category of traces and task_kinds
/// (the same as the simulator's).
const char* task_category(const plan::Task& t);

}  // namespace trainsim::kexec
