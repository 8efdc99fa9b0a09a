// Process-wide memory placement for the long event-driven runs.
//
// The flow and packet fidelities are bound by memory latency: the max-min solver, the flow
// records and the executor's actors are walked in an order that the data's layout cannot follow
// (a flow's path visits links all over the fabric), so most accesses miss the caches and many
// miss the TLB as well. With 4 KiB pages the default 12,288-GPU flow run also takes about 31,000
// first-touch page faults for its ~130 MB. Transparent huge pages (2 MiB) cover the same memory
// with 512 times fewer TLB entries and faults (docs/performance.md, "Huge pages for the heap").
//
// `advise_huge_pages_for_heap()` asks for them the way glibc's `glibc.malloc.hugetlb=1` tunable
// does, which a process cannot set for itself (tunables are read before main): every allocation
// below 1 GiB is served from the main heap (M_MMAP_THRESHOLD), the heap grows by at least 1 GiB
// of address space at a time (M_TOP_PAD: virtual only, pages are still allocated when touched)
// and is never trimmed (M_TRIM_THRESHOLD), and the heap's mapping is advised MADV_HUGEPAGE. The
// kernel then backs the heap with huge pages as it is touched, where
// /sys/kernel/mm/transparent_hugepage/enabled allows it (`madvise` or `always`); with `never`
// the advice does nothing. Allocations beyond the first GiB of heap go to a new mapping without
// the advice (the kernel does not extend an advised mapping), so they run as before.
//
// Only the placement of memory changes, never a value: results are the same bit for bit (the
// CLI's run and collective results are compared with and without in tests). Costs: the heap
// keeps what it grew to until exit (no trimming) and huge pages round the resident size up
// (the default flow run: 133 → 148 MB). Linux with glibc only; elsewhere a no-op.
// TRAINSIM_HUGE_PAGES=0 in the environment turns it off.
#pragma once

#include <string>

namespace trainsim {

struct HeapAdvice {
  bool applied = false;  // the heap mapping was advised MADV_HUGEPAGE
  std::string reason;    // why not, when not applied (off by the environment, no [heap], ...)
};

/// Advises the main heap to use transparent huge pages (see above). Call once, before the
/// large allocations of an event-driven run; calling it again re-advises the heap as it is then.
HeapAdvice advise_huge_pages_for_heap();

/// Whether the mapping of the main heap carries the huge-page advice ("hg" in its VmFlags of
/// /proc/self/smaps). For tests and diagnostics.
bool heap_advised_huge_pages();

}  // namespace trainsim
