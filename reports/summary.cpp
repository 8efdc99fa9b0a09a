#include "reports/summary.h"

#include <fmt/format.h>

#include <algorithm>

#include "sim/core/units.h"
#include "sim/core/version.h"

namespace trainsim::reports {

using nlohmann::ordered_json;

ordered_json breakdown_json(const exec::Breakdown& b) {
  return {{"compute_s", b.compute_s},
          {"exposed_comm_s",
           {{"tp", b.exposed_tp_s},
            {"cp", b.exposed_cp_s},
            {"ep", b.exposed_ep_s},
            {"pp", b.exposed_pp_s},
            {"dp", b.exposed_dp_s}}},
          {"pipeline_bubble_s", b.pipeline_bubble_s},
          {"optimizer_s", b.optimizer_s},
          {"data_loading_s", b.data_loading_s},
          {"gpu_variation_s", b.gpu_variation_s},
          {"global_sync_s", b.global_sync_s}};
}

ordered_json result_json(const exec::Result& r, const scen::Scenario& s,
                         const calib::Profile& profile) {
  ordered_json j;
  j["trainsim_version"] = kVersion;
  j["scenario"] = s.source;
  j["fidelity"] = r.fidelity;
  j["model_version"] = r.model_version;
  j["seed"] = s.seed;  // simulation.seed: with the version and the profile, what reproduces it
  j["calibration"] = {{"profile", r.profile_name},
                      {"version", r.profile_version},
                      {"gpu", profile.gpu},
                      {"provenance", profile.provenance}};
  j["iteration_time_s"] = r.iteration_time_s;
  j["tokens_per_s"] = r.tokens_per_s;
  j["mfu"] = r.mfu;
  j["hfu"] = r.hfu;
  j["tflops_per_gpu"] = r.tflops_per_gpu;
  j["hw_tflops_per_gpu"] = r.hw_tflops_per_gpu;
  j["peak_tflops_per_gpu"] = r.peak_flops_per_gpu / kTera;
  j["model_flops_per_iteration"] = r.model_flops_per_iteration;
  j["hardware_flops_per_iteration"] = r.hardware_flops_per_iteration;
  j["parameters"] = r.parameters;
  j["gpus"] = r.gpus;
  j["microbatches_per_pipeline"] = r.microbatches;
  j["breakdown"] = breakdown_json(r.breakdown);
  const plan::MemoryUsage& m = r.memory;
  j["memory"] = {{"peak_bytes_per_gpu", m.peak_bytes},
                 {"capacity_bytes", m.capacity_bytes},
                 {"fits", m.fits()},
                 {"weights_bytes", m.weights_bytes},
                 {"gradients_bytes", m.gradients_bytes},
                 {"optimizer_bytes", m.optimizer_bytes},
                 {"activations_bytes", m.activations_bytes},
                 {"comm_buffers_bytes", m.comm_buffers_bytes},
                 {"runtime_reserved_bytes", m.runtime_reserved_bytes},
                 {"in_flight_microbatches", m.in_flight_microbatches},
                 {"peak_stage", m.stage_name()},
                 {"peak_stage_index", m.stage}};
  // Activation offloading only (training.cpu_offload_layers): what host memory holds.
  if (m.host_offload_bytes > 0) j["memory"]["host_offload_bytes"] = m.host_offload_bytes;
  const exec::NetworkStats& n = r.network;
  j["network"] = {{"max_link_utilization", n.max_link_utilization},
                  {"mean_link_utilization", n.mean_link_utilization},
                  {"nvlink_utilization", n.nvlink_utilization},
                  {"nic_utilization", n.nic_utilization},
                  {"nvlink_bytes_per_gpu", n.nvlink_bytes_per_gpu},
                  {"nic_bytes_per_gpu", n.nic_bytes_per_gpu}};
  if (n.has_ecmp) {
    j["network"]["ecmp_imbalance"] = n.ecmp_imbalance;
  } else {
    j["network"]["ecmp_imbalance"] = nullptr;
    j["network"]["ecmp_note"] = r.fidelity == "flow" || r.fidelity == "packet"
                                    ? "no traffic crossed the switch tiers (no equal-cost choice)"
                                    : "not modelled at this fidelity (no routed flows)";
  }
  if (!n.link_classes.empty()) j["network"]["link_classes"] = link_classes_json(n);
  if (n.has_packets) j["network"]["packets"] = packets_json(n);
  if (!r.task_kinds.empty()) {
    ordered_json kinds = ordered_json::array();
    for (const auto& k : r.task_kinds) {
      kinds.push_back(
          {{"name", k.name}, {"category", k.category}, {"count", k.count}, {"total_s", k.total_s}});
    }
    j["task_kinds"] = kinds;
    j["execution"] = {{"programs", r.exec.roles},
                      {"tasks_per_program", r.exec.tasks_per_role},
                      {"actors", r.exec.actors},
                      {"symmetry_shortcut", r.exec.symmetry},
                      {"symmetry_bound_s", r.exec.symmetry_bound_s},
                      {"task_instances", r.exec.task_instances},
                      {"flows", r.exec.flows},
                      {"events", r.exec.events},
                      {"flow_solves", r.exec.solves},
                      {"flow_solves_partial", r.exec.solves_partial},
                      {"flow_solves_partial_given_up", r.exec.solves_partial_given_up},
                      {"flows_refilled", r.exec.flows_refilled},
                      {"flows_replayed", r.exec.flows_replayed},
                      {"replays_materialized", r.exec.replays_materialized},
                      {"critical_rank", r.exec.critical_rank}};
  }
  j["startup"] = {{"comm_init_s", r.startup.comm_init_s},
                  {"store", r.startup.store},
                  {"ordered_group_creation", r.startup.ordered_groups},
                  {"process_groups", r.startup.groups_total},
                  {"groups_per_rank", r.startup.groups_per_rank}};
  ordered_json cfg = ordered_json::object();
  for (const auto& [k, v] : s.values) cfg[k] = v;
  j["config"] = cfg;
  ordered_json notes = ordered_json::array();
  for (const auto& note : s.notes) notes.push_back(note);
  for (const auto& note : r.notes) notes.push_back(note);
  j["notes"] = notes;
  return j;
}

nlohmann::ordered_json link_classes_json(const exec::NetworkStats& n) {
  nlohmann::ordered_json classes = nlohmann::ordered_json::array();
  for (const auto& c : n.link_classes) {
    classes.push_back({{"class", c.name},
                       {"links", c.links},
                       {"used", c.used},
                       {"max_utilization", c.max_utilization},
                       {"mean_utilization", c.mean_utilization}});
  }
  return classes;
}

nlohmann::ordered_json packets_json(const exec::NetworkStats& n) {
  return {{"packets", n.packets.packets},
          {"ecn_marks", n.packets.ecn_marks},
          {"pfc_pauses", n.packets.pauses},
          {"paused_s", n.packets.paused_s},
          {"max_queue_bytes", n.packets.max_queue_bytes},
          {"sprayed_flows", n.packets.sprayed_flows},
          {"reordered_packets", n.packets.reordered},
          {"retransmitted_bytes", n.packets.retransmitted_bytes},
          {"timeouts", n.packets.timeouts},
          {"time_above_buffer_s", n.packets.time_above_buffer_s}};
}

std::string packets_line(const exec::NetworkStats& n) {
  const exec::NetworkStats::Packets& p = n.packets;
  std::string line = fmt::format(
      "{} sent, {} ECN-marked, {} PFC pauses ({:.3f} ms paused), deepest queue {:.0f} KB, {} "
      "sprayed flows ({} packets reordered), {} B retransmitted",
      p.packets, p.ecn_marks, p.pauses, 1e3 * p.paused_s, p.max_queue_bytes / 1e3,
      p.sprayed_flows, p.reordered, p.retransmitted_bytes);
  // Without PFC the packet level drops nothing: say how long ports held more than their
  // buffer, which a lossy fabric would have dropped.
  if (p.time_above_buffer_s > 0) {
    line += fmt::format(
        "; ports held more than network.packet.buffer_bytes for {:.3f} ms in all (nothing is "
        "dropped: a lossy fabric would have lost those packets)",
        1e3 * p.time_above_buffer_s);
  }
  return line;
}

std::string aligned_columns(const std::vector<std::vector<std::string>>& rows,
                            std::size_t left_cols) {
  if (rows.empty()) return {};
  std::vector<std::size_t> width(rows.front().size(), 0);
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < row.size() && c < width.size(); ++c) {
      width[c] = std::max(width[c], row[c].size());
    }
  }
  std::string s;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size() && c < width.size(); ++c) {
      line += c < left_cols ? fmt::format("{:<{}}  ", row[c], width[c])
                            : fmt::format("{:>{}}  ", row[c], width[c]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    s += line + "\n";
  }
  return s;
}

std::string result_json_text(const exec::Result& r, const scen::Scenario& s,
                             const calib::Profile& profile) {
  return result_json(r, s, profile).dump(2) + "\n";
}

namespace {

std::string pct(double x) { return fmt::format("{:5.1f} %", 100.0 * x); }

std::string human_count(double x) {
  if (x >= 1e12) return fmt::format("{:.2f}T", x / 1e12);
  if (x >= 1e9) return fmt::format("{:.1f}B", x / 1e9);
  if (x >= 1e6) return fmt::format("{:.1f}M", x / 1e6);
  return fmt::format("{:.0f}", x);
}

}  // namespace

std::string result_text(const exec::Result& r, const scen::Scenario& s,
                        const calib::Profile& profile) {
  const auto& md = s.model;
  const auto& p = s.parallel;
  const auto& t = s.training;
  std::string o;
  o += fmt::format("trainsim {} · {} fidelity, model {} · calibration {}{} · seed {}\n",
                   kVersion, r.fidelity, r.model_version, r.profile_name,
                   r.profile_version.empty() ? "" : " v" + r.profile_version, s.seed);
  o += fmt::format("scenario  {}\n", s.source);
  o += fmt::format("profile   {} for {}: {}\n", profile.name, profile.gpu, profile.provenance);
  o += fmt::format("model     {}: {} parameters, {} layers, hidden {}, {} heads ({} KV{}), seq {}\n",
                   md.name, human_count(r.parameters), md.layers, md.hidden, md.heads,
                   md.kv_heads,
                   md.head_dim_given > 0 ? fmt::format(", {} wide", md.head_dim_given) : "",
                   md.seq_len);
  o += fmt::format("cluster   {}: {} × {} in {} servers, {} × {:.0f} Gb/s NICs per server\n",
                   s.cluster.name, s.cluster.gpus, s.cluster.gpu.name, s.cluster.nodes(),
                   s.cluster.nics_per_node, s.cluster.nic_Gbps);
  o += fmt::format("parallel  TP {} · PP {} (vpp {}, {}) · DP {} · CP {} · EP {} · SP {} · ZeRO-{}{}\n",
                   p.tp, p.pp, p.vpp, plan::to_string(p.schedule), p.dp, p.cp, p.ep,
                   p.sp ? "on" : "off", p.zero,
                   p.order == plan::RankOrder::kTpCpPpDp ? " · ranks tp-cp-pp-dp" : "");
  o += fmt::format(
      "training  global batch {} × micro-batch {} → {} micro-batches per pipeline; {}; "
      "recompute {}; {}; framework {}\n",
      t.global_batch, t.micro_batch, r.microbatches,
      t.precision == Precision::kFp8
          ? fmt::format("fp8 ({} scaling)", to_string(t.fp8_recipe))
          : std::string(to_string(t.precision)),
      model::to_string(t.recompute), plan::to_string(t.optimizer),
      s.framework.empty() ? s.system : s.framework);
  o += "\n";
  // Times in seconds, or in ms or µs when the whole iteration is that short (execute's fake
  // backend: every op 1 µs), so that no time prints as 0.000.
  const double unit = r.iteration_time_s >= 0.01 ? 1.0 : r.iteration_time_s >= 1e-3 ? 1e-3 : 1e-6;
  const char* unit_name = unit == 1.0 ? "s" : unit == 1e-3 ? "ms" : "µs";
  o += fmt::format("  iteration time   {:10.3f} {}\n", r.iteration_time_s / unit, unit_name);
  o += fmt::format("  throughput       {:10.0f} tokens/s\n", r.tokens_per_s);
  o += fmt::format("  MFU              {:>10}   ({:.1f} model TFLOP/s per GPU of {:.0f} peak)\n",
                   pct(r.mfu), r.tflops_per_gpu, r.peak_flops_per_gpu / kTera);
  o += fmt::format("  HFU              {:>10}   ({:.1f} TFLOP/s counting recompute)\n", pct(r.hfu),
                   r.hw_tflops_per_gpu);
  const plan::MemoryUsage& m = r.memory;
  o += fmt::format(
      "  memory per GPU   {:10.1f} GiB of {:.1f} GiB{}: weights {:.1f}, gradients {:.1f}, "
      "optimizer {:.1f}, activations {:.1f} ({:.2f} micro-batches in flight), buffers {:.1f}, "
      "reserve {:.1f}\n",
      m.peak_bytes / kGiB, m.capacity_bytes / kGiB, m.fits() ? "" : " — DOES NOT FIT",
      m.weights_bytes / kGiB, m.gradients_bytes / kGiB, m.optimizer_bytes / kGiB,
      m.activations_bytes / kGiB, m.in_flight_microbatches, m.comm_buffers_bytes / kGiB,
      m.runtime_reserved_bytes / kGiB);
  o += fmt::format("\n  where the time goes              {:>10}    share\n",
                   unit == 1.0 ? "seconds" : unit_name);
  const exec::Breakdown& b = r.breakdown;
  const double total = b.total();
  auto row = [&](const char* name, double v) {
    o += fmt::format("    {:<30} {:9.3f}  {:>7}\n", name, v / unit, pct(total > 0 ? v / total : 0));
  };
  row("compute", b.compute_s);
  row("exposed TP communication", b.exposed_tp_s);
  row("exposed CP communication", b.exposed_cp_s);
  row("exposed EP communication", b.exposed_ep_s);
  row("exposed PP communication", b.exposed_pp_s);
  row("exposed DP communication", b.exposed_dp_s);
  row("pipeline bubble", b.pipeline_bubble_s);
  row("optimizer step", b.optimizer_s);
  row("data loading", b.data_loading_s);
  row("slowest-GPU pacing", b.gpu_variation_s);
  row("global sync", b.global_sync_s);
  row("total", total);
  const exec::NetworkStats& n = r.network;
  // Every figure with the inputs it is made of. NVLink and (except where flows are routed) the
  // NICs: the bytes per GPU the closed form counts over bandwidth × the executed iteration.
  // Where flows are routed, the NICs' figure is the mean NIC uplink of the routed flows (wire
  // bytes, protocol overhead included, as the link classes count them).
  const bool routed = r.fidelity == "flow" || r.fidelity == "packet";
  const double nic_share_Bps =
      s.cluster.nic_Bps() * s.cluster.nics_per_node / std::max(1, s.cluster.gpus_per_node);
  // The iteration in the unit the iteration time line uses (a fake execute run lasts µs).
  const std::string iter = fmt::format("{:.3f} {}", r.iteration_time_s / unit, unit_name);
  o += fmt::format(
      "\n  network          NVLink {:.1f} % busy ({:.2f} GB per GPU over {:.0f} GB/s × {}{}); "
      "NICs {:.1f} % busy ({})\n",
      100 * n.nvlink_utilization, n.nvlink_bytes_per_gpu / kGB, s.cluster.gpu.nvlink_Bps / kGB,
      iter, routed ? "; inside a server in closed form, not routed" : "",
      100 * n.nic_utilization,
      routed ? fmt::format("mean NIC uplink: routed flows' wire bytes over {:.0f} GB/s × {}; "
                           "{:.2f} GB of payload per GPU",
                           s.cluster.nic_Bps() / kGB, iter, n.nic_bytes_per_gpu / kGB)
             : fmt::format("{:.2f} GB per GPU over its {:.0f} GB/s share of the NICs × {}",
                           n.nic_bytes_per_gpu / kGB, nic_share_Bps / kGB, iter));
  o += fmt::format(
      "  ECMP             {}\n",
      n.has_ecmp ? fmt::format("imbalance {:.2f} (busiest / mean switch uplink); busiest routed "
                               "link {:.1f} % busy",
                               n.ecmp_imbalance, 100 * n.max_link_utilization)
                 : routed ? std::string("no traffic crossed the switch tiers")
                          : std::string("not modelled at this fidelity"));
  if (!n.link_classes.empty()) {
    o += "  links by class   busiest / mean utilisation of the routed flows (inter-server "
         "collectives and pipeline transfers; gpu->nvs is their NVLink hops, not the NVLink "
         "figure above):";
    std::size_t shown = 0;
    std::vector<std::string> idle;
    for (const auto& c : n.link_classes) {
      if (c.used == 0) {
        idle.push_back(c.name);
        continue;
      }
      o += fmt::format("{}{} {:.1f} / {:.1f} %", shown++ % 4 == 0 ? "\n                   " : ", ",
                       c.name, 100 * c.max_utilization, 100 * c.mean_utilization);
    }
    if (!idle.empty()) {
      o += fmt::format("\n                   carried nothing (not listed): {}",
                       fmt::join(idle, ", "));
    }
    o += "\n";
  }
  if (n.has_packets) o += "  packets          " + packets_line(n) + "\n";
  o += fmt::format(
      "  start-up         communicator initialization {:.1f} s ({} store, {} group creation, {} "
      "process groups)\n",
      r.startup.comm_init_s, r.startup.store,
      r.startup.ordered_groups ? "ordered" : "barrier-per-group", r.startup.groups_total);
  if (!r.task_kinds.empty()) {
    o += fmt::format("\n  busiest task kinds on the critical rank {} (of {} kinds)\n",
                     r.exec.critical_rank, r.task_kinds.size());
    for (std::size_t i = 0; i < r.task_kinds.size() && i < 10; ++i) {
      const auto& k = r.task_kinds[i];
      o += fmt::format("    {:<30} {:<9} {:7} × {:9.3f} {}\n", k.name, k.category, k.count,
                       k.total_s / unit, unit_name);
    }
  }
  if (!s.notes.empty() || !r.notes.empty()) {
    o += "\nnotes\n";
    for (const auto& note : s.notes) o += "  - " + note + "\n";
    for (const auto& note : r.notes) o += "  - " + note + "\n";
  }
  return o;
}

}  // namespace trainsim::reports
