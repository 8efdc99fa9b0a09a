// Loading trainsim's own shared modules (libtrainsim_gpu.so, libtrainsim_mpi.so) with dlopen, so
// that the libraries behind them (CUDA, cuBLASLt, NCCL, MPI) are mapped only by the commands that
// use them (docs/ARCHITECTURE.md, "Decisions and deviations").
#pragma once

#include <string>

namespace trainsim::kernels {

struct ModuleSpec {
  const char* file = "";        // "libtrainsim_gpu.so"
  const char* entry = "";       // the exported function to look up
  const char* env = "";         // environment variable naming the module's path (overrides)
  const char* build_path = "";  // where this build put it
  bool global = false;          // RTLD_GLOBAL (MPI: its plugins look up libmpi's symbols)
};

/// Loads the module and returns its entry function's address, or nullptr with the reason in
/// `why`. Looks at $env if set (that path only), else next to the executable, else at
/// build_path. Modules are never unloaded.
void* load_module(const ModuleSpec& spec, std::string& why);

}  // namespace trainsim::kernels
