// Built-in datasheet profiles (calibrate/profile.h: builtin_profile).
//
// The profiles are the JSON files of calibrate/profiles/ (one per GPU preset, the format of
// load_profile), compiled into the library by calibrate/profiles/embed.cmake, so the binary needs
// no file at run time. calibrate/profiles/README.md and docs/calibration.md give the source of
// every constant; tests/calibrate/test_builtin_profiles.cpp checks that each embedded file also
// loads through load_profile to the very same profile.
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "calibrate/profile.h"
#include "sim/core/error.h"

namespace trainsim::calib {
namespace detail {

// Defined in the generated builtin_profiles_data.cpp (calibrate/profiles/embed.cmake).
struct EmbeddedProfile {
  const char* gpu;
  const char* json;
};
extern const EmbeddedProfile kEmbeddedProfiles[];
extern const std::size_t kEmbeddedProfileCount;

}  // namespace detail
namespace {

using nlohmann::json;

// The embedded files are fixed at build time and checked by the test against load_profile, so a
// missing field here is a build defect: it is reported as an internal error naming the file.
double number(const json& section, const char* key, const std::string& where) {
  if (!section.contains(key) || !section.at(key).is_number()) {
    throw Error(ErrorKind::kRuntime,
                "built-in profile " + where + ": missing number `" + key + "`", {where, 0, key});
  }
  return section.at(key).get<double>();
}

std::string text(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j.at(key).is_string()) {
    throw Error(ErrorKind::kRuntime, "built-in profile " + where + ": missing string `" + key + "`",
                {where, 0, key});
  }
  return j.at(key).get<std::string>();
}

Profile parse_embedded(const detail::EmbeddedProfile& e) {
  const std::string where = std::string("calibrate/profiles/") + e.gpu + ".json";
  const json j = json::parse(e.json);
  Profile p;
  p.name = text(j, "name", where);
  p.version = text(j, "version", where);
  p.gpu = text(j, "gpu", where);
  p.provenance = text(j, "provenance", where);
  const json& c = j.at("compute");
  p.gemm_peak_efficiency = number(c, "gemm_peak_efficiency", where);
  p.gemm_half_dim = number(c, "gemm_half_dim", where);
  p.attention_fwd_efficiency = number(c, "attention_fwd_efficiency", where);
  p.attention_bwd_efficiency = number(c, "attention_bwd_efficiency", where);
  p.memory_bw_efficiency = number(c, "memory_bw_efficiency", where);
  const auto optional = [](const json& o, const char* key, const std::string& at) {
    return o.contains(key) ? number(o, key, at) : 0.0;
  };
  p.attention_fwd_overhead_keys = optional(c, "attention_fwd_overhead_keys", where);
  p.attention_bwd_overhead_keys = optional(c, "attention_bwd_overhead_keys", where);
  const auto curve64 = [&](const json& o, const char* key, const std::string& at) {
    Profile::Curve cv;
    if (!o.contains(key)) return cv;
    const json& v = o.at(key);
    const std::string here = at + "." + key;
    cv = {number(v, "fwd_efficiency", here), number(v, "bwd_efficiency", here),
          optional(v, "fwd_overhead_keys", here), optional(v, "bwd_overhead_keys", here)};
    return cv;
  };
  p.attention_hd64 = curve64(c, "attention_head_dim_64", where + " compute");
  if (c.contains("attention_by_kernel")) {
    for (const auto& [kernel, v] : c.at("attention_by_kernel").items()) {
      const std::string at = where + " compute.attention_by_kernel." + kernel;
      p.attention_by_kernel[kernel] = {number(v, "fwd_efficiency", at),
                                       number(v, "bwd_efficiency", at),
                                       optional(v, "fwd_overhead_keys", at),
                                       optional(v, "bwd_overhead_keys", at),
                                       curve64(v, "head_dim_64", at)};
    }
  }
  p.kernel_overhead_s = number(c, "kernel_overhead_s", where);
  const json& k = j.at("collectives");
  p.nvlink.busbw_Bps = number(k, "nvlink_busbw_Bps", where);
  p.nvlink.step_latency_s = number(k, "nvlink_step_latency_s", where);
  p.nvls_busbw_Bps = number(k, "nvls_busbw_Bps", where);
  p.nic_efficiency = number(k, "nic_efficiency", where);
  p.net_step_latency_s = number(k, "net_step_latency_s", where);
  p.collective_base_latency_s = number(k, "base_latency_s", where);
  p.nccl_channels = static_cast<int>(number(k, "nccl_channels", where));
  p.data_loading_s = number(j.at("host"), "data_loading_s", where);
  return p;
}

}  // namespace

Profile builtin_profile(const std::string& gpu) {
  for (std::size_t i = 0; i < detail::kEmbeddedProfileCount; ++i) {
    const detail::EmbeddedProfile& e = detail::kEmbeddedProfiles[i];
    if (gpu == e.gpu) return parse_embedded(e);
  }
  throw Error(ErrorKind::kInput, "no built-in calibration profile for GPU `" + gpu + "`",
              {"", 0, "calibration.profile"}, "built-in profiles: " + builtin_profile_names());
}

std::vector<Profile> builtin_profiles() {
  std::vector<Profile> out;
  for (std::size_t i = 0; i < detail::kEmbeddedProfileCount; ++i) {
    out.push_back(parse_embedded(detail::kEmbeddedProfiles[i]));
  }
  return out;
}

std::string builtin_profile_names() {
  std::string names;
  for (std::size_t i = 0; i < detail::kEmbeddedProfileCount; ++i) {
    names += (i ? ", datasheet-" : "datasheet-") + std::string(detail::kEmbeddedProfiles[i].gpu);
  }
  return names;
}

}  // namespace trainsim::calib
