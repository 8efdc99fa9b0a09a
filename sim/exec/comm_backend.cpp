#include "sim/exec/comm_backend.h"

#include "sim/exec/closed_form_backend.h"
#include "sim/exec/flow_backend.h"

namespace trainsim::exec {

std::unique_ptr<CommBackend> make_comm_backend(Simulation& sim, const RunConfig& cfg,
                                               const ExecOptions& options, const Result& analytic) {
  switch (options.backend) {
    case NetworkBackend::kFlow:
    case NetworkBackend::kPacket: return std::make_unique<FlowBackend>(sim, cfg, options, analytic);
    case NetworkBackend::kAnalytic: break;
  }
  return std::make_unique<ClosedFormBackend>(sim, cfg, analytic);
}

}  // namespace trainsim::exec
