#include "reports/validation_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <string_view>

#include "reports/summary.h"
#include "sim/core/error.h"
#include "sim/core/version.h"

namespace trainsim::reports {

using nlohmann::ordered_json;

namespace {

ordered_json opt(const std::optional<double>& v) {
  return v ? ordered_json(*v) : ordered_json(nullptr);
}

ordered_json figures(const scen::RunFigures& f) {
  return {{"iter_s", opt(f.iter_s)},
          {"tokens_s", opt(f.tokens_s)},
          {"mfu", opt(f.mfu)},
          {"tflops_gpu", opt(f.tflops_gpu)},
          {"hfu", opt(f.hfu)}};
}

std::string cell(const std::optional<double>& v, const char* f) {
  return v ? fmt::format(fmt::runtime(f), *v) : std::string("–");
}

}  // namespace

ordered_json validation_json(const std::vector<scen::ValidationRow>& rows,
                             const scen::ValidationSummary& s) {
  ordered_json j;
  j["trainsim_version"] = kVersion;
  ordered_json arr = ordered_json::array();
  for (const auto& r : rows) {
    ordered_json row;
    row["id"] = r.id;
    row["source"] = r.source;
    ordered_json assumed = ordered_json::object();
    for (const auto& [k, v] : r.assumed) assumed[k] = v;
    row["assumed"] = assumed;
    if (!r.error_message.empty()) {
      row["error_message"] = r.error_message;
      row["published"] = figures(r.published);
      arr.push_back(row);
      continue;
    }
    row["predicted"] = figures(r.predicted);
    row["breakdown"] = breakdown_json(r.predicted_breakdown);
    row["set"] = r.scenario_set;
    row["published"] = figures(r.published);
    ordered_json derived = ordered_json::array();
    for (const auto& d : r.derived) derived.push_back(d);
    row["published_derived"] = derived;
    row["warnings"] = r.warnings;
    row["error"] = {{"mfu_pts", opt(r.mfu_err_pts)},
                    {"iter_pct", opt(r.iter_err_pct)},
                    {"tflops_pct", opt(r.tflops_err_pct)}};
    arr.push_back(row);
  }
  j["rows"] = arr;
  j["summary"] = {{"rows", s.rows},
                  {"simulated", s.simulated},
                  {"mfu_rows", s.mfu_rows},
                  {"iter_rows", s.iter_rows},
                  {"median_abs_mfu_err_pts", s.median_abs_mfu_err_pts},
                  {"max_abs_mfu_err_pts", s.max_abs_mfu_err_pts},
                  {"iter_time_mape", s.iter_time_mape}};
  return j;
}

std::string validation_text(const std::vector<scen::ValidationRow>& rows,
                            const scen::ValidationSummary& s) {
  std::string o;
  o += fmt::format("{:<16} {:>9} {:>9} {:>7} {:>7} {:>7} {:>7} {:>8} {:>7} {:>7} {:>7}\n", "id",
                   "iter pred", "iter pub", "err %", "MFU pr", "MFU pub", "err pt", "TF/s pr",
                   "TF/s pb", "err %", "recomp");
  for (const auto& r : rows) {
    if (!r.error_message.empty()) {
      o += fmt::format("{:<16} cannot simulate: {}\n", r.id, r.error_message);
      continue;
    }
    std::string rc = "given";
    if (auto it = r.assumed.find("recompute"); it != r.assumed.end()) {
      rc = it->second.substr(0, it->second.find(' '));
    }
    o += fmt::format("{:<16} {:>9} {:>9} {:>7} {:>7} {:>7} {:>7} {:>8} {:>7} {:>7} {:>7}\n", r.id,
                     cell(r.predicted.iter_s, "{:.3f}"), cell(r.published.iter_s, "{:.3f}"),
                     cell(r.iter_err_pct, "{:+.1f}"), cell(r.predicted.mfu, "{:.3f}"),
                     cell(r.published.mfu, "{:.3f}"), cell(r.mfu_err_pts, "{:+.1f}"),
                     cell(r.predicted.tflops_gpu, "{:.1f}"), cell(r.published.tflops_gpu, "{:.1f}"),
                     cell(r.tflops_err_pct, "{:+.1f}"), rc);
  }
  o += fmt::format(
      "\n{} rows, {} simulated. MFU error over {} rows: median |err| {:.1f} points, max {:.1f} "
      "points. Iteration time over {} rows: MAPE {:.1f} %.\n",
      s.rows, s.simulated, s.mfu_rows, s.median_abs_mfu_err_pts, s.max_abs_mfu_err_pts,
      s.iter_rows, s.iter_time_mape);
  o += "Published values marked as derived (iteration time and MFU from a TFLOP/s figure) use the\n"
       "model's FLOP accounting; assumptions per row: --format json.\n";
  bool any_assumed = false;
  for (const auto& r : rows) any_assumed = any_assumed || !r.assumed.empty();
  if (any_assumed) {
    o += "\nassumed for blank cells:\n";
    for (const auto& r : rows) {
      if (r.assumed.empty()) continue;
      std::string line;
      for (const auto& [k, v] : r.assumed) {
        if (!line.empty()) line += "; ";
        line += k + " = " + v;
      }
      o += fmt::format("  {:<16} {}\n", r.id, line);
    }
  }
  bool any_warning = false;
  for (const auto& r : rows) any_warning = any_warning || !r.warnings.empty();
  if (any_warning) {
    o += "\nwarnings (published figures that disagree with each other or with the model, and what a row asks of a framework version that did not have it):\n";
    for (const auto& r : rows) {
      for (const std::string& w : r.warnings) o += fmt::format("  {:<16} {}\n", r.id, w);
    }
  }
  return o;
}

std::string validation_files_text(const std::vector<ValidationFile>& files,
                                  const scen::ValidationSummary& overall) {
  std::string o;
  std::size_t width = std::string_view("every file").size();
  for (const ValidationFile& f : files) width = std::max(width, f.path.size());
  for (const ValidationFile& f : files) {
    o += fmt::format("== {} ({} rows)\n", f.path, f.summary.rows);
    o += validation_text(f.rows, f.summary);
    o += "\n";
  }
  o += "files at a glance (MFU error in points over the rows with an MFU; iteration-time MAPE):\n";
  o += fmt::format("{:<{}} {:>5} {:>9} {:>7} {:>7} {:>9}\n", "file", width, "rows", "simulated",
                   "median", "max", "MAPE %");
  const auto line = [&](const std::string& name, const scen::ValidationSummary& s) {
    return fmt::format("{:<{}} {:>5} {:>9} {:>7.1f} {:>7.1f} {:>9.1f}\n", name, width, s.rows,
                       s.simulated, s.median_abs_mfu_err_pts, s.max_abs_mfu_err_pts,
                       s.iter_time_mape);
  };
  for (const ValidationFile& f : files) o += line(f.path, f.summary);
  o += line("every file", overall);
  return o;
}

nlohmann::ordered_json validation_files_json(const std::vector<ValidationFile>& files,
                                             const scen::ValidationSummary& overall) {
  ordered_json arr = ordered_json::array();
  for (const ValidationFile& f : files) {
    const ordered_json one = validation_json(f.rows, f.summary);
    ordered_json entry;
    entry["file"] = f.path;
    entry["rows"] = one["rows"];
    entry["summary"] = one["summary"];
    arr.push_back(entry);
  }
  ordered_json j;
  j["trainsim_version"] = kVersion;
  j["files"] = arr;
  j["summary"] = validation_json({}, overall)["summary"];
  return j;
}

std::string validation_groups_text(const std::vector<scen::GroupColumn>& by,
                                   const std::vector<scen::ValidationGroup>& groups) {
  std::vector<std::size_t> width;
  for (std::size_t i = 0; i < by.size(); ++i) {
    std::size_t w = by[i].column.size();
    for (const auto& g : groups) w = std::max(w, g.key[i].size());
    width.push_back(w);
  }
  std::string o = "\ngroups (MFU error in points, predicted - published; iteration-time MAPE):\n";
  for (std::size_t i = 0; i < by.size(); ++i) o += fmt::format("{:<{}}  ", by[i].column, width[i]);
  o += fmt::format("{:>5} {:>5}  {:>7} {:>7} {:>7} {:>7} {:>7}\n", "rows", "mfu", "median", "min",
                   "max", "|med|", "MAPE %");
  for (const auto& g : groups) {
    for (std::size_t i = 0; i < by.size(); ++i) o += fmt::format("{:<{}}  ", g.key[i], width[i]);
    o += fmt::format("{:>5} {:>5}  ", g.rows, g.mfu_rows);
    if (g.mfu_rows > 0) {
      o += fmt::format("{:>+7.1f} {:>+7.1f} {:>+7.1f} {:>7.1f}", g.median_mfu_err_pts,
                       g.min_mfu_err_pts, g.max_mfu_err_pts, g.median_abs_mfu_err_pts);
    } else {
      o += fmt::format("{:>7} {:>7} {:>7} {:>7}", "-", "-", "-", "-");
    }
    o += g.iter_rows > 0 ? fmt::format(" {:>7.1f}\n", g.iter_time_mape)
                         : fmt::format(" {:>7}\n", "-");
  }
  return o;
}

nlohmann::ordered_json validation_groups_json(const std::vector<scen::GroupColumn>& by,
                                              const std::vector<scen::ValidationGroup>& groups) {
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const auto& g : groups) {
    nlohmann::ordered_json key = nlohmann::ordered_json::object();
    for (std::size_t i = 0; i < by.size(); ++i) key[by[i].column] = g.key[i];
    nlohmann::ordered_json j = {{"key", key}, {"rows", g.rows}, {"mfu_rows", g.mfu_rows},
                                {"iter_rows", g.iter_rows}};
    if (g.mfu_rows > 0) {
      j["median_mfu_err_pts"] = g.median_mfu_err_pts;
      j["min_mfu_err_pts"] = g.min_mfu_err_pts;
      j["max_mfu_err_pts"] = g.max_mfu_err_pts;
      j["median_abs_mfu_err_pts"] = g.median_abs_mfu_err_pts;
    }
    if (g.iter_rows > 0) j["iter_time_mape"] = g.iter_time_mape;
    arr.push_back(std::move(j));
  }
  return arr;
}


namespace {

// A scenario key tree: leaves hold quoted values.
struct KeyNode {
  std::string value;
  bool leaf = false;
  std::map<std::string, KeyNode> children;
};

std::string quoted(const std::string& v) {
  std::string o = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o + "\"";
}

void emit(const KeyNode& n, int depth, std::string& out) {
  for (const auto& [name, child] : n.children) {
    out += std::string(static_cast<std::size_t>(2 * depth), ' ') + name + ":";
    if (child.leaf) {
      out += " " + quoted(child.value) + "\n";
    } else {
      out += "\n";
      emit(child, depth + 1, out);
    }
  }
}

std::string file_name_of(const std::string& id) {
  std::string o;
  for (char c : id) {
    o += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_') ? c : '_';
  }
  return o.empty() ? std::string("row") : o;
}

}  // namespace

int write_row_scenarios(const std::string& dir, const std::vector<scen::ValidationRow>& rows,
                        const std::string& csv) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw_input("cannot create the folder: " + ec.message(), {dir, 0, "--scenarios"});
  int written = 0;
  for (const scen::ValidationRow& r : rows) {
    if (!r.error_message.empty() || r.scenario_set.empty()) continue;
    KeyNode root;
    for (const std::string& kv : r.scenario_set) {
      const std::size_t eq = kv.find('=');
      KeyNode* node = &root;
      std::string key = kv.substr(0, eq);
      std::size_t start = 0;
      while (true) {
        const std::size_t dot = key.find('.', start);
        node = &node->children[key.substr(start, dot - start)];
        if (dot == std::string::npos) break;
        start = dot + 1;
      }
      node->leaf = true;
      node->value = kv.substr(eq + 1);
    }
    std::string text = fmt::format(
        "# Row `{}` of {} (line {}), as `trainsim validate` simulated it: its cells, its `set`,\n"
        "# the command's --set and what the searches chose (trainsim {}).\n# Source: {}\n",
        r.id, csv, r.line, kVersion, r.source);
    if (r.predicted.iter_s) {
      text += fmt::format("# Predicted: {:.6g} s per iteration, MFU {:.4f}", *r.predicted.iter_s,
                          r.predicted.mfu.value_or(0.0));
      if (r.published.iter_s) text += fmt::format("; published: {:.6g} s", *r.published.iter_s);
      text += "\n";
    }
    for (const std::string& w : r.warnings) text += "# Warning: " + w + "\n";
    emit(root, 0, text);
    const std::string path = (std::filesystem::path(dir) / (file_name_of(r.id) + ".yaml")).string();
    std::ofstream out(path);
    out << text;
    if (!out) throw_input("cannot write the scenario file", {path, 0, "--scenarios"});
    ++written;
  }
  return written;
}

}  // namespace trainsim::reports
