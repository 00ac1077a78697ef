#include "server/command/memory_pool.h"

#include <map>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// A page source with a byte budget, recording what is held (a test double for a
// backend's device memory; addresses are fake and never dereferenced).
class FakePages {
 public:
  explicit FakePages(uint64_t capacity) : capacity_(capacity) {}

  MemoryPool::AllocatePageFn Allocate() {
    return [this](uint64_t size) -> absl::StatusOr<DeviceResource> {
      if (held_ + size > capacity_) return absl::ResourceExhaustedError("fake device full");
      held_ += size;
      DeviceResource page{next_address_, size};
      next_address_ += size + 4096;
      live_.insert(page.address);
      return page;
    };
  }
  MemoryPool::FreePageFn Free() {
    return [this](const DeviceResource& page) {
      EXPECT_EQ(live_.erase(page.address), 1u) << "page freed twice";
      held_ -= page.size_bytes;
    };
  }
  uint64_t held() const { return held_; }

 private:
  const uint64_t capacity_;
  uint64_t held_ = 0;
  uint64_t next_address_ = 1 << 20;
  std::set<uint64_t> live_;
};

class MemoryPoolTest : public ::testing::Test {
 protected:
  MemoryPoolTest() : pages_(64 * kMiB), pool_(Options(), pages_.Allocate(), pages_.Free()) {}

  static MemoryPool::Options Options() {
    return {.capacity_bytes = 64 * kMiB, .min_page_bytes = 1 * kMiB, .max_page_bytes = 4 * kMiB};
  }

  FakePages pages_;
  MemoryPool pool_;
};

TEST_F(MemoryPoolTest, SmallRequestsShareAPageBySizeClass) {
  absl::StatusOr<SliceLocation> a = pool_.Reserve(100, 1);
  absl::StatusOr<SliceLocation> b = pool_.Reserve(200, 2);
  absl::StatusOr<SliceLocation> c = pool_.Reserve(1000, 3);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->page, b->page) << "100 and 200 bytes are both the 256-byte class";
  EXPECT_NE(a->page, c->page);
  EXPECT_EQ(pool_.used_bytes(), 256u + 256u + 1024u);
  EXPECT_EQ(pool_.reserved_bytes(), 2 * kMiB);
  DeviceResource ra = *pool_.Resolve(*a, 1);
  DeviceResource rb = *pool_.Resolve(*b, 2);
  EXPECT_EQ(ra.size_bytes, 256u);
  EXPECT_TRUE(rb.address >= ra.address + 256 || ra.address >= rb.address + 256)
      << "slices overlap";
}

TEST_F(MemoryPoolTest, LargeRequestsGetTheirOwnPageAndReturnItAtOnce) {
  absl::StatusOr<SliceLocation> large = pool_.Reserve(3 * kMiB + 5, 9);
  ASSERT_TRUE(large.ok());
  EXPECT_EQ(pool_.Resolve(*large, 9)->size_bytes, 3 * kMiB + 64 * 1024);
  uint64_t held = pages_.held();
  pool_.Release(*large);
  EXPECT_EQ(pages_.held(), held - (3 * kMiB + 64 * 1024));
}

TEST_F(MemoryPoolTest, ResolveChecksIdentity) {
  SliceLocation location = *pool_.Reserve(64, 7);
  EXPECT_TRUE(pool_.Resolve(location, 7).ok());
  EXPECT_EQ(pool_.Resolve(location, 8).status().code(), absl::StatusCode::kNotFound);
  pool_.Release(location);
  SliceLocation reused = *pool_.Reserve(64, 8);
  ASSERT_EQ(reused, location) << "test assumes the slot is reused";
  EXPECT_EQ(pool_.Resolve(location, 7).status().code(), absl::StatusCode::kNotFound)
      << "a stale handle resolved to the new owner's memory";
  // A page that is gone (and its id never reused) resolves nothing.
  pool_.Release(reused);
  pool_.CleanUp();
  SliceLocation again = *pool_.Reserve(64, 9);
  EXPECT_NE(again.page, location.page);
  EXPECT_FALSE(pool_.Resolve(location, 9).ok());
}

TEST_F(MemoryPoolTest, NeverFitsIsKnownBeforeTrying) {
  EXPECT_TRUE(pool_.NeverFits(65 * kMiB));
  EXPECT_FALSE(pool_.NeverFits(64 * kMiB));
  absl::Status status = pool_.Reserve(65 * kMiB, 1).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("never fit"));
}

TEST_F(MemoryPoolTest, OutOfMemoryThenCleanUpThenSuccess) {
  std::vector<SliceLocation> held;
  for (uint64_t owner = 1;; ++owner) {
    absl::StatusOr<SliceLocation> location = pool_.Reserve(kMiB / 4, owner);
    if (!location.ok()) {
      EXPECT_EQ(location.status().code(), absl::StatusCode::kResourceExhausted);
      break;
    }
    held.push_back(*location);
  }
  // Free everything: the pages stay cached in the pool until CleanUp.
  for (SliceLocation location : held) pool_.Release(location);
  EXPECT_EQ(pool_.used_bytes(), 0u);
  EXPECT_GT(pool_.reserved_bytes(), 0u);
  EXPECT_FALSE(pool_.Reserve(8 * kMiB, 1000).ok()) << "cached pages block a large request";
  EXPECT_GT(pool_.CleanUp(), 0u);
  EXPECT_EQ(pool_.reserved_bytes(), 0u);
  EXPECT_TRUE(pool_.Reserve(8 * kMiB, 1000).ok());
}

TEST_F(MemoryPoolTest, LessRoomThanAPageMakesASmallerOne) {
  // Two large pages hold 62 MiB; the page size has grown to 4 MiB meanwhile.
  ASSERT_TRUE(pool_.Reserve(31 * kMiB, 1).ok());
  ASSERT_TRUE(pool_.Reserve(31 * kMiB, 2).ok());
  ASSERT_EQ(pool_.Reserve(256, 3).status().code(), absl::StatusCode::kOk);
  EXPECT_EQ(pool_.current_page_bytes(), 4 * kMiB);
  EXPECT_EQ(pages_.held(), 64 * kMiB) << "a 2 MiB page for the last 2 MiB";
  EXPECT_EQ(pool_.PagesToEvacuate().size(), 1u) << "the smaller page is outdated";
}

TEST_F(MemoryPoolTest, FreeSlotsOfALargerClassServeWhenNoPageFits) {
  // Every page of the 8 KiB class, as many as fit, keeps one slice: most of the device
  // is free, but in those pages.
  std::map<uint64_t, std::vector<SliceLocation>> by_page;
  for (uint64_t owner = 1;; ++owner) {
    absl::StatusOr<SliceLocation> location = pool_.Reserve(8192, owner);
    if (!location.ok()) break;
    by_page[location->page].push_back(*location);
  }
  ASSERT_GT(by_page.size(), 1u);
  for (auto& [page, slices] : by_page) {
    for (size_t i = 1; i < slices.size(); ++i) pool_.Release(slices[i]);
  }
  const uint64_t used = pool_.used_bytes();
  absl::StatusOr<SliceLocation> small = pool_.Reserve(16, 1 << 20);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_TRUE(by_page.contains(small->page)) << "a slot of an 8 KiB page";
  EXPECT_EQ(pool_.Resolve(*small, 1 << 20)->size_bytes, 8192u);
  EXPECT_EQ(pool_.used_bytes(), used + 8192);
  // A class larger than any page with room still finds none.
  EXPECT_EQ(pool_.Reserve(kMiB / 2, 2 << 20).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST_F(MemoryPoolTest, PageSizeGrowsAndOldPagesBecomeOutdated) {
  SliceLocation first = *pool_.Reserve(512, 1);
  uint64_t first_page_bytes = pool_.current_page_bytes();
  // Grow the pool with large pages until the page size moves up.
  std::vector<SliceLocation> large;
  for (uint64_t owner = 100; pool_.current_page_bytes() == first_page_bytes; ++owner) {
    large.push_back(*pool_.Reserve(3 * kMiB, owner));
    pool_.Reserve(512, owner + 1000).IgnoreError();  // triggers the growth check
  }
  EXPECT_GT(pool_.current_page_bytes(), first_page_bytes);
  std::vector<uint64_t> evacuate = pool_.PagesToEvacuate();
  EXPECT_THAT(evacuate, ::testing::Contains(first.page));
}

TEST_F(MemoryPoolTest, SparsePagesAreFragmented) {
  // Two pages of the 4 KiB class (1 MiB pages hold 256 slices each).
  std::vector<SliceLocation> slices;
  for (uint64_t owner = 1; owner <= 456; ++owner) slices.push_back(*pool_.Reserve(4096, owner));
  ASSERT_NE(slices.front().page, slices.back().page);
  // Empty the first page down to a handful of survivors.
  for (size_t i = 5; i < 256; ++i) pool_.Release(slices[i]);
  std::vector<uint64_t> evacuate = pool_.PagesToEvacuate();
  EXPECT_THAT(evacuate, ::testing::ElementsAre(slices.front().page));
  EXPECT_EQ(pool_.LiveSlices(slices.front().page).size(), 5u);
}

TEST_F(MemoryPoolTest, RetiredPagesTakeNoNewSlices) {
  SliceLocation first = *pool_.Reserve(1024, 1);
  pool_.SetRetired(first.page, true);
  SliceLocation second = *pool_.Reserve(1024, 2);
  EXPECT_NE(second.page, first.page);
  pool_.SetRetired(first.page, false);
}

}  // namespace
}  // namespace gpucmd
