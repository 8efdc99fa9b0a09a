#include "kernels/exec/fake_device.h"

#include <algorithm>

#include "sim/core/error.h"

namespace trainsim::kexec {

void FakeDevice::create_streams(const std::vector<plan::Stream>& streams) {
  for (plan::Stream s : streams) {
    calls_.push_back({"create_streams", s, "", {}, -1, -1, 0, {}});
    clock_[s] = 0;
  }
}

void FakeDevice::create_comm(int comm, const CommGroup& group, int my_index, const CommId& id) {
  if (my_index < 0 || my_index >= static_cast<int>(group.members.size()) ||
      group.members[static_cast<std::size_t>(my_index)] != rank_) {
    throw Error(ErrorKind::kRuntime, "create_comm: rank is not the member it claims to be");
  }
  calls_.push_back(
      {"comm", plan::Stream::kCompute, group.name, {}, comm, my_index, 0, group.members});
  comm_ids.push_back(id);
}

void FakeDevice::create_events(int count, int markers) {
  events_.assign(static_cast<std::size_t>(count), -1.0);
  markers_.assign(static_cast<std::size_t>(markers), -1.0);
}

void FakeDevice::begin_iteration() {
  calls_.push_back({"begin", plan::Stream::kCompute, "", {}, -1, -1, 0, {}});
  for (auto& [s, t] : clock_) t = 0;
}

void FakeDevice::run(plan::Stream s) {
  if (!clock_.count(s)) throw Error(ErrorKind::kRuntime, "launch on a stream never created");
  clock_[s] += op_s_;
}

void FakeDevice::kernel(plan::Stream s, const std::string& op, const KernelLaunch& k, Precision) {
  if (sizing_) return;
  calls_.push_back({"kernel", s, op, k, -1, -1, k.bytes, {}});
  run(s);
}

void FakeDevice::collective(plan::Stream s, int comm, const CollectiveCall& c) {
  if (sizing_) return;
  calls_.push_back({"collective", s, coll::to_string(c.kind), {}, comm, -1, c.bytes, {}});
  run(s);
}

void FakeDevice::send(plan::Stream s, int comm, int peer_index, double bytes) {
  if (sizing_) return;
  calls_.push_back({"send", s, "", {}, comm, peer_index, bytes, {}});
  run(s);
}

void FakeDevice::recv(plan::Stream s, int comm, int peer_index, double bytes) {
  if (sizing_) return;
  calls_.push_back({"recv", s, "", {}, comm, peer_index, bytes, {}});
  run(s);
}

void FakeDevice::record(plan::Stream s, int event) {
  if (sizing_) return;
  calls_.push_back({"record", s, "", {}, event, -1, 0, {}});
  events_.at(static_cast<std::size_t>(event)) = clock_.at(s);
}

void FakeDevice::wait(plan::Stream s, int event) {
  if (sizing_) return;
  calls_.push_back({"wait", s, "", {}, event, -1, 0, {}});
  const double t = events_.at(static_cast<std::size_t>(event));
  if (t < 0) throw Error(ErrorKind::kRuntime, "wait on an event never recorded");
  clock_.at(s) = std::max(clock_.at(s), t);
}

void FakeDevice::mark(plan::Stream s, int marker) {
  if (sizing_) return;
  markers_.at(static_cast<std::size_t>(marker)) = clock_.at(s);
}

std::vector<double> FakeDevice::end_iteration(double) {
  calls_.push_back({"end", plan::Stream::kCompute, "", {}, -1, -1, 0, {}});
  std::vector<double> out = markers_;
  double end = 0;
  for (const auto& [s, t] : clock_) end = std::max(end, t);
  out.push_back(end);
  return out;
}

}  // namespace trainsim::kexec
