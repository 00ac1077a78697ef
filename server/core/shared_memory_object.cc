#include "server/core/shared_memory_object.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace gpucmd {

absl::StatusOr<SharedMemoryObject> ExamineSharedMemoryObject(int fd) {
  struct stat status;
  struct statfs filesystem;
  if (fstat(fd, &status) != 0 || fstatfs(fd, &filesystem) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the handed-over descriptor cannot be examined: ", strerror(errno)));
  }
  const int seals = fcntl(fd, F_GET_SEALS);
  const bool huge_pages = filesystem.f_type == HUGETLBFS_MAGIC;
  if (!S_ISREG(status.st_mode) || (filesystem.f_type != TMPFS_MAGIC && !huge_pages) ||
      seals < 0) {
    return absl::InvalidArgumentError(
        "a shared-memory region must be a memfd (memfd_create with MFD_ALLOW_SEALING, "
        "MFD_HUGETLB allowed): the handed-over descriptor is not one");
  }
  if ((seals & F_SEAL_SHRINK) == 0) {
    return absl::InvalidArgumentError(
        "a shared-memory region must be sealed against shrinking (F_SEAL_SHRINK)");
  }
  return SharedMemoryObject{.file_bytes = static_cast<uint64_t>(status.st_size),
                            .huge_pages = huge_pages,
                            .page_bytes = static_cast<uint64_t>(status.st_blksize)};
}

}  // namespace gpucmd
