// What the GPU side of trainsim was built with and which GPUs it can see.
//
// The CUDA parts are optional (DESIGN.md §3): without nvcc at configure time this reports that the
// build has no CUDA support; with it, it asks the CUDA runtime for the devices present. Neither
// case throws: a machine without a GPU is a normal state for the simulator.
#pragma once

#include <string>
#include <vector>

namespace trainsim::kernels {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int sm_major = 0, sm_minor = 0;
  double memory_bytes = 0;
  int multiprocessors = 0;
};

struct DeviceReport {
  bool cuda_compiled = false;   // built with nvcc
  std::string cuda_version;     // runtime version the build links ("13.0"), "" without CUDA
  std::string status;           // "ok", or why no device can be used
  std::vector<DeviceInfo> devices;
};

DeviceReport query_devices();

}  // namespace trainsim::kernels
