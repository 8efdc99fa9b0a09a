// The `reliability.*` section of the scenario schema: failure rates, detection, diagnosis,
// repair, restart and checkpoint settings of `trainsim goodput` (docs/goodput.md gives every
// default's source). Appended to the schema by build_schema() in schema.cpp.
#pragma once

#include <vector>

#include "scenarios/schema.h"

namespace trainsim::scen {

std::vector<KeyDef> reliability_keys();

}  // namespace trainsim::scen
