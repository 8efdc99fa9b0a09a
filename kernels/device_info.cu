#include <cuda_runtime.h>

#include <string>

#include "kernels/device_info.h"

namespace trainsim::kernels {

DeviceReport query_devices() {
  DeviceReport r;
  r.cuda_compiled = true;
  int runtime = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) {
    r.cuda_version = std::to_string(runtime / 1000) + "." + std::to_string((runtime % 1000) / 10);
  }
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    r.status = std::string("no usable CUDA device: ") + cudaGetErrorName(err) + " (" +
               cudaGetErrorString(err) + ")";
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return r;
  }
  r.status = count > 0 ? "ok" : "no CUDA device present";
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    DeviceInfo d;
    d.index = i;
    d.name = p.name;
    d.sm_major = p.major;
    d.sm_minor = p.minor;
    d.memory_bytes = static_cast<double>(p.totalGlobalMem);
    d.multiprocessors = p.multiProcessorCount;
    r.devices.push_back(d);
  }
  return r;
}

}  // namespace trainsim::kernels
