#include <cstdlib>

#include "kernels/exec/process_group.h"

namespace trainsim::kexec {
namespace {

class Single : public ProcessGroup {
 public:
  int index() const override { return 0; }
  int count() const override { return 1; }
  int local_index() const override { return 0; }
  void broadcast(std::string&) override {}
  std::vector<std::string> allgather(const std::string& mine) override { return {mine}; }
  void abort(int) override {}
};

}  // namespace

std::unique_ptr<ProcessGroup> single_process() { return std::make_unique<Single>(); }

bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(var) != nullptr) return true;
  }
  return false;
}

}  // namespace trainsim::kexec
