// SweepGroup of a build without MPI: always one process.
#include <cstdlib>
#include <string>

#include "cli/sweep_transport.h"
#include "sim/core/error.h"

namespace trainsim::cli {

std::unique_ptr<SweepGroup> make_sweep_group() {
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

int local_ranks() { return 1; }

}  // namespace trainsim::cli
