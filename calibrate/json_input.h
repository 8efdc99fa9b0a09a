// Reading a JSON document given as input (a calibration profile, a result to compare, an
// execute record): one parser for all, so that each refuses the same things the same way.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace trainsim::calib {

/// Parses `text` (a leading UTF-8 BOM removed) read from `path`. Refuses with trainsim::Error
/// (kInput) naming the path: text that is not JSON ("not valid JSON (byte N): ..."), a number
/// beyond a double, and a key given twice in one object (the parser would keep only the last,
/// silently; which of the two was meant is not known), naming the key. `hint` ends the
/// not-JSON message.
nlohmann::json parse_json_input(std::string_view text, const std::string& path,
                                const std::string& hint = {});

}  // namespace trainsim::calib
