// device_ops.h and bench.h in a build without CUDA: every kernel call says so.
#include "kernels/bench.h"
#include "kernels/device_ops.h"
#include "sim/core/error.h"

namespace trainsim::kernels::dev {
namespace {

[[noreturn]] void no_cuda() {
  throw Error(ErrorKind::kRuntime,
              "this build has no CUDA support (nvcc was not found at configure time)");
}

}  // namespace

bool device_available(std::string* why) {
  if (why) *why = "this build has no CUDA support (nvcc was not found at configure time)";
  return false;
}

bool gemm_supported(DType) { no_cuda(); }
std::vector<float> gemm_nt(const std::vector<float>&, const std::vector<float>&, int, int, int, int,
                           DType) {
  no_cuda();
}
std::vector<float> layernorm(const std::vector<float>&, const std::vector<float>&,
                             const std::vector<float>&, int, int, float, DType) {
  no_cuda();
}
std::vector<float> rmsnorm(const std::vector<float>&, const std::vector<float>&, int, int, float,
                           DType) {
  no_cuda();
}
std::vector<float> softmax(const std::vector<float>&, int, int, float, DType) { no_cuda(); }
std::vector<float> bias_gelu(const std::vector<float>&, const std::vector<float>&, int, int,
                             DType) {
  no_cuda();
}
std::vector<float> swiglu(const std::vector<float>&, int, int, DType) { no_cuda(); }
Masked dropout(const std::vector<float>&, float, std::uint64_t, DType) { no_cuda(); }
Masked bias_dropout_add(const std::vector<float>&, const std::vector<float>&,
                        const std::vector<float>&, int, int, float, std::uint64_t, DType) {
  no_cuda();
}
std::vector<float> embedding(const std::vector<std::int32_t>&, const std::vector<float>&, int,
                             DType) {
  no_cuda();
}
CrossEntropy cross_entropy(const std::vector<float>&, const std::vector<std::int32_t>&, int, int,
                           DType) {
  no_cuda();
}
Attention attention_forward(const ref::AttentionShape&, const std::vector<float>&,
                            const std::vector<float>&, const std::vector<float>&, DType) {
  no_cuda();
}
AttentionGrads attention_backward(const ref::AttentionShape&, const std::vector<float>&,
                                  const std::vector<float>&, const std::vector<float>&,
                                  const std::vector<float>&, const std::vector<float>&,
                                  const std::vector<float>&, DType) {
  no_cuda();
}
OptimizerState adam_step(const OptimizerState&, const std::vector<float>&, const ref::AdamParams&) {
  no_cuda();
}
OptimizerState lamb_step(const OptimizerState&, const std::vector<float>&, const ref::AdamParams&) {
  no_cuda();
}
NormGrads layernorm_bwd(const std::vector<float>&, const std::vector<float>&,
                        const std::vector<float>&, const std::vector<float>&,
                        const std::vector<float>&, int, int, DType) {
  no_cuda();
}
NormGrads rmsnorm_bwd(const std::vector<float>&, const std::vector<float>&,
                      const std::vector<float>&, const std::vector<float>&, int, int, DType) {
  no_cuda();
}
std::vector<float> softmax_bwd(const std::vector<float>&, const std::vector<float>&, int, int,
                               float, DType) {
  no_cuda();
}
BiasGrads bias_gelu_bwd(const std::vector<float>&, const std::vector<float>&,
                        const std::vector<float>&, int, int, DType) {
  no_cuda();
}
std::vector<float> swiglu_bwd(const std::vector<float>&, const std::vector<float>&, int, int,
                              DType) {
  no_cuda();
}
std::vector<float> dropout_bwd(const std::vector<float>&, const std::vector<std::uint8_t>&, float,
                               DType) {
  no_cuda();
}
BiasGrads bias_dropout_add_bwd(const std::vector<float>&, const std::vector<std::uint8_t>&, int,
                               int, float, DType) {
  no_cuda();
}
std::vector<float> embedding_bwd(const std::vector<std::int32_t>&, const std::vector<float>&, int,
                                 int, DType) {
  no_cuda();
}
std::vector<unsigned char> copy(const std::vector<unsigned char>&, int, int) { no_cuda(); }

}  // namespace trainsim::kernels::dev

namespace trainsim::kernels {

BenchResult run_kernel_bench(const std::vector<BenchItem>&, const BenchOptions&,
                             const std::function<void(const calib::MeasuredKernel&)>&) {
  throw Error(ErrorKind::kRuntime,
              "this build has no CUDA support (nvcc was not found at configure time)");
}

}  // namespace trainsim::kernels
