#include "reports/goodput_report.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include "reports/html_report.h"
#include "reports/svg.h"
#include "reports/sweep_report.h"
#include "sim/core/error.h"
#include "sim/core/version.h"

namespace trainsim::reports {
namespace {

constexpr double kDay = 86400.0;

struct Part {
  const char* key;    // JSON name
  const char* label;  // text and chart label
  double goodput::TimeSplit::*field;
};
const std::vector<Part>& parts() {
  static const std::vector<Part> kParts = {
      {"training_s", "training", &goodput::TimeSplit::training_s},
      {"lost_work_s", "lost work", &goodput::TimeSplit::lost_s},
      {"checkpoint_s", "checkpoint stalls", &goodput::TimeSplit::checkpoint_s},
      {"slow_host_s", "slow hosts", &goodput::TimeSplit::slow_s},
      {"detection_s", "detection", &goodput::TimeSplit::detection_s},
      {"diagnosis_s", "diagnosis", &goodput::TimeSplit::diagnosis_s},
      {"repair_wait_s", "waiting for hosts", &goodput::TimeSplit::repair_s},
      {"restart_s", "restart", &goodput::TimeSplit::restart_s},
  };
  return kParts;
}

std::string pct(double x) { return fmt::format("{:.2f} %", 100 * x); }

std::string interval_origin(const GoodputOutcome& o) {
  if (!o.setup.interval_auto) return "reliability.checkpoint.interval";
  const double daly = o.summary.daly_s, used = o.setup.params.interval_s;
  if (!std::isfinite(daly)) return "auto: the run's length, as there is no Daly interval";
  if (used < daly) return "auto: Daly's is longer than the run, capped at its length";
  if (used > daly) return "auto: Daly's, raised to the 1 s minimum";
  return "auto: Daly";
}

double bytes_total(const GoodputOutcome& o) { return o.setup.checkpoint.unique_bytes; }

}  // namespace

double tokens_per_day(const GoodputOutcome& o, double ettr) {
  return ettr * o.setup.tokens_per_s * kDay;
}

std::string goodput_text(const GoodputOutcome& o) {
  const goodput::Summary& s = o.summary;
  const goodput::Params& p = o.setup.params;
  const goodput::Components& u = p.units;
  std::string out;
  out += fmt::format("trainsim goodput · {} · {} days x {} trials (seed {})\n", o.scenario, s.days,
                     s.trials, p.seed);
  out += fmt::format(
      "job: {} GPUs, {} hosts, {} NICs, {} cables, {} switches; {} spare hosts\n",
      thousands(static_cast<std::size_t>(u.gpus)), thousands(static_cast<std::size_t>(u.hosts)),
      thousands(static_cast<std::size_t>(u.nics)), thousands(static_cast<std::size_t>(u.links)),
      thousands(static_cast<std::size_t>(u.switches)), p.spare_hosts);
  out += fmt::format("iteration {:.3f} s ({} fidelity), {} tokens/s while training\n\n",
                     o.setup.iteration_time_s, o.setup.fidelity, human(o.setup.tokens_per_s));
  out += fmt::format("ETTR           {} ± {} (95 % confidence, {} trials)\n", pct(s.ettr.mean),
                     pct(s.ettr.ci95), s.trials);
  out += fmt::format("goodput        {} tokens/day ± {} (ideal {})\n",
                     human(tokens_per_day(o, s.ettr.mean)), human(tokens_per_day(o, s.ettr.ci95)),
                     human(tokens_per_day(o, 1.0)));
  out += fmt::format("interruptions  {:.1f} per run; crashes and hangs every {:.2f} h (job MTBF)\n\n",
                     s.mean_interruptions, s.job_mtbf_s / 3600);

  out += "time split (mean per run)        hours     share\n";
  const double total = s.mean_split.total();
  for (const Part& part : parts()) {
    const double v = s.mean_split.*part.field;
    out += fmt::format("  {:<28} {:>9.2f}  {:>8}\n", part.label, v / 3600,
                       pct(total > 0 ? v / total : 0));
  }

  out += "\nevents by class (mean per run)   per run   unit      units   rate\n";
  for (std::size_t c = 0; c < p.classes.size(); ++c) {
    const goodput::FailureClass& fc = p.classes[c];
    const bool per_day = fc.scope == goodput::Scope::kJob;
    out += fmt::format("  {:<28} {:>9.1f}   {:<6} {:>8}   {}\n", fc.name, s.mean_by_class[c],
                       goodput::to_string(fc.scope),
                       thousands(static_cast<std::size_t>(u.count(fc.scope))),
                       per_day ? fmt::format("{:.4g}/day", fc.rate_per_unit_h * 24)
                               : fmt::format("{:.5g} FIT", fc.rate_per_unit_h * 1e9));
  }

  const goodput::CheckpointSpec& c = o.setup.checkpoint;
  const goodput::CheckpointCosts& k = o.setup.checkpoint_costs;
  out += fmt::format(
      "\ncheckpoint     {:.3g} TB in all, {:.3g} GB per GPU; blocking {:.3g} s ({}), "
      "background write {:.3g} s\n",
      bytes_total(o) / 1e12, c.state_bytes_per_gpu / 1e9, k.blocking_s,
      c.in_memory ? "to host memory" : "to storage", k.async_s);
  out += fmt::format(
      "restart        relaunch {:.0f} s + communicator init {:.3g} s ({}{}) + load {:.3g} s ({})\n",
      p.relaunch_s, p.comm_init_s, o.setup.comm_init_store,
      o.setup.fast_comm_init ? ", ordered groups" : "", p.checkpoint_load_s,
      c.one_replica_load ? "one replica read, broadcast over DP" : "every replica reads");
  if (p.slow_iteration_factor > 1) {
    out += fmt::format("slow host      iterations {:.3f}x longer until evicted after {:.0f} s\n",
                       p.slow_iteration_factor, p.detect_slow_s);
  }

  out += "\ncheckpoint interval\n";
  out += fmt::format("  used                 {:>9.0f} s  ({})\n", p.interval_s, interval_origin(o));
  if (std::isfinite(s.young_s)) {
    out += fmt::format("  Young sqrt(2*d*MTBF) {:>9.0f} s  (d = {:.3g} s, MTBF = {:.0f} s)\n",
                       s.young_s, p.checkpoint_blocking_s, s.job_mtbf_s);
    out += fmt::format("  Daly                 {:>9.0f} s\n", s.daly_s);
  } else {
    out += "  Young, Daly          none: no crash or hang rate is set (the failures that lose "
           "work), so no interval is optimal for failures (JSON: null)\n";
  }
  if (o.search) {
    // Whole seconds, as the search tries them, but for the interval used when it wins (which
    // `auto` runs again).
    out += fmt::format(
        "  best (Monte Carlo)   {:>9.0f} s  ETTR {} ({}{} intervals{}, the same trials)\n",
        o.search->best_s, pct(o.search->best_ettr),
        o.search->best_s == p.interval_s ? "the interval used; " : "",
        o.search->intervals_s.size(), o.search->fit_s > 0 ? " and their parabola's vertex" : "");
  }
  if (!o.setup.notes.empty()) {
    out += "\nnotes\n";
    for (const std::string& n : o.setup.notes) out += "  " + n + "\n";
  }
  return out;
}

nlohmann::ordered_json goodput_json(const GoodputOutcome& o) {
  const goodput::Summary& s = o.summary;
  const goodput::Params& p = o.setup.params;
  nlohmann::ordered_json j;
  j["trainsim_version"] = kVersion;
  j["scenario"] = o.scenario;
  j["days"] = s.days;
  j["trials"] = s.trials;
  j["seed"] = p.seed;
  j["iteration_time_s"] = o.setup.iteration_time_s;
  j["tokens_per_s"] = o.setup.tokens_per_s;
  j["fidelity"] = o.setup.fidelity;
  j["ettr"] = {{"mean", s.ettr.mean}, {"sd", s.ettr.sd}, {"ci95", s.ettr.ci95},
               // ETTR is a share of the wall time: the interval's ends are clamped to [0, 1]
               // (the normal half-width alone reached 1.003 on a short, quiet run).
               {"low", std::max(0.0, s.ettr.mean - s.ettr.ci95)},
               {"high", std::min(1.0, s.ettr.mean + s.ettr.ci95)}};
  j["goodput_tokens_per_day"] = {{"mean", tokens_per_day(o, s.ettr.mean)},
                                 {"ci95", tokens_per_day(o, s.ettr.ci95)},
                                 {"ideal", tokens_per_day(o, 1.0)}};
  nlohmann::ordered_json split;
  for (const Part& part : parts()) split[part.key] = s.mean_split.*part.field;
  j["time_split_s"] = split;
  j["interruptions"] = s.mean_interruptions;
  j["checkpoints"] = s.mean_checkpoints;
  j["job_mtbf_s"] = s.job_mtbf_s;
  nlohmann::ordered_json classes = nlohmann::ordered_json::array();
  for (std::size_t c = 0; c < p.classes.size(); ++c) {
    const goodput::FailureClass& fc = p.classes[c];
    classes.push_back({{"name", fc.name},
                       {"key", o.setup.class_keys[c]},
                       {"scope", goodput::to_string(fc.scope)},
                       {"effect", goodput::to_string(fc.effect)},
                       {"units", p.units.count(fc.scope)},
                       {"rate_per_unit_h", fc.rate_per_unit_h},
                       {"evicts_host", fc.needs_spare},
                       {"events", s.mean_by_class[c]}});
  }
  j["classes"] = classes;
  const goodput::Components& u = p.units;
  j["components"] = {{"gpus", u.gpus},   {"hosts", u.hosts},       {"nics", u.nics},
                     {"links", u.links}, {"switches", u.switches}, {"spare_hosts", p.spare_hosts}};
  const goodput::CheckpointSpec& c = o.setup.checkpoint;
  const goodput::CheckpointCosts& k = o.setup.checkpoint_costs;
  j["checkpoint"] = {{"interval_s", p.interval_s},
                     {"interval_auto", o.setup.interval_auto},
                     {"unique_bytes", c.unique_bytes},
                     {"bytes_per_gpu", c.state_bytes_per_gpu},
                     {"in_memory", c.in_memory},
                     {"one_replica_load", c.one_replica_load},
                     {"blocking_s", k.blocking_s},
                     {"async_s", k.async_s},
                     {"load_s", k.load_s},
                     {"broadcast_s", c.broadcast_s}};
  j["restart"] = {{"relaunch_s", p.relaunch_s},
                  {"comm_init_s", p.comm_init_s},
                  {"comm_init_store", o.setup.comm_init_store},
                  {"fast_comm_init", o.setup.fast_comm_init},
                  {"checkpoint_load_s", p.checkpoint_load_s}};
  j["recovery"] = {{"detect_crash_s", p.detect_crash_s},
                   {"detect_hang_s", p.detect_hang_s},
                   {"detect_slow_s", p.detect_slow_s},
                   {"auto_diagnosis", p.auto_diagnosis},
                   {"auto_share", p.auto_share},
                   {"self_check_s", p.auto_diagnosis_s},
                   {"manual_diagnosis_s", p.manual_diagnosis_s},
                   {"host_repair_s", p.host_repair_s},
                   {"slow_iteration_factor", p.slow_iteration_factor}};
  nlohmann::ordered_json interval = {{"used_s", p.interval_s},
                                     {"young_s", s.young_s},
                                     {"daly_s", s.daly_s}};
  if (o.search) {
    interval["best_s"] = o.search->best_s;
    interval["best_ettr"] = o.search->best_ettr;
    nlohmann::ordered_json curve = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < o.search->intervals_s.size(); ++i) {
      curve.push_back({{"interval_s", o.search->intervals_s[i]}, {"ettr", o.search->ettr[i]}});
    }
    interval["curve"] = curve;
  }
  j["checkpoint_interval"] = interval;
  j["notes"] = o.setup.notes;
  return j;
}

std::string goodput_report_html(const GoodputOutcome& o) {
  const goodput::Summary& s = o.summary;
  const goodput::Params& p = o.setup.params;
  std::string body = html::section(
      "summary", "Summary",
      html::cards({{"ETTR", pct(s.ettr.mean) + " ± " + pct(s.ettr.ci95)},
                   {"goodput", human(tokens_per_day(o, s.ettr.mean)) + " tokens/day"},
                   {"interruptions per run", fmt::format("{:.1f}", s.mean_interruptions)},
                   {"job MTBF", fmt::format("{:.2f} h", s.job_mtbf_s / 3600)},
                   {"checkpoint interval", fmt::format("{:.0f} s", p.interval_s)}}) +
          html::table("goodput-setup", {"", "#value"},
                      {{"days x trials", fmt::format("{} x {}", s.days, s.trials)},
                       {"GPUs / hosts / spares", fmt::format("{} / {} / {}", p.units.gpus,
                                                             p.units.hosts, p.spare_hosts)},
                       {"iteration time", fmt::format("{:.3f} s", o.setup.iteration_time_s)},
                       {"tokens/s while training", human(o.setup.tokens_per_s)}}));

  svg::StackedBars split;
  split.id = "goodput-split";
  split.title = "Where the run's time goes";
  split.unit = "h";
  split.normalize = true;
  svg::StackedBars::Bar bar;
  bar.label = "mean run";
  for (std::size_t i = 0; i < parts().size(); ++i) {
    split.segments.push_back(parts()[i].label);
    split.colors.push_back(svg::palette(i));
    bar.values.push_back(s.mean_split.*parts()[i].field / 3600);
  }
  split.bars.push_back(bar);
  std::vector<std::vector<std::string>> rows;
  for (const Part& part : parts()) {
    const double v = s.mean_split.*part.field;
    rows.push_back({part.label, fmt::format("{:.2f}", v / 3600),
                    pct(s.mean_split.total() > 0 ? v / s.mean_split.total() : 0)});
  }
  body += html::section("split", "Time split",
                        html::figure(svg::stacked_bars(split),
                                     "Mean over the trials; the parts add up to the run.") +
                            html::table("goodput-split-table", {"part", "#hours", "#share"}, rows));

  if (o.search) {
    svg::Scatter curve;
    curve.id = "goodput-interval";
    curve.title = "ETTR against the checkpoint interval";
    curve.x_label = "checkpoint interval (s)";
    curve.y_label = "ETTR (%)";
    curve.log_x = true;
    curve.x_limit =
        s.young_s > 0 && std::isfinite(s.young_s) ? std::optional<double>(s.young_s) : std::nullopt;
    curve.x_limit_label = "Young";
    curve.kinds = {{"Monte Carlo", svg::palette(0), svg::Scatter::Marker::kDot},
                   {"best", svg::palette(3), svg::Scatter::Marker::kDiamond}};
    for (std::size_t i = 0; i < o.search->intervals_s.size(); ++i) {
      curve.points.push_back({o.search->intervals_s[i], 100 * o.search->ettr[i], 0,
                              fmt::format("{:.0f} s: {}", o.search->intervals_s[i],
                                          pct(o.search->ettr[i]))});
    }
    curve.points.push_back({o.search->best_s, 100 * o.search->best_ettr, 1,
                            fmt::format("best {:.0f} s: {}", o.search->best_s,
                                        pct(o.search->best_ettr))});
    body += html::section(
        "interval", "Checkpoint interval",
        html::figure(svg::scatter(curve),
                     std::isfinite(s.young_s)
                         ? fmt::format("The same trials at every interval. Young {:.0f} s, Daly "
                                       "{:.0f} s, best {:.0f} s, used {:.0f} s.",
                                       s.young_s, s.daly_s, o.search->best_s, p.interval_s)
                         : fmt::format("The same trials at every interval (no crash or hang rate "
                                       "set: no Young or Daly interval), best {:.0f} s, used "
                                       "{:.0f} s.",
                                       o.search->best_s, p.interval_s)));
  }

  svg::Bars events;
  events.id = "goodput-classes";
  events.title = "Events per run by class";
  for (std::size_t c = 0; c < p.classes.size(); ++c) {
    events.bars.push_back({p.classes[c].name, s.mean_by_class[c], "", false, false,
                           fmt::format("{}: {:.1f} per run", p.classes[c].name,
                                       s.mean_by_class[c])});
  }
  body += html::section("classes", "Interruptions by class",
                        html::figure(svg::bars(events), "Mean events per run of each class."));
  std::string notes = "<ul>";
  for (const std::string& n : o.setup.notes) notes += "<li>" + svg::escape(n) + "</li>";
  body += html::section("notes", "Notes", notes + "</ul>\n");
  return html::page("goodput", "trainsim goodput · " + o.scenario,
                    fmt::format("trainsim {} · {} days x {} trials, seed {}", kVersion, s.days,
                                s.trials, p.seed),
                    body);
}

void write_goodput_report(const std::string& dir, const GoodputOutcome& o) {
  const nlohmann::ordered_json j = goodput_json(o);
  std::string csv = "part,seconds\n";
  for (const Part& part : parts()) {
    csv += fmt::format("{},{}\n", part.key, o.summary.mean_split.*part.field);
  }
  html::write_files(dir, {{"index.html", goodput_report_html(o)},
                          {"results.json", j.dump(2) + "\n"},
                          {"results.csv", csv}});
}

}  // namespace trainsim::reports
