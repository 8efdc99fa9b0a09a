// `trainsim calibrate` run as a process: import-nccl-tests writes a profile whose measured α–β
// reproduce the imported times, and the measuring subcommands refuse to run without a GPU.
#include <gtest/gtest.h>

#include "tests/support/cli_runner.h"
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "calibrate/nccl_tests.h"
#include "calibrate/profile.h"
#include "kernels/device_info.h"

namespace {

using Out = trainsim::testing::CliRun;
using trainsim::testing::trainsim;

const std::string kData = std::string(TRAINSIM_SOURCE_DIR) + "/tests/calibrate/data/";

TEST(CalibrateCli, ImportNcclTestsWritesAReproducingProfile) {
  const std::string out = ::testing::TempDir() + "imported_profile.json";
  const Out r = trainsim("calibrate import-nccl-tests " + kData + "h100x8_all_reduce.txt " +
                         kData + "mpirun_2node_reduce_scatter.txt " + kData +
                         "all_gather_perf.log --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("all_reduce"), std::string::npos) << r.out;
  // The GPU came from the rank lines, so the H100 datasheet profile is the base.
  const trainsim::calib::Profile p = trainsim::calib::load_profile(out);
  EXPECT_EQ(p.gpu, "h100-sxm");
  EXPECT_DOUBLE_EQ(p.gemm_peak_efficiency,
                   trainsim::calib::builtin_profile("h100-sxm").gemm_peak_efficiency);
  ASSERT_EQ(p.collectives_measured.size(), 3u);
  // NVLink bandwidth from the single-node all-reduce, not the two-node reduce-scatter.
  EXPECT_EQ(p.collectives_measured[0].op, "all_reduce");
  EXPECT_DOUBLE_EQ(p.nvlink.busbw_Bps, p.collectives_measured[0].busbw_Bps);
  EXPECT_NEAR(p.nvlink.busbw_Bps, 482e9, 0.03 * 482e9);
  for (const auto& m : p.collectives_measured) {
    const double factor = trainsim::calib::nccl_tests_busbw_factor(m.op, m.ranks);
    for (const auto& [size, time_us] : m.samples) {
      if (size < trainsim::calib::kFitMinBytes) continue;
      EXPECT_NEAR((m.alpha_s + size * factor / m.busbw_Bps) * 1e6 / time_us, 1.0, 0.05)
          << m.op << " " << m.ranks << " at " << size;
    }
  }
  const auto& pv = p.measured_provenance;
  EXPECT_EQ(pv.source_files.size(), 3u);
  EXPECT_EQ(pv.gpu_name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(pv.nccl_tests_version.rfind("# nThread 1 nGpus 8", 0), 0u);
  EXPECT_NE(pv.command_line.find("import-nccl-tests"), std::string::npos);
  EXPECT_EQ(pv.date.size(), 20u);  // 2026-11-30T08:00:00Z
}

TEST(CalibrateCli, ImportStartsFromBaseProfileOrGpu) {
  const std::string base = ::testing::TempDir() + "base_profile.json";
  trainsim::calib::Profile b = trainsim::calib::builtin_profile("a100-80gb");
  b.kernel_overhead_s = 7e-6;
  std::ofstream(base) << trainsim::calib::profile_to_json(b);
  const std::string out = ::testing::TempDir() + "from_base.json";
  Out r = trainsim("calibrate import-nccl-tests " + kData + "broadcast_perf_a100_old.txt --base " +
                   base + " --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  trainsim::calib::Profile p = trainsim::calib::load_profile(out);
  EXPECT_DOUBLE_EQ(p.kernel_overhead_s, 7e-6);
  EXPECT_DOUBLE_EQ(p.nvlink.busbw_Bps, 230e9);  // no all-reduce/all-gather: kept
  EXPECT_EQ(p.collectives_measured.at(0).op, "broadcast");
  r = trainsim("calibrate import-nccl-tests " + kData + "broadcast_perf_a100_old.txt --gpu a800 " +
               "--out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(trainsim::calib::load_profile(out).gpu, "a800");
}

TEST(CalibrateCli, ImportErrorsExitTwoWithFileAndLine) {
  const std::string bad = ::testing::TempDir() + "all_reduce_perf_bad.txt";
  std::ofstream(bad) << "# nThread 1 nGpus 8 minBytes 8 maxBytes 16\n"
                        "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  "
                        "algbw  busbw  #wrong\n"
                        "   8  2  float  sum  -1  14.2  0.00  0.00  0  oops  0.00  0.00  0\n";
  const Out r = trainsim("calibrate import-nccl-tests " + bad + " --gpu h100-sxm --out " +
                         ::testing::TempDir() + "never.json");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("all_reduce_perf_bad.txt"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("3"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("column 10 (time)"), std::string::npos) << r.err;
  EXPECT_EQ(trainsim("calibrate import-nccl-tests --out x.json").code, 2);
  const Out mixed = trainsim("calibrate import-nccl-tests " + kData + "job-4411.out " + kData +
                             "broadcast_perf_a100_old.txt --out " + ::testing::TempDir() +
                             "never.json");
  EXPECT_EQ(mixed.code, 2);
  EXPECT_NE(mixed.err.find("A100-SXM4-80GB"), std::string::npos) << mixed.err;
}

// The profile JSON a command wrote.
nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// One synthetic file per real-world defect, each imported with its skipped lines reported on
// stderr (by kind, with line numbers) and its rows in the profile.
TEST(CalibrateCli, ImportReportsWhatItSkipsPerDefect) {
  struct Case {
    const char* file;
    std::vector<std::string> reported;  // stderr lines, after "note: FILE: "
    std::size_t samples;
    const char* op;
    int ranks;
  };
  const Case cases[] = {
      {"all_reduce_perf_size0.txt", {"skipped 2 rows of size 0 (lines 17, 18)"}, 11, "all_reduce",
       8},
      {"readme_all_reduce_perf.md.txt",
       {"skipped 3 truncated lines (\"...\") (lines 21, 30, 33)",
        "skipped 1 launcher or shell line (not nccl-tests output) (line 1)"},
       14, "all_reduce", 8},
      {"all_gather_perf_openmpi_noise.log",
       {"skipped 3 NCCL log lines (lines 30, 31, 44)",
        "skipped 10 launcher or shell lines (not nccl-tests output) (lines 1, 2, 3, 4, 6 and 5 "
        "more)"},
       12, "all_gather", 16},
  };
  for (const Case& c : cases) {
    const std::string out = trainsim::testing::temp_path(std::string(c.file) + ".json");
    const Out r = trainsim("calibrate import-nccl-tests " + kData + c.file + " --out " + out);
    ASSERT_EQ(r.code, 0) << c.file << "\n" << r.err;
    for (const std::string& line : c.reported) {
      EXPECT_TRUE(has(r.err, "note: " + kData + c.file + ": " + line + "\n"))
          << c.file << " should report: " << line << "\n" << r.err;
    }
    const nlohmann::json j = read_json(out);
    ASSERT_EQ(j["collectives_measured"].size(), 1u) << c.file;
    const nlohmann::json& m = j["collectives_measured"][0];
    EXPECT_EQ(m["op"], c.op);
    EXPECT_EQ(m["ranks"], c.ranks);
    EXPECT_EQ(m["samples"].size(), c.samples) << c.file;
    for (const auto& s : m["samples"]) EXPECT_GT(s[0].get<double>(), 0) << c.file;
    EXPECT_TRUE(m["busbw_Bps"].is_number()) << c.file;
    EXPECT_EQ(j["collectives_measured_provenance"]["gpu_name"], "NVIDIA H100 80GB HBM3");
  }
  // A clean file reports nothing skipped.
  const Out clean = trainsim("calibrate import-nccl-tests " + kData + "h100x8_all_reduce.txt" +
                             " --out " + trainsim::testing::temp_path("clean.json"));
  ASSERT_EQ(clean.code, 0) << clean.err;
  EXPECT_FALSE(has(clean.err, "skipped")) << clean.err;
}

TEST(CalibrateCli, ImportTakesRanksWhereTheFileDoesNotSay) {
  const std::string file = kData + "sendrecv_perf_no_ranks.txt";
  const std::string out = trainsim::testing::temp_path("sendrecv.json");
  const Out refused = trainsim("calibrate import-nccl-tests " + file + " --gpu h100-sxm --out " +
                               out);
  EXPECT_EQ(refused.code, 2);
  EXPECT_TRUE(has(refused.err, file + ": cannot tell the rank count")) << refused.err;
  EXPECT_TRUE(has(refused.err, "pass --ranks N")) << refused.err;
  const Out r =
      trainsim("calibrate import-nccl-tests " + file + " --ranks 2 --gpu h100-sxm --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json m = read_json(out)["collectives_measured"][0];
  EXPECT_EQ(m["op"], "sendrecv");
  EXPECT_EQ(m["ranks"], 2);
  EXPECT_EQ(m["samples"].size(), 15u);
  // No GPU in the file and none given: refused, naming the file.
  const Out no_gpu = trainsim("calibrate import-nccl-tests " + file + " --ranks 2 --out " + out);
  EXPECT_EQ(no_gpu.code, 2);
  EXPECT_TRUE(has(no_gpu.err, file + ": cannot tell the GPU")) << no_gpu.err;
  EXPECT_EQ(trainsim("calibrate import-nccl-tests " + file + " --ranks 0 --out " + out).code, 2);
}

TEST(CalibrateCli, ImportRefusesARankCountTheBusbwRatioContradicts) {
  const std::string file = kData + "all_reduce_perf_32ranks_cut.txt";
  const std::string out = trainsim::testing::temp_path("cut.json");
  const Out refused = trainsim("calibrate import-nccl-tests " + file + " --out " + out);
  EXPECT_EQ(refused.code, 2);
  EXPECT_TRUE(has(refused.err, file + ":25: `busbw`: the file states 5 ranks")) << refused.err;
  EXPECT_TRUE(has(refused.err, "implies 32 ranks for all_reduce (busbw = algbw x 2(n-1)/n)"))
      << refused.err;
  EXPECT_TRUE(has(refused.err, "pass --ranks 32")) << refused.err;
  EXPECT_FALSE(std::ifstream(out).good()) << "nothing is written on a refusal";
  const Out r = trainsim("calibrate import-nccl-tests " + file + " --ranks 32 --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.err, "warning: " + file + ": --ranks 32 replaces the 5 ranks")) << r.err;
  const nlohmann::json j = read_json(out);
  EXPECT_EQ(j["collectives_measured"][0]["ranks"], 32);
  // A 32-rank job over several hosts: the NVLink bandwidth of the base profile is kept.
  EXPECT_TRUE(has(r.out, "nvlink_busbw_Bps: kept")) << r.out;
}

TEST(CalibrateCli, ImportTakesTheGpuFromTheFileAndWarnsOnADifference) {
  const std::string out = trainsim::testing::temp_path("gpu.json");
  // The 40 GB A100 has its own preset: the file's GPU decides.
  const Out a100_40 = trainsim("calibrate import-nccl-tests " + kData +
                               "all_reduce_perf_a100_40gb.txt --out " + out);
  ASSERT_EQ(a100_40.code, 0) << a100_40.err;
  EXPECT_EQ(read_json(out)["gpu"], "a100-40gb");
  for (const auto& [file, name] :
       {std::pair<std::string, std::string>{"all_reduce_perf_a100_64gb.txt",
                                            "NVIDIA A100-SXM-64GB"}}) {
    // No built-in profile for this GPU: refused without --gpu, naming file, line and GPU.
    const Out refused = trainsim("calibrate import-nccl-tests " + kData + file + " --out " + out);
    EXPECT_EQ(refused.code, 2) << file;
    EXPECT_TRUE(has(refused.err, kData + file + ":5: ran on `" + name +
                                     "`, which has no built-in GPU profile"))
        << refused.err;
    // With --gpu it imports, with a warning that says the profile is another GPU's.
    const Out r = trainsim("calibrate import-nccl-tests " + kData + file +
                           " --gpu a100-80gb --out " + out);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(has(r.err, "warning: " + kData + file + ":5: ran on `" + name +
                               "`, which has no built-in GPU profile; the profile starts from "
                               "--gpu a100-80gb"))
        << r.err;
    const nlohmann::json j = read_json(out);
    EXPECT_EQ(j["gpu"], "a100-80gb");
    EXPECT_EQ(j["collectives_measured_provenance"]["gpu_name"], name);
  }
  // An unknown --gpu is named as such.
  const Out unknown = trainsim("calibrate import-nccl-tests " + kData +
                               "h100x8_all_reduce.txt --gpu h100 --out " + out);
  EXPECT_EQ(unknown.code, 2);
  EXPECT_TRUE(has(unknown.err, "`--gpu`: unknown GPU preset `h100` (a100-80gb, a100-40gb, a800, "
                               "h100-sxm, h800, h200-sxm, b200, b300, gb200, gb300)"))
      << unknown.err;
  // A GPU with a profile, and --gpu naming another: imported as asked, with a warning.
  const Out r = trainsim("calibrate import-nccl-tests " + kData +
                         "h100x8_all_reduce.txt --gpu h200-sxm --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.err, "warning: " + kData + "h100x8_all_reduce.txt:5: ran on `NVIDIA H100 "
                                               "80GB HBM3` (h100-sxm), but --gpu h200-sxm makes "
                                               "it a h200-sxm profile"))
      << r.err;
  EXPECT_EQ(read_json(out)["gpu"], "h200-sxm");
  // Without --gpu the file's GPU decides, silently.
  const Out same = trainsim("calibrate import-nccl-tests " + kData +
                            "h100x8_all_reduce.txt --gpu h100-sxm --out " + out);
  ASSERT_EQ(same.code, 0) << same.err;
  EXPECT_FALSE(has(same.err, "warning")) << same.err;
}

TEST(CalibrateCli, ImportKeepsASingleSizeAsSamplesWithoutAFit) {
  const std::string file = kData + "reduce_scatter_perf_single_size.txt";
  const std::string out = trainsim::testing::temp_path("single.json");
  const Out r = trainsim("calibrate import-nccl-tests " + file + " " + kData +
                         "h100x8_all_reduce.txt --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.err, "note: " + file + ": reduce_scatter over 8 ranks was measured at a "
                                           "single size (1073741824 B): kept as samples "
                                           "without an alpha-beta fit"))
      << r.err;
  EXPECT_TRUE(has(r.out, "one size: no fit")) << r.out;
  const nlohmann::json j = read_json(out);
  ASSERT_EQ(j["collectives_measured"].size(), 2u);
  const nlohmann::json& m = j["collectives_measured"][0];
  EXPECT_EQ(m["op"], "reduce_scatter");
  EXPECT_TRUE(m["alpha_s"].is_null());
  EXPECT_TRUE(m["busbw_Bps"].is_null());
  ASSERT_EQ(m["samples"].size(), 1u);
  EXPECT_EQ(m["samples"][0][0].get<double>(), 1073741824.0);
  // The all-reduce beside it is fitted and sets the NVLink bandwidth; the profile loads.
  EXPECT_TRUE(j["collectives_measured"][1]["busbw_Bps"].is_number());
  const trainsim::calib::Profile p = trainsim::calib::load_profile(out);
  EXPECT_DOUBLE_EQ(p.nvlink.busbw_Bps, p.collectives_measured[1].busbw_Bps);
  EXPECT_EQ(p.collectives_measured[0].busbw_Bps, 0);
}

// A run whose sizes are all below 1 MiB (the tester's `awk` cut of h100x8_all_reduce.txt) is not
// fitted: the note says why, alpha and busbw are null, and the base profile's NVLink bandwidth
// stays (fitted on the LL/LL128 sizes it was overwritten with 54 GB/s, ~9x too low).
TEST(CalibrateCli, ImportFitsNothingBelowOneMiB) {
  std::istringstream in(trainsim::testing::slurp(kData + "h100x8_all_reduce.txt"));
  const std::string small = trainsim::testing::temp_path("all_reduce_small.txt");
  {
    std::ofstream f(small);
    for (std::string line; std::getline(in, line);) {
      std::istringstream cells(line);
      long size = 0, count = 0;
      if (line.find('#') == std::string::npos && (cells >> size >> count) && size > 524288) {
        continue;
      }
      f << line << "\n";
    }
  }
  const std::string out = trainsim::testing::temp_path("small.json");
  const Out r = trainsim("calibrate import-nccl-tests " + small + " --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.err, "note: " + small + ": all_reduce over 8 ranks has 0 sizes of at least "
                                            "1 MiB (1048576 B) among 17 sizes: kept as samples "
                                            "without an alpha-beta fit"))
      << r.err;
  EXPECT_TRUE(has(r.err, "it prices nothing and sets no NVLink bandwidth")) << r.err;
  EXPECT_TRUE(has(r.out, "fewer than two sizes >= 1 MiB: no fit")) << r.out;
  EXPECT_TRUE(has(r.out, "nvlink_busbw_Bps: kept")) << r.out;
  const nlohmann::json j = read_json(out);
  EXPECT_TRUE(j["collectives_measured"][0]["alpha_s"].is_null());
  EXPECT_TRUE(j["collectives_measured"][0]["busbw_Bps"].is_null());
  EXPECT_EQ(j["collectives_measured"][0]["samples"].size(), 17u);
  EXPECT_EQ(j["collectives"]["nvlink_busbw_Bps"].get<double>(),
            trainsim::calib::builtin_profile("h100-sxm").nvlink.busbw_Bps);
}

// The text of h100x8_all_reduce.txt with the lines `drop` says to drop, written to `name`.
std::string edited_copy(const std::string& name, const std::function<bool(const std::string&)>& drop,
                        const std::string& replace_from = "", const std::string& replace_to = "") {
  std::istringstream in(trainsim::testing::slurp(kData + "h100x8_all_reduce.txt"));
  const std::string path = trainsim::testing::temp_path(name);
  std::ofstream f(path);
  for (std::string line; std::getline(in, line);) {
    if (drop(line)) continue;
    if (!replace_from.empty() && line.find(replace_from) != std::string::npos) {
      line.replace(line.find(replace_from), replace_from.size(), replace_to);
    }
    f << line << "\n";
  }
  return path;
}

// Hosts unknown, NVLink never set (docs: "the hosts are then unknown, so such a run never sets
// the NVLink bandwidth"): 5 of 8 rank lines imported with --ranks 8, and a table with no rank
// lines whose count comes from busbw/algbw (it could be 8 servers of one GPU). Both set it
// before, as 8 ranks or fewer were taken for one server.
TEST(CalibrateCli, ImportOfUnknownHostsKeepsTheNvlinkBandwidth) {
  const double builtin = trainsim::calib::builtin_profile("h100-sxm").nvlink.busbw_Bps;
  const std::string cut = edited_copy("all_reduce_5_rank_lines.txt", [](const std::string& l) {
    return l.find("#  Rank  5") == 0 || l.find("#  Rank  6") == 0 || l.find("#  Rank  7") == 0;
  });
  const std::string out = trainsim::testing::temp_path("unknown_hosts.json");
  Out r = trainsim("calibrate import-nccl-tests " + cut + " --ranks 8 --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.err, "note: " + cut + ":1: all_reduce over 8 ranks sets no NVLink bandwidth: "
                                          "its hosts are unknown"))
      << r.err;
  EXPECT_TRUE(has(r.out, "nvlink_busbw_Bps: kept (all_reduce over 8 ranks: hosts unknown)"))
      << r.out;
  nlohmann::json j = read_json(out);
  EXPECT_EQ(j["collectives"]["nvlink_busbw_Bps"].get<double>(), builtin);
  EXPECT_NEAR(j["collectives_measured"][0]["busbw_Bps"].get<double>(), 482e9, 0.03 * 482e9);

  const std::string bare = edited_copy(
      "all_reduce_no_rank_lines.txt",
      [](const std::string& l) { return l.find("#  Rank") == 0; }, "nGpus 8", "nGpus 1");
  r = trainsim("calibrate import-nccl-tests " + bare + " --gpu h100-sxm --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.err, "gives 8 ranks")) << r.err;
  EXPECT_TRUE(has(r.out, "nvlink_busbw_Bps: kept (all_reduce over 8 ranks: hosts unknown)"))
      << r.out;
  EXPECT_EQ(read_json(out)["collectives"]["nvlink_busbw_Bps"].get<double>(), builtin);

  // One process that drove all 8 GPUs (nGpus 8, no rank lines) was on one server: it sets it.
  const std::string one_process = edited_copy(
      "all_reduce_one_process.txt", [](const std::string& l) { return l.find("#  Rank") == 0; });
  r = trainsim("calibrate import-nccl-tests " + one_process + " --gpu h100-sxm --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  j = read_json(out);
  EXPECT_EQ(j["collectives"]["nvlink_busbw_Bps"], j["collectives_measured"][0]["busbw_Bps"]);
}

// A log of two runs (8 GPUs of one server at 480 GB/s, then 16 GPUs of two at 45 GB/s) imports
// as two runs: two fits, the NVLink bandwidth from the single-server one, with or without
// --ranks 8. It was refused with a wrong hint, or with --ranks 8 fitted as one (88.5 % error,
// NVLink 366.9 GB/s).
TEST(CalibrateCli, ImportSplitsALogOfTwoRuns) {
  const std::string file = kData + "all_reduce_perf_8_then_16_ranks.log";
  for (const std::string ranks : {"", " --ranks 8"}) {
    const std::string out = trainsim::testing::temp_path("two_runs.json");
    const Out r = trainsim("calibrate import-nccl-tests " + file + ranks + " --out " + out);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(has(r.err, "note: " + file + ": holds 2 nccl-tests runs, starting at lines 1 "
                                             "(all_reduce, 8 ranks), 51 (all_reduce, 16 ranks): "
                                             "each is imported as its own run"))
        << r.err;
    // --ranks 8 fits the first run; the second says its own count, naming where it starts.
    EXPECT_EQ(has(r.err, "warning: " + file + ":51: --ranks 8 not used: the file states 16 ranks"),
              !ranks.empty())
        << r.err;
    const trainsim::calib::Profile p = trainsim::calib::load_profile(out);
    ASSERT_EQ(p.collectives_measured.size(), 2u);
    EXPECT_EQ(p.collectives_measured[0].ranks, 8);
    EXPECT_EQ(p.collectives_measured[1].ranks, 16);
    EXPECT_NEAR(p.collectives_measured[1].busbw_Bps, 45e9, 0.001 * 45e9);
    EXPECT_DOUBLE_EQ(p.nvlink.busbw_Bps, p.collectives_measured[0].busbw_Bps);
    EXPECT_NEAR(p.nvlink.busbw_Bps, 482e9, 0.03 * 482e9);
  }
}

// `calibrate from-execute` on the H200 record of 2026-12-04 (docs/validation/h200-2026-12-04):
// three configurations' execute records (the fused runs: 31 task kinds each, all compute kinds
// giving a sample on one GPU) added to the record's burst profile. Each sample is labelled
// "exec:<task kind>"; the GEMMs' in-mix factor is reported; the profile simulates; refitting
// it gives the same constants (the fit is a function of its samples alone).
TEST(CalibrateCli, FromExecuteAddsInMixSamplesAndRefitsThem) {
  const std::string rec = "docs/validation/h200-2026-12-04/";
  const std::string out = ::testing::TempDir() + "in_mix_profile.json";
  const std::string again = ::testing::TempDir() + "in_mix_refit.json";
  const Out r = trainsim("calibrate from-execute " + rec + "fused/gpt-1.3b/real.json " + rec +
                         "fused/llama-gqa/real.json " + rec + "fused/llama-8k/real.json --base " +
                         rec + "profile-h200.json --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("fused/llama-8k/real.json: 31 in-mix samples"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GEMMs timed in the mix: 45 samples at"), std::string::npos) << r.out;
  const trainsim::calib::Profile base = trainsim::calib::load_profile(rec + "profile-h200.json");
  const trainsim::calib::Profile p = trainsim::calib::load_profile(out);
  std::size_t in_mix = 0;
  for (const auto& k : p.kernels_measured) in_mix += trainsim::calib::timed_in_mix(k);
  EXPECT_EQ(in_mix, 93u);
  EXPECT_EQ(p.kernels_measured.size(), base.kernels_measured.size() + 93);
  EXPECT_NE(p.provenance.find("fused/gpt-1.3b/real.json"), std::string::npos);
  // These runs' kernels ran slower in the mix than in the calibration's bursts.
  EXPECT_LT(p.gemm_peak_efficiency, base.gemm_peak_efficiency);
  EXPECT_LT(p.attention_fwd_efficiency, base.attention_fwd_efficiency);
  EXPECT_DOUBLE_EQ(p.gemm_half_dim, base.gemm_half_dim);
  const Out refit = trainsim("calibrate refit " + out + " --out " + again);
  ASSERT_EQ(refit.code, 0) << refit.err;
  const trainsim::calib::Profile q = trainsim::calib::load_profile(again);
  EXPECT_DOUBLE_EQ(q.gemm_peak_efficiency, p.gemm_peak_efficiency);
  EXPECT_DOUBLE_EQ(q.attention_bwd_efficiency, p.attention_bwd_efficiency);
  const Out run = trainsim("run scenarios/megascale-175b-12288.yaml --set cluster.gpu=h200-sxm "
                           "--set cluster.gpus=64 --set calibration.profile=" + out);
  EXPECT_EQ(run.code, 0) << run.err;
}

// What from-execute refuses, each exit 2 naming the file and the field: a simulation instead of
// a measurement, a record of another configuration (a task count changed), a record of another
// GPU than the profile's, and a record of the fake backend (its 1 µs per op measured nothing; it
// was read with the GPU "fake GPU" against an H200 profile, and only its GEMMs, shorter than the
// burst surface's fixed cost, failed the fit).
TEST(CalibrateCli, FromExecuteRefusesWhatIsNotAMeasurementOfTheProfilesGpu) {
  const std::string rec = "docs/validation/h200-2026-12-04/";
  const std::string dir = ::testing::TempDir();
  const std::string base = rec + "profile-h200.json";
  const std::string out = dir + "refused_profile.json";
  Out r = trainsim("calibrate from-execute " + rec + "fused/gpt-1.3b/sim.json --base " + base +
                   " --out " + out);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("fused/gpt-1.3b/sim.json: `fidelity`: the document is a simulation"),
            std::string::npos)
      << r.err;

  nlohmann::json doc = nlohmann::json::parse(trainsim::testing::slurp(rec + "fused/gpt-1.3b/real.json"));
  doc["task_kinds"][0]["count"] = doc["task_kinds"][0]["count"].get<long>() + 1;
  const std::string other = dir + "other_config_real.json";
  std::ofstream(other) << doc.dump();
  r = trainsim("calibrate from-execute " + other + " --base " + base + " --out " + out);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(other + ": `task_kinds`"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not the same configuration"), std::string::npos) << r.err;

  r = trainsim("calibrate from-execute " + rec + "fused/gpt-1.3b/real.json --base " + kData +
               "kernels_h100_synthetic.json --out " + out);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("`calibration.gpu`: the record ran on NVIDIA H200 (GPU preset h200-sxm), "
                       "the profile is for h100-sxm"),
            std::string::npos)
      << r.err;

  const std::string fake = dir + "fake_real.json";
  const std::string tiny =
      "scenarios/megascale-175b-12288.yaml --set cluster.gpus=8 --set model.layers=4 --set "
      "model.hidden=256 --set model.heads=8 --set model.seq_len=128 --set model.vocab=1024 "
      "--set parallel.vpp=1 --set parallel.tp=2 --set parallel.pp=2 --set parallel.dp=2 --set "
      "training.global_batch=8 --set training.micro_batch=1";
  ASSERT_EQ(trainsim("execute " + tiny + " --backend fake --iterations 1 --warmup 0 --out " + fake).code, 0);
  r = trainsim("calibrate from-execute " + fake + " --base " + base + " --out " + out);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(fake + ": `fidelity`: a record of the fake backend"), std::string::npos)
      << r.err;
}

// A record that lost a task kind (41 samples instead of 42, silently), one whose kind takes
// longer than the iteration (1e6 s, taken as measured), and one record given twice (its weight
// doubled) are refused, each naming the file.
TEST(CalibrateCli, FromExecuteRefusesAnIncompleteOrRepeatedRecord) {
  const std::string rec = "docs/validation/h200-2026-12-04/";
  const std::string base = rec + "profile-h200.json";
  const std::string real = rec + "gpt-1.3b/real.json";
  const std::string out = trainsim::testing::temp_path("refused_record.json");
  const nlohmann::json doc = nlohmann::json::parse(trainsim::testing::slurp(real));
  std::size_t qkv = 0;
  while (doc["task_kinds"][qkv]["name"] != "qkv fwd") ++qkv;

  nlohmann::json lost = doc;
  lost["task_kinds"].erase(qkv);
  const std::string a = trainsim::testing::temp_path("lost_kind_real.json");
  std::ofstream(a) << lost.dump();
  Out r = trainsim("calibrate from-execute " + a + " --base " + base + " --out " + out);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find(a + ": `task_kinds`: task kind `qkv fwd`"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("is not in the record"), std::string::npos) << r.err;

  nlohmann::json slow = doc;
  slow["task_kinds"][qkv]["total_s"] = 1e6;
  const std::string b = trainsim::testing::temp_path("slow_kind_real.json");
  std::ofstream(b) << slow.dump();
  r = trainsim("calibrate from-execute " + b + " --base " + base + " --out " + out);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find(b + ": `task_kinds[" + std::to_string(qkv) + "].total_s`"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("longer than the iteration"), std::string::npos) << r.err;

  r = trainsim("calibrate from-execute " + real + " ./" + real + " --base " + base + " --out " +
               out);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("./" + real + ": the same record as " + real), std::string::npos) << r.err;
}

// A sample faster than the GPU can run it is refused, naming the file and the sample: the
// record's qkv GEMM (2048 x 4608 x 12288, 2.3e11 FLOP) at 1 ps refitted to e_max 2.8e15 (written
// as 1), d0 8192 and an rms error of 99 %, and exited 0; a GEMM whose `flops` is 10 x its shape's
// was read without a word. In an execute record, a task kind that ran faster than the GPU is
// refused naming the record's field; a memory-bound one above the HBM bandwidth is a warning
// (timed in the mix, its inputs may have stayed in L2).
TEST(CalibrateCli, SamplesFasterThanTheGpuAreRefused) {
  const std::string rec = "docs/validation/h200-2026-12-04/";
  const std::string out = trainsim::testing::temp_path("fast_refit.json");
  nlohmann::json prof = nlohmann::json::parse(trainsim::testing::slurp(rec + "profile-h200.json"));
  ASSERT_EQ(prof["kernels_measured"][4]["label"], "qkv");
  prof["kernels_measured"][4]["median_s"] = 1e-12;
  const std::string fast = trainsim::testing::temp_path("fast_profile.json");
  std::ofstream(fast) << prof.dump();
  Out r = trainsim("calibrate refit " + fast + " --out " + out);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find(fast + ": `kernels_measured[4].median_s`: faster than the GPU can run it"),
            std::string::npos)
      << r.err;
  r = trainsim("calibrate from-execute " + rec + "fused/gpt-1.3b/real.json --base " + fast +
               " --out " + out);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find(fast + ": `kernels_measured[4].median_s`"), std::string::npos) << r.err;

  prof = nlohmann::json::parse(trainsim::testing::slurp(rec + "profile-h200.json"));
  prof["kernels_measured"][4]["flops"] = 10 * prof["kernels_measured"][4]["flops"].get<double>();
  const std::string tenfold = trainsim::testing::temp_path("tenfold_profile.json");
  std::ofstream(tenfold) << prof.dump();
  r = trainsim("calibrate refit " + tenfold + " --out " + out);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find(tenfold + ": `kernels_measured[4].flops`"), std::string::npos) << r.err;

  nlohmann::json doc =
      nlohmann::json::parse(trainsim::testing::slurp(rec + "fused/gpt-1.3b/real.json"));
  std::size_t qkv = 0;
  while (doc["task_kinds"][qkv]["name"] != "qkv fwd") ++qkv;
  doc["task_kinds"][qkv]["total_s"] = 1e-9;
  const std::string edited = trainsim::testing::temp_path("fast_real.json");
  std::ofstream(edited) << doc.dump();
  r = trainsim("calibrate from-execute " + edited + " --base " + rec + "profile-h200.json --out " +
               out);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find(edited + ": `task_kinds[" + std::to_string(qkv) +
                       "].total_s`: task kind `qkv fwd` ran faster than the GPU can run it"),
            std::string::npos)
      << r.err;
}

// The profile from-execute writes is not its base: it was written under the base's name
// (`datasheet-h200-sxm` v5, "built-in, not measured") though its compute fields were refitted,
// and `run` printed it as the built-in. It is named `<base>+from-execute`, its provenance names
// the records and the base. With a datasheet base (no burst GEMM samples) the GEMMs keep the
// base's surface shape (d0 64, not the 186 that the record's few shapes fitted) and take the
// in-mix factor, as docs/calibration.md says; refitting the written profile changes nothing.
TEST(CalibrateCli, FromExecuteNamesWhatItWrote) {
  const std::string rec = "docs/validation/h200-2026-12-04/gpt-1.3b/real.json";
  const std::string out = trainsim::testing::temp_path("from_datasheet.json");
  const Out r = trainsim("calibrate from-execute " + rec +
                         " --base calibrate/profiles/h200-sxm.json --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("(profile datasheet-h200-sxm+from-execute v"), std::string::npos) << r.out;
  const trainsim::calib::Profile base = trainsim::calib::builtin_profile("h200-sxm");
  const trainsim::calib::Profile p = trainsim::calib::load_profile(out);
  EXPECT_EQ(p.name, "datasheet-h200-sxm+from-execute");
  EXPECT_EQ(p.provenance.rfind("compute fields refitted by trainsim calibrate from-execute", 0),
            0u)
      << p.provenance;
  EXPECT_NE(p.provenance.find(rec), std::string::npos) << p.provenance;
  EXPECT_NE(p.provenance.find("base profile datasheet-h200-sxm v" + base.version),
            std::string::npos)
      << p.provenance;
  EXPECT_DOUBLE_EQ(p.gemm_half_dim, base.gemm_half_dim);
  ASSERT_TRUE(p.gemm_overhead_s.has_value());
  EXPECT_DOUBLE_EQ(*p.gemm_overhead_s, base.gemm_launch_s());
  EXPECT_NE(p.gemm_peak_efficiency, base.gemm_peak_efficiency);
  EXPECT_NE(r.err.find("the base profile's surface"), std::string::npos) << r.err;
  const std::string again = trainsim::testing::temp_path("from_datasheet_refit.json");
  const Out refit = trainsim("calibrate refit " + out + " --out " + again);
  ASSERT_EQ(refit.code, 0) << refit.err;
  const trainsim::calib::Profile q = trainsim::calib::load_profile(again);
  EXPECT_NEAR(q.gemm_peak_efficiency, p.gemm_peak_efficiency, 1e-9);
  EXPECT_DOUBLE_EQ(q.gemm_half_dim, p.gemm_half_dim);
  const Out run = trainsim("run scenarios/megascale-175b-12288.yaml --set cluster.gpu=h200-sxm "
                           "--set cluster.gpus=64 --set calibration.profile=" + out);
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.out.find("datasheet-h200-sxm+from-execute v" + base.version), std::string::npos)
      << run.out;
}

TEST(CalibrateCli, MeasuringNeedsAGpu) {
  if (!trainsim::kernels::query_devices().devices.empty()) GTEST_SKIP() << "a GPU is present";
  const std::string out = trainsim::testing::temp_path("needs_gpu.json");
  for (const char* sub : {"kernels", "nccl"}) {
    const Out r = trainsim(std::string("calibrate ") + sub + " --out " + out);
    EXPECT_EQ(r.code, 4) << sub;
    EXPECT_NE(r.err.find("no CUDA device found"), std::string::npos) << r.err;
  }
}

// The arguments are checked before the GPU is looked for (exit 2, as execute does): each of
// these said "no CUDA device found" (exit 4) on a machine without one.
TEST(CalibrateCli, MeasuringChecksItsArgumentsFirst) {
  const std::string out = trainsim::testing::temp_path("args_first.json");
  const std::string garbage = trainsim::testing::temp_path("garbage_profile.json");
  std::ofstream(garbage) << "{\"format_version\": 1, \"name\": ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"kernels --out " + out + " --dtype banana", "`--dtype`: unknown dtype `banana`"},
      {"kernels --out " + out + " --scenario scenarios/megascale-175b-12288.yaml --set "
       "model.hidden=banana",
       "model.hidden"},
      {"kernels --out " + out + " --set model.hidden=1024", "`--set`: --set overrides a key"},
      {"kernels --out " + out + " --gpu-preset nosuch", "`--gpu-preset`: unknown GPU preset"},
      {"kernels --out " + out + " --base " + garbage, garbage},
      {"kernels", "`--out`: --out PROFILE.json is required"},
      {"kernels --out /nonexistent/dir/p.json", "/nonexistent/dir"},
      {"nccl", "`--out`: --out PROFILE.json is required"},
      {"nccl --out " + out + " --min-bytes banana", "--min-bytes"},
      {"nccl --out " + out + " --min-bytes 1G --max-bytes 1K",
       "`--min-bytes`: --min-bytes 1G is above --max-bytes 1K"},
      {"nccl --out " + out + " --gpu-preset nosuch", "`--gpu-preset`: unknown GPU preset"},
  };
  for (const auto& [args, want] : cases) {
    const Out r = trainsim("calibrate " + args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(want), std::string::npos) << args << "\n" << r.err;
    EXPECT_EQ(r.err.find("no CUDA device"), std::string::npos) << args << "\n" << r.err;
  }
}

// refit and from-execute say where a problem is: a fit that lacks a kind names the profile
// (it said only "`gemm`: fewer than 2 unbatched ..."), a profile whose gpu is no preset names
// its `gpu` (it blamed `--gpu-preset`, which was not passed), a time of 0 states one range (it
// said "must be > 0 (seconds, from 0 to 3600)"), and --dtype banana names --dtype (it blamed
// the record).
TEST(CalibrateCli, RefitAndFromExecuteErrorsSayWhere) {
  const std::string rec = "docs/validation/h200-2026-12-04/";
  const std::string real = rec + "fused/gpt-1.3b/real.json";
  const std::string out = trainsim::testing::temp_path("where_out.json");
  const nlohmann::json prof =
      nlohmann::json::parse(trainsim::testing::slurp(rec + "profile-h200.json"));
  auto write = [](const std::string& name, const nlohmann::json& j) {
    const std::string path = trainsim::testing::temp_path(name);
    std::ofstream(path) << j.dump();
    return path;
  };
  auto only = [&](bool gemms) {
    nlohmann::json j = prof;
    nlohmann::json kept = nlohmann::json::array();
    for (const auto& k : j["kernels_measured"]) {
      if ((k["op"] == "gemm") == gemms) kept.push_back(k);
    }
    j["kernels_measured"] = kept;
    return j;
  };
  const std::string no_gemm = write("no_gemm_profile.json", only(false));
  Out r = trainsim("calibrate refit " + no_gemm + " --out " + out);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(no_gemm + ": `gemm`: fewer than 2 unbatched bf16"), std::string::npos)
      << r.err;
  const std::string no_memory = write("no_memory_profile.json", only(true));
  r = trainsim("calibrate refit " + no_memory + " --out " + out);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(no_memory + ": `memory`: a bandwidth fit needs"), std::string::npos)
      << r.err;

  nlohmann::json j = prof;
  j["gpu"] = "h300-sxm";
  const std::string h300 = write("h300_profile.json", j);
  r = trainsim("calibrate refit " + h300 + " --out " + out);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(h300 + ": `gpu`: the profile's GPU `h300-sxm` is no GPU preset"),
            std::string::npos)
      << r.err;
  r = trainsim("calibrate from-execute " + real + " --base " + h300 + " --out " + out);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(h300 + ": `gpu`"), std::string::npos) << r.err;
  r = trainsim("calibrate refit " + rec + "profile-h200.json --gpu-preset nosuch --out " + out);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("`--gpu-preset`: unknown GPU preset `nosuch`"), std::string::npos) << r.err;

  j = prof;
  j["kernels_measured"][0]["median_s"] = 0;
  const std::string zero = write("zero_time_profile.json", j);
  r = trainsim("calibrate refit " + zero + " --out " + out);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(zero + ": `kernels_measured[0].median_s`: value 0 is out of range: it "
                       "must be above 0 (seconds, above 0 and at most 3600)"),
            std::string::npos)
      << r.err;

  for (const std::string& cmd :
       {"calibrate from-execute " + real + " --base " + rec + "profile-h200.json --dtype banana",
        "calibrate refit " + rec + "profile-h200.json --dtype banana"}) {
    r = trainsim(cmd + " --out " + out);
    EXPECT_EQ(r.code, 2) << cmd;
    EXPECT_NE(r.err.find("`--dtype`: unknown dtype `banana`"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find(real), std::string::npos) << r.err;
  }
  // A fit of the base's samples with the records' names both.
  r = trainsim("calibrate from-execute " + real + " --base " + rec + "profile-h200.json --dtype "
               "fp16 --out " + out);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(rec + "profile-h200.json, " + real + ": `gemm`"), std::string::npos)
      << r.err;
}

// A folder or a missing file where a record or profile belongs is reported in trainsim's words,
// naming the path and what it was to be (it was CLI11's "RECORD: File is actually a directory").
TEST(CalibrateCli, AFolderOrAMissingInputIsNamedInTrainsimsWords) {
  const std::string out = trainsim::testing::temp_path("folder_out.json");
  const std::string dir = ::testing::TempDir();
  const std::string rec = "docs/validation/h200-2026-12-04/";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"calibrate from-execute " + dir + " --base " + rec + "profile-h200.json",
       "is a directory, not an execute record"},
      {"calibrate from-execute " + rec + "gpt-1.3b/real.json --base " + dir,
       "is a directory, not a calibration profile"},
      {"calibrate refit " + dir, "is a directory, not a calibration profile"},
      {"calibrate refit /nonexistent/p.json", "cannot read the calibration profile: no such file"},
      {"calibrate import-nccl-tests " + dir, "is a directory, not a nccl-tests output"},
  };
  for (const auto& [args, want] : cases) {
    const Out r = trainsim(args + " --out " + out);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_EQ(r.err.rfind("trainsim: error: ", 0), 0u) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(want), std::string::npos) << args << "\n" << r.err;
    EXPECT_EQ(r.err.find("File is actually"), std::string::npos) << r.err;
  }
}

}  // namespace
