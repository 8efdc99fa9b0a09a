// kernels/exec/cuda_device.h in a CUDA build with NCCL: the CUDA Device lives in the GPU module
// (kernels/gpu_module.h), loaded on the first call. Without the module no GPU can be used.
#include "kernels/exec/cuda_device.h"
#include "kernels/gpu_module.h"
#include "sim/core/error.h"

namespace trainsim::kexec {
namespace {

const kernels::gpu::ModuleApi& require() {
  std::string why;
  const kernels::gpu::ModuleApi* m = kernels::gpu::module(&why);
  if (m == nullptr || m->make_cuda_device == nullptr) {
    throw Error(ErrorKind::kRuntime,
                "no CUDA device found: " +
                    (m == nullptr ? why : std::string("the GPU module has no CUDA executor")));
  }
  return *m;
}

}  // namespace

int cuda_devices(std::string* why) {
  std::string load_why;
  const kernels::gpu::ModuleApi* m = kernels::gpu::module(&load_why);
  if (m == nullptr || m->cuda_devices == nullptr) {
    if (why) *why = m == nullptr ? load_why : "the GPU module has no CUDA executor";
    return 0;
  }
  return m->cuda_devices(why);
}

CommId cuda_comm_id() { return require().cuda_comm_id(); }

std::shared_ptr<Device> make_cuda_device(int device, int rank, double timeout_s) {
  return require().make_cuda_device(device, rank, timeout_s);
}

}  // namespace trainsim::kexec
