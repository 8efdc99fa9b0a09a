#include "sim/exec/closed_form_backend.h"

#include "sim/exec/collective_model.h"

namespace trainsim::exec {

ClosedFormBackend::ClosedFormBackend(Simulation& sim, const RunConfig& cfg, const Result& analytic)
    : sim_(sim),
      cfg_(cfg),
      links_(link_model(cfg)),
      analytic_iter_s_(analytic.iteration_time_s) {}

int ClosedFormBackend::add_job(const CommEndpoints&) { return jobs_++; }

double ClosedFormBackend::time_s(const CommRequest& req) const {
  coll::Choice c;
  const coll::Kind k = req.kind;
  if (k == coll::Kind::kAllReduce) c.algorithm = cfg_.collectives.algorithm;
  if (k != coll::Kind::kAllToAll && k != coll::Kind::kSendRecv) c.protocol = cfg_.collectives.protocol;
  return priced_collective(cfg_.profile, k, req.bytes * req.pieces, req.shape, links_, c).time_s /
         req.pieces;
}

void ClosedFormBackend::start_collective(const CommRequest& req) {
  sim_.schedule(sim_.now() + TimePs::from_seconds(time_s(req)), *req.target, req.tag);
}

void ClosedFormBackend::start_transfer(const CommRequest& req) {
  sim_.schedule(sim_.now() + TimePs::from_seconds(time_s(req)), *req.target, req.tag);
}

// Link utilisation of GPU-attached links: bytes per GPU as the analytic evaluation counted them
// (already in r.network, over the analytic iteration), rescaled to the executed iteration.
void ClosedFormBackend::report(double, Result& r) const {
  NetworkStats& ns = r.network;
  const double scale = analytic_iter_s_ / r.iteration_time_s;
  ns.nvlink_utilization *= scale;
  ns.nic_utilization *= scale;
  ns.max_link_utilization *= scale;
  ns.mean_link_utilization *= scale;
}

}  // namespace trainsim::exec
