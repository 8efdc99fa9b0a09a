#include "cli/topo_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/output.h"
#include "scenarios/presets.h"
#include "scenarios/scenario.h"
#include "scenarios/schema.h"
#include "sim/core/error.h"
#include "sim/core/limits.h"
#include "sim/core/version.h"
#include "topology/clos.h"
#include "topology/fabric_file.h"
#include "topology/routing.h"
#include "topology/stats.h"
#include "topology/traffic.h"

namespace trainsim::cli {
namespace {

using nlohmann::ordered_json;

double to_gbps(double Bps) { return Bps * 8 / 1e9; }
double to_tbps(double Bps) { return Bps * 8 / 1e12; }

const char* kind_name(topo::NodeKind k) {
  switch (k) {
    case topo::NodeKind::kGpu:
      return "gpu";
    case topo::NodeKind::kNvSwitch:
      return "nvswitch";
    case topo::NodeKind::kNic:
      return "nic";
    case topo::NodeKind::kSwitch:
      break;
  }
  return "switch";
}

const char* link_kind_name(topo::LinkKind k) {
  switch (k) {
    case topo::LinkKind::kNvlink:
      return "nvlink";
    case topo::LinkKind::kPcie:
      return "pcie";
    case topo::LinkKind::kNicUp:
      return "nic-up";
    case topo::LinkKind::kNicDown:
      return "nic-down";
    case topo::LinkKind::kUp:
      return "up";
    case topo::LinkKind::kDown:
      break;
  }
  return "down";
}

// The scenario the fabric comes from. Without a scenario file, the default scenario with one
// pipeline stage, so that any multiple of the TP degree (the GPUs of a server) is a valid job;
// options that stand for scenario keys are applied as --set before the user's own.
scen::Scenario load_scenario(const TopoArgs& a) {
  if (!a.cluster.empty() && !scen::cluster_preset(a.cluster)) {
    throw_input(fmt::format("unknown cluster preset `{}`", a.cluster), {"--cluster", 0, a.cluster},
                scen::did_you_mean(a.cluster, scen::preset_names(scen::PresetKind::kCluster)));
  }
  std::vector<std::string> sets;
  if (a.scenario.empty()) sets.push_back("parallel.pp=1");
  if (!a.cluster.empty()) sets.push_back("cluster.preset=" + a.cluster);
  if (a.gpus > 0) sets.push_back("cluster.gpus=" + std::to_string(a.gpus));
  if (!a.mode.empty()) sets.push_back("network.routing.mode=" + a.mode);
  if (!a.hash.empty()) sets.push_back("network.routing.hash=" + a.hash);
  if (a.qps > 0) sets.push_back("network.routing.qps_per_connection=" + std::to_string(a.qps));
  sets.insert(sets.end(), a.sets.begin(), a.sets.end());
  return a.scenario.empty() ? scen::load_scenario_string("", "<default>", sets)
                            : scen::load_scenario_file(a.scenario, sets);
}

// The work limits of docs/reliability.md: a graph of more endpoints than kMaxTopoEndpoints, or a
// traffic pattern of more flows than kMaxTopoFlows, is refused unless --force is given; beyond
// kMaxTopoEndpointsForced the graph would not fit in memory and is refused even then.
constexpr std::int64_t kMaxTopoEndpointsForced = std::int64_t{1} << 22;

void check_work(std::int64_t amount, std::int64_t limit, bool force, const std::string& what,
                const ErrorContext& where) {
  if (amount <= limit || force) return;
  throw_input(fmt::format("{} is {}, above the work limit of {}", what, amount, limit), where,
              "add --force to run it anyway (it may take minutes and gigabytes); see "
              "docs/reliability.md");
}

void check_endpoints(std::int64_t endpoints, bool force, const ErrorContext& where) {
  if (endpoints > kMaxTopoEndpointsForced) {
    throw_input(fmt::format("a fabric of {} endpoints would not fit in memory (at most {})",
                            endpoints, kMaxTopoEndpointsForced),
                where, "see docs/reliability.md");
  }
  check_work(endpoints, limits::kMaxTopoEndpoints, force, "the fabric's endpoint count", where);
}

topo::ClusterGraph build_graph(const TopoArgs& a, const scen::Scenario& s) {
  if (a.fat_tree != -1) {
    const ErrorContext where{"--fat-tree", 0, std::to_string(a.fat_tree)};
    if (a.fat_tree < 4 || a.fat_tree > limits::kMaxFatTreeK || a.fat_tree % 2 != 0) {
      throw_input(fmt::format("a k-ary fat tree needs an even k from 4 to {}, got {}",
                              limits::kMaxFatTreeK, a.fat_tree),
                  where, "use k = 4, 6, 8, ...");
    }
    const std::int64_t k = a.fat_tree;
    check_endpoints(k * k * k / 4, a.force, where);
    return topo::build_fat_tree(a.fat_tree);
  }
  if (!a.topology_file.empty()) return topo::read_fabric_file(a.topology_file, s.cluster);
  check_endpoints(s.cluster.gpus, a.force, scen::origin_of(s, "cluster.gpus"));
  return topo::cluster_graph(s.cluster);  // the scenario's cluster.fabric.file, if it names one
}

void fail_named(const topo::ClusterGraph& g, const std::vector<std::string>& names,
                topo::NodeKind kind, const char* option, topo::FailureSet& failures) {
  if (names.empty()) return;
  std::map<std::string, topo::NodeId> by_name;
  std::vector<std::string> candidates;
  for (topo::NodeId n = 0; n < g.node_count(); ++n) {
    if (g.node(n).kind != kind) continue;
    by_name.emplace(g.node_name(n), n);
    candidates.push_back(g.node_name(n));
  }
  for (const std::string& name : names) {
    const auto it = by_name.find(name);
    if (it == by_name.end()) {
      throw_input(fmt::format("no {} named `{}` in this fabric", kind_name(kind), name),
                  {option, 0, name}, scen::did_you_mean(name, candidates));
    }
    failures.fail_node(it->second);
  }
}

std::string ratio_text(double r) {
  if (std::isinf(r)) return "cut (every uplink failed)";
  return r > 0 ? fmt::format("{:.2f}:1", r) : "top";
}

std::string fabric_text(const topo::FabricSummary& f) {
  std::string out = fmt::format("fabric: {}\n", f.description);
  out += fmt::format("  {} GPUs, {} servers, {} NICs; {} nodes, {} links\n", f.gpus, f.servers,
                     f.nics, f.nodes, f.links);
  out += fmt::format("  {:<4} {:<6} {:>8} {:>12} {:>10} {:>11} {:>9}  {}\n", "tier", "name",
                     "switches", "down cables", "up cables", "down Tb/s", "up Tb/s",
                     "oversubscription");
  for (const topo::TierSummary& t : f.tiers) {
    out += fmt::format("  {:<4} {:<6} {:>8} {:>12} {:>10} {:>11.1f} {:>9.1f}  {}\n", t.tier, t.name,
                       t.switches, t.down_cables, t.up_cables, to_tbps(t.down_Bps),
                       to_tbps(t.up_Bps), ratio_text(t.oversubscription));
  }
  std::vector<std::string> cables;
  for (const topo::CableSummary& c : f.cables) {
    cables.push_back(fmt::format("{} {} x {} Gb/s", c.name, c.cables, to_gbps(c.Bps)));
  }
  out += fmt::format("  cables: {}\n", fmt::join(cables, ", "));
  out += fmt::format("  injection {:.1f} Tb/s, bisection {:.1f} Tb/s (one direction){}\n",
                     to_tbps(f.injection_Bps), to_tbps(f.bisection_Bps),
                     f.failed_cables > 0
                         ? fmt::format("; {} cable{} down, the Tb/s count those up (bisection an "
                                       "upper bound)",
                                       f.failed_cables, f.failed_cables == 1 ? "" : "s")
                         : "");
  return out;
}

ordered_json fabric_json(const topo::FabricSummary& f) {
  ordered_json tiers = ordered_json::array();
  for (const topo::TierSummary& t : f.tiers) {
    tiers.push_back({{"tier", t.tier},
                     {"name", t.name},
                     {"switches", t.switches},
                     {"down_cables", t.down_cables},
                     {"up_cables", t.up_cables},
                     {"down_Bps", t.down_Bps},
                     {"up_Bps", t.up_Bps},
                     {"oversubscription", t.oversubscription > 0 && std::isfinite(t.oversubscription)
                                              ? ordered_json(t.oversubscription)
                                              : ordered_json(nullptr)}});
  }
  ordered_json cables = ordered_json::array();
  for (const topo::CableSummary& c : f.cables) {
    cables.push_back({{"name", c.name}, {"cables", c.cables}, {"Bps", c.Bps}});
  }
  return {{"description", f.description},
          {"gpus", f.gpus},
          {"servers", f.servers},
          {"nics", f.nics},
          {"nodes", f.nodes},
          {"links", f.links},
          {"tiers", tiers},
          {"cables", cables},
          {"injection_Bps", f.injection_Bps},
          {"bisection_Bps", f.bisection_Bps},
          {"failed_cables", f.failed_cables}};
}

std::string routing_text(const topo::RoutingConfig& r) {
  return fmt::format("routing: {}, hash {}, seed {} ({}), {} QP{} per connection\n",
                     topo::to_string(r.mode), topo::to_string(r.hash), r.seed,
                     topo::to_string(r.seed_scope), r.qps_per_connection,
                     r.qps_per_connection == 1 ? "" : "s");
}

ordered_json routing_json(const topo::RoutingConfig& r) {
  return {{"mode", topo::to_string(r.mode)},
          {"hash", topo::to_string(r.hash)},
          {"seed", r.seed},
          {"seed_scope", topo::to_string(r.seed_scope)},
          {"qps_per_connection", r.qps_per_connection}};
}

std::string traffic_name(const topo::TrafficSpec& t, int gpus) {
  std::string out = topo::to_string(t.pattern);
  if (t.pattern == topo::TrafficPattern::kDpRing) {
    return out + fmt::format(" (tp {}, pp {}, dp {}{})", t.tp, t.pp, gpus / (t.tp * t.pp),
                             t.pp_before_dp ? ", order tp-cp-pp-dp" : "");
  }
  out += t.group > 0 ? fmt::format(" in groups of {} GPUs", t.group)
                     : fmt::format(" over {} GPUs", gpus);
  if (t.pattern == topo::TrafficPattern::kPermutation) out += fmt::format(" (seed {})", t.seed);
  return out;
}

std::string load_text(const topo::ClusterGraph& g, const topo::TrafficSpec& t,
                      const topo::LoadSummary& l) {
  std::string out = fmt::format("traffic: {}: {} connections, {} flows",
                                traffic_name(t, g.gpu_count()), l.connections, l.flows);
  if (!l.unrouted.empty()) out += fmt::format(", {} without a path", l.unrouted.size());
  out += "\n";
  out += fmt::format("  {:<14} {:>7} {:>7} {:>10} {:>11} {:>9}\n", "links", "count", "used",
                     "max flows", "mean flows", "max/mean");
  for (const topo::LinkClassLoad& c : l.classes) {
    out += fmt::format("  {:<14} {:>7} {:>7} {:>10.4g} {:>11.4f} {:>9}\n", c.name, c.links, c.used,
                       c.max, c.mean,
                       c.max_over_mean > 0 ? fmt::format("{:.2f}", c.max_over_mean) : "-");
  }
  if (!l.busiest.empty()) {
    out += "  busiest links:\n";
    for (const auto& [link, flows] : l.busiest) {
      out += fmt::format("    {:<28} {:.4g} flows\n", g.link_name(link), flows);
    }
  }
  return out;
}

ordered_json load_json(const topo::ClusterGraph& g, const topo::TrafficSpec& t,
                       const topo::LoadSummary& l) {
  ordered_json classes = ordered_json::array();
  for (const topo::LinkClassLoad& c : l.classes) {
    classes.push_back({{"name", c.name},
                       {"links", c.links},
                       {"used", c.used},
                       {"max_flows", c.max},
                       {"mean_flows", c.mean},
                       {"max_over_mean", c.max_over_mean > 0 ? ordered_json(c.max_over_mean)
                                                             : ordered_json(nullptr)}});
  }
  ordered_json busiest = ordered_json::array();
  for (const auto& [link, flows] : l.busiest) {
    busiest.push_back({{"link", g.link_name(link)}, {"id", link}, {"flows", flows}});
  }
  ordered_json j = {{"pattern", topo::to_string(t.pattern)},
                    {"group", t.group},
                    {"seed", t.seed},
                    {"connections", l.connections},
                    {"flows", l.flows},
                    {"unrouted", l.unrouted.size()},
                    {"classes", classes},
                    {"busiest", busiest}};
  if (t.pattern == topo::TrafficPattern::kDpRing) {
    j["tp"] = t.tp;
    j["pp"] = t.pp;
  }
  return j;
}

ordered_json graph_json(const topo::ClusterGraph& g, const topo::FailureSet& failures) {
  ordered_json nodes = ordered_json::array();
  for (topo::NodeId n = 0; n < g.node_count(); ++n) {
    const topo::NodeInfo& info = g.node(n);
    ordered_json node = {{"id", n}, {"name", g.node_name(n)}, {"kind", kind_name(info.kind)}};
    if (info.kind == topo::NodeKind::kSwitch) {
      node["tier"] = info.tier;
    } else {
      node["server"] = info.server;
    }
    nodes.push_back(std::move(node));
  }
  ordered_json links = ordered_json::array();
  for (topo::LinkId l = 0; l < g.link_count(); ++l) {
    links.push_back({{"id", l},
                     {"src", g.link_src(l)},
                     {"dst", g.link_dst(l)},
                     {"kind", link_kind_name(g.link_kind(l))},
                     {"Bps", g.link_capacity_Bps(l)},
                     {"latency_ps", g.link_latency(l).ps},
                     {"up", !failures.link_down(l)}});
  }
  return {{"trainsim_version", kVersion},
          {"description", g.description()},
          {"gpus", g.gpu_count()},
          {"servers", g.server_count()},
          {"nodes", nodes},
          {"links", links}};
}

}  // namespace

CLI::App* add_topo_command(CLI::App& app, TopoArgs& a) {
  CLI::App* c = app.add_subcommand(
      "topo",
      "Build a cluster's fabric: switches and links per tier, bisection, and the ECMP "
      "load of a traffic pattern");
  c->add_option("scenario", a.scenario, "Scenario YAML whose cluster and routing to use");
  auto* cluster = c->add_option("--cluster", a.cluster, "Cluster preset (trainsim --list-presets)");
  auto* gpus = c->add_option("--gpus", a.gpus, "GPUs (= --set cluster.gpus=N)")
                   ->check(CLI::Range(1, 1 << 26));
  c->add_option("--set", a.sets, "Override a scenario key (cluster.*, network.routing.*)")
      ->type_name("KEY=VALUE");
  auto* fat = c->add_option("--fat-tree", a.fat_tree,
                            "Build a k-ary fat tree of k^3/4 one-GPU hosts instead (even k, at least 4)")
                  ->type_name("K");
  auto* file = c->add_option("--topology-file", a.topology_file,
                             "Read the fabric from a GraphML (.graphml) or GraphViz (.dot) file "
                             "(format: docs/topology.md)");
  fat->excludes(file)->excludes(cluster)->excludes(gpus);
  file->excludes(cluster)->excludes(gpus);
  c->add_option("--traffic", a.traffic, "ring | dp-ring | permutation | all-to-all | incast")
      ->check(CLI::IsMember({"ring", "dp-ring", "permutation", "all-to-all", "incast"}));
  c->add_option("--group", a.group,
                "Traffic within groups of N consecutive GPUs (0 = all GPUs; not dp-ring)")
      ->check(CLI::Range(0, 1 << 26));
  c->add_option("--qps", a.qps, "QPs per connection (= network.routing.qps_per_connection)")
      ->check(CLI::Range(1, 1024));
  c->add_option("--mode", a.mode, "ecmp | pinned | spray | least-loaded (= network.routing.mode)")
      ->check(CLI::IsMember({"ecmp", "pinned", "spray", "least-loaded"}));
  c->add_option("--hash", a.hash, "crc32 | xor-fold | toeplitz (= network.routing.hash)")
      ->check(CLI::IsMember({"crc32", "xor-fold", "toeplitz"}));
  c->add_option("--fail-links", a.fail_links, "Fail K random switch-to-switch cables (by --seed)")
      ->check(CLI::Range(0, 1 << 26));
  c->add_option("--fail-switch", a.fail_switches, "Fail a switch by name, e.g. tor3 (repeatable)");
  c->add_option("--fail-nic", a.fail_nics, "Fail a NIC by name, e.g. nic17 (repeatable)");
  c->add_option("--seed", a.seed, "Seed of the permutation and of the failed links");
  c->add_option("--top", a.top, "Busiest links to list")->check(CLI::Range(0, 1 << 20));
  c->add_option("--export", a.export_format, "Write the graph (dot | json) instead of the summary")
      ->check(CLI::IsMember({"dot", "json"}));
  c->add_option("-o,--output", a.output, "Write to FILE instead of stdout")->check(output_file());
  c->add_option("--format", a.format, "text | json")->check(CLI::IsMember({"text", "json"}));
  c->add_flag("--force", a.force,
              "Go beyond the work limits (262,144 endpoints, 16,777,216 routed flows; "
              "docs/reliability.md)");
  return c;
}

int run_topo_command(const TopoArgs& a) {
  const scen::Scenario s = load_scenario(a);
  const topo::ClusterGraph graph = build_graph(a, s);

  topo::FailureSet failures(graph);
  // The scenario's own failures (cluster.fabric.failed_*), then the options'.
  try {
    topo::apply_fabric_failures(graph, s.cluster.fabric, failures);
  } catch (const Error& e) {
    throw Error(e.kind(), e.message(), scen::origin_of(s, e.where().field), e.hint());
  }
  if (a.fail_links > 0) {
    for (const topo::LinkId l : topo::pick_random_cables(graph, a.fail_links, a.seed)) {
      failures.fail_cable(l);
    }
  }
  fail_named(graph, a.fail_switches, topo::NodeKind::kSwitch, "--fail-switch", failures);
  fail_named(graph, a.fail_nics, topo::NodeKind::kNic, "--fail-nic", failures);

  if (a.export_format == "dot") {
    // The dot file is a fabric to read back (--topology-file) and has no notion of a part that is
    // down: written with failures it read back whole, the failures silently gone.
    if (!failures.failed_cables().empty() || !failures.failed_nodes().empty()) {
      throw_input("the dot export writes the fabric as built and cannot mark failed parts (" +
                      std::to_string(failures.failed_cables().size()) + " cables and " +
                      std::to_string(failures.failed_nodes().size()) +
                      " switches or NICs are failed here); read back, they would be up",
                  {"--export", 0, "dot"},
                  "use --export json (each link carries `up`), or export without the failures");
    }
    std::ostringstream out;
    topo::write_graphviz(graph, out);
    write_output(out.str(), a.output);
    return 0;
  }
  if (a.export_format == "json") {
    write_output(graph_json(graph, failures).dump(1) + "\n", a.output);
    return 0;
  }

  const topo::FabricSummary fabric = topo::summarize_fabric(graph, &failures);
  topo::Router router(graph, s.routing, failures);
  std::string text = fabric_text(fabric);
  // A ratio asked that whole uplinks cannot give (the Clos builder's; a fabric file has none).
  const std::vector<std::string> ratio_notes =
      a.topology_file.empty() ? topo::oversubscription_notes(s.cluster) : std::vector<std::string>{};
  for (const std::string& n : ratio_notes) text += "  note: " + n + "\n";
  text += routing_text(s.routing);
  ordered_json j = {{"trainsim_version", kVersion},
                    {"scenario", s.source},
                    {"fabric", fabric_json(fabric)},
                    {"routing", routing_json(s.routing)}};
  if (!ratio_notes.empty()) j["fabric"]["notes"] = ratio_notes;
  std::vector<std::string> failed;
  for (const topo::LinkId l : failures.failed_cables()) failed.push_back(graph.link_name(l));
  std::vector<std::string> failed_nodes;
  for (const topo::NodeId n : failures.failed_nodes()) failed_nodes.push_back(graph.node_name(n));
  if (!failed.empty() || !failed_nodes.empty()) {
    std::vector<std::string> parts;
    if (!failed.empty()) {
      constexpr std::size_t kListed = 8;
      const std::vector<std::string> shown(
          failed.begin(),
          failed.begin() + static_cast<std::ptrdiff_t>(std::min(kListed, failed.size())));
      parts.push_back(fmt::format("{} cable{} ({}{})", failed.size(), failed.size() == 1 ? "" : "s",
                                  fmt::join(shown, ", "), failed.size() > kListed ? ", ..." : ""));
    }
    if (!failed_nodes.empty()) parts.push_back(fmt::format("{}", fmt::join(failed_nodes, ", ")));
    text += fmt::format("failed: {}\n", fmt::join(parts, "; "));
  }
  j["failures"] = {{"cables", failed}, {"nodes", failed_nodes}};

  topo::LoadSummary load;
  if (!a.traffic.empty()) {
    topo::TrafficSpec t;
    t.pattern = *topo::traffic_pattern_from(a.traffic);
    t.group = a.group;
    t.seed = a.seed;
    t.tp = s.parallel.tp;
    t.pp = s.parallel.pp;
    t.cp = s.parallel.cp;
    t.pp_before_dp = s.parallel.order == plan::RankOrder::kTpCpPpDp;
    const std::int64_t connections = topo::connection_count(t, graph.gpu_count());
    check_work(connections * s.routing.qps_per_connection, limits::kMaxTopoFlows, a.force,
               fmt::format("the routed flow count ({} connections x {} QPs)", connections,
                           s.routing.qps_per_connection),
               {"--traffic", 0, a.traffic});
    load = topo::measure_load(router, t, s.routing.qps_per_connection, a.top);
    text += load_text(graph, t, load);
    j["traffic"] = load_json(graph, t, load);
  }
  write_output(a.format == "json" ? j.dump(2) + "\n" : text, a.output);
  if (!load.unrouted.empty()) topo::throw_unreachable(router, load.unrouted, load.flows);
  return 0;
}

}  // namespace trainsim::cli
