#include "scenarios/variants.h"

#include <fmt/format.h>

#include <algorithm>

#include "scenarios/run_config.h"
#include "scenarios/sweep.h"
#include "sim/core/error.h"

namespace trainsim::scen {
namespace {

std::string leaf(const std::string& key) {
  const std::size_t dot = key.rfind('.');
  return dot == std::string::npos ? key : key.substr(dot + 1);
}

}  // namespace

VariantPlan plan_variants(const std::vector<std::string>& compare, std::size_t max_variants) {
  VariantPlan plan;
  std::vector<SweepAxis> axes;
  for (const std::string& arg : compare) {
    const SweepAxis axis = parse_vary(arg, "--compare");
    for (const std::string& k : plan.keys) {
      if (k == axis.key) {
        throw_input("is given to --compare twice", {"--compare", 0, axis.key},
                    "merge the two value lists");
      }
    }
    plan.keys.push_back(axis.key);
    axes.push_back(axis);
  }
  if (axes.empty()) throw_input("nothing to compare", {"--compare", 0, ""}, "give KEY=V1,V2");
  std::size_t product = 1;
  for (const SweepAxis& a : axes) {
    product *= a.values.size();
    if (product > max_variants) {
      throw_input(fmt::format("more than {} variants", max_variants), {"--compare", 0, a.key},
                  "compare fewer values at a time, or use `trainsim sweep` for many "
                  "configurations at analytic fidelity");
    }
  }
  std::vector<std::size_t> at(axes.size(), 0);
  for (;;) {
    std::vector<std::pair<std::string, std::string>> config;
    for (std::size_t a = 0; a < axes.size(); ++a) {
      config.emplace_back(axes[a].key, axes[a].values[at[a]]);
    }
    plan.configs.push_back(std::move(config));
    std::size_t a = axes.size();
    while (a > 0 && ++at[a - 1] == axes[a - 1].values.size()) at[--a] = 0;
    if (a == 0) break;
  }
  return plan;
}

std::vector<Variant> run_variants(const VariantPlan& plan, const std::string& path,
                                  const std::string& default_yaml,
                                  const std::string& default_name,
                                  const std::vector<std::string>& sets,
                                  const std::function<void(const Scenario&)>& check,
                                  const std::function<void(std::size_t, std::size_t)>& done) {
  std::vector<Variant> out;
  for (std::size_t i = 0; i < plan.configs.size(); ++i) {
    Variant v;
    v.config = plan.configs[i];
    std::vector<std::string> all = sets;
    for (const auto& [k, value] : v.config) {
      all.push_back(k + "=" + value);
      v.label += (v.label.empty() ? "" : " ") + leaf(k) + "=" + value;
    }
    try {
      v.scenario = path.empty() ? load_scenario_string(default_yaml, default_name, all)
                                : load_scenario_file(path, all);
      if (!v.scenario.jobs.empty()) {
        // Checked as the whole cluster the jobs share: its fabric (a job's own scenario holds
        // only the job's GPUs, whose fabric may be a single switch) and the work of every job
        // together, which bounds each job's.
        if (check) check(v.scenario);
        // The outcome points into v.scenario.jobs, whose elements keep their addresses when the
        // Variant (and so the vector) is moved.
        auto jobs = std::make_shared<JobsOutcome>(run_scenario_jobs(v.scenario));
        v.result = jobs->jobs.front().shared;
        v.result.network = jobs->run.fabric;
        v.profile = jobs->profile;
        v.jobs = std::move(jobs);
      } else {
        if (check) check(v.scenario);
        const exec::RunConfig cfg = make_run_config(v.scenario);
        v.result = run_scenario(v.scenario, cfg);
        v.profile = cfg.profile;
      }
    } catch (const Error& e) {
      // A value this variant set came from --compare, not --set (which its loader was given).
      ErrorContext where = e.where();
      if (where.file == "--set" &&
          std::any_of(v.config.begin(), v.config.end(),
                      [&](const auto& kv) { return kv.first == where.field; })) {
        where.file = "--compare";
      }
      throw Error(e.kind(), "variant " + v.label + ": " + e.message(), where, e.hint());
    }
    out.push_back(std::move(v));
    if (done) done(i + 1, plan.configs.size());
  }
  return out;
}

}  // namespace trainsim::scen
