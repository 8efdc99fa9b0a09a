#include "reports/jobs_report.h"

#include <fmt/format.h>

#include <algorithm>

#include "reports/summary.h"
#include "sim/core/version.h"

namespace trainsim::reports {
namespace {

std::string aligned_rows(const std::vector<std::vector<std::string>>& rows,
                         std::size_t left_cols) {
  std::vector<std::size_t> width(rows.front().size(), 0);
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string s;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      line += c < left_cols ? fmt::format("{:<{}}  ", row[c], width[c])
                            : fmt::format("{:>{}}  ", row[c], width[c]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    s += line + "\n";
  }
  return s;
}

nlohmann::ordered_json fabric_json(const exec::JobsResult& run) {
  nlohmann::ordered_json f;
  f["makespan_s"] = run.makespan_s;
  if (run.fidelity != "flow") return f;
  const exec::NetworkStats& n = run.fabric;
  f["max_link_utilization"] = n.max_link_utilization;
  f["mean_link_utilization"] = n.mean_link_utilization;
  f["ecmp_imbalance"] = n.has_ecmp ? nlohmann::ordered_json(n.ecmp_imbalance) : nullptr;
  f["links_shared_by_jobs"] = n.links_shared_by_jobs;
  f["shared_link_bytes_fraction"] = n.shared_link_bytes_fraction;
  nlohmann::ordered_json classes = nlohmann::ordered_json::array();
  for (const auto& c : n.link_classes) {
    classes.push_back({{"class", c.name},
                       {"links", c.links},
                       {"used", c.used},
                       {"max_utilization", c.max_utilization},
                       {"mean_utilization", c.mean_utilization}});
  }
  f["link_classes"] = classes;
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

std::string jobs_text(const scen::JobsOutcome& o, const scen::Scenario& s) {
  const exec::Result& r = o.jobs.front().shared;
  std::string t = fmt::format("trainsim {} · {} fidelity, model {} · calibration {} v{}\n",
                              kVersion, o.run.fidelity, r.model_version, r.profile_name,
                              r.profile_version);
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
  t += aligned_rows(rows, 4);
  if (o.run.fidelity != "flow") {
    t += fmt::format("\n{} fidelity: the jobs do not share network state (slowdown 1); "
                     "--fidelity flow puts their flows on one fabric\n",
                     o.run.fidelity);
    return t;
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
  t += aligned_rows(f, 1);
  t += fmt::format("ECMP      max/mean load over uplinks {}\n",
                   n.has_ecmp ? fmt::format("{:.2f}", n.ecmp_imbalance) : std::string("–"));
  t += fmt::format("shared    {} switch and NIC links carried more than one job's traffic "
                   "({:.1f} % of the bytes on such links)\n",
                   n.links_shared_by_jobs, 100 * n.shared_link_bytes_fraction);
  t += fmt::format("flows     {} started, {} solver calls\n", o.run.exec.flows, o.run.exec.solves);
  return t;
}

nlohmann::ordered_json jobs_json(const scen::JobsOutcome& o, const scen::Scenario& s) {
  nlohmann::ordered_json j;
  j["trainsim_version"] = kVersion;
  j["scenario"] = s.source;
  j["fidelity"] = o.run.fidelity;
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
  return j;
}

}  // namespace trainsim::reports
