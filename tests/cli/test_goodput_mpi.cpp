// `trainsim goodput` under `mpirun -np 2`: the ranks split the trials and rank 0 writes one
// result, byte-identical to a single-process run. Skipped, saying so, only when mpirun is absent.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "tests/support/cli_runner.h"

namespace {

using trainsim::testing::shell;
using trainsim::testing::slurp;
using trainsim::testing::temp_path;

TEST(GoodputMpi, TwoRanksGiveTheSingleProcessResult) {
  if (!trainsim::testing::have_mpirun()) {
    GTEST_SKIP() << "mpirun not found: install openmpi-bin (scripts/setup-deps.sh does) to run "
                    "the distributed goodput test";
  }
  const std::string run = std::string(TRAINSIM_BINARY) +
                          " goodput --days 54 --trials 301 --format json -o ";
  const std::string single = temp_path("goodput_single.json"), ranks = temp_path("goodput_mpi.json");
  const std::string err = temp_path("goodput_mpi.err");
  ASSERT_EQ(shell(run + single + " --jobs 2"), 0);
  const int code = shell(trainsim::testing::kMpirun2 + run + ranks + " --jobs 1 2> " + err);
#if TRAINSIM_WITH_MPI
  ASSERT_EQ(code, 0) << slurp(err);
  EXPECT_EQ(shell("cmp -s " + single + " " + ranks), 0)
      << "mpirun -np 2 wrote a different result than one process";
#else
  EXPECT_EQ(code, 2) << slurp(err);
#endif
  std::remove(single.c_str());
  std::remove(ranks.c_str());
}

}  // namespace
