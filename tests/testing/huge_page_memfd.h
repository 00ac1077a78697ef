#ifndef GPUCMDD_TESTS_TESTING_HUGE_PAGE_MEMFD_H_
#define GPUCMDD_TESTS_TESTING_HUGE_PAGE_MEMFD_H_

// Test helper: shared-memory regions in huge pages (hugetlbfs memfds). A system's pool
// of huge pages is usually empty (vm.nr_hugepages = 0), and a hugetlbfs mapping with no
// page free fails. ScopedHugePages makes some free for its lifetime, growing the pool
// when it runs as root and shrinking it back after; tests that hold one run one at a
// time (a lock file in /tmp), so that one never gives back another's pages.
//
// Thread-safety: not thread-safe; one ScopedHugePages per process at a time.

#include <cstdint>
#include <optional>

namespace gpucmd::testing {

inline constexpr uint64_t kHugePageBytes = uint64_t{2} << 20;

class ScopedHugePages {
 public:
  explicit ScopedHugePages(int count);
  ~ScopedHugePages();
  ScopedHugePages(const ScopedHugePages&) = delete;
  ScopedHugePages& operator=(const ScopedHugePages&) = delete;

  // Whether `count` huge pages were free when constructed.
  bool available() const { return available_; }

 private:
  int lock_fd_ = -1;
  std::optional<long> restore_pool_;  // vm.nr_hugepages before, where it was grown
  bool available_ = false;
};

// A memfd in huge pages of `size` bytes (a multiple of kHugePageBytes), sealed against
// shrinking as the daemon requires; -1 where the system refuses one.
int MakeHugePageMemfd(uint64_t size);

}  // namespace gpucmd::testing

#endif  // GPUCMDD_TESTS_TESTING_HUGE_PAGE_MEMFD_H_
