#include "reports/jobs_report.h"

#include <fmt/format.h>

#include <algorithm>

#include "reports/html_report.h"
#include "reports/summary.h"
#include "reports/svg.h"
#include "sim/core/version.h"

namespace trainsim::reports {
namespace {

// Flow and packet fidelity put every job's flows on one fabric; the others share no network state.
bool on_one_fabric(const std::string& fidelity) {
  return fidelity == "flow" || fidelity == "packet";
}

nlohmann::ordered_json fabric_json(const exec::JobsResult& run) {
  nlohmann::ordered_json f;
  f["makespan_s"] = run.makespan_s;
  if (!on_one_fabric(run.fidelity)) return f;
  const exec::NetworkStats& n = run.fabric;
  f["max_link_utilization"] = n.max_link_utilization;
  f["mean_link_utilization"] = n.mean_link_utilization;
  f["ecmp_imbalance"] = n.has_ecmp ? nlohmann::ordered_json(n.ecmp_imbalance) : nullptr;
  f["links_shared_by_jobs"] = n.links_shared_by_jobs;
  f["shared_link_bytes_fraction"] = n.shared_link_bytes_fraction;
  f["link_classes"] = link_classes_json(n);
  if (n.has_packets) f["packets"] = packets_json(n);
  f["flows"] = run.exec.flows;
  f["solves"] = run.exec.solves;
  return f;
}

}  // namespace

std::string server_ranges(const std::vector<int>& hosts, std::size_t max_runs) {
  std::vector<std::string> runs;
  std::size_t total = 0;
  for (std::size_t i = 0; i < hosts.size();) {
    std::size_t j = i;
    while (j + 1 < hosts.size() && hosts[j + 1] == hosts[j] + 1) ++j;
    ++total;
    if (runs.size() < max_runs) {
      runs.push_back(i == j ? fmt::format("{}", hosts[i])
                            : fmt::format("{}-{}", hosts[i], hosts[j]));
    }
    i = j + 1;
  }
  std::string s = fmt::format("{}", fmt::join(runs, ","));
  if (total > runs.size()) s += fmt::format(",… ({} runs)", total);
  return s;
}

std::vector<std::string> jobs_header(const std::vector<std::string>& prefix) {
  std::vector<std::string> h = prefix;
  for (const char* c : {"job", "GPUs", "placement", "servers", "start s", "iters", "iter s", "alone s",
                        "slowdown", "MFU", "exposed s: dp", "pp", "tp"}) {
    h.push_back(c);
  }
  return h;
}

std::vector<std::vector<std::string>> jobs_rows(const scen::JobsOutcome& o,
                                                const std::vector<std::string>& prefix) {
  std::vector<std::vector<std::string>> rows;
  for (const scen::JobOutcome& j : o.jobs) {
    const exec::Breakdown& b = j.shared.breakdown;
    std::vector<std::string> row = prefix;
    for (std::string cell :
         {j.spec->name, fmt::format("{}", j.spec->scenario.cluster.gpus), j.spec->placement,
          server_ranges(j.hosts, 3), fmt::format("{:g}", j.spec->start_s),
          fmt::format("{}", j.spec->iterations),
          fmt::format("{:.3f}", j.shared.iteration_time_s),
          fmt::format("{:.3f}", j.alone.iteration_time_s), fmt::format("{:.3f}×", j.slowdown),
          fmt::format("{:.1f} %", 100 * j.shared.mfu), fmt::format("{:.3f}", b.exposed_dp_s),
          fmt::format("{:.3f}", b.exposed_pp_s), fmt::format("{:.3f}", b.exposed_tp_s)}) {
      row.push_back(std::move(cell));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

// The scenario's own notes (the cluster's: its fabric as built, failed parts, a described GPU),
// which no job's result carries since each job's scenario holds only the job's GPUs.
static std::string cluster_notes_text(const scen::Scenario& s) {
  if (s.notes.empty()) return "";
  std::string t = "\nnotes\n";
  for (const std::string& note : s.notes) t += "  - " + note + "\n";
  return t;
}

std::string jobs_text(const scen::JobsOutcome& o, const scen::Scenario& s) {
  const exec::Result& r = o.jobs.front().shared;
  std::string t = fmt::format("trainsim {} · {} fidelity, model {} · calibration {} v{} · seed {}\n",
                              kVersion, o.run.fidelity, r.model_version, r.profile_name,
                              r.profile_version, s.seed);
  t += fmt::format("scenario  {}\n", s.source);
  t += fmt::format("profile   {} for {}: {}\n", o.profile.name, o.profile.gpu,
                   o.profile.provenance);
  int used = 0;
  for (const scen::JobOutcome& j : o.jobs) used += j.spec->scenario.cluster.gpus;
  t += fmt::format("cluster   {}: {} × {} in {} servers; {} jobs on {} of them, makespan {:.3f} s\n",
                   s.cluster.name, s.cluster.gpus, s.cluster.gpu.name, s.cluster.nodes(),
                   o.jobs.size(), used, o.run.makespan_s);
  t += "\n";
  std::vector<std::vector<std::string>> rows = {jobs_header({})};
  for (auto& row : jobs_rows(o, {})) rows.push_back(std::move(row));
  t += aligned_columns(rows, 4);
  if (!on_one_fabric(o.run.fidelity)) {
    t += fmt::format("\n{} fidelity: the jobs do not share network state (slowdown 1); "
                     "--fidelity flow puts their flows on one fabric\n",
                     o.run.fidelity);
    return t + cluster_notes_text(s);
  }
  const exec::NetworkStats& n = o.run.fabric;
  t += "\nfabric, all jobs over the makespan, % of capacity: busiest link / mean of the class\n";
  std::vector<std::vector<std::string>> f = {{"link class", "links", "used", "busiest", "mean"}};
  for (const auto& c : n.link_classes) {
    if (c.used == 0) continue;
    f.push_back({c.name, fmt::format("{}", c.links), fmt::format("{}", c.used),
                 fmt::format("{:.1f} %", 100 * c.max_utilization),
                 fmt::format("{:.1f} %", 100 * c.mean_utilization)});
  }
  t += aligned_columns(f, 1);
  t += fmt::format("ECMP      max/mean load over uplinks {}\n",
                   n.has_ecmp ? fmt::format("{:.2f}", n.ecmp_imbalance) : std::string("–"));
  t += fmt::format("shared    {} switch and NIC links carried more than one job's traffic "
                   "during the run, at the same time or not ({:.1f} % of the bytes on such "
                   "links)\n",
                   n.links_shared_by_jobs, 100 * n.shared_link_bytes_fraction);
  if (n.has_packets) t += "packets   " + packets_line(n) + "\n";
  if (o.run.fidelity == "packet") {
    t += fmt::format("flows     {} started, carried packet by packet\n", o.run.exec.flows);
  } else {
    t += fmt::format("flows     {} started, {} solver calls\n", o.run.exec.flows, o.run.exec.solves);
  }
  return t + cluster_notes_text(s);
}

nlohmann::ordered_json jobs_json(const scen::JobsOutcome& o, const scen::Scenario& s) {
  nlohmann::ordered_json j;
  j["trainsim_version"] = kVersion;
  j["scenario"] = s.source;
  j["fidelity"] = o.run.fidelity;
  j["seed"] = s.seed;
  j["cluster"] = {{"name", s.cluster.name}, {"gpus", s.cluster.gpus}, {"servers", s.cluster.nodes()}};
  nlohmann::ordered_json jobs = nlohmann::ordered_json::array();
  for (const scen::JobOutcome& jo : o.jobs) {
    jobs.push_back({{"name", jo.spec->name},
                    {"gpus", jo.spec->scenario.cluster.gpus},
                    {"placement", jo.spec->placement},
                    {"servers", jo.hosts},
                    {"start_s", jo.spec->start_s},
                    {"iterations", jo.spec->iterations},
                    {"iteration_time_s", jo.shared.iteration_time_s},
                    {"alone_iteration_time_s", jo.alone.iteration_time_s},
                    {"slowdown", jo.slowdown},
                    {"alone",
                     {{"iteration_time_s", jo.alone.iteration_time_s},
                      {"mfu", jo.alone.mfu},
                      {"breakdown",
                       result_json(jo.alone, jo.spec->scenario, o.profile)["breakdown"]}}},
                    {"result", result_json(jo.shared, jo.spec->scenario, o.profile)}});
  }
  j["jobs"] = jobs;
  j["fabric"] = fabric_json(o.run);
  j["notes"] = s.notes;
  return j;
}

void write_jobs_report(const std::string& dir, const scen::JobsOutcome& o,
                       const scen::Scenario& s) {
  const exec::Result& first = o.jobs.front().shared;
  const auto worst = std::max_element(
      o.jobs.begin(), o.jobs.end(),
      [](const scen::JobOutcome& a, const scen::JobOutcome& b) { return a.slowdown < b.slowdown; });
  std::vector<std::pair<std::string, std::string>> items = {
      {"jobs", fmt::format("{}", o.jobs.size())},
      {"fidelity", o.run.fidelity},
      {"makespan", fmt::format("{:.3f} s", o.run.makespan_s)},
      {"largest slowdown", fmt::format("{:.3f}× ({})", worst->slowdown, worst->spec->name)}};
  if (on_one_fabric(o.run.fidelity)) {
    items.push_back({"links shared by jobs", fmt::format("{}", o.run.fabric.links_shared_by_jobs)});
  }
  std::vector<std::string> head;
  for (const std::string& h : jobs_header({})) {
    head.push_back(h == "job" || h == "placement" || h == "servers" ? h : "#" + h);
  }
  std::string body = html::section(
      "summary", "Summary", html::cards(items) + html::table("jobs-table", head, jobs_rows(o, {})));

  svg::Bars slow;
  slow.id = "jobs-slowdown";
  slow.title = "Iteration together against alone, per job";
  slow.unit = "s";
  for (const scen::JobOutcome& j : o.jobs) {
    slow.bars.push_back({j.spec->name + " · alone", j.alone.iteration_time_s,
                         fmt::format("{:.3f} s", j.alone.iteration_time_s), false, false, ""});
    slow.bars.push_back({j.spec->name + " · together", j.shared.iteration_time_s,
                         fmt::format("{:.3f} s · {:.3f}×", j.shared.iteration_time_s, j.slowdown),
                         j.slowdown > 1.0, false, ""});
  }
  svg::StackedBars bd =
      html::breakdown_chart("jobs-breakdown", "Where each job's iteration goes (together)");
  for (const scen::JobOutcome& j : o.jobs) {
    bd.bars.push_back({j.spec->name, html::breakdown_values(j.shared.breakdown), false});
  }
  body += html::section("jobs", "Jobs together and alone",
                        html::figure(svg::bars(slow), "Highlighted: a job the others slowed.") +
                            html::figure(svg::stacked_bars(bd),
                                         "Critical-path seconds per iteration."));

  svg::Bars links;
  links.id = "jobs-links";
  links.unit = "% busy";
  links.max_value = 100;
  links.title = "Busiest and mean link of each class, all jobs over the makespan";
  for (const auto& c : o.run.fabric.link_classes) {
    if (c.used == 0) continue;
    links.bars.push_back({c.name + " · busiest", 100 * c.max_utilization,
                          fmt::format("{:.1f} %", 100 * c.max_utilization), false, false, ""});
    links.bars.push_back({c.name + " · mean", 100 * c.mean_utilization,
                          fmt::format("{:.1f} % · {} of {} links used", 100 * c.mean_utilization,
                                      c.used, c.links),
                          false, false, ""});
  }
  body += html::section(
      "links", "Fabric",
      links.bars.empty()
          ? std::string("<p>No shared network state at ") + o.run.fidelity +
                " fidelity: the jobs do not meet; run with --fidelity flow.</p>"
          : html::figure(svg::bars(links),
                         fmt::format("Bytes carried over capacity times the makespan. {} switch "
                                     "and NIC links carried more than one job's traffic during "
                                     "the run, at the same time or not ({:.1f} % of the bytes on "
                                     "such links); ECMP max/mean {}.",
                                     o.run.fabric.links_shared_by_jobs,
                                     100 * o.run.fabric.shared_link_bytes_fraction,
                                     o.run.fabric.has_ecmp
                                         ? fmt::format("{:.2f}", o.run.fabric.ecmp_imbalance)
                                         : std::string("–"))));

  std::string csv =
      "job,gpus,placement,start_s,iterations,iteration_time_s,alone_iteration_time_s,slowdown,mfu,"
      "exposed_dp_s,exposed_pp_s,exposed_tp_s\n";
  for (const scen::JobOutcome& j : o.jobs) {
    std::string name;
    for (const char ch : j.spec->name) name += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    const exec::Breakdown& b = j.shared.breakdown;
    csv += fmt::format("\"{}\",{},{},{},{},{},{},{},{},{},{},{}\n", name,
                       j.spec->scenario.cluster.gpus, j.spec->placement, j.spec->start_s,
                       j.spec->iterations, j.shared.iteration_time_s, j.alone.iteration_time_s,
                       j.slowdown, j.shared.mfu, b.exposed_dp_s, b.exposed_pp_s, b.exposed_tp_s);
  }
  html::write_files(
      dir, {{"index.html",
             html::page("jobs", fmt::format("trainsim run · {} jobs · {}", o.jobs.size(), s.source),
                        html::meta_line(o.run.fidelity, first.model_version,
                                        first.profile_name + " v" + first.profile_version),
                        body)},
            {"results.json", jobs_json(o, s).dump(2) + "\n"},
            {"results.csv", csv}});
}

}  // namespace trainsim::reports
