// A calibration profile (JSON): parsed, written back, and read again to the same text.
#include "calibrate/profile.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace trainsim;
  try {
    const calib::Profile p = calib::parse_profile(fuzz::as_text(data, size), "fuzz.json");
    const std::string text = calib::profile_to_json(p);
    if (calib::profile_to_json(calib::parse_profile(text, "round-trip.json")) != text) {
      std::fprintf(stderr, "profile does not round-trip\n");
      std::abort();
    }
  } catch (const Error& e) {
    fuzz::check_error(e);
  }
  return 0;
}
