// Scenario YAML with --set overrides: the text up to a line "%%SET%%" is the YAML, each line after
// it one --set value (key.path=value).
#include <vector>

#include "scenarios/scenario.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace trainsim;
  const auto [yaml, rest] = fuzz::split_at(fuzz::as_text(data, size), "\n%%SET%%\n");
  std::vector<std::string> sets;
  std::string_view r = rest;
  while (!r.empty()) {
    const std::size_t nl = r.find('\n');
    sets.emplace_back(r.substr(0, nl));
    if (nl == std::string_view::npos) break;
    r.remove_prefix(nl + 1);
  }
  try {
    const scen::Scenario s = scen::load_scenario_string(yaml, "fuzz.yaml", sets);
    // Every resolved value has an origin.
    for (const auto& [key, value] : s.values) {
      if (!s.origin.count(key)) std::abort();
      (void)scen::origin_of(s, key);
    }
  } catch (const Error& e) {
    fuzz::check_error(e);
  }
  return 0;
}
