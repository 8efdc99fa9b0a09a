// `trainsim goodput` under `mpirun -np 2`: the ranks split the trials and rank 0 writes one
// result, byte-identical to a single-process run. Skipped, saying so, only when mpirun is absent.
#include <gtest/gtest.h>

#include "tests/support/cli_runner.h"

namespace {

TEST(GoodputMpi, TwoRanksGiveTheSingleProcessResult) {
  trainsim::testing::expect_mpi_output_matches_single_process(
      "goodput --days 54 --trials 301 --format json", "goodput");
}

// A goodput sweep: the ranks split the points, each point's trials run on its rank.
TEST(GoodputMpi, GoodputSweepTwoRanksGiveTheSingleProcessResult) {
  trainsim::testing::expect_mpi_output_matches_single_process(
      "sweep --rank-by goodput --trials 50 -q --format json "
      "--vary reliability.checkpoint.interval=600,auto --vary reliability.spares=8,auto "
      "--vary optimizations.fast_comm_init=true,false",
      "goodput_sweep");
}

}  // namespace
