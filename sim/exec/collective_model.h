// How long a collective takes, as every fidelity prices it: the calibration profile's measured
// α–β fit when it has one for this collective and group size (`collectives_measured`, written by
// `calibrate import-nccl-tests` or `calibrate nccl`), else NCCL's cost model in closed form
// (sim/collective/analytic.h). Per-rank traffic always comes from the model. `trainsim run` and
// `trainsim collective` both price through priced_collective, so they agree.
#pragma once

#include "calibrate/profile.h"
#include "sim/collective/analytic.h"

namespace trainsim::exec {

/// The measured fit that prices a `kind` over `ranks` ranks: the first fitted entry of the same op
/// and rank count (whatever the placement: a fit records no hosts), or null.
inline const calib::MeasuredCollective* measured_fit(const calib::Profile& profile,
                                                     coll::Kind kind, int ranks) {
  if (ranks <= 1) return nullptr;
  for (const calib::MeasuredCollective& m : profile.collectives_measured) {
    if (m.ranks == ranks && m.busbw_Bps > 0 && m.op == coll::to_string(kind)) return &m;
  }
  return nullptr;
}

inline coll::Cost priced_collective(const calib::Profile& profile, coll::Kind kind, double bytes,
                                    const coll::GroupShape& group, const coll::LinkModel& links,
                                    const coll::Choice& choice) {
  coll::Cost cost = coll::collective_cost(kind, bytes, group, links, choice);
  if (bytes <= 0) return cost;
  if (const calib::MeasuredCollective* m = measured_fit(profile, kind, group.ranks)) {
    // nccl-tests: time = α + S · busbw_factor(op, n) / busbw.
    cost.time_s = m->alpha_s + bytes * coll::busbw_factor(kind, group.ranks) / m->busbw_Bps;
  }
  return cost;
}

}  // namespace trainsim::exec
