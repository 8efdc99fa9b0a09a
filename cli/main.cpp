// trainsim: the command-line entry point. Parses arguments, calls the libraries, prints, and maps
// errors to exit codes (DESIGN.md §3): 0 ok, 2 usage/input, 3 infeasible configuration,
// 4 runtime/GPU failure. Results go to stdout; messages go to stderr.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <limits>
#include <string>
#include <vector>

#include "calibrate/profile.h"
#include "cli/calibrate_command.h"
#include "cli/fit_cc_command.h"
#include "cli/fit_runs_command.h"
#include "cli/collective_command.h"
#include "cli/compare_command.h"
#include "cli/execute_command.h"
#include "cli/goodput_command.h"
#include "cli/output.h"
#include "cli/run_checks.h"
#include "cli/run_compare.h"
#include "reports/jobs_report.h"
#include "scenarios/jobs.h"
#include "cli/default_scenario.h"
#include "cli/sweep_command.h"
#include "cli/topo_command.h"
#include "kernels/device_info.h"
#include "reports/html_report.h"
#include "reports/summary.h"
#include "reports/trace.h"
#include "reports/validation_report.h"
#include "scenarios/presets.h"
#include "scenarios/run_config.h"
#include "scenarios/scenario.h"
#include "scenarios/schema.h"
#include "scenarios/validation_fit.h"
#include "scenarios/validation_runs.h"
#include "sim/core/process_memory.h"
#include "sim/core/error.h"
#include "sim/core/limits.h"
#include "sim/core/parse.h"
#include "sim/core/version.h"
#include "sim/exec/analytic.h"
#include "sim/exec/program_exec.h"

namespace {

using namespace trainsim;

int print_error(const Error& e) {
  const char* what = e.kind() == ErrorKind::kInfeasible ? "infeasible configuration"
                     : e.kind() == ErrorKind::kRuntime  ? "runtime error"
                                                        : "error";
  std::cerr << "trainsim: " << what << ": " << e.what() << "\n";
  return e.exit_code();
}

using cli::report_folder;
using cli::write_output;

struct RunArgs {
  bool scenario_given = false;  // a SCENARIO argument was given (even an empty one)
  bool force = false;           // go beyond the work limits (docs/reliability.md)
  std::string scenario;
  std::vector<std::string> sets;
  std::string fidelity;
  std::string format = "text";
  std::string output;
  std::string report;
  std::string trace;
  std::string trace_ranks;
  std::vector<std::string> compare;  // --compare KEY=VALUES (repeatable)
};

// "--trace-ranks": `all`, or a list of ranks and ranges (`0,8,16-23`); empty: the first rank of
// every pipeline stage.
std::vector<int> parse_trace_ranks(const std::string& text, const scen::Scenario& s) {
  const int world = s.parallel.world();
  std::vector<int> out;
  if (text.empty()) {
    // The first rank of each stage: stages are pp_stride() ranks apart (parallel.order).
    for (int st = 0; st < s.parallel.pp; ++st) out.push_back(st * s.parallel.pp_stride());
    return out;
  }
  if (text == "all") {
    if (world > 4096) {
      throw_input(fmt::format("a trace of all {} ranks would be too large", world),
                  {"", 0, "--trace-ranks"}, "list ranks, e.g. 0,64,128-135");
    }
    for (int r = 0; r < world; ++r) out.push_back(r);
    return out;
  }
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = text.find(',', pos);
    const std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const std::size_t dash = item.find('-');
    int lo = 0, hi = 0;
    try {
      std::size_t used = 0;
      lo = std::stoi(item, &used);
      if (dash == std::string::npos) {
        if (used != item.size()) throw std::invalid_argument(item);
        hi = lo;
      } else {
        hi = std::stoi(item.substr(dash + 1), &used);
        if (dash + 1 + used != item.size()) throw std::invalid_argument(item);
      }
    } catch (const std::exception&) {
      throw_input("`" + item + "` is not a rank or a range of ranks", {"", 0, "--trace-ranks"},
                  "e.g. 0,8,16-23 or all");
    }
    if (hi < lo) {
      throw_input(fmt::format("`{}` runs backwards", item), {"", 0, "--trace-ranks"},
                  fmt::format("write the lower rank first: {}-{}", hi, lo));
    }
    if (lo < 0 || hi >= world) {
      throw_input(fmt::format("`{}` is outside the job's ranks 0-{}", item, world - 1),
                  {"", 0, "--trace-ranks"});
    }
    for (int r = lo; r <= hi; ++r) out.push_back(r);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

using cli::check_flow_work;
using cli::require_finite_result;

// Progress of an event-driven run on stderr, on a terminal only (never in a pipe, a file or with
// JSON output): the simulated time against the analytic estimate, and a wall-clock ETA. Redrawn at
// most four times a second; the line is cleared at the end.
exec::ProgressFn terminal_progress(const std::string& format, const std::string& fidelity,
                                   const std::string& what) {
  if (format == "json" || (fidelity != "flow" && fidelity != "schedule" && fidelity != "packet") ||
      ::isatty(STDERR_FILENO) != 1) {
    return {};
  }
  struct State {
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    double last_drawn = -1;
  };
  auto st = std::make_shared<State>();
  return [st, what](double sim_s, double estimate_s) {
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - st->start).count();
    if (wall - st->last_drawn < 0.25) return;
    st->last_drawn = wall;
    const double left = sim_s > 0 ? wall * std::max(0.0, estimate_s - sim_s) / sim_s : 0;
    std::cerr << fmt::format("\r{}: simulated {:.2f} of ~{:.2f} s (analytic estimate), {:.0f} s, "
                             "ETA {:.0f} s   ",
                             what, sim_s, estimate_s, wall, left);
    std::cerr.flush();
  };
}

void end_progress(const exec::ProgressFn& p) {
  if (p) std::cerr << "\r\033[K" << std::flush;
}

// A scenario with `jobs:` (scenarios/jobs.h): every job together on the cluster, and alone.
int run_jobs(const RunArgs& a, const scen::Scenario& s) {
  if (!a.trace.empty()) {
    throw_input("a trace is of one job's ranks; this scenario has several jobs", {"", 0, "--trace"},
                "trace one job in a scenario of its own");
  }
  for (const scen::JobSpec& j : s.jobs) check_flow_work(j.scenario, a.force);
  cli::check_fabric_failures(s);
  // The jobs run together: their flows add up on the one fabric.
  scen::Scenario together = s;
  together.cluster.gpus = 0;
  for (const scen::JobSpec& j : s.jobs) together.cluster.gpus += j.scenario.cluster.gpus;
  try {
    check_flow_work(together, a.force);
  } catch (const Error& e) {
    throw Error(e.kind(), "the jobs together: " + e.message(), e.where(), e.hint());
  }
  const exec::ProgressFn progress =
      terminal_progress(a.format, s.fidelity, fmt::format("{} jobs, {} fidelity", s.jobs.size(), s.fidelity));
  const scen::JobsOutcome o = scen::run_scenario_jobs(s, progress);
  end_progress(progress);
  for (const scen::JobOutcome& j : o.jobs) {
    require_finite_result(j.shared);
    require_finite_result(j.alone);
  }
  write_output(a.format == "json" ? reports::jobs_json(o, s).dump(2) + "\n"
                                  : reports::jobs_text(o, s),
               a.output);
  if (!a.report.empty()) reports::write_jobs_report(a.report, o, s);
  return 0;
}

// The trace and the result are two files: a trace on stdout beside the result there, or both
// into one file, would leave neither readable.
void check_trace_target(const RunArgs& a) {
  if (a.trace.empty()) {
    if (!a.trace_ranks.empty()) {
      throw_input("--trace-ranks chooses the ranks of a trace, and no trace is written",
                  {"", 0, "--trace-ranks"}, "add --trace FILE");
    }
    return;
  }
  const auto stdout_path = [](const std::string& p) { return p.empty() || p == "-"; };
  const bool same =
      stdout_path(a.trace) ? stdout_path(a.output)
                           : !stdout_path(a.output) &&
                                 std::filesystem::weakly_canonical(a.trace) ==
                                     std::filesystem::weakly_canonical(a.output);
  if (same) {
    throw_input("the trace and the result would be written to the same place",
                {"", 0, "--trace"}, "give --trace and -o different files");
  }
}

int cmd_run_located(const RunArgs& a);

// --fidelity is applied as `--set simulation.fidelity=...`: an error about the key names the
// flag the user wrote.
int cmd_run(const RunArgs& a) {
  try {
    return cmd_run_located(a);
  } catch (const Error& e) {
    if (!a.fidelity.empty() && e.where().file == "--set" &&
        e.where().field == "simulation.fidelity") {
      throw Error(e.kind(), e.message(), {"--fidelity", 0, "simulation.fidelity"}, e.hint());
    }
    throw;
  }
}

int cmd_run_located(const RunArgs& a) {
  check_trace_target(a);
  std::vector<std::string> sets = a.sets;
  if (!a.fidelity.empty()) sets.push_back("simulation.fidelity=" + a.fidelity);
  if (!a.compare.empty()) {
    if (!a.trace.empty()) {
      throw_input("a trace is of one run; --compare runs several", {"", 0, "--trace"},
                  "trace one variant with --set instead");
    }
    if (a.scenario_given && a.scenario.empty()) {
      throw_input("empty scenario file name", {"run", 0, "SCENARIO"},
                  "omit the argument to run the built-in default scenario");
    }
    return cli::run_compare({a.scenario, sets, a.compare, a.force, a.format, a.output, a.report});
  }
  // An empty SCENARIO argument is a mistake, not a request for the built-in default; the file
  // checks (directory, FIFO, size) are those of every input file.
  if (a.scenario_given && a.scenario.empty()) {
    throw_input("empty scenario file name", {"run", 0, "SCENARIO"},
                "omit the argument to run the built-in default scenario");
  }
  const scen::Scenario s =
      a.scenario.empty()
          ? scen::load_scenario_string(cli::kDefaultScenarioYaml, cli::kDefaultScenarioName, sets)
          : scen::load_scenario_file(a.scenario, sets);
  // The event-driven fidelities walk large structures at random: huge pages for the heap
  // (sim/core/process_memory.h; the same results, less time).
  if (s.fidelity != "analytic") advise_huge_pages_for_heap();
  if (!s.jobs.empty()) return run_jobs(a, s);
  check_flow_work(s, a.force);
  cli::check_fabric_failures(s);
  const exec::RunConfig cfg = scen::make_run_config(s);
  std::vector<int> trace_ranks;
  if (!a.trace.empty()) {
    if (s.fidelity != "schedule" && s.fidelity != "flow" && s.fidelity != "packet") {
      throw_input("a trace needs an event-driven fidelity; the analytic one has no timeline",
                  {"", 0, "--trace"}, "add --fidelity schedule or --fidelity flow");
    }
    trace_ranks = parse_trace_ranks(a.trace_ranks, s);
  }
  const exec::ProgressFn progress =
      terminal_progress(a.format, s.fidelity, fmt::format("{} fidelity", s.fidelity));
  const exec::Result r = scen::run_scenario(s, cfg, {}, trace_ranks, progress);
  end_progress(progress);
  require_finite_result(r);
  if (!a.trace.empty()) {
    reports::TraceMeta meta;
    meta.scenario = s.source;
    meta.fidelity = r.fidelity;
    meta.model_version = r.model_version;
    meta.profile = r.profile_name;
    meta.profile_version = r.profile_version;
    meta.seed = s.seed;
    meta.stage_stride = s.parallel.pp_stride();
    meta.stages = s.parallel.pp;
    write_output(reports::trace_event_json(r.timeline, meta), a.trace);
  }
  write_output(a.format == "json" ? reports::result_json_text(r, s, cfg.profile)
                                  : reports::result_text(r, s, cfg.profile),
               a.output);
  if (!a.report.empty()) reports::write_run_report(a.report, r, s, cfg.profile);
  return 0;
}

// Throws when no row of `rows` (read from `csv`) could be simulated, with each row's reason;
// refuses any non-finite figure (docs/reliability.md: nothing non-finite is printed).
void check_validation(const std::vector<scen::ValidationRow>& rows,
                      const scen::ValidationSummary& summary, const std::string& csv) {
  if (rows.empty()) {
    throw_input("the file has a header but no data rows", {csv, 0, ""},
                "add one row per published run (docs/validation.md)");
  }
  if (summary.simulated == 0) {
    // Each row's reason, in the message itself (no table is printed when nothing ran).
    std::string why;
    std::size_t listed = 0;
    for (const scen::ValidationRow& row : rows) {
      if (row.error_message.empty()) continue;
      if (listed++ == 5) {
        why += fmt::format("; and {} more", rows.size() - 5);
        break;
      }
      why += fmt::format("{}{}: {}", why.empty() ? "" : "; ", row.id, row.error_message);
    }
    throw_infeasible(fmt::format("none of the {} rows could be simulated", summary.rows),
                     {csv, 0, ""}, why);
  }
  const auto check = [](const std::optional<double>& v, const std::string& what) {
    if (v) require_finite(*v, what);
  };
  for (const scen::ValidationRow& row : rows) {
    for (const auto* f : {&row.predicted, &row.published}) {
      const std::string side = f == &row.predicted ? "predicted" : "published";
      check(f->iter_s, row.id + "." + side + ".iter_s");
      check(f->tokens_s, row.id + "." + side + ".tokens_s");
      check(f->mfu, row.id + "." + side + ".mfu");
      check(f->tflops_gpu, row.id + "." + side + ".tflops_gpu");
      check(f->hfu, row.id + "." + side + ".hfu");
    }
    check(row.mfu_err_pts, row.id + ".error.mfu_pts");
    check(row.iter_err_pct, row.id + ".error.iter_pct");
    check(row.tflops_err_pct, row.id + ".error.tflops_pct");
  }
  require_finite(summary.median_abs_mfu_err_pts, "summary.median_abs_mfu_err_pts");
  require_finite(summary.max_abs_mfu_err_pts, "summary.max_abs_mfu_err_pts");
  require_finite(summary.iter_time_mape, "summary.iter_time_mape");
}

// Several runs files: each validated alone, then one line per file and the union's summary
// (the "every table at a glance" of docs/validation.md in one command).
// Writes a validation document, JSON (`as_json()`) or text (`as_text()`), with `--group-by`'s
// groups over `rows` added to it.
template <class AsJson, class AsText>
void write_validation(const std::string& format, const std::string& output,
                      const std::vector<scen::GroupColumn>& by,
                      const std::vector<scen::ValidationRow>& rows, AsJson as_json,
                      AsText as_text) {
  const std::vector<scen::ValidationGroup> groups =
      by.empty() ? std::vector<scen::ValidationGroup>{} : scen::group_rows(rows, by);
  if (format == "json") {
    nlohmann::ordered_json j = as_json();
    if (!by.empty()) j["groups"] = reports::validation_groups_json(by, groups);
    write_output(j.dump(2) + "\n", output);
  } else {
    std::string text = as_text();
    if (!by.empty()) text += reports::validation_groups_text(by, groups);
    write_output(text, output);
  }
}

int cmd_validate_files(const std::vector<std::string>& csvs, const std::string& format,
                       const std::string& output, const std::string& fid,
                       const std::vector<scen::GroupColumn>& by, const std::string& scenarios) {
  std::vector<reports::ValidationFile> files;
  std::vector<scen::ValidationRow> all;
  for (const std::string& csv : csvs) {
    reports::ValidationFile f;
    f.path = csv;
    f.rows = scen::validate_runs(csv, fid);
    f.summary = scen::summarize(f.rows);
    check_validation(f.rows, f.summary, csv);
    if (!scenarios.empty()) reports::write_row_scenarios(scenarios, f.rows, csv);
    all.insert(all.end(), f.rows.begin(), f.rows.end());
    files.push_back(std::move(f));
  }
  const scen::ValidationSummary overall = scen::summarize(all);
  write_validation(
      format, output, by, all, [&] { return reports::validation_files_json(files, overall); },
      [&] { return reports::validation_files_text(files, overall); });
  return 0;
}

int cmd_validate(const std::vector<std::string>& csvs, const std::string& format,
                 const std::string& output, const std::string& report, const std::string& fidelity,
                 const std::string& cross_validate, const std::string& group_by,
                 const std::string& scenarios) {
  const std::string fid = fidelity.empty() ? "analytic" : fidelity;
  if (fid != "analytic") advise_huge_pages_for_heap();
  // Parsed first, so that a typo is reported before any row is simulated.
  const std::vector<scen::GroupColumn> by =
      group_by.empty() ? std::vector<scen::GroupColumn>{} : scen::parse_group_by(group_by);
  if (!cross_validate.empty() && !scenarios.empty()) {
    // Leave-one-source-out refits profile constants per source, which a scenario file cannot
    // carry: its rows would not run as they were simulated.
    throw_input("`--scenarios` writes rows as the plain validation simulates them; "
                "`--cross-validate` refits profile constants per source, which a scenario file "
                "does not hold (run it without --cross-validate)");
  }
  if (csvs.size() > 1) {
    if (!cross_validate.empty() || !report.empty()) {
      throw_input(fmt::format("`{}` takes one runs file; {} were given (run it per file)",
                              cross_validate.empty() ? "--report" : "--cross-validate",
                              csvs.size()));
    }
    return cmd_validate_files(csvs, format, output, fid, by, scenarios);
  }
  const std::string& csv = csvs.front();
  std::vector<scen::ValidationRow> rows;
  std::string cv_note;
  if (cross_validate.empty()) {
    rows = scen::validate_runs(csv, fid);
  } else {
    // Leave-one-source-out: each source's rows predicted with the declared constants refitted
    // on every other source's rows (scenarios/validation_fit.h).
    std::ifstream in(csv);
    if (!in) throw_input("cannot open the runs file", {csv, 0, ""});
    std::stringstream ss;
    ss << in.rdbuf();
    const scen::CrossValidation cv =
        scen::cross_validate_by_source(ss.str(), csv, scen::declared_fit_keys(), fid);
    rows = cv.rows;
    cv_note = "leave-one-source-out: each source predicted with constants refitted without it\n";
    if (cv.fits.size() < 2) {
      cv_note += "  (one source only: nothing is left to refit on, so its rows are predicted with "
                 "the fit's priors)\n";
    }
    for (const auto& [source, fit] : cv.fits) {
      for (const scen::FitParameter& p : fit.parameters) {
        cv_note += p.rows > 0
                       ? fmt::format("  without {:<40} {} = {:.4g} ({} rows constrain it)\n",
                                     source, p.key, p.value, p.rows)
                       : fmt::format("  without {:<40} {} = {:.4g} (the fit's prior: no other row "
                                     "constrains it)\n",
                                     source, p.key, p.value);
      }
    }
  }
  const auto summary = scen::summarize(rows);
  check_validation(rows, summary, csv);
  write_validation(
      format, output, by, rows, [&] { return reports::validation_json(rows, summary); },
      [&] { return cv_note + reports::validation_text(rows, summary); });
  if (!report.empty()) reports::write_validation_report(report, rows, summary, csv);
  if (!scenarios.empty()) reports::write_row_scenarios(scenarios, rows, csv);
  return 0;
}

int cmd_explain(const std::string& key, const std::string& format) {
  if (format == "json" && (key == "jobs" || key.rfind("jobs.", 0) == 0)) {
    // A `jobs:` entry's own keys, as the text form lists them (it also rejects an unknown one).
    scen::explain(key);
    const std::string_view leaf = key == "jobs" ? std::string_view() : std::string_view(key).substr(5);
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const scen::JobEntryKey& k : scen::job_entry_keys()) {
      if (!leaf.empty() && leaf != k.name) continue;
      nlohmann::ordered_json def = nullptr;
      if (*k.default_value) def = k.default_value;
      arr.push_back({{"key", fmt::format("jobs[].{}", k.name)},
                     {"type", k.type},
                     {"default", def},
                     {"description", k.description}});
    }
    std::cout << arr.dump(2) << "\n";
    return 0;
  }
  if (format == "json") {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    std::string_view prefix = key;
    for (const auto& k : scen::schema()) {
      if (!prefix.empty() && k.path != prefix && k.path.rfind(std::string(prefix) + ".", 0) != 0)
        continue;
      // The bounds a value is checked against (null: none), and the other tools' names of the
      // key (suggested, never accepted): what the text form prints, for scripts
      // (scripts/schema-doc.py writes docs/scenario-schema.md from it).
      nlohmann::ordered_json minimum = nullptr;
      nlohmann::ordered_json maximum = nullptr;
      if (k.min_value != std::numeric_limits<double>::lowest()) minimum = k.min_value;
      if (k.max_value != std::numeric_limits<double>::max()) maximum = k.max_value;
      arr.push_back({{"key", k.path},
                     {"type", scen::to_string(k.type)},
                     {"unit", k.unit},
                     {"default", k.default_value},
                     {"choices", k.choices},
                     {"minimum", minimum},
                     {"maximum", maximum},
                     {"exclusive_minimum", k.min_exclusive},
                     {"exclusive_maximum", k.max_exclusive},
                     {"aliases", k.aliases},
                     {"description", k.description}});
    }
    if (arr.empty()) scen::explain(key);  // throws the unknown-key error with its suggestion
    std::cout << arr.dump(2) << "\n";
    return 0;
  }
  std::cout << scen::explain(key);
  return 0;
}

int cmd_info(const std::string& format) {
  const kernels::DeviceReport d = kernels::query_devices();
  if (format == "json") {
    nlohmann::ordered_json j;
    j["trainsim_version"] = kVersion;
    j["analytic_model_version"] = exec::kAnalyticModelVersion;
    j["program_model_version"] = exec::kProgramModelVersion;
    nlohmann::ordered_json profiles = nlohmann::ordered_json::array();
    for (const calib::Profile& p : calib::builtin_profiles()) {
      profiles.push_back({{"name", p.name}, {"gpu", p.gpu}, {"version", p.version}});
    }
    j["builtin_profiles"] = profiles;
    j["cuda_compiled"] = d.cuda_compiled;
    j["cuda_version"] = d.cuda_version;
    j["device_status"] = d.status;
    nlohmann::ordered_json devs = nlohmann::ordered_json::array();
    for (const auto& x : d.devices) {
      devs.push_back({{"index", x.index},
                      {"name", x.name},
                      {"sm", fmt::format("{}.{}", x.sm_major, x.sm_minor)},
                      {"memory_bytes", x.memory_bytes}});
    }
    j["devices"] = devs;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::string profiles;
  for (const calib::Profile& p : calib::builtin_profiles()) {
    profiles += (profiles.empty() ? "" : ", ") + p.name + " v" + p.version;
  }
  std::cout << fmt::format(
      "trainsim {}\nanalytic model {}\nevent-driven model {} (schedule and flow fidelities)\n"
      "built-in profiles: {}\n",
      kVersion, exec::kAnalyticModelVersion, exec::kProgramModelVersion, profiles);
  std::cout << fmt::format("CUDA: {}\n", d.cuda_compiled ? "compiled with CUDA " + d.cuda_version
                                                         : std::string("not compiled"));
  std::cout << fmt::format("devices: {}\n", d.status);
  for (const auto& x : d.devices) {
    std::cout << fmt::format("  [{}] {} (sm_{}{}, {:.1f} GiB, {} SMs)\n", x.index, x.name,
                             x.sm_major, x.sm_minor, x.memory_bytes / (1024.0 * 1024 * 1024),
                             x.multiprocessors);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"trainsim: simulate LLM training on GPU clusters and estimate MFU"};
  app.set_version_flag("--version", std::string("trainsim ") + trainsim::kVersion);
  app.require_subcommand(0, 1);
  bool list_presets = false;
  app.add_flag("--list-presets", list_presets, "List the built-in GPU, cluster and model presets");

  const std::vector<std::string> formats = {"text", "json"};

  RunArgs run_args;
  CLI::App* run = app.add_subcommand("run", "Simulate one training iteration of a scenario");
  CLI::Option* run_scenario_opt =
      run->add_option("scenario", run_args.scenario,
                      "Scenario YAML file (default: the built-in MegaScale 175B on 12,288 GPUs)");
  run->add_flag("--force", run_args.force,
                "Go beyond the work limit of the flow fidelity (GPUs x QPs per connection "
                "65,536; docs/reliability.md)");
  run->add_option("--set", run_args.sets, "Override a scenario key: key.path=value (repeatable)")
      ->type_name("KEY=VALUE");
  run->add_option("--fidelity", run_args.fidelity, "analytic | schedule | flow | packet")
      ->check(CLI::IsMember({"analytic", "schedule", "flow", "packet"}));
  run->add_option("--trace", run_args.trace,
                  "Write a Chrome/Perfetto trace (trace-event JSON) of the iteration to FILE "
                  "(schedule and flow fidelities)")->check(cli::output_file());
  run->add_option("--trace-ranks", run_args.trace_ranks,
                  "Ranks in the trace: all, or a list like 0,8,16-23 (default: the first rank "
                  "of every pipeline stage)");
  run->add_option("--compare", run_args.compare,
                  "Run the scenario once per value of a key and print one comparison table: "
                  "key.path=v1,v2,... (repeatable: every combination; docs/network.md)")
      ->type_name("KEY=VALUES")
      ->allow_extra_args(false);
  run->add_option("--format", run_args.format, "text | json")->check(CLI::IsMember(formats));
  run->add_option("-o,--output", run_args.output, "Write the result to FILE instead of stdout")
      ->check(cli::output_file());
  run->add_option("--report", run_args.report,
                  "Write an HTML report with charts, results.csv and results.json to DIR")
      ->check(report_folder());

  std::string vformat = "text", voutput, vreport, vfidelity, vcross;
  std::vector<std::string> csvs;
  CLI::App* validate =
      app.add_subcommand("validate", "Compare predictions with published training runs (CSV)");
  validate
      ->add_option("runs", csvs,
                   "CSV in the format of scenarios/validation/published-runs.csv; several files: "
                   "each file's table, then one line per file and the summary over all of them")
      ->required();
  validate->add_option("--format", vformat, "text | json")->check(CLI::IsMember(formats));
  validate->add_option("--fidelity", vfidelity, "analytic | schedule | flow (default analytic)")
      ->check(CLI::IsMember({"analytic", "schedule", "flow"}));
  validate->add_option("-o,--output", voutput, "Write the table to FILE instead of stdout")
      ->check(cli::output_file());
  validate
      ->add_option("--cross-validate", vcross,
                   "source: predict each source's rows with the declared fitted constants "
                   "refitted on the other sources (leave-one-source-out)")
      ->check(CLI::IsMember({"source"}));
  validate->add_option("--report", vreport,
                       "Write an HTML report with charts, results.csv and results.json to DIR")
      ->check(report_folder());
  std::string vscenarios;
  validate->add_option("--scenarios", vscenarios,
                       "Write each simulated row's configuration as a scenario file DIR/<id>.yaml "
                       "(trainsim run it to see where its time goes, or change it)")
      ->check(report_folder("--scenarios", "it writes one <id>.yaml per row into it"));
  std::string vgroup;
  validate->add_option("--group-by", vgroup,
                       "COL[:CUT...][,COL...]: after the tables, the MFU error of the rows grouped "
                       "by those columns' cells, a numeric column cut into ranges "
                       "(e.g. gpu,recompute,seq:2048:8192)");

  std::string key, eformat = "text";
  CLI::App* explain = app.add_subcommand("explain", "Describe scenario keys (all, a section, a key)");
  explain->add_option("key", key, "A key (parallel.pp) or a section (parallel)");
  explain->add_option("--format", eformat, "text | json")->check(CLI::IsMember(formats));

  trainsim::cli::SweepArgs sweep_args;
  CLI::App* sweep = trainsim::cli::add_sweep_command(app, sweep_args);

  trainsim::cli::CollectiveArgs collective_args;
  CLI::App* collective = trainsim::cli::add_collective_command(app, collective_args);

  trainsim::cli::TopoArgs topo_args;
  CLI::App* topo = trainsim::cli::add_topo_command(app, topo_args);

  trainsim::cli::CalibrateArgs calibrate_args;
  CLI::App* calibrate = trainsim::cli::add_calibrate_command(app, calibrate_args);
  trainsim::cli::FitRunsArgs fit_runs_args;
  trainsim::cli::add_fit_runs_command(calibrate, fit_runs_args);
  trainsim::cli::FitCcArgs fit_cc_args;
  trainsim::cli::add_fit_cc_command(calibrate, fit_cc_args);
  for (int i = 0; i < argc; ++i) {
    calibrate_args.command_line += (i ? " " : "") + std::string(argv[i]);
  }

  trainsim::cli::ExecuteArgs execute_args;
  CLI::App* execute = trainsim::cli::add_execute_command(app, execute_args);

  trainsim::cli::CompareArgs compare_args;
  CLI::App* compare = trainsim::cli::add_compare_command(app, compare_args);

  trainsim::cli::GoodputArgs goodput_args;
  CLI::App* goodput = trainsim::cli::add_goodput_command(app, goodput_args);

  std::string iformat = "text";
  CLI::App* info = app.add_subcommand("info", "Version, model version, profiles, CUDA and GPUs");
  info->add_option("--format", iformat, "text | json")->check(CLI::IsMember(formats));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }

  run_args.scenario_given = run_scenario_opt->count() > 0;
  // What a command printed must have reached stdout: a full disk or a closed pipe is an error
  // (exit 4), not a silent success.
  const auto flushed = [](int code) {
    std::cout.flush();
    if (!std::cout) {
      throw trainsim::Error(trainsim::ErrorKind::kRuntime, "write failed", {"stdout", 0, ""});
    }
    return code;
  };
  try {
    return flushed([&]() -> int {
    if (list_presets) {
      std::cout << trainsim::scen::list_presets();
      return 0;
    }
    if (*run) return cmd_run(run_args);
    if (*validate) {
      return cmd_validate(csvs, vformat, voutput, vreport, vfidelity, vcross, vgroup, vscenarios);
    }
    if (*sweep) return trainsim::cli::run_sweep_command(sweep_args);
    if (*explain) return cmd_explain(key, eformat);
    if (*info) return cmd_info(iformat);
    if (*collective) {
      collective_args.ranks_given = collective->count("--ranks") > 0;
      return trainsim::cli::run_collective_command(collective_args);
    }
    if (*topo) return trainsim::cli::run_topo_command(topo_args);
    if (*fit_runs_args.cmd) return trainsim::cli::run_fit_runs_command(fit_runs_args);
    if (*fit_cc_args.cmd) return trainsim::cli::run_fit_cc_command(fit_cc_args);
    if (*calibrate) return trainsim::cli::run_calibrate_command(calibrate_args);
    if (*execute) return trainsim::cli::run_execute_command(execute_args);
    if (*compare) return trainsim::cli::run_compare_command(compare_args);
    if (*goodput) return trainsim::cli::run_goodput_command(goodput_args);
    std::cout << app.help();
    return 2;
    }());
  } catch (const trainsim::Error& e) {
    return print_error(e);
  } catch (const std::exception& e) {
    std::cerr << "trainsim: internal error: " << e.what() << "\n";
    return 4;
  }
}
