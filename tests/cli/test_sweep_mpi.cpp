// `trainsim sweep` under `mpirun -np 2`: the ranks split the points and rank 0 writes one result,
// byte-identical to a single-process run. Skipped, saying so, only when mpirun is not installed.
#include <gtest/gtest.h>

#include "tests/support/cli_runner.h"

namespace {

// The sweep: every factorization of MegaScale's 12,288 GPUs (286,920 points).
TEST(SweepMpi, TwoRanksGiveTheSingleProcessResult) {
  trainsim::testing::expect_mpi_output_matches_single_process(
      "sweep scenarios/megascale-175b-12288.yaml --auto -q --format json", "sweep");
}

}  // namespace
