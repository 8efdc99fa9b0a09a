#include "calibrate/json_input.h"

#include <set>
#include <vector>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/core/parse.h"

namespace trainsim::calib {

nlohmann::json parse_json_input(std::string_view text, const std::string& path,
                                const std::string& hint) {
  using json = nlohmann::json;
  std::vector<std::set<std::string>> keys;  // the keys seen in each open object
  std::string duplicate;
  const json::parser_callback_t note_keys = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      keys.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      if (!keys.empty()) keys.pop_back();
    } else if (event == json::parse_event_t::key && !keys.empty() && parsed.is_string()) {
      if (!keys.back().insert(parsed.get<std::string>()).second && duplicate.empty()) {
        duplicate = parsed.get<std::string>();
      }
    }
    return true;
  };
  json j;
  try {
    j = json::parse(strip_bom(text), note_keys);
  } catch (const json::parse_error& e) {
    throw_input(fmt::format("not valid JSON (byte {}): {}", e.byte, e.what()), {path, 0, ""},
                hint);
  } catch (const json::exception& e) {
    // out_of_range: a number beyond a double (1e999999).
    throw_input(std::string("not valid JSON: ") + e.what(), {path, 0, ""}, hint);
  }
  if (!duplicate.empty()) {
    throw_input("given twice in one object (JSON keeps only the last)", {path, 0, duplicate},
                "keep one of the two");
  }
  return j;
}

}  // namespace trainsim::calib
