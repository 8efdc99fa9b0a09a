#include "kernels/exec/job.h"

#include <fmt/format.h>

#include <cstring>

#include "sim/core/error.h"

namespace trainsim::kexec {

Placement place(int world, const ProcessGroup& group, int devices) {
  const int procs = group.count();
  if (world % procs != 0) {
    throw_infeasible(fmt::format("the Program has {} ranks, which {} processes cannot share evenly",
                                 world, procs),
                     {}, "start as many processes as divide the GPU count (mpirun -np)");
  }
  const int per = world / procs;
  const int first_device = group.local_index() * per;
  if (first_device + per > devices) {
    throw_infeasible(
        fmt::format("the Program needs {} GPUs ({} per process × {} process{}); this machine has "
                    "{} (process {} on it would use devices {}..{})",
                    world, per, procs, procs == 1 ? "" : "es", devices, group.local_index(),
                    first_device, first_device + per - 1),
        {"", 0, "cluster.gpus"},
        "run a smaller layout (--set parallel.dp=...) or start more processes on more nodes");
  }
  Placement p;
  for (int i = 0; i < per; ++i) {
    p.ranks.push_back(group.index() * per + i);
    p.devices.push_back(first_device + i);
  }
  return p;
}

std::vector<RankMeasure> execute_job(const plan::ProgramSet& ps, ProcessGroup& group,
                                     const Backend& backend, const ExecuteOptions& opt) {
  const Placement where = place(ps.world(), group, backend.devices);
  const CommTable table = comm_table(ps);
  // Process 0 makes every communicator's id; the others receive them.
  std::string blob;
  if (group.index() == 0) {
    for (std::size_t i = 0; i < table.groups.size(); ++i) {
      const CommId id = backend.make_id();
      blob.append(id.data(), id.size());
    }
  }
  group.broadcast(blob);
  if (blob.size() != table.groups.size() * sizeof(CommId)) {
    throw Error(ErrorKind::kRuntime, "communicator ids: broadcast from process 0 is truncated");
  }
  std::vector<CommId> ids(table.groups.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    std::memcpy(ids[i].data(), blob.data() + i * sizeof(CommId), sizeof(CommId));
  }
  const std::vector<RankMeasure> mine =
      run_local_ranks(ps, table, ids, where.ranks, where.devices, backend.factory, opt);
  // Every process gets every rank's measures (doubles as raw bytes).
  std::string packed;
  for (const RankMeasure& m : mine) {
    const std::vector<double> v = pack(m);
    const double n = static_cast<double>(v.size());
    packed.append(reinterpret_cast<const char*>(&n), sizeof n);
    packed.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double));
  }
  std::vector<RankMeasure> all(static_cast<std::size_t>(ps.world()));
  for (const std::string& part : group.allgather(packed)) {
    std::size_t at = 0;
    while (at + sizeof(double) <= part.size()) {
      double n = 0;
      std::memcpy(&n, part.data() + at, sizeof n);
      at += sizeof n;
      std::vector<double> v(static_cast<std::size_t>(n));
      if (at + v.size() * sizeof(double) > part.size()) break;
      std::memcpy(v.data(), part.data() + at, v.size() * sizeof(double));
      at += v.size() * sizeof(double);
      RankMeasure m = unpack(v);
      if (m.rank < 0 || m.rank >= ps.world()) {
        throw Error(ErrorKind::kRuntime,
                    fmt::format("measures of rank {} outside the job", m.rank));
      }
      all[static_cast<std::size_t>(m.rank)] = std::move(m);
    }
  }
  return all;
}

}  // namespace trainsim::kexec
