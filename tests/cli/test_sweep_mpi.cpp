// `trainsim sweep` under `mpirun -np 2`: the ranks split the points and rank 0 writes one result,
// byte-identical to a single-process run. Skipped, saying so, only when mpirun is not installed.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int shell(const std::string& cmd) {
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + std::to_string(::getpid()) + "_" + name;
}

// As root (CI) OpenMPI needs --allow-run-as-root; in containers with fewer cores than ranks,
// --oversubscribe; --bind-to none keeps the two ranks from being pinned to one core.
const char* kMpirun = "mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 ";

// The sweep: every factorization of MegaScale's 12,288 GPUs (286,920 points).
TEST(SweepMpi, TwoRanksGiveTheSingleProcessResult) {
  if (shell("command -v mpirun > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "mpirun not found: install openmpi-bin (scripts/setup-deps.sh does) to run "
                    "the distributed sweep test";
  }
  const std::string sweep = std::string(TRAINSIM_BINARY) +
                            " sweep scenarios/megascale-175b-12288.yaml --auto -q --format json -o ";
  const std::string single = temp_path("single.json"), ranks = temp_path("mpi.json");
  const std::string err = temp_path("mpi.err");
  ASSERT_EQ(shell(sweep + single + " --jobs 2"), 0);
  const int code = shell(kMpirun + sweep + ranks + " --jobs 1 2> " + err);
#if TRAINSIM_WITH_MPI
  ASSERT_EQ(code, 0) << slurp(err);
  EXPECT_EQ(shell("cmp -s " + single + " " + ranks), 0)
      << "mpirun -np 2 wrote a different result than one process";
#else
  // Without MPI each rank would sweep everything; the build refuses instead.
  EXPECT_EQ(code, 2) << slurp(err);
  EXPECT_NE(slurp(err).find("built without MPI"), std::string::npos) << slurp(err);
#endif
  std::remove(single.c_str());
  std::remove(ranks.c_str());
}

}  // namespace
