#include "server/core/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "gtest/gtest.h"
#include "tests/testing/huge_page_memfd.h"

namespace gpucmd {
namespace {

constexpr SessionId kSession = 1;
constexpr SessionId kOtherSession = 2;

// A memfd of `size` bytes, sealed against shrinking when `sealed`.
int MakeMemfd(uint64_t size, bool sealed = true) {
  int fd = memfd_create("gpucmd-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
  if (sealed) {
    EXPECT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
  }
  return fd;
}

TEST(SharedMemoryTableTest, SlicesSeeTheClientsBytesBothWays) {
  SharedMemoryTable table({});
  int fd = MakeMemfd(8192);
  void* client = mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(client, MAP_FAILED);
  std::memcpy(static_cast<char*>(client) + 100, "from the client", 15);
  absl::StatusOr<RegionId> region = table.Register(kSession, dup(fd), 8192);
  ASSERT_TRUE(region.ok()) << region.status();
  absl::StatusOr<Bytes> slice = table.Slice(kSession, *region, 100, 15);
  ASSERT_TRUE(slice.ok()) << slice.status();
  EXPECT_EQ(slice->ToString(), "from the client");
  std::memcpy(slice->data(), "from the daemon", 15);
  EXPECT_EQ(std::string(static_cast<char*>(client) + 100, 15), "from the daemon");
  EXPECT_EQ(table.usage().regions, 1u);
  EXPECT_EQ(table.usage().mapped_bytes, 8192u);
  munmap(client, 8192);
  close(fd);
}

TEST(SharedMemoryTableTest, RegionsAreScopedAndBoundsChecked) {
  SharedMemoryTable table({});
  absl::StatusOr<RegionId> region = table.Register(kSession, MakeMemfd(4096), 4096);
  ASSERT_TRUE(region.ok());
  EXPECT_EQ(table.Slice(kOtherSession, *region, 0, 1).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(table.Unregister(kOtherSession, *region).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(table.Slice(kSession, *region + 1, 0, 1).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(table.Slice(kSession, *region, 4000, 97).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table.Slice(kSession, *region, ~uint64_t{0}, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(table.Slice(kSession, *region, 4000, 96).ok());
}

TEST(SharedMemoryTableTest, OnlySealedMemfdsOfTheRightSizeAreAccepted) {
  SharedMemoryTable table({});
  EXPECT_EQ(table.Register(kSession, MakeMemfd(4096, /*sealed=*/false), 4096).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table.Register(kSession, MakeMemfd(4096), 8192).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table.Register(kSession, MakeMemfd(4096), 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::string path = std::string(getenv("TEST_TMPDIR")) + "/regular-file";
  int file = open(path.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_EQ(ftruncate(file, 4096), 0);
  absl::Status regular = table.Register(kSession, file, 4096).status();
  EXPECT_EQ(regular.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(regular.message().find("memfd"), std::string::npos) << regular;
  EXPECT_EQ(table.usage().regions, 0u);
}

TEST(SharedMemoryTableTest, HugePageMemfdsAreMappedInWholeHugePages) {
  testing::ScopedHugePages pages(2);
  if (!pages.available()) GTEST_SKIP() << "no huge page free, and not root to add one";
  SharedMemoryTable table({});
  int fd = testing::MakeHugePageMemfd(testing::kHugePageBytes);
  ASSERT_GE(fd, 0);
  void* client =
      mmap(nullptr, testing::kHugePageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(client, MAP_FAILED);
  std::memcpy(client, "in a huge page", 14);
  absl::StatusOr<RegionId> region = table.Register(kSession, dup(fd), 4096);
  ASSERT_TRUE(region.ok()) << region.status();
  EXPECT_EQ(table.usage().mapped_bytes, testing::kHugePageBytes) << "mapped in whole pages";
  absl::StatusOr<Bytes> slice = table.Slice(kSession, *region, 0, 14);
  ASSERT_TRUE(slice.ok()) << slice.status();
  EXPECT_EQ(slice->ToString(), "in a huge page");
  std::memcpy(slice->data(), "from the daemo", 14);
  EXPECT_EQ(std::string(static_cast<char*>(client), 14), "from the daemo");
  EXPECT_EQ(table.Slice(kSession, *region, 4096, 1).status().code(),
            absl::StatusCode::kInvalidArgument)
      << "bounds are the region's, not the mapping's";
  *slice = Bytes();
  ASSERT_TRUE(table.Unregister(kSession, *region).ok());
  EXPECT_EQ(table.usage().mapped_bytes, 0u);
  munmap(client, testing::kHugePageBytes);
  close(fd);
}

TEST(SharedMemoryTableTest, LimitsAndSessionsEnd) {
  SharedMemoryTable table({.max_regions_per_session = 2, .max_mapped_bytes = 16384});
  ASSERT_TRUE(table.Register(kSession, MakeMemfd(4096), 4096).ok());
  ASSERT_TRUE(table.Register(kSession, MakeMemfd(4096), 4096).ok());
  absl::Status third = table.Register(kSession, MakeMemfd(4096), 4096).status();
  EXPECT_EQ(third.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(third.message().find("limits.max_shared_memory_regions"), std::string::npos);
  absl::Status too_big = table.Register(kOtherSession, MakeMemfd(16384), 16384).status();
  EXPECT_EQ(too_big.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(too_big.message().find("limits.max_shared_memory_bytes"), std::string::npos);
  table.DropSession(kSession);
  EXPECT_EQ(table.usage().regions, 0u);
  EXPECT_EQ(table.usage().mapped_bytes, 0u);
  EXPECT_TRUE(table.Register(kOtherSession, MakeMemfd(16384), 16384).ok());
}

TEST(SharedMemoryTableTest, ASliceKeepsAnUnregisteredRegionMapped) {
  SharedMemoryTable table({});
  int fd = MakeMemfd(4096);
  absl::StatusOr<RegionId> region = table.Register(kSession, dup(fd), 4096);
  ASSERT_TRUE(region.ok());
  absl::StatusOr<Bytes> slice = table.Slice(kSession, *region, 0, 4096);
  ASSERT_TRUE(slice.ok());
  ASSERT_TRUE(table.Unregister(kSession, *region).ok());
  EXPECT_EQ(table.Slice(kSession, *region, 0, 1).status().code(), absl::StatusCode::kNotFound);
  std::memset(slice->data(), 'x', 4096);  // still mapped: no fault
  char back = 0;
  ASSERT_EQ(pread(fd, &back, 1, 4095), 1);
  EXPECT_EQ(back, 'x');
  close(fd);
}

}  // namespace
}  // namespace gpucmd
