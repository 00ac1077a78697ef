#include "base/huge_pages.h"

#include <sys/mman.h>
#include <unistd.h>

namespace gpucmd {
namespace {

// Calls madvise(`advice`) on the whole `page`-sized pages inside [begin, end), if any.
void AdviseWholePages(uintptr_t begin, uintptr_t end, uintptr_t page, int advice) {
  const uintptr_t first = (begin + page - 1) & ~(page - 1);
  const uintptr_t last = end & ~(page - 1);
  if (first < last) madvise(reinterpret_cast<void*>(first), last - first, advice);
}

}  // namespace

void ReserveInHugePages(std::string& payload, uint64_t size) {
  if (payload.capacity() >= size) return;
  payload.reserve(size);
  if (size < kHugePageThreshold) return;
  // The kept contents (copied by reserve) lie before the first whole page advised.
  const uintptr_t start = reinterpret_cast<uintptr_t>(payload.data());
  AdviseWholePages(start + payload.size(), start + payload.capacity(), uintptr_t{2} << 20,
                   MADV_HUGEPAGE);
}

void ReleaseLazily(std::string& payload) {
  // Whole pages only: the allocator's own bookkeeping lies before the string's memory.
  const uintptr_t start = reinterpret_cast<uintptr_t>(payload.data());
  AdviseWholePages(start, start + payload.capacity(),
                   static_cast<uintptr_t>(sysconf(_SC_PAGESIZE)), MADV_FREE);
}

}  // namespace gpucmd
