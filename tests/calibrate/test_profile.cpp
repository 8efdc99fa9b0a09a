// calibrate/profile: built-in profiles, JSON round trip, and precise errors on corrupt files.
#include "calibrate/profile.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "sim/core/error.h"

namespace trainsim::calib {
namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

// Bus bandwidths are the published nccl-tests figures of validation/README.md.
TEST(Profile, BuiltinsCarryPublishedBandwidths) {
  EXPECT_DOUBLE_EQ(builtin_profile("a100-80gb").nvlink.busbw_Bps, 230e9);
  EXPECT_DOUBLE_EQ(builtin_profile("a800").nvlink.busbw_Bps, 160e9);
  EXPECT_DOUBLE_EQ(builtin_profile("h100-sxm").nvlink.busbw_Bps, 370e9);
  EXPECT_DOUBLE_EQ(builtin_profile("h100-sxm").nvls_busbw_Bps, 480e9);
  EXPECT_EQ(builtin_profile("h200-sxm").name, "datasheet-h200-sxm");
  try {
    builtin_profile("mi300x");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInput);
    EXPECT_EQ(e.where().field, "calibration.profile");
  }
}

TEST(Profile, JsonRoundTrip) {
  Profile p = builtin_profile("h100-sxm");
  p.name = "my-cluster";
  p.gemm_peak_efficiency = 0.77;
  const std::string path = write_temp("roundtrip.json", profile_to_json(p));
  const Profile q = load_profile(path);
  EXPECT_EQ(q.name, "my-cluster");
  EXPECT_EQ(q.gpu, "h100-sxm");
  EXPECT_DOUBLE_EQ(q.gemm_peak_efficiency, 0.77);
  EXPECT_DOUBLE_EQ(q.nvlink.busbw_Bps, p.nvlink.busbw_Bps);
  EXPECT_DOUBLE_EQ(q.data_loading_s, p.data_loading_s);
  EXPECT_EQ(profile_to_json(q), profile_to_json(p));
  // Kernel-specific attention rates round-trip too (the H100's: FlashAttention-2 and Triton).
  ASSERT_EQ(q.attention_by_kernel.size(), 2u);
  EXPECT_DOUBLE_EQ(q.attention_rate("triton").bwd, p.attention_rate("triton").bwd);
  EXPECT_DOUBLE_EQ(q.attention_rate("cudnn").fwd, q.attention_fwd_efficiency);
  // So do the curves' fixed costs, the profile's own and each kernel's.
  EXPECT_GT(p.attention_bwd_overhead_keys, 0);
  EXPECT_DOUBLE_EQ(q.attention_bwd_overhead_keys, p.attention_bwd_overhead_keys);
  EXPECT_DOUBLE_EQ(q.attention_rate("flash2").fwd_overhead_keys,
                   p.attention_rate("flash2").fwd_overhead_keys);
  // NCCL's channel count (a written profile keeps it; 0, unknown, is left out).
  EXPECT_EQ(q.nccl_channels, 24);
  Profile unknown = p;
  unknown.nccl_channels = 0;
  const std::string unknown_text = profile_to_json(unknown);
  EXPECT_EQ(unknown_text.find("nccl_channels"), std::string::npos);
  EXPECT_EQ(load_profile(write_temp("no-channels.json", unknown_text)).nccl_channels, 0);
  // And the curves at head dimension 64, the profile's own and a kernel's.
  Profile h = builtin_profile("a100-80gb");
  ASSERT_GT(h.attention_hd64.fwd, 0);
  ASSERT_GT(h.attention_rate("triton").hd64.bwd_overhead_keys, 0);
  const Profile hq = load_profile(write_temp("hd64.json", profile_to_json(h)));
  EXPECT_DOUBLE_EQ(hq.attention_hd64.bwd_overhead_keys, h.attention_hd64.bwd_overhead_keys);
  EXPECT_DOUBLE_EQ(hq.attention_rate("triton").hd64.fwd, h.attention_rate("triton").hd64.fwd);
  EXPECT_EQ(profile_to_json(hq), profile_to_json(h));
  // A profile without them (every profile before them) reads as flat rates.
  Profile flat = p;
  flat.attention_fwd_overhead_keys = flat.attention_bwd_overhead_keys = 0;
  flat.attention_by_kernel.clear();
  const std::string text = profile_to_json(flat);
  EXPECT_EQ(text.find("overhead_keys"), std::string::npos);
  EXPECT_EQ(load_profile(write_temp("flat.json", text)).attention_fwd_overhead_keys, 0);
}

void expect_error(const std::string& text, const std::string& field, const std::string& fragment) {
  const std::string path = write_temp("bad.json", text);
  try {
    load_profile(path);
    FAIL() << "expected an error for " << field;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInput);
    EXPECT_EQ(e.where().file, path);
    EXPECT_EQ(e.where().field, field);
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Profile, CorruptFilesNameFileAndField) {
  const std::string good = profile_to_json(builtin_profile("a100-80gb"));
  expect_error("{ not json", "", "not valid JSON");
  expect_error("[]", "", "a profile is a JSON object");
  std::string s = good;
  s.replace(s.find("\"gemm_peak_efficiency\": 0.82"), 28, "\"gemm_peak_efficiency\": \"fast\"");
  expect_error(s, "compute.gemm_peak_efficiency", "expected a number");
  s = good;
  s.replace(s.find("\"gemm_peak_efficiency\": 0.82"), 28, "\"gemm_peak_efficiency\": 1.5");
  expect_error(s, "compute.gemm_peak_efficiency", "at most 1");
  s = good;
  s.replace(s.find("\"format_version\": 1"), 19, "\"format_version\": 9");
  expect_error(s, "format_version", "unsupported profile format 9");
  s = good;
  s.replace(s.find("\"gemm_half_dim\""), 15, "\"gemm_halfdim\"");
  expect_error(s, "compute.gemm_halfdim", "unknown field");
  // A kernel's own attention rates: a fused kernel's name, both efficiencies, fractions.
  Profile plain = builtin_profile("a100-80gb");
  plain.attention_by_kernel.clear();
  const std::string base = profile_to_json(plain);
  const std::string anchor = "\"attention_bwd_efficiency\": 0.483,";
  const auto with_kernels = [&](const std::string& by) {
    std::string t = base;
    t.replace(t.find(anchor), anchor.size(), anchor + " \"attention_by_kernel\": " + by + ",");
    return t;
  };
  expect_error(with_kernels(R"({"unfused": {"fwd_efficiency": 0.2, "bwd_efficiency": 0.2}})"),
               "compute.attention_by_kernel.unfused", "not a fused attention kernel");
  expect_error(with_kernels(R"({"triton": {"fwd_efficiency": 0.2}})"),
               "compute.attention_by_kernel.triton.bwd_efficiency", "missing");
  expect_error(with_kernels(R"({"triton": {"fwd_efficiency": 2, "bwd_efficiency": 0.2}})"),
               "compute.attention_by_kernel.triton.fwd_efficiency", "at most 1");
  expect_error(with_kernels(R"({"triton": 0.2})"), "compute.attention_by_kernel.triton",
               "must be an object");
  expect_error(with_kernels("[]"), "compute.attention_by_kernel", "must be an object");
  expect_error(with_kernels(R"({"triton": {"fwd_efficiency": 0.2, "bwd_efficiency": 0.2,
                                           "fwd_overhead_keys": -5}})"),
               "compute.attention_by_kernel.triton.fwd_overhead_keys", "key columns");
  expect_error(with_kernels(R"({"triton": {"fwd_efficiency": 0.2, "bwd_efficiency": 0.2,
                                           "bwd_overhead": 5}})"),
               "compute.attention_by_kernel.triton.bwd_overhead", "unknown field");
  expect_error(with_kernels(R"({"triton": {"fwd_efficiency": 0.2, "bwd_efficiency": 0.2,
                                           "head_dim_64": {"fwd_efficiency": 0.3}}})"),
               "compute.attention_by_kernel.triton.head_dim_64.bwd_efficiency", "missing");
  {
    const std::string at = "\"nccl_channels\": 24";
    ASSERT_NE(good.find(at), std::string::npos);
    for (const char* n : {"0", "65", "2.5", "\"24\""}) {
      std::string bad = good;
      bad.replace(bad.find(at), at.size(), std::string("\"nccl_channels\": ") + n);
      expect_error(bad, "collectives.nccl_channels", "integer");
    }
  }
  expect_error(with_kernels(R"({"triton": {"fwd_efficiency": 0.2, "bwd_efficiency": 0.2,
                                           "head_dim_64": 0.3}})"),
               "compute.attention_by_kernel.triton.head_dim_64", "must be an object");
  expect_error(with_kernels(R"({"triton": {"fwd_efficiency": 0.2, "bwd_efficiency": 0.2,
                                           "head_dim_64": {"fwd_efficiency": 0.3,
                                           "bwd_efficiency": 1.5}}})"),
               "compute.attention_by_kernel.triton.head_dim_64.bwd_efficiency", "at most 1");
  s = good;
  {
    const std::size_t at = s.find("\"attention_bwd_overhead_keys\": 217");
    s.replace(at, s.find(',', at) - at, "\"attention_bwd_overhead_keys\": \"x\"");
  }
  expect_error(s, "compute.attention_bwd_overhead_keys", "expected a number");
  // collectives_measured: a known op, a group of 2 or more ranks, one entry per (op, ranks).
  Profile measured = builtin_profile("h100-sxm");
  measured.collectives_measured.push_back({"all_gather", 8, 1e-4, 4e10, {{1 << 20, 126}, {1 << 30, 23588}}});
  measured.collectives_measured.push_back({"all_reduce", 8, 4e-5, 4.8e11, {{1 << 20, 44}, {1 << 30, 3954}}});
  measured.measured_provenance.source_files = {"a.txt"};
  const std::string mj = profile_to_json(measured);
  ASSERT_NO_THROW(parse_profile(mj, "ok.json"));
  s = mj;
  s.replace(s.find("\"all_gather\""), 12, "\"all-gather\"");
  expect_error(s, "collectives_measured[0].op", "unknown collective \"all-gather\" (all_reduce, ");
  for (const char* ranks : {"0", "1", "-3", "2.5"}) {
    s = mj;
    s.replace(s.find("\"ranks\": 8"), 10, std::string("\"ranks\": ") + ranks);
    expect_error(s, "collectives_measured[0].ranks", "expected an integer");
  }
  s = mj;
  s.replace(s.find("\"all_reduce\""), 12, "\"all_gather\"");
  expect_error(s, "collectives_measured[1]",
               "a second fit of all_gather over 8 ranks, after collectives_measured[0]");
  // The same op over another group size is another fit.
  s = mj;
  s.replace(s.find("\"all_reduce\""), 12, "\"all_gather\"");
  s.replace(s.rfind("\"ranks\": 8"), 10, "\"ranks\": 16");
  EXPECT_EQ(parse_profile(s, "ok.json").collectives_measured.at(1).ranks, 16);
  try {
    load_profile("/nonexistent/profile.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.where().file, "/nonexistent/profile.json");
  }
}

}  // namespace
}  // namespace trainsim::calib
