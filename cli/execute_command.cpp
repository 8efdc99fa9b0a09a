#include "cli/execute_command.h"

#include <fmt/format.h>

#include <iostream>

#include "cli/default_scenario.h"
#include "cli/output.h"
#include "kernels/device_info.h"
#include "kernels/exec/cuda_device.h"
#include "kernels/exec/fake_device.h"
#include "kernels/exec/job.h"
#include "reports/summary.h"
#include "reports/trace.h"
#include "scenarios/run_config.h"
#include "scenarios/scenario.h"
#include "sim/core/error.h"
#include "sim/core/limits.h"
#include "sim/exec/analytic.h"
#include "sim/plan/program.h"

namespace trainsim::cli {

std::vector<int> parse_rank_list(const std::string& list, const std::string& field) {
  std::vector<int> out;
  std::size_t at = 0;
  while (at <= list.size()) {
    const std::size_t comma = std::min(list.find(',', at), list.size());
    const std::string item = list.substr(at, comma - at);
    const std::size_t dash = item.find('-');
    try {
      std::size_t used = 0;
      if (dash == std::string::npos) {
        out.push_back(std::stoi(item, &used));
        if (used != item.size()) throw std::invalid_argument(item);
      } else {
        const int a = std::stoi(item.substr(0, dash), &used);
        if (used != dash) throw std::invalid_argument(item);
        const std::string rest = item.substr(dash + 1);
        const int b = std::stoi(rest, &used);
        if (used != rest.size() || b < a) throw std::invalid_argument(item);
        for (int r = a; r <= b; ++r) out.push_back(r);
      }
    } catch (const std::logic_error&) {
      throw_input("`" + item + "` is not a rank or a range of ranks", {"", 0, field},
                  "write ranks like 0,1,8-15");
    }
    at = comma + 1;
  }
  return out;
}

CLI::App* add_execute_command(CLI::App& app, ExecuteArgs& a) {
  CLI::App* c = app.add_subcommand(
      "execute",
      "Run a scenario's Program on this machine's GPUs and measure it (docs/execute.md)");
  c->add_option("scenario", a.scenario,
                "Scenario YAML file (default: the built-in MegaScale 175B on 12,288 GPUs)");
  c->add_option("--set", a.sets, "Override a scenario key: key.path=value (repeatable)")
      ->type_name("KEY=VALUE");
  c->add_option("--iterations", a.iterations, "Measured iterations (default 5)")
      ->check(CLI::Range(1, 1000000));
  c->add_option("--warmup", a.warmup, "Unmeasured iterations before them (default 2)")
      ->check(CLI::Range(0, 1000000));
  c->add_option("--timeout", a.timeout_s,
                "Seconds an iteration or a communicator creation may take before the job is "
                "aborted (default 300; above 0, at most 86400)");
  c->add_option("--format", a.format, "json (default: the document compare reads) | text")
      ->check(CLI::IsMember({"text", "json"}));
  c->add_option("-o,--out,--output", a.output, "Write the result to FILE instead of stdout")
      ->check(output_file());
  c->add_option("--trace", a.trace, "Write a Chrome/Perfetto trace of the measured spans to FILE")
      ->check(output_file());
  c->add_option("--trace-ranks", a.trace_ranks, "Ranks in the trace, e.g. 0,1,8-15 (default: all)");
  c->add_option("--backend", a.backend,
                "cuda (default), or fake: a recording fake GPU where every op takes 1 µs, to try "
                "the launch path without a GPU")
      ->check(CLI::IsMember({"cuda", "fake"}));
  c->add_option("--fake-gpus", a.fake_gpus,
                "GPUs the fake backend pretends this machine has (default: as many as needed)")
      ->check(CLI::NonNegativeNumber);
  c->add_flag("--force", a.force,
              "Go beyond the work limit (ranks x tasks one process launches: 4,194,304; "
              "docs/reliability.md)");
  return c;
}

int run_execute_command(const ExecuteArgs& a) {
  // (CLI::PositiveNumber printed its range as 2.2e-308 to 1.8e308, every digit written out.)
  if (!(a.timeout_s > 0 && a.timeout_s <= 86400)) {
    throw_input(fmt::format("{} s is not a timeout: it must be above 0 and at most 86400 s (a "
                            "day)",
                            a.timeout_s),
                {"", 0, "--timeout"});
  }
  const scen::Scenario s =
      a.scenario.empty()
          ? scen::load_scenario_string(kDefaultScenarioYaml, kDefaultScenarioName, a.sets)
          : scen::load_scenario_file(a.scenario, a.sets);
  scen::require_one_job(s, "execute");
  if (s.training.cpu_offload_layers > 0) {
    // The executor holds every layer's activations on the GPU and runs no copies to host.
    throw_input("`execute` does not run activation offloading (no copies to host memory), so "
                "neither its time nor its memory would match the simulation",
                {"", 0, "training.cpu_offload_layers"}, "set training.cpu_offload_layers 0");
  }
  const exec::RunConfig cfg = scen::make_run_config(s);
  const plan::ProgramSet ps =
      plan::build_programs(cfg.model, cfg.cluster, cfg.parallel, cfg.training, cfg.opt);
  std::vector<int> trace_ranks;
  if (!a.trace_ranks.empty()) {
    trace_ranks = parse_rank_list(a.trace_ranks, "--trace-ranks");
    for (int r : trace_ranks) {
      if (r < 0 || r >= ps.world()) {
        throw_input(fmt::format("rank {} is outside the job's {} ranks", r, ps.world()),
                    {"", 0, "--trace-ranks"});
      }
    }
  } else if (!a.trace.empty()) {
    for (int r = 0; r < ps.world(); ++r) trace_ranks.push_back(r);
  }

  std::unique_ptr<kexec::ProcessGroup> group;
  kexec::Backend backend;
  backend.name = a.backend;
  if (a.backend == "fake") {
    group = kexec::make_process_group();
    backend.devices = a.fake_gpus > 0 ? a.fake_gpus : ps.world();
    auto made = std::make_shared<int>(0);
    backend.make_id = [made] {
      kexec::CommId id{};
      const std::string text = fmt::format("fake-{}", (*made)++);
      std::copy(text.begin(), text.end(), id.begin());
      return id;
    };
    backend.factory = [](int rank, int) {
      return std::make_shared<kexec::FakeDevice>(rank, 1e-6, /*record_calls=*/false);
    };
  } else {
    std::string why;
    const int gpus = kexec::cuda_devices(&why);
    if (gpus == 0) {
      throw Error(ErrorKind::kRuntime, "no CUDA device found (" + why + ")", {},
                  "run `trainsim execute` on a GPU machine; `trainsim run` simulates without one");
    }
    group = kexec::make_process_group();
    backend.devices = gpus;
    backend.make_id = kexec::cuda_comm_id;
    const double timeout = a.timeout_s;
    backend.factory = [timeout](int rank, int device) {
      return kexec::make_cuda_device(device, rank, timeout);
    };
  }
  // The work limit (docs/reliability.md): every task of every rank this process runs has a
  // launch plan entry, measured spans and, on the fake backend, a record of each call per
  // iteration; the built-in 12,288-GPU default ran over 10 minutes at 6-7 GB on the fake one.
  const kexec::Placement here = kexec::place(ps.world(), *group, backend.devices);
  std::int64_t work = 0;
  for (const int r : here.ranks) {
    work += static_cast<std::int64_t>(
        ps.roles[static_cast<std::size_t>(ps.coord(r).pp)].tasks.size());
  }
  if (!a.force && work > limits::kMaxExecuteWork) {
    throw_input(fmt::format("{} ranks in this process x their tasks = {} task launches per "
                            "iteration, above the work limit of {}",
                            here.ranks.size(), work, limits::kMaxExecuteWork),
                {s.source, 0, "cluster.gpus"},
                "execute a smaller layout (--set cluster.gpus=..., fewer layers), start more "
                "processes (mpirun), or add --force to run it anyway; see docs/reliability.md");
  }
  kexec::ExecuteOptions opt;
  opt.iterations = a.iterations;
  opt.warmup = a.warmup;
  opt.timeout_s = a.timeout_s;
  std::vector<kexec::RankMeasure> measures;
  try {
    measures = kexec::execute_job(ps, *group, backend, opt);
  } catch (const Error& e) {
    // One process failing must not leave the others waiting in MPI forever.
    std::cerr << "trainsim: process " << group->index() << ": " << e.what() << "\n";
    group->abort(e.exit_code());
    throw;
  }
  exec::Result r = kexec::measured_result(ps, measures, trace_ranks);

  // FLOPs, parameters and memory are the model's (the same numbers as `run`); times are measured.
  exec::AnalyticOptions relaxed;
  relaxed.enforce_memory = false;
  const exec::Result model = exec::run_analytic(cfg, relaxed);
  r.profile_name = "measured";
  // Nothing versions a measurement: the CUDA version and the profile that priced the model's
  // FLOPs and memory go into the JSON's `calibration` by name (it held the CUDA version as the
  // profile's version).
  const std::string cuda_version = kernels::query_devices().cuda_version;
  r.profile_version = "";
  r.model_flops_per_iteration = model.model_flops_per_iteration;
  r.hardware_flops_per_iteration = model.hardware_flops_per_iteration;
  r.parameters = model.parameters;
  r.peak_flops_per_gpu = model.peak_flops_per_gpu;
  r.memory = model.memory;
  r.pipeline = model.pipeline;
  r.startup = model.startup;
  const double t = r.iteration_time_s;
  if (t > 0) {
    const double tokens = static_cast<double>(cfg.training.global_batch) * cfg.model.seq_len;
    r.tokens_per_s = tokens / t;
    r.tflops_per_gpu = r.model_flops_per_iteration / t / r.gpus / 1e12;
    r.hw_tflops_per_gpu = r.hardware_flops_per_iteration / t / r.gpus / 1e12;
    r.mfu = r.model_flops_per_iteration / (r.peak_flops_per_gpu * t * r.gpus);
    r.hfu = r.hardware_flops_per_iteration / (r.peak_flops_per_gpu * t * r.gpus);
  }
  kernels::DeviceReport d = kernels::query_devices();
  if (a.backend == "fake") {
    d.devices.assign(1, kernels::DeviceInfo{0, "fake GPU (every op 1 µs)", 0, 0, 0, 0});
    r.fidelity = "fake";
    r.profile_name = "fake";
    r.profile_version = "";
  }
  r.notes.push_back(fmt::format(
      "measured: mean of {} iterations after {} warm-up on {} GPU(s) ({}), {} process(es); "
      "synthetic data of each op's exact shape",
      a.iterations, a.warmup, r.gpus, d.devices.empty() ? "?" : d.devices.front().name,
      group->count()));
  if (a.backend == "fake") {
    r.notes.push_back(
        "fake backend: every op takes 1 µs on its own stream's clock, and no device waits for "
        "another: a collective, send or receive ends 1 µs after its stream reaches it, whatever "
        "its peers do, so the record shows no pipeline bubble and no exposed PP or DP waiting "
        "for a peer; it checks the launch path, not the timing");
  }
  r.notes.push_back(
      "memory-bound ops run their own launchers at the op's shape; data loading launches "
      "nothing; network statistics are not measured (zero); `memory` is the model's, "
      "`memory_measured` what the device used (states and activations held as the memory "
      "model's inventory says, allocated stream-ordered as the schedule runs)");
  if (group->index() != 0) return 0;

  nlohmann::ordered_json j = reports::result_json(r, s, cfg.profile);
  j["calibration"]["gpu"] = d.devices.empty() ? "" : d.devices.front().name;
  j["calibration"]["provenance"] = a.backend == "fake" ? "nothing measured: fake backend"
                                                       : "measured by trainsim execute";
  j["calibration"]["cuda"] = a.backend == "fake" ? "" : cuda_version;
  j["calibration"]["model_profile"] = cfg.profile.name + " v" + cfg.profile.version;
  if (!j.contains("task_kinds")) {
    nlohmann::ordered_json kinds = nlohmann::ordered_json::array();
    for (const exec::TaskKindTime& k : r.task_kinds) {
      kinds.push_back(
          {{"name", k.name}, {"category", k.category}, {"count", k.count}, {"total_s", k.total_s}});
    }
    j["task_kinds"] = kinds;
  }
  // Measured device memory (the CUDA backend measures it; kernels/exec/device.h MemoryMeasure):
  // the rank with the highest peak, beside the model's `memory`, which stays the model's.
  const kexec::RankMeasure* top = nullptr;
  for (const kexec::RankMeasure& m : measures) {
    if (m.memory.peak > 0 && (!top || m.memory.peak > top->memory.peak)) top = &m;
  }
  if (top) {
    const kexec::MemoryMeasure& mm = top->memory;
    j["memory_measured"] = {{"rank", top->rank},
                            {"peak_bytes", mm.peak},
                            {"capacity_bytes", mm.capacity},
                            {"runtime_bytes", mm.runtime},
                            {"states_bytes", mm.states},
                            {"activations_peak_bytes", mm.activations_peak},
                            {"activations_reserved_bytes", mm.activations_reserved},
                            {"scratch_bytes_excluded", mm.scratch}};
  }
  j["execution"] = {{"iterations", a.iterations},
                    {"warmup", a.warmup},
                    {"processes", group->count()},
                    {"critical_rank", r.exec.critical_rank}};
  if (a.format == "text") {
    // The text names what timed the run, not the profile the model's numbers were priced with
    // (it said "calibration measured v" beside "profile datasheet-a100-80gb ...").
    exec::Result shown = r;
    calib::Profile timed = cfg.profile;
    const std::string gpu = d.devices.empty() ? "?" : d.devices.front().name;
    const bool fake = a.backend == "fake";
    shown.profile_name = timed.name =
        fake ? "fake backend" : "measured by trainsim execute (CUDA " + cuda_version + ")";
    shown.profile_version = timed.version = "";
    timed.gpu = fake ? "no GPU" : gpu;
    timed.provenance =
        (fake ? std::string("nothing measured: every op takes 1 µs on its own stream, no device "
                            "waits for another")
              : std::string("times measured on this machine")) +
        "; FLOPs, parameters and memory are the model's (" + cfg.profile.name + " v" +
        cfg.profile.version + ")";
    write_output(reports::result_text(shown, s, timed), a.output);
  } else {
    write_output(j.dump(2) + "\n", a.output);
  }
  if (!a.trace.empty()) {
    reports::TraceMeta meta;
    meta.scenario = s.source;
    meta.fidelity = r.fidelity;
    meta.model_version = "measured";
    meta.profile = "measured";
    meta.stage_stride = cfg.parallel.pp_stride();
    meta.stages = cfg.parallel.pp;
    write_output(reports::trace_event_json(r.timeline, meta), a.trace);
  }
  return 0;
}

}  // namespace trainsim::cli
