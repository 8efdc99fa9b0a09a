// SweepGroup over the process group of kernels/exec/process_group.h: one process, or the ranks of
// an MPI job. MPI itself is in the module libtrainsim_mpi.so, loaded only when a launcher started
// this process, so `trainsim sweep` without mpirun (and every other command) maps no MPI library.
#include <fmt/format.h>

#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "cli/sweep_transport.h"
#include "kernels/exec/process_group.h"
#include "sim/core/error.h"

namespace trainsim::cli {
namespace {

class ProcessSweepGroup : public SweepGroup {
 public:
  explicit ProcessSweepGroup(std::unique_ptr<kexec::ProcessGroup> group)
      : group_(std::move(group)) {}
  int rank() const override { return group_->index(); }
  int size() const override { return group_->count(); }
  std::vector<std::string> gather(const std::string& mine) override {
    return group_->gather(mine);
  }
  void abort(int exit_code) override { group_->abort(exit_code); }

 private:
  std::unique_ptr<kexec::ProcessGroup> group_;
};

}  // namespace

std::unique_ptr<SweepGroup> make_sweep_group() {
  if (!kexec::have_mpi()) {
    for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
      const char* size = std::getenv(var);
      if (size != nullptr && std::atoi(size) > 1) {
        throw_input("this trainsim was built without MPI, so each of the " + std::string(size) +
                        " ranks would run the whole sweep",
                    {"mpirun", 0, ""},
                    "install libopenmpi-dev and rebuild, or run `trainsim sweep` without mpirun");
      }
    }
    return std::make_unique<SweepGroup>();
  }
  if (!kexec::launched_by_mpi()) return std::make_unique<SweepGroup>();
  return std::make_unique<ProcessSweepGroup>(kexec::make_process_group());
}

int run_on_group(const std::function<int(SweepGroup&)>& body) {
  std::unique_ptr<SweepGroup> group = make_sweep_group();
  try {
    return body(*group);
  } catch (const Error& e) {
    if (group->size() > 1 && e.kind() == ErrorKind::kRuntime) {
      std::cerr << fmt::format("trainsim: runtime error on rank {}: {}\n", group->rank(), e.what());
      group->abort(e.exit_code());
    }
    if (group->rank() != 0) return e.exit_code();
    throw;
  } catch (const std::exception& e) {
    if (group->size() > 1) {
      std::cerr << fmt::format("trainsim: internal error on rank {}: {}\n", group->rank(),
                               e.what());
      group->abort(4);
    }
    throw;
  }
}

int local_ranks() {
  if (!kexec::have_mpi()) return 1;
  const char* n = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int v = n == nullptr ? 1 : std::atoi(n);
  return v > 0 ? v : 1;
}

}  // namespace trainsim::cli
