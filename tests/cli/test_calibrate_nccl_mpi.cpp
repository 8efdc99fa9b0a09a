// `trainsim calibrate nccl` under `mpirun -np 2` on a machine without a GPU: every rank must exit
// 4 with "no CUDA device found" — none may wait in MPI or NCCL for the other. Each rank runs in a
// small shell that records its own exit code and stderr (so mpirun never kills a rank because the
// other exited first), and `timeout` turns a hang into a failure. Skipped, saying so, when mpirun
// is not installed, and when a CUDA device is present (then the command would really measure).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "kernels/device_info.h"

#include "tests/support/cli_runner.h"

namespace {

using trainsim::testing::shell;
using trainsim::testing::slurp;
using trainsim::testing::temp_path;

const std::string kMpirun = std::string("timeout 90 ") + trainsim::testing::kMpirun2;

TEST(CalibrateNcclMpi, WithoutAGpuEveryRankExits4) {
  if (!trainsim::testing::have_mpirun()) {
    GTEST_SKIP() << "mpirun not found: install openmpi-bin (scripts/setup-deps.sh does) to run "
                    "the mpirun test of calibrate nccl";
  }
  if (!trainsim::kernels::query_devices().devices.empty()) {
    GTEST_SKIP() << "a CUDA device is present: calibrate nccl would measure, not refuse";
  }
  const std::string base = temp_path("nccl_mpi");
  const std::string out = base + ".json";
  // $OMPI_COMM_WORLD_RANK names each rank's files; the shell exits 0 so mpirun lets both finish.
  const std::string rank_cmd = std::string(TRAINSIM_BINARY) + " calibrate nccl --out " + out +
                               " 2> " + base + ".err.$OMPI_COMM_WORLD_RANK; echo $? > " + base +
                               ".rc.$OMPI_COMM_WORLD_RANK";
  const int code =
      shell(std::string(kMpirun) + "sh -c '" + rank_cmd + "' > " + base + ".mpirun 2>&1");
  ASSERT_NE(code, 124) << "mpirun -np 2 calibrate nccl hung (killed after 90 s)\n"
                       << slurp(base + ".mpirun");
  ASSERT_EQ(code, 0) << slurp(base + ".mpirun");
  for (int rank = 0; rank < 2; ++rank) {
    const std::string rc = slurp(base + ".rc." + std::to_string(rank));
    const std::string err = slurp(base + ".err." + std::to_string(rank));
#if TRAINSIM_WITH_MPI
    EXPECT_EQ(rc, "4\n") << "rank " << rank << ": " << err;
    EXPECT_NE(err.find("no CUDA device found"), std::string::npos)
        << "rank " << rank << ": " << err;
#else
    // Without MPI the ranks could not join one communicator; the build refuses instead.
    EXPECT_EQ(rc, "2\n") << "rank " << rank << ": " << err;
    EXPECT_NE(err.find("built without MPI"), std::string::npos) << "rank " << rank << ": " << err;
#endif
    std::remove((base + ".rc." + std::to_string(rank)).c_str());
    std::remove((base + ".err." + std::to_string(rank)).c_str());
  }
  std::ifstream written(out);
  EXPECT_FALSE(written.good()) << "no rank may write a profile without a GPU";
  std::remove((base + ".mpirun").c_str());
}

}  // namespace
