#include "kernels/device_info.h"

namespace trainsim::kernels {

DeviceReport query_devices() {
  DeviceReport r;
  r.cuda_compiled = false;
  r.status = "this build has no CUDA support (nvcc was not found at configure time)";
  return r;
}

}  // namespace trainsim::kernels
