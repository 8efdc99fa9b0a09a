// nccl-tests output (calibrate import-nccl-tests): parsed, then fitted.
#include <cmath>

#include "calibrate/nccl_tests.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace trainsim;
  try {
    const calib::NcclTestsRun run =
        calib::parse_nccl_tests(std::string(fuzz::as_text(data, size)), "all_reduce_perf.txt");
    for (const calib::NcclTestsFit& f : calib::fit_nccl_tests({run})) {
      // Samples of one size only are kept without a fit (issue 17): α = busbw = 0, by contract.
      if (!f.fitted) {
        if (f.measured.alpha_s != 0 || f.measured.busbw_Bps != 0) {
          std::fprintf(stderr, "unfitted collective with a fit\n");
          std::abort();
        }
        continue;
      }
      if (!std::isfinite(f.measured.alpha_s) || !std::isfinite(f.measured.busbw_Bps) ||
          !(f.measured.busbw_Bps > 0)) {
        std::fprintf(stderr, "non-finite fit\n");
        std::abort();
      }
    }
  } catch (const Error& e) {
    fuzz::check_error(e);
  }
  return 0;
}
