// Test-only: with TRAINSIM_DEBUG_MAPPED_FILES=1 in the environment, trainsim prints every file
// mapped into the process (from /proc/self/maps, each once) to stderr when it exits, one line
// `trainsim-mapped: PATH`, then `trainsim-mapped: end`. tests/cli/test_startup.cpp uses it to
// check that commands without a GPU load no CUDA library (kernels/gpu_module.h) and no MPI.
// Before the list it prints `trainsim-heap-advised: yes` or `no`: whether the heap carries the
// huge-page advice of the event-driven fidelities (sim/core/process_memory.h).
// Without the variable this does nothing but one getenv at start-up.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "sim/core/process_memory.h"

namespace {

void print_mapped_files() {
  std::fprintf(stderr, "trainsim-heap-advised: %s\n",
               trainsim::heap_advised_huge_pages() ? "yes" : "no");
  std::FILE* maps = std::fopen("/proc/self/maps", "r");
  if (maps == nullptr) return;
  std::set<std::string> seen;
  char line[8192];
  while (std::fgets(line, sizeof line, maps) != nullptr) {
    // address perms offset dev inode path: the path starts at the first '/' after the inode.
    const char* path = std::strchr(line, '/');
    if (path == nullptr) continue;
    std::string p(path);
    while (!p.empty() && (p.back() == '\n' || p.back() == ' ')) p.pop_back();
    if (seen.insert(p).second) std::fprintf(stderr, "trainsim-mapped: %s\n", p.c_str());
  }
  std::fclose(maps);
  std::fprintf(stderr, "trainsim-mapped: end\n");
  std::fflush(stderr);
}

[[maybe_unused]] const bool registered = [] {
  const char* v = std::getenv("TRAINSIM_DEBUG_MAPPED_FILES");
  if (v != nullptr && std::strcmp(v, "1") == 0) std::atexit(print_mapped_files);
  return true;
}();

}  // namespace
