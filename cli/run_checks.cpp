// Checks every `run` makes before and after simulating (docs/reliability.md).
#include "cli/run_checks.h"

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <utility>

#include "scenarios/scenario.h"
#include "sim/core/error.h"
#include "sim/core/limits.h"
#include "sim/core/parse.h"
#include "topology/clos.h"
#include "topology/fabric_file.h"
#include "topology/routing.h"

namespace trainsim::cli {

// The final guard of docs/reliability.md: no NaN or infinite number reaches the output. A value
// that is not finite here is a bug (inputs are range-checked at the boundary), reported as an
// internal error (exit 4) instead of printing "nan".
void require_finite_result(const exec::Result& r) {
  const std::pair<const char*, double> fields[] = {
      {"iteration_time_s", r.iteration_time_s},
      {"tokens_per_s", r.tokens_per_s},
      {"mfu", r.mfu},
      {"hfu", r.hfu},
      {"tflops_per_gpu", r.tflops_per_gpu},
      {"hw_tflops_per_gpu", r.hw_tflops_per_gpu},
      {"model_flops_per_iteration", r.model_flops_per_iteration},
      {"hardware_flops_per_iteration", r.hardware_flops_per_iteration},
      {"parameters", r.parameters},
      {"peak_flops_per_gpu", r.peak_flops_per_gpu},
      {"breakdown.compute_s", r.breakdown.compute_s},
      {"breakdown.exposed_comm_s.tp", r.breakdown.exposed_tp_s},
      {"breakdown.exposed_comm_s.cp", r.breakdown.exposed_cp_s},
      {"breakdown.exposed_comm_s.ep", r.breakdown.exposed_ep_s},
      {"breakdown.exposed_comm_s.pp", r.breakdown.exposed_pp_s},
      {"breakdown.exposed_comm_s.dp", r.breakdown.exposed_dp_s},
      {"breakdown.pipeline_bubble_s", r.breakdown.pipeline_bubble_s},
      {"breakdown.optimizer_s", r.breakdown.optimizer_s},
      {"breakdown.data_loading_s", r.breakdown.data_loading_s},
      {"breakdown.gpu_variation_s", r.breakdown.gpu_variation_s},
      {"breakdown.global_sync_s", r.breakdown.global_sync_s},
      {"pipeline.forward_s", r.pipeline.forward_s},
      {"pipeline.backward_s", r.pipeline.backward_s},
      {"pipeline.exposed_comm_s", r.pipeline.exposed_comm_s},
      {"startup.comm_init_s", r.startup.comm_init_s},
      {"network.max_link_utilization", r.network.max_link_utilization},
      {"network.mean_link_utilization", r.network.mean_link_utilization},
      {"network.nvlink_utilization", r.network.nvlink_utilization},
      {"network.nic_utilization", r.network.nic_utilization},
      {"network.ecmp_imbalance", r.network.ecmp_imbalance},
      {"network.nic_bytes_per_gpu", r.network.nic_bytes_per_gpu},
      {"network.nvlink_bytes_per_gpu", r.network.nvlink_bytes_per_gpu},
  };
  for (const auto& [name, value] : fields) require_finite(value, name);
  for (const exec::NetworkStats::LinkClass& c : r.network.link_classes) {
    require_finite(c.max_utilization, "network.link_classes[" + c.name + "].max_utilization");
    require_finite(c.mean_utilization, "network.link_classes[" + c.name + "].mean_utilization");
  }
  for (const exec::TaskKindTime& k : r.task_kinds) {
    require_finite(k.total_s, "task_kinds[" + k.name + "].total_s");
  }
  for (const exec::TraceSpan& span : r.timeline.spans) {
    require_finite(span.start_s, "trace span start");
    require_finite(span.end_s, "trace span end");
  }
}

// The flow fidelity's work limit (docs/reliability.md): its concurrent flows, and so its time and
// memory, grow with GPUs x QPs per connection.
void check_fabric_failures(const scen::Scenario& s) {
  const topo::FabricSpec& f = s.cluster.fabric;
  if (f.failed_cables == 0 && f.failed_switches.empty()) return;
  const topo::ClusterGraph graph = topo::cluster_graph(s.cluster);
  topo::FailureSet failures(graph);
  try {
    topo::apply_fabric_failures(graph, f, failures);
  } catch (const Error& e) {
    throw Error(e.kind(), e.message(), scen::origin_of(s, e.where().field), e.hint());
  }
}

void check_flow_work(const scen::Scenario& s, bool force) {
  if (force) return;
  if (s.fidelity == "packet") {
    const std::int64_t work =
        static_cast<std::int64_t>(s.cluster.gpus) * s.routing.qps_per_connection;
    if (work <= limits::kMaxPacketWork) return;
    throw_input(fmt::format("a packet-fidelity run of {} GPUs (cluster.gpus) x {} QPs per "
                            "connection = {} is above the work limit of {}",
                            s.cluster.gpus, s.routing.qps_per_connection, work,
                            limits::kMaxPacketWork),
                scen::origin_of(s, "simulation.fidelity"),
                "add --force to run it anyway (it may take hours), or use flow fidelity; see "
                "docs/network.md");
  }
  if (s.fidelity != "flow") return;
  const std::int64_t work =
      static_cast<std::int64_t>(s.cluster.gpus) * s.routing.qps_per_connection;
  if (work <= limits::kMaxFlowWork) return;
  const ErrorContext where = s.routing.qps_per_connection > 1
                                 ? scen::origin_of(s, "network.routing.qps_per_connection")
                                 : scen::origin_of(s, "cluster.gpus");
  throw_input(fmt::format("a flow-fidelity run of {} GPUs x {} QPs per connection = {} is above "
                          "the work limit of {}",
                          s.cluster.gpus, s.routing.qps_per_connection, work,
                          limits::kMaxFlowWork),
              where,
              "add --force to run it anyway (it may take minutes and gigabytes), or use fewer QPs; "
              "see docs/reliability.md");
}

}  // namespace trainsim::cli
