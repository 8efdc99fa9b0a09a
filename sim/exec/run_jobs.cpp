// run_program and run_jobs (program_exec.h): the analytic base of each job, one Simulation and one
// CommBackend, an Executor per job (executor.h), and the rates and notes of the executed result.
#include "sim/exec/program_exec.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <string>

#include "sim/core/error.h"
#include "sim/core/simulation.h"
#include "sim/exec/comm_backend.h"
#include "sim/exec/executor.h"
#include "sim/plan/program.h"

namespace trainsim::exec {

using detail::Executor;

namespace {

// The analytic evaluation a run starts from: memory, FLOP accounting, start-up and the analytic
// pipeline picture; every time is replaced by the executed timeline.
Result analytic_base(const RunConfig& cfg, const ExecOptions& options) {
  AnalyticOptions ao;
  ao.enforce_memory = options.enforce_memory;
  return run_analytic(cfg, ao);
}

// The rates of an executed iteration, and the note that says how it ran.
void finalize(const RunConfig& cfg, const char* fidelity, Result& r) {
  r.fidelity = fidelity;
  r.model_version = kProgramModelVersion;
  set_rates(cfg, r);
}

// Runs `sim` to the end, in steps of about a hundredth of `estimate_s` when progress is asked for
// (Simulation::run_until dispatches the same events in the same order as run()).
void run_with_progress(Simulation& sim, const ExecOptions& options, double estimate_s) {
  if (!options.progress) {
    sim.run();
    return;
  }
  // At least one step: before it, the work may be only batch calls (flows started and not yet
  // solved), with no event queued.
  const TimePs step = TimePs::from_seconds(std::max(estimate_s / 100, 1e-3));
  do {
    sim.run_until(sim.now() + step);
    options.progress(sim.now().seconds(), estimate_s);
  } while (sim.pending_events() > 0);
}

void add_exec_note(Result& r) {
  std::erase_if(r.notes, [](const std::string& n) { return n.rfind("analytic fidelity", 0) == 0; });
  r.notes.push_back(fmt::format(
      "{} fidelity: {} Program{} of up to {} tasks, {} {} executed ({} task instances{}); "
      "critical rank {}",
      r.fidelity, r.exec.roles, r.exec.roles == 1 ? "" : "s", r.exec.tasks_per_role,
      r.exec.actors,
      r.exec.symmetry ? (r.exec.actors == 1 ? "stage actor (symmetry shortcut)"
                                             : "stage actors (symmetry shortcut)")
                      : (r.exec.actors == 1 ? "rank" : "ranks"),
      r.exec.task_instances,
      r.exec.flows > 0 ? fmt::format(", {} flows", r.exec.flows) : std::string(),
      r.exec.critical_rank));
}

}  // namespace

Result run_program(const RunConfig& cfg, const ExecOptions& options) {
  Result r = analytic_base(cfg, options);
  const plan::ProgramSet ps =
      plan::build_programs(cfg.model, cfg.cluster, cfg.parallel, cfg.training, cfg.opt);
  Simulation sim(options.seed);
  // The one place the fidelity is chosen: the executor sees only the CommBackend interface.
  const std::unique_ptr<CommBackend> backend = make_comm_backend(sim, cfg, options, r);
  Executor ex(cfg, options, ps, sim, *backend);
  ex.begin();
  run_with_progress(sim, options, r.iteration_time_s);
  const double executed_s = ex.finish(r);
  finalize(cfg, backend->fidelity(), r);
  backend->report(executed_s, r);
  add_exec_note(r);
  return r;
}

JobsResult run_jobs(const RunConfig& cluster, const std::vector<JobRun>& jobs,
                    const ExecOptions& options) {
  JobsResult out;
  std::vector<Result> results;
  std::vector<plan::ProgramSet> programs;
  results.reserve(jobs.size());
  programs.reserve(jobs.size());
  for (const JobRun& j : jobs) {
    if (static_cast<int>(j.gpus.size()) != j.cfg->cluster.gpus) {
      throw_input(fmt::format("the job runs {} ranks on {} placed GPUs", j.cfg->cluster.gpus,
                              j.gpus.size()),
                  {"", 0, "jobs"});
    }
    for (int g : j.gpus) {
      if (g < 0 || g >= cluster.cluster.gpus) {
        throw_input(fmt::format("GPU {} is outside the cluster's {} GPUs", g, cluster.cluster.gpus),
                    {"", 0, "jobs"});
      }
    }
    results.push_back(analytic_base(*j.cfg, options));
    programs.push_back(plan::build_programs(j.cfg->model, j.cfg->cluster, j.cfg->parallel,
                                            j.cfg->training, j.cfg->opt));
  }
  Simulation sim(options.seed);
  // One backend, and so one fabric, for every job; the closed form's traffic estimate is that of
  // the first job (schedule fidelity reports no shared network state).
  const std::unique_ptr<CommBackend> backend =
      make_comm_backend(sim, cluster, options, results.front());
  std::vector<std::unique_ptr<Executor>> executors;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    executors.push_back(std::make_unique<Executor>(*jobs[i].cfg, options, programs[i], sim,
                                                   *backend, jobs[i].gpus,
                                                   TimePs::from_seconds(jobs[i].start_s),
                                                   jobs[i].iterations));
    executors.back()->begin();
  }
  double estimate_s = 0;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    estimate_s = std::max(estimate_s, jobs[i].start_s + jobs[i].iterations *
                                                           results[i].iteration_time_s);
  }
  run_with_progress(sim, options, estimate_s);
  out.makespan_s = 0;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    Result& r = results[i];
    const double executed_s = executors[i]->finish(r);
    finalize(*jobs[i].cfg, backend->fidelity(), r);
    add_exec_note(r);
    out.makespan_s = std::max(out.makespan_s, jobs[i].start_s + executed_s);
  }
  out.fidelity = backend->fidelity();
  if (out.fidelity == "flow" || out.fidelity == "packet") {
    Result fabric;
    fabric.iteration_time_s = out.makespan_s;
    backend->report(out.makespan_s, fabric);
    out.fabric = fabric.network;
    out.exec = fabric.exec;
  }
  out.exec.events = static_cast<long>(sim.events_dispatched());
  out.jobs = std::move(results);
  return out;
}


}  // namespace trainsim::exec
