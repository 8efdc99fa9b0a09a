// `trainsim calibrate`: build a measured calibration profile. `import-nccl-tests` fits nccl-tests
// output on any machine; `kernels` and `nccl` measure on the local GPUs and refuse to run (exit 4)
// where there are none, rather than write numbers that were never measured.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace trainsim::cli {

struct CalibrateArgs {
  std::vector<std::string> files;
  std::string out;
  std::string base;  // profile JSON to start from
  std::string gpu;   // GPU preset whose built-in profile to start from
  std::string command_line;  // recorded as provenance
  CLI::App* import_nccl_tests = nullptr;
  CLI::App* kernels = nullptr;
  CLI::App* nccl = nullptr;
};

CLI::App* add_calibrate_command(CLI::App& app, CalibrateArgs& args);
int run_calibrate_command(const CalibrateArgs& args);

}  // namespace trainsim::cli
