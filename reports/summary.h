// Output formats of a single run: the human summary and the JSON document of DESIGN.md §5.
//
// Reports only format; every number comes from `exec::Result` and the scenario it was run on.
// JSON output is deterministic (ordered keys, fixed number formatting) so that the same inputs
// give byte-identical documents.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "calibrate/profile.h"
#include "scenarios/scenario.h"
#include "sim/exec/result.h"

namespace trainsim::reports {

/// The run's JSON document (keys of DESIGN.md §5 and the scenario it came from).
nlohmann::ordered_json result_json(const exec::Result& r, const scen::Scenario& s,
                                   const calib::Profile& profile);
/// `result_json` serialised with two-space indentation and a trailing newline.
std::string result_json_text(const exec::Result& r, const scen::Scenario& s,
                             const calib::Profile& profile);
/// Where an iteration's time goes, as `result_json` writes it under `breakdown` (and `validate`
/// per row).
nlohmann::ordered_json breakdown_json(const exec::Breakdown& b);
/// The link classes of a flow-fidelity run as JSON (class, links, used, max and mean
/// utilisation), as `result_json` writes them under network.link_classes.
nlohmann::ordered_json link_classes_json(const exec::NetworkStats& n);
/// What the packet level counted (packets, ECN-marked packets, PFC pauses, ...), as `result_json`
/// writes it under network.packets, and as the text summary's `packets` line.
nlohmann::ordered_json packets_json(const exec::NetworkStats& n);
std::string packets_line(const exec::NetworkStats& n);

/// Rows as text columns: the first `left_cols` left-aligned, the rest right-aligned, two spaces
/// between, no trailing blanks.
std::string aligned_columns(const std::vector<std::vector<std::string>>& rows,
                            std::size_t left_cols);

/// Human summary: headline numbers, memory, breakdown table, network, notes.
std::string result_text(const exec::Result& r, const scen::Scenario& s,
                        const calib::Profile& profile);

}  // namespace trainsim::reports
