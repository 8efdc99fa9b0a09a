// calibrate/nccl_tests: every nccl-tests output variant in tests/calibrate/data parses, the α–β
// fit reproduces the measured times above 1 MiB, profiles round-trip the measured section, and
// malformed files are reported by file, line and column.
#include "calibrate/nccl_tests.h"

#include <gtest/gtest.h>

#include <fstream>

#include "calibrate/profile.h"
#include "sim/core/error.h"

namespace trainsim::calib {
namespace {

std::string data(const std::string& name) {
  return std::string(TRAINSIM_SOURCE_DIR) + "/tests/calibrate/data/" + name;
}

// Times predicted by the fit stay within 5 % of every sample of at least 1 MiB.
void expect_reproduces(const MeasuredCollective& m) {
  const double factor = nccl_tests_busbw_factor(m.op, m.ranks);
  int checked = 0;
  for (const auto& [size, time_us] : m.samples) {
    if (size < kFitMinBytes) continue;
    const double predicted_us = (m.alpha_s + size * factor / m.busbw_Bps) * 1e6;
    EXPECT_NEAR(predicted_us / time_us, 1.0, 0.05) << m.op << " at " << size << " B";
    ++checked;
  }
  EXPECT_GE(checked, 5) << m.op;
}

TEST(NcclTests, AllReduceCurrentFormat) {
  const NcclTestsRun r = read_nccl_tests(data("h100x8_all_reduce.txt"));
  EXPECT_EQ(r.op, "all_reduce");
  EXPECT_EQ(r.ranks, 8);
  EXPECT_EQ(r.nodes, 1);
  EXPECT_EQ(r.gpu_name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(r.version_line.rfind("# nThread 1 nGpus 8 minBytes 8", 0), 0u);
  ASSERT_EQ(r.rows.size(), 31u);  // 8 B .. 8 GiB
  EXPECT_EQ(r.rows.front().size_bytes, 8);
  EXPECT_EQ(r.rows.front().redop, "sum");
  EXPECT_EQ(r.rows.front().root, -1);
  EXPECT_DOUBLE_EQ(r.rows.front().out_of_place_us, 14.25);
  EXPECT_DOUBLE_EQ(r.rows.front().in_place_us, 14.10);
  EXPECT_EQ(r.rows.back().size_bytes, 8589934592);
  EXPECT_DOUBLE_EQ(r.rows.back().out_of_place_us, 31292);
  EXPECT_EQ(r.rows.back().line, 47);
}

TEST(NcclTests, SrunPrefixAndNaCellsAndOpFromFileName) {
  const NcclTestsRun r = read_nccl_tests(data("all_gather_perf.log"));
  EXPECT_EQ(r.op, "all_gather");
  EXPECT_EQ(r.ranks, 8);
  EXPECT_EQ(r.rows.size(), 30u);
  EXPECT_EQ(r.rows.front().redop, "none");
}

TEST(NcclTests, OpenMpiTaggedTwoNodesWithNcclInfoLines) {
  const NcclTestsRun r = read_nccl_tests(data("mpirun_2node_reduce_scatter.txt"));
  EXPECT_EQ(r.op, "reduce_scatter");
  EXPECT_EQ(r.ranks, 16);  // from the rank lines: nGpus is 1 per process
  EXPECT_EQ(r.nodes, 2);
  EXPECT_EQ(r.rows.size(), 31u);
}

TEST(NcclTests, OldFormatWithRootAndErrorColumns) {
  const NcclTestsRun r = read_nccl_tests(data("broadcast_perf_a100_old.txt"));
  EXPECT_EQ(r.op, "broadcast");
  EXPECT_EQ(r.ranks, 8);
  EXPECT_EQ(r.gpu_name, "A100-SXM4-80GB");
  EXPECT_EQ(r.rows.front().redop, "");
  EXPECT_EQ(r.rows.front().root, 0);
  EXPECT_EQ(r.rows.size(), 28u);
}

TEST(NcclTests, InPlaceNaAndRanksFromThreadsTimesGpus) {
  const NcclTestsRun r = read_nccl_tests(data("alltoall_perf_h100.txt"));
  EXPECT_EQ(r.op, "all_to_all");
  EXPECT_EQ(r.ranks, 8);  // nThread 2 x nGpus 4, no rank lines
  EXPECT_EQ(r.nodes, 0);
  EXPECT_GT(r.rows.front().out_of_place_us, 0);
  EXPECT_EQ(r.rows.front().in_place_us, 0);
}

TEST(NcclTests, RootedCollectiveDetectedFromColumns) {
  const NcclTestsRun r = read_nccl_tests(data("job-4411.out"));
  EXPECT_EQ(r.op, "broadcast");
  const NcclTestsRun reduce = parse_nccl_tests(
      "# nThread 1 nGpus 2 minBytes 8 maxBytes 16\n"
      "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n"
      "   8  2  float  sum  1  10.0  0.00  0.00  0  10.1  0.00  0.00  0\n",
      "run.out");
  EXPECT_EQ(reduce.op, "reduce");
  EXPECT_EQ(reduce.ranks, 2);
}

TEST(NcclTests, FitReproducesEveryFileAboveOneMiB) {
  for (const char* f : {"h100x8_all_reduce.txt", "all_gather_perf.log",
                        "mpirun_2node_reduce_scatter.txt", "broadcast_perf_a100_old.txt",
                        "alltoall_perf_h100.txt", "job-4411.out"}) {
    const auto fits = fit_nccl_tests({read_nccl_tests(data(f))});
    ASSERT_EQ(fits.size(), 1u) << f;
    EXPECT_LT(fits[0].max_rel_error, 0.05) << f;
    expect_reproduces(fits[0].measured);
  }
  // The all-reduce file was recorded at ≈ 480 GB/s bus bandwidth and ≈ 40 µs large-message α.
  const auto ar = fit_nccl_tests({read_nccl_tests(data("h100x8_all_reduce.txt"))})[0].measured;
  EXPECT_NEAR(ar.busbw_Bps, 482e9, 0.03 * 482e9);
  EXPECT_NEAR(ar.alpha_s, 41e-6, 5e-6);
}

TEST(NcclTests, FitGroupsByOpAndRanks) {
  const auto fits = fit_nccl_tests({read_nccl_tests(data("h100x8_all_reduce.txt")),
                                    read_nccl_tests(data("all_gather_perf.log")),
                                    read_nccl_tests(data("h100x8_all_reduce.txt"))});
  ASSERT_EQ(fits.size(), 2u);
  EXPECT_EQ(fits[0].measured.op, "all_reduce");
  EXPECT_EQ(fits[0].measured.samples.size(), 62u);
  EXPECT_EQ(fits[1].measured.op, "all_gather");
}

TEST(NcclTests, ProfileRoundTripsMeasuredSection) {
  Profile p = builtin_profile("h100-sxm");
  const auto fits = fit_nccl_tests({read_nccl_tests(data("h100x8_all_reduce.txt"))});
  p.collectives_measured.push_back(fits[0].measured);
  p.measured_provenance = {{"a.txt", "b.txt"}, "# nThread 1 nGpus 8", "NVIDIA H100 80GB HBM3",
                           "2026-11-30T08:00:00Z", "trainsim calibrate import-nccl-tests a.txt"};
  const std::string path = ::testing::TempDir() + "measured.json";
  std::ofstream(path) << profile_to_json(p);
  const Profile q = load_profile(path);
  ASSERT_EQ(q.collectives_measured.size(), 1u);
  EXPECT_EQ(q.collectives_measured[0].op, "all_reduce");
  EXPECT_EQ(q.collectives_measured[0].ranks, 8);
  EXPECT_DOUBLE_EQ(q.collectives_measured[0].busbw_Bps, fits[0].measured.busbw_Bps);
  EXPECT_EQ(q.collectives_measured[0].samples, fits[0].measured.samples);
  EXPECT_EQ(q.measured_provenance.source_files.size(), 2u);
  EXPECT_EQ(q.measured_provenance.gpu_name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(profile_to_json(q), profile_to_json(p));
  expect_reproduces(q.collectives_measured[0]);
  // A profile without the section still loads and writes none.
  std::ofstream(path) << profile_to_json(builtin_profile("h100-sxm"));
  EXPECT_TRUE(load_profile(path).collectives_measured.empty());
}

TEST(NcclTests, UnknownMeasuredFieldIsNamed) {
  Profile p = builtin_profile("a100-80gb");
  p.collectives_measured.push_back({"all_reduce", 8, 1e-5, 2e11, {{1e6, 20.0}}});
  std::string text = profile_to_json(p);
  text.replace(text.find("\"ranks\""), 7, "\"nranks\"");
  const std::string path = ::testing::TempDir() + "bad_measured.json";
  std::ofstream(path) << text;
  try {
    load_profile(path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInput);
    EXPECT_EQ(e.where().field, "collectives_measured[0].nranks");
  }
}

struct Malformed {
  const char* text;
  int line;
  const char* field;
};

TEST(NcclTests, MalformedInputNamesFileLineAndColumn) {
  const std::string header =
      "# nThread 1 nGpus 8 minBytes 8 maxBytes 16\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
      "time   algbw   busbw #wrong\n";
  const std::string good = "  8  2  float  sum  -1  14.2  0.00  0.00  0  14.1  0.00  0.00  0\n";
  const Malformed cases[] = {
      {"  8  2  float  sum  -1  14.2  0.00  0.00  0  14.1  0.00  0.00\n", 3, "column 13 (#wrong)"},
      {"  8  2  float  sum  -1  fast  0.00  0.00  0  14.1  0.00  0.00  0\n", 3, "column 6 (time)"},
      {"  8x  2  float  sum  -1  14.2  0.00  0.00  0  14.1  0.00  0.00  0\n", 3, "column 1 (size)"},
      {"  16  4  float  sum  -1  14.2  -1.0  0.00  0  14.1  0.00  0.00  0\n", 3,
       "column 7 (algbw)"},
      {"Test NCCL failure common.cu:1030 'unhandled cuda error'\n", 3, "column 1"},
  };
  for (const Malformed& c : cases) {
    try {
      parse_nccl_tests(header + c.text + good, "all_reduce_perf.txt");
      ADD_FAILURE() << c.text;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInput);
      EXPECT_EQ(e.where().file, "all_reduce_perf.txt");
      EXPECT_EQ(e.where().line, c.line) << c.text;
      EXPECT_EQ(e.where().field, c.field) << c.text;
    }
  }
  // A row before any column header, an empty file, and a file that names no collective.
  EXPECT_THROW(parse_nccl_tests(good, "all_reduce_perf.txt"), Error);
  EXPECT_THROW(parse_nccl_tests(header, "all_reduce_perf.txt"), Error);
  EXPECT_THROW(parse_nccl_tests(header + good, "out.txt"), Error);
  EXPECT_THROW(read_nccl_tests(data("missing.txt")), Error);
}

}  // namespace
}  // namespace trainsim::calib
