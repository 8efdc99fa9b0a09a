// The closed-form communication backend (schedule fidelity): every collective and transfer takes
// the time NCCL's cost model (or the profile's measured α–β fit, collective_model.h) gives it
// alone on its group's links; nothing contends. It keeps no network state: its statistics are the
// analytic evaluation's per-GPU traffic over the executed iteration.
#pragma once

#include "sim/exec/comm_backend.h"

namespace trainsim::exec {

class ClosedFormBackend final : public CommBackend {
 public:
  /// `analytic`: the analytic evaluation of the same configuration (its traffic and iteration
  /// time). `cfg` and `sim` must outlive the backend.
  ClosedFormBackend(Simulation& sim, const RunConfig& cfg, const Result& analytic);

  int add_job(const CommEndpoints& endpoints) override;
  void start_collective(const CommRequest& req) override;
  void start_transfer(const CommRequest& req) override;
  const char* fidelity() const override { return "schedule"; }
  void report(double executed_s, Result& r) const override;

  /// How long `req` takes alone, in seconds.
  double time_s(const CommRequest& req) const;

 private:
  Simulation& sim_;
  const RunConfig& cfg_;
  coll::LinkModel links_;
  double analytic_iter_s_ = 0;
  int jobs_ = 0;
};

}  // namespace trainsim::exec
