#include "kernels/bench.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/gemm.h"
#include "kernels/launchers.h"
#include "kernels/nccl_bench.h"
#include "sim/core/error.h"

namespace trainsim::kernels {
namespace {

enum class Fill { kUniform, kSmallPositive, kTokens, kZero, kNone };

struct BufferSpec {
  std::size_t bytes = 0;
  DType type = DType::kF32;
  Fill fill = Fill::kNone;
  int token_bound = 0;
};

// One item's buffers (one set per copy) and how to launch it on a set.
struct Setup {
  std::vector<BufferSpec> specs;
  std::function<void(const std::vector<void*>&, cudaStream_t)> prepare;  // once per copy
  std::function<void(const std::vector<void*>&, cudaStream_t)> launch;
  std::string note;  // appended to the recorded label as " [note]" (attention: the implementation)
};

std::size_t elems(double x) { return static_cast<std::size_t>(std::llround(x)); }

BufferSpec tensor(double n, DType t, Fill f = Fill::kUniform) {
  return {elems(n) * dtype_bytes(t), t, f, 0};
}

std::string version_string(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

Setup setup_for(const BenchItem& b, GemmRunner& gemm, std::string& why_not) {
  Setup s;
  const DType t = b.dtype;
  const int rows = static_cast<int>(b.m), cols = static_cast<int>(b.n);
  const double n = b.m * b.n;
  if (b.op == "gemm") {
    if (!GemmRunner::supported(t)) {
      why_not = std::string(dtype_name(t)) + " GEMMs need compute capability 8.9 or later";
      return s;
    }
    const int m = static_cast<int>(b.m), nn = static_cast<int>(b.n), k = static_cast<int>(b.k);
    const int batch = static_cast<int>(b.batch);
    s.specs = {tensor(b.batch * b.m * b.k, t), tensor(b.batch * b.n * b.k, t),
               tensor(b.batch * b.m * b.n, GemmRunner::output_type(t), Fill::kNone)};
    s.launch = [&gemm, t, m, nn, k, batch](const std::vector<void*>& p, cudaStream_t st) {
      gemm.run(t, m, nn, k, batch, p[0], p[1], p[2], st);
    };
  } else if (b.op == "attention_fwd" || b.op == "attention_bwd") {
    ref::AttentionShape a;
    a.bh = static_cast<int>(b.batch);
    a.sq = static_cast<int>(b.m);
    a.sk = static_cast<int>(b.n);
    a.d = static_cast<int>(b.k);
    a.causal = b.causal;
    a.window = b.window;
    a.scale = static_cast<float>(1.0 / std::sqrt(b.k));
    if (!attention_supported(a, t)) {
      why_not = "no attention implementation runs this shape (cuDNN fused SDPA: head dims <= 128, "
                "multiple of 8, when libcudnn.so.9 loads; own kernel: head dims 64, 96 and 128 in "
                "fp16/bf16 with sk >= sq)";
      return s;
    }
    s.note = attention_impl_name(a, t);  // "cudnn-sdpa" or "own-flash2-cuda-cores"
    const double nq = b.batch * b.m * b.k, nk = b.batch * b.n * b.k;
    const BufferSpec lse{elems(b.batch * b.m) * 4, DType::kF32, Fill::kNone, 0};
    if (b.op == "attention_fwd") {
      s.specs = {tensor(nq, t), tensor(nk, t), tensor(nk, t), tensor(nq, t, Fill::kNone), lse};
      s.launch = [t, a](const std::vector<void*>& p, cudaStream_t st) {
        launch_attention_forward(t, a, p[0], p[1], p[2], p[3], static_cast<float*>(p[4]), st);
      };
    } else {
      s.specs = {tensor(nq, t),
                 tensor(nk, t),
                 tensor(nk, t),
                 tensor(nq, t, Fill::kNone),
                 lse,
                 tensor(nq, t),
                 tensor(nq, t, Fill::kNone),
                 tensor(nk, t, Fill::kNone),
                 tensor(nk, t, Fill::kNone),
                 {attention_backward_workspace_bytes(a), DType::kF32, Fill::kNone, 0}};
      // O and lse come from a real forward pass, so P = exp(S − lse) is a true softmax.
      s.prepare = [t, a](const std::vector<void*>& p, cudaStream_t st) {
        launch_attention_forward(t, a, p[0], p[1], p[2], p[3], static_cast<float*>(p[4]), st);
      };
      s.launch = [t, a](const std::vector<void*>& p, cudaStream_t st) {
        launch_attention_backward(t, a, p[0], p[1], p[2], p[3], p[5],
                                  static_cast<const float*>(p[4]), p[6], p[7], p[8], p[9], st);
      };
    }
  } else if (b.op == "layernorm") {
    s.specs = {tensor(n, t), tensor(b.n, t), tensor(b.n, t), tensor(n, t, Fill::kNone)};
    s.launch = [t, rows, cols](const std::vector<void*>& p, cudaStream_t st) {
      launch_layernorm(t, p[0], p[1], p[2], p[3], nullptr, nullptr, rows, cols, 1e-5f, st);
    };
  } else if (b.op == "rmsnorm") {
    s.specs = {tensor(n, t), tensor(b.n, t), tensor(n, t, Fill::kNone)};
    s.launch = [t, rows, cols](const std::vector<void*>& p, cudaStream_t st) {
      launch_rmsnorm(t, p[0], p[1], p[2], nullptr, rows, cols, 1e-5f, st);
    };
  } else if (b.op == "softmax") {
    s.specs = {tensor(n, t), tensor(n, t, Fill::kNone)};
    s.launch = [t, rows, cols](const std::vector<void*>& p, cudaStream_t st) {
      launch_softmax(t, p[0], p[1], rows, cols, 1.0f, st);
    };
  } else if (b.op == "dropout") {
    s.specs = {tensor(n, t), tensor(n, t, Fill::kNone), tensor(n, DType::kFp8, Fill::kNone)};
    const std::size_t count = elems(n);
    s.launch = [t, count](const std::vector<void*>& p, cudaStream_t st) {
      launch_dropout(t, p[0], p[1], static_cast<std::uint8_t*>(p[2]), count, 0.1f, 1234, st);
    };
  } else if (b.op == "bias_dropout_add") {
    s.specs = {tensor(n, t), tensor(b.n, t), tensor(n, t), tensor(n, t, Fill::kNone),
               tensor(n, DType::kFp8, Fill::kNone)};
    s.launch = [t, rows, cols](const std::vector<void*>& p, cudaStream_t st) {
      launch_bias_dropout_add(t, p[0], p[1], p[2], p[3], static_cast<std::uint8_t*>(p[4]), rows,
                              cols, 0.1f, 1234, st);
    };
  } else if (b.op == "bias_gelu") {
    s.specs = {tensor(n, t), tensor(b.n, t), tensor(n, t, Fill::kNone)};
    s.launch = [t, rows, cols](const std::vector<void*>& p, cudaStream_t st) {
      launch_bias_gelu(t, p[0], p[1], p[2], rows, cols, st);
    };
  } else if (b.op == "swiglu") {
    s.specs = {tensor(2 * n, t), tensor(n, t, Fill::kNone)};
    s.launch = [t, rows, cols](const std::vector<void*>& p, cudaStream_t st) {
      launch_swiglu(t, p[0], p[1], rows, cols, st);
    };
  } else if (b.op == "embedding") {
    const int vocab = std::max(rows, 32000);
    s.specs = {{elems(b.m) * 4, DType::kF32, Fill::kTokens, vocab},
               tensor(double(vocab) * b.n, t),
               tensor(n, t, Fill::kNone)};
    s.launch = [t, rows, cols](const std::vector<void*>& p, cudaStream_t st) {
      launch_embedding(t, static_cast<const std::int32_t*>(p[0]), p[1], p[2], rows, cols, st);
    };
  } else if (b.op == "cross_entropy") {
    s.specs = {tensor(n, t),
               {elems(b.m) * 4, DType::kF32, Fill::kTokens, cols},
               tensor(b.m, DType::kF32, Fill::kNone),
               tensor(n, t, Fill::kNone)};
    s.launch = [t, rows, cols](const std::vector<void*>& p, cudaStream_t st) {
      launch_cross_entropy(t, p[0], static_cast<const std::int32_t*>(p[1]),
                           static_cast<float*>(p[2]), p[3], rows, cols, st);
    };
  } else if (b.op == "copy") {
    s.specs = {tensor(n, t), tensor(n, t, Fill::kNone)};
    const std::size_t bytes = elems(n) * dtype_bytes(t);
    s.launch = [bytes](const std::vector<void*>& p, cudaStream_t st) {
      launch_copy(p[0], p[1], bytes, st);
    };
  } else if (b.op == "layernorm_bwd" || b.op == "rmsnorm_bwd") {
    // x, dy, gamma, mean, rstd (fp32) in; dx, dgamma, dbeta (fp32) out.
    s.specs = {tensor(n, t),
               tensor(n, t),
               tensor(b.n, t),
               tensor(b.m, DType::kF32),
               tensor(b.m, DType::kF32, Fill::kSmallPositive),
               tensor(n, t, Fill::kNone),
               tensor(b.n, DType::kF32, Fill::kNone),
               tensor(b.n, DType::kF32, Fill::kNone)};
    const bool ln = b.op == "layernorm_bwd";
    s.launch = [t, rows, cols, ln](const std::vector<void*>& p, cudaStream_t st) {
      auto f = [&](int i) { return static_cast<float*>(p[static_cast<std::size_t>(i)]); };
      if (ln) {
        launch_layernorm_bwd(t, p[0], p[1], p[2], f(3), f(4), p[5], f(6), f(7), rows, cols, st);
      } else {
        launch_rmsnorm_bwd(t, p[0], p[1], p[2], f(4), p[5], f(6), rows, cols, st);
      }
    };
  } else if (b.op == "softmax_bwd") {
    s.specs = {tensor(n, t), tensor(n, t), tensor(n, t, Fill::kNone)};
    s.launch = [t, rows, cols](const std::vector<void*>& p, cudaStream_t st) {
      launch_softmax_bwd(t, p[0], p[1], p[2], rows, cols, 1.0f, st);
    };
  } else if (b.op == "dropout_bwd") {
    // The mask: random bytes (any non-zero byte keeps).
    s.specs = {tensor(n, t), tensor(n, DType::kFp8), tensor(n, t, Fill::kNone)};
    const std::size_t count = elems(n);
    s.launch = [t, count](const std::vector<void*>& p, cudaStream_t st) {
      launch_dropout_bwd(t, p[0], static_cast<const std::uint8_t*>(p[1]), p[2], count, 0.1f, st);
    };
  } else if (b.op == "bias_dropout_add_bwd") {
    s.specs = {tensor(n, t), tensor(n, DType::kFp8), tensor(n, t, Fill::kNone),
               tensor(b.n, DType::kF32, Fill::kNone)};
    s.launch = [t, rows, cols](const std::vector<void*>& p, cudaStream_t st) {
      launch_bias_dropout_add_bwd(t, p[0], static_cast<const std::uint8_t*>(p[1]), p[2],
                                  static_cast<float*>(p[3]), rows, cols, 0.1f, st);
    };
  } else if (b.op == "bias_gelu_bwd") {
    s.specs = {tensor(n, t), tensor(b.n, t), tensor(n, t), tensor(n, t, Fill::kNone),
               tensor(b.n, DType::kF32, Fill::kNone)};
    s.launch = [t, rows, cols](const std::vector<void*>& p, cudaStream_t st) {
      launch_bias_gelu_bwd(t, p[0], p[1], p[2], p[3], static_cast<float*>(p[4]), rows, cols, st);
    };
  } else if (b.op == "swiglu_bwd") {
    s.specs = {tensor(2 * n, t), tensor(n, t), tensor(2 * n, t, Fill::kNone)};
    s.launch = [t, rows, cols](const std::vector<void*>& p, cudaStream_t st) {
      launch_swiglu_bwd(t, p[0], p[1], p[2], rows, cols, st);
    };
  } else if (b.op == "embedding_bwd") {
    // The fp32 table gradient is zeroed once; each launch adds into it (timing only).
    const int vocab = std::max(rows, 32000);
    s.specs = {{elems(b.m) * 4, DType::kF32, Fill::kTokens, vocab},
               tensor(n, t),
               tensor(double(vocab) * b.n, DType::kF32, Fill::kZero)};
    s.launch = [t, rows, cols](const std::vector<void*>& p, cudaStream_t st) {
      launch_embedding_bwd(t, static_cast<const std::int32_t*>(p[0]), p[1],
                           static_cast<float*>(p[2]), rows, cols, st);
    };
  } else if (b.op == "adam" || b.op == "lamb") {
    const std::size_t params = elems(b.n);
    // Moments start positive (v must be ≥ 0); gradients and weights uniform.
    s.specs = {tensor(b.n, DType::kF32),
               tensor(b.n, DType::kF32),
               tensor(b.n, DType::kF32),
               tensor(b.n, DType::kF32, Fill::kSmallPositive),
               tensor(b.n, DType::kBf16, Fill::kNone),
               {16, DType::kF32, Fill::kZero, 0}};
    const bool lamb = b.op == "lamb";
    s.launch = [params, lamb](const std::vector<void*>& p, cudaStream_t st) {
      ref::AdamParams ap;
      ap.step = 10;
      ap.weight_decay = 0.01f;
      float* w = static_cast<float*>(p[0]);
      if (lamb) {
        launch_lamb(w, static_cast<const float*>(p[1]), static_cast<float*>(p[2]),
                    static_cast<float*>(p[3]), p[4], static_cast<double*>(p[5]), params, ap, st);
      } else {
        launch_adam(w, static_cast<const float*>(p[1]), static_cast<float*>(p[2]),
                    static_cast<float*>(p[3]), p[4], params, ap, st);
      }
    };
  } else {
    why_not = "no launcher for kernel kind `" + b.op + "`";
  }
  return s;
}

class Event {
 public:
  Event() { check_cuda(cudaEventCreate(&e_), "cudaEventCreate"); }
  ~Event() { cudaEventDestroy(e_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

}  // namespace

BenchResult run_kernel_bench(const std::vector<BenchItem>& items, const BenchOptions& o,
                             const std::function<void(const calib::MeasuredKernel&)>& progress) {
  check_cuda(cudaSetDevice(o.device), "cudaSetDevice");
  BenchResult r;
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, o.device), "cudaGetDeviceProperties");
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  r.provenance.gpu_name = prop.name;
  r.provenance.driver_version = version_string(driver);
  r.provenance.cuda_version = version_string(runtime);
  r.provenance.nccl_version = nccl_version();

  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  struct StreamGuard {
    cudaStream_t s;
    ~StreamGuard() { cudaStreamDestroy(s); }
  } guard{stream};
  GemmRunner gemm;
  Event start, stop;
  std::uint64_t seed = 1;
  auto time_item = [&](const BenchItem& item) {
    std::string why_not;
    Setup s = setup_for(item, gemm, why_not);
    if (!why_not.empty()) {
      r.skipped.push_back(item.label + " " + item.op + ": " + why_not);
      return;
    }
    std::size_t set_bytes = 0;
    for (const BufferSpec& b : s.specs) set_bytes += b.bytes;
    std::size_t free_bytes = 0, total = 0;
    check_cuda(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
    const double budget = o.memory_fraction * static_cast<double>(free_bytes);
    if (static_cast<double>(set_bytes) > budget) {
      r.skipped.push_back(item.label + " " + item.op + ": needs " +
                          std::to_string(set_bytes >> 20) + " MiB, more than the free memory");
      return;
    }
    int copies = static_cast<int>(std::ceil(o.rotate_bytes / static_cast<double>(set_bytes)));
    copies = std::clamp(copies, 1, 32);
    copies = std::min(copies, std::max(1, static_cast<int>(budget / set_bytes)));
    std::vector<std::vector<void*>> sets(static_cast<std::size_t>(copies));
    struct Freer {
      std::vector<std::vector<void*>>& sets;
      ~Freer() {
        for (auto& set : sets) {
          for (void* p : set) cudaFree(p);
        }
      }
    } freer{sets};
    for (auto& set : sets) {
      for (const BufferSpec& b : s.specs) {
        void* p = nullptr;
        check_cuda(cudaMalloc(&p, std::max<std::size_t>(b.bytes, 1)), "cudaMalloc");
        set.push_back(p);
        const std::size_t count = b.bytes / dtype_bytes(b.type);
        switch (b.fill) {
          case Fill::kUniform:
            launch_fill_uniform(b.type, p, count, -1.0f, 1.0f, ++seed, stream);
            break;
          case Fill::kSmallPositive:
            launch_fill_uniform(b.type, p, count, 1e-4f, 1e-2f, ++seed, stream);
            break;
          case Fill::kTokens:
            launch_fill_tokens(static_cast<std::int32_t*>(p), b.bytes / 4, b.token_bound, ++seed,
                               stream);
            break;
          case Fill::kZero:
            check_cuda(cudaMemsetAsync(p, 0, b.bytes, stream), "cudaMemset");
            break;
          case Fill::kNone:
            break;
        }
      }
      if (s.prepare) s.prepare(set, stream);
    }
    for (int i = 0; i < o.warmup; ++i) s.launch(sets[static_cast<std::size_t>(i % copies)], stream);
    std::vector<float> ms(static_cast<std::size_t>(o.repeats));
    for (int i = 0; i < o.repeats; ++i) {
      const auto& set = sets[static_cast<std::size_t>((o.warmup + i) % copies)];
      check_cuda(cudaEventRecord(start.get(), stream), "cudaEventRecord");
      s.launch(set, stream);
      check_cuda(cudaEventRecord(stop.get(), stream), "cudaEventRecord");
      check_cuda(cudaEventSynchronize(stop.get()), item.op.c_str());
      check_cuda(cudaEventElapsedTime(&ms[static_cast<std::size_t>(i)], start.get(), stop.get()),
                 "cudaEventElapsedTime");
    }
    std::nth_element(ms.begin(), ms.begin() + static_cast<std::ptrdiff_t>(ms.size() / 2), ms.end());
    const double median_s = ms[ms.size() / 2] * 1e-3;
    r.samples.push_back(to_measured(item, median_s, o.repeats));
    if (!s.note.empty()) r.samples.back().label += " [" + s.note + "]";
    if (progress) progress(r.samples.back());
  };
  for (const BenchItem& item : items) {
    // A shape the library refuses (no cuBLASLt algorithm, ...) is reported and the run goes on;
    // a fault that poisons the context fails every later item too, each with the reason.
    try {
      time_item(item);
    } catch (const Error& e) {
      r.skipped.push_back(item.label + " " + item.op + ": " + e.what());
      cudaStreamSynchronize(stream);
      cudaGetLastError();
    }
  }
  cudaStreamSynchronize(stream);  // errors were reported per item
  return r;
}

}  // namespace trainsim::kernels
