#include "kernels/exec/fake_device.h"

#include <fmt/format.h>

#include <algorithm>

#include "sim/core/error.h"

namespace trainsim::kexec {
namespace {

// Field by field rather than an aggregate initializer: GCC 12 at -O3 warns (-Wmaybe-uninitialized,
// a false positive) on the temporary KernelLaunch of a braced FakeCall.
FakeCall make_call(std::string what, plan::Stream s, std::string op = "", int id = -1,
                   int peer = -1, double bytes = 0, std::vector<int> members = {}) {
  FakeCall c;
  c.what = std::move(what);
  c.stream = s;
  c.op = std::move(op);
  c.id = id;
  c.peer_index = peer;
  c.bytes = bytes;
  c.members = std::move(members);
  return c;
}

}  // namespace

void FakeDevice::create_streams(const std::vector<plan::Stream>& streams) {
  for (plan::Stream s : streams) {
    note(make_call("create_streams", s));
    clock_[s] = 0;
  }
}

void FakeDevice::create_comm(int comm, const CommGroup& group, int my_index, const CommId& id) {
  if (my_index < 0 || my_index >= static_cast<int>(group.members.size()) ||
      group.members[static_cast<std::size_t>(my_index)] != rank_) {
    throw Error(ErrorKind::kRuntime, "create_comm: rank is not the member it claims to be");
  }
  note(
      make_call("comm", plan::Stream::kCompute, group.name, comm, my_index, 0, group.members));
  comm_ids.push_back(id);
}

void FakeDevice::create_events(int count, int markers) {
  events_.assign(static_cast<std::size_t>(count), -1.0);
  markers_.assign(static_cast<std::size_t>(markers), -1.0);
}

void FakeDevice::begin_iteration() {
  note(make_call("begin", plan::Stream::kCompute));
  for (auto& [s, t] : clock_) t = 0;
  live_peak_ = live_;
}

void FakeDevice::hold(plan::Stream s, int id, double bytes) {
  if (!clock_.count(s)) throw Error(ErrorKind::kRuntime, "hold on a stream never created");
  if (!held_.emplace(id, bytes).second) {
    throw Error(ErrorKind::kRuntime, fmt::format("activation hold {} taken twice", id));
  }
  live_ += bytes;
  live_peak_ = std::max(live_peak_, live_);
}

void FakeDevice::release(plan::Stream, int id) {
  const auto it = held_.find(id);
  if (it == held_.end()) {
    throw Error(ErrorKind::kRuntime, fmt::format("activation hold {} released unheld", id));
  }
  live_ -= it->second;
  held_.erase(it);
}

void FakeDevice::run(plan::Stream s) {
  if (!clock_.count(s)) throw Error(ErrorKind::kRuntime, "launch on a stream never created");
  clock_[s] += op_s_;
}

void FakeDevice::kernel(plan::Stream s, const std::string& op, const KernelLaunch& k,
                        Precision dtype) {
  if (sizing_) return;
  FakeCall call = make_call("kernel", s, op, -1, -1, k.bytes);
  call.launch = k;
  call.dtype = dtype;
  note(std::move(call));
  run(s);
}

void FakeDevice::collective(plan::Stream s, int comm, const CollectiveCall& c) {
  if (sizing_) return;
  note(make_call("collective", s, coll::to_string(c.kind), comm, -1, c.bytes));
  run(s);
}

void FakeDevice::send(plan::Stream s, int comm, int peer_index, double bytes) {
  if (sizing_) return;
  note(make_call("send", s, "", comm, peer_index, bytes));
  run(s);
}

void FakeDevice::recv(plan::Stream s, int comm, int peer_index, double bytes) {
  if (sizing_) return;
  note(make_call("recv", s, "", comm, peer_index, bytes));
  run(s);
}

void FakeDevice::record(plan::Stream s, int event) {
  if (sizing_) return;
  note(make_call("record", s, "", event));
  events_.at(static_cast<std::size_t>(event)) = clock_.at(s);
}

void FakeDevice::wait(plan::Stream s, int event) {
  if (sizing_) return;
  note(make_call("wait", s, "", event));
  const double t = events_.at(static_cast<std::size_t>(event));
  if (t < 0) throw Error(ErrorKind::kRuntime, "wait on an event never recorded");
  clock_.at(s) = std::max(clock_.at(s), t);
}

void FakeDevice::mark(plan::Stream s, int marker) {
  if (sizing_) return;
  markers_.at(static_cast<std::size_t>(marker)) = clock_.at(s);
}

std::vector<double> FakeDevice::end_iteration(double) {
  note(make_call("end", plan::Stream::kCompute));
  if (!held_.empty()) {
    throw Error(ErrorKind::kRuntime,
                fmt::format("{} activation holds still held at the iteration's end", held_.size()));
  }
  memory_ = {};
  memory_.states = states_;
  memory_.activations_peak = memory_.activations_reserved = live_peak_;
  memory_.peak = states_ + live_peak_;
  std::vector<double> out = markers_;
  double end = 0;
  for (const auto& [s, t] : clock_) end = std::max(end, t);
  out.push_back(end);
  return out;
}

}  // namespace trainsim::kexec
