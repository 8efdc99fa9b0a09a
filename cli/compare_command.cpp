#include "cli/compare_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <vector>

#include "calibrate/json_input.h"
#include "cli/output.h"
#include "scenarios/schema.h"
#include "sim/core/error.h"
#include "sim/core/limits.h"
#include "sim/core/parse.h"
#include "sim/core/units.h"
#include "sim/core/version.h"

namespace trainsim::cli {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

struct Kind {
  std::string name, category;
  long count = 0;
  double total_s = 0;
};

// One result document, checked at the boundary.
struct Side {
  std::string path;
  json doc;
  std::string fidelity;
  double iteration_s = 0;
  // Peak device memory per GPU: a simulation's `memory.peak_bytes_per_gpu` (the memory model),
  // a measurement's `memory_measured.peak_bytes` (trainsim execute on a GPU); 0 when absent.
  double memory_peak = 0;
  std::vector<std::pair<std::string, double>> breakdown;  // in the document's order
  std::vector<Kind> kinds;
};

const json& field(const json& j, const std::string& key, const std::string& path,
                  const std::string& where) {
  if (!j.is_object() || !j.contains(key)) {
    throw_input("missing `" + where + "`", {path, 0, where},
                "compare result documents of `trainsim run --format json` or `trainsim execute`");
  }
  return j.at(key);
}

// Seconds and counts of a result document (docs/reliability.md): finite, >= 0, at most 1e9 (s or
// count x 1e6). A time below 1e-15 s reads as 0, so that every ratio of two is finite: such a
// time is the rounding residue of a difference of sums (execute's pipeline bubble on one GPU
// wrote 1.4e-20 s, which was refused).
constexpr double kMaxSeconds = 1e9;
constexpr double kMinSeconds = 1e-15;
constexpr double kMaxCount = 1e15;
constexpr double kMaxBytes = 1e18;  // a peak memory in bytes (an exabyte: no GPU holds more)

double number(const json& j, const std::string& key, const std::string& path,
              const std::string& where, double max = kMaxSeconds) {
  const json& v = field(j, key, path, where);
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) {
    throw_input("`" + where + "` is " + clip_name(v.dump()) + ", not a non-negative number",
                {path, 0, where});
  }
  const double x = v.get<double>();
  if (x > max) {
    throw_input(fmt::format("`{}` is {}, outside 0 to {}", where, v.dump(), max), {path, 0, where},
                "see docs/reliability.md");
  }
  return max == kMaxSeconds && x < kMinSeconds ? 0.0 : x;
}

Side load_text(std::string_view text, const std::string& path) {
  Side s;
  s.path = path;
  // (A key given twice is refused, as in a profile: "iteration_time_s" twice read the last.)
  s.doc = calib::parse_json_input(
      text, path,
      "compare result documents of `trainsim run --format json` or `trainsim execute`");
  if (!s.doc.is_object()) throw_input("not a JSON object", {path, 0, ""});
  // What produced the document: a simulation's fidelity, or execute's "real" / "fake".
  const json& fid = field(s.doc, "fidelity", path, "fidelity");
  static const char* kFidelities[] = {"analytic", "schedule", "flow", "packet", "real", "fake"};
  if (!fid.is_string() ||
      std::find(std::begin(kFidelities), std::end(kFidelities), fid.get<std::string>()) ==
          std::end(kFidelities)) {
    throw_input("`fidelity` is " + clip_name(fid.dump()) +
                    ", not one a result document has (analytic, schedule, flow, packet; real or "
                    "fake from execute)",
                {path, 0, "fidelity"});
  }
  s.fidelity = fid.get<std::string>();
  s.iteration_s = number(s.doc, "iteration_time_s", path, "iteration_time_s");
  if (s.iteration_s <= 0) {
    throw_input("`iteration_time_s` is 0: an iteration takes time, and every error of the "
                "comparison is relative to it",
                {path, 0, "iteration_time_s"},
                "compare the documents `trainsim run --format json` and `trainsim execute` write");
  }
  // A peak memory present is a positive number: 0 (or a missing part) would drop the
  // peak-memory row without a word.
  const auto peak = [&](const json& parent, const char* key, const std::string& where) {
    const double x = number(parent, key, path, where, kMaxBytes);
    if (x <= 0) {
      throw_input("`" + where + "` is 0: a GPU that ran the iteration held memory",
                  {path, 0, where}, "leave the field out when nothing was measured");
    }
    return x;
  };
  if (s.doc.contains("memory_measured")) {
    s.memory_peak = peak(field(s.doc, "memory_measured", path, "memory_measured"), "peak_bytes",
                         "memory_measured.peak_bytes");
  } else if (s.fidelity != "real" && s.doc.contains("memory")) {
    s.memory_peak = peak(s.doc["memory"], "peak_bytes_per_gpu", "memory.peak_bytes_per_gpu");
  }
  const json& b = field(s.doc, "breakdown", path, "breakdown");
  if (!b.is_object()) throw_input("`breakdown` is not an object", {path, 0, "breakdown"});
  static const char* kPlain[] = {"compute_s", "pipeline_bubble_s", "optimizer_s", "data_loading_s"};
  static const char* kDims[] = {"tp", "cp", "ep", "pp", "dp"};
  s.breakdown.emplace_back("compute_s", number(b, "compute_s", path, "breakdown.compute_s"));
  const json& ex = field(b, "exposed_comm_s", path, "breakdown.exposed_comm_s");
  for (const char* d : kDims) {
    s.breakdown.emplace_back(std::string("exposed_comm_s.") + d,
                             number(ex, d, path, std::string("breakdown.exposed_comm_s.") + d));
  }
  for (std::size_t i = 1; i < std::size(kPlain); ++i) {
    s.breakdown.emplace_back(kPlain[i],
                             number(b, kPlain[i], path, std::string("breakdown.") + kPlain[i]));
  }
  // The parts of the iteration after the slowest rank's own (run and execute write both), so
  // that the rows add up to the iteration; 0 where a document does not give them.
  for (const char* k : {"gpu_variation_s", "global_sync_s"}) {
    s.breakdown.emplace_back(
        k, b.contains(k) ? number(b, k, path, std::string("breakdown.") + k) : 0.0);
  }
  if (s.doc.contains("task_kinds")) {
    const json& tk = s.doc["task_kinds"];
    if (!tk.is_array()) throw_input("`task_kinds` is not an array", {path, 0, "task_kinds"});
    std::map<std::string, bool> seen;
    for (std::size_t i = 0; i < tk.size(); ++i) {
      const std::string where = fmt::format("task_kinds[{}]", i);
      Kind k;
      const json& name = field(tk[i], "name", path, where + ".name");
      if (!name.is_string() || name.get<std::string>().empty()) {
        throw_input("`" + where + ".name` is not a non-empty string", {path, 0, where + ".name"});
      }
      k.name = name;
      if (!seen.emplace(k.name, true).second) {
        throw_input("op kind `" + k.name + "` is listed twice", {path, 0, where + ".name"});
      }
      const json& cat = field(tk[i], "category", path, where + ".category");
      static const char* kCategories[] = {"compute", "optimizer", "data", "tp",
                                          "cp",      "ep",        "dp",   "pp"};
      if (!cat.is_string() ||
          std::find(std::begin(kCategories), std::end(kCategories), cat.get<std::string>()) ==
              std::end(kCategories)) {
        throw_input("`" + where + ".category` is " + clip_name(cat.dump()) +
                        ", not a category of a task kind (compute, optimizer, data, tp, cp, ep, "
                        "dp, pp)",
                    {path, 0, where + ".category"});
      }
      k.category = cat;
      const double count = number(tk[i], "count", path, where + ".count", kMaxCount);
      if (count != std::floor(count)) {
        throw_input(fmt::format("`{}.count` is {}, not a whole number of tasks", where,
                                tk[i]["count"].dump()),
                    {path, 0, where + ".count"});
      }
      k.count = std::lround(count);
      k.total_s = number(tk[i], "total_s", path, where + ".total_s");
      s.kinds.push_back(k);
    }
  }
  return s;
}

Side load(const std::string& path) {
  return load_text(read_input_file(path, "result file", limits::kMaxResultBytes), path);
}

// The settings that make the Program (docs/execute.md): the model, the parallel layout, the
// training settings, the optimization levers and the GPU. The framework's kernels, the network,
// the calibration and the fidelity may differ: they change how the simulator prices a task, not
// which tasks there are.
bool program_key(const std::string& key) {
  for (const char* prefix : {"model.", "parallel.", "training.", "optimizations."}) {
    if (key.rfind(prefix, 0) == 0) return true;
  }
  return key == "cluster.gpu";
}

// Runs of different models or layouts cannot be compared op by op: their settings must agree,
// and each side must state them (a document without them cannot be checked).
void check_same_job(const Side& sim, const Side& real) {
  const std::string hint = "compare a simulation and an execution of the same scenario and --set "
                           "overrides";
  const json& gs = field(sim.doc, "gpus", sim.path, "gpus");
  const json& gr = field(real.doc, "gpus", real.path, "gpus");
  if (gs != gr) {
    throw_input(fmt::format("`gpus` is {} here but {} in {}", clip_name(gr.dump()),
                            clip_name(gs.dump()), sim.path),
                {real.path, 0, "gpus"}, hint);
  }
  const json& a = field(sim.doc, "config", sim.path, "config");
  const json& b = field(real.doc, "config", real.path, "config");
  if (!a.is_object()) throw_input("`config` is not an object", {sim.path, 0, "config"});
  if (!b.is_object()) throw_input("`config` is not an object", {real.path, 0, "config"});
  // The union of both sides' keys: a key one side lacks is a difference too.
  for (const json* side : {&b, &a}) {
    for (const auto& [key, value] : side->items()) {
      if (!program_key(key)) continue;
      const bool in_sim = a.contains(key), in_real = b.contains(key);
      if (in_sim && in_real && a[key] == b[key]) continue;
      if (in_sim && in_real && a[key].is_string() != b[key].is_string()) {
        // A hand-edited record: every config value trainsim writes is a string.
        const bool real_odd = !b[key].is_string();
        const Side& odd = real_odd ? real : sim;
        throw_input(fmt::format("`config.{}` is {} here, not a string as trainsim writes every "
                                "config value ({} in {})",
                                key, clip_name((real_odd ? b : a)[key].dump()),
                                clip_name((real_odd ? a : b)[key].dump()),
                                (real_odd ? sim : real).path),
                    {odd.path, 0, "config." + key},
                    "write the value as a string, e.g. \"1\"");
      }
      if (in_sim && in_real) {
        throw_input(fmt::format("`config.{}` is {} here but {} in {}", key,
                                clip_name(b[key].dump()), clip_name(a[key].dump()), sim.path),
                    {real.path, 0, "config." + key}, hint);
      }
      // A document written before the key existed lacks it and ran its default; any other
      // value on the side that has it is a difference.
      const scen::KeyDef* def = scen::find_key(key);
      if (def && value.is_string() && value.get<std::string>() == def->default_value) continue;
      const Side& lacks = in_sim ? real : sim;
      const Side& has = in_sim ? sim : real;
      throw_input(fmt::format("`config.{}` is missing here but is {} in {}{}", key,
                              clip_name(value.dump()), has.path,
                              def ? fmt::format(", not its default \"{}\"", def->default_value)
                                  : std::string()),
                  {lacks.path, 0, "config." + key},
                  "compare documents that state the same settings");
    }
  }
}

std::optional<double> rel(double sim, double real) {
  if (real == 0) return sim == 0 ? std::optional<double>(0.0) : std::nullopt;
  return (sim - real) / real;
}

json opt(std::optional<double> x) { return x ? json(*x) : json(nullptr); }
std::string pct(std::optional<double> x) {
  return x ? fmt::format("{:+.1f} %", 100 * *x) : std::string("—");
}

struct KindRow {
  std::string name, category;
  long sim_count = 0, real_count = 0;
  double sim_s = 0, real_s = 0;
  bool in_sim = false, in_real = false;
};

struct Comparison {
  const Side* sim;
  const Side* real;
  std::vector<KindRow> kinds;       // real total descending, then sim-only kinds
  std::vector<KindRow> categories;  // same order rule
  double weighted_abs_error = 0;    // Σ|sim − real| / Σ real over op kinds
  bool has_kinds = false;
};

std::vector<KindRow> ordered(std::map<std::string, KindRow> rows) {
  std::vector<KindRow> v;
  for (auto& [_, r] : rows) v.push_back(r);
  std::stable_sort(v.begin(), v.end(), [](const KindRow& a, const KindRow& b) {
    if (a.real_s != b.real_s) return a.real_s > b.real_s;
    return a.sim_s > b.sim_s;
  });
  return v;
}

Comparison compare(const Side& sim, const Side& real) {
  Comparison c{&sim, &real, {}, {}, 0, false};
  c.has_kinds = !sim.kinds.empty() && !real.kinds.empty();
  if (!c.has_kinds) return c;
  std::map<std::string, KindRow> kinds, cats;
  for (const Kind& k : sim.kinds) {
    KindRow& r = kinds[k.name];
    r.name = k.name;
    r.category = k.category;
    r.sim_count = k.count;
    r.sim_s = k.total_s;
    r.in_sim = true;
  }
  for (const Kind& k : real.kinds) {
    KindRow& r = kinds[k.name];
    r.name = k.name;
    if (r.category.empty()) r.category = k.category;
    r.real_count = k.count;
    r.real_s = k.total_s;
    r.in_real = true;
  }
  double abs_diff = 0, real_total = 0;
  for (const auto& [name, r] : kinds) {
    abs_diff += std::abs(r.sim_s - r.real_s);
    real_total += r.real_s;
    KindRow& cat = cats[r.category];
    cat.name = cat.category = r.category;
    cat.sim_count += r.sim_count;
    cat.real_count += r.real_count;
    cat.sim_s += r.sim_s;
    cat.real_s += r.real_s;
    cat.in_sim |= r.in_sim;
    cat.in_real |= r.in_real;
  }
  c.weighted_abs_error = real_total > 0 ? abs_diff / real_total : 0;
  c.kinds = ordered(kinds);
  c.categories = ordered(cats);
  return c;
}

// `execute` runs one fused loss kernel per pass (logits read once; the backward writes the
// gradient): among framework.cross_entropy's implementations Transformer Engine's is the nearest.
// A simulation that prices another one differs from the measurement by the framework's loss,
// not by a model error: say so (docs/execute.md).
std::optional<std::string> loss_note(const Side& sim, const Side& real) {
  if (real.fidelity != "real" || !sim.doc.contains("config")) return std::nullopt;
  const json& cfg = sim.doc["config"];
  if (!cfg.is_object() || !cfg.contains("framework.cross_entropy")) return std::nullopt;
  const json& ce = cfg["framework.cross_entropy"];
  if (!ce.is_string() || ce.get<std::string>() == "te") return std::nullopt;
  return "the loss: the simulation prices framework.cross_entropy " + ce.get<std::string>() +
         ", while execute runs one fused kernel per pass (nearest: te); simulate with --set "
         "framework.cross_entropy=te to compare the same loss";
}

// Why there is no per-op comparison: the side (or sides) without task kinds, each with its
// own reason (an analytic simulation has none; a measured record should have them).
std::string no_kinds_note(const Side& sim, const Side& real) {
  std::string o = "no per-op comparison:";
  if (sim.kinds.empty()) {
    o += " " + sim.path + " has no `task_kinds` (" +
         (sim.fidelity == "analytic"
              ? "the analytic fidelity has none; simulate at schedule or flow fidelity"
              : "a simulation at schedule or flow fidelity lists them; this document lacks them") +
         ")";
  }
  if (real.kinds.empty()) {
    o += std::string(sim.kinds.empty() ? ";" : "") + " " + real.path +
         " has no `task_kinds` (" +
         (real.fidelity == "real" || real.fidelity == "fake"
              ? "the measured record lacks them: `trainsim execute` writes one per task kind "
                "of the critical rank"
              : "a result document of schedule or flow fidelity lists them") +
         ")";
  }
  return o;
}

double exposed(const Side& s) {
  double t = 0;
  for (const auto& [k, v] : s.breakdown) {
    if (k.rfind("exposed_comm_s.", 0) == 0) t += v;
  }
  return t;
}

ordered_json to_json(const Comparison& c) {
  const Side& sim = *c.sim;
  const Side& real = *c.real;
  ordered_json j;
  j["trainsim_version"] = kVersion;
  j["sim"] = {{"file", sim.path}, {"fidelity", sim.fidelity}};
  j["real"] = {{"file", real.path}, {"fidelity", real.fidelity}};
  j["iteration_time"] = {{"sim_s", sim.iteration_s},
                         {"real_s", real.iteration_s},
                         {"error", opt(rel(sim.iteration_s, real.iteration_s))}};
  if (sim.memory_peak > 0 && real.memory_peak > 0) {
    j["peak_memory"] = {{"sim_bytes", sim.memory_peak},
                        {"real_bytes", real.memory_peak},
                        {"error", opt(rel(sim.memory_peak, real.memory_peak))}};
  }
  ordered_json b = ordered_json::array();
  for (std::size_t i = 0; i < sim.breakdown.size(); ++i) {
    const double s = sim.breakdown[i].second, r = real.breakdown[i].second;
    b.push_back({{"key", sim.breakdown[i].first},
                 {"sim_s", s},
                 {"real_s", r},
                 {"diff_s", s - r},
                 {"error", opt(rel(s, r))}});
  }
  j["breakdown"] = b;
  j["exposed_comm"] = {{"sim_s", exposed(sim)},
                       {"real_s", exposed(real)},
                       {"diff_s", exposed(sim) - exposed(real)},
                       {"error", opt(rel(exposed(sim), exposed(real)))}};
  auto rows = [](const std::vector<KindRow>& v, bool kind) {
    ordered_json a = ordered_json::array();
    for (const KindRow& r : v) {
      ordered_json o;
      if (kind) o["name"] = r.name;
      o["category"] = r.category;
      o["sim_count"] = r.sim_count;
      o["real_count"] = r.real_count;
      o["sim_s"] = r.sim_s;
      o["real_s"] = r.real_s;
      o["error"] = opt(rel(r.sim_s, r.real_s));
      if (kind && !r.in_sim) o["note"] = "only measured";
      if (kind && !r.in_real) o["note"] = "only simulated";
      a.push_back(o);
    }
    return a;
  };
  j["op_kinds"] = rows(c.kinds, true);
  j["categories"] = rows(c.categories, false);
  j["summary"] = {
      {"iteration_time_error", opt(rel(sim.iteration_s, real.iteration_s))},
      {"op_kind_weighted_abs_error", c.has_kinds ? json(c.weighted_abs_error) : json(nullptr)}};
  json notes = json::array();
  if (!c.has_kinds) notes.push_back(no_kinds_note(sim, real));
  if (const auto note = loss_note(sim, real)) notes.push_back(*note);
  if (!notes.empty()) j["notes"] = notes;
  return j;
}

// Text and Markdown share the tables; Markdown adds pipes and a header rule.
struct Table {
  std::vector<std::string> head;
  std::vector<std::vector<std::string>> rows;
  std::string render(bool markdown) const {
    std::vector<std::size_t> w(head.size());
    for (std::size_t i = 0; i < head.size(); ++i) w[i] = head[i].size();
    auto width = [](const std::string& s) {  // code points, for "—" and "Σ"
      std::size_t n = 0;
      for (unsigned char ch : s) n += (ch & 0xC0) != 0x80;
      return n;
    };
    for (const auto& r : rows) {
      for (std::size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], width(r[i]));
    }
    auto line = [&](const std::vector<std::string>& r) {
      std::string o = markdown ? "|" : " ";
      for (std::size_t i = 0; i < r.size(); ++i) {
        const std::string pad(w[i] - width(r[i]), ' ');
        const std::string cell = i == 0 ? r[i] + pad : pad + r[i];  // numbers right-aligned
        o += " " + cell + (markdown ? " |" : " ");
      }
      while (!markdown && !o.empty() && o.back() == ' ') o.pop_back();
      return o + "\n";
    };
    std::string o = line(head);
    if (markdown) {
      o += "|";
      for (std::size_t i = 0; i < head.size(); ++i) {
        o += " " + std::string(w[i] - 1, '-') + (i == 0 ? "-" : ":") + " |";
      }
      o += "\n";
    }
    for (const auto& r : rows) o += line(r);
    return o;
  }
};

std::string secs(double s) { return fmt::format("{:.6f}", s); }

std::string to_text(const Comparison& c, bool markdown) {
  const Side& sim = *c.sim;
  const Side& real = *c.real;
  const std::string h = markdown ? "## " : "";
  std::string o;
  if (markdown) o += "# Simulation vs measurement\n\n";
  o += fmt::format("{}sim:  {}{}\n{}real: {}{}\n\n", markdown ? "- " : "", sim.path,
                   sim.fidelity.empty() ? "" : " (" + sim.fidelity + ")", markdown ? "- " : "",
                   real.path, real.fidelity.empty() ? "" : " (" + real.fidelity + ")");
  const std::string headline =
      fmt::format("iteration time: sim {:.6f} s, real {:.6f} s, error {}", sim.iteration_s,
                  real.iteration_s, pct(rel(sim.iteration_s, real.iteration_s)));
  o += (markdown ? "**" + headline + "**" : headline) + "\n\n";
  if (sim.memory_peak > 0 && real.memory_peak > 0) {
    const std::string mem = fmt::format(
        "peak memory per GPU: sim {:.3f} GiB, real {:.3f} GiB, error {}", sim.memory_peak / kGiB,
        real.memory_peak / kGiB, pct(rel(sim.memory_peak, real.memory_peak)));
    o += (markdown ? "**" + mem + "**" : mem) + "\n\n";
  }
  Table b{{"breakdown", "sim s", "real s", "diff s", "error"}, {}};
  for (std::size_t i = 0; i < sim.breakdown.size(); ++i) {
    const double s = sim.breakdown[i].second, r = real.breakdown[i].second;
    b.rows.push_back(
        {sim.breakdown[i].first, secs(s), secs(r), fmt::format("{:+.6f}", s - r), pct(rel(s, r))});
  }
  b.rows.push_back({"exposed communication", secs(exposed(sim)), secs(exposed(real)),
                    fmt::format("{:+.6f}", exposed(sim) - exposed(real)),
                    pct(rel(exposed(sim), exposed(real)))});
  o += h + (markdown ? "Breakdown\n\n" : "") + b.render(markdown) + "\n";
  if (!c.has_kinds) {
    o += no_kinds_note(sim, real) + "\n";
    return o;
  }
  Table cat{{"category", "sim s", "real s", "error"}, {}};
  for (const KindRow& r : c.categories) {
    cat.rows.push_back({r.category, secs(r.sim_s), secs(r.real_s), pct(rel(r.sim_s, r.real_s))});
  }
  o += h + (markdown ? "Per category\n\n" : "") + cat.render(markdown) + "\n";
  Table k{{"op kind", "category", "sim n", "real n", "sim s", "real s", "error"}, {}};
  for (const KindRow& r : c.kinds) {
    // A kind on one side only has no error to speak of (−100 % read as a measured miss).
    const std::string error = !r.in_sim    ? "only measured"
                              : !r.in_real ? "only simulated"
                                           : pct(rel(r.sim_s, r.real_s));
    k.rows.push_back({r.name, r.category, std::to_string(r.sim_count), std::to_string(r.real_count),
                      secs(r.sim_s), secs(r.real_s), error});
  }
  o += h + (markdown ? "Per op kind\n\n" : "") + k.render(markdown) + "\n";
  o += fmt::format("op kinds: weighted absolute error {:.1f} % (Σ|sim − real| / Σ real)\n",
                   100 * c.weighted_abs_error);
  if (const auto note = loss_note(sim, real)) o += "note: " + *note + "\n";
  return o;
}

}  // namespace

CLI::App* add_compare_command(CLI::App& app, CompareArgs& a) {
  CLI::App* c = app.add_subcommand(
      "compare", "Compare a simulated result with a measured one (trainsim execute)");
  c->add_option("sim", a.sim, "Simulated result: trainsim run --format json")->required();
  c->add_option("real", a.real, "Measured result: trainsim execute --out")->required();
  c->add_option("--format", a.format, "text | json | markdown")
      ->check(CLI::IsMember({"text", "json", "markdown"}));
  c->add_option("-o,--out,--output", a.output, "Write the comparison to FILE instead of stdout")
      ->check(output_file());
  return c;
}

std::string compare_texts(std::string_view sim_text, const std::string& sim_name,
                          std::string_view real_text, const std::string& real_name,
                          const std::string& format) {
  const Side sim = load_text(sim_text, sim_name);
  const Side real = load_text(real_text, real_name);
  check_same_job(sim, real);
  const Comparison c = compare(sim, real);
  return format == "json" ? to_json(c).dump(2) + "\n" : to_text(c, format == "markdown");
}

int run_compare_command(const CompareArgs& a) {
  const Side sim = load(a.sim);
  const Side real = load(a.real);
  check_same_job(sim, real);
  const Comparison c = compare(sim, real);
  write_output(a.format == "json" ? to_json(c).dump(2) + "\n" : to_text(c, a.format == "markdown"),
               a.output);
  return 0;
}

}  // namespace trainsim::cli
