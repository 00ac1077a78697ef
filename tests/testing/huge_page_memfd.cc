#include "tests/testing/huge_page_memfd.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace gpucmd::testing {
namespace {

constexpr char kPoolPath[] = "/proc/sys/vm/nr_hugepages";

// The value of `field` (e.g. "HugePages_Free:") in /proc/meminfo; 0 if absent.
long MemInfo(const std::string& field) {
  std::ifstream meminfo("/proc/meminfo");
  std::string name;
  long value = 0;
  while (meminfo >> name >> value) {
    if (name == field) return value;
    meminfo.ignore(256, '\n');
  }
  return 0;
}

long PoolSize() {
  long pages = 0;
  std::ifstream(kPoolPath) >> pages;
  return pages;
}

void SetPoolSize(long pages) { std::ofstream(kPoolPath) << pages; }

}  // namespace

ScopedHugePages::ScopedHugePages(int count) {
  lock_fd_ = open("/tmp/gpucmd-test-huge-pages.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0666);
  if (lock_fd_ >= 0) flock(lock_fd_, LOCK_EX);
  const long missing = count - MemInfo("HugePages_Free:");
  if (missing > 0 && geteuid() == 0) {
    restore_pool_ = PoolSize();
    SetPoolSize(*restore_pool_ + missing);
  }
  available_ = MemInfo("HugePages_Free:") >= count;
}

ScopedHugePages::~ScopedHugePages() {
  if (restore_pool_) SetPoolSize(*restore_pool_);
  if (lock_fd_ >= 0) close(lock_fd_);  // releases the lock
}

int MakeHugePageMemfd(uint64_t size) {
  int fd = memfd_create("gpucmd-test-huge", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB);
  if (fd < 0) return -1;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace gpucmd::testing
