#include "kernels/device_ops.h"

#include <cuda_runtime.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/gemm.h"
#include "kernels/launchers.h"
#include "sim/core/error.h"

namespace trainsim::kernels {

[[noreturn]] void throw_cuda(cudaError_t err, const char* what) {
  cudaGetLastError();  // clear a non-sticky error so later calls start clean
  throw Error(ErrorKind::kRuntime, std::string("CUDA: ") + what + ": " + cudaGetErrorName(err) +
                                       " (" + cudaGetErrorString(err) + ")");
}

namespace dev {
namespace {

std::vector<unsigned char> encode(const std::vector<float>& x, DType t) {
  return ref::encode(x, t);
}

std::vector<float> decode(const std::vector<unsigned char>& b, DType t) {
  return ref::decode(b, t);
}

// A device allocation freed on scope exit.
class Buf {
 public:
  explicit Buf(std::size_t bytes) : bytes_(bytes) {
    check_cuda(cudaMalloc(&p_, bytes > 0 ? bytes : 1), "cudaMalloc");
  }
  Buf(const void* host, std::size_t bytes) : Buf(bytes) {
    check_cuda(cudaMemcpy(p_, host, bytes, cudaMemcpyHostToDevice), "upload");
  }
  ~Buf() { cudaFree(p_); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  void* get() const { return p_; }
  template <typename U>
  U* as() const {
    return static_cast<U*>(p_);
  }
  std::vector<unsigned char> bytes() const {
    std::vector<unsigned char> b(bytes_);
    check_cuda(cudaMemcpy(b.data(), p_, bytes_, cudaMemcpyDeviceToHost), "download");
    return b;
  }

 private:
  void* p_ = nullptr;
  std::size_t bytes_;
};

Buf up(const std::vector<float>& x, DType t) {
  const std::vector<unsigned char> b = encode(x, t);
  return Buf(b.data(), b.size());
}

template <typename U>
Buf up_raw(const std::vector<U>& x) {
  return Buf(x.data(), x.size() * sizeof(U));
}

std::vector<float> down(const Buf& b, DType t) { return decode(b.bytes(), t); }

std::vector<float> down_f32(const Buf& b) { return decode(b.bytes(), DType::kF32); }

void sync() { check_cuda(cudaDeviceSynchronize(), "kernel execution"); }

}  // namespace

bool device_available(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    if (why) {
      *why = err != cudaSuccess
                 ? std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err)
                 : "cudaGetDeviceCount found 0 devices";
    }
    cudaGetLastError();
    return false;
  }
  return true;
}

bool gemm_supported(DType t) {
  check_cuda(cudaSetDevice(0), "cudaSetDevice");
  return GemmRunner::supported(t);
}

std::vector<float> gemm_nt(const std::vector<float>& x, const std::vector<float>& w, int m, int n,
                           int k, int batch, DType t) {
  const Buf bx = up(x, t), bw = up(w, t);
  const DType ot = GemmRunner::output_type(t);
  Buf c(static_cast<std::size_t>(batch) * m * n * dtype_bytes(ot));
  GemmRunner g;
  g.run(t, m, n, k, batch, bx.get(), bw.get(), c.get(), nullptr);
  sync();
  return down(c, ot);
}

std::vector<float> layernorm(const std::vector<float>& x, const std::vector<float>& gamma,
                             const std::vector<float>& beta, int rows, int cols, float eps,
                             DType t) {
  const Buf bx = up(x, t), bg = up(gamma, t), bb = up(beta, t);
  Buf y(x.size() * dtype_bytes(t));
  launch_layernorm(t, bx.get(), bg.get(), bb.get(), y.get(), nullptr, nullptr, rows, cols, eps,
                   nullptr);
  sync();
  return down(y, t);
}

std::vector<float> rmsnorm(const std::vector<float>& x, const std::vector<float>& gamma, int rows,
                           int cols, float eps, DType t) {
  const Buf bx = up(x, t), bg = up(gamma, t);
  Buf y(x.size() * dtype_bytes(t));
  launch_rmsnorm(t, bx.get(), bg.get(), y.get(), nullptr, rows, cols, eps, nullptr);
  sync();
  return down(y, t);
}

std::vector<float> softmax(const std::vector<float>& x, int rows, int cols, float scale, DType t) {
  const Buf bx = up(x, t);
  Buf y(x.size() * dtype_bytes(t));
  launch_softmax(t, bx.get(), y.get(), rows, cols, scale, nullptr);
  sync();
  return down(y, t);
}

std::vector<float> bias_gelu(const std::vector<float>& x, const std::vector<float>& bias, int rows,
                             int cols, DType t) {
  const Buf bx = up(x, t), bb = up(bias, t);
  Buf y(x.size() * dtype_bytes(t));
  launch_bias_gelu(t, bx.get(), bb.get(), y.get(), rows, cols, nullptr);
  sync();
  return down(y, t);
}

std::vector<float> swiglu(const std::vector<float>& gate_up, int rows, int cols, DType t) {
  const Buf bx = up(gate_up, t);
  Buf y(static_cast<std::size_t>(rows) * cols * dtype_bytes(t));
  launch_swiglu(t, bx.get(), y.get(), rows, cols, nullptr);
  sync();
  return down(y, t);
}

Masked dropout(const std::vector<float>& x, float p, std::uint64_t seed, DType t) {
  const Buf bx = up(x, t);
  Buf y(x.size() * dtype_bytes(t)), mask(x.size());
  launch_dropout(t, bx.get(), y.get(), mask.as<std::uint8_t>(), x.size(), p, seed, nullptr);
  sync();
  const std::vector<unsigned char> m = mask.bytes();
  return {down(y, t), std::vector<std::uint8_t>(m.begin(), m.end())};
}

Masked bias_dropout_add(const std::vector<float>& x, const std::vector<float>& bias,
                        const std::vector<float>& residual, int rows, int cols, float p,
                        std::uint64_t seed, DType t) {
  const Buf bx = up(x, t), bb = up(bias, t), br = up(residual, t);
  Buf y(x.size() * dtype_bytes(t)), mask(x.size());
  launch_bias_dropout_add(t, bx.get(), bb.get(), br.get(), y.get(), mask.as<std::uint8_t>(), rows,
                          cols, p, seed, nullptr);
  sync();
  const std::vector<unsigned char> m = mask.bytes();
  return {down(y, t), std::vector<std::uint8_t>(m.begin(), m.end())};
}

std::vector<float> embedding(const std::vector<std::int32_t>& tokens,
                             const std::vector<float>& table, int hidden, DType t) {
  const Buf bt = up_raw(tokens), tab = up(table, t);
  Buf y(tokens.size() * hidden * dtype_bytes(t));
  launch_embedding(t, bt.as<std::int32_t>(), tab.get(), y.get(), static_cast<int>(tokens.size()),
                   hidden, nullptr);
  sync();
  return down(y, t);
}

CrossEntropy cross_entropy(const std::vector<float>& logits,
                           const std::vector<std::int32_t>& targets, int rows, int vocab, DType t) {
  const Buf bl = up(logits, t), bt = up_raw(targets);
  Buf loss(static_cast<std::size_t>(rows) * 4), grad(logits.size() * dtype_bytes(t));
  launch_cross_entropy(t, bl.get(), bt.as<std::int32_t>(), loss.as<float>(), grad.get(), rows,
                       vocab, nullptr);
  sync();
  return {down_f32(loss), down(grad, t)};
}

Attention attention_forward(const ref::AttentionShape& s, const std::vector<float>& q,
                            const std::vector<float>& k, const std::vector<float>& v, DType t) {
  const Buf bq = up(q, t), bk = up(k, t), bv = up(v, t);
  Buf o(q.size() * dtype_bytes(t)), lse(static_cast<std::size_t>(s.bh) * s.sq * 4);
  launch_attention_forward(t, s, bq.get(), bk.get(), bv.get(), o.get(), lse.as<float>(), nullptr);
  sync();
  return {down(o, t), down_f32(lse)};
}

AttentionGrads attention_backward(const ref::AttentionShape& s, const std::vector<float>& q,
                                  const std::vector<float>& k, const std::vector<float>& v,
                                  const std::vector<float>& o, const std::vector<float>& d_o,
                                  const std::vector<float>& lse, DType t) {
  const Buf bq = up(q, t), bk = up(k, t), bv = up(v, t), bo = up(o, t), bdo = up(d_o, t);
  const Buf blse = up(lse, DType::kF32);
  Buf dq(q.size() * dtype_bytes(t)), dk(k.size() * dtype_bytes(t)), dv(v.size() * dtype_bytes(t));
  Buf ws(attention_backward_workspace_bytes(s));
  launch_attention_backward(t, s, bq.get(), bk.get(), bv.get(), bo.get(), bdo.get(),
                            blse.as<float>(), dq.get(), dk.get(), dv.get(), ws.get(), nullptr);
  sync();
  return {down(dq, t), down(dk, t), down(dv, t)};
}

namespace {

OptimizerState optimizer_step(const OptimizerState& in, const std::vector<float>& g,
                              const ref::AdamParams& p, bool lamb) {
  const Buf w = up(in.w, DType::kF32), m = up(in.m, DType::kF32), v = up(in.v, DType::kF32);
  const Buf bg = up(g, DType::kF32);
  Buf w16(in.w.size() * 2), norms(2 * sizeof(double));
  if (lamb) {
    launch_lamb(w.as<float>(), bg.as<float>(), m.as<float>(), v.as<float>(), w16.get(),
                norms.as<double>(), in.w.size(), p, nullptr);
  } else {
    launch_adam(w.as<float>(), bg.as<float>(), m.as<float>(), v.as<float>(), w16.get(), in.w.size(),
                p, nullptr);
  }
  sync();
  return {down_f32(w), down_f32(m), down_f32(v), down(w16, DType::kBf16)};
}

}  // namespace

OptimizerState adam_step(const OptimizerState& in, const std::vector<float>& g,
                         const ref::AdamParams& p) {
  return optimizer_step(in, g, p, false);
}

OptimizerState lamb_step(const OptimizerState& in, const std::vector<float>& g,
                         const ref::AdamParams& p) {
  return optimizer_step(in, g, p, true);
}

NormGrads layernorm_bwd(const std::vector<float>& x, const std::vector<float>& dy,
                        const std::vector<float>& gamma, const std::vector<float>& mean,
                        const std::vector<float>& rstd, int rows, int cols, DType t) {
  const Buf bx = up(x, t), bdy = up(dy, t), bg = up(gamma, t);
  const Buf bm = up(mean, DType::kF32), br = up(rstd, DType::kF32);
  Buf dx(x.size() * dtype_bytes(t)), dg(static_cast<std::size_t>(cols) * 4),
      db(static_cast<std::size_t>(cols) * 4);
  launch_layernorm_bwd(t, bx.get(), bdy.get(), bg.get(), bm.as<float>(), br.as<float>(), dx.get(),
                       dg.as<float>(), db.as<float>(), rows, cols, nullptr);
  sync();
  return {down(dx, t), down_f32(dg), down_f32(db)};
}

NormGrads rmsnorm_bwd(const std::vector<float>& x, const std::vector<float>& dy,
                      const std::vector<float>& gamma, const std::vector<float>& rstd, int rows,
                      int cols, DType t) {
  const Buf bx = up(x, t), bdy = up(dy, t), bg = up(gamma, t), br = up(rstd, DType::kF32);
  Buf dx(x.size() * dtype_bytes(t)), dg(static_cast<std::size_t>(cols) * 4);
  launch_rmsnorm_bwd(t, bx.get(), bdy.get(), bg.get(), br.as<float>(), dx.get(), dg.as<float>(),
                     rows, cols, nullptr);
  sync();
  return {down(dx, t), down_f32(dg), {}};
}

std::vector<float> softmax_bwd(const std::vector<float>& y, const std::vector<float>& dy, int rows,
                               int cols, float scale, DType t) {
  const Buf by = up(y, t), bdy = up(dy, t);
  Buf dx(y.size() * dtype_bytes(t));
  launch_softmax_bwd(t, by.get(), bdy.get(), dx.get(), rows, cols, scale, nullptr);
  sync();
  return down(dx, t);
}

BiasGrads bias_gelu_bwd(const std::vector<float>& x, const std::vector<float>& bias,
                        const std::vector<float>& dy, int rows, int cols, DType t) {
  const Buf bx = up(x, t), bb = up(bias, t), bdy = up(dy, t);
  Buf dx(x.size() * dtype_bytes(t)), db(static_cast<std::size_t>(cols) * 4);
  launch_bias_gelu_bwd(t, bx.get(), bb.get(), bdy.get(), dx.get(), db.as<float>(), rows, cols,
                       nullptr);
  sync();
  return {down(dx, t), down_f32(db)};
}

std::vector<float> swiglu_bwd(const std::vector<float>& gate_up, const std::vector<float>& dy,
                              int rows, int cols, DType t) {
  const Buf bg = up(gate_up, t), bdy = up(dy, t);
  Buf dg(gate_up.size() * dtype_bytes(t));
  launch_swiglu_bwd(t, bg.get(), bdy.get(), dg.get(), rows, cols, nullptr);
  sync();
  return down(dg, t);
}

std::vector<float> dropout_bwd(const std::vector<float>& dy, const std::vector<std::uint8_t>& mask,
                               float p, DType t) {
  const Buf bdy = up(dy, t), bm = up_raw(mask);
  Buf dx(dy.size() * dtype_bytes(t));
  launch_dropout_bwd(t, bdy.get(), bm.as<std::uint8_t>(), dx.get(), dy.size(), p, nullptr);
  sync();
  return down(dx, t);
}

BiasGrads bias_dropout_add_bwd(const std::vector<float>& dy, const std::vector<std::uint8_t>& mask,
                               int rows, int cols, float p, DType t) {
  const Buf bdy = up(dy, t), bm = up_raw(mask);
  Buf dx(dy.size() * dtype_bytes(t)), db(static_cast<std::size_t>(cols) * 4);
  launch_bias_dropout_add_bwd(t, bdy.get(), bm.as<std::uint8_t>(), dx.get(), db.as<float>(), rows,
                              cols, p, nullptr);
  sync();
  return {down(dx, t), down_f32(db)};
}

std::vector<float> embedding_bwd(const std::vector<std::int32_t>& tokens,
                                 const std::vector<float>& dy, int vocab, int hidden, DType t) {
  const Buf bt = up_raw(tokens), bdy = up(dy, t);
  const std::size_t bytes = static_cast<std::size_t>(vocab) * hidden * 4;
  Buf table(bytes);
  check_cuda(cudaMemset(table.get(), 0, bytes), "cudaMemset");
  launch_embedding_bwd(t, bt.as<std::int32_t>(), bdy.get(), table.as<float>(),
                       static_cast<int>(tokens.size()), hidden, nullptr);
  sync();
  return down_f32(table);
}

std::vector<unsigned char> copy(const std::vector<unsigned char>& src, int src_offset,
                                int dst_offset) {
  std::vector<unsigned char> padded(static_cast<std::size_t>(src_offset), 0);
  padded.insert(padded.end(), src.begin(), src.end());
  const Buf bs = up_raw(padded);
  Buf bd(src.size() + static_cast<std::size_t>(dst_offset));
  check_cuda(cudaMemset(bd.get(), 0, src.size() + static_cast<std::size_t>(dst_offset)),
             "cudaMemset");
  launch_copy(bs.as<unsigned char>() + src_offset, bd.as<unsigned char>() + dst_offset, src.size(),
              nullptr);
  sync();
  const std::vector<unsigned char> all = bd.bytes();
  return std::vector<unsigned char>(all.begin() + dst_offset, all.end());
}

}  // namespace dev
}  // namespace trainsim::kernels
