#include "kernels/bench_plan.h"

#include <cmath>
#include <set>
#include <tuple>

#include "sim/core/error.h"

namespace trainsim::kernels {
namespace {

BenchItem gemm_item(std::string label, double m, double n, double k, double batch, DType t) {
  BenchItem b;
  b.op = "gemm";
  b.label = std::move(label);
  b.dtype = t;
  b.m = m;
  b.n = n;
  b.k = k;
  b.batch = batch;
  b.flops = 2.0 * m * n * k * batch;
  return b;
}

BenchItem memory_item(std::string op, std::string label, double rows, double cols, DType t) {
  BenchItem b;
  b.op = std::move(op);
  b.label = std::move(label);
  b.dtype = t;
  b.m = rows;
  b.n = cols;
  b.bytes = memory_kernel_bytes(b.op, rows, cols, t);
  return b;
}

void attention_items(std::vector<BenchItem>& out, std::string label, double bh, double sq,
                     double sk, double d, int window, double fwd_flops, DType t) {
  BenchItem f;
  f.op = "attention_fwd";
  f.label = label;
  f.dtype = t;
  f.batch = bh;
  f.m = sq;
  f.n = sk;
  f.k = d;
  f.window = window;
  f.flops = fwd_flops;
  out.push_back(f);
  f.op = "attention_bwd";
  f.flops = 2 * fwd_flops;  // what the simulator divides by the backward efficiency
  out.push_back(f);
}

double rows_of(const model::Op& op, double bytes_per_row) {
  return std::round(op.bytes / bytes_per_row);
}

}  // namespace

double memory_kernel_bytes(const std::string& op, double rows, double cols, DType t) {
  const double e = static_cast<double>(dtype_bytes(t));
  const double n = rows * cols;
  if (op == "layernorm") return 2 * n * e + 2 * cols * e;  // x in, y out, gamma and beta
  if (op == "rmsnorm") return 2 * n * e + cols * e;
  if (op == "softmax") return 2 * n * e;
  if (op == "dropout") return n * (2 * e + 1);  // x in, y out, 1-byte mask out
  if (op == "bias_dropout_add") return n * (3 * e + 1) + cols * e;
  if (op == "bias_gelu") return 2 * n * e + cols * e;
  if (op == "swiglu") return 3 * n * e;                    // gate and up in, one out
  if (op == "embedding") return 2 * n * e + 4 * rows;      // rows gathered, written; token ids
  if (op == "cross_entropy") return 2 * n * e + 8 * rows;  // logits in, gradient out; loss
  // Optimizers over `cols` fp32 parameters (kernels/elementwise.cu): Adam reads w, g, m, v and
  // writes w, m, v and the bf16 copy; LAMB's second pass reads w, m, v again.
  if (op == "adam") return 30 * cols;
  if (op == "lamb") return 42 * cols;
  // The copy roofline (launch_copy of rows × cols values): each byte read once, written once.
  if (op == "copy") return 2 * n * e;
  // Backward kernels (launchers.h `launch_<kind>_bwd`); column sums and statistics in fp32.
  // LayerNorm: x, dy in, dx out; gamma in; mean, rstd in; dgamma, dbeta out (fp32 atomics).
  if (op == "layernorm_bwd") return 3 * n * e + cols * e + 8 * rows + 8 * cols;
  // RMSNorm: x, dy in, dx out; gamma in; rstd in; dgamma out.
  if (op == "rmsnorm_bwd") return 3 * n * e + cols * e + 4 * rows + 4 * cols;
  if (op == "softmax_bwd") return 3 * n * e;  // y, dy in, dx out
  // Bias-GeLU: x, dy in, dx out; bias in; dbias out.
  if (op == "bias_gelu_bwd") return 3 * n * e + cols * e + 4 * cols;
  if (op == "swiglu_bwd") return 5 * n * e;  // gate, up, dy in; dgate, dup out
  if (op == "dropout_bwd") return n * (2 * e + 1);  // dy, 1-byte mask in, dx out
  if (op == "bias_dropout_add_bwd") return n * (2 * e + 1) + 4 * cols;  // + dbias out
  // Embedding: dy in, token ids in, the gathered fp32 table-gradient rows read and written.
  if (op == "embedding_bwd") return n * e + 4 * rows + 8 * n;
  throw Error(ErrorKind::kInput, "`" + op + "` is not a memory-bound kernel");
}

BenchItem memory_bench_item(const model::ModelConfig& m, const model::Sharding& s,
                            const model::Op& op, DType act) {
  const double e = static_cast<double>(dtype_bytes(act));
  const double h = m.hidden;
  const double f_tp = static_cast<double>(m.ffn_hidden) / s.tp;
  const std::string& n = op.name;
  // The kernel kind is the op's own (sim/model/ops.cpp names it); the shapes are set here.
  if (n == "norm_attn" || n == "norm_mlp" || n == "final_norm") {
    return memory_item(op.kernel, n, rows_of(op, 2 * h * e), h, act);
  }
  if (n == "softmax") {
    const double keys = m.attended_tokens();
    return memory_item("softmax", n, rows_of(op, 2 * keys * e), keys, act);
  }
  if (n == "attn_dropout") {
    const double keys = m.attended_tokens();
    return memory_item("dropout", n, rows_of(op, keys * (2 * e + 1)), keys, act);
  }
  if (n == "attn_bias_dropout_add" || n == "mlp_bias_dropout_add") {
    return memory_item("bias_dropout_add", n, rows_of(op, h * (3 * e + 1)), h, act);
  }
  if (n == "bias_gelu") {
    return memory_item("bias_gelu", n, rows_of(op, 2 * f_tp * e), f_tp, act);
  }
  if (n == "swiglu") {
    return memory_item("swiglu", n, rows_of(op, 3 * f_tp * e), f_tp, act);
  }
  if (n == "router_topk") {
    // Softmax over the experts in fp32 (read and write 4 B each: the op's 8 B per entry).
    return memory_item("softmax", n, rows_of(op, 8.0 * m.experts), m.experts, DType::kF32);
  }
  if (n == "embedding") {
    return memory_item("embedding", n, rows_of(op, 2 * h * e), h, act);
  }
  if (n == "moe_permute" || n == "moe_unpermute") {
    // The dispatcher's permutations move whole rows of h: timed as the copy kernel over as many
    // [rows × h] elements as the op reads and writes (a copy moves 2·e bytes an element).
    return memory_item("copy", n, rows_of(op, 2 * h * e), h, act);
  }
  if (n == "rope" || n == "repeat_kv" || n == "silu_mul" || n == "cp_out_correction") {
    // Element-wise passes this project has no kernel of its own for (a RoPE implementation, the
    // GQA key/value repeat, eager SiLU then the product, the CP ring's merges): timed as the
    // copy kernel over as many [rows × h] elements as the op reads and writes, as the MoE
    // permutations are.
    return memory_item("copy", n, rows_of(op, 2 * h * e), h, act);
  }
  if (n == "cross_entropy") {
    const double v_tp = static_cast<double>(m.vocab) / s.tp;
    // One row per token, whichever implementation's bytes the op counts.
    const double per_logit = model::cross_entropy_bytes_per_logit(s.cross_entropy, e).forward;
    return memory_item("cross_entropy", n, rows_of(op, v_tp * per_logit), v_tp, act);
  }
  throw Error(ErrorKind::kInput, "no kernel to time for model op `" + n + "`", {},
              "kernels/bench_plan.cpp maps each memory-bound op of sim/model/ops.cpp");
}

bool has_backward_kernel(const std::string& kind) {
  return kind == "layernorm" || kind == "rmsnorm" || kind == "softmax" || kind == "dropout" ||
         kind == "bias_dropout_add" || kind == "bias_gelu" || kind == "swiglu" ||
         kind == "embedding";
}

BenchItem memory_backward_bench_item(const model::ModelConfig& m, const model::Sharding& shard,
                                     const model::Op& op, DType act) {
  BenchItem b = memory_bench_item(m, shard, op, act);
  b.label = op.name + ".bwd";
  // Cross-entropy's forward kernel writes the logits gradient (fused, as Megatron's
  // vocab-parallel cross-entropy): its backward is that same kernel.
  if (!has_backward_kernel(b.op)) return b;
  return memory_item(b.op + "_bwd", b.label, b.m, b.n, b.dtype);
}

std::vector<BenchItem> bench_items_for_model(const model::ModelConfig& m, const model::Sharding& s,
                                             DType act, DType gemm_dtype) {
  std::vector<model::Op> ops = model::embedding_forward_ops(m, s);
  for (int layer = 0; layer < std::max(1, m.moe_every); ++layer) {  // a dense and an MoE layer
    for (model::Op& op : model::layer_forward_ops(m, s, layer)) ops.push_back(std::move(op));
  }
  for (model::Op& op : model::head_forward_ops(m, s)) ops.push_back(std::move(op));

  std::vector<BenchItem> out;
  for (const model::Op& op : ops) {
    switch (op.kind) {
      case model::OpKind::kGemm: {
        const DType t = op.batch > 1 ? act : gemm_dtype;
        out.push_back(gemm_item(op.name, op.m, op.n, op.k, op.batch, t));
        out.push_back(gemm_item(op.name + ".dgrad", op.m, op.k, op.n, op.batch, t));
        out.push_back(gemm_item(op.name + ".wgrad", op.k, op.n, op.m, op.batch, t));
        break;
      }
      case model::OpKind::kAttention:
        // The kernel runs causal over the whole (context-parallel) sequence; a sliding window
        // limits the keys. sk ≥ sq keeps the bottom-right causal alignment.
        // A context-parallel ring's op has one call's keys (op.n, 1/cp of them); the sample
        // times the ring's calls as one kernel over all the keys, as its FLOPs count them.
        attention_items(
            out, op.name, op.batch, op.m,
            std::max(op.m, s.cp > 1 && !s.cp_all_gather ? op.n * s.cp : op.n), op.k,
            m.attention_window > 0 && m.attention_window < m.seq_len ? m.attention_window : 0,
            op.flops, act);
        break;
      case model::OpKind::kMemory:
        out.push_back(memory_bench_item(m, s, op, act));
        out.push_back(memory_backward_bench_item(m, s, op, act));
        break;
    }
  }
  // One sample per distinct launch: MoE layers repeat shapes of the dense ones, a parallel block
  // has one norm where a sequential one has two of the same shape.
  std::vector<BenchItem> unique;
  std::set<std::tuple<std::string, int, double, double, double, double>> seen;
  for (BenchItem& b : out) {
    if (seen.emplace(b.op, static_cast<int>(b.dtype), b.m, b.n, b.k, b.batch).second) {
      unique.push_back(std::move(b));
    }
  }
  return unique;
}

std::vector<BenchItem> standard_gemm_grid(DType gemm_dtype) {
  std::vector<BenchItem> g;
  const double dims[] = {256, 1024, 4096, 16384};
  for (double m : dims) {
    for (double n : dims) {
      for (double k : dims) {
        if (m * n * k <= std::ldexp(1.0, 38))
          g.push_back(gemm_item("grid", m, n, k, 1, gemm_dtype));
      }
    }
  }
  return g;
}

std::vector<BenchItem> standard_grid(DType act, DType gemm_dtype) {
  std::vector<BenchItem> g = standard_gemm_grid(gemm_dtype);
  for (double d : {64.0, 128.0}) {
    for (double seq : {1024.0, 2048.0, 4096.0, 8192.0}) {
      const double bh = 16.0 * 2048 / seq * (128 / d);  // similar work per launch
      // The kernel runs causal (sk = sq): the FLOPs of the keys it computes, as a model
      // sample's, 1 + ... + n blocks of 128 for n query blocks (model::executed_keys_per_query),
      // so that grid and model samples fit one attention curve.
      const double blocks = seq / 128;
      const double keys = (blocks + 1) / 2 * 128;
      attention_items(g, "grid", bh, seq, seq, d, 0, 4.0 * bh * seq * keys * d, act);
    }
  }
  for (double rows : {16.0, 2048.0, 8192.0}) {
    for (double cols : {1024.0, 4096.0, 12288.0}) {
      g.push_back(memory_item("layernorm", "grid", rows, cols, act));
      g.push_back(memory_item("rmsnorm", "grid", rows, cols, act));
    }
  }
  for (double n : {4096.0, 65536.0, 1048576.0, 16777216.0, 134217728.0}) {
    g.push_back(memory_item("dropout", "grid", n / 4096, 4096, act));
  }
  g.push_back(memory_item("softmax", "grid", 64, 1024, act));
  g.push_back(memory_item("softmax", "grid", 16 * 2048, 2048, act));
  g.push_back(memory_item("bias_dropout_add", "grid", 16, 4096, act));
  g.push_back(memory_item("bias_dropout_add", "grid", 8192, 12288, act));
  g.push_back(memory_item("bias_gelu", "grid", 2048, 16384, act));
  g.push_back(memory_item("swiglu", "grid", 2048, 14336, act));
  g.push_back(memory_item("embedding", "grid", 8192, 8192, act));
  g.push_back(memory_item("cross_entropy", "grid", 4096, 32000, act));
  // The copy roofline from 1 MiB to 1 GiB (the buffer copied; 2× that moved), and every backward
  // kernel at a small and a ≥ 64 MiB shape, so each kind's fraction of the copy bandwidth at
  // ≥ 64 MiB can be read from the record.
  for (double mib : {1.0, 4.0, 16.0, 64.0, 256.0, 1024.0}) {
    const double values = mib * 1048576 / static_cast<double>(dtype_bytes(act));
    g.push_back(memory_item("copy", "grid", values / 4096, 4096, act));
  }
  for (const char* k : {"layernorm_bwd", "rmsnorm_bwd"}) {
    g.push_back(memory_item(k, "grid", 2048, 4096, act));
    g.push_back(memory_item(k, "grid", 8192, 12288, act));
  }
  g.push_back(memory_item("softmax_bwd", "grid", 64, 1024, act));
  g.push_back(memory_item("softmax_bwd", "grid", 16 * 2048, 2048, act));
  g.push_back(memory_item("dropout_bwd", "grid", 16, 4096, act));
  g.push_back(memory_item("dropout_bwd", "grid", 32768, 4096, act));
  g.push_back(memory_item("bias_dropout_add_bwd", "grid", 16, 4096, act));
  g.push_back(memory_item("bias_dropout_add_bwd", "grid", 8192, 12288, act));
  g.push_back(memory_item("bias_gelu_bwd", "grid", 16, 4096, act));
  g.push_back(memory_item("bias_gelu_bwd", "grid", 2048, 16384, act));
  g.push_back(memory_item("swiglu_bwd", "grid", 16, 4096, act));
  g.push_back(memory_item("swiglu_bwd", "grid", 2048, 14336, act));
  g.push_back(memory_item("embedding_bwd", "grid", 16, 4096, act));
  g.push_back(memory_item("embedding_bwd", "grid", 8192, 8192, act));
  for (double p : {1048576.0, 16777216.0, 134217728.0}) {
    BenchItem a = memory_item("adam", "grid", 0, p, DType::kF32);
    g.push_back(a);
    a = memory_item("lamb", "grid", 0, p, DType::kF32);
    g.push_back(a);
  }
  return g;
}

calib::MeasuredKernel to_measured(const BenchItem& b, double median_s, int repeats) {
  calib::MeasuredKernel k;
  k.op = b.op;
  k.label = b.label;
  k.dtype = dtype_name(b.dtype);
  k.m = b.m;
  k.n = b.n;
  k.k = b.k;
  k.batch = b.batch;
  k.flops = calib::is_memory_bound_kernel(b.op) ? 0 : b.flops;
  k.bytes = calib::is_memory_bound_kernel(b.op) ? b.bytes : 0;
  k.median_s = median_s;
  k.repeats = repeats;
  return k;
}

}  // namespace trainsim::kernels
