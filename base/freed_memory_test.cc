#include "base/freed_memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include "gperftools/malloc_extension.h"
#include "gtest/gtest.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GPUCMD_SANITIZER_ALLOCATOR  // it stands in for malloc; TCMalloc is not linked
#endif

namespace gpucmd {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// Bytes of this process in memory.
uint64_t ResidentBytes() {
  uint64_t size = 0, resident = 0;
  std::ifstream("/proc/self/statm") >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

// Page faults this process took so far that the kernel served without I/O.
int64_t MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// What malloc gave back to the system of the memory it had (and has not taken again).
uint64_t GivenBackBytes() {
  size_t bytes = 0;
#ifndef GPUCMD_SANITIZER_ALLOCATOR
  MallocExtension::instance()->GetNumericProperty("tcmalloc.pageheap_unmapped_bytes", &bytes);
#endif
  return bytes;
}

// Allocates `bytes`, writes every page of it, frees it.
void TouchAndFree(size_t bytes) {
  void* block = std::malloc(bytes);
  std::memset(block, 1, bytes);
  // The compiler may not drop the block as unused.
  asm volatile("" : : "r"(block) : "memory");
  std::free(block);
}

// Allocates `count` blocks of 1 MiB, writes every page of each, then frees them all.
void FreeTouchedBlocks(int count) {
  std::vector<void*> blocks;
  for (int i = 0; i < count; ++i) {
    void* block = std::malloc(kMiB);
    std::memset(block, 1, kMiB);
    blocks.push_back(block);
  }
  for (void* block : blocks) std::free(block);
}

class FreedMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifdef GPUCMD_SANITIZER_ALLOCATOR
    GTEST_SKIP() << "a sanitizer's allocator stands in for malloc";
#endif
    KeepFreedMemory();
  }

};

// A transfer's payload (here 16 and 64 MiB, past the 32 MiB above which glibc's malloc
// would unmap it) finds the pages of the last one in place.
TEST_F(FreedMemoryTest, APayloadOfTheSameSizeAgainTakesNoPageFaults) {
  for (size_t bytes : {size_t{16} << 20, size_t{64} << 20}) {
    // Twice: memory given back by an earlier release may serve the first, in part.
    TouchAndFree(bytes);
    TouchAndFree(bytes);
    const int64_t before = MinorFaults();
    TouchAndFree(bytes);
    EXPECT_LT(MinorFaults() - before, 64) << (bytes >> 20) << " MiB took fresh pages again";
  }
}

// However much a busy daemon frees, none of it goes back until the releaser says so
// (TCMalloc would otherwise give a page back every so many freed).
TEST_F(FreedMemoryTest, ChurnGivesNothingBack) {
  const uint64_t before = GivenBackBytes();
  for (int i = 0; i < 4000; ++i) {
    void* block = std::malloc(3 << 20);
    asm volatile("" : : "r"(block) : "memory");
    std::free(block);
  }
  EXPECT_LE(GivenBackBytes(), before);
}

TEST_F(FreedMemoryTest, FreeMemoryThatStaysIdleGoesBack) {
  FreeTouchedBlocks(64);
  const uint64_t before = ResidentBytes();
  FreedMemoryReleaser releaser(kMiB);
  EXPECT_FALSE(releaser.Look(/*quiet=*/true)) << "one look is not enough";
  EXPECT_TRUE(releaser.Look(/*quiet=*/true));
  EXPECT_LT(ResidentBytes() + 48 * kMiB, before);
}

TEST_F(FreedMemoryTest, MemoryFreedWhileSomethingRunsIsKept) {
  FreeTouchedBlocks(64);
  const uint64_t before = ResidentBytes();
  FreedMemoryReleaser releaser(kMiB);
  EXPECT_FALSE(releaser.Look(/*quiet=*/true));
  EXPECT_FALSE(releaser.Look(/*quiet=*/false));
  EXPECT_FALSE(releaser.Look(/*quiet=*/true)) << "the count starts again after a busy look";
  EXPECT_GT(ResidentBytes() + 16 * kMiB, before);
  EXPECT_TRUE(releaser.Look(/*quiet=*/true));
}

TEST_F(FreedMemoryTest, WhatMallocMayKeepStays) {
  FreeTouchedBlocks(64);
  FreedMemoryReleaser releaser(uint64_t{1} << 40);
  EXPECT_FALSE(releaser.Look(/*quiet=*/true));
  EXPECT_FALSE(releaser.Look(/*quiet=*/true));
}

}  // namespace
}  // namespace gpucmd
