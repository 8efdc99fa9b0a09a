// The process group a sweep runs in: one process, or the ranks of an MPI job started by mpirun.
//
// MPI is initialised only when the environment says that mpirun (or another PMI launcher)
// started this process, so a plain `trainsim sweep` never touches MPI. A build without MPI
// refuses to run as one of several ranks, because each rank would grind through the whole sweep.
#pragma once

#include <functional>
#include <memory>

#include "scenarios/sweep.h"

namespace trainsim::cli {

class SweepGroup : public scen::SweepTransport {
 public:
  /// Ends the job after an error on this rank alone, so that the other ranks do not wait in a
  /// collective forever. Does nothing in a single process.
  virtual void abort(int exit_code) { static_cast<void>(exit_code); }
};

/// The group of this process. Throws Error(kInput) when started as one of several ranks by a
/// build without MPI.
std::unique_ptr<SweepGroup> make_sweep_group();

/// Runs `body` on this process's group (make_sweep_group) and returns its exit code, with the
/// error discipline of a distributed command: input errors happen on every rank alike before any
/// collective, so rank 0 reports them (thrown on) and the others return the code silently; a
/// runtime or internal failure may hit one rank only, so it is printed with the rank and the
/// whole job is aborted rather than left waiting in a collective. `sweep` and `goodput` use it.
int run_on_group(const std::function<int(SweepGroup&)>& body);

/// Ranks of this job on this machine (1 outside MPI): sweep threads default to cores / this.
int local_ranks();

}  // namespace trainsim::cli
