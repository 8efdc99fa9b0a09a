#include "scenarios/sweep.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <utility>

#include "scenarios/frameworks.h"
#include "scenarios/goodput_config.h"
#include "scenarios/run_config.h"
#include "scenarios/schema.h"
#include "scenarios/sizes.h"
#include "sim/core/error.h"
#include "sim/core/version.h"
#include "sim/goodput/goodput.h"

namespace trainsim::scen {
namespace {

// A key's value list is indexed by 16 bits in the plan.
constexpr std::size_t kMaxValuesPerKey = std::numeric_limits<std::uint16_t>::max();
// One range may not expand to more values than this: a typo like 1:1000000 should fail fast.
constexpr std::size_t kMaxRangeValues = 10'000;

std::string trim(std::string_view s) {
  const std::size_t b = s.find_first_not_of(" \t");
  const std::size_t e = s.find_last_not_of(" \t");
  return b == std::string_view::npos ? std::string() : std::string(s.substr(b, e - b + 1));
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t at = s.find(sep, start);
    out.emplace_back(s.substr(start, at == std::string_view::npos ? s.npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool is_numeric(const KeyDef& k) {
  return k.type == KeyType::kInt || k.type == KeyType::kFloat || k.type == KeyType::kSize;
}

const char* kRangeHint = "write A:B (every integer), A:B:S (step S) or A:B:xF (times F)";

// A range bound or step of `key`'s type, as a double (sizes and integers are exact below 2^53).
double range_number(const KeyDef& key, const std::string& text, const std::string& range,
                    const ErrorContext& where) {
  if (key.type == KeyType::kSize) return static_cast<double>(parse_size(text, where));
  const std::string t = trim(text);
  if (key.type == KeyType::kInt) {
    std::int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (t.empty() || ec != std::errc() || ptr != t.data() + t.size()) {
      throw_input(fmt::format("range `{}`: `{}` is not an integer", range, t), where, kRangeHint);
    }
    return static_cast<double>(v);
  }
  char* end = nullptr;
  const double v = t.empty() ? 0.0 : std::strtod(t.c_str(), &end);
  if (t.empty() || end != t.c_str() + t.size() || !std::isfinite(v)) {
    throw_input(fmt::format("range `{}`: `{}` is not a number", range, t), where, kRangeHint);
  }
  return v;
}

std::string range_value_text(const KeyDef& key, double v) {
  // A float range's values carry the rounding of first + i·step (0:0.3:0.1 reached
  // 0.30000000000000004): 12 significant digits drop it and keep every value a user can mean.
  if (key.type == KeyType::kFloat) return fmt::format("{:.12g}", v);
  return std::to_string(static_cast<std::int64_t>(std::llround(v)));
}

void expand_range(const KeyDef& key, const std::string& range, const ErrorContext& where,
                  std::vector<std::string>& out) {
  const std::vector<std::string> parts = split(range, ':');
  if (parts.size() < 2 || parts.size() > 3) {
    throw_input(fmt::format("`{}` is not a range", range), where, kRangeHint);
  }
  const double first = range_number(key, parts[0], range, where);
  const double last = range_number(key, parts[1], range, where);
  if (first > last) {
    throw_input(fmt::format("empty range `{}`: the first bound is above the last", range), where,
                kRangeHint);
  }
  bool geometric = false;
  double step = 1;
  if (parts.size() == 3) {
    std::string s = trim(parts[2]);
    geometric = !s.empty() && (s[0] == '*' || s[0] == 'x');
    if (geometric) s.erase(0, 1);
    step = range_number(key, s, range, where);
    if (geometric && (step <= 1 || first <= 0)) {
      throw_input(fmt::format("range `{}`: a geometric range needs a factor above 1 and a "
                              "positive start",
                              range),
                  where, kRangeHint);
    }
    if (!geometric && step <= 0) {
      throw_input(fmt::format("range `{}`: the step must be positive", range), where, kRangeHint);
    }
  }
  // Integer and size values go through int64: a bound or a step beyond 2^53 is no longer exact as
  // a double, and llround beyond 2^63 is undefined (it printed -9223372036854775808).
  constexpr double kExact = 9007199254740992.0;  // 2^53
  if (key.type != KeyType::kFloat &&
      (std::fabs(first) > kExact || std::fabs(last) > kExact || std::fabs(step) > kExact)) {
    throw_input(fmt::format("range `{}` has a bound or step beyond 2^53 (9007199254740992)",
                            range),
                where, "list the values instead (" + where.file + " KEY=A,B,C)");
  }
  // Float steps accumulate rounding: a value above the bound by a relative 1e-9 still counts.
  const double slack = key.type == KeyType::kFloat ? 1e-9 * std::max(1.0, std::fabs(last)) : 0.0;
  std::size_t count = 0;
  for (std::size_t i = 0;; ++i) {
    const double v = geometric ? first * std::pow(step, static_cast<double>(i))
                               : first + step * static_cast<double>(i);
    if (v > last + slack || !std::isfinite(v)) break;
    const double value = std::min(v, last);  // within the slack: the bound itself
    if (++count > kMaxRangeValues) {
      throw_input(fmt::format("range `{}` gives more than {} values", range, kMaxRangeValues),
                  where, "use a step (A:B:S) or a geometric range (A:B:x2)");
    }
    out.push_back(normalize_value(key, range_value_text(key, value), where));
  }
}

// ---- --auto -------------------------------------------------------------------------------------

std::vector<int> divisors(std::int64_t n) {
  std::vector<int> out;
  for (std::int64_t d = 1; d <= n; ++d) {
    if (n % d == 0) out.push_back(static_cast<int>(d));
  }
  return out;
}

// Interns the values of each column so that a point is a row of small indices (numbered in the
// order they first appear). Consecutive rows mostly repeat a column's value, so the last one is
// checked before the hash table.
class PlanBuilder {
 public:
  explicit PlanBuilder(SweepPlan& plan) : plan_(plan), columns_(plan.keys.size()) {
    plan_.values.assign(plan_.keys.size(), {});
  }
  void add(const std::vector<std::string>& row, std::size_t max_points) {
    if (plan_.size() >= max_points) {
      throw_input(fmt::format("the sweep has more than {} points", max_points), {"sweep", 0, ""},
                  "vary fewer keys or fewer values at a time");
    }
    for (std::size_t k = 0; k < row.size(); ++k) plan_.cells.push_back(intern(k, row[k]));
  }

 private:
  struct Column {
    std::unordered_map<std::string, std::uint16_t> index;
    int last = -1;
  };
  std::uint16_t intern(std::size_t k, const std::string& v) {
    Column& c = columns_[k];
    std::vector<std::string>& values = plan_.values[k];
    if (c.last >= 0 && values[static_cast<std::size_t>(c.last)] == v) {
      return static_cast<std::uint16_t>(c.last);
    }
    const auto [it, added] = c.index.emplace(v, static_cast<std::uint16_t>(values.size()));
    if (added) values.push_back(v);
    c.last = it->second;
    return it->second;
  }
  SweepPlan& plan_;
  std::vector<Column> columns_;
};

// Calls `visit` with each row --auto adds (auto_keys() columns, in order); returns how many.
std::size_t for_each_auto_row(const Scenario& base,
                              const std::function<void(const std::vector<std::string>&)>& visit) {
  const int gpus = base.cluster.gpus;
  const model::ModelConfig& m = base.model;
  const auto given = base.given.find("parallel.schedule");
  const bool flat_schedule =
      given != base.given.end() && (given->second == "gpipe" || given->second == "1f1b");
  // None, the framework's selective recompute (framework.selective_recompute), full.
  const std::string& selective = base.values.at("framework.selective_recompute");
  std::vector<const char*> recompute = {"none"};
  if (selective == "attention") recompute.push_back("selective");
  if (selective == "op") recompute.push_back("selective-op");
  recompute.push_back("full");
  std::size_t rows = 0;
  for (const int tp : divisors(gpus)) {
    if (tp > m.heads) continue;
    for (const int pp : divisors(gpus / tp)) {
      if (pp > m.layers) continue;
      for (const int cp : divisors(gpus / tp / pp)) {
        if (cp > m.seq_len / 2 && cp > 1) continue;
        const int dp = gpus / tp / pp / cp;
        std::vector<int> eps = {1};
        if (m.experts > 0) {
          for (const int ep : divisors(dp)) {
            if (ep > 1 && ep <= m.experts) eps.push_back(ep);
          }
        }
        std::vector<int> vpps = {1};
        if (!flat_schedule && pp > 1 && m.layers % pp == 0) {
          for (const int v : divisors(m.layers / pp)) {
            if (v > 1) vpps.push_back(v);
          }
        }
        for (const int ep : eps) {
          for (const int vpp : vpps) {
            const std::string sched = vpp > 1 ? "interleaved" : flat_schedule ? given->second : "1f1b";
            for (const int mb : {1, 2, 4, 8}) {
              for (const char* rc : recompute) {
                for (int zero = 0; zero <= (dp > 1 ? 3 : 0); ++zero) {
                  visit({std::to_string(tp), std::to_string(pp), std::to_string(dp),
                         std::to_string(cp), std::to_string(ep), std::to_string(vpp), sched,
                         std::to_string(mb), rc, std::to_string(zero)});
                  ++rows;
                }
              }
            }
          }
        }
      }
    }
  }
  return rows;
}

// ---- encoding -----------------------------------------------------------------------------------

char status_code(PointStatus s) {
  switch (s) {
    case PointStatus::kOk:
      return 'o';
    case PointStatus::kInfeasible:
      return 'i';
    case PointStatus::kInvalid:
      return 'v';
  }
  return '?';
}

// Tabs and newlines separate fields and records; messages never need them.
std::string one_line(std::string s) {
  for (char& c : s) {
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

// The numeric fields of a result in their encoded order; R is PointResult or const PointResult.
template <typename R>
auto numbers_of(R& r) {
  auto& b = r.breakdown;
  return std::array{&r.iteration_time_s,
                    &r.tokens_per_s,
                    &r.mfu,
                    &r.hfu,
                    &r.tflops_per_gpu,
                    &r.memory_peak_bytes,
                    &r.memory_capacity_bytes,
                    &r.nvlink_utilization,
                    &r.nic_utilization,
                    &b.compute_s,
                    &b.exposed_tp_s,
                    &b.exposed_cp_s,
                    &b.exposed_ep_s,
                    &b.exposed_pp_s,
                    &b.exposed_dp_s,
                    &b.pipeline_bubble_s,
                    &b.optimizer_s,
                    &b.data_loading_s,
                    &b.gpu_variation_s,
                    &b.global_sync_s,
                    &r.ettr,
                    &r.ettr_ci95,
                    &r.goodput_tokens_per_day,
                    &r.interruptions,
                    &r.checkpoint_interval_s,
                    &r.checkpoint_blocking_s,
                    &r.restart_s,
                    &r.lost_share,
                    &r.checkpoint_share,
                    &r.restart_share,
                    &r.recovery_share,
                    &r.slow_share};
}

template <typename T>
bool parse_field(const std::string& s, T& v) {
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return !s.empty() && ec == std::errc() && ptr == s.data() + s.size();
}

// FNV-1a, 64 bits: a stable hash that needs no library.
struct Fnv {
  std::uint64_t h = 1469598103934665603ull;
  void add(std::string_view s) {
    for (const char c : s) {
      h ^= static_cast<unsigned char>(c);
      h *= 1099511628211ull;
    }
    h ^= 0xff;  // separator, so that ("ab","c") and ("a","bc") differ
    h *= 1099511628211ull;
  }
};

const char* kCheckpointMagic = "trainsim-sweep-checkpoint 1";

}  // namespace

// ---- parsing ------------------------------------------------------------------------------------

SweepAxis parse_vary(const std::string& arg, const std::string& flag) {
  const std::size_t eq = arg.find('=');
  if (eq == std::string::npos) {
    throw_input("`" + flag + " " + arg + "` has no `=`", {flag, 0, trim(arg)},
                fmt::format("write {0} key.path=VALUES, e.g. {0} parallel.pp=1,2,4,8{1}", flag,
                            flag == "--vary" ? " or --vary parallel.pp=1:64" : ""));
  }
  SweepAxis axis;
  axis.key = trim(std::string_view(arg).substr(0, eq));
  const ErrorContext where{flag, 0, axis.key};
  const KeyDef* key = find_key(axis.key);
  if (key == nullptr) {
    if (is_section(axis.key)) {
      throw_input("is a section, not a key", where, "see `trainsim explain " + axis.key + "`");
    }
    throw_input("unknown key", where, suggest_key(axis.key));
  }
  const std::string spec = trim(std::string_view(arg).substr(eq + 1));
  if (spec.empty()) {
    throw_input(flag == "--vary" ? "no values to sweep" : "no values to compare", where,
                "give a list (" + flag + " " + axis.key + "=1,2,4) or a range (1:64, 1:64:x2)");
  }
  std::vector<std::string> values;
  for (const std::string& item : split(spec, ',')) {
    const std::string v = trim(item);
    if (v.empty()) throw_input(fmt::format("empty value in the list `{}`", spec), where);
    if (is_numeric(*key) && v.find(':') != std::string::npos) {
      expand_range(*key, v, where, values);
    } else {
      values.push_back(normalize_value(*key, v, where));
    }
  }
  for (const std::string& v : values) {
    if (std::find(axis.values.begin(), axis.values.end(), v) == axis.values.end()) {
      axis.values.push_back(v);
    }
  }
  if (axis.values.size() > kMaxValuesPerKey) {
    throw_input(fmt::format("{} values; a sweep takes at most {} per key", axis.values.size(),
                            kMaxValuesPerKey),
                where);
  }
  return axis;
}

GpuHourPrice parse_gpu_hour_price(const std::string& text) {
  const ErrorContext where{"--gpu-hour-price", 0, ""};
  const char* hint =
      "write the price of one GPU for one hour with its currency, e.g. 2.5USD, "
      "2.5 EUR/h or $2.5/gpu-hour";
  std::string s = trim(text);
  if (s.empty()) throw_input("no price given", where, hint);
  const std::size_t slash = s.find('/');
  if (slash != std::string::npos) {
    const std::string per = lower(trim(std::string_view(s).substr(slash + 1)));
    static const char* kHour[] = {"h",      "hr",       "hour",    "gpu-h", "gpuh",
                                  "gpu-hr", "gpu-hour", "gpuhour", "gpu h", "gpu hour"};
    if (std::find(std::begin(kHour), std::end(kHour), per) == std::end(kHour)) {
      throw_input(fmt::format("`{}` is not a price per GPU-hour (it is per `{}`)", text, per),
                  where, hint);
    }
    s = trim(std::string_view(s).substr(0, slash));
  }
  static const std::pair<const char*, const char*> kSymbols[] = {
      {"$", "USD"}, {"\xE2\x82\xAC", "EUR"}, {"\xC2\xA3", "GBP"}, {"\xC2\xA5", "JPY"}};
  GpuHourPrice price;
  for (const auto& [symbol, code] : kSymbols) {
    const std::string sym = symbol;
    if (s.rfind(sym, 0) == 0) {
      price.currency = code;
      s = trim(std::string_view(s).substr(sym.size()));
      break;
    }
    if (s.size() > sym.size() && s.compare(s.size() - sym.size(), sym.size(), sym) == 0) {
      price.currency = code;
      s = trim(std::string_view(s).substr(0, s.size() - sym.size()));
      break;
    }
  }
  if (price.currency.empty()) {
    // A code before or after the number: three letters.
    std::size_t b = 0;
    while (b < s.size() && std::isalpha(static_cast<unsigned char>(s[b]))) ++b;
    std::size_t e = s.size();
    while (e > b && std::isalpha(static_cast<unsigned char>(s[e - 1]))) --e;
    const std::string code = b > 0 ? s.substr(0, b) : s.substr(e);
    if (code.empty()) throw_input(fmt::format("`{}` has no currency", text), where, hint);
    if (code.size() != 3 || (b > 0 && e < s.size())) {
      throw_input(fmt::format("`{}`: `{}` is not a currency code", text, code), where,
                  "use a three-letter code such as USD or EUR, or $, €, £, ¥");
    }
    for (const char c : code) {
      price.currency += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    s = trim(std::string_view(s).substr(b, e - b));
  }
  char* end = nullptr;
  const double amount = s.empty() ? 0.0 : std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(amount)) {
    throw_input(fmt::format("`{}`: `{}` is not an amount", text, s), where, hint);
  }
  if (amount <= 0) throw_input(fmt::format("`{}`: the price must be positive", text), where);
  price.amount = amount;
  return price;
}

const char* to_string(RankBy r) {
  switch (r) {
    case RankBy::kMfu:
      return "mfu";
    case RankBy::kTokensPerS:
      return "tokens_per_s";
    case RankBy::kCost:
      return "cost";
    case RankBy::kGoodput:
      return "goodput";
  }
  return "?";
}

const char* to_string(PointStatus s) {
  switch (s) {
    case PointStatus::kOk:
      return "ok";
    case PointStatus::kInfeasible:
      return "infeasible";
    case PointStatus::kInvalid:
      return "invalid";
  }
  return "?";
}

// ---- the plan -----------------------------------------------------------------------------------

std::map<std::string, std::string> SweepPlan::flat_values(std::size_t point) const {
  std::map<std::string, std::string> flat = base_given;
  for (std::size_t k = 0; k < keys.size(); ++k) flat[keys[k]] = value(point, k);
  return flat;
}

std::string SweepPlan::label(std::size_t point) const {
  std::string out;
  for (std::size_t k = 0; k < keys.size(); ++k) {
    if (!out.empty()) out += ' ';
    const std::size_t dot = keys[k].rfind('.');
    out += keys[k].substr(dot == std::string::npos ? 0 : dot + 1) + "=" + value(point, k);
  }
  return out;
}

const std::vector<std::string>& auto_keys() {
  static const std::vector<std::string> kKeys = {
      "parallel.tp",        "parallel.pp",  "parallel.dp",       "parallel.cp",
      "parallel.ep",        "parallel.vpp", "parallel.schedule", "training.micro_batch",
      "training.recompute", "parallel.zero"};
  return kKeys;
}

SweepPlan plan_sweep(const Scenario& base, const SweepSpec& spec, std::size_t max_points) {
  if (!spec.auto_parallel && spec.axes.empty()) {
    throw_input("nothing to sweep", {"sweep", 0, ""},
                "give --vary KEY=VALUES (repeatable) or --auto");
  }
  SweepPlan plan;
  plan.source = base.source;
  // What the base states itself, as it states it: neither what its presets (model, cluster,
  // framework) set, which a point that changes the preset must not inherit, nor what its `auto`
  // keys resolved to, which a point resolves for itself.
  plan.base_given = base.given;
  if (spec.auto_parallel) plan.keys = auto_keys();
  for (const SweepAxis& axis : spec.axes) {
    if (std::find(plan.keys.begin(), plan.keys.end(), axis.key) != plan.keys.end()) {
      const bool by_auto = spec.auto_parallel && std::find(auto_keys().begin(), auto_keys().end(),
                                                           axis.key) != auto_keys().end();
      throw_input(by_auto ? "is chosen by --auto" : "is given to --vary twice",
                  {"--vary", 0, axis.key},
                  by_auto ? "drop this --vary or --auto" : "merge the two value lists");
    }
    plan.keys.push_back(axis.key);
  }

  std::size_t product = 1;
  for (const SweepAxis& axis : spec.axes) {
    if (axis.values.empty()) throw_input("no values to sweep", {"--vary", 0, axis.key});
    product *= axis.values.size();
    if (product > max_points) {
      throw_input(fmt::format("the sweep has more than {} points", max_points), {"sweep", 0, ""},
                  "vary fewer keys or fewer values at a time");
    }
  }
  PlanBuilder builder(plan);
  std::vector<std::size_t> at(spec.axes.size(), 0);
  std::vector<std::string> full;
  // Each --auto row (or one empty row) times the axes, odometer-style: the first axis slowest.
  const auto emit = [&](const std::vector<std::string>& row) {
    std::fill(at.begin(), at.end(), 0);
    while (true) {
      full = row;
      for (std::size_t a = 0; a < spec.axes.size(); ++a) full.push_back(spec.axes[a].values[at[a]]);
      builder.add(full, max_points);
      std::size_t a = spec.axes.size();
      while (a > 0 && ++at[a - 1] == spec.axes[a - 1].values.size()) at[--a] = 0;
      if (a == 0) break;
    }
  };
  const std::size_t auto_points = spec.auto_parallel ? for_each_auto_row(base, emit) : 0;
  if (!spec.auto_parallel) emit({});

  // The base configuration: the point whose every value is the base scenario's.
  std::vector<int> base_index(plan.keys.size(), -1);
  for (std::size_t k = 0; k < plan.keys.size(); ++k) {
    // The value the base resolved (dp: a number) or, failing that, the one it states (auto).
    const auto& vals = plan.values[k];
    auto it = std::find(vals.begin(), vals.end(), base.values.at(plan.keys[k]));
    const auto stated = base.given.find(plan.keys[k]);
    if (it == vals.end() && stated != base.given.end()) {
      it = std::find(vals.begin(), vals.end(), stated->second);
    }
    if (it != vals.end()) base_index[k] = static_cast<int>(it - vals.begin());
  }
  const std::size_t width = plan.keys.size();
  for (std::size_t p = 0; p < plan.size(); ++p) {
    bool same = true;
    for (std::size_t k = 0; k < width && same; ++k) {
      same = base_index[k] == static_cast<int>(plan.cells[p * width + k]);
    }
    if (same) {
      plan.base_point = p;
      break;
    }
  }

  std::vector<std::string> parts;
  if (spec.auto_parallel) {
    parts.push_back(fmt::format(
        "--auto: TP×PP×DP×CP×EP factorizations of {} GPUs × micro-batch × vpp × recompute × ZeRO "
        "({} points)",
        base.cluster.gpus, auto_points));
  }
  for (const SweepAxis& axis : spec.axes) {
    parts.push_back(fmt::format("{} ({} values)", axis.key, axis.values.size()));
  }
  plan.description = fmt::format("{}", fmt::join(parts, " × "));
  return plan;
}

// ---- encoding -----------------------------------------------------------------------------------

std::string encode_point(std::size_t index, const PointResult& r) {
  std::string out =
      fmt::format("{}\t{}\t{}\t{}", index, status_code(r.status), r.gpus, r.microbatches);
  for (const double* v : numbers_of(r)) out += fmt::format("\t{}", *v);
  out += '\t';
  out += one_line(r.field);
  out += '\t';
  out += one_line(r.reason);
  return out;
}

bool decode_point(const std::string& line, std::size_t& index, PointResult& r) {
  const std::vector<std::string> f = split(line, '\t');
  PointResult out;
  const auto numbers = numbers_of(out);
  if (f.size() != 4 + numbers.size() + 2 || f[1].size() != 1) return false;
  std::size_t i = 0;
  if (!parse_field(f[0], i) || !parse_field(f[2], out.gpus) || !parse_field(f[3], out.microbatches))
    return false;
  switch (f[1][0]) {
    case 'o':
      out.status = PointStatus::kOk;
      break;
    case 'i':
      out.status = PointStatus::kInfeasible;
      break;
    case 'v':
      out.status = PointStatus::kInvalid;
      break;
    default:
      return false;
  }
  for (std::size_t n = 0; n < numbers.size(); ++n) {
    if (!parse_field(f[4 + n], *numbers[n])) return false;
  }
  out.field = f[4 + numbers.size()];
  out.reason = f[5 + numbers.size()];
  index = i;
  r = std::move(out);
  return true;
}

// ---- evaluation ---------------------------------------------------------------------------------

namespace {

// Runs `count` items in chunks of `chunk` taken from a shared counter, on up to `jobs` threads
// (the calling one included; no more than there are chunks). Each thread calls `make_body()` once
// (its own scratch) and then body(begin, end) per chunk. The first exception stops the others
// from taking more and is rethrown after the join.
template <class MakeBody>
void on_threads(std::size_t count, std::size_t chunk, int jobs, MakeBody make_body) {
  std::atomic<std::size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto work = [&] {
    try {
      auto body = make_body();
      for (std::size_t i0 = next.fetch_add(chunk); i0 < count; i0 = next.fetch_add(chunk)) {
        body(i0, std::min(count, i0 + chunk));
      }
    } catch (...) {
      const std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      next = count;
    }
  };
  const std::size_t chunks = (count + chunk - 1) / chunk;
  const int threads_wanted = static_cast<int>(std::min<std::size_t>(
      static_cast<std::size_t>(std::max(1, jobs)), std::max<std::size_t>(1, chunks)));
  std::vector<std::thread> threads;
  for (int t = 1; t < threads_wanted; ++t) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

// What a sweep keeps of a run's result.
PointResult point_result(const exec::Result& r) {
  PointResult out;
  out.gpus = r.gpus;
  out.microbatches = r.microbatches;
  out.memory_peak_bytes = r.memory.peak_bytes;
  out.memory_capacity_bytes = r.memory.capacity_bytes;
  if (!r.memory.fits()) {
    // Timings of a configuration that cannot run are not results; only the memory is kept.
    out.status = PointStatus::kInfeasible;
    out.reason = exec::memory_shortfall_message(r.memory);
    return out;
  }
  out.iteration_time_s = r.iteration_time_s;
  out.tokens_per_s = r.tokens_per_s;
  out.mfu = r.mfu;
  out.hfu = r.hfu;
  out.tflops_per_gpu = r.tflops_per_gpu;
  out.nvlink_utilization = r.network.nvlink_utilization;
  out.nic_utilization = r.network.nic_utilization;
  out.breakdown = r.breakdown;
  return out;
}

// A point that cannot be built or run: its status, key and reason.
PointResult failed_point(ErrorKind kind, std::string field, const std::string& message,
                         const std::string& hint) {
  PointResult out;
  out.status = kind == ErrorKind::kInput ? PointStatus::kInvalid : PointStatus::kInfeasible;
  out.field = one_line(std::move(field));
  out.reason = one_line(hint.empty() ? message : message + " (" + hint + ")");
  return out;
}
PointResult failed_point(const Error& e) {
  return failed_point(e.kind(), e.where().field, e.message(), e.hint());
}

}  // namespace

PointEvaluator::PointEvaluator(const SweepPlan& plan, const Scenario& base,
                               std::optional<GoodputSweep> goodput)
    : plan_(plan), goodput_(goodput) {
  // Only a pure --auto plan: its points set every key the shortcut handles, and nothing else.
  // The goodput run reads the point's whole scenario, so it never takes the shortcut.
  if (plan.keys != auto_keys() || goodput_) return;
  // Activation offloading refuses any recompute in the resolver (scenario.cpp), which the
  // shortcut does not check: such a base takes the resolver for every point.
  if (base.training.cpu_offload_layers > 0) return;
  shortcut_ = true;
  base_config_ = make_run_config(base);
  // A point states training.recompute; its recompute_layers is the base's only where the base
  // gives it (a `recompute: auto` base derived its own for its own configuration, which the
  // resolver does not carry to a point: there it is the schema's 0, every layer).
  if (plan.base_given.count("training.recompute_layers") == 0) {
    base_config_.training.recompute_layers = 0;
  }
  base_gpus_ = base.cluster.gpus;
  // A base of ZeRO-2/3 with CP had its shard group derived as dp_cp (scenario.cpp,
  // build_parallel); a point resolves it again for its own ZeRO and CP.
  const auto origin = base.origin.find("framework.shard_group");
  base_shard_over_cp_ = base_config_.parallel.shard_over_cp &&
                        !(origin != base.origin.end() && origin->second == "derived");
  shard_group_stated_ = plan.base_given.count("framework.shard_group") > 0;
  // Each column's values are decoded once here, not once per point.
  numbers_.resize(plan.keys.size());
  for (const std::size_t k : {0, 1, 2, 3, 4, 5, 7, 9}) {
    for (const std::string& text : plan.values[k]) {
      int v = 0;
      numbers_[k].push_back(parse_field(text, v) ? v : kNotNumber);
    }
  }
  for (const std::string& schedule : plan.values[6]) {
    schedules_.push_back(schedule == "interleaved" ? plan::Schedule::kInterleaved
                         : schedule == "gpipe"     ? plan::Schedule::kGpipe
                                                   : plan::Schedule::k1F1B);
  }
  for (const std::string& recompute : plan.values[8]) {
    recomputes_.push_back(recompute == "full"           ? model::Recompute::kFull
                          : recompute == "selective"    ? model::Recompute::kSelective
                          : recompute == "selective-op" ? model::Recompute::kSelectiveOp
                                                        : model::Recompute::kNone);
  }
}

Scenario PointEvaluator::scenario_of(std::size_t point) const {
  return build_scenario(plan_.flat_values(point), fmt::format("sweep point {}", point));
}

// What build_scenario does with the --auto keys when the point states all of them with
// TP·PP·DP·CP equal to the GPU count: it copies them into the parallel and training structs
// (vpp and the schedule agree by construction, so nothing is derived) and leaves every other
// setting as the base scenario resolved it. Sets exactly those fields of `cfg` (a copy of the
// base config) and returns true; points outside that case (false) go through the resolver.
bool PointEvaluator::shortcut_config(std::size_t point, exec::RunConfig& cfg) const {
  const std::uint16_t* cell = &plan_.cells[point * plan_.keys.size()];
  std::int64_t v[10] = {};  // auto_keys() columns; 6 and 8 are not numbers
  for (const std::size_t k : {0, 1, 2, 3, 4, 5, 7, 9}) {
    v[k] = numbers_[k][cell[k]];
    if (v[k] == kNotNumber) return false;
  }
  if (v[0] * v[1] * v[2] * v[3] != base_gpus_) return false;
  // ZeRO-2/3 with CP shards over DP·CP: left to its default or the preset, the shard group
  // follows the reduction as the resolver derives it (its note is not part of a point's
  // result); a stated `dp` is refused by the resolver, which names the field.
  const bool derive_dp_cp = v[9] >= 2 && v[3] > 1 && !base_shard_over_cp_;
  if (derive_dp_cp && shard_group_stated_) return false;
  plan::ParallelConfig& p = cfg.parallel;
  p.shard_over_cp = base_shard_over_cp_ || derive_dp_cp;
  p.tp = static_cast<int>(v[0]);
  p.pp = static_cast<int>(v[1]);
  p.dp = static_cast<int>(v[2]);
  p.cp = static_cast<int>(v[3]);
  p.ep = static_cast<int>(v[4]);
  p.vpp = static_cast<int>(v[5]);
  p.zero = static_cast<int>(v[9]);
  p.schedule = schedules_[cell[6]];
  cfg.training.micro_batch = static_cast<int>(v[7]);
  cfg.training.recompute = recomputes_[cell[8]];
  return true;
}

PointResult PointEvaluator::evaluate(std::size_t point) const {
  if (!shortcut_) return evaluate_with(point, nullptr);
  exec::RunConfig scratch = base_config_;
  return evaluate_with(point, &scratch);
}

PointResult PointEvaluator::evaluate(std::size_t point, exec::RunConfig& scratch) const {
  return evaluate_with(point, shortcut_ ? &scratch : nullptr);
}

PointResult PointEvaluator::evaluate_with(std::size_t point, exec::RunConfig* scratch) const {
  PointResult out;
  try {
    exec::AnalyticOptions options;
    options.enforce_memory = false;
    exec::Result r;
    std::optional<Scenario> s;
    if (scratch != nullptr && shortcut_config(point, *scratch)) {
      // An infeasible point without an exception (the same field and reason), and no timings
      // for one that does not fit in memory (point_result keeps only its memory).
      options.timings_when_not_fitting = false;
      plan::Infeasibility why;
      if (!exec::try_run_analytic(*scratch, options, r, why)) {
        return failed_point(ErrorKind::kInfeasible, why.field, why.message, why.hint);
      }
    } else {
      s = scenario_of(point);
      r = run_scenario(*s, make_run_config(*s), options);
    }
    out = point_result(r);
    if (!out.ok()) return out;
    if (goodput_) add_goodput(*s, out);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kRuntime) throw;
    out = failed_point(e);
  }
  return out;
}

// The goodput Monte Carlo of one feasible point, as `trainsim goodput` runs it for the point's
// scenario (its configured interval; no interval search), on this thread: the sweep's threads
// and ranks already split the points, and trial i's result depends only on (seed, i).
void PointEvaluator::add_goodput(const Scenario& s, PointResult& out) const {
  const GoodputSetup g = goodput_setup(s, goodput_->days);
  const auto trials =
      goodput::run_trials(g.params, 0, static_cast<std::uint64_t>(goodput_->trials), 1);
  const goodput::Summary sum = goodput::summarize(g.params, trials);
  const goodput::TimeSplit& t = sum.mean_split;
  const double total = t.total();
  auto share = [total](double x) { return total > 0 ? x / total : 0.0; };
  out.ettr = sum.ettr.mean;
  out.ettr_ci95 = sum.ettr.ci95;
  out.goodput_tokens_per_day = out.tokens_per_s * 86400.0 * sum.ettr.mean;
  out.interruptions = sum.mean_interruptions;
  out.checkpoint_interval_s = g.params.interval_s;
  out.checkpoint_blocking_s = g.params.checkpoint_blocking_s;
  out.restart_s = g.params.relaunch_s + g.params.comm_init_s + g.params.checkpoint_load_s;
  out.lost_share = share(t.lost_s);
  out.checkpoint_share = share(t.checkpoint_s);
  out.restart_share = share(t.restart_s);
  out.recovery_share = share(t.detection_s + t.diagnosis_s + t.repair_s);
  out.slow_share = share(t.slow_s);
}

void PointEvaluator::evaluate_full(std::size_t point, Scenario& scenario, exec::Result& result,
                                   calib::Profile& profile) const {
  scenario = scenario_of(point);
  const exec::RunConfig cfg = make_run_config(scenario);
  result = run_scenario(scenario, cfg);
  profile = cfg.profile;
}

// ---- ranking ------------------------------------------------------------------------------------

std::optional<double> SweepOutcome::cost_per_mtok_of(const PointResult& r) const {
  if (!spec.price || !r.ok() || r.tokens_per_s <= 0) return std::nullopt;
  return spec.price->amount * r.gpus / 3600.0 / r.tokens_per_s * 1e6;
}

std::optional<double> SweepOutcome::cost_per_mtok(std::size_t point) const {
  return cost_per_mtok_of(results[point]);
}

double SweepOutcome::metric_of(const PointResult& r) const {
  switch (spec.rank_by) {
    case RankBy::kMfu:
      return r.mfu;
    case RankBy::kTokensPerS:
      return r.tokens_per_s;
    case RankBy::kCost:
      return cost_per_mtok_of(r).value_or(std::numeric_limits<double>::infinity());
    case RankBy::kGoodput:
      return r.goodput_tokens_per_day;
  }
  return 0;
}

double SweepOutcome::metric(std::size_t point) const { return metric_of(results[point]); }

void refine_sweep(SweepOutcome& o, std::size_t k,
                  const std::string& fidelity,
                  const std::function<void(std::size_t, std::size_t)>& progress, int jobs) {
  if (fidelity != "flow" && fidelity != "schedule") {
    throw_input("`" + fidelity + "` is not a finer fidelity to refine with", {"--refine-fidelity", 0, ""},
                "use flow or schedule");
  }
  o.refine_fidelity = fidelity;
  o.refined.clear();
  const std::size_t n = std::min(k, o.feasible);
  o.refine_top = n;
  // The scenario's own configuration is re-run too when it ranks below the top K: the finer
  // fidelity's yardstick (is the analytic leader still ahead of what the scenario runs now?).
  const bool add_base = n > 0 && o.base_rank && *o.base_rank > n;
  std::vector<std::size_t> ranks;
  for (std::size_t r = 0; r < n; ++r) ranks.push_back(r + 1);
  if (add_base) ranks.push_back(*o.base_rank);
  // Each point is its own simulation (its scenario, network and executor), reading only the
  // outcome's plan and analytic results: up to `jobs` run at once, each written to its own
  // place, so the list (and the order below) does not depend on the threads.
  const auto refine_point = [&](std::size_t analytic_rank) {
    RefinedPoint rp;
    rp.point = o.order[analytic_rank - 1];
    rp.analytic_rank = analytic_rank;
    rp.base = o.plan.base_point == rp.point;
    std::map<std::string, std::string> flat = o.plan.flat_values(rp.point);
    flat["simulation.fidelity"] = fidelity;
    try {
      auto s = std::make_shared<const Scenario>(
          build_scenario(flat, fmt::format("sweep point {}", rp.point)));
      const exec::RunConfig cfg = make_run_config(*s);
      auto full = std::make_shared<const exec::Result>(run_scenario(*s, cfg));
      rp.result = point_result(*full);
      rp.scenario = std::move(s);
      rp.full = std::move(full);
      rp.profile = std::make_shared<const calib::Profile>(cfg.profile);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kRuntime) throw;
      rp.result = failed_point(e);
    }
    if (rp.result.ok() && o.spec.goodput) {
      // The Monte Carlo's ETTR and shares are the analytic point's; the tokens are the run's.
      const PointResult& a = o.results[rp.point];
      PointResult& x = rp.result;
      x.ettr = a.ettr;
      x.ettr_ci95 = a.ettr_ci95;
      x.interruptions = a.interruptions;
      x.checkpoint_interval_s = a.checkpoint_interval_s;
      x.checkpoint_blocking_s = a.checkpoint_blocking_s;
      x.restart_s = a.restart_s;
      x.lost_share = a.lost_share;
      x.checkpoint_share = a.checkpoint_share;
      x.restart_share = a.restart_share;
      x.recovery_share = a.recovery_share;
      x.slow_share = a.slow_share;
      x.goodput_tokens_per_day = x.tokens_per_s * 86400.0 * x.ettr;
    }
    return rp;
  };
  o.refined.assign(ranks.size(), RefinedPoint{});
  std::mutex progress_mutex;
  std::size_t done = 0;
  on_threads(ranks.size(), 1, jobs, [&] {
    return [&](std::size_t i0, std::size_t i1) {
      for (std::size_t i = i0; i < i1; ++i) {
        o.refined[i] = refine_point(ranks[i]);
        const std::lock_guard<std::mutex> lock(progress_mutex);
        if (progress) progress(++done, ranks.size());
      }
    };
  });
  // The same total order as the analytic ranking: the better metric, then the analytic rank.
  const bool lower_is_better = o.spec.rank_by == RankBy::kCost;
  auto key = [&](const RefinedPoint& p) {
    const double m = o.metric_of(p.result);
    return std::isnan(m) ? -std::numeric_limits<double>::infinity() : lower_is_better ? -m : m;
  };
  std::stable_sort(o.refined.begin(), o.refined.end(),
                   [&](const RefinedPoint& a, const RefinedPoint& b) {
                     if (a.result.ok() != b.result.ok()) return a.result.ok();
                     if (!a.result.ok()) return a.analytic_rank < b.analytic_rank;
                     const double ka = key(a), kb = key(b);
                     if (ka != kb) return ka > kb;
                     return a.analytic_rank < b.analytic_rank;
                   });
  for (std::size_t r = 0; r < o.refined.size(); ++r) {
    o.refined[r].refined_rank = o.refined[r].result.ok() ? r + 1 : 0;
  }
}

void rank_outcome(SweepOutcome& o) {
  std::vector<std::size_t> feasible, other;
  for (std::size_t i = 0; i < o.results.size(); ++i) {
    (o.results[i].ok() ? feasible : other).push_back(i);
  }
  const bool lower_is_better = o.spec.rank_by == RankBy::kCost;
  std::vector<double> key(o.results.size(), 0.0);
  for (const std::size_t i : feasible) {
    const double m = o.metric(i);
    key[i] = std::isnan(m) ? -std::numeric_limits<double>::infinity() : lower_is_better ? -m : m;
  }
  // A total order: the better metric first, then the lower point index.
  std::sort(feasible.begin(), feasible.end(), [&](std::size_t a, std::size_t b) {
    if (key[a] != key[b]) return key[a] > key[b];
    return a < b;
  });
  o.feasible = feasible.size();
  o.base_rank.reset();
  if (o.plan.base_point) {
    const auto it = std::find(feasible.begin(), feasible.end(), *o.plan.base_point);
    if (it != feasible.end()) o.base_rank = static_cast<std::size_t>(it - feasible.begin()) + 1;
  }
  o.framework_rank.reset();
  for (std::size_t r = 0; r < feasible.size(); ++r) {
    if (o.within_framework(feasible[r])) {
      o.framework_rank = r + 1;
      break;
    }
  }
  o.order = std::move(feasible);
  o.order.insert(o.order.end(), other.begin(), other.end());
}

namespace {
// The point's value of a parallel key the framework limits, or the scenario's where the sweep
// does not vary it.
int point_value(const SweepPlan& plan, std::size_t point, std::string_view key, int base) {
  for (std::size_t k = 0; k < plan.keys.size(); ++k) {
    if (plan.keys[k] != key) continue;
    const std::string& v = plan.value(point, k);
    int x = base;
    std::from_chars(v.data(), v.data() + v.size(), x);
    return x;
  }
  return base;
}
}  // namespace

bool SweepOutcome::within_framework(std::size_t point) const {
  if (framework.preset.empty()) return true;
  return point_value(plan, point, "parallel.zero", base_zero) <= framework.max_zero &&
         (framework.context_parallel || point_value(plan, point, "parallel.cp", base_cp) <= 1) &&
         (framework.interleaved_pp || point_value(plan, point, "parallel.vpp", base_vpp) <= 1);
}

std::string SweepOutcome::framework_lacks(std::size_t point) const {
  if (within_framework(point)) return "";
  std::string lacks;
  const auto add = [&](const std::string& what) { lacks += (lacks.empty() ? "" : ", ") + what; };
  const int zero = point_value(plan, point, "parallel.zero", base_zero);
  if (zero > framework.max_zero) {
    add(fmt::format("ZeRO {} (its highest is {})", zero, framework.max_zero));
  }
  if (!framework.context_parallel && point_value(plan, point, "parallel.cp", base_cp) > 1) {
    add("context parallelism");
  }
  if (!framework.interleaved_pp && point_value(plan, point, "parallel.vpp", base_vpp) > 1) {
    add("an interleaved pipeline");
  }
  return lacks;
}

std::string sweep_fingerprint(const SweepPlan& plan, const std::optional<GoodputSweep>& goodput) {
  Fnv f;
  f.add(kVersion);
  f.add(exec::kAnalyticModelVersion);
  if (goodput) f.add(fmt::format("goodput {} days {} trials", goodput->days, goodput->trials));
  for (const auto& [k, v] : plan.base_given) {
    f.add(k);
    f.add(v);
  }
  for (std::size_t k = 0; k < plan.keys.size(); ++k) {
    f.add(plan.keys[k]);
    for (const std::string& v : plan.values[k]) f.add(v);
  }
  f.add(std::string_view(reinterpret_cast<const char*>(plan.cells.data()),
                         plan.cells.size() * sizeof(plan.cells[0])));
  return fmt::format("{:016x}", f.h);
}

// ---- the run ------------------------------------------------------------------------------------

namespace {

// Reads the results a checkpoint file holds. Only complete lines count: a crash can cut the last
// one short. Returns the byte length of the valid content (the header and complete lines).
std::size_t read_checkpoint(const std::string& path, const std::string& fingerprint,
                            std::size_t points, std::vector<PointResult>& results,
                            std::vector<char>& have) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return 0;
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  if (text.empty()) return 0;
  const std::string header = fmt::format("{} {} {}", kCheckpointMagic, fingerprint, points);
  const std::size_t first_end = text.find('\n');
  // A header cut short by an interrupted first write: nothing was recorded yet.
  if (first_end == std::string::npos && header.compare(0, text.size(), text) == 0) return 0;
  const std::string first = text.substr(0, first_end);
  if (first.rfind(kCheckpointMagic, 0) != 0) {
    throw_input("is not a sweep checkpoint file", {path, 1, ""},
                "give a new file to --checkpoint, or delete this one");
  }
  if (first != header) {
    throw_input(
        "belongs to a different sweep (another scenario, other --vary values or another "
        "trainsim version)",
        {path, 1, ""}, "delete it or give another file to --checkpoint");
  }
  std::size_t valid = first_end + 1;
  int line_no = 1;
  for (std::size_t start = valid; start < text.size();) {
    const std::size_t end = text.find('\n', start);
    if (end == std::string::npos) break;  // cut short by an interrupted write
    ++line_no;
    std::size_t index = 0;
    PointResult r;
    if (!decode_point(text.substr(start, end - start), index, r) || index >= points) {
      throw_input("is damaged: a line in the middle is not a point result", {path, line_no, ""},
                  "delete it to start the sweep again");
    }
    results[index] = std::move(r);
    have[index] = 1;
    start = end + 1;
    valid = start;
  }
  return valid;
}

// Evaluates `points` on `jobs` threads (the calling one included). Threads take chunks of
// consecutive points from a shared counter (few atomic operations, neighbouring results written
// by one thread) and reuse one run config each (PointEvaluator::evaluate with a scratch).
void evaluate_block(const std::vector<std::size_t>& points, const PointEvaluator& evaluator,
                    int jobs, std::vector<PointResult>& out) {
  out.assign(points.size(), {});
  const std::size_t chunk = std::clamp<std::size_t>(
      points.size() / (static_cast<std::size_t>(std::max(1, jobs)) * 16), 1, 64);
  on_threads(points.size(), chunk, jobs, [&] {
    exec::RunConfig scratch;
    if (evaluator.shortcut()) scratch = evaluator.base_config();
    return [&, scratch = std::move(scratch)](std::size_t i0, std::size_t i1) mutable {
      for (std::size_t i = i0; i < i1; ++i) out[i] = evaluator.evaluate(points[i], scratch);
    };
  });
}

}  // namespace

void check_goodput_spec(const SweepSpec& spec) {
  if (!spec.goodput) {
    if (spec.rank_by == RankBy::kGoodput) {
      throw_input("ranking by goodput needs the goodput run", {"--rank-by", 0, ""},
                  "add --goodput (with --days and --trials)");
    }
    for (const SweepAxis& axis : spec.axes) {
      if (axis.key.rfind("reliability.", 0) == 0) {
        throw_input(
            "changes only the goodput of a whole run, which this sweep does not compute: every "
            "point would give the same result",
            {"--vary", 0, axis.key}, "add --goodput (with --days and --trials)");
      }
    }
    return;
  }
  goodput::check_request(spec.goodput->trials, spec.goodput->days, {"--trials", 0, ""},
                         {"--days", 0, ""});
}

SweepOutcome run_sweep(const Scenario& base, SweepPlan plan, const SweepSpec& spec,
                       const SweepOptions& options, SweepTransport& transport) {
  check_goodput_spec(spec);
  if (base.fidelity != "analytic") {
    throw_input("a sweep ranks its points at analytic fidelity, not `" + base.fidelity + "`",
                origin_of(base, "simulation.fidelity"),
                "leave simulation.fidelity at `analytic` and re-run the top K points at `" +
                    (base.fidelity == "schedule" ? std::string("schedule") : std::string("flow")) +
                    "` fidelity with --refine K --refine-fidelity " +
                    (base.fidelity == "schedule" ? std::string("schedule") : std::string("flow")));
  }
  SweepOutcome o;
  o.plan = std::move(plan);
  o.spec = spec;
  {
    const exec::RunConfig cfg = make_run_config(base);
    o.calibration = fmt::format("{} v{}", cfg.profile.name, cfg.profile.version);
  }
  const std::size_t n = o.plan.size();
  const bool root = transport.rank() == 0;
  const int ranks = transport.size();
  std::vector<PointResult> results(n);
  std::vector<char> have(n, 0);
  const std::string fingerprint = sweep_fingerprint(o.plan, spec.goodput);
  std::size_t valid_bytes = 0;
  if (!options.checkpoint.empty()) {
    valid_bytes = read_checkpoint(options.checkpoint, fingerprint, n, results, have);
  }
  std::vector<std::size_t> pending;
  for (std::size_t i = 0; i < n; ++i) {
    if (!have[i]) pending.push_back(i);
  }
  o.resumed = n - pending.size();
  // Every rank has read the checkpoint before rank 0 starts writing to it.
  transport.gather(std::string());

  std::ofstream checkpoint;
  if (root && !options.checkpoint.empty()) {
    if (valid_bytes == 0) {
      std::ofstream(options.checkpoint, std::ios::binary | std::ios::trunc)
          << fmt::format("{} {} {}\n", kCheckpointMagic, fingerprint, n);
    } else {
      std::filesystem::resize_file(options.checkpoint, valid_bytes);
    }
    checkpoint.open(options.checkpoint, std::ios::binary | std::ios::app);
    if (!checkpoint) {
      throw Error(ErrorKind::kRuntime, "cannot write the checkpoint file",
                  {options.checkpoint, 0, ""});
    }
  }

  const auto start = std::chrono::steady_clock::now();
  SweepProgress progress{o.resumed, n, o.resumed, 0.0};
  if (root && options.progress) options.progress(progress);
  const PointEvaluator evaluator = options.shortcut ? PointEvaluator(o.plan, base, spec.goodput)
                                                    : PointEvaluator(o.plan, spec.goodput);
  const std::size_t block = std::max<std::size_t>(1, options.block);
  std::vector<std::size_t> mine;
  std::vector<PointResult> mine_results;
  for (std::size_t b0 = 0; b0 < pending.size(); b0 += block) {
    const std::size_t b1 = std::min(pending.size(), b0 + block);
    // Strided, so that expensive neighbours (one layout's many choices) spread over the ranks.
    mine.clear();
    for (std::size_t p = b0 + static_cast<std::size_t>(transport.rank()); p < b1;
         p += static_cast<std::size_t>(ranks)) {
      mine.push_back(pending[p]);
    }
    evaluate_block(mine, evaluator, std::max(1, options.jobs), mine_results);
    std::string encoded;
    if (ranks > 1 || checkpoint.is_open()) {
      for (std::size_t i = 0; i < mine.size(); ++i) {
        encoded += encode_point(mine[i], mine_results[i]);
        encoded += '\n';
      }
    }
    std::vector<std::string> gathered =
        ranks > 1 ? transport.gather(encoded) : std::vector<std::string>{encoded};
    if (!root) continue;
    for (std::size_t i = 0; i < mine.size(); ++i) results[mine[i]] = std::move(mine_results[i]);
    for (int r = 1; r < ranks; ++r) {
      std::istringstream lines(gathered[static_cast<std::size_t>(r)]);
      for (std::string line; std::getline(lines, line);) {
        std::size_t index = 0;
        PointResult pr;
        if (!decode_point(line, index, pr) || index >= n) {
          throw Error(ErrorKind::kRuntime, fmt::format("rank {} sent a malformed sweep result", r));
        }
        results[index] = std::move(pr);
      }
    }
    if (checkpoint.is_open()) {
      for (const std::string& part : gathered) checkpoint << part;
      checkpoint.flush();
      if (!checkpoint) {
        throw Error(ErrorKind::kRuntime, "write failed", {options.checkpoint, 0, ""});
      }
    }
    progress.done = o.resumed + b1;
    progress.elapsed_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (options.progress) options.progress(progress);
  }
  if (!root) return o;
  o.results = std::move(results);
  // A sweep that varies the framework has no one set of limits: none are reported.
  const bool varies_framework =
      std::find(o.plan.keys.begin(), o.plan.keys.end(), "framework.preset") != o.plan.keys.end() ||
      std::find(o.plan.keys.begin(), o.plan.keys.end(), "optimizations.system") !=
          o.plan.keys.end();
  const FrameworkPreset* fw = varies_framework ? nullptr : find_framework(base.framework);
  if (fw != nullptr) {
    o.framework.preset = fw->name;
    o.framework.date = fw->date;
    o.framework.max_zero = fw->max_zero;
    o.framework.context_parallel = fw->context_parallel;
    o.framework.interleaved_pp = fw->interleaved_pp;
  }
  o.base_zero = base.parallel.zero;
  o.base_cp = base.parallel.cp;
  o.base_vpp = base.parallel.schedule == plan::Schedule::kInterleaved ? base.parallel.vpp : 1;
  rank_outcome(o);
  return o;
}

}  // namespace trainsim::scen
