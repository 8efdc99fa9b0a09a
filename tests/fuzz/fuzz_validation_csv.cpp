// The validation CSV (trainsim validate): every row is turned into a scenario and simulated at
// analytic fidelity, then summarized.
#include <cmath>

#include "scenarios/validation_runs.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace trainsim;
  try {
    const auto rows = scen::validate_runs_text(std::string(fuzz::as_text(data, size)), "fuzz.csv");
    const auto summary = scen::summarize(rows);
    if (!std::isfinite(summary.iter_time_mape) || !std::isfinite(summary.median_abs_mfu_err_pts) ||
        !std::isfinite(summary.max_abs_mfu_err_pts)) {
      std::fprintf(stderr, "non-finite validation summary\n");
      std::abort();
    }
  } catch (const Error& e) {
    fuzz::check_error(e);
  }
  return 0;
}
