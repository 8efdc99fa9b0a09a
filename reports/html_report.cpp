#include "reports/html_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "reports/pipeline_schedule.h"
#include "reports/summary.h"
#include "reports/svg.h"
#include "reports/sweep_report.h"
#include "reports/validation_report.h"
#include "sim/core/error.h"
#include "sim/core/units.h"
#include "sim/core/version.h"

namespace trainsim::reports {
namespace {

using svg::escape;

// Ops per lane up to which the timeline draws the whole iteration (beyond, thousands of slivers
// per lane would only add megabytes), and beyond which it adds a close-up of the start.
constexpr std::size_t kMaxOpsPerLane = 1000;
constexpr std::size_t kZoomOps = 64;

const char* kCss = R"css(
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, sans-serif; color: #1d1d1f; margin: 0; background: #fafafa; }
header { background: #23303d; color: #fff; padding: 18px 32px; }
header h1 { margin: 0 0 4px; font-size: 22px; font-weight: 600; }
header p { margin: 0; color: #c9d3dd; font-size: 13px; }
main { max-width: 1000px; margin: 0 auto; padding: 8px 32px 40px; }
section { background: #fff; border: 1px solid #e2e2e2; border-radius: 6px; padding: 4px 20px 16px;
          margin: 18px 0; }
h2 { font-size: 17px; margin: 14px 0 6px; }
p.note, figcaption { color: #555; font-size: 13px; }
figure { margin: 8px 0 4px; }
svg.chart { max-width: 100%; height: auto; display: block; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 10px 0; }
.card { border: 1px solid #e2e2e2; border-radius: 6px; padding: 8px 14px; min-width: 120px; }
.card .v { font-size: 20px; font-weight: 600; }
.card .k { color: #666; font-size: 12px; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { border-bottom: 1px solid #eee; padding: 3px 10px 3px 0; text-align: left;
         vertical-align: top; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
tr.hl td { font-weight: 600; background: #fff6e0; }
.bad { color: #b02a2a; }
footer { color: #666; font-size: 12px; margin-top: 20px; }
)css";

std::string page(const std::string& kind, const std::string& title, const std::string& meta,
                 const std::string& body) {
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  // The report must never fetch anything; the policy makes a browser refuse if it tried.
  out +=
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "style-src 'unsafe-inline'; img-src data:\">\n";
  out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  out += fmt::format("<meta name=\"generator\" content=\"trainsim {}\">\n", kVersion);
  out += "<link rel=\"icon\" href=\"data:,\">\n";
  out += "<title>" + escape(title) + "</title>\n<style>" + kCss + "</style>\n</head>\n";
  out += "<body data-report=\"" + kind + "\">\n<header><h1>" + escape(title) + "</h1><p>" +
         escape(meta) + "</p></header>\n<main>\n" + body;
  out += "<footer>Written by trainsim " + std::string(kVersion) +
         ". The numbers behind this page: <a href=\"results.json\">results.json</a>, "
         "<a href=\"results.csv\">results.csv</a>.</footer>\n</main>\n</body>\n</html>\n";
  return out;
}

std::string section(const std::string& id, const std::string& heading, const std::string& body) {
  return "<section id=\"" + id + "\"><h2>" + escape(heading) + "</h2>\n" + body + "</section>\n";
}

std::string figure(const std::string& chart, const std::string& caption) {
  return "<figure>" + chart + "<figcaption>" + escape(caption) + "</figcaption></figure>\n";
}

std::string note(const std::string& text) { return "<p class=\"note\">" + escape(text) + "</p>\n"; }

std::string cards(const std::vector<std::pair<std::string, std::string>>& items) {
  std::string out = "<div class=\"cards\">";
  for (const auto& [k, v] : items) {
    out += "<div class=\"card\"><div class=\"v\">" + escape(v) + "</div><div class=\"k\">" +
           escape(k) + "</div></div>";
  }
  return out + "</div>\n";
}

// A table; columns whose header starts with '#' are numeric (right-aligned, '#' dropped).
std::string table(const std::string& id, const std::vector<std::string>& head,
                  const std::vector<std::vector<std::string>>& rows,
                  const std::vector<bool>& highlight = {}) {
  std::vector<bool> numeric;
  std::string out = "<table id=\"" + id + "\"><thead><tr>";
  for (const std::string& h : head) {
    numeric.push_back(!h.empty() && h[0] == '#');
    out += numeric.back() ? "<th class=\"n\">" + escape(h.substr(1)) + "</th>"
                          : "<th>" + escape(h) + "</th>";
  }
  out += "</tr></thead><tbody>";
  for (std::size_t r = 0; r < rows.size(); ++r) {
    out += r < highlight.size() && highlight[r] ? "<tr class=\"hl\">" : "<tr>";
    for (std::size_t c = 0; c < rows[r].size(); ++c) {
      out += (c < numeric.size() && numeric[c] ? "<td class=\"n\">" : "<td>") + escape(rows[r][c]) +
             "</td>";
    }
    out += "</tr>";
  }
  return out + "</tbody></table>\n";
}

std::string pct(double x) { return fmt::format("{:.1f} %", 100 * x); }

const std::vector<std::string>& breakdown_names() {
  static const std::vector<std::string> kNames = {
      "compute",         "exposed TP comm", "exposed CP comm", "exposed EP comm", "exposed PP comm",
      "exposed DP comm", "pipeline bubble", "optimizer step",  "data loading",
      "slowest-GPU pacing", "global sync"};
  return kNames;
}

std::vector<double> breakdown_values(const exec::Breakdown& b) {
  return {b.compute_s,    b.exposed_tp_s,      b.exposed_cp_s, b.exposed_ep_s,  b.exposed_pp_s,
          b.exposed_dp_s, b.pipeline_bubble_s, b.optimizer_s,  b.data_loading_s,
          b.gpu_variation_s, b.global_sync_s};
}

std::vector<std::string> breakdown_colors() {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < breakdown_names().size(); ++i) out.push_back(svg::palette(i));
  // The palette has ten colours: global sync (the eleventh row) would repeat compute's.
  out[10] = "#5b5b5b";
  return out;
}

svg::StackedBars breakdown_chart(const std::string& id, const std::string& title, bool normalize) {
  svg::StackedBars c;
  c.id = id;
  c.title = title;
  c.unit = "s";
  c.normalize = normalize;
  c.segments = breakdown_names();
  c.colors = breakdown_colors();
  return c;
}

std::string memory_chart(const plan::MemoryUsage& m) {
  svg::StackedBars c;
  c.id = "memory";
  c.title = "Memory per GPU";
  c.unit = "GiB";
  c.segments = {"weights",         "gradients", "optimizer state", "activations", "comm buffers",
                "runtime reserve", "free"};
  c.colors = {"#4e79a7", "#59a14f", "#edc948", "#f28e2b", "#76b7b2", "#9c755f", "#e8e8e8"};
  c.bars.push_back(
      {"peak (" + std::string(m.stage_name()) + " stage" +
           (m.stage > 0 && m.stage < m.stages - 1 ? " " + std::to_string(m.stage) : "") + ")",
       {m.weights_bytes / kGiB, m.gradients_bytes / kGiB, m.optimizer_bytes / kGiB,
        m.activations_bytes / kGiB, m.comm_buffers_bytes / kGiB, m.runtime_reserved_bytes / kGiB,
        std::max(0.0, m.capacity_bytes - m.peak_bytes) / kGiB}});
  return svg::stacked_bars(c);
}

std::string tier_name(int tier) {
  static const char* kNames[] = {"leaf (ToR)", "spine", "core", "tier 4", "tier 5"};
  return kNames[std::clamp(tier, 0, 4)];
}

// Utilisation per link tier: the GPU-attached tiers the analytic fidelity models, then every
// switch-to-switch tier of the fabric marked as not modelled.
std::string link_chart(const std::string& id, const std::vector<const exec::Result*>& results,
                       const std::vector<std::string>& names, const scen::Scenario& s) {
  svg::Bars c;
  c.id = id;
  c.title = "Link utilisation by tier";
  c.unit = "% busy";
  c.max_value = 100;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const exec::NetworkStats& net = results[i]->network;
    const std::string who = names.size() > 1 ? names[i] + ": " : "";
    if (!net.link_classes.empty()) {
      // Flow fidelity: every class of link the routed flows used, tier by tier.
      c.title = "Link utilisation by class (mean over the class; busiest link in the note)";
      for (const exec::NetworkStats::LinkClass& l : net.link_classes) {
        if (l.used == 0) continue;
        c.bars.push_back({who + l.name, 100 * l.mean_utilization,
                          fmt::format("{:.1f} % mean · busiest {:.1f} % · {} of {} links used",
                                      100 * l.mean_utilization, 100 * l.max_utilization, l.used,
                                      l.links),
                          false, false, ""});
      }
      continue;
    }
    c.bars.push_back({who + "NVLink (inside a server)", 100 * net.nvlink_utilization,
                      fmt::format("{:.1f} % · {:.1f} GB sent per GPU per iteration",
                                  100 * net.nvlink_utilization, net.nvlink_bytes_per_gpu / kGB),
                      false, false, ""});
    c.bars.push_back({who + "NIC to " + tier_name(0), 100 * net.nic_utilization,
                      fmt::format("{:.1f} % · {:.1f} GB sent per GPU per iteration",
                                  100 * net.nic_utilization, net.nic_bytes_per_gpu / kGB),
                      false, false, ""});
    const std::string& fid = results[i]->fidelity;
    for (int t = 1; t < s.cluster.fabric.tiers; ++t) {
      c.bars.push_back({who + tier_name(t - 1) + " to " + tier_name(t), 0,
                        "not modelled at " + fid + " fidelity (needs flow fidelity)", false, true,
                        "switch-to-switch links carry no modelled load at " + fid + " fidelity"});
    }
  }
  return svg::bars(c);
}

// What the link chart of one run shows, at its fidelity.
std::string link_caption(const exec::Result& r) {
  const exec::NetworkStats& n = r.network;
  if (n.link_classes.empty()) {
    return fmt::format(
        "Bytes each GPU sends over NVLink and through its share of the NICs per iteration (as "
        "the closed form counts them), divided by capacity × the iteration time. The {} fidelity "
        "routes no flows, so switch-to-switch tiers and ECMP balance are not modelled.",
        r.fidelity);
  }
  std::vector<std::string> idle;
  for (const exec::NetworkStats::LinkClass& l : n.link_classes) {
    if (l.used == 0) idle.push_back(l.name);
  }
  return fmt::format(
      "At {} fidelity: every class of link the routed flows (collectives that leave a server and "
      "pipeline transfers) used, as the mean utilisation of the class (wire bytes, protocol "
      "overhead included, over nominal capacity × the iteration time); the busiest link is in "
      "each bar's note. Traffic inside a server is priced in closed form and not routed, so "
      "gpu->nvs shows only the NVLink hops of routed flows; all NVLink traffic per GPU is "
      "{:.1f} % of NVLink ({:.2f} GB per GPU per iteration). {}",
      r.fidelity, 100 * n.nvlink_utilization, n.nvlink_bytes_per_gpu / kGB,
      idle.empty() ? std::string("Every class carried some traffic.")
                   : fmt::format("Left out, having carried nothing: {}.", fmt::join(idle, ", ")));
}

// The pipeline schedule of a few stages, then the rest of the iteration, so that the drawn parts
// are the breakdown's rows: the pipeline lasts compute + exposed TP/CP/EP/PP + bubble, and each
// row it does not hold (PP transfers outside the slots, DP, optimizer, data loading, slowest-GPU
// pacing, global sync) follows it as a block of its own length. The schedule's shape is always the
// analytic one (reports/pipeline_schedule.h); at the event-driven fidelities it is scaled to the
// executed rows. The whole iteration is drawn when its blocks stay legible, and a close-up of the
// start (the pipeline filling) when there are many micro-batches.
std::string timeline_figure(const exec::Result& r, const scen::Scenario& s, const std::string& id) {
  const exec::PipelineTiming& t = r.pipeline;
  const exec::Breakdown& b = r.breakdown;
  // Chunks computing different amounts (Llama 3's end chunks hold only the embedding or the
  // output layer) are drawn at their own lengths, not all as long as the slowest stage's mean.
  std::vector<double> weights;
  try {
    weights = chunk_weights(s.model, plan::make_layout(s.model, s.cluster, s.parallel, s.training));
  } catch (const Error&) {
    weights.clear();  // (a run that reached a report has a layout; drawn uniform otherwise)
  }
  if (weights.size() != static_cast<std::size_t>(t.stages) * t.chunks) weights.clear();
  std::vector<ScheduleOp> ops = analytic_pipeline_schedule(t, weights);
  const bool analytic = r.fidelity == "analytic";
  // Only the analytic fidelity separates the exposed PP of the fill and drain (pp_overlap) from
  // the slots; an executed breakdown has one PP row, drawn inside the pipeline.
  const double pp_outside = analytic ? std::clamp(t.pp_outside_s, 0.0, b.exposed_pp_s) : 0.0;
  struct After {
    const char* name;
    double seconds;
    std::size_t row;  // index into breakdown_names()
  };
  const std::vector<After> after_rows = {
      {"exposed PP comm outside the slots (fill and drain sends)", pp_outside, 4},
      {"exposed DP comm", b.exposed_dp_s, 5},
      {"optimizer step", b.optimizer_s, 7},
      {"data loading", b.data_loading_s, 8},
      {"slowest-GPU pacing", b.gpu_variation_s, 9},
      {"global sync", b.global_sync_s, 10}};
  const double pipeline_s = b.compute_s + b.exposed_tp_s + b.exposed_cp_s + b.exposed_ep_s +
                            (b.exposed_pp_s - pp_outside) + b.pipeline_bubble_s;
  const double drawn_makespan = schedule_makespan(ops);
  // The schedule's ops all last the slowest stage's times, so its makespan is the analytic
  // (m·v + p − 1) slots; scaled to the breakdown's pipeline rows (a factor of 1 at analytic
  // fidelity with layers that split evenly into the chunks).
  const double scale = drawn_makespan > 0 && pipeline_s > 0 ? pipeline_s / drawn_makespan : 1.0;
  for (ScheduleOp& op : ops) {
    op.start_s *= scale;
    op.end_s *= scale;
  }
  const double makespan = drawn_makespan * scale;
  double iteration = makespan;
  for (const After& a : after_rows) iteration += a.seconds;
  std::vector<int> stages;
  for (int st = 0; st < t.stages; ++st) {
    if (t.stages <= 8 || st < 4 || st >= t.stages - 4) stages.push_back(st);
  }
  const int rank_stride = s.parallel.pp_stride();
  const std::size_t per_lane = 2 * static_cast<std::size_t>(t.microbatches) * t.chunks;
  const std::vector<std::string> colors = breakdown_colors();

  auto chart = [&](const std::string& chart_id, double window, bool labels) {
    svg::Timeline c;
    c.id = chart_id;
    c.title = analytic ? "Pipeline schedule (analytic)"
                       : "Pipeline schedule (analytic shape, scaled to the " + r.fidelity +
                             " fidelity's breakdown)";
    c.kinds = {{"forward", "#4e79a7"}, {"backward + recompute", "#f28e2b"}};
    // The rows after the pipeline that this window reaches, each a kind of its own.
    struct Drawn {
      std::size_t kind;
      double start, seconds;
    };
    std::vector<Drawn> drawn;
    double at = makespan;
    for (const After& a : after_rows) {
      if (a.seconds <= 0) continue;
      if (at < window) {
        drawn.push_back({c.kinds.size(), at, a.seconds});
        c.kinds.push_back({a.name, colors[a.row]});
      }
      at += a.seconds;
    }
    std::map<int, std::size_t> lane_of;
    for (const int st : stages) {
      lane_of[st] = c.lanes.size();
      c.lanes.push_back(fmt::format("stage {} · rank {}", st, st * rank_stride));
    }
    for (const ScheduleOp& op : ops) {
      const auto it = lane_of.find(op.stage);
      if (it == lane_of.end() || op.start_s >= window) continue;
      c.blocks.push_back(
          {it->second, op.start_s, std::min(op.end_s, window), op.forward ? 0u : 1u,
           labels ? std::to_string(op.microbatch) : std::string(),
           fmt::format("stage {} · micro-batch {}{} · {}: {:.3f}–{:.3f} ms", op.stage,
                       op.microbatch,
                       t.chunks > 1 ? fmt::format(" · chunk {}", op.chunk) : std::string(),
                       op.forward ? "forward" : "backward", op.start_s * 1e3, op.end_s * 1e3)});
    }
    for (const Drawn& d : drawn) {
      for (const auto& [st, lane] : lane_of) {
        c.blocks.push_back({lane, d.start, std::min(d.start + d.seconds, window), d.kind, "",
                            fmt::format("stage {} · {}: {:.3f}–{:.3f} ms ({:.3f} ms)", st,
                                        c.kinds[d.kind].name, d.start * 1e3,
                                        (d.start + d.seconds) * 1e3, d.seconds * 1e3)});
      }
    }
    c.end_s = window;
    return svg::timeline(c);
  };

  std::string caption =
      analytic
          ? fmt::format(
                "The schedule the analytic fidelity assumes, not a per-rank simulation: {} with "
                "{} stage{}, {} micro-batch{}{}, every stage at the pace of the slowest (the {} "
                "stage: forward {:.2f} ms, backward {:.2f} ms, exposed communication {:.2f} ms "
                "per micro-batch). ",
                plan::to_string(t.schedule), t.stages, t.stages == 1 ? "" : "s", t.microbatches,
                t.microbatches == 1 ? "" : "es",
                t.chunks > 1 ? fmt::format(" and {} chunks per stage", t.chunks) : std::string(),
                t.slowest_is_last ? "last" : "first", t.forward_s * 1e3, t.backward_s * 1e3,
                t.exposed_comm_s * 1e3)
          : fmt::format(
                "Not the executed timeline of the {} fidelity (--trace writes that, rank by "
                "rank): the analytic fidelity's schedule ({} with {} stage{}, {} micro-batch{}{}, "
                "every op of a stage as long), scaled to the executed critical rank's rows "
                "({:.2f} ms at analytic times). ",
                r.fidelity, plan::to_string(t.schedule), t.stages, t.stages == 1 ? "" : "s",
                t.microbatches, t.microbatches == 1 ? "" : "es",
                t.chunks > 1 ? fmt::format(" and {} chunks per stage", t.chunks) : std::string(),
                drawn_makespan * 1e3);
  if (!weights.empty()) {
    caption +=
        "Each model chunk is drawn at its share of the work (its layers' forward FLOPs, and the "
        "output layer on the last stage's last chunk, against the heaviest stage's mean chunk). ";
  }
  if (analytic && std::fabs(scale - 1) > 1e-6) {
    caption += fmt::format(
        "The ops are drawn {:.2f} % {} so that the pipeline lasts the breakdown's rows "
        "(the analytic fill and drain count every stage at its own slot, not op by op). ",
        100 * std::fabs(scale - 1), scale > 1 ? "longer" : "shorter");
  }
  std::vector<std::string> after_names;
  for (const After& a : after_rows) {
    if (a.seconds > 0) after_names.push_back(a.name);
  }
  caption += fmt::format(
      "The pipeline ({:.2f} ms) is the breakdown's compute, exposed TP/CP/EP/{}PP and bubble "
      "rows; {}. ",
      makespan * 1e3, pp_outside > 0 ? "slot " : "",
      after_names.empty()
          ? std::string("no other row has time")
          : fmt::format("after it, in breakdown order, one block per other row with time ({}), "
                        "each as long as its row (where a run spends them differs: data "
                        "loading comes before the first forward, DP reductions and the fill and "
                        "drain transfers fall inside the pipeline)",
                        fmt::join(after_names, ", ")));
  if (stages.size() < static_cast<std::size_t>(t.stages)) {
    caption +=
        fmt::format("Stages 0–3 and {}–{} of {} shown. ", t.stages - 4, t.stages - 1, t.stages);
  }
  std::string out;
  if (per_lane <= kMaxOpsPerLane) {
    out += figure(chart(id, iteration, per_lane <= kZoomOps),
                  caption + "The whole iteration; labels are micro-batch numbers.");
  }
  if (per_lane > kZoomOps) {
    // Stage 0's ops come first in `ops`, in issue order.
    const double window = ops[kZoomOps - 1].end_s;
    out += figure(chart(per_lane <= kMaxOpsPerLane ? id + "-start" : id, window, true),
                  (per_lane <= kMaxOpsPerLane ? std::string() : caption) +
                      fmt::format("The first {:.0f} ms of the {:.0f} ms iteration: the pipeline "
                                  "filling. Labels are micro-batch numbers.",
                                  window * 1e3, iteration * 1e3));
  }
  return out;
}

std::string run_sections(const exec::Result& r, const scen::Scenario& s,
                         const std::string& prefix) {
  std::string body;
  svg::StackedBars b = breakdown_chart(prefix + "breakdown", "Iteration time breakdown", false);
  b.bars.push_back({"iteration", breakdown_values(r.breakdown), false});
  std::vector<std::vector<std::string>> rows;
  const std::vector<double> v = breakdown_values(r.breakdown);
  for (std::size_t i = 0; i < v.size(); ++i) {
    rows.push_back({breakdown_names()[i], fmt::format("{:.3f}", v[i]),
                    pct(r.iteration_time_s > 0 ? v[i] / r.iteration_time_s : 0)});
  }
  body += section(prefix + "time", "Where the time goes",
                  figure(svg::stacked_bars(b),
                         "Critical-path time of one iteration; communication hidden behind "
                         "compute is not in it.") +
                      table(prefix + "breakdown-table", {"component", "#seconds", "#share"}, rows));
  body +=
      section(prefix + "pipeline", "Pipeline timeline", timeline_figure(r, s, prefix + "timeline"));
  body += section(prefix + "links", "Link utilisation by tier",
                  figure(link_chart(prefix + "link-utilisation", {&r}, {""}, s),
                         link_caption(r)));
  body += section(
      prefix + "mem", "Memory per GPU",
      figure(memory_chart(r.memory),
             fmt::format("{:.1f} GiB of {:.1f} GiB{}", r.memory.peak_bytes / kGiB,
                         r.memory.capacity_bytes / kGiB, r.memory.fits() ? "" : ": does not fit")));
  return body;
}

std::string config_rows(const scen::Scenario& s) {
  const auto& p = s.parallel;
  const auto& t = s.training;
  return table(
      "config", {"", ""},
      {{"model", fmt::format("{}: {} layers, hidden {}, {} heads ({} KV{}), seq {}", s.model.name,
                             s.model.layers, s.model.hidden, s.model.heads, s.model.kv_heads,
                             s.model.head_dim_given > 0
                                 ? fmt::format(", {} wide", s.model.head_dim_given)
                                 : "",
                             s.model.seq_len)},
       {"cluster", fmt::format("{}: {} × {}, {} per server", s.cluster.name, s.cluster.gpus,
                               s.cluster.gpu.name, s.cluster.gpus_per_node)},
       {"parallel", fmt::format("TP {} · PP {} (vpp {}, {}) · DP {} · CP {} · EP {} · SP {} · "
                                "ZeRO-{}{}",
                                p.tp, p.pp, p.vpp, plan::to_string(p.schedule), p.dp, p.cp, p.ep,
                                p.sp ? "on" : "off", p.zero,
                                p.order == plan::RankOrder::kTpCpPpDp ? " · ranks tp-cp-pp-dp"
                                                                      : "")},
       {"training", fmt::format("global batch {}, micro-batch {}, {}, recompute {}, {}",
                                t.global_batch, t.micro_batch, to_string(t.precision),
                                model::to_string(t.recompute), plan::to_string(t.optimizer))},
       // The framework preset the run used (as the text summary names it); optimizations.system
       // only when no framework resolved.
       {"framework", s.framework.empty() ? s.system : s.framework}});
}


// Flattens a JSON document into "a.b.c,value" rows.
void flatten_csv(const nlohmann::ordered_json& j, const std::string& prefix, std::string& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      flatten_csv(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
    }
    return;
  }
  if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i)
      flatten_csv(j[i], prefix + "." + std::to_string(i), out);
    return;
  }
  std::string v = j.is_string() ? j.get<std::string>() : j.dump();
  if (v.find_first_of(",\"\n") != std::string::npos) {
    std::string q = "\"";
    for (const char c : v) {
      if (c == '"') q += '"';
      q += c;
    }
    v = q + "\"";
  }
  out += prefix + "," + v + "\n";
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out)
    throw Error(ErrorKind::kRuntime, "cannot write the report file", {path.string(), 0, ""});
}

std::filesystem::path make_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    throw Error(ErrorKind::kRuntime, "cannot create the report folder: " + ec.message(),
                {dir, 0, ""});
  }
  return dir;
}

// ---- sweeps -------------------------------------------------------------------------------------

std::string compact_label(const scen::SweepPlan& p, std::size_t point) {
  std::string out;
  const bool has_vpp = std::find(p.keys.begin(), p.keys.end(), "parallel.vpp") != p.keys.end();
  for (std::size_t k = 0; k < p.keys.size(); ++k) {
    if (p.values[k].size() < 2) continue;
    if (p.keys[k] == "parallel.schedule" && has_vpp) continue;  // implied by vpp
    std::string name = short_key(p.keys[k]);
    if (name == "micro_batch") name = "mb";
    if (!out.empty()) out += ' ';
    out += name + "=" + p.value(point, k);
  }
  return out.empty() ? p.label(point) : out;
}

struct MetricInfo {
  std::string name, unit;
  double scale = 1;
};

MetricInfo metric_info(const scen::SweepOutcome& o) {
  switch (o.spec.rank_by) {
    case scen::RankBy::kMfu:
      return {"MFU", "%", 100};
    case scen::RankBy::kTokensPerS:
      return {"tokens/s", "tokens/s", 1};
    case scen::RankBy::kCost:
      return {"cost", o.spec.price->currency + " per million tokens", 1};
    case scen::RankBy::kGoodput:
      return {"goodput", "tokens per day over the run", 1};
  }
  return {"MFU", "%", 100};
}

bool numeric_text(const std::string& s, double& v) {
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return !s.empty() && ec == std::errc() && ptr == s.data() + s.size();
}

// Value indices of key `k` ordered numerically when every value is a number.
std::vector<std::size_t> value_order(const scen::SweepPlan& p, std::size_t k) {
  std::vector<std::size_t> idx(p.values[k].size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::vector<double> num(idx.size());
  bool all = true;
  for (std::size_t i = 0; i < idx.size(); ++i) all = all && numeric_text(p.values[k][i], num[i]);
  if (all) {
    std::sort(idx.begin(), idx.end(),
              [&](std::size_t a, std::size_t b) { return num[a] < num[b]; });
  }
  return idx;
}

constexpr std::size_t kNone = static_cast<std::size_t>(-1);

// The column of `key` when it is swept over two values or more, else kNone.
std::size_t key_index(const scen::SweepPlan& p, const std::string& key) {
  for (std::size_t k = 0; k < p.keys.size(); ++k) {
    if (p.keys[k] == key && p.values[k].size() > 1) return k;
  }
  return kNone;
}

// Best MFU per pair of values of two swept keys (TP × PP when both are swept).
std::string heatmap_figure(const scen::SweepOutcome& o) {
  const scen::SweepPlan& p = o.plan;
  std::size_t rk = key_index(p, "parallel.pp"), ck = key_index(p, "parallel.tp");
  if (rk == kNone || ck == kNone) {
    rk = ck = kNone;
    for (std::size_t k = 0; k < p.keys.size(); ++k) {
      if (p.values[k].size() < 2) continue;
      if (rk == kNone) {
        rk = k;
      } else if (ck == kNone) {
        ck = k;
      }
    }
  }
  if (rk == kNone) return "";
  const bool two = ck != kNone;
  const std::vector<std::size_t> rows = value_order(p, rk);
  const std::vector<std::size_t> cols = two ? value_order(p, ck) : std::vector<std::size_t>{0};
  std::vector<std::size_t> row_pos(p.values[rk].size()), col_pos(cols.size());
  for (std::size_t i = 0; i < rows.size(); ++i) row_pos[rows[i]] = i;
  for (std::size_t i = 0; i < cols.size(); ++i) col_pos[cols[i]] = i;
  const std::size_t width = p.keys.size();
  const std::size_t cells = rows.size() * cols.size();
  std::vector<std::size_t> best(cells, kNone), first_fail(cells, kNone), tried(cells, 0);
  for (std::size_t i = 0; i < p.size(); ++i) {
    const std::size_t r = row_pos[p.cells[i * width + rk]];
    const std::size_t c = two ? col_pos[p.cells[i * width + ck]] : 0;
    const std::size_t cell = r * cols.size() + c;
    ++tried[cell];
    if (!o.results[i].ok()) {
      if (first_fail[cell] == kNone) first_fail[cell] = i;
      continue;
    }
    if (best[cell] == kNone || o.results[i].mfu > o.results[best[cell]].mfu) best[cell] = i;
  }
  svg::Heatmap h;
  h.id = "sweep-heatmap";
  h.title = "Best MFU per " + short_key(p.keys[rk]) + (two ? " × " + short_key(p.keys[ck]) : "");
  h.row_label = short_key(p.keys[rk]);
  h.col_label = two ? short_key(p.keys[ck]) : "";
  for (const std::size_t r : rows) h.rows.push_back(p.values[rk][r]);
  for (const std::size_t c : cols) h.cols.push_back(two ? p.values[ck][c] : "best");
  h.legend = "best MFU (%) over the other swept keys";
  if (p.base_point) {
    const std::size_t b = *p.base_point;
    h.highlight = static_cast<long>(row_pos[p.cells[b * width + rk]] * cols.size() +
                                    (two ? col_pos[p.cells[b * width + ck]] : 0));
  }
  for (std::size_t cell = 0; cell < cells; ++cell) {
    svg::Heatmap::Cell x;
    const std::string where =
        fmt::format("{}={}{}", h.row_label, h.rows[cell / cols.size()],
                    two ? " " + h.col_label + "=" + h.cols[cell % cols.size()] : std::string());
    if (best[cell] != kNone) {
      x.value = 100 * o.results[best[cell]].mfu;
      x.tooltip = fmt::format("{}: best MFU {:.2f} % at {} ({} points)", where, *x.value,
                              compact_label(p, best[cell]), tried[cell]);
    } else if (first_fail[cell] != kNone) {
      x.tooltip =
          fmt::format("{}: none of {} points is feasible; e.g. {}: {}", where, tried[cell],
                      compact_label(p, first_fail[cell]), o.results[first_fail[cell]].reason);
    } else {
      x.tooltip = where + ": not swept";
    }
    h.cells.push_back(x);
  }
  return figure(svg::heatmap(h),
                "Each cell is the best configuration with these two values; crossed-out cells "
                "have no feasible point (hover for the reason).");
}

std::string scatter_figure(const scen::SweepOutcome& o) {
  constexpr std::size_t kMaxFeasible = 2500, kTop = 500, kMaxMemory = 800;
  const scen::SweepPlan& p = o.plan;
  svg::Scatter c;
  c.id = "sweep-scatter";
  c.title = "MFU against memory per GPU";
  c.x_label = "peak memory per GPU (GiB, log scale)";
  c.y_label = "MFU (%)";
  c.log_x = true;
  c.kinds = {{"feasible", "#4e79a7", svg::Scatter::Marker::kDot},
             {"does not fit in memory (drawn at MFU 0)", "#e15759", svg::Scatter::Marker::kCross},
             {"best", "#59a14f", svg::Scatter::Marker::kDiamond},
             {"the scenario's own configuration", "#222", svg::Scatter::Marker::kRing}};
  std::size_t shown_feasible = 0;
  const std::size_t stride =
      o.feasible > kMaxFeasible
          ? (o.feasible - kTop + (kMaxFeasible - kTop) - 1) / (kMaxFeasible - kTop)
          : 1;
  for (std::size_t r = 0; r < o.feasible; ++r) {
    if (r >= kTop && (r - kTop) % stride != 0) continue;
    const std::size_t i = o.order[r];
    const scen::PointResult& x = o.results[i];
    c.points.push_back({x.memory_peak_bytes / kGiB, 100 * x.mfu, 0,
                        fmt::format("#{} {}: MFU {:.2f} %, {:.1f} GiB", r + 1, compact_label(p, i),
                                    100 * x.mfu, x.memory_peak_bytes / kGiB)});
    ++shown_feasible;
  }
  std::vector<std::size_t> oom;
  double capacity = 0;
  for (std::size_t i = 0; i < o.results.size(); ++i) {
    const scen::PointResult& x = o.results[i];
    if (x.memory_capacity_bytes > 0 && capacity == 0) capacity = x.memory_capacity_bytes;
    if (!x.ok() && x.memory_peak_bytes > 0) oom.push_back(i);
  }
  const std::size_t oom_stride =
      oom.size() > kMaxMemory ? (oom.size() + kMaxMemory - 1) / kMaxMemory : 1;
  for (std::size_t j = 0; j < oom.size(); j += oom_stride) {
    const scen::PointResult& x = o.results[oom[j]];
    c.points.push_back({x.memory_peak_bytes / kGiB, 0, 1,
                        fmt::format("{}: needs {:.1f} GiB", compact_label(p, oom[j]),
                                    x.memory_peak_bytes / kGiB)});
  }
  if (o.feasible > 0) {
    const std::size_t b = o.order.front();
    c.points.push_back({o.results[b].memory_peak_bytes / kGiB, 100 * o.results[b].mfu, 2,
                        "best: " + compact_label(p, b)});
  }
  if (o.base_rank) {
    const std::size_t b = *p.base_point;
    c.points.push_back({o.results[b].memory_peak_bytes / kGiB, 100 * o.results[b].mfu, 3,
                        fmt::format("the scenario's own configuration, rank {}: {}", *o.base_rank,
                                    compact_label(p, b))});
  }
  if (capacity > 0) {
    c.x_limit = capacity / kGiB;
    c.x_limit_label = fmt::format("HBM {:.0f} GiB", capacity / kGiB);
  }
  std::string caption = fmt::format(
      "{} of {} feasible points{} and {} of {} points that do not fit in memory. Points infeasible "
      "for other reasons (divisibility, GPU count) have no memory figure and are listed below.",
      shown_feasible, o.feasible,
      shown_feasible < o.feasible ? fmt::format(" (the best {} and every {}th after)", kTop, stride)
                                  : std::string(),
      (oom.size() + oom_stride - 1) / oom_stride, oom.size());
  return figure(svg::scatter(c), caption);
}

std::string top_bars_figure(const scen::SweepOutcome& o) {
  const MetricInfo m = metric_info(o);
  svg::Bars c;
  c.id = "sweep-top";
  c.title = "The best configurations by " + m.name;
  c.unit = m.unit;
  const std::size_t n = std::min<std::size_t>(25, o.feasible);
  for (std::size_t r = 0; r < n; ++r) {
    const std::size_t i = o.order[r];
    const double v = o.metric(i) * m.scale;
    c.bars.push_back(
        {fmt::format("#{} {}", r + 1, compact_label(o.plan, i)), v,
         fmt::format("{:.4g} {}", v, m.unit), o.plan.base_point == i, false,
         fmt::format("#{} {}: {} {:.4g} {}", r + 1, o.plan.label(i), m.name, v, m.unit)});
  }
  if (o.base_rank && *o.base_rank > n) {
    const std::size_t i = *o.plan.base_point;
    const double v = o.metric(i) * m.scale;
    c.bars.push_back({fmt::format("#{} {} (scenario)", *o.base_rank, compact_label(o.plan, i)), v,
                      fmt::format("{:.4g} {}", v, m.unit), true, false, o.plan.label(i)});
  }
  return figure(svg::bars(c), fmt::format("Ranked by {}; the red bar is the scenario's own "
                                          "configuration.",
                                          m.name));
}

std::string sweep_breakdown_figure(const scen::SweepOutcome& o) {
  svg::StackedBars c = breakdown_chart("sweep-breakdown", "Iteration breakdown of the best", false);
  const std::size_t n = std::min<std::size_t>(10, o.feasible);
  for (std::size_t r = 0; r < n; ++r) {
    const std::size_t i = o.order[r];
    c.bars.push_back({fmt::format("#{} {}", r + 1, compact_label(o.plan, i)),
                      breakdown_values(o.results[i].breakdown), o.plan.base_point == i});
  }
  if (o.base_rank && *o.base_rank > n) {
    const std::size_t i = *o.plan.base_point;
    c.bars.push_back({fmt::format("#{} {} (scenario)", *o.base_rank, compact_label(o.plan, i)),
                      breakdown_values(o.results[i].breakdown), true});
  }
  return figure(svg::stacked_bars(c),
                "Critical-path seconds per iteration; the outlined bar is the scenario's own "
                "configuration.");
}

// sweep --refine: the analytic estimate against the finer fidelity for the top points, and how
// the ranking moved.
std::string sweep_refine_section(const scen::SweepOutcome& o) {
  svg::Scatter c;
  c.id = "sweep-refine";
  const bool base_added = o.refined.size() > o.refine_top;
  c.title = fmt::format("MFU of the top {}{}: analytic against {} fidelity", o.refine_top,
                        base_added ? " and the base configuration" : "", o.refine_fidelity);
  c.x_label = "analytic MFU (%)";
  c.y_label = o.refine_fidelity + " MFU (%)";
  c.diagonal = true;
  c.diagonal_label = "analytic = " + o.refine_fidelity;
  c.kinds = {{"kept its rank", "#4e79a7", svg::Scatter::Marker::kDot},
             {"moved up", "#59a14f", svg::Scatter::Marker::kDiamond},
             {"moved down", "#e15759", svg::Scatter::Marker::kCross}};
  if (base_added) {
    c.kinds.push_back({"the base configuration", "#f28e2b", svg::Scatter::Marker::kRing});
  }
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> hl;
  for (const scen::RefinedPoint& r : o.refined) {
    const scen::PointResult& a = o.results[r.point];
    const scen::PointResult& x = r.result;
    const std::string label = compact_label(o.plan, r.point);
    if (x.ok()) {
      const std::size_t kind = r.analytic_rank > o.refine_top      ? 3
                               : r.refined_rank == r.analytic_rank ? 0
                               : r.refined_rank < r.analytic_rank  ? 1
                                                                   : 2;
      c.points.push_back({100 * a.mfu, 100 * x.mfu, kind,
                          fmt::format("#{} (analytic #{}) {}: {:.2f} % against {:.2f} %",
                                      r.refined_rank, r.analytic_rank, label, 100 * x.mfu,
                                      100 * a.mfu)});
    }
    const exec::Breakdown& b = x.breakdown;
    rows.push_back(
        {x.ok() ? fmt::format("{}", r.refined_rank) : "–", fmt::format("{}", r.analytic_rank),
         move_text(r, o.refine_top), x.ok() ? pct(x.mfu) : "–", pct(a.mfu),
         x.ok() ? fmt::format("{:+.1f}", 100 * (x.mfu - a.mfu)) : "–",
         x.ok() ? fmt::format("{:.3f}", x.iteration_time_s) : "–",
         x.ok() ? fmt::format("{:.3f}", b.exposed_tp_s + b.exposed_cp_s + b.exposed_ep_s +
                                            b.exposed_pp_s + b.exposed_dp_s)
                : "–",
         x.ok() ? label : label + ": " + x.reason});
    hl.push_back(o.plan.base_point == r.point);
  }
  return figure(svg::scatter(c),
                fmt::format("Each of the analytic top {}{} re-run at {} fidelity (link "
                            "contention, ECMP, the executed schedule) and re-ranked by {}. Points "
                            "below the diagonal lose MFU at the finer fidelity.",
                            o.refine_top,
                            base_added ? " and the scenario's own configuration (the shaded "
                                         "row, its analytic rank below them)"
                                       : "",
                            o.refine_fidelity, metric_info(o).name)) +
         table("refine-table",
               {"#rank", "#analytic rank", "move", "#MFU", "#analytic MFU", "#change (points)",
                "#iteration s", "#exposed comm s", "configuration"},
               rows, hl);
}

// The goodput run of each top point (sweep --goodput): where a whole run's wall time goes, as
// shares, then the figures themselves.
std::string sweep_goodput_section(const scen::SweepOutcome& o) {
  svg::StackedBars c;
  c.id = "sweep-goodput";
  c.title = fmt::format("Wall time of a {:g}-day run", o.spec.goodput->days);
  c.unit = "%";
  c.segments = {"training kept", "lost work", "checkpoint stalls", "restart",
                "detection, diagnosis, repair", "slow host"};
  c.colors = {"#59a14f", "#e15759", "#f28e2b", "#4e79a7", "#b07aa1", "#9c755f"};
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> hl;
  const std::size_t n = std::min<std::size_t>(10, o.feasible);
  std::vector<std::pair<std::size_t, std::size_t>> shown;  // (rank - 1, point)
  for (std::size_t r = 0; r < n; ++r) shown.emplace_back(r, o.order[r]);
  if (o.base_rank && *o.base_rank > n) shown.emplace_back(*o.base_rank - 1, *o.plan.base_point);
  for (const auto& [r, i] : shown) {
    const scen::PointResult& x = o.results[i];
    const bool base = o.plan.base_point == i;
    c.bars.push_back({fmt::format("#{} {}{}", r + 1, compact_label(o.plan, i),
                                  base && r >= n ? " (scenario)" : ""),
                      {100 * x.ettr, 100 * x.lost_share, 100 * x.checkpoint_share,
                       100 * x.restart_share, 100 * x.recovery_share, 100 * x.slow_share},
                      base});
    rows.push_back({fmt::format("{}", r + 1), fmt::format("{:.1f} ± {:.1f} %", 100 * x.ettr,
                                                          100 * x.ettr_ci95),
                    human(x.goodput_tokens_per_day), human(x.tokens_per_s),
                    fmt::format("{:.1f}", x.interruptions),
                    fmt::format("{:.0f}", x.checkpoint_interval_s),
                    fmt::format("{:.1f}", x.checkpoint_blocking_s),
                    fmt::format("{:.0f}", x.restart_s), compact_label(o.plan, i)});
    hl.push_back(base);
  }
  return figure(svg::stacked_bars(c),
                fmt::format("Mean over {} Monte Carlo trials per point (`trainsim goodput` at the "
                            "point's own checkpoint interval); the outlined bar is the scenario's "
                            "own configuration.",
                            o.spec.goodput->trials)) +
         table("goodput-table",
               {"#rank", "#ETTR", "#tokens/day", "#tokens/s", "#stops per run", "#checkpoint every s",
                "#checkpoint stall s", "#restart s", "configuration"},
               rows, hl);
}

// ---- validation ---------------------------------------------------------------------------------

// Whether a published figure was derived: `derived` lists them as "mfu = ...", "iter_s = ...".
bool derived(const scen::ValidationRow& r, const std::string& figure) {
  return std::any_of(r.derived.begin(), r.derived.end(),
                     [&](const std::string& s) { return s.rfind(figure + " =", 0) == 0; });
}

std::string opt_text(const std::optional<double>& v, const char* f, double scale = 1) {
  return v ? fmt::format(fmt::runtime(f), *v * scale) : std::string("–");
}

}  // namespace

std::string run_report_html(const exec::Result& r, const scen::Scenario& s,
                            const calib::Profile& profile) {
  std::string body = section(
      "summary", "Summary",
      cards({{"iteration time", fmt::format("{:.3f} s", r.iteration_time_s)},
             {"throughput", human(r.tokens_per_s) + " tokens/s"},
             {"MFU", pct(r.mfu)},
             {"HFU", pct(r.hfu)},
             {"model TFLOP/s per GPU", fmt::format("{:.1f}", r.tflops_per_gpu)},
             {"memory per GPU", fmt::format("{:.1f} / {:.1f} GiB", r.memory.peak_bytes / kGiB,
                                            r.memory.capacity_bytes / kGiB)}}) +
          config_rows(s));
  body += run_sections(r, s, "");
  std::string notes = "<ul>";
  for (const auto& n : s.notes) notes += "<li>" + escape(n) + "</li>";
  for (const auto& n : r.notes) notes += "<li>" + escape(n) + "</li>";
  body += section("notes", "Notes", notes + "</ul>\n");
  return page("run", "trainsim run · " + s.source,
              html::meta_line(r.fidelity, r.model_version, profile.name + " v" + profile.version) +
                  fmt::format(" · seed {} · ", s.seed) + profile.provenance,
              body);
}

std::string sweep_report_html(const scen::SweepOutcome& o, const std::optional<PointDetail>& best,
                              const std::optional<PointDetail>& base) {
  const scen::SweepPlan& p = o.plan;
  const MetricInfo m = metric_info(o);
  std::size_t infeasible = 0, invalid = 0;
  for (const auto& x : o.results) {
    infeasible += x.status == scen::PointStatus::kInfeasible;
    invalid += x.status == scen::PointStatus::kInvalid;
  }
  std::vector<std::pair<std::string, std::string>> items = {
      {"points", fmt::format("{}", p.size())},
      {"feasible", fmt::format("{}", o.feasible)},
      {"infeasible / invalid", fmt::format("{} / {}", infeasible, invalid)}};
  if (o.feasible > 0) items.push_back({"best MFU", pct(o.results[o.order.front()].mfu)});
  if (o.feasible > 0 && o.spec.goodput) {
    const scen::PointResult& b = o.results[o.order.front()];
    items.push_back({"best goodput", human(b.goodput_tokens_per_day) + " tokens/day"});
    items.push_back({"its ETTR", pct(b.ettr)});
  }
  if (o.base_rank) {
    items.push_back(
        {"the scenario's configuration", fmt::format("rank {} of {}", *o.base_rank, o.feasible)});
  }
  // A leader beyond what the scenario's framework version could run (SweepOutcome::
  // framework_lacks): the best point within it, as the text output names it.
  if (o.feasible > 0 && !o.within_framework(o.order.front())) {
    items.push_back({"best within " + o.framework.preset,
                     o.framework_rank
                         ? fmt::format("rank {} at {}", *o.framework_rank,
                                       pct(o.results[o.order[*o.framework_rank - 1]].mfu))
                         : std::string("none feasible")});
  }
  // With --refine, the best is the first point of the re-ranking (cli/sweep_command.cpp).
  const bool refined_best = best && !o.refined.empty() && o.refined.front().full &&
                            o.refined.front().point == best->point;
  if (refined_best) {
    items.push_back({"best MFU at " + o.refine_fidelity + " fidelity",
                     pct(o.refined.front().result.mfu) +
                         fmt::format(" (analytic rank {})", o.refined.front().analytic_rank)});
  }
  std::string summary =
      cards(items) + note("Points: " + p.description + ". Ranked by " + m.name +
                          (o.spec.price ? fmt::format(" at {} {} per GPU-hour",
                                                      o.spec.price->amount, o.spec.price->currency)
                                        : std::string()) +
                          ".");
  if (best) {
    summary += refined_best ? "<h3>Best configuration after re-ranking at " + o.refine_fidelity +
                                  " fidelity</h3>" + config_rows(best->scenario)
                            : "<h3>Best configuration</h3>" + config_rows(best->scenario);
  }
  if (!p.base_point) {
    summary += note("The scenario's own configuration is not among the swept points.");
  } else if (!o.base_rank) {
    const scen::PointResult& x = o.results[*p.base_point];
    summary += note("The scenario's own configuration cannot run: " + x.reason);
  }
  std::string body = section("summary", "Summary", summary);
  if (o.feasible > 0) {
    body += section("across", "MFU across configurations",
                    heatmap_figure(o) + scatter_figure(o) + top_bars_figure(o));
    body += section("breakdown", "Where the time goes", sweep_breakdown_figure(o));
    if (!o.refined.empty()) {
      body += section("refine", "Refined at " + o.refine_fidelity + " fidelity",
                      sweep_refine_section(o));
    }
    if (o.spec.goodput) {
      body += section("goodput", "Goodput over a whole run", sweep_goodput_section(o));
    }
  } else {
    body += section("across", "MFU across configurations",
                    note("No configuration is feasible.") + heatmap_figure(o));
  }
  if (best) {
    body += section("pipeline", "Pipeline timeline of the best configuration",
                    timeline_figure(best->result, best->scenario, "timeline"));
    std::vector<const exec::Result*> rs = {&best->result};
    std::vector<std::string> names = {"best"};
    if (base && base->point != best->point) {
      rs.push_back(&base->result);
      names.push_back("scenario");
    }
    body += section("links", "Link utilisation by tier",
                    figure(link_chart("link-utilisation", rs, names, best->scenario),
                           "Per GPU-attached link over the iteration. Switch-to-switch tiers are "
                           "not modelled at analytic fidelity."));
  }
  std::vector<std::vector<std::string>> reasons;
  for (const ReasonGroup& g : reason_groups(o)) {
    const scen::PointResult& x = o.results[g.example];
    reasons.push_back(
        {fmt::format("{}", g.count), g.kind, compact_label(p, g.example) + ": " + x.reason});
  }
  if (!reasons.empty()) {
    body += section("infeasible", "Why the other points cannot run",
                    table("reasons", {"#points", "reason", "first example"}, reasons));
  }
  std::vector<std::string> head = {"#rank", "#MFU", "#tokens/s", "#iteration s", "#GiB/GPU"};
  if (o.spec.price) head.push_back("#" + o.spec.price->currency + "/Mtok");
  for (const std::string& k : p.keys) head.push_back(short_key(k));
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> hl;
  for (std::size_t r = 0; r < std::min<std::size_t>(50, o.feasible); ++r) {
    const std::size_t i = o.order[r];
    const scen::PointResult& x = o.results[i];
    std::vector<std::string> row = {fmt::format("{}", r + 1), pct(x.mfu), human(x.tokens_per_s),
                                    fmt::format("{:.3f}", x.iteration_time_s),
                                    fmt::format("{:.1f}", x.memory_peak_bytes / kGiB)};
    if (o.spec.price) row.push_back(fmt::format("{:.4g}", *o.cost_per_mtok(i)));
    for (std::size_t k = 0; k < p.keys.size(); ++k) row.push_back(p.value(i, k));
    rows.push_back(row);
    hl.push_back(p.base_point == i);
  }
  if (!rows.empty()) {
    body += section("ranking", "Ranking (top 50)",
                    table("ranking-table", head, rows, hl) +
                        note("Every point, with its reason when it cannot run, is in "
                             "results.csv and results.json."));
  }
  return page("sweep", "trainsim sweep · " + p.source,
              html::meta_line("analytic", exec::kAnalyticModelVersion, o.calibration), body);
}

std::string validation_report_html(const std::vector<scen::ValidationRow>& rows,
                                   const scen::ValidationSummary& s, const std::string& source) {
  std::string body = section(
      "summary", "Summary",
      cards({{"published runs", fmt::format("{}", s.rows)},
             {"simulated", fmt::format("{}", s.simulated)},
             {"median |MFU error|", fmt::format("{:.1f} points", s.median_abs_mfu_err_pts)},
             {"max |MFU error|", fmt::format("{:.1f} points", s.max_abs_mfu_err_pts)},
             {"iteration time MAPE", fmt::format("{:.1f} %", s.iter_time_mape)}}) +
          note(fmt::format("MFU error over {} rows, iteration time over {} rows. Published values "
                           "derived from a TFLOP/s figure use the model's FLOP accounting.",
                           s.mfu_rows, s.iter_rows)));

  svg::Scatter mfu;
  mfu.id = "validate-mfu";
  mfu.title = "Predicted vs published MFU";
  mfu.x_label = "published MFU (%)";
  mfu.y_label = "predicted MFU (%)";
  mfu.diagonal = true;
  mfu.kinds = {{"published", "#4e79a7", svg::Scatter::Marker::kDot},
               {"derived from published TFLOP/s", "#f28e2b", svg::Scatter::Marker::kDiamond}};
  svg::Scatter iter = mfu;
  iter.id = "validate-iter";
  iter.title = "Predicted vs published iteration time";
  iter.x_label = "published iteration time (s, log scale)";
  iter.y_label = "predicted iteration time (s)";
  iter.log_x = iter.log_y = true;
  svg::Bars err;
  err.id = "validate-error";
  err.title = "MFU error per run";
  err.unit = "points";
  svg::StackedBars bd = breakdown_chart("validate-breakdown", "Predicted breakdown per run", true);
  std::vector<std::vector<std::string>> table_rows;
  for (const scen::ValidationRow& r : rows) {
    if (!r.error_message.empty()) {
      table_rows.push_back(
          {r.id, "–", "–", "–", "–", "–", "–", "cannot simulate: " + r.error_message});
      continue;
    }
    if (r.predicted.mfu && r.published.mfu) {
      mfu.points.push_back({100 * *r.published.mfu, 100 * *r.predicted.mfu,
                            derived(r, "mfu") ? 1u : 0u,
                            fmt::format("{}: published {:.1f} %, predicted {:.1f} %", r.id,
                                        100 * *r.published.mfu, 100 * *r.predicted.mfu)});
    }
    if (r.predicted.iter_s && r.published.iter_s) {
      iter.points.push_back({*r.published.iter_s, *r.predicted.iter_s,
                             derived(r, "iter_s") ? 1u : 0u,
                             fmt::format("{}: published {:.3f} s, predicted {:.3f} s", r.id,
                                         *r.published.iter_s, *r.predicted.iter_s)});
    }
    if (r.mfu_err_pts) {
      err.bars.push_back(
          {r.id, std::fabs(*r.mfu_err_pts), fmt::format("{:+.1f} points", *r.mfu_err_pts), false,
           false,
           fmt::format("{}: predicted − published = {:+.2f} MFU points", r.id, *r.mfu_err_pts)});
    }
    bd.bars.push_back({r.id, breakdown_values(r.predicted_breakdown), false});
    table_rows.push_back(
        {r.id, opt_text(r.predicted.iter_s, "{:.3f}"), opt_text(r.published.iter_s, "{:.3f}"),
         opt_text(r.predicted.mfu, "{:.1f}", 100), opt_text(r.published.mfu, "{:.1f}", 100),
         opt_text(r.mfu_err_pts, "{:+.1f}"), opt_text(r.iter_err_pct, "{:+.1f}"), r.source});
  }
  body += section("predicted-vs-published", "Predicted vs published",
                  figure(svg::scatter(mfu),
                         "One point per published run; the dashed line is a "
                         "perfect prediction.") +
                      figure(svg::scatter(iter), "Iteration time on log scales.") +
                      figure(svg::bars(err), "Absolute MFU error per run, signed in the label."));
  body += section("breakdown", "Where the predicted time goes",
                  figure(svg::stacked_bars(bd), "Share of each run's predicted iteration time."));
  body += section("rows", "Runs",
                  table("runs",
                        {"id", "#iter s pred", "#iter s pub", "#MFU % pred", "#MFU % pub",
                         "#err pts", "#iter err %", "source"},
                        table_rows));
  std::string warnings;
  for (const scen::ValidationRow& r : rows) {
    for (const std::string& w : r.warnings) warnings += "<li>" + escape(r.id + ": " + w) + "</li>";
  }
  if (!warnings.empty()) {
    body += section("warnings", "Published figures that disagree",
                    "<p>A published time and FLOP rate that imply other FLOPs per iteration than "
                    "the row's convention counts.</p><ul>" +
                        warnings + "</ul>");
  }
  return page("validate", "trainsim validate · " + source,
              fmt::format("trainsim {} · analytic fidelity, model {}", kVersion,
                          exec::kAnalyticModelVersion),
              body);
}

void write_run_report(const std::string& dir, const exec::Result& r, const scen::Scenario& s,
                      const calib::Profile& profile) {
  const std::filesystem::path d = make_dir(dir);
  write_file(d / "index.html", run_report_html(r, s, profile));
  write_file(d / "results.json", result_json_text(r, s, profile));
  std::string csv = "field,value\n";
  flatten_csv(result_json(r, s, profile), "", csv);
  write_file(d / "results.csv", csv);
}

void write_sweep_report(const std::string& dir, const scen::SweepOutcome& o,
                        const std::optional<PointDetail>& best,
                        const std::optional<PointDetail>& base) {
  const std::filesystem::path d = make_dir(dir);
  write_file(d / "index.html", sweep_report_html(o, best, base));
  // Streamed: a large sweep's JSON is hundreds of megabytes.
  const std::filesystem::path json_path = d / "results.json", csv_path = d / "results.csv";
  std::ofstream json(json_path, std::ios::binary);
  write_sweep_json(json, o);
  std::ofstream csv(csv_path, std::ios::binary);
  write_sweep_csv(csv, o);
  for (const auto& [stream, path] : {std::pair{&json, json_path}, std::pair{&csv, csv_path}}) {
    stream->flush();
    if (!*stream) {
      throw Error(ErrorKind::kRuntime, "cannot write the report file", {path.string(), 0, ""});
    }
  }
}

void write_validation_report(const std::string& dir, const std::vector<scen::ValidationRow>& rows,
                             const scen::ValidationSummary& summary, const std::string& source) {
  const std::filesystem::path d = make_dir(dir);
  write_file(d / "index.html", validation_report_html(rows, summary, source));
  write_file(d / "results.json", validation_json(rows, summary).dump(2) + "\n");
  std::string csv =
      "id,source,pred_iter_s,pred_tokens_s,pred_mfu,pred_tflops_gpu,pred_hfu,pub_iter_s,"
      "pub_tokens_s,pub_mfu,pub_tflops_gpu,mfu_err_pts,iter_err_pct,tflops_err_pct,"
      "error_message\n";
  auto cell = [](const std::optional<double>& v) { return v ? fmt::format("{}", *v) : ""; };
  auto text = [](const std::string& t) {
    if (t.find_first_of(",\"\n") == std::string::npos) return t;
    std::string q = "\"";
    for (const char c : t) {
      if (c == '"') q += '"';
      q += c;
    }
    return q + "\"";
  };
  for (const scen::ValidationRow& r : rows) {
    csv += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", text(r.id), text(r.source),
                       cell(r.predicted.iter_s), cell(r.predicted.tokens_s), cell(r.predicted.mfu),
                       cell(r.predicted.tflops_gpu), cell(r.predicted.hfu),
                       cell(r.published.iter_s), cell(r.published.tokens_s), cell(r.published.mfu),
                       cell(r.published.tflops_gpu), cell(r.mfu_err_pts), cell(r.iter_err_pct),
                       cell(r.tflops_err_pct), text(r.error_message));
  }
  write_file(d / "results.csv", csv);
}

namespace html {
std::string page(const std::string& kind, const std::string& title, const std::string& meta,
                 const std::string& body) {
  return reports::page(kind, title, meta, body);
}
std::string section(const std::string& id, const std::string& heading, const std::string& body) {
  return reports::section(id, heading, body);
}
std::string figure(const std::string& chart, const std::string& caption) {
  return reports::figure(chart, caption);
}
std::string cards(const std::vector<std::pair<std::string, std::string>>& items) {
  return reports::cards(items);
}
std::string table(const std::string& id, const std::vector<std::string>& head,
                  const std::vector<std::vector<std::string>>& rows) {
  return reports::table(id, head, rows);
}
std::string meta_line(const std::string& fidelity, const std::string& model_version,
                      const std::string& calibration) {
  return fmt::format("trainsim {} · {} fidelity, model {} · calibration {}", kVersion, fidelity,
                     model_version, calibration);
}
void write_files(const std::string& dir,
                 const std::vector<std::pair<std::string, std::string>>& files) {
  const std::filesystem::path d = make_dir(dir);
  for (const auto& [name, text] : files) write_file(d / name, text);
}
svg::StackedBars breakdown_chart(const std::string& id, const std::string& title) {
  return ::trainsim::reports::breakdown_chart(id, title, false);
}

std::vector<double> breakdown_values(const exec::Breakdown& b) {
  return ::trainsim::reports::breakdown_values(b);
}

}  // namespace html

}  // namespace trainsim::reports
