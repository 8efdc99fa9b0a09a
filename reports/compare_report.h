// Output of `trainsim run --compare` (scenarios/variants.h): one table of the variants side by
// side (iteration time, MFU and its change against the first variant, exposed communication per
// parallel dimension, the pipeline bubble, ECMP imbalance), the link utilisation per class of
// link (flow fidelity: every tier of the fabric; otherwise NVLink and NIC), the JSON document and
// the HTML report (`--report DIR`).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "scenarios/variants.h"

namespace trainsim::reports {

std::string compare_text(const std::vector<scen::Variant>& variants,
                         const std::vector<std::string>& keys);
nlohmann::ordered_json compare_json(const std::vector<scen::Variant>& variants,
                                    const std::vector<std::string>& keys);
/// DIR/index.html (charts), DIR/results.json and DIR/results.csv (one row per variant).
void write_compare_report(const std::string& dir, const std::vector<scen::Variant>& variants,
                          const std::vector<std::string>& keys);

}  // namespace trainsim::reports
