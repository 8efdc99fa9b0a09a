#include "cli/calibrate_command.h"

#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <iostream>

#include "calibrate/nccl_tests.h"
#include "calibrate/profile.h"
#include "kernels/device_info.h"
#include "sim/core/error.h"

namespace trainsim::cli {
namespace {

// The GPU preset a `#  Rank` line's device name belongs to, "" when no built-in profile fits.
std::string preset_for_gpu_name(const std::string& name) {
  if (name.find("H200") != std::string::npos) return "h200-sxm";
  if (name.find("H100") != std::string::npos) return "h100-sxm";
  if (name.find("A800") != std::string::npos) return "a800";
  if (name.find("A100") != std::string::npos) return "a100-80gb";
  return "";
}

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

int import_nccl_tests(const CalibrateArgs& a) {
  std::vector<calib::NcclTestsRun> runs;
  for (const std::string& f : a.files) runs.push_back(calib::read_nccl_tests(f));
  // One profile describes one GPU; fits over runs of different GPUs would describe neither.
  std::string gpu_name;
  for (const auto& r : runs) {
    if (gpu_name.empty()) gpu_name = r.gpu_name;
    if (!r.gpu_name.empty() && r.gpu_name != gpu_name) {
      throw_input("ran on `" + r.gpu_name + "`, an earlier file on `" + gpu_name + "`",
                  {r.path, 0, ""}, "import the runs of each GPU type into its own profile");
    }
  }
  calib::Profile p;
  if (!a.base.empty()) {
    p = calib::load_profile(a.base);
  } else {
    const std::string gpu = !a.gpu.empty() ? a.gpu : preset_for_gpu_name(gpu_name);
    if (gpu.empty()) {
      throw_input("cannot tell the GPU" + (gpu_name.empty() ? "" : " `" + gpu_name + "`") +
                      " of the nccl-tests files",
                  {"", 0, "--gpu"}, "pass --gpu PRESET or --base PROFILE.json");
    }
    p = calib::builtin_profile(gpu);
  }
  const std::vector<calib::NcclTestsFit> fits = calib::fit_nccl_tests(runs);
  // NVLink bandwidth from a run inside one server: all-reduce is what DP/TP use, all-gather next.
  const calib::NcclTestsFit* nvlink = nullptr;
  for (const char* op : {"all_reduce", "all_gather"}) {
    for (const auto& r : runs) {
      const bool one_node = r.nodes == 1 || (r.nodes == 0 && r.ranks <= 8);
      if (nvlink || r.op != op || !one_node || r.ranks < 2) continue;
      for (const auto& f : fits) {
        if (f.measured.op == r.op && f.measured.ranks == r.ranks) nvlink = &f;
      }
    }
  }
  p.collectives_measured.clear();
  for (const auto& f : fits) p.collectives_measured.push_back(f.measured);
  if (nvlink) p.nvlink.busbw_Bps = nvlink->measured.busbw_Bps;
  calib::MeasuredProvenance& pv = p.measured_provenance;
  pv = {};
  pv.source_files = a.files;
  pv.nccl_tests_version = runs.front().version_line;
  pv.gpu_name = gpu_name;
  pv.date = utc_now();
  pv.command_line = a.command_line;
  p.name = "nccl-tests-" + p.gpu;
  p.provenance += "; collectives: nccl-tests import (collectives_measured_provenance)";

  std::ofstream out(a.out);
  if (!out) throw Error(ErrorKind::kRuntime, "cannot write the profile", {a.out, 0, ""});
  out << calib::profile_to_json(p);
  if (!out) throw Error(ErrorKind::kRuntime, "write failed", {a.out, 0, ""});
  std::cout << fmt::format("{:<15} {:>5} {:>10} {:>12} {:>17}\n", "op", "ranks", "alpha_us",
                           "busbw_GB/s", "max_err_>=1MiB_%");
  for (const auto& f : fits) {
    std::cout << fmt::format("{:<15} {:>5} {:>10.2f} {:>12.1f} {:>17.2f}\n", f.measured.op,
                             f.measured.ranks, f.measured.alpha_s * 1e6,
                             f.measured.busbw_Bps / 1e9, f.max_rel_error * 100);
  }
  std::cout << fmt::format("nvlink_busbw_Bps: {}\nwrote {}\n",
                           nvlink ? fmt::format("{:.4g} (from {} over {} ranks)",
                                                p.nvlink.busbw_Bps, nvlink->measured.op,
                                                nvlink->measured.ranks)
                                  : std::string("kept (no single-node all_reduce/all_gather)"),
                           a.out);
  return 0;
}

// Measuring needs a GPU; without one the command fails rather than fall back to the datasheet.
int measure(const char* what) {
  const kernels::DeviceReport d = kernels::query_devices();
  if (d.devices.empty()) {
    throw Error(ErrorKind::kRuntime, "no CUDA device found (" + d.status + ")", {},
                "run it on a GPU machine, or import nccl-tests output with `calibrate "
                "import-nccl-tests`");
  }
  throw Error(ErrorKind::kRuntime,
              fmt::format("this build cannot measure {} yet; {} GPU(s) present", what,
                          d.devices.size()),
              {}, "import nccl-tests output with `calibrate import-nccl-tests`");
}

}  // namespace

CLI::App* add_calibrate_command(CLI::App& app, CalibrateArgs& a) {
  CLI::App* c = app.add_subcommand("calibrate", "Build a measured calibration profile");
  c->require_subcommand(1);
  a.import_nccl_tests = c->add_subcommand(
      "import-nccl-tests", "Fit alpha-beta per collective from nccl-tests output into a profile");
  a.import_nccl_tests->add_option("FILE", a.files, "nccl-tests output (all_reduce_perf, ...)")
      ->required()
      ->check(CLI::ExistingFile);
  a.import_nccl_tests->add_option("--out", a.out, "Profile JSON to write")->required();
  auto* base = a.import_nccl_tests->add_option("--base", a.base,
                                               "Profile JSON to start from")
                   ->check(CLI::ExistingFile);
  a.import_nccl_tests
      ->add_option("--gpu", a.gpu,
                   "GPU preset whose built-in profile to start from (default: from the files)")
      ->excludes(base);
  a.kernels = c->add_subcommand("kernels", "Measure GEMM/attention/memory kernels on local GPUs");
  a.nccl = c->add_subcommand("nccl", "Measure collectives with NCCL on local GPUs");
  return c;
}

int run_calibrate_command(const CalibrateArgs& a) {
  if (*a.import_nccl_tests) return import_nccl_tests(a);
  if (*a.kernels) return measure("kernels");
  return measure("collectives");
}

}  // namespace trainsim::cli
