// A Device that records every call instead of running it (kernels/exec/device.h), for tests of
// the Program → launch translation on machines without a GPU.
//
// It keeps a fake clock so that executor code paths that read times work: each kernel,
// collective, send and recv takes `op_seconds` on its stream, a stream starts a call when its
// previous call has finished, and a wait makes the stream's clock at least the recorded event's.
// (Collectives and transfers do not wait for their peers: there is no cross-device clock.)
// Calls made during the sizing pass are not recorded.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kernels/exec/device.h"

namespace trainsim::kexec {

struct FakeCall {
  std::string what;  // "create_streams", "comm", "kernel", "collective", "send", "recv",
                     // "record", "wait", "mark", "begin", "end"
  plan::Stream stream = plan::Stream::kCompute;
  std::string op;            // kernel: op name; collective: kind
  KernelLaunch launch;       // kernel
  Precision dtype = Precision::kBf16;  // kernel: the precision it was launched in
  int id = -1;               // event/marker id, communicator index
  int peer_index = -1;       // send/recv; comm: my index
  double bytes = 0;          // collective/send/recv
  std::vector<int> members;  // comm
};

class FakeDevice : public Device {
 public:
  // `record_calls` false keeps no call records (calls() stays empty): `execute --backend fake`
  // reads only the measured times, and the records of every call of every iteration grew to
  // gigabytes on large jobs.
  explicit FakeDevice(int rank, double op_seconds = 1e-6, bool record_calls = true)
      : rank_(rank), op_s_(op_seconds), record_(record_calls) {}

  void create_streams(const std::vector<plan::Stream>& streams) override;
  void create_comm(int comm, const CommGroup& group, int my_index, const CommId& id) override;
  void create_events(int count, int markers) override;
  void set_sizing(bool on) override { sizing_ = on; }
  void begin_iteration() override;
  void kernel(plan::Stream s, const std::string& op, const KernelLaunch& k,
              Precision dtype) override;
  void collective(plan::Stream s, int comm, const CollectiveCall& c) override;
  void send(plan::Stream s, int comm, int peer_index, double bytes) override;
  void recv(plan::Stream s, int comm, int peer_index, double bytes) override;
  void record(plan::Stream s, int event) override;
  void wait(plan::Stream s, int event) override;
  void mark(plan::Stream s, int marker) override;
  std::vector<double> end_iteration(double timeout_s) override;
  // Memory in issue order (not in calls()): states, then the live activation bytes as holds
  // and releases arrive; memory() reports the last iteration's peak (runtime 0).
  void hold_states(double bytes) override { states_ = bytes; }
  void hold(plan::Stream s, int id, double bytes) override;
  void release(plan::Stream s, int id) override;
  MemoryMeasure memory() const override { return memory_; }

  const std::vector<FakeCall>& calls() const { return calls_; }
  int rank() const { return rank_; }
  std::vector<CommId> comm_ids;  // ids received by create_comm, in call order

 private:
  void run(plan::Stream s);  // advances the stream's clock by one op
  void note(FakeCall c) {
    if (record_) calls_.push_back(std::move(c));
  }
  int rank_;
  double op_s_;
  bool record_ = true;
  bool sizing_ = false;  // while sizing, calls are not recorded and the clock stands still
  std::vector<FakeCall> calls_;
  std::map<plan::Stream, double> clock_;
  std::vector<double> events_, markers_;
  double states_ = 0, live_ = 0, live_peak_ = 0;
  std::map<int, double> held_;
  MemoryMeasure memory_;
};

}  // namespace trainsim::kexec
