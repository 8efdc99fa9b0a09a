#include "calibrate/profile.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sim/core/error.h"

namespace trainsim::calib {
namespace {

using nlohmann::json;

double get_number(const json& j, const char* key, const std::string& file, const std::string& path,
                  double min_value, bool positive) {
  const std::string field = path.empty() ? key : path + "." + key;
  if (!j.contains(key)) throw_input("missing field", {file, 0, field});
  const json& v = j.at(key);
  if (!v.is_number()) throw_input("expected a number, found " + v.dump(), {file, 0, field});
  const double x = v.get<double>();
  if (!(x >= min_value) || (positive && !(x > 0))) {
    throw_input("value " + v.dump() + " out of range (must be " + (positive ? "> 0" : ">= 0") + ")",
                {file, 0, field});
  }
  return x;
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
    if (!e.contains("ranks") || !e["ranks"].is_number_integer() || e["ranks"].get<int>() < 1) {
      throw_input("expected an integer >= 1", {file, 0, at + ".ranks"});
    }
    m.ranks = e["ranks"].get<int>();
    m.alpha_s = get_number(e, "alpha_s", file, at, 0, false);
    m.busbw_Bps = get_number(e, "busbw_Bps", file, at, 0, true);
    if (!e.contains("samples") || !e["samples"].is_array()) {
      throw_input("expected an array of [size_bytes, time_us]", {file, 0, at + ".samples"});
    }
    for (std::size_t k = 0; k < e["samples"].size(); ++k) {
      const json& s = e["samples"][k];
      if (!s.is_array() || s.size() != 2 || !s[0].is_number() || !s[1].is_number() ||
          !(s[0].get<double>() > 0) || !(s[1].get<double>() > 0)) {
        throw_input("expected [size_bytes, time_us], both > 0",
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
    "gemm",      "attention_fwd", "attention_bwd", "layernorm",
    "rmsnorm",   "softmax",       "dropout",       "bias_dropout_add",
    "bias_gelu", "swiglu",        "embedding",     "cross_entropy",
    "adam",      "lamb"};
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
    m.m = get_number(sh, "m", file, sat, 0, false);
    m.n = get_number(sh, "n", file, sat, 0, true);
    m.k = get_number(sh, "k", file, sat, 0, false);
    m.batch = get_number(sh, "batch", file, sat, 0, true);
    if (m.batch < 1) throw_input("a batch count is at least 1", {file, 0, sat + ".batch"});
    m.flops = get_number(e, "flops", file, at, 0, false);
    m.bytes = get_number(e, "bytes", file, at, 0, false);
    m.median_s = get_number(e, "median_s", file, at, 0, true);
    if (!e.contains("repeats") || !e["repeats"].is_number_integer() ||
        e["repeats"].get<int>() < 1) {
      throw_input("expected an integer >= 1", {file, 0, at + ".repeats"});
    }
    m.repeats = e["repeats"].get<int>();
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
         "bias_dropout_add, bias_gelu, swiglu, embedding, cross_entropy, adam, lamb";
}

bool is_memory_bound_kernel(const std::string& op) {
  return op != "gemm" && op != "attention_fwd" && op != "attention_bwd";
}

Profile load_profile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw_input("cannot open calibration profile", {path, 0, "calibration.profile"});
  std::stringstream ss;
  ss << in.rdbuf();
  json j;
  try {
    j = json::parse(ss.str());
  } catch (const json::parse_error& e) {
    throw_input(std::string("not valid JSON: ") + e.what(), {path, 0, ""});
  }
  if (!j.is_object()) throw_input("a profile is a JSON object", {path, 0, ""});
  reject_unknown(j,
                 {"format_version", "name", "version", "gpu", "provenance", "compute",
                  "collectives", "host", "collectives_measured", "collectives_measured_provenance",
                  "kernels_measured", "kernels_measured_provenance"},
                 path, "");
  if (!j.contains("format_version") || !j["format_version"].is_number_integer()) {
    throw_input("missing or non-integer", {path, 0, "format_version"});
  }
  if (j["format_version"].get<int>() != kProfileFormatVersion) {
    throw_input("unsupported profile format " + j["format_version"].dump() + " (this build reads " +
                    std::to_string(kProfileFormatVersion) + ")",
                {path, 0, "format_version"});
  }
  Profile p;
  p.name = get_string(j, "name", path);
  p.version = get_string(j, "version", path);
  p.gpu = get_string(j, "gpu", path);
  p.provenance = j.contains("provenance") && j["provenance"].is_string()
                     ? j["provenance"].get<std::string>()
                     : "";
  for (const char* section : {"compute", "collectives", "host"}) {
    if (!j.contains(section) || !j[section].is_object()) {
      throw_input("missing section (an object)", {path, 0, section});
    }
  }
  const json& c = j["compute"];
  reject_unknown(c,
                 {"gemm_peak_efficiency", "gemm_half_dim", "attention_fwd_efficiency",
                  "attention_bwd_efficiency", "memory_bw_efficiency", "kernel_overhead_s"},
                 path, "compute");
  p.gemm_peak_efficiency = get_number(c, "gemm_peak_efficiency", path, "compute", 0, true);
  p.gemm_half_dim = get_number(c, "gemm_half_dim", path, "compute", 0, false);
  p.attention_fwd_efficiency = get_number(c, "attention_fwd_efficiency", path, "compute", 0, true);
  p.attention_bwd_efficiency = get_number(c, "attention_bwd_efficiency", path, "compute", 0, true);
  p.memory_bw_efficiency = get_number(c, "memory_bw_efficiency", path, "compute", 0, true);
  p.kernel_overhead_s = get_number(c, "kernel_overhead_s", path, "compute", 0, false);
  for (const char* key : {"gemm_peak_efficiency", "attention_fwd_efficiency",
                          "attention_bwd_efficiency", "memory_bw_efficiency"}) {
    if (c[key].get<double>() > 1.0) {
      throw_input("an efficiency is a fraction of peak, at most 1",
                  {path, 0, std::string("compute.") + key});
    }
  }
  const json& k = j["collectives"];
  reject_unknown(k,
                 {"nvlink_busbw_Bps", "nvlink_step_latency_s", "nvls_busbw_Bps", "nic_efficiency",
                  "net_step_latency_s", "base_latency_s"},
                 path, "collectives");
  p.nvlink.busbw_Bps = get_number(k, "nvlink_busbw_Bps", path, "collectives", 0, true);
  p.nvlink.step_latency_s = get_number(k, "nvlink_step_latency_s", path, "collectives", 0, false);
  p.nvls_busbw_Bps = get_number(k, "nvls_busbw_Bps", path, "collectives", 0, false);
  p.nic_efficiency = get_number(k, "nic_efficiency", path, "collectives", 0, true);
  if (p.nic_efficiency > 1.0) {
    throw_input("a fraction of line rate, at most 1", {path, 0, "collectives.nic_efficiency"});
  }
  p.net_step_latency_s = get_number(k, "net_step_latency_s", path, "collectives", 0, false);
  p.collective_base_latency_s = get_number(k, "base_latency_s", path, "collectives", 0, false);
  const json& h = j["host"];
  reject_unknown(h, {"data_loading_s"}, path, "host");
  p.data_loading_s = get_number(h, "data_loading_s", path, "host", 0, false);
  if (j.contains("collectives_measured")) load_measured(j, path, p);
  if (j.contains("kernels_measured")) {
    load_kernels_measured(j, path, p);
  } else if (j.contains("kernels_measured_provenance")) {
    throw_input("provenance without a kernels_measured section",
                {path, 0, "kernels_measured_provenance"});
  }
  return p;
}

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
  j["collectives"] = {{"nvlink_busbw_Bps", p.nvlink.busbw_Bps},
                      {"nvlink_step_latency_s", p.nvlink.step_latency_s},
                      {"nvls_busbw_Bps", p.nvls_busbw_Bps},
                      {"nic_efficiency", p.nic_efficiency},
                      {"net_step_latency_s", p.net_step_latency_s},
                      {"base_latency_s", p.collective_base_latency_s}};
  j["host"] = {{"data_loading_s", p.data_loading_s}};
  if (!p.collectives_measured.empty()) {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const MeasuredCollective& m : p.collectives_measured) {
      nlohmann::ordered_json samples = nlohmann::ordered_json::array();
      for (const auto& [size, time] : m.samples) samples.push_back({size, time});
      arr.push_back({{"op", m.op},
                     {"ranks", m.ranks},
                     {"alpha_s", m.alpha_s},
                     {"busbw_Bps", m.busbw_Bps},
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
