// Tests of the scenario schema (scenarios/schema.h) and of size parsing (scenarios/sizes.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <utility>

#include "scenarios/schema.h"
#include "scenarios/sizes.h"
#include "sim/core/error.h"

namespace trainsim::scen {
namespace {

Error capture(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  return Error(ErrorKind::kRuntime, "no error was thrown");
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Sizes are powers of two (DESIGN.md §5): 64K = 64·2^10 = 65,536 and 8G = 8·2^30; `B`/`iB` tails
// and lower case are accepted; anything else is an input error that keeps the caller's context.
TEST(Sizes, ParsesPowerOfTwoSuffixes) {
  const ErrorContext where{"f.yaml", 3, "training.global_batch_tokens"};
  EXPECT_EQ(parse_size("8", where), 8);
  EXPECT_EQ(parse_size("64K", where), 65536);
  EXPECT_EQ(parse_size("1M", where), 1048576);
  EXPECT_EQ(parse_size("8G", where), std::int64_t{8} << 30);
  EXPECT_EQ(parse_size("2T", where), std::int64_t{2} << 40);
  EXPECT_EQ(parse_size("64KiB", where), 65536);
  EXPECT_EQ(parse_size("1mb", where), 1048576);
  EXPECT_EQ(parse_size("0", where), 0);
}

// `12Q` has no such suffix; fractions, signs, empty text and values beyond int64 are rejected too,
// each as kInput carrying the file, line and field it was given with.
TEST(Sizes, RejectsMalformedSizes) {
  const ErrorContext where{"f.yaml", 3, "training.global_batch_tokens"};
  for (const char* bad :
       {"12Q", "", "K", "-1", "1.5K", "8GG", "64 K", "9999999999999T", "99999999999999999999"}) {
    const Error e = capture([&] { parse_size(bad, where); });
    EXPECT_EQ(e.kind(), ErrorKind::kInput) << bad;
    EXPECT_EQ(e.where().file, "f.yaml") << bad;
    EXPECT_EQ(e.where().line, 3) << bad;
    EXPECT_EQ(e.where().field, "training.global_batch_tokens") << bad;
  }
}

// Formatting picks the largest suffix that divides exactly, so parse(format(x)) == x.
TEST(Sizes, FormatsExactly) {
  EXPECT_EQ(format_size(65536), "64K");
  EXPECT_EQ(format_size(std::int64_t{8} << 30), "8G");
  EXPECT_EQ(format_size(1000), "1000");
  EXPECT_EQ(format_size(3072), "3K");
  EXPECT_EQ(format_size(1536), "1536");
  EXPECT_EQ(format_size(0), "0");
  for (std::int64_t v : {std::int64_t{1}, std::int64_t{3} << 20, std::int64_t{16} << 20}) {
    EXPECT_EQ(parse_size(format_size(v), {}), v);
  }
}

// DESIGN.md §6 fixes these names because users script against them; each must be declared.
// (network.congestion_control comes with the flow-level network model.)
TEST(Schema, DeclaresEveryStableKey) {
  for (const char* key : {"model.preset",
                          "model.layers",
                          "model.hidden",
                          "model.heads",
                          "model.kv_heads",
                          "model.ffn_hidden",
                          "model.vocab",
                          "model.seq_len",
                          "cluster.preset",
                          "cluster.gpu",
                          "cluster.gpus",
                          "cluster.gpus_per_node",
                          "parallel.tp",
                          "parallel.pp",
                          "parallel.dp",
                          "parallel.vpp",
                          "parallel.cp",
                          "parallel.ep",
                          "parallel.sp",
                          "parallel.zero",
                          "parallel.schedule",
                          "training.global_batch",
                          "training.micro_batch",
                          "training.precision",
                          "training.recompute",
                          "training.optimizer",
                          "optimizations.system",
                          "optimizations.tp_overlap",
                          "optimizations.pp_overlap",
                          "optimizations.dp_overlap",
                          "optimizations.efficient_operators",
                          "optimizations.async_data_pipeline",
                          "optimizations.lamb",
                          "optimizations.sliding_window",
                          "optimizations.parallel_block",
                          "network.routing.hash",
                          "network.routing.qps_per_connection",
                          "network.routing.mode",
                          "simulation.fidelity",
                          "simulation.seed",
                          "calibration.profile"}) {
    EXPECT_NE(find_key(key), nullptr) << key;
  }
}

// Every key documents itself (explain prints it) and is declared once; an enum's default is one
// of its choices; an alias never shadows a real key, or a suggestion could point away from it.
TEST(Schema, EveryKeyIsDocumentedAndUnique) {
  std::set<std::string> paths;
  for (const KeyDef& k : schema()) {
    EXPECT_FALSE(k.description.empty()) << k.path;
    EXPECT_FALSE(k.default_value.empty()) << k.path;
    EXPECT_TRUE(paths.insert(k.path).second) << "declared twice: " << k.path;
    if (k.type == KeyType::kEnum) {
      EXPECT_NO_THROW(normalize_value(k, k.default_value, {})) << k.path;
    }
  }
  for (const KeyDef& k : schema()) {
    for (const std::string& alias : k.aliases) {
      EXPECT_EQ(paths.count(alias), 0u) << alias;
    }
  }
}

// Sections are the prefixes of keys, not keys themselves.
TEST(Schema, KnowsSections) {
  EXPECT_TRUE(is_section("parallel"));
  EXPECT_TRUE(is_section("cluster"));
  EXPECT_TRUE(is_section("cluster.fabric"));
  EXPECT_FALSE(is_section("parallel.tp"));
  EXPECT_FALSE(is_section("para"));
  EXPECT_FALSE(is_section(""));
  EXPECT_EQ(find_key("parallel"), nullptr);
}

// Typos and other tools' names lead to the right key: `pipline_parallel` is one edit from the
// alias `pipeline_parallel` of parallel.pp; Megatron-LM flags map to their keys; nonsense gets
// no suggestion rather than a wrong one.
TEST(Schema, SuggestsKeys) {
  EXPECT_EQ(suggest_key("pipline_parallel"), "did you mean `parallel.pp`?");
  EXPECT_EQ(suggest_key("parallel.pipline"), "did you mean `parallel.pp`?");
  const std::pair<const char*, const char*> cases[] = {
      {"pipeline_model_parallel_size", "parallel.pp"},
      {"tensor_model_parallel_size", "parallel.tp"},
      {"tensor_parallel", "parallel.tp"},
      {"data_parallel", "parallel.dp"},
      {"micro_batch_size", "training.micro_batch"},
      {"global_batch_size", "training.global_batch"},
      {"num_layers", "model.layers"},
      {"hidden_size", "model.hidden"},
      {"num_attention_heads", "model.heads"},
      {"num_query_groups", "model.kv_heads"},
      {"ffn_hidden_size", "model.ffn_hidden"},
      {"seq_length", "model.seq_len"},
      {"sequence_parallel", "parallel.sp"},
      {"virtual_pipeline_model_parallel_size", "parallel.vpp"},
      {"model.hiden", "model.hidden"},
      {"parallel.tpp", "parallel.tp"},
      {"training.tp", "parallel.tp"},
      {"optimizations.lmab", "optimizations.lamb"},
  };
  for (const auto& [wrong, right] : cases) {
    EXPECT_EQ(suggest_key(wrong), std::string("did you mean `") + right + "`?") << wrong;
  }
  EXPECT_EQ(suggest_key("xyzzy_frobnicate"), "");
}

// Values are checked against the key's type and written canonically; the error names the
// expected type and keeps the caller's file, line and field.
TEST(Schema, NormalizesValues) {
  const KeyDef& tp = *find_key("parallel.tp");
  EXPECT_EQ(normalize_value(tp, "08", {}), "8");
  EXPECT_EQ(normalize_value(*find_key("parallel.sp"), "True", {}), "true");
  EXPECT_EQ(normalize_value(*find_key("parallel.sp"), "off", {}), "false");
  EXPECT_EQ(normalize_value(*find_key("training.precision"), "BF16", {}), "bf16");
  EXPECT_EQ(normalize_value(*find_key("parallel.dp"), "auto", {}), "auto");
  EXPECT_EQ(normalize_value(*find_key("cluster.nic_gbps"), "400.0", {}), "400");
  EXPECT_EQ(normalize_value(*find_key("training.global_batch_tokens"), "16777216", {}), "16M");

  const ErrorContext where{"s.yaml", 7, "parallel.tp"};
  for (const char* bad : {"eight", "true", "0", "-2", "8.5", ""}) {
    const Error e = capture([&] { normalize_value(tp, bad, where); });
    EXPECT_EQ(e.kind(), ErrorKind::kInput) << bad;
    EXPECT_EQ(e.where().line, 7) << bad;
    EXPECT_EQ(e.where().field, "parallel.tp") << bad;
    EXPECT_TRUE(contains(e.message(), "expected an integer")) << e.what();
  }
  const Error zero = capture([] { normalize_value(*find_key("parallel.zero"), "4", {}); });
  EXPECT_EQ(zero.kind(), ErrorKind::kInput);
  EXPECT_TRUE(contains(zero.message(), "0..3")) << zero.what();
  // An open bound: 0 is refused and shown so, (0..1]; 1 is allowed.
  const KeyDef& eff = *find_key("network.dcqcn.contended_efficiency");
  EXPECT_EQ(normalize_value(eff, "1", {}), "1");
  const Error open = capture([&] { normalize_value(eff, "0", {}); });
  EXPECT_EQ(open.kind(), ErrorKind::kInput);
  EXPECT_TRUE(contains(open.message(), "(0..1]")) << open.what();
  EXPECT_EQ(normalize_value(*find_key("model.layers"), "0", {}), "0");
  const Error schedule =
      capture([] { normalize_value(*find_key("parallel.schedule"), "interleave", {}); });
  EXPECT_EQ(schedule.kind(), ErrorKind::kInput);
  EXPECT_EQ(schedule.hint(), "did you mean `interleaved`?");
}

// did_you_mean serves enum values and preset names: a prefix of three or more letters counts.
TEST(Schema, SuggestsAmongNames) {
  EXPECT_EQ(did_you_mean("selene", {"selene-a100", "megascale-ampere"}),
            "did you mean `selene-a100`?");
  EXPECT_EQ(did_you_mean("megatorn", {"none", "megatron", "megascale"}),
            "did you mean `megatron`?");
  EXPECT_EQ(did_you_mean("qqq", {"none", "megatron"}), "");
}

// explain prints one key in full, a section as a table of its keys, everything for "", and an
// unknown name is an input error that suggests the closest key.
TEST(Schema, Explains) {
  const std::string key = explain("parallel.pp");
  EXPECT_TRUE(contains(key, "parallel.pp")) << key;
  EXPECT_TRUE(contains(key, "int >=1")) << key;
  EXPECT_TRUE(contains(key, "default:     8")) << key;
  EXPECT_TRUE(contains(key, "pipeline_model_parallel_size")) << key;

  const std::string section = explain("parallel");
  for (const char* k : {"parallel.tp", "parallel.pp", "parallel.dp", "parallel.schedule"}) {
    EXPECT_TRUE(contains(section, k)) << k;
  }
  EXPECT_FALSE(contains(section, "model.layers"));
  EXPECT_TRUE(contains(section, "KEY"));
  EXPECT_TRUE(contains(section, "DESCRIPTION"));
  EXPECT_TRUE(contains(explain("cluster.fabric"), "cluster.fabric.port_split"));

  const std::string all = explain("");
  for (const KeyDef& k : schema()) EXPECT_TRUE(contains(all, k.path)) << k.path;

  const Error e = capture([] { explain("parallel.pipline"); });
  EXPECT_EQ(e.kind(), ErrorKind::kInput);
  EXPECT_EQ(e.where().field, "parallel.pipline");
  EXPECT_EQ(e.hint(), "did you mean `parallel.pp`?");
}

}  // namespace
}  // namespace trainsim::scen
