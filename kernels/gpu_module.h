// The GPU module: every part of trainsim that calls CUDA, cuBLASLt or NCCL (the kernels and their
// launchers, the GEMM runner, the `calibrate kernels` / `calibrate nccl` drivers, the test-facing
// device_ops and the CUDA Device of the real executor) is built into one shared module,
// libtrainsim_gpu.so, which the `trainsim` executable loads with dlopen on the first call that
// needs a GPU. Commands that never touch a GPU (`--version`, `run`, `sweep`, `validate`, ...)
// therefore map no CUDA library at all (docs/ARCHITECTURE.md, "Decisions and deviations").
//
// The rest of the program keeps calling the plain C++ interfaces of kernels/ (device_info.h,
// bench.h, nccl_bench.h, device_ops.h, exec/cuda_device.h). In a CUDA build those functions are
// forwarders (kernels/gpu_client.cpp, kernels/exec/cuda_device_client.cpp) that load the module
// and call through the table below; in a build without CUDA the CPU stand-ins that say so are
// linked instead, and no module exists.
//
// The module and the executable come from one build tree (same compiler, same headers), so the
// table passes C++ types by value; `abi` guards against a module left over from another build.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/bench.h"
#include "kernels/device_info.h"
#include "kernels/device_ops.h"
#include "kernels/exec/device.h"
#include "kernels/nccl_bench.h"

namespace trainsim::kernels::gpu {

/// File name of the module; it is looked for next to the executable (kernels/module_loader.h).
inline constexpr const char* kModuleFile = "libtrainsim_gpu.so";
/// The one symbol the module exports: `const ModuleApi* trainsim_gpu_module(const HostApi*)`.
inline constexpr const char* kEntrySymbol = "trainsim_gpu_module";

/// What the module calls back in the executable: the few plain C++ functions of trainsim's static
/// libraries that the CUDA side uses (those libraries are not position-independent, so the module
/// does not link them; kernels/gpu_module_host.cpp defines these names in the module as calls
/// through this table).
struct HostApi {
  std::uint64_t abi = 0;
  calib::MeasuredKernel (*to_measured)(const BenchItem&, double, int) = nullptr;  // bench_plan.h
  const char* (*collective_name)(coll::Kind) = nullptr;  // coll::to_string
  const char* (*stream_name)(plan::Stream) = nullptr;    // plan::to_string
};

struct ModuleApi {
  std::uint64_t abi = 0;  // abi_signature() of the build that made the module

  // kernels/device_info.h
  DeviceReport (*query_devices)() = nullptr;
  // kernels/bench.h
  BenchResult (*run_kernel_bench)(const std::vector<BenchItem>&, const BenchOptions&,
                                  const std::function<void(const calib::MeasuredKernel&)>&) =
      nullptr;
  // kernels/nccl_bench.h
  std::vector<calib::NcclTestsRun> (*run_nccl_bench)(const NcclBenchOptions&) = nullptr;
  std::vector<calib::NcclTestsRun> (*run_nccl_bench_processes)(const NcclBenchOptions&,
                                                               const NcclBenchProcesses&) = nullptr;
  std::string (*nccl_version)() = nullptr;
  bool (*nccl_built)() = nullptr;
  std::vector<float> (*nccl_all_reduce_check)(const std::vector<float>&, int) = nullptr;

  // kernels/device_ops.h
  bool (*device_available)(std::string*) = nullptr;
  bool (*gemm_supported)(DType) = nullptr;
  std::vector<float> (*gemm_nt)(const std::vector<float>&, const std::vector<float>&, int, int, int,
                                int, DType) = nullptr;
  std::vector<float> (*layernorm)(const std::vector<float>&, const std::vector<float>&,
                                  const std::vector<float>&, int, int, float, DType) = nullptr;
  std::vector<float> (*rmsnorm)(const std::vector<float>&, const std::vector<float>&, int, int,
                                float, DType) = nullptr;
  std::vector<float> (*softmax)(const std::vector<float>&, int, int, float, DType) = nullptr;
  std::vector<float> (*bias_gelu)(const std::vector<float>&, const std::vector<float>&, int, int,
                                  DType) = nullptr;
  std::vector<float> (*swiglu)(const std::vector<float>&, int, int, DType) = nullptr;
  dev::Masked (*dropout)(const std::vector<float>&, float, std::uint64_t, DType) = nullptr;
  dev::Masked (*bias_dropout_add)(const std::vector<float>&, const std::vector<float>&,
                                  const std::vector<float>&, int, int, float, std::uint64_t,
                                  DType) = nullptr;
  std::vector<float> (*embedding)(const std::vector<std::int32_t>&, const std::vector<float>&, int,
                                  DType) = nullptr;
  dev::CrossEntropy (*cross_entropy)(const std::vector<float>&, const std::vector<std::int32_t>&,
                                     int, int, DType) = nullptr;
  dev::Attention (*attention_forward)(const ref::AttentionShape&, const std::vector<float>&,
                                      const std::vector<float>&, const std::vector<float>&,
                                      DType) = nullptr;
  dev::AttentionGrads (*attention_backward)(const ref::AttentionShape&, const std::vector<float>&,
                                            const std::vector<float>&, const std::vector<float>&,
                                            const std::vector<float>&, const std::vector<float>&,
                                            const std::vector<float>&, DType) = nullptr;
  dev::OptimizerState (*adam_step)(const dev::OptimizerState&, const std::vector<float>&,
                                   const ref::AdamParams&) = nullptr;
  dev::OptimizerState (*lamb_step)(const dev::OptimizerState&, const std::vector<float>&,
                                   const ref::AdamParams&) = nullptr;
  dev::NormGrads (*layernorm_bwd)(const std::vector<float>&, const std::vector<float>&,
                                  const std::vector<float>&, const std::vector<float>&,
                                  const std::vector<float>&, int, int, DType) = nullptr;
  dev::NormGrads (*rmsnorm_bwd)(const std::vector<float>&, const std::vector<float>&,
                                const std::vector<float>&, const std::vector<float>&, int, int,
                                DType) = nullptr;
  std::vector<float> (*softmax_bwd)(const std::vector<float>&, const std::vector<float>&, int, int,
                                    float, DType) = nullptr;
  dev::BiasGrads (*bias_gelu_bwd)(const std::vector<float>&, const std::vector<float>&,
                                  const std::vector<float>&, int, int, DType) = nullptr;
  std::vector<float> (*swiglu_bwd)(const std::vector<float>&, const std::vector<float>&, int, int,
                                   DType) = nullptr;
  std::vector<float> (*dropout_bwd)(const std::vector<float>&, const std::vector<std::uint8_t>&,
                                    float, DType) = nullptr;
  dev::BiasGrads (*bias_dropout_add_bwd)(const std::vector<float>&,
                                         const std::vector<std::uint8_t>&, int, int, float,
                                         DType) = nullptr;
  std::vector<float> (*embedding_bwd)(const std::vector<std::int32_t>&, const std::vector<float>&,
                                      int, int, DType) = nullptr;
  std::vector<unsigned char> (*copy)(const std::vector<unsigned char>&, int, int) = nullptr;

  // kernels/exec/cuda_device.h (null when the build has no NCCL: no CUDA executor then)
  int (*cuda_devices)(std::string*) = nullptr;
  kexec::CommId (*cuda_comm_id)() = nullptr;
  std::shared_ptr<kexec::Device> (*make_cuda_device)(int, int, double) = nullptr;
};

/// A fingerprint of the types the table passes, the same on both sides of one build.
constexpr std::uint64_t abi_signature() {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the sizes
  for (const std::uint64_t s :
       {std::uint64_t{2}, std::uint64_t{sizeof(ModuleApi)}, std::uint64_t{sizeof(DeviceReport)},
        std::uint64_t{sizeof(DeviceInfo)}, std::uint64_t{sizeof(BenchItem)},
        std::uint64_t{sizeof(BenchOptions)}, std::uint64_t{sizeof(BenchResult)},
        std::uint64_t{sizeof(calib::MeasuredKernel)}, std::uint64_t{sizeof(calib::NcclTestsRun)},
        std::uint64_t{sizeof(NcclBenchOptions)}, std::uint64_t{sizeof(NcclBenchProcesses)},
        std::uint64_t{sizeof(ref::AttentionShape)}, std::uint64_t{sizeof(ref::AdamParams)},
        std::uint64_t{sizeof(kexec::CollectiveCall)}, std::uint64_t{sizeof(kexec::KernelLaunch)},
        std::uint64_t{sizeof(HostApi)},
        std::uint64_t{sizeof(kexec::CommGroup)}}) {
    h = (h ^ s) * 1099511628211ull;
  }
  return h;
}

/// The module's table, loading it on the first call (thread safe; never unloaded). Returns
/// nullptr when it cannot be loaded and says why in `why`: the file is missing, one of its
/// libraries (cuBLASLt, NCCL) is missing, or it comes from another build. Looks at
/// $TRAINSIM_GPU_MODULE if set (that path only), else next to the executable, else where this
/// build put it.
const ModuleApi* module(std::string* why = nullptr);

}  // namespace trainsim::kernels::gpu
