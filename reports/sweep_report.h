// Output formats of `trainsim sweep`: the ranked text table, the JSON document and CSV.
//
// JSON and CSV hold every point (feasible ones in rank order, then the others by point index,
// each with its reason), so they are written to a stream rather than built in memory: a
// 300,000-point sweep is about 150 MB of JSON. Numbers use the shortest decimal form that reads
// back to the same double, and nothing that depends on how the sweep was run (threads, processes,
// a resumed checkpoint, wall time) is written, so the same sweep gives byte-identical output.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include "scenarios/sweep.h"

namespace trainsim::reports {

/// Header, the top `top` feasible points, the base configuration's rank and the reasons points
/// are not feasible (grouped, with counts and a first example).
std::string sweep_text(const scen::SweepOutcome& o, std::size_t top);

void write_sweep_json(std::ostream& out, const scen::SweepOutcome& o);
void write_sweep_csv(std::ostream& out, const scen::SweepOutcome& o);

/// A reason with its numbers blanked ("TP # does not divide the # attention heads"), so that
/// points failing the same way count together.
std::string reason_kind(const scen::PointResult& r);

struct ReasonGroup {
  std::string kind;
  std::size_t count = 0;
  std::size_t example = 0;  // the first point (by index) that failed this way
};
/// Not-feasible points grouped by reason kind, most frequent first (ties: first example).
std::vector<ReasonGroup> reason_groups(const scen::SweepOutcome& o);

/// How a refined point moved: "=", "up 2", "down 1", "out" (the finer fidelity could not run it),
/// or "base" (the base configuration, re-run beside the top `top` from further down).
std::string move_text(const scen::RefinedPoint& r, std::size_t top);

/// The `--refine` table of the text output.
std::string refined_text(const scen::SweepOutcome& o);

/// "tp" for "parallel.tp": column names of a sweep's keys.
std::string short_key(const std::string& key);

/// 1234567 -> "1,234,567".
std::string thousands(std::size_t n);

/// `{:.3g}`-style human formatting used by tables: 1234567 -> "1.23M".
std::string human(double x);

}  // namespace trainsim::reports
