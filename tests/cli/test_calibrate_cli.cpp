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

TEST(CalibrateCli, MeasuringNeedsAGpu) {
  if (!trainsim::kernels::query_devices().devices.empty()) GTEST_SKIP() << "a GPU is present";
  for (const char* sub : {"kernels", "nccl"}) {
    const Out r = trainsim(std::string("calibrate ") + sub);
    EXPECT_EQ(r.code, 4) << sub;
    EXPECT_NE(r.err.find("no CUDA device found"), std::string::npos) << r.err;
  }
}

}  // namespace
