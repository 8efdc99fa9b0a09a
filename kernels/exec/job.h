// A whole real execution: the ProgramSet's ranks spread over the processes of the job and the
// GPUs of each process, communicators made once and shared, measures gathered everywhere.
//
// Rank → GPU mapping. With P processes (1 without mpirun) and W ranks, every process runs
// L = W / P consecutive ranks: process p runs ranks p·L .. p·L + L − 1, its i-th one on device
// local·L + i, where `local` is the process's index on its machine (OMPI_COMM_WORLD_LOCAL_RANK).
// So one process per node drives all of its GPUs with threads (mpirun -np NODES --map-by node),
// and one process per GPU (mpirun -np W, L = 1) puts rank r on device r mod GPUs-per-node.
// Ranks are numbered like the simulator's (TP fastest): consecutive ranks share a server, so TP
// groups stay on NVLink exactly as the simulation placed them.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kernels/exec/executor.h"
#include "kernels/exec/process_group.h"

namespace trainsim::kexec {

/// A kind of device: CUDA GPUs or the recording fake.
struct Backend {
  std::string name;                 // "cuda", "fake"
  int devices = 0;                  // devices this machine has
  std::function<CommId()> make_id;  // called on process 0 only
  DeviceFactory factory;
};

struct Placement {
  std::vector<int> ranks;    // global ranks this process runs
  std::vector<int> devices;  // their device indices
};

/// This process's ranks and devices. Throws Error(kInfeasible) when W is not a multiple of P or
/// the machine has fewer devices than its processes' ranks need.
Placement place(int world, const ProcessGroup& group, int devices);

/// Runs the job; every process returns the same measures, one per rank, in rank order.
std::vector<RankMeasure> execute_job(const plan::ProgramSet& ps, ProcessGroup& group,
                                     const Backend& backend, const ExecuteOptions& opt);

}  // namespace trainsim::kexec
