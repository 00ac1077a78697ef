#ifndef GPUCMDD_SERVER_CORE_REGION_FAULT_GUARD_H_
#define GPUCMDD_SERVER_CORE_REGION_FAULT_GUARD_H_

// Note [Faults in client memory]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A shared-memory region is the client's memory, mapped in the daemon: the client can
// make its pages go away while the daemon maps them. On hugetlbfs, punching a hole
// (fallocate) frees huge pages that the next access must fault back in; when none is
// free that access raises SIGBUS, and the daemon would die of a client's doing.
//
// So every mapped region's address range is guarded: kept in a table that a SIGBUS
// handler reads (lock-free, async-signal-safe). On a SIGBUS inside a guarded range the
// handler maps anonymous zero pages over the whole range, at the same address, marks it
// lost, and returns: the faulting copy resumes on those pages and completes. The range
// no longer shares the client's memory then, so the region's owner is told
// (FAILED_PRECONDITION for every later copy naming it, SharedMemoryTable::Slice). A
// SIGBUS anywhere else meets the action installed before the handler (by default, the
// end of the process).
//
// A range is guarded from after its mmap until before its munmap: the handler never
// maps over an address that something else may have been given since.
//
// Thread-safety: Guard and the destructor may be called from any thread.

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"

namespace gpucmd {

class GuardedRange {
 public:
  // At most this many ranges are guarded at a time.
  static constexpr size_t kCapacity = 16384;

  // Guards the mapping [address, address + bytes) (page-aligned, as mmap returned it),
  // installing the handler the first time. RESOURCE_EXHAUSTED when kCapacity ranges are
  // guarded already.
  static absl::StatusOr<GuardedRange> Guard(void* address, uint64_t bytes);

  GuardedRange(GuardedRange&& other) noexcept;
  GuardedRange& operator=(GuardedRange&&) = delete;
  GuardedRange(const GuardedRange&) = delete;
  // Stops guarding: call it before the range is unmapped.
  ~GuardedRange();

  // True once a fault replaced the range's pages with zeros.
  bool lost() const;

 private:
  explicit GuardedRange(size_t slot) : slot_(slot) {}

  size_t slot_;  // kCapacity: moved from
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_CORE_REGION_FAULT_GUARD_H_
