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

#include "tests/support/cli_runner.h"

namespace {

using trainsim::testing::shell;
using trainsim::testing::slurp;
using trainsim::testing::temp_path;

const std::string kMpirun = trainsim::testing::kMpirun2;

// The sweep: every factorization of MegaScale's 12,288 GPUs (286,920 points).
TEST(SweepMpi, TwoRanksGiveTheSingleProcessResult) {
  if (!trainsim::testing::have_mpirun()) {
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
