// Without CUDA or NCCL at build time: no GPU can be used.
#include "kernels/device_info.h"
#include "kernels/exec/cuda_device.h"
#include "sim/core/error.h"

namespace trainsim::kexec {

int cuda_devices(std::string* why) {
  if (why) {
    const kernels::DeviceReport d = kernels::query_devices();
    *why = d.cuda_compiled ? "this build has no NCCL (libnccl-dev was not found at configure time)"
                           : d.status;
  }
  return 0;
}

CommId cuda_comm_id() {
  throw Error(ErrorKind::kRuntime, "no CUDA device found: this build cannot execute on GPUs");
}

std::shared_ptr<Device> make_cuda_device(int, int, double) {
  throw Error(ErrorKind::kRuntime, "no CUDA device found: this build cannot execute on GPUs");
}

}  // namespace trainsim::kexec
