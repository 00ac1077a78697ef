#include "base/freed_memory.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include "gtest/gtest.h"

namespace gpucmd {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// Bytes of this process in memory.
uint64_t ResidentBytes() {
  uint64_t size = 0, resident = 0;
  std::ifstream("/proc/self/statm") >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

class FreedMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "a sanitizer's allocator stands in for malloc's heaps";
#endif
    KeepFreedMemory(kMiB);
  }

  // Frees `count` touched blocks of 1 MiB in the middle of malloc's heap: a small block
  // kept after each stops them from merging into its top, which malloc would trim.
  void FreeInTheMiddle(int count) {
    std::vector<void*> blocks;
    for (int i = 0; i < count; ++i) {
      void* block = std::malloc(kMiB);
      std::memset(block, 1, kMiB);
      blocks.push_back(block);
      pins_.push_back(std::malloc(64));
    }
    for (void* block : blocks) std::free(block);
  }

  void TearDown() override {
    for (void* pin : pins_) std::free(pin);
  }

  std::vector<void*> pins_;
};

TEST_F(FreedMemoryTest, FreeMemoryThatStaysIdleGoesBack) {
  FreeInTheMiddle(64);
  const uint64_t before = ResidentBytes();
  FreedMemoryReleaser releaser(kMiB);
  EXPECT_FALSE(releaser.Look(/*quiet=*/true)) << "one look is not enough";
  EXPECT_TRUE(releaser.Look(/*quiet=*/true));
  EXPECT_LT(ResidentBytes() + 48 * kMiB, before);
}

TEST_F(FreedMemoryTest, MemoryFreedWhileSomethingRunsIsKept) {
  FreeInTheMiddle(64);
  const uint64_t before = ResidentBytes();
  FreedMemoryReleaser releaser(kMiB);
  EXPECT_FALSE(releaser.Look(/*quiet=*/true));
  EXPECT_FALSE(releaser.Look(/*quiet=*/false));
  EXPECT_FALSE(releaser.Look(/*quiet=*/true)) << "the count starts again after a busy look";
  EXPECT_GT(ResidentBytes() + 16 * kMiB, before);
  EXPECT_TRUE(releaser.Look(/*quiet=*/true));
}

TEST_F(FreedMemoryTest, WhatMallocMayKeepStays) {
  FreeInTheMiddle(64);
  FreedMemoryReleaser releaser(uint64_t{1} << 40);
  EXPECT_FALSE(releaser.Look(/*quiet=*/true));
  EXPECT_FALSE(releaser.Look(/*quiet=*/true));
}

}  // namespace
}  // namespace gpucmd
