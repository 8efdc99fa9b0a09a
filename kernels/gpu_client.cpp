// The CUDA build's side of kernels/gpu_module.h in the executable: the loader of
// libtrainsim_gpu.so and the functions of device_info.h, bench.h, nccl_bench.h and device_ops.h,
// which load the module on first use and call through its table. When the module cannot be
// loaded, query_devices() and dev::device_available() say why (no device can be used) and the
// calls that need a GPU throw Error(kRuntime) with the reason.
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/bench_plan.h"
#include "kernels/gpu_module.h"
#include "kernels/module_loader.h"
#include "sim/collective/analytic.h"
#include "sim/core/error.h"
#include "sim/plan/program.h"

#ifndef TRAINSIM_GPU_MODULE_BUILD_PATH
#error "TRAINSIM_GPU_MODULE_BUILD_PATH (the module's path in the build tree) must be defined"
#endif
#ifndef TRAINSIM_CUDA_VERSION
#error "TRAINSIM_CUDA_VERSION (the CUDA toolkit's major.minor) must be defined"
#endif

namespace trainsim::kernels {
namespace gpu {
namespace {

struct Loaded {
  const ModuleApi* api = nullptr;
  std::string why;
};

Loaded load() {
  ModuleSpec spec;
  spec.file = kModuleFile;
  spec.entry = kEntrySymbol;
  spec.env = "TRAINSIM_GPU_MODULE";
  spec.build_path = TRAINSIM_GPU_MODULE_BUILD_PATH;
  std::string why;
  void* entry = load_module(spec, why);
  if (entry == nullptr) return {nullptr, why};
  static HostApi host;
  host.abi = abi_signature();
  host.to_measured = &kernels::to_measured;
  host.collective_name = static_cast<const char* (*)(coll::Kind)>(&coll::to_string);
  host.stream_name = static_cast<const char* (*)(plan::Stream)>(&plan::to_string);
  const ModuleApi* api = reinterpret_cast<const ModuleApi* (*)(const HostApi*)>(entry)(&host);
  if (api == nullptr || api->abi != abi_signature()) {
    return {nullptr, "the GPU module comes from another build of trainsim (rebuild it)"};
  }
  return {api, ""};
}

}  // namespace

const ModuleApi* module(std::string* why) {
  static const Loaded loaded = load();
  if (loaded.api == nullptr && why != nullptr) *why = loaded.why;
  return loaded.api;
}

/// The table, or Error(kRuntime) saying why no GPU can be used.
const ModuleApi& require() {
  std::string why;
  const ModuleApi* m = module(&why);
  if (m == nullptr) {
    throw Error(ErrorKind::kRuntime, "no CUDA device found: " + why, {},
                "build trainsim with CUDA on this machine, or set TRAINSIM_GPU_MODULE to the "
                "module's path");
  }
  return *m;
}

}  // namespace gpu

DeviceReport query_devices() {
  std::string why;
  if (const gpu::ModuleApi* m = gpu::module(&why)) return m->query_devices();
  DeviceReport r;
  r.cuda_compiled = true;
  r.cuda_version = TRAINSIM_CUDA_VERSION;
  r.status = why;
  return r;
}

BenchResult run_kernel_bench(const std::vector<BenchItem>& items, const BenchOptions& options,
                             const std::function<void(const calib::MeasuredKernel&)>& progress) {
  return gpu::require().run_kernel_bench(items, options, progress);
}

std::vector<calib::NcclTestsRun> run_nccl_bench(const NcclBenchOptions& options) {
  return gpu::require().run_nccl_bench(options);
}

std::vector<calib::NcclTestsRun> run_nccl_bench(const NcclBenchOptions& options,
                                                const NcclBenchProcesses& processes) {
  return gpu::require().run_nccl_bench_processes(options, processes);
}

std::string nccl_version() {
  const gpu::ModuleApi* m = gpu::module();
  return m != nullptr ? m->nccl_version() : std::string();
}

bool nccl_built() {
  const gpu::ModuleApi* m = gpu::module();
  return m != nullptr && m->nccl_built();
}

std::vector<float> nccl_all_reduce_check(const std::vector<float>& values, int devices) {
  return gpu::require().nccl_all_reduce_check(values, devices);
}

namespace dev {

bool device_available(std::string* why) {
  const gpu::ModuleApi* m = gpu::module(why);
  return m != nullptr && m->device_available(why);
}

bool gemm_supported(DType t) { return gpu::require().gemm_supported(t); }
std::vector<float> gemm_nt(const std::vector<float>& x, const std::vector<float>& w, int m, int n,
                           int k, int batch, DType t) {
  return gpu::require().gemm_nt(x, w, m, n, k, batch, t);
}
std::vector<float> layernorm(const std::vector<float>& x, const std::vector<float>& gamma,
                             const std::vector<float>& beta, int rows, int cols, float eps,
                             DType t) {
  return gpu::require().layernorm(x, gamma, beta, rows, cols, eps, t);
}
std::vector<float> rmsnorm(const std::vector<float>& x, const std::vector<float>& gamma, int rows,
                           int cols, float eps, DType t) {
  return gpu::require().rmsnorm(x, gamma, rows, cols, eps, t);
}
std::vector<float> softmax(const std::vector<float>& x, int rows, int cols, float scale, DType t) {
  return gpu::require().softmax(x, rows, cols, scale, t);
}
std::vector<float> bias_gelu(const std::vector<float>& x, const std::vector<float>& bias, int rows,
                             int cols, DType t) {
  return gpu::require().bias_gelu(x, bias, rows, cols, t);
}
std::vector<float> swiglu(const std::vector<float>& gate_up, int rows, int cols, DType t) {
  return gpu::require().swiglu(gate_up, rows, cols, t);
}
Masked dropout(const std::vector<float>& x, float p, std::uint64_t seed, DType t) {
  return gpu::require().dropout(x, p, seed, t);
}
Masked bias_dropout_add(const std::vector<float>& x, const std::vector<float>& bias,
                        const std::vector<float>& residual, int rows, int cols, float p,
                        std::uint64_t seed, DType t) {
  return gpu::require().bias_dropout_add(x, bias, residual, rows, cols, p, seed, t);
}
std::vector<float> embedding(const std::vector<std::int32_t>& tokens,
                             const std::vector<float>& table, int hidden, DType t) {
  return gpu::require().embedding(tokens, table, hidden, t);
}
CrossEntropy cross_entropy(const std::vector<float>& logits,
                           const std::vector<std::int32_t>& targets, int rows, int vocab,
                           DType t) {
  return gpu::require().cross_entropy(logits, targets, rows, vocab, t);
}
Attention attention_forward(const ref::AttentionShape& s, const std::vector<float>& q,
                            const std::vector<float>& k, const std::vector<float>& v, DType t) {
  return gpu::require().attention_forward(s, q, k, v, t);
}
AttentionGrads attention_backward(const ref::AttentionShape& s, const std::vector<float>& q,
                                  const std::vector<float>& k, const std::vector<float>& v,
                                  const std::vector<float>& o, const std::vector<float>& d_o,
                                  const std::vector<float>& lse, DType t) {
  return gpu::require().attention_backward(s, q, k, v, o, d_o, lse, t);
}
OptimizerState adam_step(const OptimizerState& in, const std::vector<float>& g,
                         const ref::AdamParams& p) {
  return gpu::require().adam_step(in, g, p);
}
OptimizerState lamb_step(const OptimizerState& in, const std::vector<float>& g,
                         const ref::AdamParams& p) {
  return gpu::require().lamb_step(in, g, p);
}
NormGrads layernorm_bwd(const std::vector<float>& x, const std::vector<float>& dy,
                        const std::vector<float>& gamma, const std::vector<float>& mean,
                        const std::vector<float>& rstd, int rows, int cols, DType t) {
  return gpu::require().layernorm_bwd(x, dy, gamma, mean, rstd, rows, cols, t);
}
NormGrads rmsnorm_bwd(const std::vector<float>& x, const std::vector<float>& dy,
                      const std::vector<float>& gamma, const std::vector<float>& rstd, int rows,
                      int cols, DType t) {
  return gpu::require().rmsnorm_bwd(x, dy, gamma, rstd, rows, cols, t);
}
std::vector<float> softmax_bwd(const std::vector<float>& y, const std::vector<float>& dy, int rows,
                               int cols, float scale, DType t) {
  return gpu::require().softmax_bwd(y, dy, rows, cols, scale, t);
}
BiasGrads bias_gelu_bwd(const std::vector<float>& x, const std::vector<float>& bias,
                        const std::vector<float>& dy, int rows, int cols, DType t) {
  return gpu::require().bias_gelu_bwd(x, bias, dy, rows, cols, t);
}
std::vector<float> swiglu_bwd(const std::vector<float>& gate_up, const std::vector<float>& dy,
                              int rows, int cols, DType t) {
  return gpu::require().swiglu_bwd(gate_up, dy, rows, cols, t);
}
std::vector<float> dropout_bwd(const std::vector<float>& dy, const std::vector<std::uint8_t>& mask,
                               float p, DType t) {
  return gpu::require().dropout_bwd(dy, mask, p, t);
}
BiasGrads bias_dropout_add_bwd(const std::vector<float>& dy, const std::vector<std::uint8_t>& mask,
                               int rows, int cols, float p, DType t) {
  return gpu::require().bias_dropout_add_bwd(dy, mask, rows, cols, p, t);
}
std::vector<float> embedding_bwd(const std::vector<std::int32_t>& tokens,
                                 const std::vector<float>& dy, int vocab, int hidden, DType t) {
  return gpu::require().embedding_bwd(tokens, dy, vocab, hidden, t);
}
std::vector<unsigned char> copy(const std::vector<unsigned char>& src, int src_offset,
                                int dst_offset) {
  return gpu::require().copy(src, src_offset, dst_offset);
}

}  // namespace dev
}  // namespace trainsim::kernels
