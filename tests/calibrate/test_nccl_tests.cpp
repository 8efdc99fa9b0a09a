// calibrate/nccl_tests: every nccl-tests output variant in tests/calibrate/data parses, the α–β
// fit reproduces the measured times above 1 MiB, profiles round-trip the measured section, and
// malformed files are reported by file, line and column. The real-world defects (rows of size 0,
// "..." in pasted tables, launcher noise, no rank count, a device list cut short, GPUs without a
// profile, a single size) each have a synthetic file in tests/calibrate/data, made by a model in
// nccl-tests' output format (not measured).
#include "calibrate/nccl_tests.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "calibrate/profile.h"
#include "sim/core/error.h"

namespace trainsim::calib {
namespace {

std::string data(const std::string& name) {
  return std::string(TRAINSIM_SOURCE_DIR) + "/tests/calibrate/data/" + name;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The line numbers of the skipped lines of one kind.
std::vector<int> skipped(const NcclTestsRun& r, NcclTestsSkip kind) {
  std::vector<int> lines;
  for (const NcclTestsSkippedLine& s : r.skipped) {
    if (s.kind == kind) lines.push_back(s.line);
  }
  return lines;
}

// The Error a call throws (fails the test when it throws none).
template <typename F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error thrown";
  return Error(ErrorKind::kRuntime, "none");
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
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
  EXPECT_EQ(r.ranks_from, "`#  Rank` lines");
  EXPECT_EQ(r.nodes, 2);
  EXPECT_EQ(r.rows.size(), 31u);
  // The two NCCL INFO lines are skipped, and listed.
  EXPECT_EQ(skipped(r, NcclTestsSkip::kNcclLog), (std::vector<int>{22, 23}));
  EXPECT_EQ(r.skipped.size(), 2u);
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
  EXPECT_EQ(r.nodes, 1);  // one process drove all 8 ranks: one host
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

TEST(NcclTests, RowsOfSizeZeroAreSkippedAndListed) {
  const NcclTestsRun r = read_nccl_tests(data("all_reduce_perf_size0.txt"));
  EXPECT_EQ(r.op, "all_reduce");
  EXPECT_EQ(r.ranks, 8);
  ASSERT_EQ(r.rows.size(), 11u);  // 1 MiB .. 1 GiB
  EXPECT_EQ(r.rows.front().size_bytes, 1 << 20);
  EXPECT_EQ(skipped(r, NcclTestsSkip::kSizeZero), (std::vector<int>{17, 18}));
  EXPECT_EQ(r.skipped.size(), 2u);
  EXPECT_EQ(describe_skipped(r),
            std::vector<std::string>{data("all_reduce_perf_size0.txt") +
                                     ": skipped 2 rows of size 0 (lines 17, 18)"});
  const auto fits = fit_nccl_tests({r});
  ASSERT_EQ(fits.size(), 1u);
  EXPECT_TRUE(fits[0].fitted);
  expect_reproduces(fits[0].measured);
}

TEST(NcclTests, ElidedLinesOfAPastedTableAreSkipped) {
  const std::string path = data("readme_all_reduce_perf.md.txt");
  const NcclTestsRun r = read_nccl_tests(path);
  EXPECT_EQ(r.op, "all_reduce");  // from the file name
  EXPECT_EQ(r.ranks, 8);
  // 8..64 B, 1 MiB..128 MiB, 2 and 4 GiB; the 8 GiB row is cut off with "...".
  ASSERT_EQ(r.rows.size(), 14u);
  EXPECT_EQ(r.rows.back().size_bytes, std::int64_t{1} << 32);
  EXPECT_EQ(skipped(r, NcclTestsSkip::kTruncated), (std::vector<int>{21, 30, 33}));
  EXPECT_EQ(skipped(r, NcclTestsSkip::kLauncher), (std::vector<int>{1}));  // the `$ ...` prompt
  const std::vector<std::string> text = describe_skipped(r);
  ASSERT_EQ(text.size(), 2u);
  EXPECT_EQ(text[0], path + ": skipped 3 truncated lines (\"...\") (lines 21, 30, 33)");
  EXPECT_EQ(text[1], path + ": skipped 1 launcher or shell line (not nccl-tests output) (line 1)");
  const auto fits = fit_nccl_tests({r});
  ASSERT_EQ(fits.size(), 1u);
  expect_reproduces(fits[0].measured);
  EXPECT_NEAR(fits[0].measured.busbw_Bps, 478e9, 0.03 * 478e9);
}

TEST(NcclTests, LauncherNoiseAndNcclLogLinesAreSkippedByKind) {
  const std::string path = data("all_gather_perf_openmpi_noise.log");
  const NcclTestsRun r = read_nccl_tests(path);
  EXPECT_EQ(r.op, "all_gather");
  EXPECT_EQ(r.ranks, 16);
  EXPECT_EQ(r.nodes, 2);
  EXPECT_EQ(r.rows.size(), 12u);  // 1 MiB .. 2 GiB
  EXPECT_EQ(skipped(r, NcclTestsSkip::kNcclLog), (std::vector<int>{30, 31, 44}));
  EXPECT_EQ(skipped(r, NcclTestsSkip::kLauncher),
            (std::vector<int>{1, 2, 3, 4, 6, 7, 8, 38, 39, 53}));
  const std::vector<std::string> text = describe_skipped(r);
  ASSERT_EQ(text.size(), 2u);
  EXPECT_EQ(text[0], path + ": skipped 3 NCCL log lines (lines 30, 31, 44)");
  EXPECT_EQ(text[1], path +
                         ": skipped 10 launcher or shell lines (not nccl-tests output) (lines 1, 2, "
                         "3, 4, 6 and 5 more)");
  const auto fits = fit_nccl_tests({r});
  ASSERT_EQ(fits.size(), 1u);
  expect_reproduces(fits[0].measured);
  // nccl-tests' own failure line is still an error, not noise.
  const Error e = error_of([] {
    parse_nccl_tests("# nThread 1 nGpus 2\n#  size  count  type  redop  root  time  algbw  busbw  "
                     "#wrong  time  algbw  busbw  #wrong\n"
                     "node-1: Test NCCL failure common.cu:1030 'unhandled cuda error'\n",
                     "all_reduce_perf.txt");
  });
  EXPECT_EQ(e.where().line, 3);
  EXPECT_TRUE(contains(e.message(), "failure")) << e.what();
}

TEST(NcclTests, SendRecvWithoutRankCountTakesRanksOption) {
  const std::string path = data("sendrecv_perf_no_ranks.txt");
  const Error e = error_of([&] { read_nccl_tests(path); });
  EXPECT_EQ(e.kind(), ErrorKind::kInput);
  EXPECT_EQ(e.where().file, path);
  EXPECT_TRUE(contains(e.what(), "cannot tell the rank count")) << e.what();
  EXPECT_TRUE(contains(e.what(), "--ranks N")) << e.what();
  NcclTestsOptions o;
  o.ranks = 2;
  const NcclTestsRun r = read_nccl_tests(path, o);
  EXPECT_EQ(r.op, "sendrecv");
  EXPECT_EQ(r.ranks, 2);
  EXPECT_EQ(r.ranks_from, "--ranks");
  EXPECT_TRUE(r.warnings.empty());
  EXPECT_EQ(r.rows.size(), 15u);  // 64 KiB .. 1 GiB
  const auto fits = fit_nccl_tests({r});
  ASSERT_EQ(fits.size(), 1u);
  EXPECT_EQ(fits[0].measured.ranks, 2);
  expect_reproduces(fits[0].measured);
  // nGpus 1 without rank lines is one process's count (mpirun), not a 1-rank job.
  std::string text = slurp(path);
  text.insert(text.find('\n') + 1, "# nThread 1 nGpus 1 minBytes 65536 maxBytes 1073741824\n");
  EXPECT_THROW(parse_nccl_tests(text, "sendrecv_perf.txt"), Error);
  EXPECT_EQ(parse_nccl_tests(text, "sendrecv_perf.txt", o).ranks, 2);
  // --ranks 1 is no run of a collective (it read as "implies at least 2460 ranks ... x 0").
  o.ranks = 1;
  const Error one = error_of([&] { read_nccl_tests(path, o); });
  EXPECT_EQ(one.kind(), ErrorKind::kInput);
  EXPECT_EQ(one.where().file, path);
  EXPECT_EQ(one.where().field, "--ranks");
  EXPECT_TRUE(contains(one.what(), "a collective needs at least 2 ranks")) << one.what();
  // Over 5 ranks the fit is stored for 5, which no send/recv (one pair) asks for: said.
  o.ranks = 5;
  const NcclTestsRun five = read_nccl_tests(path, o);
  ASSERT_EQ(five.warnings.size(), 1u);
  EXPECT_TRUE(contains(five.warnings[0], "so it prices nothing")) << five.warnings[0];
}

TEST(NcclTests, RankCountThatContradictsBusbwRatioIsRefused) {
  // 32 ranks (busbw/algbw = 2·31/32), but the device list stops after rank 4.
  const std::string path = data("all_reduce_perf_32ranks_cut.txt");
  const Error e = error_of([&] { read_nccl_tests(path); });
  EXPECT_EQ(e.kind(), ErrorKind::kInput);
  EXPECT_EQ(e.where().file, path);
  EXPECT_EQ(e.where().line, 25);  // the 2 GiB row: the largest algbw, the most precise ratio
  EXPECT_TRUE(contains(e.what(), "states 5 ranks (`#  Rank` lines)")) << e.what();
  EXPECT_TRUE(contains(e.what(), "implies 32 ranks for all_reduce")) << e.what();
  EXPECT_TRUE(contains(e.what(), "pass --ranks 32")) << e.what();
  // --ranks that agrees with the ratio replaces the cut list, with a warning.
  NcclTestsOptions o;
  o.ranks = 32;
  const NcclTestsRun r = read_nccl_tests(path, o);
  EXPECT_EQ(r.ranks, 32);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_TRUE(contains(r.warnings[0], "--ranks 32 replaces the 5 ranks")) << r.warnings[0];
  const auto fits = fit_nccl_tests({r});
  expect_reproduces(fits.at(0).measured);
  EXPECT_NEAR(fits[0].measured.busbw_Bps, 355e9, 0.03 * 355e9);
  // --ranks that disagrees too is refused, saying so.
  o.ranks = 16;
  const Error e16 = error_of([&] { read_nccl_tests(path, o); });
  EXPECT_TRUE(contains(e16.what(), "--ranks 16 does not fit it either")) << e16.what();
}

TEST(NcclTests, RankCountFromRatioOnlyWhenTheFileStatesNone) {
  // The 8-GPU table without its header: 2(n-1)/n = 1.75 names 8 ranks, and a note says so.
  std::string text = slurp(data("h100x8_all_reduce.txt"));
  std::string table;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find("Rank") == std::string::npos && line.find("nGpus") == std::string::npos) {
      table += line + "\n";
    }
  }
  const NcclTestsRun r = parse_nccl_tests(table, "paste.txt");
  EXPECT_EQ(r.ranks, 8);
  EXPECT_EQ(r.ranks_from, "busbw/algbw");
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_TRUE(contains(r.notes[0], "gives 8 ranks")) << r.notes[0];
  // A --ranks that the ratio contradicts is refused.
  NcclTestsOptions o;
  o.ranks = 4;
  const Error e = error_of([&] { parse_nccl_tests(table, "paste.txt", o); });
  EXPECT_TRUE(contains(e.what(), "--ranks 4 disagrees")) << e.what();
  EXPECT_EQ(e.where().file, "paste.txt");
  // A file that states its count keeps it; --ranks is reported as unused.
  o.ranks = 16;
  const NcclTestsRun stated = read_nccl_tests(data("h100x8_all_reduce.txt"), o);
  EXPECT_EQ(stated.ranks, 8);
  ASSERT_EQ(stated.warnings.size(), 1u);
  EXPECT_TRUE(contains(stated.warnings[0], "--ranks 16 not used")) << stated.warnings[0];
  // busbw = algbw for broadcast: an all-reduce table labelled broadcast is refused.
  text.replace(text.find("all_reduce_perf"), 15, "broadcast_perf");
  const Error b = error_of([&] { parse_nccl_tests(text, "run.txt"); });
  EXPECT_TRUE(contains(b.what(), "broadcast reports busbw = algbw")) << b.what();
  EXPECT_GT(b.where().line, 0);
}

TEST(NcclTests, ImpossibleRatiosAreInputErrors) {
  const auto table = [](const std::string& bw) {
    return "# nThread 1 nGpus 8\n#  size  count  type  redop  root  time  algbw  busbw  #wrong\n"
           "  1048576  262144  float  sum  -1  30.1  " + bw + "  0\n"
           "  2097152  524288  float  sum  -1  40.2  " + bw + "  0\n";
  };
  // busbw/algbw = 2.5 is no all-reduce of any size (2(n-1)/n < 2).
  const Error e = error_of([&] { parse_nccl_tests(table("10.00  25.00"), "all_reduce_perf.txt"); });
  EXPECT_EQ(e.kind(), ErrorKind::kInput);
  EXPECT_EQ(e.where().file, "all_reduce_perf.txt");
  EXPECT_EQ(e.where().line, 3);
  EXPECT_TRUE(contains(e.what(), "implies no rank count")) << e.what();
  // A ratio that overflows (1e300 / 1e-300) says nothing; the stated count stands.
  EXPECT_EQ(parse_nccl_tests(table("1e-300  1e300"), "all_reduce_perf.txt").ranks, 8);
  EXPECT_EQ(gpu_preset_for_device_name("NVIDIA A100-SXM4-99999999999999999999GB"), "");
}

TEST(NcclTests, EveryRealisticFileAgreesWithItsRatio) {
  // Each stated rank count matches what nccl-tests computed busbw with.
  for (const char* f : {"h100x8_all_reduce.txt", "all_gather_perf.log",
                        "mpirun_2node_reduce_scatter.txt", "broadcast_perf_a100_old.txt",
                        "alltoall_perf_h100.txt", "job-4411.out", "all_reduce_perf_a100_40gb.txt",
                        "all_reduce_perf_a100_64gb.txt", "reduce_scatter_perf_single_size.txt"}) {
    const NcclTestsRun r = read_nccl_tests(data(f));
    EXPECT_TRUE(r.warnings.empty()) << f;
    EXPECT_TRUE(r.notes.empty()) << f;
  }
}

TEST(NcclTests, SingleSizeIsKeptAsSamplesWithoutAFit) {
  const NcclTestsRun r = read_nccl_tests(data("reduce_scatter_perf_single_size.txt"));
  ASSERT_EQ(r.rows.size(), 1u);
  const auto fits = fit_nccl_tests({r});
  ASSERT_EQ(fits.size(), 1u);
  EXPECT_FALSE(fits[0].fitted);
  EXPECT_EQ(fits[0].measured.op, "reduce_scatter");
  EXPECT_EQ(fits[0].measured.ranks, 8);
  EXPECT_EQ(fits[0].measured.alpha_s, 0);
  EXPECT_EQ(fits[0].measured.busbw_Bps, 0);
  ASSERT_EQ(fits[0].measured.samples.size(), 1u);
  EXPECT_EQ(fits[0].measured.samples[0].first, 1073741824.0);
  EXPECT_DOUBLE_EQ(fits[0].measured.samples[0].second, r.rows[0].out_of_place_us);
  // Written as null, read back as "no fit".
  Profile p = builtin_profile("h100-sxm");
  p.collectives_measured.push_back(fits[0].measured);
  const std::string json = profile_to_json(p);
  EXPECT_TRUE(contains(json, "\"alpha_s\": null")) << json;
  EXPECT_TRUE(contains(json, "\"busbw_Bps\": null")) << json;
  const std::string path = ::testing::TempDir() + "unfitted.json";
  std::ofstream(path) << json;
  const Profile q = load_profile(path);
  ASSERT_EQ(q.collectives_measured.size(), 1u);
  EXPECT_EQ(q.collectives_measured[0].busbw_Bps, 0);
  EXPECT_EQ(q.collectives_measured[0].samples, fits[0].measured.samples);
  // Only both null means "no fit"; one null is an error naming the field.
  std::string half = json;
  half.replace(half.find("\"busbw_Bps\": null"), 17, "\"busbw_Bps\": 1e11");
  std::ofstream(path) << half;
  const Error e = error_of([&] { load_profile(path); });
  EXPECT_EQ(e.where().field, "collectives_measured[0].alpha_s");
  // Pooled with a second size of the same (op, ranks), the samples are fitted.
  NcclTestsRun two = r;
  NcclTestsRow half_size = r.rows[0];
  half_size.size_bytes /= 2;
  half_size.out_of_place_us = 40 + (half_size.out_of_place_us - 40) / 2;
  two.rows.push_back(half_size);
  EXPECT_TRUE(fit_nccl_tests({two}).at(0).fitted);
}

// The text of a file without its rows of more than `max_bytes` (lines that start with two
// integers, the first the size).
std::string rows_up_to(const std::string& text, std::int64_t max_bytes) {
  std::istringstream in(text);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    std::istringstream cells(line);
    std::int64_t size = 0, count = 0;
    if (line.find('#') == std::string::npos && (cells >> size >> count) && size > max_bytes) {
      continue;
    }
    out += line + "\n";
  }
  return out;
}

// Only sizes of at least 1 MiB are fitted (docs/calibration.md): a run with none of them, or with
// one, keeps its samples unfitted instead of fitting the LL/LL128 sizes below (which gave the
// 8-GPU all-reduce 54 GB/s against the 479 of the whole file).
TEST(NcclTests, FewerThanTwoSizesOfOneMiBAreNotFitted) {
  const std::string text = slurp(data("h100x8_all_reduce.txt"));
  const NcclTestsRun small = parse_nccl_tests(rows_up_to(text, 524288), "small.txt");
  ASSERT_EQ(small.rows.size(), 17u);  // 8 B to 512 KiB
  auto fits = fit_nccl_tests({small});
  ASSERT_EQ(fits.size(), 1u);
  EXPECT_FALSE(fits[0].fitted);
  EXPECT_EQ(fits[0].measured.busbw_Bps, 0);
  EXPECT_EQ(fits[0].measured.alpha_s, 0);
  EXPECT_EQ(fits[0].measured.samples.size(), 17u);
  EXPECT_EQ(fits[0].unfitted_reason, "has 0 sizes of at least 1 MiB (1048576 B) among 17 sizes");
  // One size of 1 MiB among them: still no line.
  fits = fit_nccl_tests({parse_nccl_tests(rows_up_to(text, 1048576), "one_mib.txt")});
  EXPECT_FALSE(fits.at(0).fitted);
  EXPECT_EQ(fits[0].unfitted_reason, "has 1 size of at least 1 MiB (1048576 B) among 18 sizes");
  // Two: fitted on those two alone, so the line passes through both (44.50 and 48.11 us).
  fits = fit_nccl_tests({parse_nccl_tests(rows_up_to(text, 2097152), "two_mib.txt")});
  ASSERT_TRUE(fits.at(0).fitted);
  EXPECT_TRUE(fits[0].unfitted_reason.empty());
  const MeasuredCollective& m = fits[0].measured;
  const double x_us_per_byte = (48.11 - 44.50) / 1048576;  // by hand, through the two points
  EXPECT_NEAR(m.alpha_s * 1e6, 44.50 - 1048576 * x_us_per_byte, 1e-6);
  EXPECT_NEAR(m.busbw_Bps, 1.75 / (x_us_per_byte * 1e-6), 1e-3 * m.busbw_Bps);
  EXPECT_LT(fits[0].max_rel_error, 1e-9);
}

// A log of two runs (all_reduce_perf on 8 GPUs of one server, then on 16 GPUs of two) splits at
// the second run's header: each run keeps its own rank count and hosts, and the fits stay apart.
// They were one table, refused with a hint about a device list cut short, or with --ranks 8 one
// fit of both at 88.5 % error.
TEST(NcclTests, ALogOfTwoRunsSplitsAtTheSecondHeader) {
  const std::string file = data("all_reduce_perf_8_then_16_ranks.log");
  for (const int ranks_option : {0, 8}) {
    NcclTestsOptions o;
    o.ranks = ranks_option;
    const std::vector<NcclTestsRun> runs = read_nccl_tests_runs(file, o);
    ASSERT_EQ(runs.size(), 2u);
    EXPECT_EQ(runs[0].first_line, 1);
    EXPECT_EQ(runs[1].first_line, 51);  // `# Collective test starting` after the first trailer
    EXPECT_EQ(runs[0].ranks, 8);
    EXPECT_EQ(runs[0].nodes, 1);
    EXPECT_EQ(runs[0].rows.size(), 31u);
    EXPECT_EQ(runs[1].ranks, 16);
    EXPECT_EQ(runs[1].nodes, 2);
    EXPECT_EQ(runs[1].rows.size(), 11u);
    EXPECT_EQ(runs[1].rows.front().line, 75);
    const auto fits = fit_nccl_tests(runs);
    ASSERT_EQ(fits.size(), 2u);
    EXPECT_NEAR(fits[0].measured.busbw_Bps, 482e9, 0.03 * 482e9);
    // The file was made with α = 60 µs and 45 GB/s (printed to 0.1 µs).
    EXPECT_NEAR(fits[1].measured.busbw_Bps, 45e9, 0.001 * 45e9);
    EXPECT_NEAR(fits[1].measured.alpha_s, 60e-6, 1e-6);
    EXPECT_LT(fits[1].max_rel_error, 0.001);
  }
  // The one-run reader refuses it, naming where the second run starts.
  const Error e = error_of([&] { read_nccl_tests(file); });
  EXPECT_EQ(e.where().line, 51);
  EXPECT_TRUE(contains(e.what(), "holds 2 nccl-tests runs")) << e.what();
}

// Rows of another run pasted below a table without their header: the first row whose busbw/algbw
// is not the run's factor is refused, naming its line.
TEST(NcclTests, ARowOfAnotherRankCountIsRefused) {
  std::istringstream in(slurp(data("all_reduce_perf_8_then_16_ranks.log")));
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  // The 8-rank table (lines 1-46) with the 16-rank rows (lines 75-85) right below it.
  std::string text;
  for (int i = 0; i < 46; ++i) text += lines[i] + "\n";
  for (int i = 74; i < 85; ++i) text += lines[i] + "\n";
  const Error e = error_of([&] { parse_nccl_tests(text, "all_reduce_perf.txt"); });
  EXPECT_EQ(e.kind(), ErrorKind::kInput);
  EXPECT_EQ(e.where().line, 47);
  EXPECT_EQ(e.where().field, "busbw");
  EXPECT_TRUE(contains(e.what(), "implies 16 ranks, but the run has 8 ranks (`#  Rank` lines)"))
      << e.what();
}

// Hosts: known from rank lines that list every rank, or one host when one process drove every
// rank (nThread x nGpus, no rank lines); unknown (0) when --ranks replaced a cut device list.
TEST(NcclTests, HostsAreKnownOnlyWhenTheFileSaysThem) {
  EXPECT_EQ(read_nccl_tests(data("h100x8_all_reduce.txt")).nodes, 1);
  EXPECT_EQ(read_nccl_tests(data("mpirun_2node_reduce_scatter.txt")).nodes, 2);
  EXPECT_EQ(read_nccl_tests(data("alltoall_perf_h100.txt")).nodes, 1);  // nThread 2 nGpus 4
  NcclTestsOptions o;
  o.ranks = 32;
  EXPECT_EQ(read_nccl_tests(data("all_reduce_perf_32ranks_cut.txt"), o).nodes, 0);
  o.ranks = 2;
  EXPECT_EQ(read_nccl_tests(data("sendrecv_perf_no_ranks.txt"), o).nodes, 0);
}

// Rows with nothing measured (every time 0.00 or N/A) are skipped and listed; a row whose
// out-of-place time is 0.00 is priced by its in-place time, and listed too.
TEST(NcclTests, RowsWithoutATimeAreListed) {
  const std::string head =
      "# nThread 1 nGpus 8 minBytes 8 maxBytes 16\n"
      "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n"
      "#   (B)  (elements)                  (us)  (GB/s) (GB/s)         (us)  (GB/s) (GB/s)\n";
  const std::string text = head +
      "1048576  262144  float  sum  -1  0.00  0.00  0.00  0  0.00  0.00  0.00  0\n"   // 4
      "2097152  524288  float  sum  -1  N/A  N/A  N/A  0  N/A  N/A  N/A  0\n"          // 5
      "4194304  1048576  float  sum  -1  0.00  0.00  0.00  0  55.56  75.49  132.11  0\n"  // 6
      "8388608  2097152  float  sum  -1  70.64  118.75  207.82  0  72.31  116.00  203.00  0\n";
  const NcclTestsRun r = parse_nccl_tests(text, "all_reduce_perf.txt");
  EXPECT_EQ(skipped(r, NcclTestsSkip::kNoTime), (std::vector<int>{4, 5}));
  EXPECT_EQ(skipped(r, NcclTestsSkip::kInPlaceTime), (std::vector<int>{6}));
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0].in_place_us, 55.56);
  const std::vector<std::string> said = describe_skipped(r);
  ASSERT_EQ(said.size(), 2u);
  EXPECT_EQ(said[0], "all_reduce_perf.txt: skipped 2 rows without a time (every time cell 0 or "
                     "N/A) (lines 4, 5)");
  EXPECT_EQ(said[1], "all_reduce_perf.txt: 1 row whose out-of-place time is 0 uses its in-place "
                     "time (line 6)");
}

// Times in milliseconds (an edited or converted table) are refused at the units line; a row cut
// off after its size (`[1,0]<stdout>:    8388608  ...`) is a truncated line, not launcher noise.
TEST(NcclTests, OtherTimeUnitsAndRowsCutAfterTheSize) {
  const std::string head =
      "# nThread 1 nGpus 8 minBytes 8 maxBytes 16\n"
      "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n";
  const std::string rows =
      "4194304  1048576  float  sum  -1  55.56  75.49  132.11  0  56.84  73.79  129.13  0\n"
      "[1,0]<stdout>:    8388608  ...\n"
      "16777216  4194304  float  sum  -1  101.0  166.11  290.69  0  103.0  162.84  284.97  0\n";
  const Error e = error_of([&] {
    parse_nccl_tests(head + "#   (B)  (elements)   (ms)  (GB/s) (GB/s)   (ms)  (GB/s) (GB/s)\n" +
                         rows,
                     "all_reduce_perf.txt");
  });
  EXPECT_EQ(e.where().line, 3);
  EXPECT_TRUE(contains(e.what(), "times in `(ms)`")) << e.what();
  const NcclTestsRun r = parse_nccl_tests(
      head + "#   (B)  (elements)   (us)  (GB/s) (GB/s)   (us)  (GB/s) (GB/s)\n" + rows,
      "all_reduce_perf.txt");
  EXPECT_EQ(skipped(r, NcclTestsSkip::kTruncated), (std::vector<int>{5}));
  EXPECT_TRUE(skipped(r, NcclTestsSkip::kLauncher).empty());
  EXPECT_EQ(r.rows.size(), 2u);
}

// Runs of one collective and rank count on different numbers of hosts cannot share a fit.
TEST(NcclTests, OneRankCountOnDifferentHostCountsIsRefused) {
  NcclTestsRun a = read_nccl_tests(data("h100x8_all_reduce.txt"));
  NcclTestsRun b = a;
  b.path = "other.txt";
  b.nodes = 8;
  const Error e = error_of([&] { fit_nccl_tests({a, b}); });
  EXPECT_EQ(e.where().file, "other.txt");
  EXPECT_TRUE(contains(e.what(), "all_reduce over 8 ranks ran on 8 host(s) here and on 1 in "))
      << e.what();
  b.nodes = 0;  // unknown hosts pool (and never set the NVLink bandwidth)
  EXPECT_EQ(fit_nccl_tests({a, b}).size(), 1u);
}

TEST(NcclTests, GpuPresetFromDeviceName) {
  const std::pair<const char*, const char*> cases[] = {
      {"NVIDIA H100 80GB HBM3", "h100-sxm"},
      {"NVIDIA H200", "h200-sxm"},
      {"NVIDIA A100-SXM4-80GB", "a100-80gb"},
      {"A100-SXM4-80GB", "a100-80gb"},
      {"NVIDIA A800-SXM4-80GB", "a800"},
      {"NVIDIA A100-SXM4-40GB", "a100-40gb"},
      {"NVIDIA A100-SXM-64GB", ""},
      {"NVIDIA A100-PCIE-40GB", ""},
      {"NVIDIA A100 80GB PCIe", ""},
      {"NVIDIA H100 PCIe", ""},
      {"NVIDIA H100 NVL", ""},
      {"NVIDIA H800", "h800"},
      {"NVIDIA B200", "b200"},
      {"NVIDIA GB200", "gb200"},
      {"NVIDIA GB200 186GB", "gb200"},
      {"NVIDIA GB200 192GB", ""},
      {"NVIDIA GB300", "gb300"},
      {"NVIDIA B300 SXM6 AC", "b300"},
      {"NVIDIA GH200 480GB", ""},
      {"NVIDIA H20", ""},
      {"NVIDIA GeForce RTX 4090", ""},
  };
  for (const auto& [name, preset] : cases) {
    EXPECT_EQ(gpu_preset_for_device_name(name), preset) << name;
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
  // Nothing but skipped lines: the error says what was skipped.
  const Error skipped_all = error_of([&] {
    parse_nccl_tests(header + "  0  0  float  sum  -1  0.1  0.00  0.00  0  0.1  0.00  0.00  0\n...\n",
                     "all_reduce_perf.txt");
  });
  EXPECT_EQ(skipped_all.where().file, "all_reduce_perf.txt");
  EXPECT_EQ(skipped_all.message(),
            "no result rows left: skipped 1 row of size 0 (line 3); skipped 1 truncated line "
            "(\"...\") (line 4)");
  // A row before any column header, an empty file, and a file that names no collective.
  EXPECT_THROW(parse_nccl_tests(good, "all_reduce_perf.txt"), Error);
  EXPECT_THROW(parse_nccl_tests(header, "all_reduce_perf.txt"), Error);
  EXPECT_THROW(parse_nccl_tests(header + good, "out.txt"), Error);
  EXPECT_THROW(read_nccl_tests(data("missing.txt")), Error);
}

}  // namespace
}  // namespace trainsim::calib
