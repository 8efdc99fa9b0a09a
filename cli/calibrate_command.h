// `trainsim calibrate`: build a measured calibration profile. `import-nccl-tests` fits nccl-tests
// output on any machine; `kernels` and `nccl` measure on the local GPUs and refuse to run (exit 4)
// where there are none, rather than write numbers that were never measured; `refit` fits the
// compute fields again from a profile's recorded `kernels_measured` samples (any machine).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace trainsim::cli {

struct CalibrateArgs {
  std::vector<std::string> files;
  std::string out;
  std::string base;          // profile JSON to start from
  std::string gpu;           // GPU preset whose built-in profile to start from
  int ranks = 0;             // import: rank count of files that do not state one (0: none)
  std::string command_line;  // recorded as provenance
  // kernels / nccl / refit
  std::string scenario;           // kernels: time the ops of this scenario (plus the grid)
  std::vector<std::string> sets;  // kernels: --set overrides of the scenario
  int device = 0;                 // kernels: CUDA device index (--gpu N)
  std::string dtype;              // kernels/refit: GEMM dtype (default: scenario precision/bf16)
  int repeats = 30;
  int warmup = 5;
  bool no_grid = false;                             // kernels: only the scenario's ops
  int gpus = 0;                                     // nccl: first N GPUs (0 = all)
  std::string min_bytes = "64K", max_bytes = "1G";  // nccl
  std::string profile;                              // refit: the profile with kernels_measured
  std::string gpu_preset;  // kernels/nccl/refit: GPU preset for peaks and the base
  CLI::App* import_nccl_tests = nullptr;
  CLI::App* kernels = nullptr;
  CLI::App* nccl = nullptr;
  CLI::App* refit = nullptr;
  CLI::App* from_execute = nullptr;  // files: execute records; base: the profile to add to
};

CLI::App* add_calibrate_command(CLI::App& app, CalibrateArgs& args);
int run_calibrate_command(const CalibrateArgs& args);

}  // namespace trainsim::cli
