// `trainsim calibrate` run as a process: import-nccl-tests writes a profile whose measured α–β
// reproduce the imported times, and the measuring subcommands refuse to run without a GPU.
#include <gtest/gtest.h>

#include "tests/support/cli_runner.h"
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
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
  for (const auto& [file, name] :
       {std::pair<std::string, std::string>{"all_reduce_perf_a100_40gb.txt",
                                            "NVIDIA A100-SXM4-40GB"},
        {"all_reduce_perf_a100_64gb.txt", "NVIDIA A100-SXM-64GB"}}) {
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
  EXPECT_TRUE(has(unknown.err, "`--gpu`: unknown GPU preset `h100` (a100-80gb, a800, h100-sxm, "
                               "h200-sxm)"))
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

TEST(CalibrateCli, MeasuringNeedsAGpu) {
  if (!trainsim::kernels::query_devices().devices.empty()) GTEST_SKIP() << "a GPU is present";
  for (const char* sub : {"kernels", "nccl"}) {
    const Out r = trainsim(std::string("calibrate ") + sub);
    EXPECT_EQ(r.code, 4) << sub;
    EXPECT_NE(r.err.find("no CUDA device found"), std::string::npos) << r.err;
  }
}

}  // namespace
