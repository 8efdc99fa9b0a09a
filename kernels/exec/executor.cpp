#include "kernels/exec/executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "sim/core/error.h"

namespace trainsim::kexec {

using plan::Stream;
using plan::Task;
using plan::TaskType;

Precision collective_dtype(const plan::ProgramSet& ps, const Task& t) {
  if (t.dim == plan::Dim::kDp || t.dim == plan::Dim::kExpertDp) return ps.training.grad_reduce;
  return ps.training.precision;
}

void setup_device(const LaunchPlan& lp, const CommTable& table, const std::vector<CommId>& ids,
                  Device& dev, int markers_per_task) {
  if (ids.size() != table.groups.size()) {
    throw Error(ErrorKind::kRuntime, fmt::format("{} communicator ids for {} communicators",
                                                 ids.size(), table.groups.size()));
  }
  dev.create_streams(lp.streams);
  for (int c : lp.comms) {
    const CommGroup& g = table.groups[static_cast<std::size_t>(c)];
    const auto it = std::find(g.members.begin(), g.members.end(), lp.rank);
    dev.create_comm(c, g, static_cast<int>(it - g.members.begin()),
                    ids[static_cast<std::size_t>(c)]);
  }
  dev.create_events(lp.events, static_cast<int>(lp.program->tasks.size()) * markers_per_task);
}

RankMeasure run_plan(const plan::ProgramSet& ps, const LaunchPlan& lp, Device& dev,
                     const ExecuteOptions& opt) {
  const plan::Program& prog = *lp.program;
  const std::size_t n = prog.tasks.size();
  RankMeasure m;
  m.rank = lp.rank;
  m.start_s.assign(n, 0);
  m.end_s.assign(n, 0);
  dev.hold_states(lp.state_bytes);
  // it = -1: the sizing pass (nothing runs; buffers are sized).
  for (int it = -1; it < opt.warmup + opt.iterations; ++it) {
    if (it < 0) {
      dev.set_sizing(true);
    } else {
      dev.begin_iteration();
    }
    for (const Command& c : lp.commands) {
      const Task& t = prog.tasks[c.task];
      const int mark = static_cast<int>(2 * c.task);
      switch (c.type) {
        case CmdType::kWait:
          dev.wait(c.stream, c.event);
          continue;
        case CmdType::kRecord:
          dev.record(c.stream, c.event);
          continue;
        default:
          break;
      }
      const bool holds = it >= 0 && !lp.hold_begin.empty();
      if (holds && lp.hold_begin[c.task] >= 0) {
        const ActivationHold& h = lp.holds[static_cast<std::size_t>(lp.hold_begin[c.task])];
        dev.hold(c.stream, lp.hold_begin[c.task], h.bytes);
      }
      dev.mark(c.stream, mark);
      switch (c.type) {
        case CmdType::kKernel: {
          // Data loading is the host pipeline's stall: an empty kernel stands for it.
          const KernelLaunch k = kernel_launch(ps, prog, t);
          const model::Op& op = prog.ops[static_cast<std::size_t>(t.op)];
          dev.kernel(c.stream, op.name, k, kernel_precision(ps, op));
          break;
        }
        case CmdType::kCollective:
          dev.collective(c.stream, c.comm, {t.collective, t.bytes, collective_dtype(ps, t)});
          break;
        case CmdType::kSend:
          dev.send(c.stream, c.comm, c.peer_index, t.bytes);
          break;
        case CmdType::kRecv:
          dev.recv(c.stream, c.comm, c.peer_index, t.bytes);
          break;
        default:
          break;
      }
      dev.mark(c.stream, mark + 1);
      if (holds && lp.hold_end[c.task] >= 0) dev.release(c.stream, lp.hold_end[c.task]);
    }
    if (it < 0) {
      dev.set_sizing(false);
      continue;
    }
    const std::vector<double> times = dev.end_iteration(opt.timeout_s);
    if (times.size() != 2 * n + 1) {
      throw Error(ErrorKind::kRuntime,
                  fmt::format("device returned {} times for {} markers", times.size(), 2 * n));
    }
    if (it < opt.warmup) continue;
    for (std::size_t i = 0; i < n; ++i) {
      m.start_s[i] += times[2 * i] / opt.iterations;
      m.end_s[i] += times[2 * i + 1] / opt.iterations;
    }
    m.iteration_s.push_back(times.back());
    m.memory = dev.memory();
  }
  return m;
}

std::vector<RankMeasure> run_local_ranks(const plan::ProgramSet& ps, const CommTable& table,
                                         const std::vector<CommId>& ids,
                                         const std::vector<int>& ranks,
                                         const std::vector<int>& devices,
                                         const DeviceFactory& factory, const ExecuteOptions& opt) {
  std::vector<RankMeasure> out(ranks.size());
  std::vector<std::exception_ptr> errors(ranks.size());
  auto work = [&](std::size_t i) {
    try {
      const LaunchPlan lp = make_launch_plan(ps, table, ranks[i]);
      std::shared_ptr<Device> dev = factory(ranks[i], devices.at(i));
      setup_device(lp, table, ids, *dev);
      out[i] = run_plan(ps, lp, *dev, opt);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  if (ranks.size() == 1) {
    work(0);
  } else {
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < ranks.size(); ++i) threads.emplace_back(work, i);
    for (std::thread& t : threads) t.join();
  }
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return out;
}

namespace {

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

// Task indices of each stream of a Program, in stream order.
std::vector<std::vector<std::uint32_t>> by_stream(const plan::Program& prog) {
  std::vector<std::vector<std::uint32_t>> s(plan::kStreamCount);
  for (std::uint32_t i = 0; i < prog.tasks.size(); ++i) {
    s[static_cast<std::size_t>(prog.tasks[i].stream)].push_back(i);
  }
  return s;
}

}  // namespace

exec::Result measured_result(const plan::ProgramSet& ps, const std::vector<RankMeasure>& ranks,
                             const std::vector<int>& trace_ranks) {
  const int world = ps.world();
  if (static_cast<int>(ranks.size()) != world) {
    throw Error(ErrorKind::kRuntime,
                fmt::format("measures of {} ranks for a job of {}", ranks.size(), world));
  }
  exec::Result r;
  r.fidelity = "real";
  r.model_version = "measured";
  r.gpus = world;
  r.microbatches = ps.layout.microbatches;

  // Iteration time: per iteration the slowest rank, averaged; critical = slowest on average.
  const std::size_t iters = ranks[0].iteration_s.size();
  double total = 0;
  for (std::size_t j = 0; j < iters; ++j) {
    double slowest = 0;
    for (const RankMeasure& m : ranks) slowest = std::max(slowest, m.iteration_s.at(j));
    total += slowest;
  }
  r.iteration_time_s = iters ? total / static_cast<double>(iters) : 0;
  int crit = 0;
  for (int i = 0; i < world; ++i) {
    if (mean(ranks[static_cast<std::size_t>(i)].iteration_s) >
        mean(ranks[static_cast<std::size_t>(crit)].iteration_s)) {
      crit = i;
    }
  }
  r.exec.critical_rank = crit;
  r.exec.roles = static_cast<long>(ps.roles.size());
  r.exec.actors = world;
  for (const plan::Program& p : ps.roles) {
    r.exec.tasks_per_role = std::max(r.exec.tasks_per_role, static_cast<long>(p.tasks.size()));
  }
  for (int i = 0; i < world; ++i) {
    r.exec.task_instances +=
        static_cast<long>(ps.roles[static_cast<std::size_t>(ps.coord(i).pp)].tasks.size());
  }

  const RankMeasure& cm = ranks[static_cast<std::size_t>(crit)];
  const int stage = ps.coord(crit).pp;
  const plan::Program& prog = ps.roles[static_cast<std::size_t>(stage)];
  auto dur = [](const RankMeasure& m, std::uint32_t i) {
    return std::max(0.0, m.end_s[i] - m.start_s[i]);
  };

  // Task kinds of the critical rank, by total time (ties: first appearance).
  std::map<std::string, std::size_t> kind_index;
  for (std::uint32_t i = 0; i < prog.tasks.size(); ++i) {
    const Task& t = prog.tasks[i];
    const std::string name = prog.task_name(t);
    auto [it, fresh] = kind_index.emplace(name, r.task_kinds.size());
    if (fresh) r.task_kinds.push_back({name, task_category(t), 0, 0});
    exec::TaskKindTime& k = r.task_kinds[it->second];
    ++k.count;
    k.total_s += dur(cm, i);
  }
  std::stable_sort(r.task_kinds.begin(), r.task_kinds.end(),
                   [](const exec::TaskKindTime& a, const exec::TaskKindTime& b) {
                     return a.total_s > b.total_s;
                   });

  // Breakdown from the gaps of the critical rank's compute stream.
  const auto streams = by_stream(prog);
  exec::Breakdown& b = r.breakdown;
  double prev_end = 0;
  for (std::uint32_t i : streams[static_cast<std::size_t>(Stream::kCompute)]) {
    const Task& t = prog.tasks[i];
    const double gap = cm.start_s[i] - prev_end;
    if (gap > 0) {
      // The cross-stream dependency that ended last is what the task waited for.
      std::uint32_t last = i;
      for (std::uint32_t j = 0; j < t.dep_count; ++j) {
        const std::uint32_t d = prog.deps[t.dep_begin + j];
        if (prog.tasks[d].stream == Stream::kCompute) continue;
        if (last == i || cm.end_s[d] > cm.end_s[last]) last = d;
      }
      if (last == i) {
        b.pipeline_bubble_s += gap;
      } else {
        const Task& w = prog.tasks[last];
        if (w.type == TaskType::kCollective) {
          switch (w.dim) {
            case plan::Dim::kTp:
              b.exposed_tp_s += gap;
              break;
            case plan::Dim::kCp:
              b.exposed_cp_s += gap;
              break;
            case plan::Dim::kEp:
              b.exposed_ep_s += gap;
              break;
            case plan::Dim::kPp:
              b.exposed_pp_s += gap;
              break;
            default:
              b.exposed_dp_s += gap;
              break;
          }
        } else {
          // A pipeline transfer: its own time is the shorter of the two ends' spans (the end
          // posted last waits for nothing but the data); the rest is waiting for the peer.
          double transfer = dur(cm, last);
          const bool from_next = w.stream == Stream::kPpRecvNext || w.stream == Stream::kPpSendNext;
          const int other = from_next ? ps.next_stage(stage) : ps.prev_stage(stage);
          if (w.type == TaskType::kRecv && other >= 0) {
            const int peer = ps.peer_on_stage(crit, other);
            const plan::Program& pp = ps.roles[static_cast<std::size_t>(other)];
            const Stream send = from_next ? Stream::kPpSendPrev : Stream::kPpSendNext;
            const auto peer_streams = by_stream(pp);
            const auto& sends = peer_streams[static_cast<std::size_t>(send)];
            if (w.stream_pos < sends.size()) {
              transfer = std::min(transfer,
                                  dur(ranks[static_cast<std::size_t>(peer)], sends[w.stream_pos]));
            }
          }
          const double exposed = std::min(gap, transfer);
          b.exposed_pp_s += exposed;
          b.pipeline_bubble_s += gap - exposed;
        }
      }
    }
    const double d = dur(cm, i);
    if (t.pass == plan::Pass::kData) {
      b.data_loading_s += d;
    } else if (t.pass == plan::Pass::kOptimizer) {
      b.optimizer_s += d;
    } else {
      b.compute_s += d;
    }
    prev_end = std::max(prev_end, cm.end_s[i]);
  }
  // The tail: the critical rank's last iteration ends after its compute stream (DP reduction,
  // the last pipeline transfers); its measured mean iteration time closes the breakdown.
  b.pipeline_bubble_s += std::max(0.0, mean(cm.iteration_s) - prev_end);

  // Timeline of the traced ranks, sorted by (rank, start).
  std::vector<int> tr = trace_ranks;
  std::sort(tr.begin(), tr.end());
  tr.erase(std::unique(tr.begin(), tr.end()), tr.end());
  for (int rank : tr) {
    if (rank < 0 || rank >= world) continue;
    r.timeline.ranks.push_back(rank);
    const RankMeasure& m = ranks[static_cast<std::size_t>(rank)];
    const plan::Program& p = ps.roles[static_cast<std::size_t>(ps.coord(rank).pp)];
    std::vector<std::uint32_t> order(p.tasks.size());
    for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::uint32_t x, std::uint32_t y) { return m.start_s[x] < m.start_s[y]; });
    for (std::uint32_t i : order) {
      const Task& t = p.tasks[i];
      exec::TraceSpan s;
      s.rank = rank;
      s.stream = plan::to_string(t.stream);
      s.name = p.task_name(t);
      s.category = task_category(t);
      s.start_s = m.start_s[i];
      s.end_s = std::max(m.start_s[i], m.end_s[i]);
      s.microbatch = t.microbatch;
      s.chunk = t.chunk;
      s.layer = t.layer;
      s.bytes = t.type == TaskType::kCompute ? 0.0 : t.bytes;
      r.timeline.spans.push_back(std::move(s));
    }
  }
  return r;
}

std::vector<double> pack(const RankMeasure& m) {
  std::vector<double> v;
  v.push_back(m.rank);
  v.push_back(static_cast<double>(m.start_s.size()));
  v.push_back(static_cast<double>(m.iteration_s.size()));
  v.insert(v.end(), m.start_s.begin(), m.start_s.end());
  v.insert(v.end(), m.end_s.begin(), m.end_s.end());
  v.insert(v.end(), m.iteration_s.begin(), m.iteration_s.end());
  const MemoryMeasure& mm = m.memory;
  v.insert(v.end(), {mm.runtime, mm.states, mm.activations_peak, mm.activations_reserved,
                     mm.scratch, mm.peak, mm.capacity});
  return v;
}

RankMeasure unpack(const std::vector<double>& v) {
  if (v.size() < 3) throw Error(ErrorKind::kRuntime, "a rank's measures are truncated");
  RankMeasure m;
  m.rank = static_cast<int>(v[0]);
  const auto n = static_cast<std::size_t>(v[1]), it = static_cast<std::size_t>(v[2]);
  constexpr std::size_t kMemoryFields = 7;
  if (v.size() != 3 + 2 * n + it + kMemoryFields)
    throw Error(ErrorKind::kRuntime, "a rank's measures are truncated");
  auto at = v.begin() + 3;
  m.start_s.assign(at, at + static_cast<std::ptrdiff_t>(n));
  at += static_cast<std::ptrdiff_t>(n);
  m.end_s.assign(at, at + static_cast<std::ptrdiff_t>(n));
  at += static_cast<std::ptrdiff_t>(n);
  m.iteration_s.assign(at, at + static_cast<std::ptrdiff_t>(it));
  at += static_cast<std::ptrdiff_t>(it);
  MemoryMeasure& mm = m.memory;
  for (double* f : {&mm.runtime, &mm.states, &mm.activations_peak, &mm.activations_reserved,
                    &mm.scratch, &mm.peak, &mm.capacity}) {
    *f = *at++;
  }
  return m;
}

}  // namespace trainsim::kexec
