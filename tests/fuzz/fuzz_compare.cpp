// `trainsim compare`: two result documents (JSON) separated by a line "%%REAL%%", compared in
// every output format.
#include "cli/compare_command.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace trainsim;
  const auto [sim, real] = fuzz::split_at(fuzz::as_text(data, size), "\n%%REAL%%\n");
  for (const char* format : {"text", "json", "markdown"}) {
    try {
      const std::string out = cli::compare_texts(sim, "sim.json", real, "real.json", format);
      if (out.empty()) std::abort();
    } catch (const Error& e) {
      fuzz::check_error(e);
      return 0;
    }
  }
  return 0;
}
