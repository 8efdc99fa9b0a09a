// nccl_bench.h in a build without NCCL (or without CUDA).
#include "kernels/nccl_bench.h"
#include "sim/core/error.h"

namespace trainsim::kernels {
namespace {

[[noreturn]] void no_nccl() {
  throw Error(ErrorKind::kRuntime,
              "this build has no NCCL (CUDA or nccl.h/libnccl were not found at configure time)",
              {}, "install NCCL (libnccl-dev) and reconfigure, or import nccl-tests output");
}

}  // namespace

std::vector<calib::NcclTestsRun> run_nccl_bench(const NcclBenchOptions&) { no_nccl(); }
std::vector<calib::NcclTestsRun> run_nccl_bench(const NcclBenchOptions&,
                                                const NcclBenchProcesses&) {
  no_nccl();
}
std::string nccl_version() { return ""; }
bool nccl_built() { return false; }
std::vector<float> nccl_all_reduce_check(const std::vector<float>&, int) { no_nccl(); }

}  // namespace trainsim::kernels
