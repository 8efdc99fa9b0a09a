#include "reports/compare_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>

#include "reports/html_report.h"
#include "reports/jobs_report.h"
#include "reports/summary.h"
#include "reports/svg.h"
#include "reports/sweep_report.h"
#include "sim/core/units.h"
#include "sim/core/version.h"

namespace trainsim::reports {
namespace {

using scen::Variant;

double exposed(const exec::Breakdown& b) {
  return b.exposed_tp_s + b.exposed_cp_s + b.exposed_ep_s + b.exposed_pp_s + b.exposed_dp_s;
}

// Every link class any variant used, in the order of first appearance (the same order as
// topo::link_class_loads: GPU side first, then tier by tier).
std::vector<std::string> used_classes(const std::vector<Variant>& vs) {
  std::vector<std::string> out;
  for (const Variant& v : vs) {
    for (const auto& c : v.result.network.link_classes) {
      if (c.used > 0 && std::find(out.begin(), out.end(), c.name) == out.end()) {
        out.push_back(c.name);
      }
    }
  }
  return out;
}

const exec::NetworkStats::LinkClass* find_class(const Variant& v, const std::string& name) {
  for (const auto& c : v.result.network.link_classes) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

std::string aligned(const std::vector<std::vector<std::string>>& rows, std::size_t left_cols) {
  return aligned_columns(rows, left_cols);
}

// The busiest / mean utilisation of every used link class, one row per variant.
std::string link_class_table(const std::vector<Variant>& vs,
                             const std::vector<std::string>& classes) {
  std::vector<std::vector<std::string>> t = {{"variant"}};
  for (const std::string& name : classes) t[0].push_back(name);
  for (const Variant& v : vs) {
    std::vector<std::string> row = {v.label};
    for (const std::string& name : classes) {
      const auto* c = find_class(v, name);
      row.push_back(c == nullptr || c->used == 0
                        ? std::string("–")
                        : fmt::format("{:.1f}/{:.1f}", 100 * c->max_utilization,
                                      100 * c->mean_utilization));
    }
    t.push_back(std::move(row));
  }
  return aligned(t, 1);
}

std::string header(const std::vector<Variant>& vs, const std::vector<std::string>& keys) {
  const exec::Result& r = vs.front().result;
  // The seed as a single run's header names it; when the variants vary it, each one's.
  std::vector<std::uint64_t> seeds;
  for (const Variant& v : vs) {
    if (std::find(seeds.begin(), seeds.end(), v.scenario.seed) == seeds.end()) {
      seeds.push_back(v.scenario.seed);
    }
  }
  // Likewise the calibration: a variant of another GPU runs on its own profile (it named the
  // first variant's for all of them).
  std::vector<std::string> profiles;
  for (const Variant& v : vs) {
    const std::string p =
        fmt::format("{} v{}", v.result.profile_name, v.result.profile_version);
    if (std::find(profiles.begin(), profiles.end(), p) == profiles.end()) profiles.push_back(p);
  }
  std::string s = fmt::format(
      "trainsim {} run --compare · {} fidelity, model {} · calibration {} · {} {}\n", kVersion,
      r.fidelity, r.model_version, fmt::join(profiles, ", "),
      seeds.size() == 1 ? "seed" : "seeds", fmt::join(seeds, ", "));
  s += fmt::format("scenario  {}\n", vs.front().scenario.source);
  std::vector<std::string> parts;
  for (const std::string& k : keys) parts.push_back(k);
  s += fmt::format("variants  {}: {}\n", vs.size(), fmt::join(parts, " × "));
  return s;
}

// Several jobs per variant: one row per (variant, job), then the shared links per variant.
std::string jobs_table(const std::vector<Variant>& vs) {
  std::vector<std::vector<std::string>> rows = {jobs_header({"variant"})};
  for (const Variant& v : vs) {
    for (auto& row : jobs_rows(*v.jobs, {v.label})) rows.push_back(std::move(row));
  }
  std::string s = aligned(rows, 5);
  if (vs.front().jobs->run.fidelity == "flow" || vs.front().jobs->run.fidelity == "packet") {
    s += "\nlinks that carried more than one job's traffic during the run (at the same time or "
         "not)\n";
    std::vector<std::vector<std::string>> t = {
        {"variant", "makespan s", "shared links", "bytes on them", "ECMP max/mean"}};
    for (const Variant& v : vs) {
      const exec::NetworkStats& n = v.jobs->run.fabric;
      t.push_back({v.label, fmt::format("{:.3f}", v.jobs->run.makespan_s),
                   fmt::format("{}", n.links_shared_by_jobs),
                   fmt::format("{:.1f} %", 100 * n.shared_link_bytes_fraction),
                   n.has_ecmp ? fmt::format("{:.2f}", n.ecmp_imbalance) : std::string("–")});
    }
    s += aligned(t, 1);
  }
  return s;
}

}  // namespace

std::string compare_text(const std::vector<Variant>& vs, const std::vector<std::string>& keys) {
  std::string s = header(vs, keys) + "\n";
  const exec::Result& first = vs.front().result;
  if (vs.front().jobs) {
    s += jobs_table(vs);
    const std::vector<std::string> classes = used_classes(vs);
    if (!classes.empty()) {
      s += "\nfabric load by class over the makespan, % of capacity: busiest link / mean of the "
           "class\n";
      s += link_class_table(vs, classes);
    }
    return s;
  }
  std::vector<std::vector<std::string>> rows = {
      {"variant", "iter s", "MFU", "vs first", "tokens/s", "exposed s: tp", "cp", "ep", "pp", "dp",
       "bubble", "ECMP max/mean"}};
  for (const Variant& v : vs) {
    const exec::Result& r = v.result;
    const exec::Breakdown& b = r.breakdown;
    rows.push_back({v.label, fmt::format("{:.3f}", r.iteration_time_s),
                    fmt::format("{:.1f} %", 100 * r.mfu),
                    &v == &vs.front() ? std::string("–")
                                      : fmt::format("{:+.1f} pts", 100 * (r.mfu - first.mfu)),
                    human(r.tokens_per_s), fmt::format("{:.3f}", b.exposed_tp_s),
                    fmt::format("{:.3f}", b.exposed_cp_s), fmt::format("{:.3f}", b.exposed_ep_s),
                    fmt::format("{:.3f}", b.exposed_pp_s), fmt::format("{:.3f}", b.exposed_dp_s),
                    fmt::format("{:.3f}", b.pipeline_bubble_s),
                    r.network.has_ecmp ? fmt::format("{:.2f}", r.network.ecmp_imbalance)
                                       : std::string("–")});
  }
  s += aligned(rows, 1);

  const std::vector<std::string> classes = used_classes(vs);
  if (!classes.empty()) {
    s += "\nlink utilisation by class over the iteration, % of capacity: busiest link / mean of "
         "the class\n";
    s += link_class_table(vs, classes);
  } else {
    s += "\nlink utilisation (GPU-attached links only at this fidelity; --fidelity flow for every "
         "tier):\n";
    std::vector<std::vector<std::string>> t = {{"variant", "NVLink", "NIC", "NIC GB/GPU"}};
    for (const Variant& v : vs) {
      const exec::NetworkStats& n = v.result.network;
      t.push_back({v.label, fmt::format("{:.1f} %", 100 * n.nvlink_utilization),
                   fmt::format("{:.1f} %", 100 * n.nic_utilization),
                   fmt::format("{:.2f}", n.nic_bytes_per_gpu / kGB)});
    }
    s += aligned(t, 1);
  }
  return s;
}

nlohmann::ordered_json compare_json(const std::vector<Variant>& vs,
                                    const std::vector<std::string>& keys) {
  nlohmann::ordered_json j;
  j["trainsim_version"] = kVersion;
  j["fidelity"] = vs.front().result.fidelity;
  j["scenario"] = vs.front().scenario.source;
  j["keys"] = keys;
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const Variant& v : vs) {
    nlohmann::ordered_json config = nlohmann::ordered_json::object();
    for (const auto& [k, value] : v.config) config[k] = value;
    if (v.jobs) {
      arr.push_back({{"label", v.label}, {"config", config}, {"jobs", jobs_json(*v.jobs, v.scenario)}});
      continue;
    }
    arr.push_back({{"label", v.label},
                   {"config", config},
                   {"result", result_json(v.result, v.scenario, v.profile)}});
  }
  j["variants"] = arr;
  return j;
}

void write_compare_report(const std::string& dir, const std::vector<Variant>& vs,
                          const std::vector<std::string>& keys) {
  const exec::Result& first = vs.front().result;
  std::vector<std::pair<std::string, std::string>> items = {
      {"variants", fmt::format("{}", vs.size())}, {"fidelity", first.fidelity}};
  const auto best = std::max_element(vs.begin(), vs.end(), [](const Variant& a, const Variant& b) {
    return a.result.mfu < b.result.mfu;
  });
  items.push_back({"best MFU", fmt::format("{:.1f} % ({})", 100 * best->result.mfu, best->label)});
  std::string body = html::section(
      "summary", "Summary",
      html::cards(items) + html::table("compare-table",
                                       {"variant", "#iteration s", "#MFU", "#vs first (points)",
                                        "#tokens/s", "#exposed comm s", "#bubble s", "#ECMP max/mean"},
                                       [&] {
                                         std::vector<std::vector<std::string>> rows;
                                         for (const Variant& v : vs) {
                                           const exec::Result& r = v.result;
                                           rows.push_back(
                                               {v.label, fmt::format("{:.3f}", r.iteration_time_s),
                                                fmt::format("{:.1f} %", 100 * r.mfu),
                                                fmt::format("{:+.1f}", 100 * (r.mfu - first.mfu)),
                                                human(r.tokens_per_s),
                                                fmt::format("{:.3f}", exposed(r.breakdown)),
                                                fmt::format("{:.3f}", r.breakdown.pipeline_bubble_s),
                                                r.network.has_ecmp
                                                    ? fmt::format("{:.2f}", r.network.ecmp_imbalance)
                                                    : std::string("–")});
                                         }
                                         return rows;
                                       }()));

  svg::Bars mfu;
  mfu.id = "compare-mfu";
  mfu.title = "MFU per variant";
  mfu.unit = "%";
  for (const Variant& v : vs) {
    mfu.bars.push_back({v.label, 100 * v.result.mfu,
                        fmt::format("{:.1f} % · {:.3f} s per iteration", 100 * v.result.mfu,
                                    v.result.iteration_time_s),
                        &v == &vs.front(), false, ""});
  }
  svg::StackedBars bd = html::breakdown_chart("compare-breakdown", "Where the iteration goes");
  for (const Variant& v : vs) {
    bd.bars.push_back({v.label, html::breakdown_values(v.result.breakdown), &v == &vs.front()});
  }
  body += html::section("variants", "Variants side by side",
                        html::figure(svg::bars(mfu), "The outlined bar is the first variant.") +
                            html::figure(svg::stacked_bars(bd),
                                         "Critical-path seconds per iteration."));

  const std::vector<std::string> classes = used_classes(vs);
  svg::Bars links;
  links.id = "compare-links";
  links.unit = "% busy";
  links.max_value = 100;
  if (!classes.empty()) {
    links.title = "Busiest link of each class, per variant";
    for (const std::string& name : classes) {
      for (const Variant& v : vs) {
        const auto* c = find_class(v, name);
        if (c == nullptr) continue;
        links.bars.push_back({name + " · " + v.label, 100 * c->max_utilization,
                              fmt::format("busiest {:.1f} % · mean {:.1f} % · {} of {} links used",
                                          100 * c->max_utilization, 100 * c->mean_utilization,
                                          c->used, c->links),
                              false, false, ""});
      }
    }
  } else {
    links.title = "GPU-attached links per variant (switch tiers need flow fidelity)";
    for (const Variant& v : vs) {
      links.bars.push_back({"NVLink · " + v.label, 100 * v.result.network.nvlink_utilization, "",
                            false, false, ""});
      links.bars.push_back({"NIC · " + v.label, 100 * v.result.network.nic_utilization, "", false,
                            false, ""});
    }
  }
  body += html::section("links", "Link load",
                        html::figure(svg::bars(links),
                                     "Bytes carried over capacity times the iteration time."));

  std::string csv =
      "variant,iteration_time_s,mfu,tokens_per_s,exposed_tp_s,exposed_cp_s,exposed_ep_s,"
      "exposed_pp_s,exposed_dp_s,pipeline_bubble_s,ecmp_imbalance\n";
  for (const Variant& v : vs) {
    const exec::Result& r = v.result;
    const exec::Breakdown& b = r.breakdown;
    std::string label;
    for (const char ch : v.label) label += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    csv += fmt::format("\"{}\",{},{},{},{},{},{},{},{},{},{}\n", label, r.iteration_time_s,
                       r.mfu, r.tokens_per_s, b.exposed_tp_s, b.exposed_cp_s, b.exposed_ep_s,
                       b.exposed_pp_s, b.exposed_dp_s, b.pipeline_bubble_s,
                       r.network.has_ecmp ? fmt::format("{}", r.network.ecmp_imbalance)
                                          : std::string());
  }
  html::write_files(
      dir, {{"index.html",
             html::page("compare", "trainsim run --compare · " + vs.front().scenario.source,
                        html::meta_line(first.fidelity, first.model_version,
                                        first.profile_name + " v" + first.profile_version),
                        body)},
            {"results.json", compare_json(vs, keys).dump(2) + "\n"},
            {"results.csv", csv}});
}

}  // namespace trainsim::reports
