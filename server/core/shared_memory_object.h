#ifndef GPUCMDD_SERVER_CORE_SHARED_MEMORY_OBJECT_H_
#define GPUCMDD_SERVER_CORE_SHARED_MEMORY_OBJECT_H_

// What a descriptor must be to back a shared-memory region (Note [Shared-memory regions]
// in server/core/shared_memory.h): a memfd, on tmpfs or hugetlbfs (memfd_create with
// MFD_ALLOW_SEALING, MFD_HUGETLB allowed), sealed against shrinking, so that it cannot
// be cut short under a mapping (a hole punched in it is Note [Faults in client memory]'s
// case). Never a regular file on disk, a pipe, a socket or a device. A seal is never
// removed and a descriptor's file never changes, so an object examined once stays one.

#include <cstdint>

#include "absl/status/statusor.h"

namespace gpucmd {

struct SharedMemoryObject {
  uint64_t file_bytes = 0;  // the memfd's size
  // On hugetlbfs the memfd holds and is mapped in whole huge pages of `page_bytes`.
  bool huge_pages = false;
  uint64_t page_bytes = 0;
};

// The shared-memory object behind `fd` (not taken: the caller closes it), or
// INVALID_ARGUMENT saying what it is not.
absl::StatusOr<SharedMemoryObject> ExamineSharedMemoryObject(int fd);

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_CORE_SHARED_MEMORY_OBJECT_H_
