// How long a collective takes, as every fidelity prices it: the calibration profile's measured
// α–β fit when it has one for this collective and group size (`collectives_measured`, written by
// `calibrate import-nccl-tests` or `calibrate nccl`), else NCCL's cost model in closed form
// (sim/collective/analytic.h). Per-rank traffic always comes from the model.
#pragma once

#include "calibrate/profile.h"
#include "sim/collective/analytic.h"

namespace trainsim::exec {

inline coll::Cost priced_collective(const calib::Profile& profile, coll::Kind kind, double bytes,
                                    const coll::GroupShape& group, const coll::LinkModel& links,
                                    const coll::Choice& choice) {
  coll::Cost cost = coll::collective_cost(kind, bytes, group, links, choice);
  if (group.ranks <= 1 || bytes <= 0) return cost;
  for (const calib::MeasuredCollective& m : profile.collectives_measured) {
    if (m.ranks == group.ranks && m.busbw_Bps > 0 && m.op == coll::to_string(kind)) {
      // nccl-tests: time = α + S · busbw_factor(op, n) / busbw.
      cost.time_s = m.alpha_s + bytes * coll::busbw_factor(kind, group.ranks) / m.busbw_Bps;
      break;
    }
  }
  return cost;
}

}  // namespace trainsim::exec
