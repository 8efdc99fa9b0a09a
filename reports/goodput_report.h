// Output of `trainsim goodput`: text, JSON and the `--report DIR` page (index.html with the time
// split, ETTR against the checkpoint interval and interruptions by class; results.json,
// results.csv). Nothing here depends on how many threads or MPI ranks ran the trials, so the
// output of a run is the same bytes however it was split.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "scenarios/goodput_config.h"
#include "sim/goodput/goodput.h"

namespace trainsim::reports {

struct GoodputOutcome {
  std::string scenario;  // the scenario's source
  scen::GoodputSetup setup;
  goodput::Summary summary;
  std::optional<goodput::IntervalSearch> search;  // absent with --no-search
};

/// ETTR × tokens/s × 86,400 (and its confidence half-width alike).
double tokens_per_day(const GoodputOutcome& o, double ettr);

std::string goodput_text(const GoodputOutcome& o);
nlohmann::ordered_json goodput_json(const GoodputOutcome& o);
std::string goodput_report_html(const GoodputOutcome& o);

/// Writes index.html, results.json and results.csv into `dir` (created if missing); throws
/// trainsim::Error(kRuntime) naming a file it cannot write.
void write_goodput_report(const std::string& dir, const GoodputOutcome& o);

}  // namespace trainsim::reports
