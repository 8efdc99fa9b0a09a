// Runs the real `trainsim` executable (TRAINSIM_BINARY, set by tests/CMakeLists.txt) as a process
// and captures its exit code, stdout and stderr, for the CLI integration tests. Capture files are
// named after the process id, since ctest runs test cases in parallel processes.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace trainsim::testing {

// Wall-clock guards in CLI tests (a refusal that must not hang, a run that must not take
// minutes) are written for an optimized build; sanitizer builds run at -O0 with instrumentation,
// about ten times slower, so their guards stretch by that much.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr double kWallClockScale = 10.0;
inline constexpr bool kSanitized = true;
#else
inline constexpr double kWallClockScale = 1.0;
inline constexpr bool kSanitized = false;
#endif

struct CliRun {
  int code = -1;
  std::string out, err;
  double seconds = 0;  // wall time of the process
};

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// A per-process path in the test temp directory.
inline std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + std::to_string(::getpid()) + "_" + name;
}

/// Exit code of a shell command (-1 when it did not exit normally).
/// Whether `hay` contains `needle` (output checks).
inline bool has(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

inline int shell(const std::string& cmd) {
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// Whether `mpirun` is on the PATH (MPI tests skip visibly without it).
inline bool have_mpirun() { return shell("command -v mpirun > /dev/null 2>&1") == 0; }

/// Two MPI ranks: as root (CI) OpenMPI needs --allow-run-as-root; with fewer cores than ranks
/// --oversubscribe; --bind-to none keeps both ranks off one pinned core.
inline constexpr const char* kMpirun2 = "mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 ";

/// `trainsim ARGS` through the shell (so ARGS may hold quoting and redirections).
inline CliRun trainsim(const std::string& args) {
  const std::string out = temp_path("cli_out"), err = temp_path("cli_err");
  const std::string cmd = std::string(TRAINSIM_BINARY) + " " + args + " > " + out + " 2> " + err;
  const auto start = std::chrono::steady_clock::now();
  const int status = std::system(cmd.c_str());
  CliRun r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// Runs `trainsim ARGS -o FILE` in one process (--jobs 2) and under `mpirun -np 2` (--jobs 1)
// and expects the same bytes; a build without MPI must refuse the two-rank run with exit 2
// ("built without MPI"). Skips, saying so, when mpirun is not installed. ARGS must write its
// result with -o, which is appended.
inline void expect_mpi_output_matches_single_process(const std::string& args,
                                                     const std::string& name) {
  if (!have_mpirun()) {
    GTEST_SKIP() << "mpirun not found: install openmpi-bin (scripts/setup-deps.sh does) to run "
                    "the distributed test";
  }
  const std::string run = std::string(TRAINSIM_BINARY) + " " + args + " -o ";
  const std::string single = temp_path(name + "_single.out"), ranks = temp_path(name + "_mpi.out");
  const std::string err = temp_path(name + "_mpi.err");
  ASSERT_EQ(shell(run + single + " --jobs 2"), 0);
  const int code = shell(kMpirun2 + run + ranks + " --jobs 1 2> " + err);
#if TRAINSIM_WITH_MPI
  ASSERT_EQ(code, 0) << slurp(err);
  EXPECT_EQ(shell("cmp -s " + single + " " + ranks), 0)
      << "mpirun -np 2 wrote a different result than one process: " << args;
#else
  // Without MPI each rank would do all the work; the build refuses instead.
  EXPECT_EQ(code, 2) << slurp(err);
  EXPECT_NE(slurp(err).find("built without MPI"), std::string::npos) << slurp(err);
#endif
  std::remove(single.c_str());
  std::remove(ranks.c_str());
  std::remove(err.c_str());
}

}  // namespace trainsim::testing
