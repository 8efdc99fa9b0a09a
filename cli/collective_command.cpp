#include "cli/collective_command.h"

#include <fmt/format.h>

#include <iostream>
#include <optional>
#include <nlohmann/json.hpp>

#include "cli/run_checks.h"
#include "scenarios/run_config.h"
#include "scenarios/scenario.h"
#include "scenarios/sizes.h"
#include "sim/collective/flow.h"
#include "sim/collective/placement.h"
#include "sim/core/process_memory.h"
#include "sim/core/error.h"
#include "sim/core/version.h"
#include "sim/exec/analytic.h"
#include "sim/exec/collective_model.h"
#include "sim/plan/config.h"
#include "topology/clos.h"
#include "topology/fabric_file.h"
#include "topology/routing.h"

namespace trainsim::cli {
namespace {

coll::Kind parse_op(const std::string& op) {
  if (op == "all_reduce") return coll::Kind::kAllReduce;
  if (op == "all_gather") return coll::Kind::kAllGather;
  if (op == "reduce_scatter") return coll::Kind::kReduceScatter;
  if (op == "all_to_all") return coll::Kind::kAllToAll;
  if (op == "broadcast") return coll::Kind::kBroadcast;
  return coll::Kind::kSendRecv;
}

int dtype_bytes(const std::string& t) {
  if (t == "double" || t == "int64" || t == "uint64") return 8;
  if (t == "float" || t == "int32" || t == "uint32") return 4;
  if (t == "half" || t == "bfloat16") return 2;
  return 1;  // int8, uint8, fp8
}

// nccl-tests' -b MIN -e MAX -f 2: sizes double from MIN to MAX; "MIN" alone is one size.
std::vector<std::int64_t> parse_sizes(const std::string& text, int elem) {
  const ErrorContext where{"", 0, "--sizes"};
  const auto colon = text.find(':');
  const std::int64_t lo = scen::parse_size(text.substr(0, colon), where);
  const std::int64_t hi =
      colon == std::string::npos ? lo : scen::parse_size(text.substr(colon + 1), where);
  if (lo <= 0 || hi < lo) {
    throw_input("`" + text + "` is not a size range MIN:MAX with 0 < MIN ≤ MAX", where);
  }
  std::vector<std::int64_t> out;
  for (std::int64_t s = lo; s <= hi; s *= 2) {
    // nccl-tests rounds each size down to whole elements (and to at least one).
    out.push_back(std::max<std::int64_t>(elem, s / elem * elem));
    if (s > hi / 2) break;
  }
  return out;
}

}  // namespace

CLI::App* add_collective_command(CLI::App& app, CollectiveArgs& a) {
  CLI::App* c = app.add_subcommand(
      "collective", "nccl-tests-style table of one collective on a simulated cluster");
  c->add_option("--scenario", a.scenario, "Scenario whose cluster and profile to use");
  c->add_option("--cluster", a.cluster, "Cluster preset (overrides the scenario's)");
  c->add_option("--op", a.op, "all_reduce | all_gather | reduce_scatter | all_to_all | broadcast | "
                              "sendrecv")
      ->check(CLI::IsMember({"all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                             "broadcast", "sendrecv"}));
  c->add_option("--ranks", a.ranks, "Number of ranks (GPUs) taking part, 2 or more (sendrecv: 2)")
      ->check(CLI::Range(2, 1 << 24));
  c->add_option("--groups", a.groups,
                "Concurrent copies sharing the fabric, as the DP rings of every local GPU index: "
                "copy j uses GPU j (rail) or GPU (j+k) mod 8 of server k (spread); packed copies "
                "use disjoint servers")
      ->check(CLI::Range(1, 1 << 16));
  c->add_option("--placement", a.placement, "packed | rail | spread")
      ->check(CLI::IsMember({"packed", "rail", "spread"}));
  c->add_option("--sizes", a.sizes, "MIN:MAX doubling like nccl-tests -b -e -f 2, or one size "
                                    "(8, 64K, 1M, 8G)");
  c->add_option("--dtype", a.dtype, "Element type (as nccl-tests -d)")
      ->check(CLI::IsMember({"int8", "uint8", "int32", "uint32", "int64", "uint64", "half",
                             "float", "double", "bfloat16", "fp8"}));
  c->add_option("--algo", a.algorithm, "ring | tree | nvls (as NCCL_ALGO; default: fastest)")
      ->check(CLI::IsMember({"ring", "tree", "nvls"}));
  c->add_option("--proto", a.protocol, "LL | LL128 | Simple (as NCCL_PROTO; default: fastest)")
      ->check(CLI::IsMember({"LL", "LL128", "Simple"}));
  c->add_option("--fidelity", a.fidelity, "analytic | flow | packet")
      ->check(CLI::IsMember({"analytic", "flow", "packet"}));
  c->add_option("--set", a.sets,
                "Override a scenario key the collective reads (cluster.*, calibration.profile, "
                "collectives.*, network.*, simulation.seed)")
      ->type_name("KEY=VALUE");
  c->add_option("--format", a.format, "text | json")->check(CLI::IsMember({"text", "json"}));
  return c;
}

// The scenario keys a collective reads: the cluster, its calibration, NCCL's algorithm, protocol
// and point-to-point channels, the network (routing, congestion control, packets) and the seed of
// the flow and packet levels. Any other key (parallel.tp, model.*) changes nothing here.
bool collective_reads(const std::string& key) {
  for (const char* prefix : {"cluster.", "collectives.", "network."}) {
    if (key.starts_with(prefix)) return true;
  }
  return key == "calibration.profile" || key == "simulation.seed";
}

int run_collective_command(const CollectiveArgs& a) {
  for (const std::string& kv : a.sets) {
    const std::string key = kv.substr(0, kv.find('='));
    // The ranks are --ranks, placed on the cluster's fabric: the job's GPU count means nothing
    // here (it was resolved against the built-in scenario's TP 8 · PP 8 layout and refused).
    if (key == "cluster.gpus" || key == "gpus") {
      throw_input("`trainsim collective` runs --ranks ranks on the cluster's fabric; the job's GPU "
                  "count does not apply",
                  {"", 0, key}, "give the group size with --ranks");
    }
    if (!collective_reads(key)) {
      throw_input("`trainsim collective` does not read this key; it takes cluster.*, "
                  "calibration.profile, collectives.*, network.* and simulation.seed",
                  {"", 0, key},
                  "a collective of --ranks GPUs has no model or parallel layout; `trainsim run` "
                  "prices a training step's collectives");
    }
  }
  std::vector<std::string> sets;
  if (!a.cluster.empty()) sets.push_back("cluster.preset=" + a.cluster);
  sets.insert(sets.end(), a.sets.begin(), a.sets.end());
  const scen::Scenario s = a.scenario.empty() ? scen::load_scenario_string("", "<default>", sets)
                                              : scen::load_scenario_file(a.scenario, sets);
  const exec::RunConfig cfg = scen::make_run_config(s);
  coll::LinkModel links = exec::link_model(cfg);
  const coll::Placement placement = a.placement == "rail"     ? coll::Placement::kRail
                                    : a.placement == "spread" ? coll::Placement::kSpread
                                                              : coll::Placement::kPacked;
  const coll::Kind kind = parse_op(a.op);
  if (kind == coll::Kind::kSendRecv && a.ranks != 2 && a.ranks_given) {
    throw_input(fmt::format("sendrecv runs between 2 ranks, not {}", a.ranks), {"", 0, "--ranks"},
                "leave out --ranks, or give --ranks 2");
  }
  const int ranks = kind == coll::Kind::kSendRecv ? 2 : a.ranks;
  const coll::GroupShape shape = coll::placement_shape(ranks, placement, s.cluster);
  const int groups_in_use = a.groups;
  if (placement != coll::Placement::kPacked &&
      s.cluster.nics_per_node < s.cluster.gpus_per_node) {
    // One rank per server and copy: a server's NICs serve only the GPUs in use, at most one NIC
    // each (a GPU drives its own NIC; the model's NICs / GPUs per node shares them among all).
    links.nic_Bps_per_gpu =
        s.cluster.nic_Bps() * cfg.profile.nic_efficiency *
        std::min(1.0, static_cast<double>(s.cluster.nics_per_node) / std::max(1, groups_in_use));
  }
  coll::Choice choice = s.collectives;  // the scenario's collectives.*, then the flags
  if (a.algorithm == "ring") choice.algorithm = coll::Algorithm::kRing;
  if (a.algorithm == "tree") choice.algorithm = coll::Algorithm::kTree;
  if (a.algorithm == "nvls") choice.algorithm = coll::Algorithm::kNvls;
  if (a.protocol == "LL") choice.protocol = coll::Protocol::kLL;
  if (a.protocol == "LL128") choice.protocol = coll::Protocol::kLL128;
  if (a.protocol == "Simple") choice.protocol = coll::Protocol::kSimple;
  const int elem = dtype_bytes(a.dtype);
  const std::vector<std::int64_t> sizes = parse_sizes(a.sizes, elem);

  // Flow fidelity: the cluster graph with just enough servers for the ranks, calibrated link
  // capacities, and the scenario's routing (hash, seeds, QPs per connection).
  const bool flow = a.fidelity == "flow" || a.fidelity == "packet";
  if (flow) advise_huge_pages_for_heap();  // sim/core/process_memory.h: the same results, less time
  std::optional<topo::ClusterGraph> graph;
  std::optional<topo::Router> router;
  std::optional<topo::FailureSet> failures;
  std::vector<double> caps;
  const int gpn = std::max(1, s.cluster.gpus_per_node);
  const int groups = a.groups;
  if (placement != coll::Placement::kPacked && groups > gpn) {
    throw_input("at most " + std::to_string(gpn) + " concurrent copies with one rank per server",
                {"", 0, "--groups"});
  }
  const long servers_needed =
      placement == coll::Placement::kPacked ? (static_cast<long>(ranks) + gpn - 1) / gpn * groups
                                            : ranks;
  if (servers_needed * gpn > s.cluster.max_gpus()) {
    throw_infeasible(std::to_string(groups) + " copies of " + std::to_string(ranks) +
                         " ranks need " + std::to_string(servers_needed) + " servers; cluster `" +
                         s.cluster.name + "` holds " + std::to_string(s.cluster.max_gpus() / gpn),
                     {"", 0, "--groups"});
  }
  std::vector<coll::FlowCollectiveRequest> requests;
  if (flow) {
    topo::ClusterSpec spec = s.cluster;
    spec.gpus = static_cast<int>(servers_needed * gpn);
    graph.emplace(topo::cluster_graph(spec));
    caps = coll::calibrated_capacities(*graph, cfg.profile.nvlink.busbw_Bps / spec.gpu.nvlink_Bps,
                                       cfg.profile.nic_efficiency);
    // The fabric's failed cables and switches, as `run` applies them (they were ignored, even
    // a switch name the fabric does not have): picked on the fabric of the servers the copies
    // use.
    failures.emplace(*graph);
    try {
      topo::apply_fabric_failures(*graph, spec.fabric, *failures);
    } catch (const Error& e) {
      throw Error(e.kind(), e.message(), scen::origin_of(s, e.where().field), e.hint());
    }
    router.emplace(*graph, s.routing, *failures);
    const long servers_per_copy = (static_cast<long>(ranks) + gpn - 1) / gpn;
    for (int j = 0; j < groups; ++j) {
      coll::FlowCollectiveRequest req{kind, 0.0, {}};
      for (int i = 0; i < ranks; ++i) {
        if (placement == coll::Placement::kPacked) {
          req.ranks.push_back(static_cast<topo::GpuId>(j * servers_per_copy * gpn + i));
        } else if (placement == coll::Placement::kRail) {
          req.ranks.push_back(i * gpn + j);
        } else {
          req.ranks.push_back(i * gpn + (j + i) % gpn);
        }
      }
      requests.push_back(std::move(req));
    }
  }
  // The profile's measured α–β fit of this collective and rank count, found and priced as
  // `trainsim run` does (exec::priced_collective): at analytic fidelity, and at flow and packet
  // fidelity for a group inside one server, which run's flow backend prices in closed form too.
  const calib::MeasuredCollective* fit = exec::measured_fit(cfg.profile, kind, ranks);
  const bool fit_prices = fit != nullptr && (!flow || shape.nodes == 1);
  // With several copies the slowest one is reported (they start together).
  auto cost_of = [&](std::int64_t size) {
    if (!flow || fit_prices) {
      return exec::priced_collective(cfg.profile, kind, static_cast<double>(size), shape, links,
                                     choice);
    }
    for (auto& r : requests) r.bytes = static_cast<double>(size);
    coll::FlowCollectiveOptions fo;
    fo.seed = s.seed;
    fo.network = s.network;
    fo.packet = a.fidelity == "packet";
    fo.packet_config = s.packet;
    coll::Cost worst;
    for (const auto& r : coll::collective_flow_batch(requests, *graph, *router, caps, links,
                                                     choice, fo)) {
      if (r.cost.time_s >= worst.time_s) worst = r.cost;
    }
    return worst;
  };

  const std::string redop = kind == coll::Kind::kAllReduce || kind == coll::Kind::kReduceScatter
                                ? "sum"
                                : "none";
  const int root = kind == coll::Kind::kBroadcast ? 0 : -1;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  std::string table;
  table += fmt::format("#{:>12} {:>13} {:>9} {:>6} {:>6} {:>10} {:>8} {:>8}  {:<5} {}\n", "size",
                       "count", "type", "redop", "root", "time", "algbw", "busbw", "algo",
                       "proto");
  table += fmt::format("#{:>12} {:>13} {:>9} {:>6} {:>6} {:>10} {:>8} {:>8}\n", "(B)",
                       "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)");
  // As nccl-tests (its *GetCollByteCount, and the all_gather_perf log in tests/data):
  // all-gather, reduce-scatter and all-to-all split the size into each rank's part, print that
  // per-rank count and move the parts put together (nothing when a part rounds to no element:
  // 8 B of floats over 8 ranks is count 0 at the latency), the size column staying as asked.
  const bool per_rank = kind == coll::Kind::kAllGather || kind == coll::Kind::kReduceScatter ||
                        kind == coll::Kind::kAllToAll;
  for (const std::int64_t size : sizes) {
    const std::int64_t count = per_rank ? size / elem / ranks : size / elem;
    const std::int64_t moved = per_rank ? count * ranks * elem : size;
    // A call that moves nothing still costs its launch (nccl-tests times 11.7 µs where 32 B take
    // 11.8): priced as the one-element call, at zero bandwidth.
    const coll::Cost c = cost_of(moved > 0 ? moved : (per_rank ? elem * ranks : elem));
    const double algbw = static_cast<double>(moved) / c.time_s / 1e9;
    const double busbw = algbw * coll::busbw_factor(kind, ranks);
    // A row the fit prices names no algorithm or protocol: the fit's time is the whole call.
    table += fmt::format(" {:>12} {:>13} {:>9} {:>6} {:>6} {:>10.2f} {:>8.2f} {:>8.2f}  {:<5} {}\n",
                         size, count, a.dtype, redop, root, c.time_s * 1e6, algbw, busbw,
                         fit_prices ? "fit" : coll::to_string(c.algorithm),
                         fit_prices ? "-" : coll::to_string(c.protocol));
    rows.push_back({{"size_bytes", size},
                    {"count", count},
                    {"type", a.dtype},
                    {"redop", redop},
                    {"root", root},
                    {"time_us", c.time_s * 1e6},
                    {"algbw_GBps", algbw},
                    {"busbw_GBps", busbw},
                    {"algorithm", coll::to_string(c.algorithm)},
                    {"protocol", coll::to_string(c.protocol)},
                    {"priced_by", fit_prices ? "collectives_measured" : "model"},
                    // A call that moves nothing is priced as the one-element call (its latency)
                    // but carries no bytes.
                    {"nic_bytes_per_rank", moved > 0 ? c.nic_bytes : 0.0},
                    {"nvlink_bytes_per_rank", moved > 0 ? c.nvlink_bytes : 0.0}});
  }
  // What prices the table besides the model, said in the header and the JSON.
  std::vector<std::string> notes;
  if (fit_prices) {
    const double factor = coll::busbw_factor(kind, ranks);  // nccl-tests' busbw / algbw
    notes.push_back(fmt::format(
        "the profile's measured fit of {} over {} ranks (collectives_measured) prices every row, as "
        "in `trainsim run`: time = {:.2f} us + size x {:.4g} / {:.1f} GB/s; the algo and proto "
        "columns do not apply, --algo/--proto change nothing",
        fit->op, fit->ranks, fit->alpha_s * 1e6, factor, fit->busbw_Bps / 1e9));
  } else if (fit != nullptr) {
    notes.push_back(fmt::format(
        "the profile's measured fit of {} over {} ranks is not used: at {} fidelity a group across "
        "servers runs as flows, in `trainsim run` too",
        fit->op, fit->ranks, a.fidelity));
  }
  // Failed cables and switches: the closed form prices an intact fabric (checked against the
  // cluster all the same, as `run` checks them).
  if (a.fidelity == "analytic" &&
      (s.cluster.fabric.failed_cables > 0 || !s.cluster.fabric.failed_switches.empty())) {
    check_fabric_failures(s);
    notes.push_back(
        "cluster.fabric.failed_cables / failed_switches are routed around at flow and packet "
        "fidelity only; the closed form prices the intact fabric");
  }
  // A fabric file is read by the flow and packet levels only (the scenario's note says so, as
  // `run` prints it); the closed form prices the cluster's NICs and NVLink.
  if (!s.cluster.fabric.file.empty() && a.fidelity == "analytic") {
    for (const std::string& n : s.notes) {
      if (n.rfind("cluster.fabric.file", 0) == 0) notes.push_back(n);
    }
  }
  if (kind == coll::Kind::kSendRecv && shape.nodes > 1 && !fit_prices && links.p2p_net_Bps > 0 &&
      links.p2p_net_Bps < links.nic_Bps_per_gpu) {
    // NCCL moves at most NCCL_P2P_PER_CHANNEL_NET_BW per channel to a net peer; a framework
    // preset sets its NCCL's channel count (docs/presets.md).
    notes.push_back(fmt::format(
        "send/recv across servers is capped at collectives.p2p_net_channels = {} ({}) x {:.0f} "
        "GB/s per channel = {:.0f} GB/s, below the NIC's {:.1f} GB/s; "
        "--set collectives.p2p_net_channels=0 fills the NIC",
        cfg.opt.p2p_net_channels,
        s.origin.count("collectives.p2p_net_channels")
            ? s.origin.at("collectives.p2p_net_channels")
            : std::string("set"),
        plan::kNcclP2pChannelNetBps / 1e9, links.p2p_net_Bps / 1e9, links.nic_Bps_per_gpu / 1e9));
  }
  if (a.format == "json") {
    nlohmann::ordered_json j;
    j["trainsim_version"] = kVersion;
    j["fidelity"] = a.fidelity;
    if (flow) {
      j["routing"] = {{"mode", topo::to_string(s.routing.mode)},
                      {"qps_per_connection", s.routing.qps_per_connection}};
    }
    j["op"] = a.op;
    j["ranks"] = ranks;
    j["groups"] = groups;
    j["placement"] = a.placement;
    j["cluster"] = s.cluster.name;
    j["gpu"] = s.cluster.gpu.name;
    j["servers"] = shape.nodes;
    j["ranks_per_server"] = shape.per_node;
    j["calibration"] = {{"profile", cfg.profile.name}, {"version", cfg.profile.version}};
    j["measured_fit"] = fit_prices ? nlohmann::ordered_json{{"op", fit->op},
                                                            {"ranks", fit->ranks},
                                                            {"alpha_s", fit->alpha_s},
                                                            {"busbw_Bps", fit->busbw_Bps}}
                                   : nlohmann::ordered_json(nullptr);
    j["notes"] = notes;
    j["rows"] = rows;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format(
      "# trainsim {} collective: {} on {} ranks of {} ({} × {}), placement {}: {} per server on {} "
      "server(s), {} concurrent cop{}\n# {} fidelity, calibration {} v{}; bus bandwidth factors as nccl-tests\n",
      kVersion, a.op, ranks, s.cluster.name, s.cluster.gpu.name, s.cluster.gpus_per_node,
      a.placement, shape.per_node, shape.nodes, groups, groups == 1 ? "y" : "ies (slowest shown)",
      a.fidelity, cfg.profile.name, cfg.profile.version);
  for (const std::string& n : notes) std::cout << "# " << n << "\n";
  std::cout << table;
  return 0;
}

}  // namespace trainsim::cli
