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

}  // namespace trainsim::reports
