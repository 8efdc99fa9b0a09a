#include "calibrate/profile.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "calibrate/json_input.h"
#include "sim/core/error.h"
#include "sim/core/limits.h"
#include "sim/core/parse.h"

namespace trainsim::calib {

const char* measured_collective_ops() {
  return "all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce, sendrecv";
}

bool is_measured_collective_op(std::string_view op) {
  for (const char* o : {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast",
                        "reduce", "sendrecv"}) {
    if (op == o) return true;
  }
  return false;
}

namespace {

using nlohmann::json;

// The physical range of a profile number (docs/reliability.md): a value outside it would give
// an infinite or meaningless time (an efficiency of 1e-320, a latency of 1e308 s).
struct Range {
  double min, max;
  const char* what;
  const char* what_positive = nullptr;  // the range said for a field that must be above 0
};
constexpr Range kEfficiency{limits::kMinEfficiency, 1.0,
                            "a fraction of peak, from 0.001 to at most 1"};
constexpr Range kLatency{0, limits::kMaxLatency_s * (1 - 1e-12), "seconds, >= 0 and below 1 s"};
constexpr Range kHostTime{0, limits::kMaxHostTime_s, "seconds, from 0 to 3600",
                           "seconds, above 0 and at most 3600"};
constexpr Range kBandwidth{limits::kMinBandwidth_Bps, limits::kMaxBandwidth_Bps,
                           "bytes/s, from 1e6 (1 MB/s) to 1e15 (1 PB/s)"};
constexpr Range kDimension{0, 1e9, "a matrix dimension, from 0 to 1e9",
                           "a matrix dimension, above 0 and at most 1e9"};
// A sample's n: a dimension, or an optimizer's parameter count (a whole stage's, when timed in
// the mix of a training step: 4.3e9 for two GPT-3 175B layers on one GPU).
constexpr Range kColumns{0, 1e13, "a dimension or an optimizer's parameter count, from 0 to 1e13",
                         "a dimension or an optimizer's parameter count, above 0 and at most "
                         "1e13"};
constexpr Range kCount{0, 1e21, "a count from 0 to 1e21"};
// An attention pass's fixed cost per thread block, in key columns (Profile).
constexpr Range kOverheadKeys{0, 1e7, "key columns, from 0 to 1e7"};

double get_number(const json& j, const char* key, const std::string& file, const std::string& path,
                  const Range& range, bool positive = false) {
  const std::string field = path.empty() ? key : path + "." + key;
  if (!j.contains(key)) throw_input("missing field", {file, 0, field});
  const json& v = j.at(key);
  if (!v.is_number()) throw_input("expected a number, found " + clip_name(v.dump()), {file, 0, field});
  const char* what = positive && range.what_positive ? range.what_positive : range.what;
  const double x = check_number(v.get<double>(), {file, 0, field}, range.min, range.max, what);
  if (positive && !(x > 0)) {
    throw_input("value " + v.dump() + " is out of range: it must be above 0", {file, 0, field},
                what);
  }
  return x;
}

// An integer field in [min, max] (a JSON integer; 1e20 or 2^40 is no rank count).
int get_int(const json& j, const char* key, const std::string& file, const std::string& field,
            std::int64_t min, std::int64_t max) {
  if (!j.contains(key) || !j[key].is_number_integer()) {
    throw_input("expected an integer >= " + std::to_string(min), {file, 0, field});
  }
  const json& v = j[key];
  // nlohmann reads a non-negative literal as unsigned: both bounds apply to it too (a rank
  // count of 0 passed when only the signed values were checked against `min`).
  const bool fits =
      v.is_number_unsigned()
          ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(max) &&
                (min <= 0 || v.get<std::uint64_t>() >= static_cast<std::uint64_t>(min))
          : v.get<std::int64_t>() <= max && v.get<std::int64_t>() >= min;
  if (!fits) {
    throw_input("expected an integer from " + std::to_string(min) + " to " + std::to_string(max) +
                    ", found " + v.dump(),
                {file, 0, field});
  }
  return static_cast<int>(v.get<std::int64_t>());
}

std::string get_string(const json& j, const char* key, const std::string& file) {
  if (!j.contains(key)) throw_input("missing field", {file, 0, key});
  if (!j.at(key).is_string()) throw_input("expected a string", {file, 0, key});
  return j.at(key).get<std::string>();
}

void reject_unknown(const json& j, std::initializer_list<const char*> known,
                    const std::string& file, const std::string& path) {
  for (const auto& [k, v] : j.items()) {
    bool ok = false;
    for (const char* name : known) ok = ok || k == name;
    if (!ok) throw_input("unknown field", {file, 0, path.empty() ? k : path + "." + k});
  }
}

std::string get_string_at(const json& j, const char* key, const std::string& file,
                          const std::string& path) {
  const std::string field = path + "." + key;
  if (!j.contains(key)) throw_input("missing field", {file, 0, field});
  if (!j.at(key).is_string()) throw_input("expected a string", {file, 0, field});
  return j.at(key).get<std::string>();
}

// The optional measured section: every entry must be complete, so a hand-edited file that drops
// a field fails here instead of silently fitting nothing.
void load_measured(const json& j, const std::string& file, Profile& p) {
  const json& arr = j["collectives_measured"];
  if (!arr.is_array()) throw_input("expected an array", {file, 0, "collectives_measured"});
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const std::string at = "collectives_measured[" + std::to_string(i) + "]";
    const json& e = arr[i];
    if (!e.is_object()) throw_input("expected an object", {file, 0, at});
    reject_unknown(e, {"op", "ranks", "alpha_s", "busbw_Bps", "samples"}, file, at);
    MeasuredCollective m;
    m.op = get_string_at(e, "op", file, at);
    if (!is_measured_collective_op(m.op)) {
      // Unknown, it would be kept and never match a collective: the fit silently unused.
      throw_input("unknown collective " + clip_name(json(m.op).dump()) + " (" +
                      measured_collective_ops() + ")",
                  {file, 0, at + ".op"});
    }
    // A collective needs two ranks; a 1-rank fit would never be priced.
    m.ranks = get_int(e, "ranks", file, at + ".ranks", 2, limits::kMaxRanks);
    for (std::size_t k = 0; k < p.collectives_measured.size(); ++k) {
      const MeasuredCollective& seen = p.collectives_measured[k];
      if (seen.op == m.op && seen.ranks == m.ranks) {
        throw_input("a second fit of " + m.op + " over " + std::to_string(m.ranks) +
                        " ranks, after collectives_measured[" + std::to_string(k) +
                        "]: the simulator would price with the first only",
                    {file, 0, at}, "keep one entry per (op, ranks)");
      }
    }
    // Both null: samples of a single size, kept without a fit (busbw_Bps 0 is never priced).
    const bool unfitted = e.contains("alpha_s") && e["alpha_s"].is_null() &&
                          e.contains("busbw_Bps") && e["busbw_Bps"].is_null();
    if (!unfitted) {
      m.alpha_s = get_number(e, "alpha_s", file, at, kLatency);
      m.busbw_Bps = get_number(e, "busbw_Bps", file, at, kBandwidth);
    }
    if (!e.contains("samples") || !e["samples"].is_array()) {
      throw_input("expected an array of [size_bytes, time_us]", {file, 0, at + ".samples"});
    }
    for (std::size_t k = 0; k < e["samples"].size(); ++k) {
      const json& s = e["samples"][k];
      if (!s.is_array() || s.size() != 2 || !s[0].is_number() || !s[1].is_number() ||
          !(s[0].get<double>() > 0) || !(s[1].get<double>() > 0) ||
          !(s[0].get<double>() <= limits::kMaxMessageBytes) ||
          !(s[1].get<double>() <= limits::kMaxCollectiveTime_us) ||
          s[1].get<double>() < limits::kMinMagnitude) {
        throw_input("expected [size_bytes, time_us], both > 0 (size at most 2^50, time at most "
                    "1e9 us)",
                    {file, 0, at + ".samples[" + std::to_string(k) + "]"});
      }
      m.samples.emplace_back(s[0].get<double>(), s[1].get<double>());
    }
    p.collectives_measured.push_back(std::move(m));
  }
  if (!j.contains("collectives_measured_provenance")) return;
  const json& v = j["collectives_measured_provenance"];
  const std::string at = "collectives_measured_provenance";
  if (!v.is_object()) throw_input("expected an object", {file, 0, at});
  reject_unknown(v, {"source_files", "nccl_tests_version", "gpu_name", "date", "command_line"},
                 file, at);
  MeasuredProvenance& pv = p.measured_provenance;
  if (!v.contains("source_files") || !v["source_files"].is_array()) {
    throw_input("expected an array of file names", {file, 0, at + ".source_files"});
  }
  for (const json& f : v["source_files"]) {
    if (!f.is_string()) throw_input("expected a string", {file, 0, at + ".source_files"});
    pv.source_files.push_back(f.get<std::string>());
  }
  pv.nccl_tests_version = get_string_at(v, "nccl_tests_version", file, at);
  pv.gpu_name = get_string_at(v, "gpu_name", file, at);
  pv.date = get_string_at(v, "date", file, at);
  pv.command_line = get_string_at(v, "command_line", file, at);
}

constexpr const char* kKernelOps[] = {
    "gemm",          "attention_fwd",        "attention_bwd", "layernorm",
    "rmsnorm",       "softmax",              "dropout",       "bias_dropout_add",
    "bias_gelu",     "swiglu",               "embedding",     "cross_entropy",
    "adam",          "lamb",                 "copy",          "layernorm_bwd",
    "rmsnorm_bwd",   "softmax_bwd",          "dropout_bwd",   "bias_dropout_add_bwd",
    "bias_gelu_bwd", "swiglu_bwd",           "embedding_bwd"};
constexpr const char* kKernelDtypes[] = {"fp32", "fp16", "bf16", "fp8"};

template <std::size_t N>
bool one_of(const std::string& v, const char* const (&names)[N]) {
  for (const char* n : names) {
    if (v == n) return true;
  }
  return false;
}

// The optional kernels section: the raw samples the compute fields were fitted from. Each entry
// must be complete and name a known kernel and dtype, so the fit can be re-run from the file.
void load_kernels_measured(const json& j, const std::string& file, Profile& p) {
  const json& arr = j["kernels_measured"];
  if (!arr.is_array()) throw_input("expected an array", {file, 0, "kernels_measured"});
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const std::string at = "kernels_measured[" + std::to_string(i) + "]";
    const json& e = arr[i];
    if (!e.is_object()) throw_input("expected an object", {file, 0, at});
    reject_unknown(e, {"op", "label", "dtype", "shape", "flops", "bytes", "median_s", "repeats"},
                   file, at);
    MeasuredKernel m;
    m.op = get_string_at(e, "op", file, at);
    if (!one_of(m.op, kKernelOps)) {
      throw Error(ErrorKind::kInput, "unknown kernel `" + m.op + "`", {file, 0, at + ".op"},
                  std::string("one of: ") + measured_kernel_ops());
    }
    m.label = get_string_at(e, "label", file, at);
    m.dtype = get_string_at(e, "dtype", file, at);
    if (!one_of(m.dtype, kKernelDtypes)) {
      throw Error(ErrorKind::kInput, "unknown dtype `" + m.dtype + "`", {file, 0, at + ".dtype"},
                  "one of: fp32, fp16, bf16, fp8");
    }
    const std::string sat = at + ".shape";
    if (!e.contains("shape") || !e["shape"].is_object()) {
      throw_input("expected an object {m, n, k, batch}", {file, 0, sat});
    }
    const json& sh = e["shape"];
    reject_unknown(sh, {"m", "n", "k", "batch"}, file, sat);
    m.m = get_number(sh, "m", file, sat, kDimension);
    m.n = get_number(sh, "n", file, sat, kColumns, true);
    m.k = get_number(sh, "k", file, sat, kDimension);
    m.batch = get_number(sh, "batch", file, sat, kDimension, true);
    if (m.batch < 1) throw_input("a batch count is at least 1", {file, 0, sat + ".batch"});
    m.flops = get_number(e, "flops", file, at, kCount);
    m.bytes = get_number(e, "bytes", file, at, kCount);
    if (m.op == "gemm") {
      // The fit reads a GEMM's work from its shape; a `flops` that disagrees is an edited or
      // broken sample (10 x 2·m·n·k was accepted without a word).
      const double want = 2 * m.m * m.n * m.k * m.batch;
      if (!(std::abs(m.flops - want) <= 1e-3 * want)) {
        throw_input("a GEMM's FLOPs are 2·m·n·k·batch = " + json(want).dump() + ", not " +
                        json(m.flops).dump(),
                    {file, 0, at + ".flops"},
                    "write the shape that ran and its 2·m·n·k·batch (to 0.1 %)");
      }
    }
    m.median_s = get_number(e, "median_s", file, at, kHostTime, true);
    if (m.median_s < 1e-12) {
      throw_input("a kernel time is at least 1 ps", {file, 0, at + ".median_s"});
    }
    m.repeats = get_int(e, "repeats", file, at + ".repeats", 1, 1'000'000'000);
    const bool memory = is_memory_bound_kernel(m.op);
    if (memory && !(m.bytes > 0)) {
      throw_input("a memory-bound kernel needs the bytes it moves (> 0)", {file, 0, at + ".bytes"});
    }
    if (!memory && !(m.flops > 0)) {
      throw_input("a GEMM or attention kernel needs its FLOPs (> 0)", {file, 0, at + ".flops"});
    }
    p.kernels_measured.push_back(std::move(m));
  }
  const std::string at = "kernels_measured_provenance";
  if (!j.contains(at)) {
    throw_input("missing: measured kernels need their provenance", {file, 0, at},
                "gpu_name, driver_version, cuda_version, nccl_version, date, command_line");
  }
  const json& v = j[at];
  if (!v.is_object()) throw_input("expected an object", {file, 0, at});
  reject_unknown(
      v, {"gpu_name", "driver_version", "cuda_version", "nccl_version", "date", "command_line"},
      file, at);
  KernelProvenance& pv = p.kernels_provenance;
  pv.gpu_name = get_string_at(v, "gpu_name", file, at);
  pv.driver_version = get_string_at(v, "driver_version", file, at);
  pv.cuda_version = get_string_at(v, "cuda_version", file, at);
  pv.nccl_version = get_string_at(v, "nccl_version", file, at);
  pv.date = get_string_at(v, "date", file, at);
  pv.command_line = get_string_at(v, "command_line", file, at);
}

}  // namespace

const char* measured_kernel_ops() {
  return "gemm, attention_fwd, attention_bwd, layernorm, rmsnorm, softmax, dropout, "
         "bias_dropout_add, bias_gelu, swiglu, embedding, cross_entropy, adam, lamb, copy, "
         "layernorm_bwd, rmsnorm_bwd, softmax_bwd, dropout_bwd, bias_dropout_add_bwd, "
         "bias_gelu_bwd, swiglu_bwd, embedding_bwd";
}

bool is_memory_bound_kernel(const std::string& op) {
  return op != "gemm" && op != "attention_fwd" && op != "attention_bwd";
}

const char* attention_kernel_names() { return "flash2, flash3, cudnn, triton"; }

bool is_attention_kernel_name(std::string_view name) {
  return name == "flash2" || name == "flash3" || name == "cudnn" || name == "triton";
}

Profile load_profile(const std::string& path) {
  return parse_profile(
      read_input_file(path, "calibration profile", limits::kMaxProfileBytes, "calibration.profile"),
      path);
}

Profile parse_profile(std::string_view text, const std::string& path) {
  // (A key given twice is refused: which of the two constants was meant is not known.)
  const json j = parse_json_input(text, path);
  if (!j.is_object()) throw_input("a profile is a JSON object", {path, 0, ""});
  reject_unknown(j,
                 {"format_version", "name", "version", "gpu", "provenance", "compute",
                  "collectives", "host", "collectives_measured", "collectives_measured_provenance",
                  "kernels_measured", "kernels_measured_provenance"},
                 path, "");
  if (!j.contains("format_version") || !j["format_version"].is_number_integer()) {
    throw_input("missing or non-integer", {path, 0, "format_version"});
  }
  if (j["format_version"].get<double>() != kProfileFormatVersion) {
    throw_input("unsupported profile format " + j["format_version"].dump() + " (this build reads " +
                    std::to_string(kProfileFormatVersion) + ")",
                {path, 0, "format_version"});
  }
  Profile p;
  p.name = get_string(j, "name", path);
  p.version = get_string(j, "version", path);
  p.gpu = get_string(j, "gpu", path);
  // Every result names the profile and its provenance: neither may be missing or blank.
  p.provenance = get_string(j, "provenance", path);
  for (const auto& [key, value] : {std::pair<const char*, const std::string*>{"name", &p.name},
                                   {"gpu", &p.gpu},
                                   {"provenance", &p.provenance}}) {
    if (value->find_first_not_of(" \t\r\n") == std::string::npos) {
      throw_input("must not be empty", {path, 0, key});
    }
  }
  for (const char* section : {"compute", "collectives", "host"}) {
    if (!j.contains(section)) throw_input("missing section (an object)", {path, 0, section});
    if (!j[section].is_object()) {
      throw_input(std::string("must be an object, is ") + j[section].type_name(),
                  {path, 0, section});
    }
  }
  const json& c = j["compute"];
  reject_unknown(c,
                 {"gemm_peak_efficiency", "gemm_half_dim", "attention_fwd_efficiency",
                  "attention_bwd_efficiency", "memory_bw_efficiency", "kernel_overhead_s",
                  "gemm_overhead_s", "memory_bw_efficiency_by_kind", "copy_bw_Bps",
                  "attention_by_kernel", "attention_fwd_overhead_keys",
                  "attention_bwd_overhead_keys", "attention_head_dim_64"},
                 path, "compute");
  p.gemm_peak_efficiency = get_number(c, "gemm_peak_efficiency", path, "compute", kEfficiency);
  p.gemm_half_dim = get_number(c, "gemm_half_dim", path, "compute", kDimension);
  p.attention_fwd_efficiency =
      get_number(c, "attention_fwd_efficiency", path, "compute", kEfficiency);
  p.attention_bwd_efficiency =
      get_number(c, "attention_bwd_efficiency", path, "compute", kEfficiency);
  for (auto [key, field] : {std::pair{"attention_fwd_overhead_keys", &p.attention_fwd_overhead_keys},
                            std::pair{"attention_bwd_overhead_keys", &p.attention_bwd_overhead_keys}}) {
    if (c.contains(key)) *field = get_number(c, key, path, "compute", kOverheadKeys);
  }
  // A curve's fields (Profile::Curve): both efficiencies, optional overhead keys (0: flat).
  const auto curve_fields = [&](const json& v, const std::string& at) {
    Profile::Curve cv;
    cv.fwd = get_number(v, "fwd_efficiency", path, at, kEfficiency);
    cv.bwd = get_number(v, "bwd_efficiency", path, at, kEfficiency);
    if (v.contains("fwd_overhead_keys")) {
      cv.fwd_overhead_keys = get_number(v, "fwd_overhead_keys", path, at, kOverheadKeys);
    }
    if (v.contains("bwd_overhead_keys")) {
      cv.bwd_overhead_keys = get_number(v, "bwd_overhead_keys", path, at, kOverheadKeys);
    }
    return cv;
  };
  // A curve at head dimension 64, where given.
  const auto curve64 = [&](const json& o, const char* key, const std::string& at) {
    Profile::Curve cv;
    if (!o.contains(key)) return cv;
    const json& v = o[key];
    const std::string here = at + "." + key;
    if (!v.is_object()) {
      throw_input("must be an object {fwd_efficiency, bwd_efficiency[, fwd_overhead_keys, "
                  "bwd_overhead_keys]}",
                  {path, 0, here});
    }
    reject_unknown(v, {"fwd_efficiency", "bwd_efficiency", "fwd_overhead_keys", "bwd_overhead_keys"},
                   path, here);
    return curve_fields(v, here);
  };
  p.attention_hd64 = curve64(c, "attention_head_dim_64", "compute");
  p.memory_bw_efficiency = get_number(c, "memory_bw_efficiency", path, "compute", kEfficiency);
  p.kernel_overhead_s = get_number(c, "kernel_overhead_s", path, "compute", kLatency);
  if (c.contains("copy_bw_Bps")) {
    p.copy_bw_Bps = get_number(c, "copy_bw_Bps", path, "compute", kBandwidth);
  }
  if (c.contains("gemm_overhead_s")) {
    p.gemm_overhead_s = get_number(c, "gemm_overhead_s", path, "compute", kLatency);
  }
  if (c.contains("memory_bw_efficiency_by_kind")) {
    const json& by = c["memory_bw_efficiency_by_kind"];
    const std::string where = "compute.memory_bw_efficiency_by_kind";
    if (!by.is_object()) throw_input("must be an object of kernel kind: efficiency", {path, 0, where});
    for (const auto& [kind, v] : by.items()) {
      if (!one_of(kind, kKernelOps) || !is_memory_bound_kernel(kind)) {
        throw_input("`" + kind + "` is not a memory-bound kernel kind",
                    {path, 0, where + "." + kind},
                    "one of the memory-bound kinds of: " + std::string(measured_kernel_ops()));
      }
      p.memory_bw_efficiency_by_kind[kind] = get_number(by, kind.c_str(), path, where, kEfficiency);
    }
  }
  if (c.contains("attention_by_kernel")) {
    const json& by = c["attention_by_kernel"];
    const std::string where = "compute.attention_by_kernel";
    if (!by.is_object()) {
      throw_input("must be an object of kernel: {fwd_efficiency, bwd_efficiency}",
                  {path, 0, where});
    }
    for (const auto& [kernel, v] : by.items()) {
      const std::string at = where + "." + kernel;
      if (!is_attention_kernel_name(kernel)) {
        throw_input("`" + kernel + "` is not a fused attention kernel", {path, 0, at},
                    std::string("one of: ") + attention_kernel_names());
      }
      if (!v.is_object()) {
        throw_input("must be an object {fwd_efficiency, bwd_efficiency}", {path, 0, at});
      }
      reject_unknown(v,
                     {"fwd_efficiency", "bwd_efficiency", "fwd_overhead_keys", "bwd_overhead_keys",
                      "head_dim_64"},
                     path, at);
      const Profile::Curve at128 = curve_fields(v, at);
      p.attention_by_kernel[kernel] = {at128.fwd, at128.bwd, at128.fwd_overhead_keys,
                                       at128.bwd_overhead_keys, curve64(v, "head_dim_64", at)};
    }
  }
  const json& k = j["collectives"];
  reject_unknown(k,
                 {"nvlink_busbw_Bps", "nvlink_step_latency_s", "nvls_busbw_Bps", "nic_efficiency",
                  "net_step_latency_s", "base_latency_s", "nccl_channels"},
                 path, "collectives");
  p.nvlink.busbw_Bps = get_number(k, "nvlink_busbw_Bps", path, "collectives", kBandwidth);
  p.nvlink.step_latency_s = get_number(k, "nvlink_step_latency_s", path, "collectives", kLatency);
  // 0: the GPU has no NVLink SHARP.
  p.nvls_busbw_Bps = get_number(k, "nvls_busbw_Bps", path, "collectives",
                                {0, limits::kMaxBandwidth_Bps, "bytes/s, 0 (none) or 1e6 to 1e15"});
  if (p.nvls_busbw_Bps != 0 && p.nvls_busbw_Bps < limits::kMinBandwidth_Bps) {
    throw_input("value out of range", {path, 0, "collectives.nvls_busbw_Bps"},
                "bytes/s, 0 (none) or 1e6 to 1e15");
  }
  p.nic_efficiency = get_number(k, "nic_efficiency", path, "collectives",
                                {limits::kMinEfficiency, 1.0,
                                 "a fraction of line rate, from 0.001 to at most 1"});
  p.net_step_latency_s = get_number(k, "net_step_latency_s", path, "collectives", kLatency);
  p.collective_base_latency_s = get_number(k, "base_latency_s", path, "collectives", kLatency);
  if (k.contains("nccl_channels")) {
    // NCCL's MAXCHANNELS is 64 (32 before 2.25): a count outside 1..64 is not NCCL's.
    p.nccl_channels = get_int(k, "nccl_channels", path, "collectives.nccl_channels", 1, 64);
  }
  const json& h = j["host"];
  reject_unknown(h, {"data_loading_s"}, path, "host");
  p.data_loading_s = get_number(h, "data_loading_s", path, "host", kHostTime);
  if (j.contains("collectives_measured")) load_measured(j, path, p);
  if (j.contains("kernels_measured")) {
    load_kernels_measured(j, path, p);
  } else if (j.contains("kernels_measured_provenance")) {
    throw_input("provenance without a kernels_measured section",
                {path, 0, "kernels_measured_provenance"});
  }
  return p;
}

namespace {
nlohmann::ordered_json curve64_json(const Profile::Curve& c) {
  nlohmann::ordered_json j = {{"fwd_efficiency", c.fwd}, {"bwd_efficiency", c.bwd}};
  if (c.fwd_overhead_keys > 0) j["fwd_overhead_keys"] = c.fwd_overhead_keys;
  if (c.bwd_overhead_keys > 0) j["bwd_overhead_keys"] = c.bwd_overhead_keys;
  return j;
}
}  // namespace

std::string profile_to_json(const Profile& p) {
  nlohmann::ordered_json j;
  j["format_version"] = kProfileFormatVersion;
  j["name"] = p.name;
  j["version"] = p.version;
  j["gpu"] = p.gpu;
  j["provenance"] = p.provenance;
  j["compute"] = {{"gemm_peak_efficiency", p.gemm_peak_efficiency},
                  {"gemm_half_dim", p.gemm_half_dim},
                  {"attention_fwd_efficiency", p.attention_fwd_efficiency},
                  {"attention_bwd_efficiency", p.attention_bwd_efficiency},
                  {"memory_bw_efficiency", p.memory_bw_efficiency},
                  {"kernel_overhead_s", p.kernel_overhead_s}};
  if (p.attention_fwd_overhead_keys > 0) {
    j["compute"]["attention_fwd_overhead_keys"] = p.attention_fwd_overhead_keys;
  }
  if (p.attention_bwd_overhead_keys > 0) {
    j["compute"]["attention_bwd_overhead_keys"] = p.attention_bwd_overhead_keys;
  }
  if (p.attention_hd64.fwd > 0) j["compute"]["attention_head_dim_64"] = curve64_json(p.attention_hd64);
  if (p.gemm_overhead_s) j["compute"]["gemm_overhead_s"] = *p.gemm_overhead_s;
  if (p.copy_bw_Bps) j["compute"]["copy_bw_Bps"] = *p.copy_bw_Bps;
  if (!p.memory_bw_efficiency_by_kind.empty()) {
    nlohmann::ordered_json by = nlohmann::ordered_json::object();
    for (const auto& [kind, e] : p.memory_bw_efficiency_by_kind) by[kind] = e;
    j["compute"]["memory_bw_efficiency_by_kind"] = by;
  }
  if (!p.attention_by_kernel.empty()) {
    nlohmann::ordered_json by = nlohmann::ordered_json::object();
    for (const auto& [kernel, r] : p.attention_by_kernel) {
      by[kernel] = {{"fwd_efficiency", r.fwd}, {"bwd_efficiency", r.bwd}};
      if (r.fwd_overhead_keys > 0) by[kernel]["fwd_overhead_keys"] = r.fwd_overhead_keys;
      if (r.bwd_overhead_keys > 0) by[kernel]["bwd_overhead_keys"] = r.bwd_overhead_keys;
      if (r.hd64.fwd > 0) by[kernel]["head_dim_64"] = curve64_json(r.hd64);
    }
    j["compute"]["attention_by_kernel"] = by;
  }
  j["collectives"] = {{"nvlink_busbw_Bps", p.nvlink.busbw_Bps},
                      {"nvlink_step_latency_s", p.nvlink.step_latency_s},
                      {"nvls_busbw_Bps", p.nvls_busbw_Bps},
                      {"nic_efficiency", p.nic_efficiency},
                      {"net_step_latency_s", p.net_step_latency_s},
                      {"base_latency_s", p.collective_base_latency_s}};
  if (p.nccl_channels > 0) j["collectives"]["nccl_channels"] = p.nccl_channels;
  j["host"] = {{"data_loading_s", p.data_loading_s}};
  if (!p.collectives_measured.empty()) {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const MeasuredCollective& m : p.collectives_measured) {
      nlohmann::ordered_json samples = nlohmann::ordered_json::array();
      for (const auto& [size, time] : m.samples) samples.push_back({size, time});
      const bool fitted = m.busbw_Bps > 0;  // else samples only: both written as null
      arr.push_back({{"op", m.op},
                     {"ranks", m.ranks},
                     {"alpha_s", fitted ? nlohmann::ordered_json(m.alpha_s) : nullptr},
                     {"busbw_Bps", fitted ? nlohmann::ordered_json(m.busbw_Bps) : nullptr},
                     {"samples", samples}});
    }
    j["collectives_measured"] = arr;
    const MeasuredProvenance& pv = p.measured_provenance;
    j["collectives_measured_provenance"] = {{"source_files", pv.source_files},
                                            {"nccl_tests_version", pv.nccl_tests_version},
                                            {"gpu_name", pv.gpu_name},
                                            {"date", pv.date},
                                            {"command_line", pv.command_line}};
  }
  if (!p.kernels_measured.empty()) {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const MeasuredKernel& m : p.kernels_measured) {
      arr.push_back({{"op", m.op},
                     {"label", m.label},
                     {"dtype", m.dtype},
                     {"shape", {{"m", m.m}, {"n", m.n}, {"k", m.k}, {"batch", m.batch}}},
                     {"flops", m.flops},
                     {"bytes", m.bytes},
                     {"median_s", m.median_s},
                     {"repeats", m.repeats}});
    }
    j["kernels_measured"] = arr;
    const KernelProvenance& pv = p.kernels_provenance;
    j["kernels_measured_provenance"] = {{"gpu_name", pv.gpu_name},
                                        {"driver_version", pv.driver_version},
                                        {"cuda_version", pv.cuda_version},
                                        {"nccl_version", pv.nccl_version},
                                        {"date", pv.date},
                                        {"command_line", pv.command_line}};
  }
  return j.dump(2) + "\n";
}

}  // namespace trainsim::calib
