#include "base/huge_pages.h"

#include <sys/mman.h>
#include <unistd.h>

namespace gpucmd {

void ReserveInHugePages(std::string& payload, uint64_t size) {
  if (payload.capacity() >= size) return;
  payload.reserve(size);
  if (size < kHugePageThreshold) return;
  // The kept contents (copied by reserve) lie before the first whole page advised.
  constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  const uintptr_t start = reinterpret_cast<uintptr_t>(payload.data());
  const uintptr_t first = (start + payload.size() + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t last = (start + payload.capacity()) & ~(kHugePage - 1);
  if (first < last) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
}

void ReleaseLazily(std::string& payload) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t start = reinterpret_cast<uintptr_t>(payload.data());
  // Whole pages only: the allocator's own bookkeeping lies before the string's memory.
  const uintptr_t first = (start + page - 1) & ~(page - 1);
  const uintptr_t last = (start + payload.capacity()) & ~(page - 1);
  if (first < last) madvise(reinterpret_cast<void*>(first), last - first, MADV_FREE);
}

}  // namespace gpucmd
