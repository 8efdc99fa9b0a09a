#include "scenarios/jobs.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "scenarios/run_config.h"
#include "sim/core/error.h"
#include "sim/core/rng.h"
#include "topology/fabric_file.h"

namespace trainsim::scen {
namespace {

std::vector<int> take_packed(const std::vector<int>& free, int need) {
  return {free.begin(), free.begin() + need};
}

std::vector<int> take_spread(const std::vector<int>& free, int need) {
  std::vector<int> out;
  const std::size_t n = free.size();
  for (int i = 0; i < need; ++i) {
    out.push_back(free[static_cast<std::size_t>(i) * n / static_cast<std::size_t>(need)]);
  }
  return out;
}

std::vector<int> take_random(std::vector<int> free, int need, Rng& rng) {
  rng.shuffle(free.begin(), free.end());
  free.resize(static_cast<std::size_t>(need));
  std::sort(free.begin(), free.end());
  return free;
}

std::vector<int> take_fragmented(const std::vector<int>& free, int need, Rng& rng) {
  std::vector<char> taken(free.size(), 0);
  int got = 0;
  while (got < need) {
    std::size_t i = 0;
    while (i < free.size() && got < need) {
      for (std::int64_t run = rng.uniform_int(1, 4); run > 0 && i < free.size() && got < need; ++i) {
        if (!taken[i]) {
          taken[i] = 1;
          ++got;
          --run;
        }
      }
      for (std::int64_t skip = rng.uniform_int(1, 4); skip > 0 && i < free.size(); ++i) {
        if (!taken[i]) --skip;
      }
    }
  }
  std::vector<int> out;
  for (std::size_t i = 0; i < free.size(); ++i) {
    if (taken[i]) out.push_back(free[i]);
  }
  return out;
}

}  // namespace

std::vector<std::vector<int>> place_jobs(const Scenario& s) {
  const int gpn = std::max(1, s.cluster.gpus_per_node);
  const int servers = s.cluster.gpus / gpn;
  std::int64_t need_total = 0;
  for (const JobSpec& j : s.jobs) need_total += j.scenario.cluster.gpus;
  if (need_total > static_cast<std::int64_t>(servers) * gpn) {
    throw_input(fmt::format("the jobs need {} GPUs; the cluster has {} ({} servers of {})",
                            need_total, static_cast<std::int64_t>(servers) * gpn, servers, gpn),
                origin_of(s, "cluster.gpus"),
                "raise cluster.gpus, or give the jobs fewer GPUs");
  }
  std::vector<std::vector<int>> hosts(s.jobs.size());
  std::vector<int> owner(static_cast<std::size_t>(servers), -1);
  // Explicit server lists first: they are what the user pinned.
  for (std::size_t j = 0; j < s.jobs.size(); ++j) {
    const JobSpec& job = s.jobs[j];
    if (job.placement != "hosts") continue;
    for (int h : job.hosts) {
      ErrorContext at = job.where;
      at.field += ".hosts";
      if (h >= servers) {
        throw_input(fmt::format("server {} is outside the cluster's servers 0-{}", h, servers - 1),
                    at);
      }
      int& o = owner[static_cast<std::size_t>(h)];
      if (o >= 0) {
        throw_input(fmt::format("server {} is also in job `{}`'s hosts", h,
                                s.jobs[static_cast<std::size_t>(o)].name),
                    at, "give each job its own servers");
      }
      o = static_cast<int>(j);
    }
    hosts[j] = job.hosts;
  }
  for (std::size_t j = 0; j < s.jobs.size(); ++j) {
    const JobSpec& job = s.jobs[j];
    if (job.placement == "hosts") continue;
    std::vector<int> free;
    for (int h = 0; h < servers; ++h) {
      if (owner[static_cast<std::size_t>(h)] < 0) free.push_back(h);
    }
    const int need = job.scenario.cluster.gpus / gpn;
    if (need > static_cast<int>(free.size())) {
      throw_input(fmt::format("needs {} servers; {} are free after the jobs before it", need,
                              free.size()),
                  job.where);
    }
    Rng rng(derive_stream_seed(s.seed, "placement/" + std::to_string(j)));
    std::vector<int> got;
    if (job.placement == "packed") {
      got = take_packed(free, need);
    } else if (job.placement == "spread") {
      got = take_spread(free, need);
    } else if (job.placement == "random") {
      got = take_random(free, need, rng);
    } else {
      got = take_fragmented(free, need, rng);
    }
    for (int h : got) owner[static_cast<std::size_t>(h)] = static_cast<int>(j);
    hosts[j] = std::move(got);
  }
  return hosts;
}

JobsOutcome run_scenario_jobs(const Scenario& s, const exec::ProgressFn& progress) {
  if (s.jobs.empty()) throw_input("the scenario has no jobs", {s.source, 0, "jobs"});
  if (s.simulation.jitter > 0 || s.simulation.straggler_rank >= 0 ||
      s.simulation.straggler_host >= 0) {
    throw_input("stragglers and jitter are not modelled for several jobs on one cluster",
                origin_of(s, s.simulation.jitter > 0 ? "simulation.jitter"
                                                     : "simulation.straggler_factor"),
                "run the job alone to study them");
  }
  JobsOutcome out;
  const std::vector<std::vector<int>> hosts = place_jobs(s);
  const exec::RunConfig cluster = make_run_config(s);
  out.profile = cluster.profile;
  std::vector<exec::RunConfig> cfgs;
  cfgs.reserve(s.jobs.size());
  for (const JobSpec& j : s.jobs) cfgs.push_back(make_run_config(j.scenario));
  const int gpn = std::max(1, s.cluster.gpus_per_node);
  std::vector<exec::JobRun> runs;
  for (std::size_t j = 0; j < s.jobs.size(); ++j) {
    exec::JobRun jr;
    jr.cfg = &cfgs[j];
    jr.start_s = s.jobs[j].start_s;
    jr.iterations = s.jobs[j].iterations;
    for (int r = 0; r < cfgs[j].cluster.gpus; ++r) {
      jr.gpus.push_back(hosts[j][static_cast<std::size_t>(r / gpn)] * gpn + r % gpn);
    }
    runs.push_back(std::move(jr));
  }
  const auto located = [&](const Error& e, const JobSpec* job) {
    const std::string what = job ? "job `" + job->name + "`: " : "";
    ErrorContext where = e.where();
    if (where.file.empty()) where.file = s.source;
    return Error(e.kind(), what + e.message(), where, e.hint());
  };
  const bool event = s.fidelity == "schedule" || s.fidelity == "flow" || s.fidelity == "packet";
  if ((s.fidelity == "flow" || s.fidelity == "packet") && !s.cluster.fabric.file.empty()) {
    // The fabric file holds the cluster, not one job: checked once, before any job runs (a
    // file of too few GPUs was reported as the first job's problem).
    try {
      (void)topo::cluster_graph(cluster.cluster);
    } catch (const Error& e) {
      throw located(e, nullptr);
    }
  }
  for (std::size_t j = 0; j < s.jobs.size(); ++j) {
    JobOutcome o;
    o.spec = &s.jobs[j];
    o.hosts = hosts[j];
    try {
      if (event) {
        exec::JobRun alone = runs[j];
        alone.start_s = 0;
        alone.iterations = 1;  // alone, every iteration is the first one again
        o.alone = exec::run_jobs(cluster, {alone}, exec_options(s)).jobs.front();
      } else {
        o.alone = exec::run_analytic(cfgs[j]);
      }
    } catch (const Error& e) {
      throw located(e, o.spec);
    }
    out.jobs.push_back(std::move(o));
  }
  if (event) {
    try {
      exec::ExecOptions options = exec_options(s);
      options.progress = progress;
      out.run = exec::run_jobs(cluster, runs, options);
    } catch (const Error& e) {
      throw located(e, nullptr);
    }
    for (std::size_t j = 0; j < s.jobs.size(); ++j) {
      out.jobs[j].shared = out.run.jobs[j];
    }
  } else {
    out.run.fidelity = "analytic";
    for (JobOutcome& o : out.jobs) {
      o.shared = o.alone;
      out.run.jobs.push_back(o.alone);
      out.run.makespan_s = std::max(out.run.makespan_s, o.spec->start_s + o.spec->iterations *
                                                                              o.alone.iteration_time_s);
    }
  }
  for (JobOutcome& o : out.jobs) {
    o.slowdown = o.shared.iteration_time_s / o.alone.iteration_time_s;
  }
  return out;
}

}  // namespace trainsim::scen
