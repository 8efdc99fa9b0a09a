// ProcessGroup without MPI (CMake found no MPI): one process only.
#include <cstdlib>

#include "kernels/exec/process_group.h"
#include "sim/core/error.h"

namespace trainsim::kexec {

bool have_mpi() { return false; }

std::unique_ptr<ProcessGroup> make_process_group() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    const char* v = std::getenv(var);
    if (v != nullptr && std::string(v) != "1") {
      throw_input("started by an MPI launcher, but this trainsim was built without MPI", {},
                  "install OpenMPI (libopenmpi-dev) and rebuild, or run one process");
    }
  }
  return single_process();
}

}  // namespace trainsim::kexec
