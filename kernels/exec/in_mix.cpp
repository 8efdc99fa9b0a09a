#include "kernels/exec/in_mix.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>

#include "kernels/bench_plan.h"
#include "kernels/dtype.h"
#include "kernels/exec/launch_plan.h"
#include "sim/core/error.h"

namespace trainsim::kexec {
namespace {

// The dtype the CUDA device runs attention and memory-bound launchers in (cuda_device.cpp): the
// training precision's, fp8 kept in bf16. GEMMs run in dtype_of(kernel_precision(...)).
kernels::DType activation_dtype(Precision p) {
  const kernels::DType t = dtype_of(p);
  return t == kernels::DType::kFp8 ? kernels::DType::kBf16 : t;
}

bool same_shape(const calib::MeasuredKernel& a, const calib::MeasuredKernel& b) {
  return a.op == b.op && a.dtype == b.dtype && a.m == b.m && a.n == b.n && a.k == b.k &&
         a.batch == b.batch && a.flops == b.flops && a.bytes == b.bytes;
}

// The sample of one task, or "" with the reason it has none.
std::string sample_of(const plan::ProgramSet& ps, const plan::Program& prog, const plan::Task& t,
                      calib::MeasuredKernel& s) {
  if (t.type != plan::TaskType::kCompute) return "a communication task";
  if (t.pass == plan::Pass::kData) return "data loading (no kernel)";
  const KernelLaunch k = kernel_launch(ps, prog, t);
  if (k.kernels <= 0) return "no kernel";
  const model::Op& op = prog.ops[static_cast<std::size_t>(t.op)];
  switch (k.kind) {
    case model::OpKind::kGemm:
      s.op = "gemm";
      s.dtype = kernels::dtype_name(dtype_of(kernel_precision(ps, op)));
      s.m = k.m, s.n = k.n, s.k = k.k, s.batch = k.batch;
      s.flops = 2 * k.m * k.n * k.k * k.batch;
      return "";
    case model::OpKind::kAttention:
      // The profile's attention samples count the backward at twice the forward's FLOPs, as
      // the simulator divides it (calibrate/gemm_fit.h), not FlashAttention's 2.5.
      s.op = k.backward ? "attention_bwd" : "attention_fwd";
      s.dtype = kernels::dtype_name(activation_dtype(ps.training.precision));
      s.m = k.m, s.n = k.n, s.k = k.k, s.batch = k.batch;
      s.flops = op.flops * t.fraction * (k.backward ? 2.0 : 1.0);
      return "";
    case model::OpKind::kMemory: {
      if (k.launcher.empty()) {
        return "a generic memory-traffic kernel (no calibrated kind)";
      }
      const kernels::DType dt = k.f32 ? kernels::DType::kF32 : activation_dtype(ps.training.precision);
      s.op = k.launcher;
      s.dtype = kernels::dtype_name(dt);
      s.m = k.rows, s.n = k.cols;
      s.bytes = kernels::memory_kernel_bytes(k.launcher, k.rows, k.cols, dt);
      return "";
    }
  }
  return "an op kind without a kernel sample";
}

}  // namespace

InMixSamples in_mix_samples(const plan::ProgramSet& ps, int rank,
                            std::span<const MeasuredTaskKind> kinds, int iterations) {
  if (rank < 0 || rank >= ps.world()) {
    throw_input(fmt::format("rank {} is outside the job's {} ranks", rank, ps.world()));
  }
  const plan::Program& prog = ps.roles[static_cast<std::size_t>(ps.coord(rank).pp)];
  std::map<std::string, std::vector<std::uint32_t>> tasks_of;
  for (std::uint32_t i = 0; i < prog.tasks.size(); ++i) {
    tasks_of[prog.task_name(prog.tasks[i])].push_back(i);
  }
  // Every task kind of the Program must be in the record: one left out (a kind deleted from
  // the file) would silently give one sample fewer.
  for (const auto& [name, tasks] : tasks_of) {
    const bool listed = std::any_of(kinds.begin(), kinds.end(),
                                    [&](const MeasuredTaskKind& k) { return k.name == name; });
    if (!listed) {
      throw_input(fmt::format("task kind `{}` ({} tasks in the Program of rank {}) is not in the "
                              "record: the record and the scenario are not the same "
                              "configuration, or the record was edited",
                              name, tasks.size(), rank));
    }
  }
  InMixSamples out;
  for (const MeasuredTaskKind& kind : kinds) {
    const auto it = tasks_of.find(kind.name);
    if (it == tasks_of.end()) {
      throw_input(fmt::format("task kind `{}` is not in the Program of rank {}: the record and "
                              "the scenario are not the same configuration",
                              kind.name, rank));
    }
    if (static_cast<long>(it->second.size()) != kind.count) {
      throw_input(fmt::format("task kind `{}` has {} tasks in the record and {} in the Program "
                              "of rank {}: the record and the scenario are not the same "
                              "configuration",
                              kind.name, kind.count, it->second.size(), rank));
    }
    if (!(kind.total_s > 0) || kind.count <= 0) {
      out.skipped.push_back(kind.name + ": no time measured");
      continue;
    }
    calib::MeasuredKernel first;
    std::string why;
    for (const std::uint32_t i : it->second) {
      calib::MeasuredKernel s;
      why = sample_of(ps, prog, prog.tasks[i], s);
      if (!why.empty()) break;
      if (i == it->second.front()) {
        first = s;
      } else if (!same_shape(first, s)) {
        why = "its tasks launch kernels of different shapes";
        break;
      }
    }
    if (!why.empty()) {
      out.skipped.push_back(kind.name + ": " + why);
      continue;
    }
    first.label = std::string(calib::kInMixLabelPrefix) + kind.name;
    first.median_s = kind.total_s / static_cast<double>(kind.count);
    first.repeats = static_cast<int>(kind.count * std::max(1, iterations));
    out.samples.push_back(std::move(first));
  }
  return out;
}

}  // namespace trainsim::kexec
