#include "server/core/region_fault_guard.h"

#include <sys/mman.h>
#include <unistd.h>

#include <optional>

#include "gtest/gtest.h"

namespace gpucmd {
namespace {

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

// Two pages mapped from a memfd that holds one: touching the second raises SIGBUS, as a
// hole punched in a hugetlbfs file does once no huge page is free.
char* MapPastTheEnd() {
  const int fd = memfd_create("guard-test", MFD_CLOEXEC);
  EXPECT_EQ(ftruncate(fd, static_cast<off_t>(kPage)), 0);
  void* address = mmap(nullptr, 2 * kPage, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  EXPECT_NE(address, MAP_FAILED);
  return static_cast<char*>(address);
}

TEST(GuardedRangeTest, AFaultInAGuardedRangeLeavesZeroPagesAndMarksItLost) {
  char* mapping = MapPastTheEnd();
  std::optional<GuardedRange> guard;
  {
    absl::StatusOr<GuardedRange> guarded = GuardedRange::Guard(mapping, 2 * kPage);
    ASSERT_TRUE(guarded.ok()) << guarded.status();
    guard.emplace(*std::move(guarded));
  }
  volatile char* bytes = mapping;
  bytes[0] = 'x';  // backed by the memfd: no fault
  EXPECT_FALSE(guard->lost());
  EXPECT_EQ(bytes[kPage], 0) << "the faulting read resumed on a zero page";
  EXPECT_TRUE(guard->lost());
  bytes[kPage] = 'y';
  EXPECT_EQ(bytes[kPage], 'y') << "the pages put in place are writable";
  EXPECT_EQ(bytes[0], 0) << "the whole range was replaced";
  guard.reset();
  munmap(mapping, 2 * kPage);
}

TEST(GuardedRangeTest, ASlotIsReusedOnceItsRangeIsNoLongerGuarded) {
  char* first = MapPastTheEnd();
  {
    absl::StatusOr<GuardedRange> guard = GuardedRange::Guard(first, 2 * kPage);
    ASSERT_TRUE(guard.ok());
    (void)static_cast<volatile char*>(first)[kPage];
    EXPECT_TRUE(guard->lost());
  }
  munmap(first, 2 * kPage);
  char* second = MapPastTheEnd();
  absl::StatusOr<GuardedRange> guard = GuardedRange::Guard(second, 2 * kPage);
  ASSERT_TRUE(guard.ok());
  EXPECT_FALSE(guard->lost()) << "a new range starts whole";
  munmap(second, 2 * kPage);
}

TEST(GuardedRangeDeathTest, AFaultOutsideEveryGuardedRangeStillEndsTheProcess) {
  char* guarded_mapping = MapPastTheEnd();
  absl::StatusOr<GuardedRange> guard = GuardedRange::Guard(guarded_mapping, 2 * kPage);
  ASSERT_TRUE(guard.ok());  // the handler is installed
  char* unguarded = MapPastTheEnd();
  EXPECT_DEATH((void)static_cast<volatile char*>(unguarded)[kPage], "");
  munmap(unguarded, 2 * kPage);
}

}  // namespace
}  // namespace gpucmd
