// Validation rows with blank cells (scenarios/validation_runs.h): a blank framework is the
// software of the source's era, a blank FLOP convention is how that framework logs throughput,
// a blank vpp is not interleaved and `auto` on a pipelined row is searched.
#include "scenarios/validation_runs.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "calibrate/profile.h"
#include "scenarios/frameworks.h"
#include "scenarios/presets.h"
#include "sim/core/error.h"

namespace trainsim::scen {
namespace {

// A fitted or `set` attention constant (calibrate fit-runs, a CSV's set) carries the profile's
// curve at head dimension 64 with it in proportion, so a head-dim-64 row moves with the fit
// (A100: FlashAttention-2's 64 curve is 0.90 of its 128 one, and stays so); where the 128
// constant was 0 (a flat curve's overhead keys) the 64 one takes the value; without a 64 curve
// nothing else changes.
TEST(ValidationRuns, AttentionOverridesCarryTheHeadDimension64Curve) {
  calib::Profile p = calib::builtin_profile("a100-80gb");
  const calib::Profile base = p;
  ASSERT_GT(p.attention_hd64.fwd, 0);
  ASSERT_TRUE(apply_profile_override(p, "attention_fwd_efficiency", 0.5));
  EXPECT_DOUBLE_EQ(p.attention_fwd_efficiency, 0.5);
  EXPECT_DOUBLE_EQ(p.attention_hd64.fwd, base.attention_hd64.fwd * 0.5 / base.attention_fwd_efficiency);
  ASSERT_TRUE(apply_profile_override(p, "attention_bwd_overhead_keys", 434));
  EXPECT_DOUBLE_EQ(p.attention_hd64.bwd_overhead_keys, base.attention_hd64.bwd_overhead_keys * 2);
  EXPECT_DOUBLE_EQ(p.attention_hd64.bwd, base.attention_hd64.bwd);
  p.attention_fwd_overhead_keys = 0;
  ASSERT_TRUE(apply_profile_override(p, "attention_fwd_overhead_keys", 50));
  EXPECT_DOUBLE_EQ(p.attention_hd64.fwd_overhead_keys, 50);
  calib::Profile flat = base;
  flat.attention_hd64 = {};
  ASSERT_TRUE(apply_profile_override(flat, "attention_fwd_efficiency", 0.5));
  EXPECT_EQ(flat.attention_hd64.fwd, 0);
}

TEST(ValidationRuns, PublicationYearFromTheSource) {
  EXPECT_EQ(publication_year("Megatron-LM SC21 Table 1"), 2021);
  EXPECT_EQ(publication_year("MegaScale NSDI24 Table 2"), 2024);
  EXPECT_EQ(publication_year("Jiang et al., NSDI'24"), 2024);
  EXPECT_EQ(publication_year("The Llama 3 Herd of Models (2024), Table 4"), 2024);
  // The venue after the preprint number: the last year named.
  EXPECT_EQ(publication_year("arXiv 2104.04473, SC21"), 2021);
  // Model, GPU and table names are not years.
  EXPECT_EQ(publication_year("NVIDIA DGX Cloud recipe GPT-3 175B"), std::nullopt);
  EXPECT_EQ(publication_year("T5 on A100 and H100, Table 12"), std::nullopt);
  EXPECT_EQ(publication_year("arXiv 2104.04473"), std::nullopt);
  EXPECT_EQ(publication_year(""), std::nullopt);
}

// The latest preset of the family dated by June of the year before publication for a reviewed
// venue, by the January of its year for a report.
TEST(ValidationRuns, BlankFrameworkIsTheSourcesEra) {
  std::string why;
  // SC21 (2021): no Megatron preset dated by 2020-06, so the family's earliest.
  EXPECT_EQ(framework_for_run("megatron", "Megatron-LM SC21 Table 1", &why), "megatron-lm-2021");
  EXPECT_NE(why.find("earliest"), std::string::npos) << why;
  // NSDI'24: dated by 2023-06, the January 2023 Megatron-LM MegaScale compared against.
  EXPECT_EQ(framework_for_run("megatron", "MegaScale NSDI24 Table 2", &why), "megatron-lm-2023");
  EXPECT_NE(why.find("2023-06"), std::string::npos) << why;
  // A report of 2024 (no review cycle): what was released by 2024-01, Megatron-Core 0.4.
  EXPECT_EQ(framework_for_run("megatron", "The Llama 3 Herd of Models (2024)", &why),
            "megatron-core-2023");
  EXPECT_NE(why.find("report of 2024"), std::string::npos) << why;
  // The same year at a reviewed venue named in full: by 2023-06.
  EXPECT_EQ(framework_for_run("megatron", "NeurIPS 2024", &why), "megatron-lm-2023");
  EXPECT_EQ(framework_for_run("megatron", "a 2025 report", &why), "megatron-core-2024");
  // No year: the alias; a family of one: that preset, whatever the year.
  EXPECT_EQ(framework_for_run("megatron", "a blog post", &why), "megatron-lm-2023");
  EXPECT_NE(why.find("names no year"), std::string::npos) << why;
  EXPECT_EQ(framework_for_run("nemo", "SC21", &why), "nemo-2024");
  EXPECT_EQ(framework_for_run("deepspeed", "2022", &why), "deepspeed-2023");
}

// The run's own configuration rules out software that lacked it: a 2022 report of selective
// recompute did not run the 2021 release (Korthikanti et al. introduced it, Megatron-LM 2022-05).
TEST(ValidationRuns, BlankFrameworkHasWhatTheRowUses) {
  std::string why;
  FrameworkNeeds selective;
  selective.selective_recompute = true;
  EXPECT_EQ(framework_for_run("megatron", "Korthikanti et al. 2022", &why), "megatron-lm-2021");
  EXPECT_EQ(framework_for_run("megatron", "Korthikanti et al. 2022", &why, selective),
            "megatron-lm-2023");
  EXPECT_NE(why.find("selective recompute"), std::string::npos) << why;
  EXPECT_NE(why.find("megatron-lm-2021"), std::string::npos) << why;
  // A sharded optimizer likewise (the distributed optimizer, 2022-06); SC21's zero 0 needs none.
  FrameworkNeeds sharded;
  sharded.sharded_optimizer = true;
  EXPECT_EQ(framework_for_run("megatron", "Megatron-LM SC21 Table 1", &why, sharded),
            "megatron-lm-2023");
  EXPECT_EQ(framework_for_run("megatron", "Megatron-LM SC21 Table 1", &why, FrameworkNeeds{}),
            "megatron-lm-2021");
  // Context parallelism: Megatron-Core of 2023-12, even for a venue whose cut-off is earlier.
  FrameworkNeeds cp;
  cp.context_parallel = true;
  EXPECT_EQ(framework_for_run("megatron", "NeurIPS 2024", &why, cp), "megatron-core-2023");
  EXPECT_NE(why.find("context parallelism"), std::string::npos) << why;
  // What the dated preset already has changes nothing.
  EXPECT_EQ(framework_for_run("megatron", "MegaScale NSDI24 Table 2", &why, selective),
            "megatron-lm-2023");
  EXPECT_NE(why.find("2023-06"), std::string::npos) << why;
}

// The model's blocks are capabilities too: Megatron-LM gained rotary positions (2023-03-31),
// SwiGLU (2023-04-01), GQA (2023-06-05) and RMSNorm (2023-07-31), so a Llama-style run of the
// megatron family did not run the January 2023 code, with or without a year in its source.
// ZeRO-3 likewise needs a preset that shards parameters (NeMo's Megatron FSDP, 2025).
TEST(ValidationRuns, BlankFrameworkCouldBuildTheRowsModel) {
  std::string why;
  FrameworkNeeds llama;
  llama.rotary = llama.gated_mlp = llama.gqa = llama.rmsnorm = true;
  EXPECT_EQ(framework_for_run("megatron", "a blog post", &why), "megatron-lm-2023");
  EXPECT_EQ(framework_for_run("megatron", "a blog post", &why, llama), "megatron-core-2023");
  EXPECT_NE(why.find("names no year"), std::string::npos) << why;
  EXPECT_NE(why.find("rotary positions, a SwiGLU MLP, grouped-query attention, RMSNorm"),
            std::string::npos)
      << why;
  EXPECT_EQ(framework_for_run("megatron", "NeurIPS 2024", &why, llama), "megatron-core-2023");
  // One block alone is enough to rule the 2023-01 code out.
  FrameworkNeeds swiglu;
  swiglu.gated_mlp = true;
  EXPECT_EQ(framework_for_run("megatron", "MegaScale NSDI24 Table 2", &why, swiglu),
            "megatron-core-2023");
  FrameworkNeeds zero3;
  zero3.sharded_optimizer = zero3.parameter_sharding = true;
  EXPECT_EQ(framework_for_run("nemo", "a 2024 report", &why), "nemo-2024");
  EXPECT_EQ(framework_for_run("nemo", "a 2024 report", &why, zero3), "nemo-2025");
  EXPECT_NE(why.find("parameter sharding (zero 3)"), std::string::npos) << why;
  // No megatron preset shards parameters: the date decides, and the run says what it lacked.
  EXPECT_EQ(framework_for_run("megatron", "a 2023 report", &why, zero3), "megatron-lm-2023");
  EXPECT_NE(why.find("no megatron preset has parameter sharding (zero 3)"), std::string::npos)
      << why;
  // ... nor does it make the 2021 code, which lacks the sharded optimizer too, the choice.
  EXPECT_EQ(framework_for_run("megatron", "a 2022 report", &why, zero3), "megatron-lm-2023");
  EXPECT_EQ(framework_for_run("megatron", "a blog post", &why, zero3), "megatron-lm-2023");
  const FrameworkPreset* jan2023 = find_framework("megatron-lm-2023");
  ASSERT_NE(jan2023, nullptr);
  EXPECT_EQ(zero3.lacking(*jan2023), "parameter sharding (zero 3)");
  EXPECT_EQ(llama.lacking(*find_framework("megatron-core-2023")), "");
}

const std::string kHeader =
    "id,source,gpu,precision,cluster,gpus,layers,hidden,heads,kv_heads,ffn,seq,vocab,tp,pp,dp,"
    "vpp,cp,ep,mbs,gbs,zero,recompute,system,iter_s,tokens_s,mfu,tflops_gpu,notes";

// One row (cells after kHeader) validated at analytic fidelity; it must run.
ValidationRow only_row(const std::string& row, const ValidationOptions& options = {}) {
  const auto out = validate_runs_text(kHeader + "\n" + row, "t.csv", "analytic", options);
  EXPECT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].error_message.empty()) << out[0].error_message;
  return out[0];
}

// The value whose row (cells from `row(value)`) predicts the shortest iteration, and that time:
// what a search over those values must find.
template <class Row>
std::pair<std::string, double> fastest(std::initializer_list<const char*> values, Row row) {
  std::pair<std::string, double> best{"", 1e300};
  for (const char* value : values) {
    const double t = *only_row(row(value)).predicted.iter_s;
    if (t < best.second) best = {value, t};
  }
  return best;
}

// The SC21 1.7B row in the shared format (no framework, no flops_convention) is modelled exactly
// as with the columns the project's copy states.
TEST(ValidationRuns, SharedFormatFillsFrameworkAndConventionFromTheSource) {
  const std::string cells =
      "sc21-1.7b,Megatron-LM SC21 Table 1,a100-80gb,fp16,selene-a100,32,24,2304,24,24,9216,2048,"
      "51200,1,1,32,1,1,1,16,512,0,full,megatron,,,,137,";
  const auto blank = validate_runs_text(kHeader + "\n" + cells + "\n", "t.csv", "analytic", {});
  const auto given = validate_runs_text(
      kHeader + ",framework,flops_convention\n" + cells + ",megatron-lm-2021,megatron-recompute\n",
      "t.csv", "analytic", {});
  ASSERT_EQ(blank.size(), 1u);
  ASSERT_EQ(given.size(), 1u);
  ASSERT_TRUE(blank[0].error_message.empty()) << blank[0].error_message;
  EXPECT_EQ(blank[0].assumed.at("framework").rfind("megatron-lm-2021", 0), 0u)
      << blank[0].assumed.at("framework");
  EXPECT_EQ(blank[0].flops_convention, "megatron-recompute");
  EXPECT_TRUE(blank[0].tflops_counts_recompute);
  EXPECT_EQ(*blank[0].predicted.iter_s, *given[0].predicted.iter_s);
  EXPECT_EQ(*blank[0].predicted.tflops_gpu, *given[0].predicted.tflops_gpu);
  EXPECT_EQ(*blank[0].mfu_err_pts, *given[0].mfu_err_pts);
  // With the SC21 era's software a 137 TFLOP/s figure is compared counting recompute: the
  // predicted TFLOP/s is within 5 % (counting only model FLOPs it would be 25 % short).
  EXPECT_LT(std::abs(*blank[0].tflops_err_pct), 5.0);
}

// vpp `auto` on a pipelined Megatron row: every count the layout accepts is tried and the
// fastest is kept; DeepSpeed's pipeline has no interleaving, so its `auto` stays 1. A blank
// cell is 1 (the format's "not interleaved").
// A blank micro-batch is not published: it is searched as a blank recompute is, the fastest
// that fits of the powers of two up to 16 that divide the batch per replica. Here (TP 8, PP 1, DP
// 48, four sequences per replica, DP overlap) a larger micro-batch gives the gradient
// reduce-scatter a longer last backward to hide behind, so the search does not keep 1.
TEST(ValidationRuns, BlankMicroBatchIsTheFastestThatFits) {
  const auto row = [](const std::string& mbs) {
    return "r,Megatron-LM README 2024,h100-sxm,bf16,,384,48,7168,56,56,28672,4096,131072,8,1,48,,"
           "1,1," + mbs + ",192,,,,,,,459.6,\n";
  };
  const auto searched = validate_runs_text(kHeader + "\n" + row(""), "t.csv", "analytic", {});
  ASSERT_EQ(searched.size(), 1u);
  ASSERT_TRUE(searched[0].error_message.empty()) << searched[0].error_message;
  const std::string& why = searched[0].assumed.at("mbs");
  // 192 / 48 = 4 sequences per replica: 1, 2 and 4 divide it, 8 and 16 do not.
  EXPECT_NE(why.find("of mbs 1, 2, 4)"), std::string::npos) << why;
  const auto [best_mbs, best] = fastest({"1", "2", "4"}, row);
  EXPECT_EQ(*searched[0].predicted.iter_s, best);
  EXPECT_EQ(why.rfind(best_mbs + " ", 0), 0u) << why;
  EXPECT_NE(best_mbs, "1");
  // A given micro-batch is kept and nothing is said of it.
  const auto given = validate_runs_text(kHeader + "\n" + row("1"), "t.csv", "analytic", {});
  EXPECT_EQ(given[0].assumed.count("mbs"), 0u);
}

TEST(ValidationRuns, AutoVppIsSearchedAndBlankIsNotInterleaved) {
  const auto row = [](const std::string& vpp, const std::string& system) {
    return "r,Megatron-LM SC21 Table 2,a100-80gb,fp16,selene-a100,384,96,12288,96,96,49152,2048,"
           "51200,8,12,4," +
           vpp + ",1,1,1,1536,0,full," + system + ",,,,153,\n";
  };
  const auto searched = validate_runs_text(kHeader + "\n" + row("auto", "megatron"), "t.csv",
                                           "analytic", {});
  ASSERT_EQ(searched.size(), 1u);
  ASSERT_TRUE(searched[0].error_message.empty()) << searched[0].error_message;
  const std::string& why = searched[0].assumed.at("vpp");
  // 96 layers on 12 stages: 8 per stage, so vpp 1, 2, 4 and 8 (micro-batches 384, a multiple of
  // 12, as the interleaved schedule needs).
  EXPECT_NE(why.find("of vpp 1, 2, 4, 8"), std::string::npos) << why;
  const auto [best_vpp, best] =
      fastest({"1", "2", "4", "8"}, [&](const std::string& v) { return row(v, "megatron"); });
  EXPECT_EQ(*searched[0].predicted.iter_s, best);
  EXPECT_EQ(why.rfind(best_vpp + " ", 0), 0u) << why;
  // Interleaving pays here (the bubble shrinks by the vpp): the search does not keep vpp 1.
  EXPECT_NE(best_vpp, "1");
  // A blank cell is the format's "not interleaved" (../shared/validation/README.md): vpp 1, said.
  const auto blank = validate_runs_text(kHeader + "\n" + row("", "megatron"), "t.csv",
                                        "analytic", {});
  const auto one = validate_runs_text(kHeader + "\n" + row("1", "megatron"), "t.csv",
                                      "analytic", {});
  EXPECT_EQ(*blank[0].predicted.iter_s, *one[0].predicted.iter_s);
  EXPECT_EQ(blank[0].assumed.at("vpp").rfind("1 (blank: not interleaved", 0), 0u);
  // A word other than auto is refused, naming the column.
  try {
    validate_runs_text(kHeader + "\n" + row("many", "megatron"), "t.csv", "analytic", {});
    ADD_FAILURE() << "vpp `many` was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, "vpp") << e.what();
  }

  const auto ds = validate_runs_text(kHeader + "\n" + row("auto", "deepspeed"), "t.csv",
                                     "analytic", {});
  ASSERT_TRUE(ds[0].error_message.empty()) << ds[0].error_message;
  EXPECT_EQ(ds[0].assumed.at("vpp").rfind("1 (auto: no interleaved count", 0), 0u);
  const auto ds1 = validate_runs_text(kHeader + "\n" + row("1", "deepspeed"), "t.csv",
                                      "analytic", {});
  EXPECT_EQ(*ds[0].predicted.iter_s, *ds1[0].predicted.iter_s);
}

// A Llama-3-405B-shaped row (126 layers on 16 stages, vpp auto): the interleaved candidates get
// the first and last stage one layer fewer, as Llama 3 placed them, and interleaving wins.
TEST(ValidationRuns, UnevenLayersAreSplitForTheInterleavedSearch) {
  const std::string row =
      "l,The Llama 3 Herd of Models (2024) Table 4,h100-sxm,bf16,,16384,126,16384,128,8,53248,"
      "8192,128256,8,16,128,auto,1,1,1,2048,2,none,nemo,,,,400,\n";
  const ValidationRow r = only_row(row);
  EXPECT_EQ(r.assumed.at("stage_layers").rfind("7 on the first and the last stage, 8 on", 0), 0u);
  // vpp 1 to 8 were all candidates: 8 is Llama 3's own layout (§3.3.2), one layer per chunk,
  // the end stages' end chunks holding only the embedding and only the output layer. It is
  // also the fastest here (half the bubble of 4; the pipeline sends stay inside the 1:1 fabric).
  EXPECT_NE(r.assumed.at("vpp").find("of vpp 1, 2, 3, 4, 5, 6, 7, 8)"), std::string::npos)
      << r.assumed.at("vpp");
  EXPECT_EQ(r.assumed.at("vpp").rfind("8 ", 0), 0u) << r.assumed.at("vpp");
}

// A given interleaving whose chunks the layers do not fill evenly takes the same end-stage rule
// (Megatron-Bridge's Llama 3.1 405B: 126 layers over PP 8 × VP 8, the embedding and the loss
// counted as layers of the first and the last chunk): exactly the two scenario keys.
TEST(ValidationRuns, UnevenLayersAreSplitForAGivenInterleaving) {
  const std::string row =
      "l,NeMo 2025,h100-sxm,bf16,,1024,126,16384,128,8,53248,8192,128256,8,8,8,8,2,1,1,512,,"
      "none,nemo,,,,400,\n";
  const ValidationRow r = only_row(row);
  EXPECT_EQ(r.assumed.at("stage_layers").rfind("15 on the first and the last stage, 16 on", 0), 0u)
      << r.assumed.at("stage_layers");
  ValidationOptions stated;
  stated.set["parallel.first_stage_layers"] = "15";
  stated.set["parallel.last_stage_layers"] = "15";
  const ValidationRow s = only_row(row, stated);
  EXPECT_EQ(*s.predicted.iter_s, *r.predicted.iter_s);
  EXPECT_EQ(s.assumed.count("stage_layers"), 0u);
}

// The MLP is read from the FFN width: GQA with ffn = 4·hidden (Falcon 180B, Nemotron-4 340B)
// keeps a two-matrix MLP; ffn ≠ 4·hidden (Llama: 3.25·hidden) is a gated SwiGLU.
TEST(ValidationRuns, MlpFollowsTheFfnWidthNotGqa) {
  const auto row = [](const std::string& kv, const std::string& ffn) {
    return "r,a 2024 report,h100-sxm,bf16,,64,8,4096,32," + kv + "," + ffn +
           ",4096,32000,8,1,8,,1,1,1,64,,,nemo,,,,400,\n";
  };
  const auto model_of = [&](const std::string& kv, const std::string& ffn) {
    const auto r = validate_runs_text(kHeader + "\n" + row(kv, ffn), "t.csv", "analytic", {});
    EXPECT_TRUE(r[0].error_message.empty()) << r[0].error_message;
    const auto it = r[0].assumed.find("model");
    return it == r[0].assumed.end() ? std::string("(none)") : it->second;
  };
  EXPECT_EQ(model_of("8", "16384").rfind("two-matrix MLP", 0), 0u);
  EXPECT_NE(model_of("8", "16384").find("kv_heads < heads"), std::string::npos);
  EXPECT_EQ(model_of("8", "13312").rfind("SwiGLU", 0), 0u);
  EXPECT_EQ(model_of("32", "13312").rfind("SwiGLU", 0), 0u);
  EXPECT_EQ(model_of("32", "13312").find("kv_heads"), std::string::npos);
  EXPECT_EQ(model_of("32", "16384"), "(none)");  // GPT-3-like: the schema's GeLU block
}

// What people write in the `gpu` and `system` cells: GPU spellings of a preset, a framework
// preset, family or repository name as the system. The same run whichever way it is written.
TEST(ValidationRuns, GpuAndSystemCellsTakeCommonSpellings) {
  EXPECT_EQ(canonical_gpu("h100-sxm"), "h100-sxm");
  EXPECT_EQ(canonical_gpu("H100"), "h100-sxm");
  EXPECT_EQ(canonical_gpu("NVIDIA H100 SXM5 80GB"), "h100-sxm");
  EXPECT_EQ(canonical_gpu("A100_SXM4_80GB"), "a100-80gb");
  EXPECT_EQ(canonical_gpu("NVIDIA GB200"), "gb200");
  EXPECT_EQ(canonical_gpu("gb200-186gb"), "gb200");
  EXPECT_EQ(canonical_gpu("GB200 192GB"), "");
  EXPECT_EQ(canonical_gpu("NVIDIA GB300"), "gb300");
  // As nvidia-smi prints them (the memory type dropped), and the rack-scale systems' names.
  EXPECT_EQ(canonical_gpu("NVIDIA H100 80GB HBM3"), "h100-sxm");
  EXPECT_EQ(canonical_gpu("NVIDIA B300 SXM6 AC"), "b300");
  EXPECT_EQ(canonical_gpu("B300"), "b300");
  EXPECT_EQ(canonical_gpu("GB200 NVL72"), "gb200");
  EXPECT_EQ(canonical_gpu("gb300-nvl72"), "gb300");
  EXPECT_EQ(canonical_gpu("H100 NVL"), "");  // a PCIe card, another GPU
  EXPECT_EQ(canonical_gpu("h200"), "h200-sxm");
  EXPECT_EQ(canonical_gpu("a100-40gb"), "a100-40gb");  // a preset of its own
  EXPECT_EQ(canonical_gpu("NVIDIA A100-SXM4-40GB"), "a100-40gb");
  EXPECT_EQ(canonical_gpu("A100 80GB"), "a100-80gb");
  EXPECT_EQ(canonical_gpu("a100-64gb"), "");  // a memory size no preset has
  EXPECT_EQ(canonical_gpu("h100-141gb"), "");
  EXPECT_EQ(canonical_gpu("H800"), "h800");
  EXPECT_EQ(canonical_gpu("NVIDIA B200"), "b200");
  EXPECT_EQ(canonical_gpu("b200-180gb"), "b200");
  EXPECT_EQ(canonical_gpu("a100-99999999999999gb"), "");  // not a size: no overflow either
  EXPECT_EQ(canonical_gpu("h100-pcie-80gb"), "");
  EXPECT_EQ(canonical_gpu("h100-pcie"), "");
  EXPECT_EQ(canonical_gpu("mi300x"), "");

  const auto run = [](const std::string& gpu, const std::string& system,
                      const std::string& framework) {
    const std::string row = "r,a 2024 report," + gpu +
                            ",bf16,,64,8,4096,32,8,13312,4096,32000,8,1,8,,1,1,1,64,,," + system +
                            ",,,,400,," + framework + "\n";
    const auto r = validate_runs_text(kHeader + ",framework\n" + row, "t.csv", "analytic", {});
    EXPECT_TRUE(r[0].error_message.empty()) << r[0].error_message;
    return r[0];
  };
  const auto given = run("h100-sxm", "megatron", "torchtitan-2024");
  for (const auto& [gpu, system] : std::vector<std::pair<std::string, std::string>>{
           {"H100", "torchtitan"}, {"h100", "torchtitan-2024"}, {"H100 SXM", "TorchTitan"}}) {
    const auto r = run(gpu, system, "");
    EXPECT_EQ(*r.predicted.iter_s, *given.predicted.iter_s) << gpu << " " << system;
    EXPECT_EQ(r.assumed.at("framework").rfind("torchtitan-2024", 0), 0u) << system;
  }
  const auto core = run("h100-sxm", "Megatron-Core", "");
  EXPECT_EQ(*core.predicted.iter_s, *run("h100-sxm", "megatron", "").predicted.iter_s);
  // Megatron-DeepSpeed (BLOOM, MT-NLG) is the deepspeed system; NeMo Megatron is NeMo.
  EXPECT_EQ(*run("h100-sxm", "Megatron-DeepSpeed", "").predicted.iter_s,
            *run("h100-sxm", "deepspeed", "").predicted.iter_s);
  EXPECT_EQ(*run("h100-sxm", "NeMo_Megatron", "").predicted.iter_s,
            *run("h100-sxm", "nemo", "").predicted.iter_s);
  // LLM Foundry by its repository, trainer or company name (docs/presets.md).
  const auto foundry = run("h100-sxm", "megatron", "llm-foundry-2023");
  for (const char* name : {"llm-foundry", "Composer", "MosaicML", "llm_foundry"}) {
    const auto r = run("h100-sxm", name, "");
    EXPECT_EQ(*r.predicted.iter_s, *foundry.predicted.iter_s) << name;
    EXPECT_EQ(r.assumed.at("framework").rfind("llm-foundry-2023", 0), 0u) << name;
  }
  EXPECT_THROW(run("h100-sxm", "jax", ""), Error);
  // A blank system beside a framework cell is that framework's, not "the plain Megatron-LM
  // baseline" it used to say; the levers (and the result) are the framework preset's either way.
  const auto blank_system = run("h100-sxm", "", "torchtitan-2024");
  EXPECT_EQ(*blank_system.predicted.iter_s, *given.predicted.iter_s);
  EXPECT_EQ(blank_system.assumed.at("system"),
            "none (blank: the `framework` cell's torchtitan-2024 sets the levers)");
  EXPECT_EQ(run("h100-sxm", "", "nemo-2024").assumed.at("system"),
            "nemo (blank: the family of the `framework` cell's nemo-2024)");
  EXPECT_EQ(run("h100-sxm", "", "").assumed.at("system"),
            "megatron (blank: the plain Megatron-LM baseline)");
}

// Mixture-of-experts rows (optional columns experts, top_k, moe_every): each expert is an MLP of
// the `ffn` width. Top-1 routing over 8 experts touches the dense model's MLP plus the router
// (a [hidden × experts] GEMM per MoE layer): the model FLOPs per iteration exceed the dense
// row's by exactly 3 · 2 · hidden · experts · layers · gbs · seq = 6 · 1024 · 8 · 2 · 8 · 1024.
TEST(ValidationRuns, MixtureOfExpertsColumns) {
  const std::string header = kHeader + ",experts,top_k,moe_every\n";
  const std::string cells = ",a 2024 report,h100-sxm,bf16,,8,2,1024,8,8,4096,1024,32000,1,1,8,,1,1,"
                            "1,8,,none,megatron,1.0,,,,";
  const auto rows = validate_runs_text(
      header + "dense" + cells + ",,,\n" + "moe1" + cells + ",8,1,1\n" + "moe2" + cells +
          ",8,,\n",
      "t.csv", "analytic", {});
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& r : rows) ASSERT_TRUE(r.error_message.empty()) << r.error_message;
  const auto flops = [](const ValidationRow& r) {
    return *r.predicted.tflops_gpu * 1e12 * *r.predicted.iter_s * 8;
  };
  EXPECT_NEAR(flops(rows[1]) - flops(rows[0]), 6.0 * 1024 * 8 * 2 * 8 * 1024,
              1e-9 * flops(rows[0]));
  // Blank top_k and moe_every: one expert per token, every layer; said so. Same run as moe1.
  EXPECT_EQ(rows[2].assumed.at("top_k").rfind("1 ", 0), 0u);
  EXPECT_EQ(rows[2].assumed.at("moe_every").rfind("1 ", 0), 0u);
  EXPECT_EQ(*rows[2].predicted.iter_s, *rows[1].predicted.iter_s);
  // top_k without experts names the column.
  try {
    validate_runs_text(header + "bad" + cells + ",,2,\n", "t.csv", "analytic", {});
    ADD_FAILURE() << "top_k without experts was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("experts"), std::string::npos) << e.message();
  }
}

// The optional head_dim column: Qwen-3-like heads of 128 on hidden 2,048 (32 heads, 4 KV) make
// queries 4,096 wide. Against the same row with 64-wide heads, each layer's forward per token
// gains 2·(h(q + 2kv) + qh) − 2·(h(h + 2kv') + h²) = 18,874,368 GEMM FLOPs and 4·s·(q − h) =
// 33,554,432 attention FLOPs; ×3 for the backward, × 2 layers × 8·4,096 tokens per iteration.
TEST(ValidationRuns, HeadDimColumn) {
  const std::string header = kHeader + ",head_dim\n";
  const std::string cells = ",a 2025 report,h100-sxm,bf16,,8,2,2048,32,4,768,4096,151936,1,1,8,,1,1,"
                            "1,8,,none,megatron,1.0,,,,";
  const auto rows =
      validate_runs_text(header + "q4096" + cells + ",128\n" + "q2048" + cells + ",\n", "t.csv",
                         "analytic", {});
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& r : rows) ASSERT_TRUE(r.error_message.empty()) << r.error_message;
  const auto flops = [](const ValidationRow& r) {
    return *r.predicted.tflops_gpu * 1e12 * *r.predicted.iter_s * 8;
  };
  const double per_layer_token = 3.0 * (18874368.0 + 33554432.0);
  EXPECT_NEAR(flops(rows[0]) - flops(rows[1]), per_layer_token * 2 * 8 * 4096,
              1e-9 * flops(rows[0]));
}

// The optional `set` column: scenario keys a source states that no column holds, `key=value;...`
// (BLOOM's BF16_Optimizer accumulates gradients in fp32). The same as a --set of the command for
// that row; a key with a column of its own, an unknown key or a malformed pair names the column.
TEST(ValidationRuns, SetColumnCarriesRowSettings) {
  const std::string header = kHeader + ",set\n";
  const std::string cells = ",a 2022 report,a100-80gb,bf16,,32,8,2048,16,,8192,2048,51200,2,2,8,,1,"
                            "1,1,64,1,full,deepspeed,10.0,,,,";
  const auto rows = validate_runs_text(
      header + "plain" + cells + ",\n" + "fp32acc" + cells +
          ",framework.grad_accumulation=add-fp32; model.dropout=false\n",
      "t.csv", "analytic", {});
  ASSERT_EQ(rows.size(), 2u);
  ValidationOptions global;
  global.set["framework.grad_accumulation"] = "add-fp32";
  global.set["model.dropout"] = "false";
  const auto as_global =
      validate_runs_text(header + "plain" + cells + ",\n", "t.csv", "analytic", global);
  EXPECT_EQ(*rows[1].predicted.iter_s, *as_global[0].predicted.iter_s);
  EXPECT_NE(*rows[1].predicted.iter_s, *rows[0].predicted.iter_s);
  for (const std::string bad : {"parallel.tp=4", "framework.grad_acumulation=add-fp32",
                                "framework.grad_accumulation"}) {
    try {
      validate_runs_text(header + "bad" + cells + "," + bad + "\n", "t.csv", "analytic", {});
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.where().field, "set") << e.message();
      EXPECT_EQ(e.where().line, 2) << e.message();
    }
  }
}

// Published figures no training run can have get a warning: LLaMA's 380 tokens/s per GPU on
// 2,048 GPUs written in the whole job's tokens_s column gives an MFU of 0.0x %; read per GPU
// it is (gbs·seq·380·2048 / (gbs·seq)) × FLOPs per token / (2048 · 312 TFLOP/s) = 380 ×
// FLOPs per token / 312e12, which the hint prints.
TEST(ValidationRuns, ImplausiblePublishedFiguresWarn) {
  const std::string head = "r,LLaMA (2023),a100-80gb,bf16,,2048,80,8192,64,,22016,2048,32000,"
                           "8,4,64,,1,1,1,2048,,none,megatron,,";
  const ValidationRow slip = only_row(head + "380,,,\n");
  ASSERT_EQ(slip.warnings.size(), 1u);
  EXPECT_NE(slip.warnings[0].find("below any training run's"), std::string::npos)
      << slip.warnings[0];
  const double per_gpu_mfu = *slip.published.mfu * 2048;
  EXPECT_NE(slip.warnings[0].find(fmt::format("per GPU it gives {:.1f} %", 100 * per_gpu_mfu)),
            std::string::npos)
      << slip.warnings[0];
  // The same figure as the job's tokens per second: quiet.
  EXPECT_TRUE(only_row(head + std::to_string(380 * 2048) + ",,,\n").warnings.empty());
  // A TFLOP/s above the GPU's peak.
  const ValidationRow over = only_row(head + ",,400,\n");
  ASSERT_EQ(over.warnings.size(), 1u);
  EXPECT_NE(over.warnings[0].find("above the GPUs' peak"), std::string::npos) << over.warnings[0];
}

// The precision cell names the fp8 recipe as NeMo's tables do: `fp8-cs` is current scaling,
// exactly `fp8` with training.fp8_recipe current (and slower: every cast reads its input once
// more); bare `fp8` is TE's default, delayed scaling, and says so. `full:N` in the recompute
// cell is full recompute of N layers per model chunk (here, PP 1, of the stage), exactly the two
// scenario keys.
TEST(ValidationRuns, Fp8RecipeAndBlockRecomputeCells) {
  const auto row = [](const std::string& precision, const std::string& recompute,
                      const ValidationOptions& options = {}) {
    return only_row("r,NeMo 2025,h100-sxm," + precision +
                        ",,8,32,4096,32,8,14336,8192,128256,1,1,8,,1,1,1,128,3," + recompute +
                        ",nemo,,,,725,\n",
                    options);
  };
  const auto cs = row("fp8-cs", "");
  const auto delayed = row("fp8", "");
  ValidationOptions current;
  current.set["training.fp8_recipe"] = "current";
  EXPECT_EQ(*cs.predicted.iter_s, *row("fp8", "", current).predicted.iter_s);
  EXPECT_EQ(*delayed.predicted.iter_s, *row("fp8-delayed", "").predicted.iter_s);
  EXPECT_GT(*cs.predicted.iter_s, *delayed.predicted.iter_s);
  EXPECT_EQ(cs.assumed.count("fp8_recipe"), 0u);
  EXPECT_EQ(delayed.assumed.at("fp8_recipe").rfind("delayed", 0), 0u);

  ValidationOptions block;
  block.set["training.recompute_layers"] = "5";
  const auto five = row("fp8-cs", "full:5");
  EXPECT_EQ(*five.predicted.iter_s, *row("fp8-cs", "full", block).predicted.iter_s);
  EXPECT_GT(*five.predicted.iter_s, *cs.predicted.iter_s);           // 5 layers recomputed
  EXPECT_LT(*five.predicted.iter_s, *row("fp8-cs", "full").predicted.iter_s);  // not all 32
  EXPECT_EQ(five.assumed.count("recompute"), 0u);
  // A precision that is none of these is a typo: an input error (the file stops, exit 2) naming
  // the line, the column and the spellings; it made the row "not simulable", which quietly
  // changed a file's summary.
  try {
    validate_runs_text(
        kHeader + "\nr,NeMo 2025,h100-sxm,fp8-xs,,8,32,4096,32,8,14336,8192,128256,1,1,8,,1,1,1,"
                  "128,3,,nemo,,,,725,\n",
        "t.csv", "analytic", {});
    ADD_FAILURE() << "fp8-xs accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInput);
    const std::string what = e.what();
    EXPECT_NE(what.find("t.csv:2"), std::string::npos) << what;
    EXPECT_NE(what.find("precision"), std::string::npos) << what;
    EXPECT_NE(what.find("fp8-cs"), std::string::npos) << what;
  }
  // A block-scaled recipe (the FP8-MX and NVFP4 rows of NeMo's Blackwell tables) is refused as
  // what it is: not modelled, not a typo.
  for (const char* block : {"mxfp8", "FP8-MX", "nvfp4"}) {
    const auto mx = validate_runs_text(
        kHeader + "\nr,NeMo 2025,b200," + block +
            ",,8,32,4096,32,8,14336,8192,128256,1,1,8,,1,1,1,128,3,,nemo,,,,725,\n",
        "t.csv", "analytic", {});
    ASSERT_EQ(mx.size(), 1u);
    EXPECT_NE(mx[0].error_message.find("block-scaled format"), std::string::npos)
        << mx[0].error_message;
    EXPECT_NE(mx[0].error_message.find("does not price"), std::string::npos) << block;
  }
  for (const char* bad : {"full:x", "full:0", "full:2.5"}) {
    try {
      row("fp8-cs", bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("t.csv"), std::string::npos) << what;
      EXPECT_NE(what.find("recompute"), std::string::npos) << what;
    }
  }
}

}  // namespace
// A row that publishes both a time and a FLOP rate says which FLOP convention the source counted.
// NeMo 25.09's Llama 3 8B on 8 H100 (FP8-CS): 14,079 tokens/s/GPU and 725 TFLOP/s per GPU imply
// 725e12 · 8 · (128 · 8192 / 112,632 s) = 5.40e16 FLOPs per iteration: the causal count (half the
// s × s scores) to 0.0 %, 11.1 % below the full-attention one. Read under nemo-2024's full
// convention the row warns and names causal; under nemo-2025's causal one it is quiet.
TEST(ValidationRuns, PublishedTimeAndFlopRateNameTheirConvention) {
  const std::string head =
      "id,source,gpu,precision,cluster,gpus,layers,hidden,heads,kv_heads,ffn,seq,vocab,tp,pp,dp,"
      "vpp,cp,ep,mbs,gbs,zero,recompute,system,iter_s,tokens_s,mfu,tflops_gpu,notes,framework,"
      "flops_convention\n";
  const std::string cells =
      ",NeMo 25.09 (2025),h100-sxm,fp8-cs,,8,32,4096,32,8,14336,8192,128256,1,1,8,,1,1,1,128,3,"
      "full:5,nemo,,112632,,725,,";
  const auto rows = validate_runs_text(
      head + "full" + cells + "nemo-2024,\n" + "causal" + cells + "nemo-2025,\n", "t.csv",
      "analytic", {});
  ASSERT_EQ(rows.size(), 2u);
  // The convention's warning, and (the row names nemo-2024 with zero 3) what that version
  // lacked: NeMo's parameter sharding (Megatron FSDP) came in 2025.
  ASSERT_EQ(rows[0].warnings.size(), 2u);
  EXPECT_EQ(rows[0].warnings[0].rfind("framework.preset nemo-2024 (2024-05) had no ZeRO-3", 0), 0u)
      << rows[0].warnings[0];
  EXPECT_NE(rows[0].warnings[1].find("published tflops_gpu and tokens_s imply 5.4e+16 FLOPs per "
                                     "iteration, -11.1 % from the megatron count; the causal "
                                     "convention is within 0.0 %"),
            std::string::npos)
      << rows[0].warnings[1];
  EXPECT_TRUE(rows[1].warnings.empty()) << rows[1].warnings.front();
  // Both compare the same iteration time (from tokens_s); only the TFLOP/s error differs.
  EXPECT_DOUBLE_EQ(*rows[0].published.iter_s, *rows[1].published.iter_s);
  EXPECT_NEAR(*rows[0].published.iter_s, 128.0 * 8192 / 112632, 1e-9);
}

// A row names its framework and asks for blocks that version lacked: simulated as asked, and
// the row says so; a blank framework takes a version that had them.
TEST(ValidationRuns, RowWarnsOfWhatItsFrameworkLacked) {
  const std::string llama =
      "llama-like,a blog post,h100-sxm,bf16,,64,32,4096,32,8,14336,4096,128256,1,1,64,,1,1,1,"
      "64,1,full,megatron,,,0.4,,";
  const auto stated = validate_runs_text(kHeader + ",framework\n" + llama + ",megatron-lm-2023\n",
                                         "t.csv", "analytic", {});
  ASSERT_EQ(stated.size(), 1u);
  ASSERT_TRUE(stated[0].error_message.empty()) << stated[0].error_message;
  bool warned = false;
  for (const std::string& w : stated[0].warnings) {
    warned = warned || w.find("had no rotary positions, a SwiGLU MLP, grouped-query attention, "
                              "RMSNorm") != std::string::npos;
  }
  EXPECT_TRUE(warned);
  const ValidationRow blank = only_row(llama);
  EXPECT_EQ(blank.assumed.at("framework").rfind("megatron-core-2023", 0), 0u)
      << blank.assumed.at("framework");
  for (const std::string& w : blank.warnings) {
    EXPECT_EQ(w.find(" had no "), std::string::npos) << w;
  }
}

}  // namespace trainsim::scen
