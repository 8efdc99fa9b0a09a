// Two real processes under `mpirun -np 2`, 4 fake GPUs each, run the 8 ranks of a tiny GPT
// (TP 2 · PP 2 · DP 2) through the executor's job runner and agree on every communicator (the
// helper tests/kernels/launch_plan_mpi_peer.cpp checks; here: both exit 0 and say "agree").
// Skipped, saying so, when mpirun is not installed or the build has no MPI.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "tests/support/cli_runner.h"

namespace {

int shell(const std::string& cmd) {
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(LaunchPlanMpi, TwoProcessesAgreeOnTheCommunicators) {
  if (shell("command -v mpirun > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "mpirun not found: install openmpi-bin (scripts/setup-deps.sh does) to run "
                    "the two-process executor test";
  }
#if !TRAINSIM_WITH_MPI
  GTEST_SKIP() << "this build has no MPI: the executor runs in one process only";
#endif
  const std::string out = trainsim::testing::temp_path("peer.out");
  const std::string err = trainsim::testing::temp_path("peer.err");
  // As in tests/cli/test_sweep_mpi.cpp: root in CI, fewer cores than ranks, no pinning.
  const int code = shell(std::string("mpirun --allow-run-as-root --oversubscribe --bind-to none "
                                     "-np 2 ") +
                         TRAINSIM_LAUNCH_PLAN_PEER + " > " + out + " 2> " + err);
  const std::string o = trainsim::testing::slurp(out);
  ASSERT_EQ(code, 0) << o << trainsim::testing::slurp(err);
  EXPECT_NE(o.find("process 0 of 2: ranks 0..3"), std::string::npos) << o;
  EXPECT_NE(o.find("process 1 of 2: ranks 4..7"), std::string::npos) << o;
  std::size_t agree = 0;
  for (std::size_t at = o.find("agree"); at != std::string::npos; at = o.find("agree", at + 1)) {
    ++agree;
  }
  EXPECT_EQ(agree, 2u) << o;
}

}  // namespace
