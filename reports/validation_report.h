// Output of `trainsim validate`: the per-row table of predicted vs published figures and the
// summary statistics, as text or as the JSON document of DESIGN.md §5.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "scenarios/validation_runs.h"

namespace trainsim::reports {

nlohmann::ordered_json validation_json(const std::vector<scen::ValidationRow>& rows,
                                       const scen::ValidationSummary& summary);
std::string validation_text(const std::vector<scen::ValidationRow>& rows,
                            const scen::ValidationSummary& summary);

/// One runs file of a multi-file `validate`.
struct ValidationFile {
  std::string path;
  std::vector<scen::ValidationRow> rows;
  scen::ValidationSummary summary;
};

/// Several files: each file's table (as `validation_text`) under a heading, then one line per
/// file (rows, simulated, median / max |MFU error|, iteration-time MAPE) and the same over every
/// row of every file (`overall`, the summary of their union).
std::string validation_files_text(const std::vector<ValidationFile>& files,
                                  const scen::ValidationSummary& overall);
/// {"files": [{"file", "rows", "summary"}...], "summary": overall}.
nlohmann::ordered_json validation_files_json(const std::vector<ValidationFile>& files,
                                             const scen::ValidationSummary& overall);

/// `validate --scenarios DIR`: each simulated row of `csv` as the scenario file DIR/<id>.yaml (its
/// `ValidationRow::scenario_set`, nested, every value quoted, with a comment naming the row, its
/// source and the prediction), so that `trainsim run DIR/<id>.yaml` runs the configuration the
/// row was simulated with. Creates DIR; returns the number of files written. A row that could not
/// be simulated gets no file.
int write_row_scenarios(const std::string& dir, const std::vector<scen::ValidationRow>& rows,
                        const std::string& csv);

/// `validate --group-by`: one line per group (its labels, rows, signed MFU error median / min /
/// max and median |error| in points, iteration-time MAPE), and the same as JSON.
std::string validation_groups_text(const std::vector<scen::GroupColumn>& by,
                                   const std::vector<scen::ValidationGroup>& groups);
nlohmann::ordered_json validation_groups_json(const std::vector<scen::GroupColumn>& by,
                                              const std::vector<scen::ValidationGroup>& groups);

}  // namespace trainsim::reports
