// sim/core/process_memory: the heap's huge-page advice for the event-driven fidelities. Each
// test runs in its own process (gtest_discover_tests), so the malloc settings of one do not
// reach another. What the code controls is checked (the advice on the heap's mapping, read back
// from /proc/self/smaps); whether the kernel then backs it with huge pages is the kernel's
// choice (its transparent_hugepage setting) and is not asserted.
#include "sim/core/process_memory.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>

namespace trainsim {
namespace {

TEST(HeapAdvice, TheHeapIsNotAdvisedUntilAsked) {
  // The control for the checks below: the reader sees no advice on a plain heap.
  const auto block = std::make_unique<char[]>(8 << 20);
  std::memset(block.get(), 1, 8 << 20);
  EXPECT_FALSE(heap_advised_huge_pages());
}

TEST(HeapAdvice, AdvisesTheHeapMapping) {
  ::unsetenv("TRAINSIM_HUGE_PAGES");
  const HeapAdvice a = advise_huge_pages_for_heap();
#if defined(__linux__) && defined(__GLIBC__)
  if (!a.applied && (a.reason.rfind("madvise: ", 0) == 0 ||
                     !std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled").good())) {
    GTEST_SKIP() << "this kernel takes no huge-page advice (" << a.reason << ")";
  }
  ASSERT_TRUE(a.applied) << a.reason;
  EXPECT_TRUE(heap_advised_huge_pages());
  // Blocks up to a GiB now come from the advised heap, not from their own mappings: a 64 MiB
  // block allocated after the advice lies inside it, and the heap keeps its advice.
  const auto block = std::make_unique<char[]>(64 << 20);
  std::memset(block.get(), 1, 64 << 20);
  EXPECT_TRUE(heap_advised_huge_pages());
  // Asking again is harmless.
  EXPECT_TRUE(advise_huge_pages_for_heap().applied);
#else
  EXPECT_FALSE(a.applied);
  EXPECT_FALSE(a.reason.empty());
#endif
}

TEST(HeapAdvice, OffByTheEnvironment) {
  ::setenv("TRAINSIM_HUGE_PAGES", "0", 1);
  const HeapAdvice a = advise_huge_pages_for_heap();
  EXPECT_FALSE(a.applied);
  EXPECT_EQ(a.reason, "TRAINSIM_HUGE_PAGES=0");
  EXPECT_FALSE(heap_advised_huge_pages());
  ::unsetenv("TRAINSIM_HUGE_PAGES");
}

}  // namespace
}  // namespace trainsim
