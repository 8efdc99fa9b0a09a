// The device a launch plan runs on (kernels/exec/launch_plan.h): one GPU, seen through the
// handful of calls the executor makes. Two implementations: the CUDA one (cuda_device.h: CUDA
// streams and events, cuBLASLt GEMMs, NCCL communicators; built with nvcc) and a fake one
// (fake_device.h) that records every call, so that the translation from Program to launches is
// tested on machines without a GPU (the Env idea of LevelDB: the outside world behind an
// interface with a fake in tests).
//
// One Device object per GPU, used by one host thread. Calls are asynchronous like CUDA's, except
// create_comm (collective over the members, blocking) and end_iteration (waits for the GPU, with
// a deadline). Every failure throws trainsim::Error(kRuntime) naming the operation.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/exec/launch_plan.h"
#include "sim/core/units.h"

namespace trainsim::kexec {

/// An opaque communicator id (NCCL's ncclUniqueId is 128 bytes), made by process 0
/// (Backend::make_id in kernels/exec/job.h) and handed to every member before they create the
/// communicator.
using CommId = std::array<char, 128>;

/// A collective call: the Program's buffer size S (nccl-tests convention: the all-reduce buffer,
/// all-gather output, reduce-scatter input, all-to-all total) in `dtype`.
struct CollectiveCall {
  coll::Kind kind = coll::Kind::kAllReduce;
  double bytes = 0;
  Precision dtype = Precision::kBf16;
};

/// Device memory over an iteration (bytes). `runtime`: what the device uses beyond what the
/// executor allocated itself (CUDA context, library handles and workspaces, NCCL's buffers),
/// read from the driver after setup; `states`: the model states held (LaunchPlan::state_bytes);
/// `activations_peak`: the most activation bytes allocated at once, `activations_reserved`: the
/// most the allocator held for them (fragmentation included); `scratch`: the executor's own
/// operand buffers, which stand for tensors a framework already counts as states or
/// activations and are therefore left out of `peak` = runtime + states + activations_reserved.
struct MemoryMeasure {
  double runtime = 0, states = 0, activations_peak = 0, activations_reserved = 0, scratch = 0;
  double peak = 0;
  double capacity = 0;  // the device's memory as the driver reports it
};

class Device {
 public:
  virtual ~Device() = default;

  /// Memory a framework holds (LaunchPlan): the model states, allocated once before the
  /// iterations; an activation hold `id` allocated on stream `s` before a task and freed there
  /// after another. Devices that do not measure memory ignore them.
  virtual void hold_states(double /*bytes*/) {}
  virtual void hold(plan::Stream /*s*/, int /*id*/, double /*bytes*/) {}
  virtual void release(plan::Stream /*s*/, int /*id*/) {}
  /// Memory of the last measured iteration (zeros where the device does not measure it).
  virtual MemoryMeasure memory() const { return {}; }

  /// Streams the plan uses; called once, before anything else.
  virtual void create_streams(const std::vector<plan::Stream>& streams) = 0;
  /// Joins communicator `comm` (a CommTable index) as member `my_index` of `group`. Blocking.
  virtual void create_comm(int comm, const CommGroup& group, int my_index, const CommId& id) = 0;
  /// Events of the plan (ids 0 .. count-1) and timing markers (ids 0 .. markers-1).
  virtual void create_events(int count, int markers) = 0;

  /// Sizing pass: between set_sizing(true) and set_sizing(false) the executor replays the plan
  /// once; the device only notes what buffers each stream needs and allocates them all when
  /// sizing ends, so that no allocation (which synchronises a GPU) happens while collectives
  /// wait for their peers.
  virtual void set_sizing(bool on) = 0;

  /// Marks the start of an iteration: every stream starts after this point.
  virtual void begin_iteration() = 0;
  virtual void kernel(plan::Stream s, const std::string& op, const KernelLaunch& k,
                      Precision dtype) = 0;
  virtual void collective(plan::Stream s, int comm, const CollectiveCall& c) = 0;
  virtual void send(plan::Stream s, int comm, int peer_index, double bytes) = 0;
  virtual void recv(plan::Stream s, int comm, int peer_index, double bytes) = 0;
  virtual void record(plan::Stream s, int event) = 0;
  virtual void wait(plan::Stream s, int event) = 0;
  /// A timing marker on stream `s` (the executor brackets each task with two).
  virtual void mark(plan::Stream s, int marker) = 0;
  /// Waits for the iteration to finish (at most `timeout_s`, then aborts the communicators and
  /// throws) and returns every marker's time in seconds since begin_iteration, and the
  /// iteration's own time (all streams done) as the last element.
  virtual std::vector<double> end_iteration(double timeout_s) = 0;
};

}  // namespace trainsim::kexec
