// HTML reports of `run`, `sweep` and `validate` (`--report DIR`): DIR/index.html with charts,
// DIR/results.json and DIR/results.csv.
//
// index.html is self-contained: styles and charts (inline SVG from reports/svg.h) are in the file,
// it loads nothing and runs no script, and its Content-Security-Policy forbids any fetch, so it
// opens offline, from a mail attachment or a CI artifact alike. It holds no timestamp: the same
// inputs give the same bytes. The pipeline timeline is the schedule the analytic fidelity
// assumes (reports/pipeline_schedule.h), labelled as such; link utilisation shows the tiers the
// fidelity models and marks the others as not modelled.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "calibrate/profile.h"
#include "scenarios/scenario.h"
#include "scenarios/sweep.h"
#include "scenarios/validation_runs.h"
#include "reports/svg.h"
#include "sim/exec/result.h"

namespace trainsim::reports {

/// One evaluated configuration in full, for the per-configuration charts of a sweep report.
struct PointDetail {
  std::size_t point = 0;
  scen::Scenario scenario;
  exec::Result result;
  calib::Profile profile;
};

std::string run_report_html(const exec::Result& r, const scen::Scenario& s,
                            const calib::Profile& profile);

/// `best` is the top-ranked point, `base` the scenario's own configuration (when feasible).
std::string sweep_report_html(const scen::SweepOutcome& o, const std::optional<PointDetail>& best,
                              const std::optional<PointDetail>& base);

/// `source` names the CSV the rows came from.
std::string validation_report_html(const std::vector<scen::ValidationRow>& rows,
                                   const scen::ValidationSummary& summary,
                                   const std::string& source);

/// Write index.html, results.json and results.csv into `dir` (created if missing). Throw
/// trainsim::Error(kRuntime) naming the file when it cannot be written.
void write_run_report(const std::string& dir, const exec::Result& r, const scen::Scenario& s,
                      const calib::Profile& profile);
void write_sweep_report(const std::string& dir, const scen::SweepOutcome& o,
                        const std::optional<PointDetail>& best,
                        const std::optional<PointDetail>& base);
void write_validation_report(const std::string& dir, const std::vector<scen::ValidationRow>& rows,
                             const scen::ValidationSummary& summary, const std::string& source);

/// The page shell and parts of every report, for reports written in other files
/// (reports/goodput_report.cpp): the same styles, policy and footer.
namespace html {
std::string page(const std::string& kind, const std::string& title, const std::string& meta,
                 const std::string& body);
std::string section(const std::string& id, const std::string& heading, const std::string& body);
std::string figure(const std::string& chart, const std::string& caption);
std::string cards(const std::vector<std::pair<std::string, std::string>>& items);
std::string table(const std::string& id, const std::vector<std::string>& head,
                  const std::vector<std::vector<std::string>>& rows);
std::string meta_line(const std::string& fidelity, const std::string& model_version,
                      const std::string& calibration);
/// The stacked chart of iteration breakdowns every report draws (compute, exposed communication
/// per dimension, bubble, optimizer, data loading, costs of scale), with no bars yet; a bar's
/// values are breakdown_values(b), in the same order.
svg::StackedBars breakdown_chart(const std::string& id, const std::string& title);
std::vector<double> breakdown_values(const exec::Breakdown& b);
/// Writes a report's files: `dir` is created if missing; each (name, text) pair becomes
/// dir/name. Throws Error(kRuntime) naming the folder or file that cannot be written.
void write_files(const std::string& dir,
                 const std::vector<std::pair<std::string, std::string>>& files);
}  // namespace html

}  // namespace trainsim::reports
