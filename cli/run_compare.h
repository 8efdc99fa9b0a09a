// `trainsim run SCENARIO --compare KEY=VALUES ...`: the scenario once per combination of values,
// one table (scenarios/variants.h, reports/compare_report.h; docs/network.md).
#pragma once

#include <string>
#include <vector>

namespace trainsim::cli {

struct CompareVariantsArgs {
  std::string scenario;  // empty: the built-in default
  std::vector<std::string> sets;
  std::vector<std::string> compare;
  bool force = false;
  std::string format = "text";
  std::string output;
  std::string report;
};

/// Runs every variant and writes the table (text or JSON) and the report. Returns the exit code;
/// throws trainsim::Error like `run`.
int run_compare(const CompareVariantsArgs& args);

}  // namespace trainsim::cli
