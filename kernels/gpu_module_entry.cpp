// The entry point of libtrainsim_gpu.so (kernels/gpu_module.h): the table of the module's
// functions, and the executable's functions the module calls back (HostApi). Everything else in
// the module has hidden visibility.
#include "kernels/gpu_module.h"

#include "kernels/bench_plan.h"
#include "sim/collective/analytic.h"
#include "sim/plan/program.h"

#if TRAINSIM_GPU_MODULE_EXEC
#include "kernels/exec/cuda_device.h"
#endif

namespace trainsim::kernels::gpu {

const HostApi* g_host = nullptr;  // set by the entry point, before any call

namespace {

ModuleApi make_table() {
  ModuleApi t;
  t.abi = abi_signature();
  t.query_devices = &kernels::query_devices;
  t.run_kernel_bench = &kernels::run_kernel_bench;
  t.run_nccl_bench = static_cast<std::vector<calib::NcclTestsRun> (*)(const NcclBenchOptions&)>(
      &kernels::run_nccl_bench);
  t.run_nccl_bench_processes = static_cast<std::vector<calib::NcclTestsRun> (*)(
      const NcclBenchOptions&, const NcclBenchProcesses&)>(&kernels::run_nccl_bench);
  t.nccl_version = &kernels::nccl_version;
  t.nccl_built = &kernels::nccl_built;
  t.nccl_all_reduce_check = &kernels::nccl_all_reduce_check;
  t.device_available = &dev::device_available;
  t.gemm_supported = &dev::gemm_supported;
  t.gemm_nt = &dev::gemm_nt;
  t.layernorm = &dev::layernorm;
  t.rmsnorm = &dev::rmsnorm;
  t.softmax = &dev::softmax;
  t.bias_gelu = &dev::bias_gelu;
  t.swiglu = &dev::swiglu;
  t.dropout = &dev::dropout;
  t.bias_dropout_add = &dev::bias_dropout_add;
  t.embedding = &dev::embedding;
  t.cross_entropy = &dev::cross_entropy;
  t.attention_forward = &dev::attention_forward;
  t.attention_backward = &dev::attention_backward;
  t.adam_step = &dev::adam_step;
  t.lamb_step = &dev::lamb_step;
  t.layernorm_bwd = &dev::layernorm_bwd;
  t.rmsnorm_bwd = &dev::rmsnorm_bwd;
  t.softmax_bwd = &dev::softmax_bwd;
  t.bias_gelu_bwd = &dev::bias_gelu_bwd;
  t.swiglu_bwd = &dev::swiglu_bwd;
  t.dropout_bwd = &dev::dropout_bwd;
  t.bias_dropout_add_bwd = &dev::bias_dropout_add_bwd;
  t.embedding_bwd = &dev::embedding_bwd;
  t.copy = &dev::copy;
#if TRAINSIM_GPU_MODULE_EXEC
  t.cuda_devices = &kexec::cuda_devices;
  t.cuda_comm_id = &kexec::cuda_comm_id;
  t.make_cuda_device = &kexec::make_cuda_device;
#endif
  return t;
}

}  // namespace
}  // namespace trainsim::kernels::gpu

// The executable's functions, called through its table. A host from another build gets no table.
namespace trainsim::kernels {
calib::MeasuredKernel to_measured(const BenchItem& item, double median_s, int repeats) {
  return gpu::g_host->to_measured(item, median_s, repeats);
}
}  // namespace trainsim::kernels
namespace trainsim::coll {
const char* to_string(Kind k) { return kernels::gpu::g_host->collective_name(k); }
}  // namespace trainsim::coll
namespace trainsim::plan {
const char* to_string(Stream s) { return kernels::gpu::g_host->stream_name(s); }
}  // namespace trainsim::plan

extern "C" __attribute__((visibility("default"))) const trainsim::kernels::gpu::ModuleApi*
trainsim_gpu_module(const trainsim::kernels::gpu::HostApi* host) {
  using trainsim::kernels::gpu::abi_signature;
  if (host == nullptr || host->abi != abi_signature()) return nullptr;
  trainsim::kernels::gpu::g_host = host;
  static const trainsim::kernels::gpu::ModuleApi table = trainsim::kernels::gpu::make_table();
  return &table;
}
