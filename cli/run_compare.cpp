#include "cli/run_compare.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <iostream>

#include "cli/default_scenario.h"
#include "cli/output.h"
#include "cli/run_checks.h"
#include "reports/compare_report.h"
#include "scenarios/variants.h"
#include "sim/core/error.h"
#include "sim/core/process_memory.h"

namespace trainsim::cli {

int run_compare(const CompareVariantsArgs& a) {
  const scen::VariantPlan plan = scen::plan_variants(a.compare);
  if (!a.report.empty()) {
    const scen::Scenario s =
        a.scenario.empty()
            ? scen::load_scenario_string(kDefaultScenarioYaml, kDefaultScenarioName, a.sets)
            : scen::load_scenario_file(a.scenario, a.sets);
    if (!s.jobs.empty()) {
      throw_input("the HTML comparison draws one job per variant; this scenario has several",
                  {"", 0, "--report"}, "use the table, or --format json for every job's result");
    }
  }
  // Progress on a terminal only: never in a pipe, a file or JSON.
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  const auto start = std::chrono::steady_clock::now();
  const std::vector<scen::Variant> variants = scen::run_variants(
      plan, a.scenario, kDefaultScenarioYaml, kDefaultScenarioName, a.sets,
      [&](const scen::Scenario& s) {
        check_flow_work(s, a.force);
        check_fabric_failures(s);
        if (s.fidelity != "analytic") advise_huge_pages_for_heap();
      },
      [&](std::size_t done, std::size_t total) {
        if (!tty) return;
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::cerr << fmt::format("\rcompare: {}/{} variants, {:.0f} s, ETA {:.0f} s   ", done,
                                 total, s, s / static_cast<double>(done) *
                                               static_cast<double>(total - done));
        if (done == total) std::cerr << "\n";
        std::cerr.flush();
      });
  for (const scen::Variant& v : variants) {
    require_finite_result(v.result);
    if (!v.jobs) continue;
    for (const scen::JobOutcome& j : v.jobs->jobs) {
      require_finite_result(j.shared);
      require_finite_result(j.alone);
    }
  }

  write_output(a.format == "json" ? reports::compare_json(variants, plan.keys).dump(2) + "\n"
                                  : reports::compare_text(variants, plan.keys),
               a.output);
  if (!a.report.empty()) reports::write_compare_report(a.report, variants, plan.keys);
  return 0;
}

}  // namespace trainsim::cli
