#include "kernels/gemm.h"

#include <cublasLt.h>

#include <string>

#include "kernels/cuda_check.h"
#include "sim/core/error.h"

namespace trainsim::kernels {
namespace {

void check_lt(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS) {
    throw Error(ErrorKind::kRuntime, std::string("cuBLASLt: ") + what + " failed (status " +
                                         std::to_string(static_cast<int>(st)) + ")");
  }
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kF32:
      return CUDA_R_32F;
    case DType::kF16:
      return CUDA_R_16F;
    case DType::kBf16:
      return CUDA_R_16BF;
    case DType::kFp8:
      return CUDA_R_8F_E4M3;
  }
  return CUDA_R_32F;
}

cublasLtMatrixLayout_t layout(cudaDataType_t type, int rows, int cols, int ld, int batch,
                              long long stride) {
  cublasLtMatrixLayout_t l = nullptr;
  check_lt(cublasLtMatrixLayoutCreate(&l, type, rows, cols, ld), "layout");
  if (batch > 1) {
    check_lt(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                              sizeof batch),
             "layout batch");
    check_lt(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                              &stride, sizeof stride),
             "layout stride");
  }
  return l;
}

}  // namespace

struct GemmRunner::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

GemmRunner::GemmRunner(std::size_t workspace_bytes) : workspace_bytes_(workspace_bytes) {
  cublasLtHandle_t h = nullptr;
  check_lt(cublasLtCreate(&h), "create handle");
  handle_ = h;
  check_cuda(cudaMalloc(&workspace_, workspace_bytes_), "cudaMalloc GEMM workspace");
}

GemmRunner::~GemmRunner() {
  plans_.clear();
  if (workspace_) cudaFree(workspace_);
  if (handle_) cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
}

bool GemmRunner::supported(DType t) {
  if (t != DType::kFp8) return true;
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  return major * 10 + minor >= 89;
}

// Row-major C = X·Wᵀ is column-major Cᵀ = W·Xᵀ: cuBLASLt's A is W seen as a k×n column-major
// matrix taken transposed, B is X as k×m, C is n×m. This "TN" form is also the one fp8 requires.
GemmRunner::Plan& GemmRunner::plan(DType t, int m, int n, int k, int batch) {
  const Key key{static_cast<int>(t), m, n, k, batch};
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;
  auto p = std::make_unique<Plan>();
  check_lt(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul desc");
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  check_lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
           "transa");
  check_lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
           "transb");
  const cudaDataType_t in = cuda_type(t), out = cuda_type(output_type(t));
  p->a = layout(in, k, n, k, batch, static_cast<long long>(n) * k);
  p->b = layout(in, k, m, k, batch, static_cast<long long>(m) * k);
  p->c = layout(out, n, m, n, batch, static_cast<long long>(m) * n);
  cublasLtMatmulPreference_t pref = nullptr;
  check_lt(cublasLtMatmulPreferenceCreate(&pref), "preference");
  check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &workspace_bytes_, sizeof workspace_bytes_),
           "preference workspace");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(handle_), p->desc, p->a, p->b,
                                     p->c, p->c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
    throw Error(ErrorKind::kRuntime,
                "cuBLASLt has no algorithm for a " + std::string(dtype_name(t)) + " GEMM " +
                    std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
                    " (batch " + std::to_string(batch) + ")",
                {}, "fp8 needs sm_89+ and dimensions that are multiples of 16");
  }
  p->algo = result.algo;
  return *plans_.emplace(key, std::move(p)).first->second;
}

void GemmRunner::run(DType t, int m, int n, int k, int batch, const void* x, const void* w, void* c,
                     cudaStream_t s) {
  Plan& p = plan(t, m, n, k, batch);
  const float alpha = 1.0f, beta = 0.0f;
  check_lt(cublasLtMatmul(static_cast<cublasLtHandle_t>(handle_), p.desc, &alpha, w, p.a, x, p.b,
                          &beta, c, p.c, c, p.c, &p.algo, workspace_, workspace_bytes_, s),
           "matmul");
}

}  // namespace trainsim::kernels
