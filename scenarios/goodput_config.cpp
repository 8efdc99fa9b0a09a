#include "scenarios/goodput_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>

#include "scenarios/run_config.h"
#include "sim/collective/analytic.h"
#include "sim/collective/comm_init.h"
#include "sim/core/error.h"
#include "sim/exec/analytic.h"
#include "sim/model/transformer.h"
#include "sim/plan/layout.h"
#include "topology/clos.h"

namespace trainsim::scen {
namespace {

using goodput::Effect;
using goodput::Scope;

constexpr double kFit = 1e-9;  // FIT: failures per 10^9 unit-hours
constexpr double kGBps = 1e9;

// The failure classes, in report order, and the key of each rate (reliability.rate.<name>).
struct ClassDef {
  const char* name;
  Scope scope;
  Effect effect;
  bool needs_spare;
  bool per_day;  // rate per job-day instead of FIT
};
constexpr ClassDef kClasses[] = {
    {"gpu", Scope::kGpu, Effect::kCrash, true, false},
    {"hbm", Scope::kGpu, Effect::kCrash, true, false},
    {"nic", Scope::kNic, Effect::kCrash, true, false},
    {"link", Scope::kLink, Effect::kCrash, false, false},
    {"switch", Scope::kSwitch, Effect::kCrash, false, false},
    {"host", Scope::kHost, Effect::kCrash, true, false},
    {"nccl_hang", Scope::kHost, Effect::kHang, false, false},
    {"framework_crash", Scope::kJob, Effect::kCrash, false, true},
    {"planned", Scope::kJob, Effect::kPlanned, false, true},
    {"slow_host", Scope::kHost, Effect::kSlow, true, false},
};

// Where a key's value came from: "<file>:<line>", "--set", or the scenario for defaults.
ErrorContext where(const Scenario& s, const std::string& key) {
  const auto it = s.origin.find(key);
  if (it != s.origin.end()) {
    const std::string& o = it->second;
    if (o == "--set") return {"--set", 0, key};
    const std::size_t colon = o.rfind(':');
    if (colon != std::string::npos && colon + 1 < o.size() &&
        std::all_of(o.begin() + static_cast<long>(colon) + 1, o.end(),
                    [](unsigned char c) { return std::isdigit(c) != 0; })) {
      return {o.substr(0, colon), std::stoi(o.substr(colon + 1)), key};
    }
  }
  return {s.source, 0, key};
}

const std::string& text(const Scenario& s, const std::string& key) {
  const auto it = s.values.find(key);
  if (it == s.values.end()) throw_input("missing from the scenario's values", {s.source, 0, key});
  return it->second;
}

double real(const Scenario& s, const std::string& key) {
  const std::string& v = text(s, key);
  try {
    return std::stod(v);
  } catch (const std::exception&) {
    throw_input("expected a number, got `" + v + "`", where(s, key));
  }
}

bool flag(const Scenario& s, const std::string& key) { return text(s, key) == "true"; }

}  // namespace

std::string reliability_key_of(const std::string& field) {
  static const std::map<std::string, std::string> kKeys = {
      {"weibull_shape", "reliability.weibull_shape"},
      {"detect_crash_s", "reliability.detection.crash"},
      {"detect_hang_s", "reliability.detection.hang"},
      {"detect_slow_s", "reliability.detection.slow_node"},
      {"auto_diagnosis_s", "reliability.diagnosis.self_check"},
      {"manual_diagnosis_s", "reliability.diagnosis.manual"},
      {"auto_share", "reliability.diagnosis.auto_share"},
      {"host_repair_s", "reliability.repair_time"},
      {"relaunch_s", "reliability.restart.relaunch"},
      {"interval_s", "reliability.checkpoint.interval"},
      {"spare_hosts", "reliability.spares"},
      {"slow_iteration_factor", "reliability.slow_node.slowdown"},
      {"days", "--days"},
  };
  if (field.rfind("rate.", 0) == 0) return "reliability." + field;
  const auto it = kKeys.find(field);
  return it == kKeys.end() ? field : it->second;
}

GoodputSetup goodput_setup(const Scenario& s, double days) {
  GoodputSetup g;
  goodput::Params& p = g.params;
  p.days = days;
  p.seed = s.seed;

  // Components: GPUs, hosts, NICs, and the switches and cables of the fabric's Clos plan.
  p.units.gpus = s.cluster.gpus;
  p.units.hosts = s.cluster.nodes();
  p.units.nics = p.units.hosts * s.cluster.nics_per_node;
  const topo::FabricPlan fabric = topo::plan_fabric(s.cluster);
  p.units.links = p.units.nics;  // one cable from every NIC to its ToR
  for (const topo::TierPlan& t : fabric.tiers) {
    p.units.switches += t.switches;
    if (!t.top) p.units.links += static_cast<long>(t.switches) * t.up_ports;
  }

  for (const ClassDef& c : kClasses) {
    const std::string key = std::string("reliability.rate.") + c.name;
    const double v = real(s, key);
    p.classes.push_back({c.name, c.scope, c.effect, c.per_day ? v / 24 : v * kFit, c.needs_spare});
    g.class_keys.push_back(key);
  }
  p.weibull_shape = real(s, "reliability.weibull_shape");
  p.detect_crash_s = real(s, "reliability.detection.crash");
  p.detect_hang_s = real(s, "reliability.detection.hang");
  p.detect_slow_s = real(s, "reliability.detection.slow_node");
  p.auto_diagnosis = flag(s, "reliability.diagnosis.automatic");
  p.auto_share = real(s, "reliability.diagnosis.auto_share");
  p.auto_diagnosis_s = real(s, "reliability.diagnosis.self_check");
  p.manual_diagnosis_s = real(s, "reliability.diagnosis.manual");
  p.host_repair_s = real(s, "reliability.repair_time");
  p.relaunch_s = real(s, "reliability.restart.relaunch");

  const std::string& spares = text(s, "reliability.spares");
  if (spares == "auto") {
    p.spare_hosts = (p.units.hosts + 99) / 100;
    g.notes.push_back(fmt::format("reliability.spares = {} (auto: 1 % of {} hosts)", p.spare_hosts,
                                  p.units.hosts));
  } else {
    p.spare_hosts = std::stol(spares);
    if (p.spare_hosts > p.units.hosts) {
      throw_input(fmt::format("{} spare hosts is more than the job's {} hosts", p.spare_hosts,
                              p.units.hosts),
                  where(s, "reliability.spares"), "spares stand by for the job's own hosts");
    }
  }

  // One iteration of the scenario at its fidelity: tokens/s and the memory model's state sizes.
  const exec::RunConfig cfg = make_run_config(s);
  const exec::Result r = run_scenario(s, cfg);
  g.iteration_time_s = r.iteration_time_s;
  g.tokens_per_s = r.tokens_per_s;
  g.fidelity = r.fidelity;

  // Communicator initialization at every restart, with the scenario's fast_comm_init lever.
  const plan::ParallelConfig& par = s.parallel;
  g.fast_comm_init = s.opt.fast_comm_init;
  const coll::CommInitTime ci = coll::comm_init_time(
      {s.cluster.gpus, par.tp, par.pp, par.dp, par.cp, par.ep},
      g.fast_comm_init ? coll::StoreKind::kRedis : coll::StoreKind::kTcpStore, g.fast_comm_init);
  p.comm_init_s = ci.total_s;
  g.comm_init_store = coll::to_string(g.fast_comm_init ? coll::StoreKind::kRedis
                                                       : coll::StoreKind::kTcpStore);

  // The checkpoint: every GPU's weights and optimizer shards (the memory model's per-GPU bytes,
  // of its most loaded GPU); storage holds one copy of the whole model's state, the model's
  // parameters at the memory model's bytes per parameter (sim/plan/memory.h, after the ZeRO
  // paper §3: 2 B of 16-bit weights, 12 B of fp32 master weights and two Adam moments). (It was
  // the most loaded GPU's bytes scaled to the job, as if every stage held that GPU's layers:
  // +0.55 % for Llama 3 405B, whose first and last stages hold 7 layers of the others' 8.)
  constexpr double kWeightBytesPerParam = 2, kOptimizerBytesPerParam = 12;
  goodput::CheckpointSpec& c = g.checkpoint;
  c.state_bytes_per_gpu = r.memory.weights_bytes + r.memory.optimizer_bytes;
  // What every DP replica holds alike, which one replica can read and broadcast: the weights
  // below ZeRO-3, and without ZeRO the optimizer state too.
  c.replicated_bytes_per_gpu = (par.zero >= 3 ? 0.0 : r.memory.weights_bytes) +
                               (par.zero >= 1 ? 0.0 : r.memory.optimizer_bytes);
  c.unique_bytes = model::count_parameters(s.model).total *
                   (kWeightBytesPerParam + kOptimizerBytesPerParam);
  c.gpus = par.world();
  c.gpus_per_host = s.cluster.gpus_per_node;
  c.dp = par.dp;
  c.host_copy_Bps = real(s, "reliability.checkpoint.host_copy_bandwidth") * kGBps;
  c.storage_write_Bps = real(s, "reliability.checkpoint.storage_write_bandwidth") * kGBps;
  c.storage_read_Bps = real(s, "reliability.checkpoint.storage_read_bandwidth") * kGBps;
  c.host_storage_Bps = real(s, "reliability.checkpoint.host_storage_bandwidth") * kGBps;
  c.in_memory = flag(s, "reliability.checkpoint.in_memory");
  c.one_replica_load = flag(s, "reliability.checkpoint.one_replica_load");
  if (c.replicated_bytes_per_gpu > 0 && par.dp > 1) {
    const plan::Layout layout = plan::make_layout(s.model, s.cluster, par, s.training);
    c.broadcast_s = coll::collective_cost(coll::Kind::kBroadcast, c.replicated_bytes_per_gpu,
                                          layout.dp,
                                          exec::link_model(s.cluster, cfg.profile))
                        .time_s;
  }
  g.checkpoint_costs = goodput::checkpoint_costs(c);
  p.checkpoint_blocking_s = g.checkpoint_costs.blocking_s;
  p.checkpoint_async_s = g.checkpoint_costs.async_s;
  p.checkpoint_load_s = g.checkpoint_costs.load_s;

  // A slow host: its GPUs' compute is slower. Analytic: every stage waits for the slow one, so
  // the compute on the iteration's critical path scales. Schedule: the event-driven executor's
  // straggler model runs every rank with the slow host.
  g.slow_host_slowdown = real(s, "reliability.slow_node.slowdown");
  p.slow_iteration_factor = 1.0;
  const bool slow_hosts = real(s, "reliability.rate.slow_host") > 0 && g.slow_host_slowdown > 1;
  if (slow_hosts && text(s, "reliability.slow_node.model") == "analytic") {
    p.slow_iteration_factor =
        (r.iteration_time_s + (g.slow_host_slowdown - 1) * r.breakdown.compute_s) /
        r.iteration_time_s;
    g.notes.push_back(fmt::format(
        "a slow host ({}x compute) makes an iteration {:.3f}x longer (critical-path compute "
        "scaled; reliability.slow_node.model = schedule runs the straggler model)",
        g.slow_host_slowdown, p.slow_iteration_factor));
  } else if (slow_hosts) {
    Scenario a = s;
    a.fidelity = "schedule";
    a.simulation.jitter = 0;
    a.simulation.straggler_rank = -1;
    a.simulation.straggler_host = -1;
    a.simulation.straggler_factor = 1;
    const double base = run_scenario(a, cfg).iteration_time_s;
    a.simulation.straggler_host = 0;
    a.simulation.straggler_factor = g.slow_host_slowdown;
    const double slow = run_scenario(a, cfg).iteration_time_s;
    p.slow_iteration_factor = std::max(1.0, slow / base);
    g.notes.push_back(fmt::format(
        "a slow host ({}x compute) makes an iteration {:.3f}x longer (schedule fidelity, "
        "straggler on host 0)",
        g.slow_host_slowdown, p.slow_iteration_factor));
  }

  const std::string& interval = text(s, "reliability.checkpoint.interval");
  if (interval == "auto") {
    g.interval_auto = true;
    const double rate_h = goodput::job_failure_rate_h(p);
    const double horizon = days * 86400;
    const double daly = rate_h > 0
                            ? goodput::daly_interval_s(p.checkpoint_blocking_s, 3600 / rate_h)
                            : std::numeric_limits<double>::infinity();
    p.interval_s = std::clamp(daly, 1.0, std::max(horizon, 1.0));
    if (p.interval_s == daly) {
      g.notes.push_back(fmt::format("reliability.checkpoint.interval = {:.0f} s (auto: Daly)",
                                    p.interval_s));
    } else if (!std::isfinite(daly)) {
      g.notes.push_back(fmt::format(
          "reliability.checkpoint.interval = {:.6g} s (auto: no crash or hang rate, so no Daly "
          "interval; the run's length, one checkpoint at its end)",
          p.interval_s));
    } else if (daly > p.interval_s) {
      g.notes.push_back(fmt::format(
          "reliability.checkpoint.interval = {:.6g} s (auto: Daly's {:.0f} s is longer than the "
          "run, so capped at the run's length: no periodic checkpoint; set --days or the "
          "interval to change it)",
          p.interval_s, daly));
    } else {
      g.notes.push_back(fmt::format(
          "reliability.checkpoint.interval = {:.6g} s (auto: Daly's {:.3g} s, raised to the 1 s "
          "minimum)",
          p.interval_s, daly));
    }
  } else {
    p.interval_s = std::stod(interval);
  }

  try {
    goodput::check(p);
  } catch (const Error& e) {
    const std::string key = reliability_key_of(e.where().field);
    ErrorContext w = key.rfind("reliability.", 0) == 0 ? where(s, key) : ErrorContext{"", 0, key};
    throw Error(e.kind(), e.message(), w, e.hint());
  }
  return g;
}

}  // namespace trainsim::scen
