#include "sim/core/process_memory.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__linux__) && defined(__GLIBC__)
#include <malloc.h>
#include <sys/mman.h>
#define TRAINSIM_HAVE_HEAP_ADVICE 1
#endif

namespace trainsim {

namespace {

#ifdef TRAINSIM_HAVE_HEAP_ADVICE
constexpr int kOneGiB = 1 << 30;
constexpr std::uintptr_t kHugePage = std::uintptr_t{1} << 21;

// The [heap]'s bounds from /proc/self/maps (its mappings are contiguous: an advice splits it in
// two at a huge-page boundary); false when there is none.
bool heap_bounds(std::uintptr_t* begin, std::uintptr_t* end) {
  std::FILE* maps = std::fopen("/proc/self/maps", "r");
  if (maps == nullptr) return false;
  char line[512];
  bool found = false;
  while (std::fgets(line, sizeof line, maps) != nullptr) {
    if (std::strstr(line, "[heap]") == nullptr) continue;
    unsigned long b = 0, e = 0;
    if (std::sscanf(line, "%lx-%lx", &b, &e) != 2 || e <= b) continue;
    *begin = found ? std::min<std::uintptr_t>(*begin, b) : b;
    *end = found ? std::max<std::uintptr_t>(*end, e) : e;
    found = true;
  }
  std::fclose(maps);
  return found;
}
#endif

}  // namespace

HeapAdvice advise_huge_pages_for_heap() {
  HeapAdvice out;
  if (const char* env = std::getenv("TRAINSIM_HUGE_PAGES"); env != nullptr && std::strcmp(env, "0") == 0) {
    out.reason = "TRAINSIM_HUGE_PAGES=0";
    return out;
  }
#ifdef TRAINSIM_HAVE_HEAP_ADVICE
  // Large blocks from the heap too, a heap that grows by a GiB of address space and is never
  // trimmed: the advised mapping then holds what the run allocates.
  if (mallopt(M_MMAP_THRESHOLD, kOneGiB) == 0 || mallopt(M_TRIM_THRESHOLD, kOneGiB) == 0 ||
      mallopt(M_TOP_PAD, kOneGiB) == 0) {
    out.reason = "mallopt refused the heap settings";
    return out;
  }
  // Grow the heap now (by the block and the pad), so that the advice covers its new extent.
  // (The block escapes through a volatile pointer: a compiler may drop an unused malloc/free.)
  void* volatile grow = std::malloc(std::size_t{4} << 20);
  std::free(grow);
  std::uintptr_t begin = 0, end = 0;
  if (!heap_bounds(&begin, &end)) {
    out.reason = "no [heap] mapping in /proc/self/maps";
    return out;
  }
  const std::uintptr_t aligned = (begin + kHugePage - 1) & ~(kHugePage - 1);
  if (aligned >= end) {
    out.reason = "the heap is smaller than one huge page";
    return out;
  }
  if (madvise(reinterpret_cast<void*>(aligned), end - aligned, MADV_HUGEPAGE) != 0) {
    out.reason = std::string("madvise: ") + std::strerror(errno);
    return out;
  }
  out.applied = true;
#else
  out.reason = "not Linux with glibc";
#endif
  return out;
}

bool heap_advised_huge_pages() {
#ifdef TRAINSIM_HAVE_HEAP_ADVICE
  std::FILE* smaps = std::fopen("/proc/self/smaps", "r");
  if (smaps == nullptr) return false;
  char line[512];
  bool in_heap = false;
  bool advised = false;
  while (!advised && std::fgets(line, sizeof line, smaps) != nullptr) {
    // A mapping's header line starts with its address range ("lo-hi perms ... [heap]"); its
    // fields follow ("Size:", ..., "VmFlags: rd wr ... hg"), none of them a range.
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
      in_heap = std::strstr(line, "[heap]") != nullptr;
      continue;
    }
    if (in_heap && std::strncmp(line, "VmFlags:", 8) == 0) {
      advised = std::strstr(line, " hg") != nullptr;
    }
  }
  std::fclose(smaps);
  return advised;
#else
  return false;
#endif
}

}  // namespace trainsim
