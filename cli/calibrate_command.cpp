#include "cli/calibrate_command.h"
#include "cli/output.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "calibrate/gemm_fit.h"
#include "calibrate/json_input.h"
#include "calibrate/nccl_tests.h"
#include "calibrate/profile.h"
#include "kernels/bench.h"
#include "kernels/bench_plan.h"
#include "kernels/device_info.h"
#include "kernels/exec/in_mix.h"
#include "kernels/exec/process_group.h"
#include "kernels/nccl_bench.h"
#include "scenarios/presets.h"
#include "scenarios/run_config.h"
#include "scenarios/scenario.h"
#include "scenarios/schema.h"
#include "scenarios/sizes.h"
#include "sim/core/error.h"
#include "sim/core/limits.h"
#include "sim/core/parse.h"
#include "sim/plan/program.h"

namespace trainsim::cli {
namespace {

// The GPU preset a device name belongs to, "" when no built-in profile fits it.
std::string preset_for_gpu_name(const std::string& name) {
  return calib::gpu_preset_for_device_name(name);
}

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The base a measured profile starts from: --base, else the built-in profile of --gpu-preset /
// --gpu, else of the GPU the measurement names.
calib::Profile base_profile(const CalibrateArgs& a, const std::string& preset_flag,
                            const std::string& gpu_name, const char* flag_name) {
  if (!a.base.empty()) return calib::load_profile(a.base);
  const std::string gpu = !preset_flag.empty() ? preset_flag : preset_for_gpu_name(gpu_name);
  if (gpu.empty()) {
    throw_input("cannot tell the GPU preset of" +
                    (gpu_name.empty() ? std::string(" the measurement") : " `" + gpu_name + "`"),
                {"", 0, flag_name},
                std::string("pass ") + flag_name + " PRESET or --base PROFILE.json");
  }
  return calib::builtin_profile(gpu);
}

void write_profile(const calib::Profile& p, const std::string& path) {
  std::ofstream out(path);
  if (!out) throw Error(ErrorKind::kRuntime, "cannot write the profile", {path, 0, ""});
  out << calib::profile_to_json(p);
  if (!out) throw Error(ErrorKind::kRuntime, "write failed", {path, 0, ""});
}

// Fits collective runs (imported or measured) into `p` and writes it; prints the fits.
int write_collective_fits(const CalibrateArgs& a, const std::vector<calib::NcclTestsRun>& runs,
                          calib::Profile p, const std::string& gpu_name,
                          const std::vector<std::string>& sources, const std::string& how) {
  const std::vector<calib::NcclTestsFit> fits = calib::fit_nccl_tests(runs);
  // NVLink bandwidth from a fit inside one server: all-reduce is what DP/TP use, all-gather next.
  // Every run pooled into the fit must be known to run on one host (its rank lines name one, or
  // one process drove all its ranks); a run of unknown hosts may have crossed the network (4
  // servers of 1 GPU each read 45 GB/s), so it never sets it, whatever its rank count.
  const calib::NcclTestsFit* nvlink = nullptr;
  std::string nvlink_kept = "no single-node all_reduce/all_gather";  // why not, for the output
  bool kept_said = false;
  for (const char* op : {"all_reduce", "all_gather"}) {
    for (const auto& f : fits) {
      if (nvlink || f.measured.op != op) continue;
      const calib::NcclTestsRun* unknown = nullptr;
      const calib::NcclTestsRun* several = nullptr;
      for (const auto& r : runs) {
        if (r.op != f.measured.op || r.ranks != f.measured.ranks) continue;
        if (r.nodes == 0 && !unknown) unknown = &r;
        if (r.nodes > 1 && !several) several = &r;
      }
      if (several) continue;  // a multi-node fit says nothing about NVLink; that is expected
      if (unknown) {
        std::cerr << fmt::format(
            "note: {}:{}: {} over {} ranks sets no NVLink bandwidth: its hosts are unknown (no "
            "`#  Rank` line for every rank{}), so it may have crossed the network; its fit is "
            "kept in collectives_measured\n",
            unknown->path, unknown->first_line, f.measured.op, f.measured.ranks,
            unknown->ranks_from == "--ranks" ? ", the count came from --ranks" : "");
        if (!kept_said) nvlink_kept = f.measured.op + " over " + std::to_string(f.measured.ranks) +
                                      " ranks: hosts unknown";
        kept_said = true;
        continue;
      }
      if (!f.fitted) {
        if (!kept_said) nvlink_kept = f.measured.op + " over " + std::to_string(f.measured.ranks) +
                                      " ranks: no fit";
        kept_said = true;
        continue;
      }
      nvlink = &f;
    }
  }
  for (const auto& f : fits) {
    if (!f.fitted) {
      std::cerr << fmt::format(
          "note: {}: {} over {} ranks {}: kept as samples without an alpha-beta fit (a line needs "
          "two sizes of at least 1 MiB); it prices nothing{}\n",
          f.files, f.measured.op, f.measured.ranks, f.unfitted_reason,
          f.measured.op == "all_reduce" || f.measured.op == "all_gather"
              ? " and sets no NVLink bandwidth"
              : "");
    }
  }
  // The import replaces the base's measured collectives (its provenance is this import's): said,
  // with the ones not measured again, so that chained imports do not lose fits silently.
  std::vector<std::string> dropped;
  for (const calib::MeasuredCollective& m : p.collectives_measured) {
    const bool again = std::any_of(fits.begin(), fits.end(), [&](const auto& f) {
      return f.measured.op == m.op && f.measured.ranks == m.ranks;
    });
    if (!again) dropped.push_back(fmt::format("{} over {} ranks", m.op, m.ranks));
  }
  if (!dropped.empty()) {
    std::cerr << fmt::format(
        "note: the base profile's measured {} {} replaced by this import's fits and dropped; "
        "import every nccl-tests file in one command to keep them all\n",
        fmt::join(dropped, ", "), dropped.size() == 1 ? "fit is" : "fits are");
  }
  p.collectives_measured.clear();
  for (const auto& f : fits) p.collectives_measured.push_back(f.measured);
  if (nvlink) p.nvlink.busbw_Bps = nvlink->measured.busbw_Bps;
  calib::MeasuredProvenance& pv = p.measured_provenance;
  pv = {};
  pv.source_files = sources;
  pv.nccl_tests_version = runs.front().version_line;
  pv.gpu_name = gpu_name;
  pv.date = utc_now();
  pv.command_line = a.command_line;
  p.name = how + "-" + p.gpu;
  const std::string suffix = "; collectives: " + how + " (collectives_measured_provenance)";
  if (p.provenance.find(suffix) == std::string::npos) p.provenance += suffix;
  write_profile(p, a.out);
  std::cout << fmt::format("{:<15} {:>5} {:>10} {:>12} {:>17}\n", "op", "ranks", "alpha_us",
                           "busbw_GB/s", "max_err_>=1MiB_%");
  for (const auto& f : fits) {
    if (!f.fitted) {
      std::cout << fmt::format("{:<15} {:>5} {:>10} {:>12} {:>17}  ({} sample{}, {}: no fit)\n",
                               f.measured.op, f.measured.ranks, "-", "-", "-",
                               f.measured.samples.size(),
                               f.measured.samples.size() == 1 ? "" : "s",
                               f.unfitted_reason.starts_with("was measured at a single size")
                                   ? "one size"
                                   : "fewer than two sizes >= 1 MiB");
      continue;
    }
    std::cout << fmt::format("{:<15} {:>5} {:>10.2f} {:>12.1f} {:>17.2f}\n", f.measured.op,
                             f.measured.ranks, f.measured.alpha_s * 1e6, f.measured.busbw_Bps / 1e9,
                             f.max_rel_error * 100);
  }
  std::cout << fmt::format("nvlink_busbw_Bps: {}\nwrote {}\n",
                           nvlink
                               ? fmt::format("{:.4g} (from {} over {} ranks)", p.nvlink.busbw_Bps,
                                             nvlink->measured.op, nvlink->measured.ranks)
                               : "kept (" + nvlink_kept + ")",
                           a.out);
  return 0;
}

// The built-in GPU presets, for messages.
std::string preset_names() {
  std::string out;
  for (const std::string& g : scen::preset_names(scen::PresetKind::kGpu)) {
    out += (out.empty() ? "" : ", ") + g;
  }
  return out;
}

int import_nccl_tests(const CalibrateArgs& a) {
  if (!a.gpu.empty() && !scen::gpu_preset(a.gpu)) {
    throw_input("unknown GPU preset `" + a.gpu + "` (" + preset_names() + ")", {"", 0, "--gpu"});
  }
  std::vector<calib::NcclTestsRun> runs;
  calib::NcclTestsOptions o;
  o.ranks = a.ranks;
  for (const std::string& f : a.files) {
    std::vector<calib::NcclTestsRun> in_file = calib::read_nccl_tests_runs(f, o);
    if (in_file.size() > 1) {
      std::string starts;
      for (const auto& r : in_file) {
        starts += (starts.empty() ? "" : ", ") + std::to_string(r.first_line) + " (" + r.op +
                  ", " + std::to_string(r.ranks) + " ranks)";
      }
      std::cerr << fmt::format("note: {}: holds {} nccl-tests runs, starting at lines {}: each is "
                               "imported as its own run\n",
                               f, in_file.size(), starts);
    }
    for (calib::NcclTestsRun& r : in_file) {
      // Never silently: every line left out is counted by kind, with its first line numbers.
      for (const std::string& s : calib::describe_skipped(r)) std::cerr << "note: " << s << "\n";
      for (const std::string& s : r.notes) std::cerr << "note: " << s << "\n";
      for (const std::string& s : r.warnings) std::cerr << "warning: " << s << "\n";
      runs.push_back(std::move(r));
    }
  }
  // One profile describes one GPU; fits over runs of different GPUs would describe neither.
  const calib::NcclTestsRun* named = nullptr;  // the first run that names its GPU
  for (const auto& r : runs) {
    if (r.gpu_name.empty()) continue;
    if (!named) {
      named = &r;
    } else if (r.gpu_name != named->gpu_name) {
      throw_input("ran on `" + r.gpu_name + "`, " + named->path + " on `" + named->gpu_name + "`",
                  {r.path, r.gpu_line, ""}, "import the runs of each GPU type into its own profile");
    }
  }
  const std::string gpu_name = named ? named->gpu_name : "";
  const std::string file_preset = preset_for_gpu_name(gpu_name);
  const ErrorContext gpu_at{named ? named->path : a.files.front(), named ? named->gpu_line : 0,
                            ""};
  if (a.base.empty() && a.gpu.empty()) {
    if (!named) {
      throw_input("cannot tell the GPU: no `#  Rank ... device ... NAME` lines", gpu_at,
                  "pass --gpu PRESET (" + preset_names() + ") or --base PROFILE.json");
    }
    if (file_preset.empty()) {
      throw_input("ran on `" + gpu_name + "`, which has no built-in GPU profile (" +
                      preset_names() + ")",
                  gpu_at,
                  "pass --gpu PRESET to import it into the closest profile anyway (its "
                  "datasheet peaks, memory and NVLink stay that preset's), or --base PROFILE.json");
    }
  }
  calib::Profile p = base_profile(a, a.gpu.empty() ? file_preset : a.gpu, gpu_name, "--gpu");
  if (named) {
    // The GPU the files name against the profile the options chose.
    const std::string chosen = !a.gpu.empty() ? "--gpu " + a.gpu : "--base " + a.base;
    if (file_preset.empty()) {
      std::cerr << fmt::format(
          "warning: {}:{}: ran on `{}`, which has no built-in GPU profile; the profile starts "
          "from {} ({}), whose datasheet peaks, memory and NVLink are not this GPU's\n",
          gpu_at.file, gpu_at.line, gpu_name, chosen, p.gpu);
    } else if (file_preset != p.gpu) {
      std::cerr << fmt::format(
          "warning: {}:{}: ran on `{}` ({}), but {} makes it a {} profile\n", gpu_at.file,
          gpu_at.line, gpu_name, file_preset, chosen, p.gpu);
    }
  }
  return write_collective_fits(a, runs, p, gpu_name, a.files, "nccl-tests");
}

// The GPU's datasheet peaks, from its preset.
calib::PeakRates peaks_of(const std::string& preset) {
  const std::optional<topo::GpuSpec> g = scen::gpu_preset(preset);
  if (!g) throw_input("unknown GPU preset `" + preset + "`", {"", 0, "--gpu-preset"});
  calib::PeakRates r;
  r.dense_16bit_flops = g->peak_dense_16bit_flops;
  r.dense_fp8_flops = g->peak_dense_fp8_flops;
  r.hbm_Bps = g->hbm_Bps;
  return r;
}

// Fits the compute fields from the samples in `p` and prints what changed; `fast_said`: the
// in-mix samples above the HBM bandwidth were already named (by their records).
void fit_compute(calib::Profile& p, const std::string& gemm_dtype, bool fast_said = false) {
  // The profile's own GEMM surface: what in-mix GEMMs scale when no burst GEMMs shape one.
  calib::GemmFit surface;
  surface.peak_efficiency = p.gemm_peak_efficiency;
  surface.half_dim = p.gemm_half_dim;
  surface.overhead_s = p.gemm_launch_s();
  const calib::KernelFits f =
      calib::fit_kernels(p.kernels_measured, peaks_of(p.gpu), gemm_dtype, &surface);
  calib::apply_kernel_fits(f, p);
  std::cout << fmt::format(
      "kernel samples: {}\n"
      "memory-bound: memory_bw_efficiency {:.3f}, kernel_overhead_s {:.3g} "
      "(max error {:.1f} % over {} samples)\n"
      "GEMM ({}): gemm_peak_efficiency {:.3f}, gemm_half_dim {:.1f}, gemm_overhead_s {:.3g} "
      "({})\n"
      "attention: fwd efficiency {:.3f} (fixed cost {:.0f} keys a block), bwd efficiency "
      "{:.3f} (fixed cost {:.0f} keys a block)\n",
      p.kernels_measured.size(), p.memory_bw_efficiency, p.kernel_overhead_s,
      f.memory.max_rel_error * 100, f.memory.samples, f.gemm_dtype, p.gemm_peak_efficiency,
      p.gemm_half_dim, p.gemm_launch_s(),
      f.gemm_from_base
          ? std::string("the base profile's surface, scaled by the in-mix factor")
          : fmt::format("rms error {:.1f} %, max {:.1f} % over {} samples",
                        f.gemm.rms_rel_error * 100, f.gemm.max_rel_error * 100, f.gemm.samples),
      p.attention_fwd_efficiency, p.attention_fwd_overhead_keys, p.attention_bwd_efficiency,
      p.attention_bwd_overhead_keys);
  if (f.gemm_in_mix_samples > 0) {
    std::cout << fmt::format(
        "GEMMs timed in the mix: {} samples at {:.3f} x the burst surface's rate (in "
        "gemm_peak_efficiency)\n",
        f.gemm_in_mix_samples, f.gemm_in_mix_factor);
  }
  if (!f.gemm_by_op.empty()) {
    std::cout << "GEMM surface residuals per op (mean and rms of predicted/measured - 1):\n";
    for (const auto& [op, r] : f.gemm_by_op) {
      std::cout << fmt::format("  {:<17} {:+6.1f} %  rms {:5.1f} % over {} samples\n", op,
                               r.mean_rel_error * 100, r.rms_rel_error * 100, r.samples);
    }
  }
  if (!f.memory_by_kind.empty()) {
    std::cout << "memory-bound per kind (own efficiency of datasheet HBM"
              << (p.copy_bw_Bps ? ", as a fraction of the copy kernel's" : "")
              << "; rms error with it and with the common line):\n";
    if (p.copy_bw_Bps) {
      std::cout << fmt::format("  copy roofline     {:.3f} TB/s (read + written)\n",
                               *p.copy_bw_Bps / 1e12);
    }
    for (const auto& [kind, k] : f.memory_by_kind) {
      // Both slopes are fractions of the same datasheet bandwidth: their ratio is the kind's
      // bandwidth over the copy kernel's.
      const std::string of_copy =
          f.copy_bw_Bps > 0
              ? fmt::format(" ({:.3f} of copy)",
                            k.efficiency / f.memory_by_kind.at("copy").efficiency)
              : "";
      std::cout << fmt::format("  {:<20} {:.3f}{}  rms {:5.1f} % (common {:5.1f} %) over {} samples\n",
                               kind, p.memory_efficiency(kind), of_copy, k.rms_rel_error * 100,
                               k.rms_rel_error_common * 100, k.samples);
    }
  }
  for (const std::string& n : f.notes) std::cerr << "note: " << n << "\n";
  if (!fast_said) {
    for (const calib::RateIssue& r : f.fast_in_mix) {
      std::cerr << fmt::format("warning: kernels_measured[{}] ({}): {}\n", r.index,
                               p.kernels_measured[r.index].label, r.what);
    }
  }
  for (const std::string& w : f.warnings) std::cerr << "warning: " << w << "\n";
}

// An error of a fit, placed in the file whose samples were fitted.
[[noreturn]] void rethrow_in(const Error& e, const std::string& file) {
  throw Error(e.kind(), e.message(), {file, 0, e.where().field}, e.hint());
}

kernels::DeviceReport require_device() {
  const kernels::DeviceReport d = kernels::query_devices();
  if (d.devices.empty()) {
    throw Error(ErrorKind::kRuntime, "no CUDA device found (" + d.status + ")", {},
                "run it on a GPU machine, or import nccl-tests output with `calibrate "
                "import-nccl-tests`");
  }
  return d;
}

// What `calibrate kernels` and `calibrate nccl` can check without a GPU, checked before they
// look for one (exit 2 for a bad argument, as `execute` does; they said "no CUDA device found"
// to `--dtype banana` and to a missing --out): the output, the base profile or GPU preset.
void check_measure_args(const CalibrateArgs& a) {
  if (a.out.empty()) throw_input("--out PROFILE.json is required", {"", 0, "--out"});
  if (!a.gpu_preset.empty() && !scen::gpu_preset(a.gpu_preset)) {
    throw_input("unknown GPU preset `" + a.gpu_preset + "` (" + preset_names() + ")",
                {"", 0, "--gpu-preset"});
  }
  if (!a.base.empty()) calib::load_profile(a.base);
}

int measure_kernels(const CalibrateArgs& a) {
  check_measure_args(a);
  std::optional<scen::Scenario> sc;
  if (!a.scenario.empty()) {
    sc = scen::load_scenario_file(a.scenario, a.sets);
    scen::require_one_job(*sc, "calibrate kernels");
  } else if (!a.sets.empty()) {
    throw_input("--set overrides a key of --scenario, and no scenario is given", {"", 0, "--set"},
                "add --scenario FILE (without one only the standard grid is timed)");
  }
  kernels::DType gemm = kernels::DType::kBf16;
  if (sc && sc->training.precision == Precision::kFp8) gemm = kernels::DType::kFp8;
  if (!a.dtype.empty()) gemm = kernels::parse_dtype(a.dtype, "--dtype");

  const kernels::DeviceReport d = require_device();
  if (a.device < 0 || a.device >= static_cast<int>(d.devices.size())) {
    throw_input(fmt::format("no CUDA device {} ({} present)", a.device, d.devices.size()),
                {"", 0, "--gpu"});
  }
  const std::string gpu_name = d.devices[static_cast<std::size_t>(a.device)].name;
  calib::Profile p = base_profile(a, a.gpu_preset, gpu_name, "--gpu-preset");

  std::vector<kernels::BenchItem> items;
  if (sc) {
    model::Sharding sh;
    sh.micro_batch = sc->training.micro_batch;
    sh.tp = sc->parallel.tp;
    sh.cp = sc->parallel.cp;
    sh.sp = sc->parallel.sp && sc->parallel.tp > 1;
    sh.fused_attention = sc->opt.fused_attention();
    items = kernels::bench_items_for_model(sc->model, sh, kernels::DType::kBf16, gemm);
    // The unfused path too, so both settings of the lever have measured twins.
    sh.fused_attention = !sc->opt.fused_attention();
    for (kernels::BenchItem& b :
         kernels::bench_items_for_model(sc->model, sh, kernels::DType::kBf16, gemm)) {
      items.push_back(std::move(b));
    }
  }
  // The GEMM surface always gets the grid's shapes (kernels/bench_plan.h, standard_gemm_grid);
  // --no-grid leaves out the rest of the grid.
  for (kernels::BenchItem& b : a.no_grid ? kernels::standard_gemm_grid(gemm)
                                         : kernels::standard_grid(kernels::DType::kBf16, gemm)) {
    items.push_back(std::move(b));
  }

  kernels::BenchOptions o;
  o.device = a.device;
  o.repeats = a.repeats;
  o.warmup = a.warmup;
  std::cerr << fmt::format("timing {} kernels on GPU {} ({}), {} repeats each\n", items.size(),
                           a.device, gpu_name, o.repeats);
  const kernels::BenchResult r =
      kernels::run_kernel_bench(items, o, [](const calib::MeasuredKernel& k) {
        std::cerr << fmt::format(
            "  {:<16} {:<22} {:<5} {:>8.0f} {:>8.0f} {:>8.0f} x{:<5.0f} {:>10.2f} us\n", k.op,
            k.label, k.dtype, k.m, k.n, k.k, k.batch, k.median_s * 1e6);
      });
  for (const std::string& s : r.skipped) std::cerr << "skipped: " << s << "\n";
  p.kernels_measured = r.samples;
  p.kernels_provenance = r.provenance;
  p.kernels_provenance.date = utc_now();
  p.kernels_provenance.command_line = a.command_line;
  p.name = "measured-" + p.gpu;
  p.provenance += "; compute: measured by trainsim calibrate kernels (kernels_measured_provenance)";
  // Samples first: if a fit fails, the measurement is still on disk for `calibrate refit`.
  write_profile(p, a.out);
  try {
    fit_compute(p, kernels::dtype_name(gemm));
  } catch (const Error& e) {
    throw Error(ErrorKind::kRuntime, "the fit failed: " + e.message(), {a.out, 0, e.where().field},
                "the samples are in " + a.out + "; `trainsim calibrate refit` fits them again");
  }
  write_profile(p, a.out);
  std::cout << "wrote " << a.out << "\n";
  return 0;
}

void nccl_sizes(const CalibrateArgs& a, kernels::NcclBenchOptions& o) {
  o.min_bytes = static_cast<double>(scen::parse_size(a.min_bytes, {"", 0, "--min-bytes"}));
  o.max_bytes = static_cast<double>(scen::parse_size(a.max_bytes, {"", 0, "--max-bytes"}));
  if (o.min_bytes > o.max_bytes) {
    throw_input(fmt::format("--min-bytes {} is above --max-bytes {}", a.min_bytes, a.max_bytes),
                {"", 0, "--min-bytes"}, "sizes double from --min-bytes up to --max-bytes");
  }
  o.repeats = a.repeats;
  o.warmup = a.warmup;
}

// `calibrate nccl`'s arguments, checked before any GPU or process is looked for.
void check_nccl_args(const CalibrateArgs& a) {
  check_measure_args(a);
  kernels::NcclBenchOptions o;
  nccl_sizes(a, o);
}

// `calibrate nccl` under mpirun: every process drives L GPUs of its machine (L = --gpus, default
// the machine's GPUs / its processes), mapped like `execute`: the process of local rank `l` uses
// devices l·L … l·L+L−1 and is ranks p·L … p·L+L−1 of one communicator. Every check below is
// decided from one all-gather that every process sees alike, so all exit with the same code
// (4 with "no CUDA device found" when any process has none) and none waits on another.
int measure_nccl_mpi(const CalibrateArgs& a, kexec::ProcessGroup& group) {
  const kernels::DeviceReport d = kernels::query_devices();
  char host_buf[256] = {};
  if (gethostname(host_buf, sizeof host_buf - 1) != 0)
    std::snprintf(host_buf, sizeof host_buf, "?");
  const std::string me = fmt::format("{}\t{}\t{}", host_buf, d.devices.size(), group.local_index());
  struct Peer {
    std::string host;
    int devices = 0, local = 0;
  };
  std::vector<Peer> peers;
  for (const std::string& line : group.allgather(me)) {
    Peer p;
    const std::size_t t1 = line.find('\t'), t2 = line.rfind('\t');
    p.host = line.substr(0, t1);
    p.devices = std::atoi(line.substr(t1 + 1, t2 - t1 - 1).c_str());
    p.local = std::atoi(line.substr(t2 + 1).c_str());
    peers.push_back(std::move(p));
  }
  for (std::size_t q = 0; q < peers.size(); ++q) {
    if (peers[q].devices > 0) continue;
    // This process's own reason first; else the first process that has none.
    const std::string why =
        d.devices.empty() ? d.status : fmt::format("on process {} ({})", q, peers[q].host);
    throw Error(ErrorKind::kRuntime, "no CUDA device found (" + why + ")", {},
                "run it on GPU machines, or import nccl-tests output with `calibrate "
                "import-nccl-tests`");
  }
  std::vector<std::string> hosts;  // distinct, in process order
  int per = 0;
  for (const Peer& p : peers) {
    if (std::find(hosts.begin(), hosts.end(), p.host) == hosts.end()) hosts.push_back(p.host);
    const auto on_host =
        std::count_if(peers.begin(), peers.end(), [&](const Peer& o) { return o.host == p.host; });
    const int l = a.gpus > 0 ? a.gpus : p.devices / static_cast<int>(on_host);
    if (per != 0 && l != per) {
      throw_infeasible(
          fmt::format("the processes would drive different GPU counts ({} and {})", per, l),
          {"", 0, "--gpus"}, "start as many processes on every machine, or pass --gpus");
    }
    per = l;
    if (per < 1 || (p.local + 1) * per > p.devices) {
      throw_infeasible(
          fmt::format("process {} on {} (local rank {}) would use devices {}..{}; it has {}",
                      &p - peers.data(), p.host, p.local, p.local * per, (p.local + 1) * per - 1,
                      p.devices),
          {"", 0, "--gpus"}, "start at most as many processes per machine as it has GPUs");
    }
  }
  kernels::NcclBenchOptions o;
  for (int i = 0; i < per; ++i) o.devices.push_back(group.local_index() * per + i);
  nccl_sizes(a, o);
  const std::string gpu_name = d.devices[static_cast<std::size_t>(o.devices.front())].name;
  const calib::Profile p = base_profile(a, a.gpu_preset, gpu_name, "--gpu-preset");
  std::string host_list;
  for (const std::string& h : hosts) host_list += (host_list.empty() ? "" : ", ") + h;
  kernels::NcclBenchProcesses procs;
  procs.index = group.index();
  procs.count = group.count();
  procs.nodes = static_cast<int>(hosts.size());
  procs.where = fmt::format("mpirun: world size {}, {} GPU{} per process, hosts {}", group.count(),
                            per, per == 1 ? "" : "s", host_list);
  procs.broadcast = [&group](std::string& bytes) { group.broadcast(bytes); };
  procs.allgather = [&group](const std::string& mine) { return group.allgather(mine); };
  if (group.index() == 0) {
    std::cerr << fmt::format("timing NCCL over {} GPUs: {}\n", per * group.count(), procs.where);
  }
  std::vector<calib::NcclTestsRun> runs;
  try {
    runs = kernels::run_nccl_bench(o, procs);
  } catch (const Error& e) {
    // The other processes may be waiting in NCCL or MPI for this one: end the job.
    std::cerr << "trainsim: process " << group.index() << ": " << e.what() << "\n";
    group.abort(e.exit_code());
    throw;
  } catch (const std::exception& e) {
    std::cerr << "trainsim: process " << group.index() << ": " << e.what() << "\n";
    group.abort(4);
    throw;
  }
  if (group.index() != 0) return 0;  // process 0 fits and writes
  return write_collective_fits(a, runs, p, gpu_name,
                               {fmt::format("trainsim calibrate nccl (NCCL {}) under {}",
                                            kernels::nccl_version(), procs.where)},
                               "nccl-measured");
}

int measure_nccl(const CalibrateArgs& a) {
  check_nccl_args(a);
  // Under mpirun (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK) with more than one process, the
  // processes join one communicator; otherwise one process drives the local GPUs with threads.
  const std::unique_ptr<kexec::ProcessGroup> group = kexec::make_process_group();
  if (group->count() > 1) return measure_nccl_mpi(a, *group);
  const kernels::DeviceReport d = require_device();
  kernels::NcclBenchOptions o;
  const int n = a.gpus > 0 ? a.gpus : static_cast<int>(d.devices.size());
  if (n > static_cast<int>(d.devices.size())) {
    throw_input(fmt::format("{} GPUs asked, {} present", n, d.devices.size()), {"", 0, "--gpus"});
  }
  for (int i = 0; i < n; ++i) o.devices.push_back(i);
  nccl_sizes(a, o);
  const std::string gpu_name = d.devices.front().name;
  const calib::Profile p = base_profile(a, a.gpu_preset, gpu_name, "--gpu-preset");
  const std::vector<calib::NcclTestsRun> runs = kernels::run_nccl_bench(o);
  return write_collective_fits(a, runs, p, gpu_name,
                               {"trainsim calibrate nccl (NCCL " + kernels::nccl_version() + ")"},
                               "nccl-measured");
}

// The GEMM dtype a fit is for: --dtype (checked here, before any file is blamed), else bf16.
std::string gemm_dtype_arg(const CalibrateArgs& a) {
  return a.dtype.empty() ? "bf16" : kernels::dtype_name(kernels::parse_dtype(a.dtype, "--dtype"));
}

// The GPU whose peaks a profile's samples are read against: --gpu-preset when given, else the
// profile's own `gpu`, each named as what it is when it is no preset.
void check_profile_gpu(const calib::Profile& p, const std::string& path,
                       const std::string& gpu_preset) {
  if (!gpu_preset.empty()) {
    if (!scen::gpu_preset(gpu_preset)) {
      throw_input("unknown GPU preset `" + gpu_preset + "` (" + preset_names() + ")",
                  {"", 0, "--gpu-preset"});
    }
    return;
  }
  if (!scen::gpu_preset(p.gpu)) {
    throw_input("the profile's GPU `" + p.gpu + "` is no GPU preset (" + preset_names() +
                    "): its datasheet peaks are unknown",
                {path, 0, "gpu"}, "pass --gpu-preset PRESET for the GPU the samples ran on");
  }
}

int refit(const CalibrateArgs& a) {
  const std::string dtype = gemm_dtype_arg(a);
  calib::Profile p = calib::load_profile(a.profile);
  if (p.kernels_measured.empty()) {
    throw_input("the profile has no kernels_measured samples", {a.profile, 0, "kernels_measured"});
  }
  check_profile_gpu(p, a.profile, a.gpu_preset);
  if (!a.gpu_preset.empty()) p.gpu = a.gpu_preset;
  try {
    fit_compute(p, dtype);
  } catch (const Error& e) {
    rethrow_in(e, a.profile);
  }
  write_profile(p, a.out);
  std::cout << "wrote " << a.out << "\n";
  return 0;
}

// A field of an execute record, or an error naming the file and the field.
const nlohmann::json& record_field(const nlohmann::json& j, const std::string& key,
                                   const std::string& path, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) {
    throw_input("missing `" + where + "`", {path, 0, where},
                "pass the JSON that `trainsim execute --format json -o FILE` writes");
  }
  return j.at(key);
}

// One execute record, read for `calibrate from-execute`.
struct Record {
  kexec::InMixSamples got;
  std::string gpu_name;                        // calibration.gpu, "" when absent
  std::map<std::string, std::size_t> kind_at;  // task kind name -> its index in task_kinds
  std::string text;                            // the file as read (to find one given twice)
};

// The in-mix samples of one execute record: its scenario rebuilt from the record's `config`
// (every key with its final value), its measured rank's Program, and its task kinds.
Record record_samples(const std::string& path) {
  Record rec;
  rec.text = read_input_file(path, "execute record", limits::kMaxResultBytes);
  const nlohmann::json doc =
      calib::parse_json_input(rec.text, path, "give the JSON record `trainsim execute` writes");
  const nlohmann::json& fidelity = record_field(doc, "fidelity", path, "fidelity");
  if (fidelity == "fake") {
    // The fake backend's times are its own 1 µs per op on a per-device clock: nothing ran.
    throw_input("a record of the fake backend (every op takes 1 µs): it measured nothing",
                {path, 0, "fidelity"}, "add records of `trainsim execute` on the profile's GPU");
  }
  if (!fidelity.is_string() || fidelity != "real") {
    throw_input("the document is a simulation (" + clip_name(fidelity.dump()) +
                    "), not a measurement: the record of `trainsim execute` says \"real\"",
                {path, 0, "fidelity"});
  }
  const nlohmann::json& iteration = record_field(doc, "iteration_time_s", path, "iteration_time_s");
  if (!iteration.is_number() || !(iteration.get<double>() > 0) ||
      !std::isfinite(iteration.get<double>())) {
    throw_input("`iteration_time_s` is " + clip_name(iteration.dump()) + ", not a time above 0",
                {path, 0, "iteration_time_s"});
  }
  const nlohmann::json& config = record_field(doc, "config", path, "config");
  if (!config.is_object()) throw_input("`config` is not an object", {path, 0, "config"});
  std::map<std::string, std::string> values;
  for (const auto& [key, value] : config.items()) {
    if (!value.is_string()) {
      throw_input("`config." + key + "` is not a string", {path, 0, "config." + key});
    }
    values[key] = value.get<std::string>();
  }
  // A key the record's full configuration lacks came after the record: read it as it ran then.
  for (const auto& [key, value] : scen::values_before_key_existed()) values.emplace(key, value);
  const scen::Scenario s = scen::build_scenario(values, path);
  scen::require_one_job(s, "calibrate from-execute");
  const exec::RunConfig cfg = scen::make_run_config(s);
  const plan::ProgramSet ps =
      plan::build_programs(cfg.model, cfg.cluster, cfg.parallel, cfg.training, cfg.opt);
  int rank = 0, iterations = 1;
  if (doc.contains("execution") && doc["execution"].is_object()) {
    const nlohmann::json& e = doc["execution"];
    if (e.contains("critical_rank") && e["critical_rank"].is_number_integer()) {
      rank = e["critical_rank"].get<int>();
    }
    if (e.contains("iterations") && e["iterations"].is_number_integer()) {
      iterations = std::max(1, e["iterations"].get<int>());
    }
  }
  const nlohmann::json& kinds = record_field(doc, "task_kinds", path, "task_kinds");
  if (!kinds.is_array()) throw_input("`task_kinds` is not an array", {path, 0, "task_kinds"});
  std::vector<kexec::MeasuredTaskKind> measured;
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    const std::string where = fmt::format("task_kinds[{}]", i);
    const nlohmann::json& k = kinds[i];
    const nlohmann::json& name = record_field(k, "name", path, where + ".name");
    const nlohmann::json& count = record_field(k, "count", path, where + ".count");
    const nlohmann::json& total = record_field(k, "total_s", path, where + ".total_s");
    if (!name.is_string() || !count.is_number_integer() || !total.is_number() ||
        count.get<long>() < 0 || !std::isfinite(total.get<double>()) || total.get<double>() < 0) {
      throw_input("a task kind needs a name, a count >= 0 and a total_s >= 0", {path, 0, where});
    }
    // A kind's tasks run one after another on one stream inside the iteration, so their time
    // per iteration is at most the iteration's (a total_s of 1e6 s was taken as measured).
    if (total.get<double>() > iteration.get<double>() * (1 + 1e-9)) {
      throw_input(fmt::format("task kind `{}` takes {} s per iteration, longer than the "
                              "iteration itself ({} s, iteration_time_s)",
                              name.get<std::string>(), total.dump(), iteration.dump()),
                  {path, 0, where + ".total_s"},
                  "a kind's tasks run on one stream within the iteration: the record was edited "
                  "or broken");
    }
    measured.push_back({name.get<std::string>(), count.get<long>(), total.get<double>()});
    rec.kind_at[measured.back().name] = i;
  }
  if (doc.contains("calibration") && doc["calibration"].is_object() &&
      doc["calibration"].contains("gpu") && doc["calibration"]["gpu"].is_string()) {
    rec.gpu_name = doc["calibration"]["gpu"].get<std::string>();
  }
  try {
    rec.got = kexec::in_mix_samples(ps, rank, measured, iterations);
  } catch (const Error& e) {
    throw_input(e.message(), {path, 0, "task_kinds"});
  }
  return rec;
}

// The field of a record that an in-mix sample came from: its task kind's total_s.
std::string record_field_of(const Record& rec, const calib::MeasuredKernel& k) {
  const std::string kind = k.label.substr(calib::kInMixLabelPrefix.size());
  const auto it = rec.kind_at.find(kind);
  return it == rec.kind_at.end() ? "task_kinds"
                                 : fmt::format("task_kinds[{}].total_s", it->second);
}

int from_execute(const CalibrateArgs& a) {
  const std::string dtype = gemm_dtype_arg(a);
  calib::Profile p = calib::load_profile(a.base);
  check_profile_gpu(p, a.base, "");
  const calib::Profile base = p;
  const calib::PeakRates peaks = peaks_of(p.gpu);
  // Samples faster than the GPU can run them are refused where they are, naming the file.
  const std::vector<calib::RateIssue> base_rates = calib::check_sample_rates(p.kernels_measured, peaks);
  for (const calib::RateIssue& r : base_rates) {
    if (!r.impossible) continue;
    throw_input("faster than the GPU can run it: " + r.what,
                {a.base, 0, fmt::format("kernels_measured[{}].median_s", r.index)},
                "a time, shape or GPU that is not what ran: re-measure or remove the sample");
  }
  for (const calib::RateIssue& r : base_rates) {
    std::cerr << fmt::format("warning: {}: `kernels_measured[{}]` ({}): {}\n", a.base, r.index,
                             p.kernels_measured[r.index].label, r.what);
  }
  std::size_t added = 0;
  std::map<std::string, std::string> seen;  // a record's text -> the path it was given as
  for (const std::string& path : a.files) {
    const Record rec = record_samples(path);
    if (const auto [it, fresh] = seen.emplace(rec.text, path); !fresh) {
      throw_input("the same record as " + it->second + ": given twice, its samples would weigh "
                                                        "twice in the fit",
                  {path, 0, ""}, "give each execute record once");
    }
    const kexec::InMixSamples& got = rec.got;
    const std::string& gpu_name = rec.gpu_name;
    for (const calib::RateIssue& r : calib::check_sample_rates(got.samples, peaks)) {
      const calib::MeasuredKernel& k = got.samples[r.index];
      const std::string kind = k.label.substr(calib::kInMixLabelPrefix.size());
      if (r.impossible) {
        throw_input("task kind `" + kind + "` ran faster than the GPU can run it: " + r.what,
                    {path, 0, record_field_of(rec, k)},
                    "a record of another GPU or an edited one: leave it out");
      }
      std::cerr << fmt::format("warning: {}: `{}`: task kind `{}`: {}\n", path,
                               record_field_of(rec, k), kind, r.what);
    }
    const std::string preset = preset_for_gpu_name(gpu_name);
    if (!gpu_name.empty() && !preset.empty() && preset != p.gpu) {
      throw_input(fmt::format("the record ran on {} (GPU preset {}), the profile is for {}",
                              gpu_name, preset, p.gpu),
                  {path, 0, "calibration.gpu"}, "add records of the profile's GPU only");
    }
    if (preset.empty()) {
      std::cerr << fmt::format(
          "warning: {}: `calibration.gpu`: the record ran on {}, which is no GPU preset's: it "
          "cannot be checked against the profile's {}\n",
          path, gpu_name.empty() ? "an unnamed GPU" : "`" + gpu_name + "`", p.gpu);
    }
    std::cout << fmt::format("{}: {} in-mix samples", path, got.samples.size());
    if (!got.skipped.empty()) std::cout << fmt::format(", {} task kinds without one", got.skipped.size());
    std::cout << "\n";
    for (const std::string& why : got.skipped) std::cout << "  skipped " << why << "\n";
    p.kernels_measured.insert(p.kernels_measured.end(), got.samples.begin(), got.samples.end());
    added += got.samples.size();
  }
  if (added == 0) {
    throw_input("the records give no kernel sample", {a.files.front(), 0, "task_kinds"});
  }
  try {
    fit_compute(p, dtype, true);
  } catch (const Error& e) {
    std::string files = a.base;  // the base's samples and the records' were fitted together
    for (const std::string& f : a.files) files += ", " + f;
    throw Error(e.kind(),
                "the fit of the base profile's samples with the records' failed: " + e.message(),
                {files, 0, e.where().field}, e.hint());
  }
  // The written profile is not the base: its compute fields were refitted on these records, and
  // every output that names it must say so (it was written as `datasheet-h200-sxm` v5 with the
  // provenance "built-in, not measured").
  std::string records;
  for (const std::string& f : a.files) records += (records.empty() ? "" : ", ") + f;
  const std::string suffix = "+from-execute";
  if (!p.name.ends_with(suffix)) p.name += suffix;
  p.provenance = fmt::format(
      "compute fields refitted by trainsim calibrate from-execute on {} in-mix kernel samples of "
      "the execute record{} {}{}; base profile {} v{} ({}): {}",
      added, a.files.size() == 1 ? "" : "s", records,
      base.kernels_measured.empty()
          ? std::string(" and no burst samples (GEMMs: the base's surface, scaled)")
          : fmt::format(" and the base's {} samples", base.kernels_measured.size()),
      base.name, base.version, a.base, base.provenance);
  write_profile(p, a.out);
  std::cout << fmt::format("wrote {} (profile {} v{})\n", a.out, p.name, p.version);
  return 0;
}

}  // namespace

CLI::App* add_calibrate_command(CLI::App& app, CalibrateArgs& a) {
  CLI::App* c = app.add_subcommand("calibrate", "Build a measured calibration profile");
  c->require_subcommand(1);
  a.import_nccl_tests = c->add_subcommand(
      "import-nccl-tests", "Fit alpha-beta per collective from nccl-tests output into a profile");
  a.import_nccl_tests->add_option("FILE", a.files, "nccl-tests output (all_reduce_perf, ...)")
      ->required()
      ->check(input_file());
  a.import_nccl_tests->add_option("--out", a.out, "Profile JSON to write")->required()
      ->check(output_file());
  auto* base = a.import_nccl_tests->add_option("--base", a.base, "Profile JSON to start from")
                   ->check(input_file());
  a.import_nccl_tests
      ->add_option("--gpu", a.gpu,
                   "GPU preset whose built-in profile to start from (default: from the files)")
      ->excludes(base);
  a.import_nccl_tests
      ->add_option("--ranks", a.ranks,
                   "Rank count of files that do not state one (checked against busbw/algbw)")
      ->check(CLI::Range(1, 1 << 26));
  a.kernels = c->add_subcommand(
      "kernels",
      "Time the compute kernels of a scenario and a shape grid on a local GPU, fit "
      "the compute fields of a profile");
  a.kernels->add_option("--scenario", a.scenario, "Scenario whose ops to time (exact shapes)")
      ->check(input_file());
  a.kernels->add_option("--set", a.sets, "Scenario override key.path=value (repeatable)");
  a.kernels->add_option("--gpu", a.device, "CUDA device index")->capture_default_str();
  a.kernels->add_option("--out", a.out, "Profile JSON to write (required)")->check(output_file());
  a.kernels->add_option("--dtype", a.dtype,
                        "GEMM dtype: bf16 | fp16 | fp8 | fp32 (default: scenario precision)");
  a.kernels->add_option("--repeats", a.repeats, "Timed launches per kernel (median kept)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  a.kernels->add_option("--warmup", a.warmup, "Untimed launches per kernel")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  a.kernels->add_flag("--no-grid", a.no_grid,
                      "Only the scenario's ops and the grid's GEMMs (the GEMM surface always needs "
                      "the grid's shapes), not the rest of the standard grid");
  auto* kbase = a.kernels->add_option("--base", a.base, "Profile JSON to start from")
                    ->check(input_file());
  a.kernels
      ->add_option("--gpu-preset", a.gpu_preset,
                   "GPU preset for peaks and the base profile (default: from the device name)")
      ->excludes(kbase);

  a.nccl = c->add_subcommand(
      "nccl",
      "Time collectives with NCCL over the local GPUs (a thread per GPU), or under mpirun over "
      "every process's GPUs (one communicator), fit alpha-beta");
  a.nccl->add_option("--out", a.out, "Profile JSON to write (required)")->check(output_file());
  a.nccl->add_option("--gpus", a.gpus,
                     "Use the first N GPUs (default: all); under mpirun, N GPUs per process "
                     "(default: the machine's GPUs / its processes)");
  a.nccl->add_option("--min-bytes", a.min_bytes, "Smallest size (8, 64K, 1M, ...)")
      ->capture_default_str();
  a.nccl->add_option("--max-bytes", a.max_bytes, "Largest size")->capture_default_str();
  a.nccl->add_option("--repeats", a.repeats, "Timed launches per size")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  a.nccl->add_option("--warmup", a.warmup, "Untimed launches per size")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  auto* nbase =
      a.nccl->add_option("--base", a.base, "Profile JSON to start from")->check(input_file());
  a.nccl->add_option("--gpu-preset", a.gpu_preset, "GPU preset of the base profile")
      ->excludes(nbase);

  a.refit = c->add_subcommand(
      "refit", "Fit the compute fields again from a profile's kernels_measured samples");
  a.refit->add_option("PROFILE", a.profile, "Profile JSON with kernels_measured")
      ->required()
      ->check(input_file());
  a.refit->add_option("--out", a.out, "Profile JSON to write")->required()->check(output_file());
  a.refit->add_option("--dtype", a.dtype, "GEMM dtype whose samples to fit (default bf16)");
  a.refit->add_option("--gpu-preset", a.gpu_preset,
                      "GPU preset for the peaks (default: the "
                      "profile's gpu)");

  a.from_execute = c->add_subcommand(
      "from-execute",
      "Add the kernel times of `trainsim execute` records (kernels timed in the mix of a "
      "training step) to a profile's samples and fit its compute fields again");
  a.from_execute->add_option("RECORD", a.files, "execute JSON (trainsim execute --format json)")
      ->required()
      ->check(input_file());
  a.from_execute->add_option("--base", a.base, "Profile JSON to add the samples to")
      ->required()
      ->check(input_file());
  a.from_execute->add_option("--out", a.out, "Profile JSON to write")->required()
      ->check(output_file());
  a.from_execute->add_option("--dtype", a.dtype, "GEMM dtype whose samples to fit (default bf16)");
  return c;
}

int run_calibrate_command(const CalibrateArgs& a) {
  if (*a.import_nccl_tests) return import_nccl_tests(a);
  if (*a.from_execute) return from_execute(a);
  if (*a.kernels) return measure_kernels(a);
  if (*a.refit) return refit(a);
  return measure_nccl(a);
}

}  // namespace trainsim::cli
