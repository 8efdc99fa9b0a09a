// make_process_group in a build with MPI: the MPI side lives in libtrainsim_mpi.so
// (process_group_mpi.cpp), loaded only when a launcher started this process, so that commands
// run without mpirun (and every command but `sweep`, `execute` and `calibrate nccl`) never map
// the MPI libraries.
#include <memory>
#include <string>

#include "kernels/exec/process_group.h"
#include "kernels/module_loader.h"
#include "sim/core/error.h"

#ifndef TRAINSIM_MPI_MODULE_BUILD_PATH
#error "TRAINSIM_MPI_MODULE_BUILD_PATH (the MPI module's path in the build tree) must be defined"
#endif

namespace trainsim::kexec {

bool have_mpi() { return true; }

std::unique_ptr<ProcessGroup> make_process_group() {
  if (!launched_by_mpi()) return single_process();
  kernels::ModuleSpec spec;
  spec.file = kMpiModuleFile;
  spec.entry = kMpiEntrySymbol;
  spec.env = "TRAINSIM_MPI_MODULE";
  spec.build_path = TRAINSIM_MPI_MODULE_BUILD_PATH;
  spec.global = true;  // OpenMPI's plugins resolve libmpi's symbols in the global scope
  std::string why;
  void* entry = kernels::load_module(spec, why);
  if (entry == nullptr) {
    throw Error(ErrorKind::kRuntime, "started by an MPI launcher, but MPI cannot be used: " + why,
                {}, "rebuild trainsim, or run one process without mpirun");
  }
  return std::unique_ptr<ProcessGroup>(reinterpret_cast<ProcessGroup* (*)()>(entry)());
}

}  // namespace trainsim::kexec
