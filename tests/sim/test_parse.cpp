// sim/core/parse: the one checked number conversion, the input-file reader and the final
// NaN/inf guard of docs/reliability.md.
#include "sim/core/parse.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <functional>
#include <fstream>
#include <limits>

#include "sim/core/limits.h"

namespace trainsim {
namespace {

std::string what_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Parse, DoublesAreWholeFiniteAndNotSubnormal) {
  EXPECT_EQ(to_double("1.5").value, 1.5);
  EXPECT_EQ(to_double("-2e3").value, -2000);
  EXPECT_EQ(to_double("0").problem, NumberProblem::kNone);
  EXPECT_EQ(to_double("2.2250738585072014e-308").problem, NumberProblem::kNone);
  EXPECT_EQ(to_double("").problem, NumberProblem::kNotANumber);
  EXPECT_EQ(to_double(" 1").problem, NumberProblem::kNotANumber);
  EXPECT_EQ(to_double("1x").problem, NumberProblem::kNotANumber);
  EXPECT_EQ(to_double("1e999").problem, NumberProblem::kNotFinite);
  EXPECT_EQ(to_double("inf").problem, NumberProblem::kNotFinite);
  EXPECT_EQ(to_double("nan").problem, NumberProblem::kNotFinite);
  EXPECT_EQ(to_double("1e-320").problem, NumberProblem::kSubnormal);
  EXPECT_EQ(to_double("-1e-400").problem, NumberProblem::kSubnormal);
}

TEST(Parse, IntegersDistinguishTooLargeFromNotANumber) {
  EXPECT_EQ(to_int64("-42").value, -42);
  EXPECT_EQ(to_int64("9223372036854775807").value, std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(to_int64("99999999999999999999").problem, NumberProblem::kTooLarge);
  EXPECT_EQ(to_int64("99999999999999999999x").problem, NumberProblem::kNotANumber);
  EXPECT_EQ(to_int64("1.0").problem, NumberProblem::kNotANumber);
  EXPECT_EQ(to_int64("").problem, NumberProblem::kNotANumber);
}

TEST(Parse, ErrorsNameFileLineAndKey) {
  const std::string e1 = what_of([] { parse_double("1e-320", {"a.yaml", 3, "simulation.jitter"}); });
  EXPECT_EQ(e1.rfind("a.yaml:3: `simulation.jitter`: `1e-320` is too small", 0), 0u) << e1;
  const std::string e2 = what_of([] { parse_int64("99999999999999999999", {"f.txt", 2, "nGpus"}); });
  EXPECT_NE(e2.find("f.txt:2: `nGpus`: `99999999999999999999` is too large"), std::string::npos);
  const std::string e3 = what_of([] { parse_int("12", {"--set", 0, "k"}, 0, 8); });
  EXPECT_EQ(e3, "--set: `k`: `12` is outside the range >= 0 and <= 8");
  const std::string e4 = what_of([] { parse_double("2", {"p.json", 0, "eff"}, 0.001, 1); });
  EXPECT_NE(e4.find("outside the range [0.001, 1]"), std::string::npos) << e4;
  const std::string e5 =
      what_of([] { check_number(5e-324, {"p.json", 0, "x"}, 0, 1, "a fraction"); });
  EXPECT_NE(e5.find("too small"), std::string::npos) << e5;
  EXPECT_EQ(what_of([] { check_number(0.5, {"p.json", 0, "x"}, 0, 1, "a fraction"); }),
            "(no error)");
}

TEST(Parse, FinalGuardIsARuntimeError) {
  EXPECT_NO_THROW(require_finite(1.0, "mfu"));
  try {
    require_finite(std::nan(""), "iteration_time_s");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 4);
    EXPECT_NE(std::string(e.what()).find("internal error: output `iteration_time_s` is NaN"),
              std::string::npos);
  }
  EXPECT_THROW(require_finite(std::numeric_limits<double>::infinity(), "x"), Error);
}

TEST(Parse, InputFilesAreRegularBoundedAndLoseTheirBom) {
  const std::string dir = ::testing::TempDir() + std::to_string(::getpid()) + "_parse";
  ::mkdir(dir.c_str(), 0700);
  const std::string file = dir + "/a.yaml";
  std::ofstream(file, std::ios::binary) << "\xEF\xBB\xBFkey: 1\n";
  EXPECT_EQ(read_input_file(file, "scenario file", 100), "key: 1\n");
  EXPECT_NE(what_of([&] { read_input_file(file, "scenario file", 5); }).find("at most 5 bytes"),
            std::string::npos);
  EXPECT_NE(what_of([&] { read_input_file(dir, "scenario file", 100); })
                .find(dir + ": is a directory, not a scenario file"),
            std::string::npos);
  EXPECT_NE(what_of([] { read_input_file("/dev/null", "fabric file", 100); })
                .find("/dev/null: is not a regular file (a device)"),
            std::string::npos);
  EXPECT_NE(what_of([] { read_input_file("", "scenario file", 100); }).find("empty file name"),
            std::string::npos);
  EXPECT_NE(what_of([&] { read_input_file(dir + "/none", "scenario file", 100); })
                .find("no such file"),
            std::string::npos);
  // A binary file (a NUL byte) is refused as such, and UTF-16 gets its own hint.
  const std::string binary = dir + "/b.csv";
  std::ofstream(binary, std::ios::binary) << std::string("id,\x89PNG\0\x01", 10);
  const std::string e_bin = what_of([&] { read_input_file(binary, "runs file", 100); });
  EXPECT_NE(e_bin.find(binary + ": is not a text file (a NUL byte at byte 8); a runs file is text"),
            std::string::npos)
      << e_bin;
  std::ofstream(binary, std::ios::binary) << std::string("\xFF\xFEi\0d\0", 6);
  EXPECT_NE(what_of([&] { read_input_file(binary, "runs file", 100); }).find("UTF-16"),
            std::string::npos);
  ::unlink(binary.c_str());
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(what_of([&] { read_input_file(fifo, "scenario file", 100); }).find("(a FIFO)"),
            std::string::npos);
  ::unlink(fifo.c_str());
  ::unlink(file.c_str());
  ::rmdir(dir.c_str());
}

TEST(Parse, ClipNameCutsLongNames) {
  EXPECT_EQ(clip_name("short"), "short");
  const std::string cut = clip_name(std::string(1000, 'k'), 10);
  EXPECT_EQ(cut, "kkkkkkkkkk... (1000 characters)");
}

}  // namespace
}  // namespace trainsim
