// Two real processes under `mpirun -np 2`, 4 fake GPUs each, run the 8 ranks of a tiny GPT
// (TP 2 · PP 2 · DP 2) through the executor's job runner and agree on every communicator (the
// helper tests/kernels/launch_plan_mpi_peer.cpp checks; here: both exit 0 and say "agree"), and
// `trainsim execute --backend fake` gives the same document under mpirun -np 2 as alone.
// Skipped, saying so, when mpirun is not installed or the build has no MPI.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "tests/support/cli_runner.h"

namespace {

using trainsim::testing::have_mpirun;
using trainsim::testing::shell;

TEST(LaunchPlanMpi, TwoProcessesAgreeOnTheCommunicators) {
  if (!have_mpirun()) {
    GTEST_SKIP() << "mpirun not found: install openmpi-bin (scripts/setup-deps.sh does) to run "
                    "the two-process executor test";
  }
#if !TRAINSIM_WITH_MPI
  GTEST_SKIP() << "this build has no MPI: the executor runs in one process only";
#endif
  const std::string out = trainsim::testing::temp_path("peer.out");
  const std::string err = trainsim::testing::temp_path("peer.err");
  const int code = shell(std::string(trainsim::testing::kMpirun2) + TRAINSIM_LAUNCH_PLAN_PEER +
                         " > " + out + " 2> " + err);
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

// `trainsim execute --backend fake` under mpirun -np 2 (ranks 0..3 in one process, 4..7 in the
// other, ids broadcast, measures all-gathered): the fake times are deterministic, so process 0
// writes the single-process document but for the process count.
TEST(LaunchPlanMpi, ExecuteUnderMpirunGivesTheSingleProcessResult) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not found";
#if !TRAINSIM_WITH_MPI
  GTEST_SKIP() << "this build has no MPI";
#endif
  const std::string args =
      " execute scenarios/megascale-175b-12288.yaml --set cluster.gpus=8 --set model.layers=4"
      " --set model.hidden=256 --set model.heads=8 --set model.seq_len=128 --set model.vocab=1024"
      " --set parallel.vpp=1 --set parallel.tp=2 --set parallel.pp=2 --set parallel.dp=2"
      " --set training.global_batch=8 --set training.micro_batch=1 --backend fake"
      " --iterations 2 --warmup 1 --out ";
  const std::string one = trainsim::testing::temp_path("exec1.json");
  const std::string two = trainsim::testing::temp_path("exec2.json");
  const std::string err = trainsim::testing::temp_path("exec2.err");
  ASSERT_EQ(shell(std::string(TRAINSIM_BINARY) + args + one), 0);
  ASSERT_EQ(shell(std::string(trainsim::testing::kMpirun2) +
                  TRAINSIM_BINARY + args + two + " 2> " + err),
            0)
      << trainsim::testing::slurp(err);
  std::string a = trainsim::testing::slurp(one), b = trainsim::testing::slurp(two);
  ASSERT_FALSE(a.empty());
  const std::string p1 = "\"processes\": 1", p2 = "\"processes\": 2";
  ASSERT_NE(b.find(p2), std::string::npos) << b;
  b.replace(b.find(p2), p2.size(), p1);
  const std::string n1 = "GPU(s) (fake GPU (every op 1 µs)), 1 process",
                    n2 = "GPU(s) (fake GPU (every op 1 µs)), 2 process";
  if (b.find(n2) != std::string::npos) b.replace(b.find(n2), n2.size(), n1);
  EXPECT_EQ(a, b);
}

}  // namespace
