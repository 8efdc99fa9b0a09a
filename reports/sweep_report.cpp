#include "reports/sweep_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>
#include <map>
#include <string_view>
#include <type_traits>

#include "sim/core/units.h"
#include "sim/core/version.h"

namespace trainsim::reports {
namespace {

using scen::PointResult;
using scen::SweepOutcome;

// Appends to a buffer that goes to the stream in large pieces: a sweep writes hundreds of
// thousands of rows, and building each field as its own std::string (then each row, then the
// stream's own locking and buffering per insertion) was most of the cost of `sweep --format json`.
class Sink {
 public:
  explicit Sink(std::ostream& out) : out_(out) {}
  Sink(const Sink&) = delete;
  Sink& operator=(const Sink&) = delete;
  ~Sink() { flush(); }

  Sink& operator<<(std::string_view s) {
    buf_.append(s);
    return *this;
  }
  Sink& operator<<(char c) {
    buf_.push_back(c);
    return *this;
  }
  // Integers as decimal (as the stream and std::to_string print them).
  template <typename I>
    requires std::is_integral_v<I>
  Sink& operator<<(I v) {
    fmt::format_to(std::back_inserter(buf_), "{}", v);
    return *this;
  }
  // A JSON string literal with the escapes JSON needs.
  void json_string(std::string_view s) {
    buf_.push_back('"');
    for (const char c : s) {
      switch (c) {
        case '"':
          buf_.append(std::string_view("\\\""));
          break;
        case '\\':
          buf_.append(std::string_view("\\\\"));
          break;
        case '\n':
          buf_.append(std::string_view("\\n"));
          break;
        case '\t':
          buf_.append(std::string_view("\\t"));
          break;
        default:
          if (static_cast<unsigned char>(c) < 0x20) {
            fmt::format_to(std::back_inserter(buf_), "\\u{:04x}", static_cast<unsigned>(c));
          } else {
            buf_.push_back(c);
          }
      }
    }
    buf_.push_back('"');
  }
  // Shortest round-trip decimal; JSON has no infinity or NaN.
  void num(double v) {
    if (std::isfinite(v)) {
      fmt::format_to(std::back_inserter(buf_), "{}", v);
    } else {
      buf_.append(std::string_view("null"));
    }
  }
  // `, "key": value` (the separator first, as every field after an object's first).
  void field(std::string_view key, double v) {
    buf_.append(std::string_view(", \""));
    buf_.append(key);
    buf_.append(std::string_view("\": "));
    num(v);
  }
  // A CSV field, quoted only when it holds a comma, a quote or a newline.
  void csv_field(std::string_view s) {
    if (s.find_first_of(",\"\n") == std::string_view::npos) {
      buf_.append(s);
      return;
    }
    buf_.push_back('"');
    for (const char c : s) {
      if (c == '"') buf_.push_back('"');
      buf_.push_back(c);
    }
    buf_.push_back('"');
  }
  // Hands the buffer to the stream once it is large (called between rows).
  void maybe_flush() {
    if (buf_.size() >= kFlushBytes) flush();
  }
  void flush() {
    out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    buf_.clear();
  }

 private:
  static constexpr std::size_t kFlushBytes = 1 << 20;
  std::ostream& out_;
  fmt::memory_buffer buf_;
};

const char* metric_name(scen::RankBy r) {
  switch (r) {
    case scen::RankBy::kMfu:
      return "MFU";
    case scen::RankBy::kTokensPerS:
      return "tokens/s";
    case scen::RankBy::kCost:
      return "cost per million tokens";
    case scen::RankBy::kGoodput:
      return "goodput (tokens per day over the whole run)";
  }
  return "?";
}

std::size_t status_count(const SweepOutcome& o, scen::PointStatus s) {
  return static_cast<std::size_t>(std::count_if(
      o.results.begin(), o.results.end(), [s](const PointResult& r) { return r.status == s; }));
}

}  // namespace

std::string move_text(const scen::RefinedPoint& r, std::size_t top) {
  if (r.refined_rank == 0) return "out";
  // The base configuration re-run beside the top `top`: its analytic rank counts every point.
  if (r.analytic_rank > top) return "base";
  if (r.refined_rank == r.analytic_rank) return "=";
  return r.refined_rank < r.analytic_rank ? fmt::format("up {}", r.analytic_rank - r.refined_rank)
                                          : fmt::format("down {}", r.refined_rank - r.analytic_rank);
}

std::string refined_text(const SweepOutcome& o) {
  const auto base = std::find_if(o.refined.begin(), o.refined.end(),
                                 [](const scen::RefinedPoint& r) { return r.base; });
  const bool base_added = base != o.refined.end() && base->analytic_rank > o.refine_top;
  std::string s = fmt::format(
      "\nrefined   the top {}{} re-run at {} fidelity and re-ranked by {}:\n",
      o.refine_top, base_added ? " and the base configuration (*)" : "", o.refine_fidelity,
      metric_name(o.spec.rank_by));
  std::vector<std::vector<std::string>> rows = {
      {"rank", "was", "move", "MFU", "analytic", "change", "iter s", "exposed comm s", "config"}};
  for (const scen::RefinedPoint& r : o.refined) {
    const PointResult& a = o.results[r.point];
    const PointResult& x = r.result;
    if (!x.ok()) {
      rows.push_back({r.base ? "-*" : "-", std::to_string(r.analytic_rank), "out", "-",
                      fmt::format("{:.1f} %", 100 * a.mfu), "-", "-", "-",
                      o.plan.label(r.point) + ": " + x.reason});
      continue;
    }
    const exec::Breakdown& b = x.breakdown;
    rows.push_back({std::to_string(r.refined_rank) + (r.base ? "*" : ""),
                    std::to_string(r.analytic_rank), move_text(r, o.refine_top),
                    fmt::format("{:.1f} %", 100 * x.mfu), fmt::format("{:.1f} %", 100 * a.mfu),
                    fmt::format("{:+.1f}", 100 * (x.mfu - a.mfu)),
                    fmt::format("{:.3f}", x.iteration_time_s),
                    fmt::format("{:.3f}", b.exposed_tp_s + b.exposed_cp_s + b.exposed_ep_s +
                                              b.exposed_pp_s + b.exposed_dp_s),
                    o.plan.label(r.point)});
  }
  std::vector<std::size_t> width(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line = " ";
    for (std::size_t c = 0; c < row.size(); ++c) {
      line += c + 1 < row.size() ? fmt::format(" {:>{}}", row[c], width[c]) : " " + row[c];
    }
    s += line + "\n";
  }
  const scen::RefinedPoint& top = o.refined.front();
  if (top.refined_rank == 1 && top.analytic_rank != 1 && top.analytic_rank <= o.refine_top) {
    s += fmt::format("(the analytic rank {} is best at {} fidelity; MFU change in points)\n",
                     top.analytic_rank, o.refine_fidelity);
  } else {
    s += fmt::format("(MFU change in points against the analytic estimate)\n");
  }
  // The yardstick: the scenario's own configuration at the same fidelity.
  if (base != o.refined.end() && base->result.ok() && top.result.ok()) {
    if (&*base == &top) {
      s += fmt::format(
          "the base configuration (*) leads at {} fidelity: no refined point beats it there\n",
          o.refine_fidelity);
    } else {
      s += fmt::format(
          "the refined leader is {:+.1f} MFU points from the base configuration (*) at {} "
          "fidelity ({:+.1f} by the analytic estimates)\n",
          100 * (top.result.mfu - base->result.mfu), o.refine_fidelity,
          100 * (o.results[top.point].mfu - o.results[base->point].mfu));
    }
  }
  return s;
}

std::string short_key(const std::string& key) {
  const std::size_t dot = key.rfind('.');
  return dot == std::string::npos ? key : key.substr(dot + 1);
}

std::string thousands(std::size_t n) {
  const std::string digits = std::to_string(n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string human(double x) {
  const double a = std::fabs(x);
  if (a >= 1e12) return fmt::format("{:.3g}T", x / 1e12);
  if (a >= 1e9) return fmt::format("{:.3g}G", x / 1e9);
  if (a >= 1e6) return fmt::format("{:.3g}M", x / 1e6);
  if (a >= 1e4) return fmt::format("{:.3g}k", x / 1e3);
  return fmt::format("{:.4g}", x);
}

std::string reason_kind(const PointResult& r) {
  std::string text = r.field.empty() ? r.reason : "`" + r.field + "`: " + r.reason;
  // Details in parentheses (memory terms, hints) stay out of the kind.
  const std::size_t paren = text.find(" (");
  if (paren != std::string::npos) text.resize(paren);
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    if (std::isdigit(static_cast<unsigned char>(text[i]))) {
      while (i < text.size() &&
             (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.' ||
              text[i] == ',' || text[i] == 'x' || text[i] == static_cast<char>(0xC3) ||
              text[i] == static_cast<char>(0x97))) {
        ++i;  // digits, decimal points and the × of TP×PP products
      }
      out += '#';
    } else {
      out += text[i++];
    }
  }
  return out;
}

std::vector<ReasonGroup> reason_groups(const SweepOutcome& o) {
  std::map<std::string, ReasonGroup> groups;
  for (std::size_t i = 0; i < o.results.size(); ++i) {
    if (o.results[i].ok()) continue;
    const std::string kind = reason_kind(o.results[i]);
    auto [it, fresh] = groups.try_emplace(kind, ReasonGroup{kind, 0, i});
    ++it->second.count;
  }
  std::vector<ReasonGroup> out;
  for (auto& [k, g] : groups) out.push_back(g);
  std::sort(out.begin(), out.end(), [](const ReasonGroup& a, const ReasonGroup& b) {
    if (a.count != b.count) return a.count > b.count;
    return a.example < b.example;
  });
  return out;
}

std::string sweep_text(const SweepOutcome& o, std::size_t top) {
  const scen::SweepPlan& p = o.plan;
  std::string s;
  s += fmt::format("trainsim {} sweep · analytic fidelity, model {} · calibration {}\n", kVersion,
                   exec::kAnalyticModelVersion, o.calibration);
  s += fmt::format("scenario  {}\n", p.source);
  s += fmt::format("points    {}: {}\n", thousands(p.size()), p.description);
  s += fmt::format(
      "result    {} feasible, {} infeasible, {} invalid; ranked by {}", thousands(o.feasible),
      thousands(status_count(o, scen::PointStatus::kInfeasible)),
      thousands(status_count(o, scen::PointStatus::kInvalid)), metric_name(o.spec.rank_by));
  if (o.spec.price) {
    s += fmt::format("; GPU-hour price {} {}", o.spec.price->amount, o.spec.price->currency);
  }
  s += "\n";
  if (o.spec.goodput) {
    s += fmt::format(
        "goodput   a {:g}-day run, {} Monte Carlo trials per feasible point (as `trainsim "
        "goodput`, at the point's own checkpoint interval)\n",
        o.spec.goodput->days, thousands(static_cast<std::size_t>(o.spec.goodput->trials)));
  }
  s += "\n";

  const std::size_t shown = std::min(top, o.feasible);
  if (o.feasible == 0) {
    s += "no feasible configuration\n";
  } else {
    std::vector<std::string> head = {"rank", "MFU", "tokens/s", "iter s", "mem GiB"};
    if (o.spec.price) head.push_back(o.spec.price->currency + "/Mtok");
    if (o.spec.goodput) {
      for (const char* h : {"ETTR", "±95%", "tokens/day", "stops"}) head.push_back(h);
    }
    const std::size_t fixed = head.size();
    for (const std::string& k : p.keys) head.push_back(short_key(k));
    std::vector<std::vector<std::string>> rows = {head};
    std::vector<std::size_t> ranks;
    for (std::size_t r = 0; r < shown; ++r) ranks.push_back(r);
    // The scenario's own configuration is always listed, below a gap when it ranks lower.
    if (o.base_rank && *o.base_rank > shown) ranks.push_back(*o.base_rank - 1);
    for (const std::size_t r : ranks) {
      const std::size_t i = o.order[r];
      const PointResult& x = o.results[i];
      std::vector<std::string> row = {std::to_string(r + 1) + (p.base_point == i ? "*" : ""),
                                      fmt::format("{:.1f} %", 100 * x.mfu), human(x.tokens_per_s),
                                      fmt::format("{:.3f}", x.iteration_time_s),
                                      fmt::format("{:.1f}", x.memory_peak_bytes / kGiB)};
      if (o.spec.price) row.push_back(fmt::format("{:.4g}", *o.cost_per_mtok(i)));
      if (o.spec.goodput) {
        row.push_back(fmt::format("{:.1f} %", 100 * x.ettr));
        row.push_back(fmt::format("{:.1f}", 100 * x.ettr_ci95));
        row.push_back(human(x.goodput_tokens_per_day));
        row.push_back(fmt::format("{:.1f}", x.interruptions));
      }
      for (std::size_t k = 0; k < p.keys.size(); ++k) row.push_back(p.value(i, k));
      rows.push_back(row);
    }
    std::vector<std::size_t> width(head.size(), 0);
    for (const auto& row : rows) {
      for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
    }
    for (std::size_t n = 0; n < rows.size(); ++n) {
      const auto& row = rows[n];
      if (n == shown + 1) s += "  ...\n";
      std::string line;
      for (std::size_t c = 0; c < row.size(); ++c) {
        // Figures align right, configuration values left.
        line += c < fixed ? fmt::format("{:>{}}  ", row[c], width[c])
                          : fmt::format("{:<{}}  ", row[c], width[c]);
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      s += line + "\n";
    }
    s += fmt::format(
        "(top {} of {} feasible; * = the scenario's own configuration; --top N for "
        "more, --format json or csv for every point)\n",
        shown, thousands(o.feasible));
    if (o.refined.empty()) {
      s += "(ranked at analytic fidelity: each collective on idle links, no ECMP; --refine K "
           "re-runs the top K and the scenario's own configuration at flow fidelity)\n";
    }
    // The leader may ask what the scenario's framework version did not have: say so, and name
    // the best point within it.
    const std::string lacks = o.framework_lacks(o.order[0]);
    if (!lacks.empty()) {
      s += fmt::format("rank 1 asks what framework.preset {} ({}) did not have: {}; ",
                       o.framework.preset, o.framework.date, lacks);
      if (o.framework_rank) {
        const std::size_t i = o.order[*o.framework_rank - 1];
        std::string config;
        for (std::size_t k = 0; k < p.keys.size(); ++k) {
          config += fmt::format("{}{}={}", k ? " " : "", short_key(p.keys[k]), p.value(i, k));
        }
        s += fmt::format("the best it can run is rank {} at {:.1f} % MFU ({})\n",
                         *o.framework_rank, 100 * o.results[i].mfu, config);
      } else {
        s += "no feasible point is within it\n";
      }
    }
  }

  if (!o.refined.empty()) s += refined_text(o);

  s += "\n";
  if (!p.base_point) {
    s += "base configuration: the scenario's own values are not among the swept points\n";
  } else {
    const std::size_t b = *p.base_point;
    const PointResult& x = o.results[b];
    if (o.base_rank) {
      const PointResult& best = o.results[o.order.front()];
      s += fmt::format(
          "base configuration ({}): rank {} of {} feasible, MFU {:.1f} % ({:+.1f} points from the "
          "best, {:.1f} %), {} tokens/s\n",
          p.label(b), *o.base_rank, thousands(o.feasible), 100 * x.mfu, 100 * (x.mfu - best.mfu),
          100 * best.mfu, human(x.tokens_per_s));
      if (o.spec.goodput) {
        // Tokens/day against the most tokens/day of any feasible point (the ranking's leader
        // only when ranking by goodput; the MFU leader may deliver fewer over the run).
        std::size_t most = 0;
        for (std::size_t r = 1; r < o.feasible; ++r) {
          if (o.results[o.order[r]].goodput_tokens_per_day >
              o.results[o.order[most]].goodput_tokens_per_day) {
            most = r;
          }
        }
        const PointResult& top = o.results[o.order[most]];
        s += fmt::format(
            "  over the run: ETTR {:.1f} % ± {:.1f}, {} tokens/day ({:+.1f} % from the most "
            "tokens/day of any point, {} at rank {})\n",
            100 * x.ettr, 100 * x.ettr_ci95, human(x.goodput_tokens_per_day),
            top.goodput_tokens_per_day > 0
                ? 100 * (x.goodput_tokens_per_day / top.goodput_tokens_per_day - 1)
                : 0.0,
            human(top.goodput_tokens_per_day), most + 1);
      }
    } else {
      s += fmt::format("base configuration ({}): {}: {}\n", p.label(b), to_string(x.status),
                       x.reason);
    }
  }

  const std::vector<ReasonGroup> groups = reason_groups(o);
  if (!groups.empty()) {
    s += "\nwhy the other points cannot run (count, kind, first example):\n";
    const std::size_t kinds = std::min<std::size_t>(groups.size(), 15);
    for (std::size_t g = 0; g < kinds; ++g) {
      const PointResult& x = o.results[groups[g].example];
      s += fmt::format("  {:>9}  {}\n", thousands(groups[g].count), groups[g].kind);
      s += fmt::format("             e.g. {}: {}{}\n", p.label(groups[g].example),
                       x.field.empty() ? "" : "`" + x.field + "`: ", x.reason);
    }
    if (groups.size() > kinds) {
      s += fmt::format("  ... and {} more kinds (--format json or csv lists every point)\n",
                       groups.size() - kinds);
    }
  }
  return s;
}

namespace {

// The timing fields a feasible point shares between "refine" and "results".
void breakdown_head(Sink& w, const PointResult& x) {
  const exec::Breakdown& b = x.breakdown;
  w << ", \"breakdown\": {\"compute_s\": ";
  w.num(b.compute_s);
  w << ", \"exposed_comm_s\": {\"tp\": ";
  w.num(b.exposed_tp_s);
  w.field("cp", b.exposed_cp_s);
  w.field("ep", b.exposed_ep_s);
  w.field("pp", b.exposed_pp_s);
  w.field("dp", b.exposed_dp_s);
  w << '}';
  w.field("pipeline_bubble_s", b.pipeline_bubble_s);
}

void refine_json(Sink& w, const SweepOutcome& o) {
  w << "  \"refine\": {\"fidelity\": ";
  w.json_string(o.refine_fidelity);
  w << ", \"top\": " << o.refine_top << ", \"points\": [";
  for (std::size_t r = 0; r < o.refined.size(); ++r) {
    const scen::RefinedPoint& rp = o.refined[r];
    const PointResult& x = rp.result;
    w << (r ? ",\n    {" : "\n    {") << "\"point\": " << rp.point
      << ", \"analytic_rank\": " << rp.analytic_rank << ", \"refined_rank\": ";
    if (rp.refined_rank) {
      w << rp.refined_rank;
    } else {
      w << "null";
    }
    w << ", \"base\": " << (rp.base ? "true" : "false");
    w << ", \"status\": \"" << to_string(x.status) << '"';
    if (x.ok()) {
      w.field("iteration_time_s", x.iteration_time_s);
      w.field("tokens_per_s", x.tokens_per_s);
      w.field("mfu", x.mfu);
      w.field("hfu", x.hfu);
      w.field("nvlink_utilization", x.nvlink_utilization);
      w.field("nic_utilization", x.nic_utilization);
      breakdown_head(w, x);
      w << '}';
      if (o.spec.goodput) w.field("goodput_tokens_per_day", x.goodput_tokens_per_day);
    } else {
      if (!x.field.empty()) {
        w << ", \"field\": ";
        w.json_string(x.field);
      }
      w << ", \"reason\": ";
      w.json_string(x.reason);
    }
    w << '}';
  }
  w << "\n  ]},\n";
}

void result_json(Sink& w, const SweepOutcome& o, std::size_t r) {
  const scen::SweepPlan& p = o.plan;
  const std::size_t i = o.order[r];
  const PointResult& x = o.results[i];
  w << (r ? ",\n    {" : "\n    {") << "\"rank\": ";
  if (x.ok()) {
    w << r + 1;
  } else {
    w << "null";
  }
  w << ", \"point\": " << i << ", \"status\": \"" << to_string(x.status) << "\", \"config\": {";
  for (std::size_t k = 0; k < p.keys.size(); ++k) {
    if (k) w << ", ";
    w.json_string(p.keys[k]);
    w << ": ";
    w.json_string(p.value(i, k));
  }
  w << '}';
  if (x.ok()) {
    const exec::Breakdown& b = x.breakdown;
    w.field("iteration_time_s", x.iteration_time_s);
    w.field("tokens_per_s", x.tokens_per_s);
    w.field("mfu", x.mfu);
    w.field("hfu", x.hfu);
    w.field("tflops_per_gpu", x.tflops_per_gpu);
    if (o.spec.price) w.field("cost_per_mtok", *o.cost_per_mtok(i));
    w << ", \"gpus\": " << x.gpus << ", \"microbatches_per_pipeline\": " << x.microbatches;
    w.field("memory_peak_bytes", x.memory_peak_bytes);
    w.field("memory_capacity_bytes", x.memory_capacity_bytes);
    w.field("nvlink_utilization", x.nvlink_utilization);
    w.field("nic_utilization", x.nic_utilization);
    breakdown_head(w, x);
    w.field("optimizer_s", b.optimizer_s);
    w.field("data_loading_s", b.data_loading_s);
    w.field("gpu_variation_s", b.gpu_variation_s);
    w.field("global_sync_s", b.global_sync_s);
    w << '}';
    if (o.spec.goodput) {
      w << ", \"goodput\": {\"ettr\": ";
      w.num(x.ettr);
      w.field("ettr_ci95", x.ettr_ci95);
      w.field("tokens_per_day", x.goodput_tokens_per_day);
      w.field("interruptions", x.interruptions);
      w.field("checkpoint_interval_s", x.checkpoint_interval_s);
      w.field("checkpoint_blocking_s", x.checkpoint_blocking_s);
      w.field("restart_s", x.restart_s);
      w << ", \"shares\": {\"training\": ";
      w.num(x.ettr);
      w.field("lost", x.lost_share);
      w.field("checkpoint", x.checkpoint_share);
      w.field("restart", x.restart_share);
      w.field("recovery", x.recovery_share);
      w.field("slow", x.slow_share);
      w << "}}";
    }
  } else {
    if (!x.field.empty()) {
      w << ", \"field\": ";
      w.json_string(x.field);
    }
    w << ", \"reason\": ";
    w.json_string(x.reason);
    if (x.memory_peak_bytes > 0) {
      w.field("memory_peak_bytes", x.memory_peak_bytes);
      w.field("memory_capacity_bytes", x.memory_capacity_bytes);
    }
  }
  w << '}';
}

}  // namespace

void write_sweep_json(std::ostream& out, const SweepOutcome& o) {
  const scen::SweepPlan& p = o.plan;
  Sink w(out);
  auto str = [&](std::string_view key, std::string_view value) {
    w << "  \"" << key << "\": ";
    w.json_string(value);
    w << ",\n";
  };
  w << "{\n";
  str("trainsim_version", kVersion);
  w << "  \"fidelity\": \"analytic\",\n";
  str("model_version", exec::kAnalyticModelVersion);
  str("calibration", o.calibration);
  str("scenario", p.source);
  str("points_description", p.description);
  w << "  \"keys\": [";
  for (std::size_t k = 0; k < p.keys.size(); ++k) {
    if (k) w << ", ";
    w.json_string(p.keys[k]);
  }
  w << "],\n";
  str("rank_by", to_string(o.spec.rank_by));
  if (o.spec.goodput) {
    w << "  \"goodput\": {\"days\": ";
    w.num(o.spec.goodput->days);
    w << ", \"trials\": " << o.spec.goodput->trials << "},\n";
  } else {
    w << "  \"goodput\": null,\n";
  }
  if (o.spec.price) {
    w << "  \"gpu_hour_price\": {\"amount\": ";
    w.num(o.spec.price->amount);
    w << ", \"currency\": ";
    w.json_string(o.spec.price->currency);
    w << "},\n";
  } else {
    w << "  \"gpu_hour_price\": null,\n";
  }
  w << "  \"summary\": {\"points\": " << p.size() << ", \"feasible\": " << o.feasible
    << ", \"infeasible\": " << status_count(o, scen::PointStatus::kInfeasible)
    << ", \"invalid\": " << status_count(o, scen::PointStatus::kInvalid) << "},\n";
  if (p.base_point) {
    w << "  \"base\": {\"point\": " << *p.base_point << ", \"rank\": ";
    if (o.base_rank) {
      w << *o.base_rank;
    } else {
      w << "null";
    }
    w << "},\n";
  } else {
    w << "  \"base\": null,\n";
  }
  if (o.framework.preset.empty()) {
    w << "  \"framework\": null,\n";
  } else {
    // What the scenario's framework version can run (a result's config says whether it asks
    // more); the best feasible point within it.
    w << "  \"framework\": {\"preset\": ";
    w.json_string(o.framework.preset);
    w << ", \"date\": ";
    w.json_string(o.framework.date);
    w << ", \"max_zero\": " << o.framework.max_zero
      << ", \"context_parallel\": " << (o.framework.context_parallel ? "true" : "false")
      << ", \"interleaved_pp\": " << (o.framework.interleaved_pp ? "true" : "false")
      << ", \"best_rank\": ";
    if (o.framework_rank) {
      w << *o.framework_rank;
    } else {
      w << "null";
    }
    w << "},\n";
  }
  if (o.refined.empty()) {
    w << "  \"refine\": null,\n";
  } else {
    refine_json(w, o);
  }
  w << "  \"results\": [";
  for (std::size_t r = 0; r < o.order.size(); ++r) {
    result_json(w, o, r);
    w.maybe_flush();
  }
  w << "\n  ]\n}\n";
}

void write_sweep_csv(std::ostream& out, const SweepOutcome& o) {
  const scen::SweepPlan& p = o.plan;
  Sink w(out);
  w << "rank,point,status";
  for (const std::string& k : p.keys) w << ',' << k;
  w << ",iteration_time_s,tokens_per_s,mfu,hfu,tflops_per_gpu,memory_peak_bytes,"
       "memory_capacity_bytes,compute_s,exposed_tp_s,exposed_cp_s,exposed_ep_s,exposed_pp_s,"
       "exposed_dp_s,pipeline_bubble_s,optimizer_s,data_loading_s,gpu_variation_s,global_sync_s";
  if (o.spec.price) w << ",cost_per_mtok_" << o.spec.price->currency;
  if (o.spec.goodput) {
    w << ",ettr,ettr_ci95,goodput_tokens_per_day,interruptions,checkpoint_interval_s,"
         "checkpoint_blocking_s,restart_s,lost_share,checkpoint_share,restart_share,"
         "recovery_share,slow_share";
  }
  std::vector<const scen::RefinedPoint*> refined(p.size(), nullptr);
  for (const scen::RefinedPoint& rp : o.refined) refined[rp.point] = &rp;
  if (!o.refined.empty()) {
    w << ",refined_rank,refined_iteration_time_s,refined_tokens_per_s,refined_mfu";
  }
  w << ",field,reason\n";
  for (std::size_t r = 0; r < o.order.size(); ++r) {
    const std::size_t i = o.order[r];
    const PointResult& x = o.results[i];
    if (x.ok()) w << r + 1;
    w << ',' << i << ',' << to_string(x.status);
    for (std::size_t k = 0; k < p.keys.size(); ++k) {
      w << ',';
      w.csv_field(p.value(i, k));
    }
    const exec::Breakdown& b = x.breakdown;
    auto cell = [&](double v, bool has) {
      w << ',';
      if (has) w.num(v);
    };
    for (double v : {x.iteration_time_s, x.tokens_per_s, x.mfu, x.hfu, x.tflops_per_gpu}) {
      cell(v, x.ok());
    }
    cell(x.memory_peak_bytes, x.memory_peak_bytes > 0);
    cell(x.memory_capacity_bytes, x.memory_capacity_bytes > 0);
    for (double v : {b.compute_s, b.exposed_tp_s, b.exposed_cp_s, b.exposed_ep_s, b.exposed_pp_s,
                     b.exposed_dp_s, b.pipeline_bubble_s, b.optimizer_s, b.data_loading_s,
                     b.gpu_variation_s, b.global_sync_s}) {
      cell(v, x.ok());
    }
    if (o.spec.price) cell(o.cost_per_mtok(i).value_or(0), x.ok());
    if (o.spec.goodput) {
      for (double v : {x.ettr, x.ettr_ci95, x.goodput_tokens_per_day, x.interruptions,
                       x.checkpoint_interval_s, x.checkpoint_blocking_s, x.restart_s,
                       x.lost_share, x.checkpoint_share, x.restart_share, x.recovery_share,
                       x.slow_share}) {
        cell(v, x.ok());
      }
    }
    if (!o.refined.empty()) {
      const scen::RefinedPoint* rp = refined[i];
      const bool ran = rp != nullptr && rp->result.ok();
      w << ',';
      if (ran) w << rp->refined_rank;
      cell(ran ? rp->result.iteration_time_s : 0, ran);
      cell(ran ? rp->result.tokens_per_s : 0, ran);
      cell(ran ? rp->result.mfu : 0, ran);
    }
    w << ',';
    w.csv_field(x.field);
    w << ',';
    w.csv_field(x.reason);
    w << '\n';
    w.maybe_flush();
  }
}

}  // namespace trainsim::reports
