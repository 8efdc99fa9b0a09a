// The built-in profiles are the JSON files of calibrate/profiles/, embedded into the library at
// build time (calibrate/profiles/embed.cmake): each must parse, equal what load_profile reads from
// the file itself, and be the profile `trainsim run` reports for a cluster of that GPU.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "calibrate/profile.h"
#include "sim/core/error.h"
#include "tests/support/cli_runner.h"

namespace {

using trainsim::calib::builtin_profile;
using trainsim::calib::builtin_profile_names;
using trainsim::calib::load_profile;
using trainsim::calib::Profile;
using trainsim::calib::profile_to_json;

const char* const kGpus[] = {"a100-80gb", "a100-40gb", "a800", "h100-sxm",
                             "h800",      "h200-sxm",  "b200", "b300",  "gb200", "gb300"};

std::string source_file(const std::string& gpu) {
  return std::string(TRAINSIM_SOURCE_DIR) + "/calibrate/profiles/" + gpu + ".json";
}

// Embedded text and file on disk give the same profile, field for field (profile_to_json writes
// every field), and the file passes load_profile's full validation.
TEST(BuiltinProfiles, EmbeddedEqualsTheFileLoadProfileReads) {
  for (const char* gpu : kGpus) {
    SCOPED_TRACE(gpu);
    const Profile embedded = builtin_profile(gpu);
    EXPECT_EQ(embedded.name, std::string("datasheet-") + gpu);
    EXPECT_EQ(embedded.gpu, gpu);
    EXPECT_FALSE(embedded.provenance.empty());
    const Profile file = load_profile(source_file(gpu));
    EXPECT_EQ(profile_to_json(embedded), profile_to_json(file));
  }
}

TEST(BuiltinProfiles, NamesListEveryProfileAndUnknownGpuIsAnInputError) {
  const std::string names = builtin_profile_names();
  for (const char* gpu : kGpus) {
    EXPECT_NE(names.find(std::string("datasheet-") + gpu), std::string::npos) << names;
  }
  try {
    builtin_profile("mi300x");
    FAIL() << "no built-in profile for mi300x";
  } catch (const trainsim::Error& e) {
    EXPECT_EQ(e.kind(), trainsim::ErrorKind::kInput);
  }
}

// Efficiencies are fractions of peak, and the two GPUs that share a die share their constants.
TEST(BuiltinProfiles, ConstantsAreFractionsAndSiblingsAgree) {
  for (const char* gpu : kGpus) {
    SCOPED_TRACE(gpu);
    const Profile p = builtin_profile(gpu);
    for (double e : {p.gemm_peak_efficiency, p.attention_fwd_efficiency,
                     p.attention_bwd_efficiency, p.memory_bw_efficiency, p.nic_efficiency}) {
      EXPECT_GT(e, 0);
      EXPECT_LE(e, 1);
    }
  }
  const Profile a100 = builtin_profile("a100-80gb"), a800 = builtin_profile("a800");
  EXPECT_EQ(a100.gemm_peak_efficiency, a800.gemm_peak_efficiency);
  EXPECT_LT(a800.nvlink.busbw_Bps, a100.nvlink.busbw_Bps);  // 8 NVLinks instead of 12
  const Profile h100 = builtin_profile("h100-sxm"), h200 = builtin_profile("h200-sxm");
  EXPECT_EQ(h100.gemm_peak_efficiency, h200.gemm_peak_efficiency);
  EXPECT_EQ(h100.nvls_busbw_Bps, h200.nvls_busbw_Bps);
  // The A100 40GB is the A100 80GB's die: every constant the same (its HBM is the preset's).
  const Profile a100_40 = builtin_profile("a100-40gb");
  EXPECT_EQ(a100_40.gemm_peak_efficiency, a100.gemm_peak_efficiency);
  EXPECT_EQ(a100_40.nvlink.busbw_Bps, a100.nvlink.busbw_Bps);
  // The H800 is the H100's die with the A800's cut NVLink: H100 compute, A800 NVLink bus
  // bandwidth, no NVLS.
  const Profile h800 = builtin_profile("h800");
  EXPECT_EQ(h800.gemm_peak_efficiency, h100.gemm_peak_efficiency);
  EXPECT_EQ(h800.nvlink.busbw_Bps, a800.nvlink.busbw_Bps);
  // NCCL's channels on the server (calibrate/profiles/README.md): two a NVLink on the A100's 12
  // (24) and the cut 8 of the A800 and H800 (16); 24 on H100/H200 as their logs show; 32 on DGX
  // B200, the Blackwell siblings taking the B200's.
  EXPECT_EQ(a100.nccl_channels, 24);
  EXPECT_EQ(a100_40.nccl_channels, 24);
  EXPECT_EQ(a800.nccl_channels, 16);
  EXPECT_EQ(h100.nccl_channels, 24);
  EXPECT_EQ(h200.nccl_channels, 24);
  EXPECT_EQ(h800.nccl_channels, 16);
  for (const char* gpu : {"b200", "b300", "gb200", "gb300"}) {
    EXPECT_EQ(builtin_profile(gpu).nccl_channels, 32) << gpu;
  }
  EXPECT_EQ(h800.nvls_busbw_Bps, 0);
  // B200: its burst MAMF (1,745 of 2,250) at the H100's fitted fraction of its own (0.641 of
  // 794.5/989); NVLink and NVLS at the H100's fractions of the link rate, of 900 GB/s.
  const Profile b200 = builtin_profile("b200");
  EXPECT_NEAR(b200.gemm_peak_efficiency, 1745.0 / 2250 * 0.641 / (794.5 / 989), 5e-4);
  EXPECT_NEAR(b200.nvlink.busbw_Bps, 900e9 * 370 / 450, 1e9);
  EXPECT_NEAR(b200.nvls_busbw_Bps, 900e9 * 480 / 450, 1e9);
  // B300: its own burst MAMF (1,769 of 2,250) by the B200's rule.
  const Profile b300 = builtin_profile("b300");
  EXPECT_NEAR(b300.gemm_peak_efficiency, 1769.0 / 2250 * 0.641 / (794.5 / 989), 5e-4);
  EXPECT_EQ(b300.nvlink.busbw_Bps, b200.nvlink.busbw_Bps);
  // GB200: its own burst MAMF (1,822 of 2,500) at the same H100 ratio; NVLink as the B200's.
  const Profile gb200 = builtin_profile("gb200");
  EXPECT_NEAR(gb200.gemm_peak_efficiency, 1822.0 / 2500 * 0.641 / (794.5 / 989), 5e-4);
  EXPECT_EQ(gb200.nvlink.busbw_Bps, b200.nvlink.busbw_Bps);
  EXPECT_EQ(gb200.nvls_busbw_Bps, b200.nvls_busbw_Bps);
  EXPECT_EQ(gb200.attention_fwd_efficiency, b200.attention_fwd_efficiency);
  // GB300: the B300's burst fraction (1,769 of 2,250) carried over as the GB200's is from the
  // B200's (1,822 / 1,745), of 2,500, at the same H100 ratio; everything else the GB200's.
  const Profile gb300 = builtin_profile("gb300");
  EXPECT_NEAR(gb300.gemm_peak_efficiency,
              1769.0 * (1822.0 / 1745) / 2500 * 0.641 / (794.5 / 989), 5e-4);
  EXPECT_EQ(gb300.nvlink.busbw_Bps, gb200.nvlink.busbw_Bps);
  // Blackwell Ultra's doubled exponential throughput (calibrate/profiles/README.md): NVIDIA's
  // 1.35x FP8 attention forward (head 192/128) makes the exponentials x = 2(1 - 1/1.35) of it;
  // at bf16 and head 128 they are r = x/(1-x) / (2·512/640) of the tensor time. Forward sped up by
  // (1 + r)/(1 + r/2); the backward saves the same exponential time, half the forward's share.
  const double x = 2 * (1 - 1 / 1.35), r = x / (1 - x) / (2 * 512.0 / 640), share = r / (1 + r);
  for (const Profile* ultra : {&gb300, &b300}) {
    const Profile& base = ultra == &gb300 ? gb200 : b200;
    EXPECT_NEAR(ultra->attention_fwd_efficiency,
                base.attention_fwd_efficiency * (1 + r) / (1 + r / 2), 1e-4);
    EXPECT_NEAR(ultra->attention_bwd_efficiency,
                1 / (1 / base.attention_bwd_efficiency - share / (4 * base.attention_fwd_efficiency)),
                1e-4);
    EXPECT_GT(ultra->attention_fwd_efficiency, base.attention_fwd_efficiency);
    EXPECT_EQ(ultra->attention_bwd_overhead_keys, base.attention_bwd_overhead_keys);
    EXPECT_EQ(ultra->memory_bw_efficiency, base.memory_bw_efficiency);
  }

  // Kernels at their own published rates (the curves are checked against the charts in
  // AttentionCurvesFollowTheKernelCharts). Dies that match share them.
  EXPECT_TRUE(h100.attention_by_kernel.contains("flash2"));
  EXPECT_TRUE(h100.attention_by_kernel.contains("triton"));
  EXPECT_TRUE(a100.attention_by_kernel.contains("triton"));
  EXPECT_FALSE(a100.attention_by_kernel.contains("flash2"));  // its own rates are FA2's
  for (const Profile* p : {&h200, &h800}) {
    EXPECT_EQ(p->attention_rate("flash2").fwd, h100.attention_rate("flash2").fwd);
    EXPECT_EQ(p->attention_rate("triton").bwd, h100.attention_rate("triton").bwd);
  }
  for (const Profile* p : {&a800, &a100_40}) {
    EXPECT_EQ(p->attention_rate("triton").fwd, a100.attention_rate("triton").fwd);
  }
  // Blackwell profiles rate no kernel of their own: every fused kernel at their attention rates.
  EXPECT_TRUE(b200.attention_by_kernel.empty());
  EXPECT_TRUE(gb300.attention_by_kernel.empty());
}

// `trainsim run` on a cluster of each GPU names that GPU's built-in profile and its version.
// The attention curves (Profile::AttentionRate::at: rate × K / (K + fixed cost in keys), K the
// keys a query computes) against the published kernel charts they were fitted to, causal, head
// dimension 128, 512 to 16K tokens (calibrate/profiles/README.md). The charts count a causal
// pass's FLOPs as half the s × s matrix and the backward as 2.5 forwards (FlashAttention's
// benchmarks/ `flops()`); the simulator counts the keys the kernel computes, K = (n + 1)/2 blocks
// of 128 for n query blocks, and the backward as 2 forwards. So a chart rate R of a pass is
// peak · e(K) · (s/2) / K, the backward's × 2.5/2, a forward + backward's 3.5 / (1/e_f + 2/e_b).
TEST(BuiltinProfiles, AttentionCurvesFollowTheKernelCharts) {
  const double seqs[] = {512, 1024, 2048, 4096, 8192, 16384};
  const auto keys = [](double s) {
    const double n = s / 128;
    return (n + 1) / 2 * 128;
  };
  enum Pass { kFwd, kBwd, kBoth };
  struct Chart {
    const char* gpu;
    const char* kernel;  // "" for the profile's own rates
    Pass pass;
    bool causal;
    double peak_tflops;
    double tflops[6];
    double tolerance;
    const char* source;
    double head_dim = 128;
  };
  const Chart charts[] = {
      {"a100-80gb", "", kFwd, true, 312, {132, 168, 187, 198, 200, 197}, 0.04,
       "FlashAttention-2 paper Fig. 5, FlashAttention-2"},
      {"a100-80gb", "", kBwd, true, 312, {90, 122, 145, 165, 176, 186}, 0.025,
       "FlashAttention-2 paper Fig. 6, FlashAttention-2"},
      {"a100-80gb", "triton", kBoth, true, 312, {55, 62, 69, 76, 80, 83}, 0.045,
       "FlashAttention-2 paper Fig. 4, FlashAttention(-1)"},
      {"h100-sxm", "", kFwd, true, 989.4, {315, 410, 484, 518, 529, 539}, 0.03,
       "FlashAttention-3 paper Fig. 5, cuDNN"},
      {"h100-sxm", "", kBwd, false, 989.4, {305, 408, 465, 499, 518, 516}, 0.035,
       "FlashAttention-3 paper Fig. 6 (no causal backward published), cuDNN"},
      {"h100-sxm", "flash2", kBoth, true, 989.4, {163, 221, 265, 294, 308, 328}, 0.02,
       "FlashAttention-2 paper Fig. 7, FlashAttention-2"},
      {"h100-sxm", "triton", kBoth, true, 989.4, {98, 109, 108, 126, 135, 137}, 0.12,
       "FlashAttention-2 paper Fig. 7, FlashAttention(-1); its 2K bar dips below its 1K one"},
      // Head dimension 64 (the same figures' panels c; the repository's
      // assets/flash2_{a100,h100}_fwd_bwd_benchmark.png at 4f285b35).
      {"a100-80gb", "", kBoth, true, 312, {88, 119, 140, 156, 165, 171}, 0.02,
       "FlashAttention-2 paper Fig. 4c, FlashAttention-2, head dim 64", 64},
      {"a100-80gb", "triton", kBoth, true, 312, {58, 70, 77, 87, 92, 97}, 0.055,
       "FlashAttention-2 paper Fig. 4c, FlashAttention(-1), head dim 64", 64},
      {"h100-sxm", "flash2", kBoth, true, 989.4, {141, 192, 232, 257, 273, 284}, 0.01,
       "FlashAttention-2 paper Fig. 7c, FlashAttention-2, head dim 64", 64},
      {"h100-sxm", "triton", kBoth, true, 989.4, {104, 123, 136, 138, 149, 156}, 0.045,
       "FlashAttention-2 paper Fig. 7c, FlashAttention(-1), head dim 64", 64},
  };
  for (const Chart& c : charts) {
    const Profile p = builtin_profile(c.gpu);
    const Profile::AttentionRate r = p.attention_rate(c.kernel);
    for (int i = 0; i < 6; ++i) {
      const double s = seqs[i];
      const double k = c.causal ? keys(s) : s;
      const double counted = c.causal ? s / 2 : s;  // the keys the chart's FLOPs count
      const double ef = r.fwd_at(k, c.head_dim), eb = r.bwd_at(k, c.head_dim);
      const double model = c.pass == kFwd   ? c.peak_tflops * ef * counted / k
                           : c.pass == kBwd ? c.peak_tflops * eb * counted / k * 2.5 / 2
                                            : c.peak_tflops * counted / k * 3.5 / (1 / ef + 2 / eb);
      EXPECT_NEAR(model / c.tflops[i], 1.0, c.tolerance)
          << c.source << " on " << c.gpu << " at " << s << " tokens: model " << model
          << " TFLOP/s, chart " << c.tflops[i];
    }
  }
  // Dies that match share the curves; Blackwell takes the H100's (its plateaus Ultra-scaled).
  for (const char* gpu : {"h200-sxm", "h800", "b200", "gb200", "b300", "gb300"}) {
    const Profile p = builtin_profile(gpu);
    const Profile h100 = builtin_profile("h100-sxm");
    EXPECT_EQ(p.attention_fwd_overhead_keys, h100.attention_fwd_overhead_keys);
    EXPECT_EQ(p.attention_bwd_overhead_keys, h100.attention_bwd_overhead_keys);
    if (p.gpu[0] == 'h') {
      EXPECT_EQ(p.attention_rate("flash2").bwd_overhead_keys,
                h100.attention_rate("flash2").bwd_overhead_keys);
    }
  }
}

// MPT's Triton kernel splits FlashAttention(-1)'s fwd + bwd time between its passes as the
// FlashAttention-2 paper's text compares FlashAttention-2 with FlashAttention in Triton: 1.3-1.5x
// faster forward (1.4 taken), about 2x backward. So its forward:backward plateau ratio is
// FlashAttention-2's (A100: 0.667 / 0.483) times 2 / 1.4, at both head dimensions and on H100
// (whose Triton build takes Ampere's instructions), and a fwd + bwd takes what one at the old
// both-pass rate took (1/e_f + 2/e_b = 3/e: FlashAttention(-1)'s chart, which the test above
// re-derives).
TEST(BuiltinProfiles, TritonSplitsItsPassesAsTheFlashAttention2PaperSays) {
  const double ratio = (0.667 / 1.4) / (0.483 / 2);
  for (const char* gpu : {"a100-80gb", "a100-40gb", "a800", "h100-sxm", "h200-sxm", "h800"}) {
    SCOPED_TRACE(gpu);
    const Profile::AttentionRate r = builtin_profile(gpu).attention_rate("triton");
    EXPECT_NEAR(r.fwd / r.bwd / ratio, 1.0, 0.01);
    EXPECT_NEAR(r.hd64.fwd / r.hd64.bwd / ratio, 1.0, 0.01);
    EXPECT_EQ(r.fwd_overhead_keys, r.bwd_overhead_keys);
  }
  // The forward now runs about twice the backward's rate: what makes a recomputed forward cheap.
  EXPECT_GT(builtin_profile("a100-80gb").attention_rate("triton").fwd_at(8192),
            1.9 * builtin_profile("a100-80gb").attention_rate("triton").bwd_at(8192));
}

// Between head dimensions 64 and 128 the two curves' efficiencies mix linearly, by hand: at 96
// half of each, at 80 three quarters of the 64 one; beyond the ends each end's curve; a kernel
// with no 64 curve (or head dimension 0: the op does not say) is the 128 one everywhere.
TEST(ProfileAttention, HeadDimensionMixesTheTwoCurves) {
  Profile::AttentionRate r{0.6, 0.4, 100, 200, {0.3, 0.2, 50, 0}};
  const double e128 = 0.6 * 1000 / 1100, e64 = 0.3 * 1000 / 1050;
  EXPECT_DOUBLE_EQ(r.fwd_at(1000, 128), e128);
  EXPECT_DOUBLE_EQ(r.fwd_at(1000, 256), e128);
  EXPECT_DOUBLE_EQ(r.fwd_at(1000, 64), e64);
  EXPECT_DOUBLE_EQ(r.fwd_at(1000, 32), e64);
  EXPECT_DOUBLE_EQ(r.fwd_at(1000, 96), 0.5 * e128 + 0.5 * e64);
  EXPECT_DOUBLE_EQ(r.fwd_at(1000, 80), 0.25 * e128 + 0.75 * e64);
  EXPECT_DOUBLE_EQ(r.fwd_at(1000, 0), e128);
  EXPECT_DOUBLE_EQ(r.bwd_at(1000, 64), 0.2);  // its 64 curve is flat
  EXPECT_DOUBLE_EQ(r.bwd_at(1000, 112), 0.75 * 0.4 * 1000 / 1200 + 0.25 * 0.2);
  r.hd64 = {};
  EXPECT_DOUBLE_EQ(r.fwd_at(1000, 64), e128);
  // The profile's own rates carry its 64 curve; a kernel entry carries its own.
  Profile p;
  p.attention_fwd_efficiency = 0.6;
  p.attention_hd64 = {0.3, 0.2, 0, 0};
  p.attention_by_kernel["triton"] = {0.2, 0.1, 0, 0, {}};
  EXPECT_DOUBLE_EQ(p.attention_rate("cudnn").fwd_at(1000, 64), 0.3);
  EXPECT_DOUBLE_EQ(p.attention_rate("triton").fwd_at(1000, 64), 0.2);
}

// The curve itself, by hand: 0.5 of peak with a fixed cost of 200 keys runs at 0.5 · 1000/1200 at
// 1,000 keys a query; no fixed cost (or no keys) is the flat rate.
TEST(ProfileAttention, RateFallsByTheFixedCostInKeys) {
  EXPECT_DOUBLE_EQ(Profile::AttentionRate::at(0.5, 200, 1000), 0.5 * 1000 / 1200);
  EXPECT_DOUBLE_EQ(Profile::AttentionRate::at(0.5, 0, 1000), 0.5);
  EXPECT_DOUBLE_EQ(Profile::AttentionRate::at(0.5, 200, 0), 0.5);
  Profile p;
  p.attention_fwd_efficiency = 0.6;
  p.attention_fwd_overhead_keys = 100;
  p.attention_by_kernel["triton"] = {0.2, 0.1, 0, 50, {}};
  EXPECT_DOUBLE_EQ(p.attention_rate("cudnn").fwd_at(300), 0.6 * 300 / 400);
  EXPECT_DOUBLE_EQ(p.attention_rate("cudnn").bwd_at(300), p.attention_bwd_efficiency);
  EXPECT_DOUBLE_EQ(p.attention_rate("triton").fwd_at(300), 0.2);
  EXPECT_DOUBLE_EQ(p.attention_rate("triton").bwd_at(50), 0.05);
}

TEST(BuiltinProfiles, RunReportsTheProfileOfTheClustersGpu) {
  for (const char* gpu : kGpus) {
    SCOPED_TRACE(gpu);
    const std::string cluster =
        std::string(gpu) == "a800" ? "megascale-ampere"
        : std::string(gpu).rfind("a100", 0) == 0 ? "selene-a100"
        : std::string(gpu) == "gb200"            ? "dgx-gb200-nvl72"
        : std::string(gpu) == "gb300"            ? "dgx-gb300-nvl72"
        : std::string(gpu) == "b300"             ? "dgx-b300-superpod"
                                                 : "dgx-h100-superpod";
    const trainsim::testing::CliRun r = trainsim::testing::trainsim(
        "run scenarios/examples/megatron-1.7b-32xa100.yaml --format json --set cluster.preset=" +
        cluster + " --set cluster.gpu=" + gpu + " --set cluster.gpus=32");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["calibration"]["profile"], std::string("datasheet-") + gpu);
    EXPECT_EQ(j["calibration"]["version"], builtin_profile(gpu).version);
  }
}

}  // namespace
