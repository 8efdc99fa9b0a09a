#include "sim/exec/role_index.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "sim/core/error.h"
#include "sim/exec/task_time.h"

namespace trainsim::exec {
namespace {

const char* category(const plan::Task& t) {
  if (t.type == plan::TaskType::kCompute) {
    if (t.pass == plan::Pass::kData) return "data";
    if (t.pass == plan::Pass::kOptimizer) return "optimizer";
    return "compute";
  }
  if (t.dim == plan::Dim::kExpertDp) return "dp";
  return plan::to_string(t.dim);
}

}  // namespace

RoleIndex index_role(const RunConfig& cfg, const plan::Program& P) {
  RoleIndex R;
  R.prog = &P;
  R.duration_ps = compute_durations_ps(cfg, P);
  R.kind.assign(P.tasks.size(), 0);
  std::map<std::string, std::uint16_t> ids;
  for (std::size_t ti = 0; ti < P.tasks.size(); ++ti) {
    const plan::Task& t = P.tasks[ti];
    const std::string name = P.task_name(t);
    auto [it, fresh] = ids.emplace(name, static_cast<std::uint16_t>(R.kind_names.size()));
    if (fresh) {
      R.kind_names.push_back(name);
      R.kind_category.push_back(category(t));
    }
    R.kind[ti] = it->second;
  }
  R.kind_tasks.assign(R.kind_names.size(), 0);
  for (std::size_t ti = 0; ti < P.tasks.size(); ++ti) ++R.kind_tasks[R.kind[ti]];
  for (std::size_t ti = 0; ti < P.tasks.size(); ++ti) {
    const plan::Task& t = P.tasks[ti];
    if (t.dep_count > 0xffff || t.stream_pos >= (1u << RoleIndex::kPosBits)) {
      throw Error(ErrorKind::kRuntime,
                  fmt::format("stage {}: task {} has {} dependencies at stream position {}; the "
                              "executor holds at most 65,535 and 2^28",
                              P.stage, ti, t.dep_count, t.stream_pos));
    }
    RoleIndex::Step step{static_cast<std::uint32_t>(ti), static_cast<std::uint32_t>(R.ready_deps.size()),
                         static_cast<std::uint16_t>(t.dep_count), R.kind[ti], t.type, t.pass};
    for (std::uint32_t i = 0; i < t.dep_count; ++i) {
      const plan::Task& d = P.tasks[P.deps[t.dep_begin + i]];
      R.ready_deps.push_back((static_cast<std::uint32_t>(d.stream) << RoleIndex::kPosBits) | d.stream_pos);
    }
    R.steps[static_cast<int>(t.stream)].push_back(step);
  }
  for (std::size_t ti = 0; ti < P.tasks.size(); ++ti) {
    const plan::Task& t = P.tasks[ti];
    for (std::uint32_t i = 0; i < t.dep_count; ++i) {
      const plan::Task& d = P.tasks[P.deps[t.dep_begin + i]];
      R.steps[static_cast<int>(d.stream)][d.stream_pos].waiters |=
          static_cast<std::uint16_t>(1u << static_cast<int>(t.stream));
    }
  }
  return R;
}

void check_finished(const RoleIndex& R, int rank, int stage,
                    std::span<const std::uint32_t> completed) {
  const plan::Program& P = *R.prog;
  for (int s = 0; s < plan::kStreamCount; ++s) {
    if (completed[s] >= R.steps[s].size()) continue;
    const plan::Task& t = P.tasks[R.steps[s][completed[s]].task];
    // "; waiting for `recv-next pp` (micro-batch 3, chunk 1) on stream pp-recv-next" per
    // unfinished dependency.
    std::string waiting;
    for (std::uint32_t i = 0; i < t.dep_count; ++i) {
      const plan::Task& d = P.tasks[P.deps[t.dep_begin + i]];
      if (completed[static_cast<int>(d.stream)] <= d.stream_pos) {
        waiting += fmt::format("; waiting for `{}` (micro-batch {}, chunk {}) on stream {}",
                               P.task_name(d), d.microbatch, d.chunk, plan::to_string(d.stream));
      }
    }
    throw Error(ErrorKind::kRuntime,
                fmt::format("the schedule deadlocked: rank {} (stage {}) stopped at `{}` on "
                            "stream {} (micro-batch {}, chunk {}){}",
                            rank, stage, P.task_name(t), plan::to_string(static_cast<plan::Stream>(s)),
                            t.microbatch, t.chunk, waiting),
                {"", 0, ""});
  }
}

std::vector<TaskKindTime> task_kind_times(const RoleIndex& R, std::span<const double> total_s,
                                          std::span<const long> count) {
  std::vector<TaskKindTime> out;
  for (std::size_t k = 0; k < R.kind_names.size(); ++k) {
    if (count[k] == 0) continue;
    out.push_back({R.kind_names[k], R.kind_category[k], count[k], total_s[k]});
  }
  std::stable_sort(out.begin(), out.end(), [](const TaskKindTime& a, const TaskKindTime& b) {
    return a.total_s > b.total_s;
  });
  return out;
}

void append_trace(const RoleIndex& R, int rank, std::span<const TaskSpan> executed,
                  Timeline& timeline) {
  timeline.ranks.push_back(rank);
  std::vector<TaskSpan> spans(executed.begin(), executed.end());
  std::stable_sort(spans.begin(), spans.end(),
                   [](const TaskSpan& x, const TaskSpan& y) { return x.start < y.start; });
  for (const TaskSpan& sp : spans) {
    const plan::Task& t = R.prog->tasks[sp.task];
    TraceSpan ts;
    ts.rank = rank;
    ts.stream = plan::to_string(t.stream);
    ts.name = R.kind_names[R.kind[sp.task]];
    ts.category = R.kind_category[R.kind[sp.task]];
    ts.start_s = sp.start.seconds();
    ts.end_s = sp.end.seconds();
    ts.microbatch = t.microbatch;
    ts.chunk = t.chunk;
    ts.layer = t.layer;
    ts.bytes = t.type == plan::TaskType::kCompute ? 0.0 : t.bytes;
    ts.slowed_s = sp.slowed_s;
    timeline.spans.push_back(std::move(ts));
  }
}

}  // namespace trainsim::exec
