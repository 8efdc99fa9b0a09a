// Helper of tests/kernels/test_launch_plan_mpi.cpp, started twice by `mpirun -np 2`: each
// process runs 4 of the 8 ranks of a tiny GPT (TP 2 · PP 2 · DP 2) on fake GPUs through the real
// job runner (communicator ids made by process 0 and broadcast over MPI, measures all-gathered),
// then the two processes exchange the communicator tables they built and the communicators their
// fake GPUs joined, and each checks that they agree: the same table in both processes, every
// member of every communicator joined it exactly once with the same member list and the same id,
// and collective groups are ProgramSet::group. Prints one "agree" line and exits 0, or the
// disagreements and exits 1.
#include <fmt/format.h>

#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "kernels/exec/fake_device.h"
#include "kernels/exec/job.h"
#include "scenarios/scenario.h"
#include "sim/core/error.h"

namespace {

using namespace trainsim;
using namespace trainsim::kexec;

std::string table_text(const CommTable& t) {
  std::string o;
  for (const CommGroup& g : t.groups) {
    o += g.name;
    for (int m : g.members) o += fmt::format(" {}", m);
    o += ";";
  }
  return o;
}

int run() {
  std::unique_ptr<ProcessGroup> group = make_process_group();
  if (group->count() != 2) {
    std::cerr << "start me with mpirun -np 2 (this is " << group->count() << " process(es))\n";
    return 2;
  }
  const scen::Scenario s = scen::load_scenario_string(
      "", "tiny-gpt",
      {"model.layers=4", "model.hidden=256", "model.heads=8", "model.seq_len=128",
       "model.vocab=1024", "parallel.tp=2", "parallel.pp=2", "parallel.dp=2", "parallel.vpp=1",
       "training.global_batch=8", "training.micro_batch=1"});
  const plan::ProgramSet ps =
      plan::build_programs(s.model, s.cluster, s.parallel, s.training, s.opt);
  std::map<int, std::shared_ptr<FakeDevice>> fakes;  // by rank
  std::mutex mu;
  int made = 0;
  Backend fake;
  fake.name = "fake";
  fake.devices = 8;  // one machine, 8 fake GPUs: 4 per process (process 1 gets devices 4..7)
  fake.make_id = [&] {
    CommId id{};
    std::snprintf(id.data(), id.size(), "id-%d-from-process-%d", made++, group->index());
    return id;
  };
  fake.factory = [&](int rank, int device) -> std::shared_ptr<Device> {
    if (device != rank) throw Error(ErrorKind::kRuntime, "rank → device mapping is off");
    auto d = std::make_shared<FakeDevice>(rank);
    std::lock_guard<std::mutex> lock(mu);
    fakes[rank] = d;
    return d;
  };
  ExecuteOptions opt;
  opt.iterations = 1;
  opt.warmup = 0;
  std::vector<RankMeasure> measures;
  try {
    measures = execute_job(ps, *group, fake, opt);
  } catch (const Error& e) {
    // The other process would wait in MPI forever: end the job.
    std::cerr << "process " << group->index() << ": " << e.what() << "\n";
    group->abort(e.exit_code());
    throw;
  }

  // What this process's GPUs joined: "comm rank index id|" per communicator call.
  std::ostringstream mine;
  mine << table_text(comm_table(ps)) << "\n";
  for (const auto& [rank, d] : fakes) {
    std::size_t n = 0;
    for (const FakeCall& c : d->calls()) {
      if (c.what != "comm") continue;
      mine << c.id << " " << d->rank() << " " << c.peer_index << " "
           << std::string(d->comm_ids.at(n++).data()) << "|";
    }
  }
  const std::vector<std::string> all = group->allgather(mine.str());

  std::vector<std::string> problems;
  const CommTable table = comm_table(ps);
  std::map<int, std::set<int>> joined;
  std::map<int, std::set<std::string>> ids;
  for (std::size_t p = 0; p < all.size(); ++p) {
    std::istringstream in(all[p]);
    std::string their_table;
    std::getline(in, their_table);
    if (their_table != table_text(table)) {
      problems.push_back(fmt::format("process {} built another communicator table", p));
    }
    std::string entry;
    while (std::getline(in, entry, '|')) {
      std::istringstream e(entry);
      int comm = -1, rank = -1, index = -1;
      std::string id;
      e >> comm >> rank >> index >> id;
      const CommGroup& g = table.groups.at(static_cast<std::size_t>(comm));
      if (g.members.at(static_cast<std::size_t>(index)) != rank) {
        problems.push_back(fmt::format("rank {} joined {} as member {}", rank, comm, index));
      }
      if (!joined[comm].insert(rank).second) {
        problems.push_back(fmt::format("rank {} joined communicator {} twice", rank, comm));
      }
      ids[comm].insert(id);
      if (g.name != "pp-next" && g.name != "pp-prev" && g.members != ps.group(g.dim, rank)) {
        problems.push_back(
            fmt::format("communicator {} is not rank {}'s {} group", comm, rank, g.name));
      }
    }
  }
  for (std::size_t c = 0; c < table.groups.size(); ++c) {
    const auto& m = table.groups[c].members;
    if (joined[static_cast<int>(c)] != std::set<int>(m.begin(), m.end())) {
      problems.push_back(fmt::format("not every member joined communicator {}", c));
    }
    if (ids[static_cast<int>(c)].size() != 1) {
      problems.push_back(
          fmt::format("communicator {} has {} ids", c, ids[static_cast<int>(c)].size()));
    }
  }
  for (const RankMeasure& m : measures) {
    if (m.iteration_s.size() != 1) problems.push_back(fmt::format("rank {}: no measures", m.rank));
  }
  for (const std::string& p : problems)
    std::cout << "process " << group->index() << ": " << p << "\n";
  if (!problems.empty()) return 1;
  std::cout << fmt::format(
      "process {} of {}: ranks {}..{} on fake GPUs {}..{}; {} communicators agree\n",
      group->index(), group->count(), fakes.begin()->first, fakes.rbegin()->first,
      fakes.begin()->first, fakes.rbegin()->first, table.groups.size());
  return 0;
}

}  // namespace

int main() {
  try {
    return run();
  } catch (const trainsim::Error& e) {
    std::cerr << "launch_plan_mpi_peer: " << e.what() << "\n";
    return e.exit_code();
  }
}
