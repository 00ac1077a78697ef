#include "server/command/pinned_pool.h"

#include <cstdlib>
#include <vector>

#include "gtest/gtest.h"

namespace gpucmd {
namespace {

class PinnedPoolTest : public ::testing::Test {
 protected:
  PinnedPool MakePool(uint64_t max_cached) {
    return PinnedPool(
        [this](uint64_t size) -> absl::StatusOr<HostResource> {
          ++backend_allocations_;
          if (fail_) return absl::ResourceExhaustedError("no pinned memory");
          return HostResource{static_cast<std::byte*>(std::malloc(size)), size};
        },
        [this](const HostResource& resource) {
          ++backend_frees_;
          std::free(resource.data);
        },
        max_cached);
  }

  int backend_allocations_ = 0;
  int backend_frees_ = 0;
  bool fail_ = false;
};

TEST_F(PinnedPoolTest, ReleasedAllocationsAreReused) {
  PinnedPool pool = MakePool(1 << 20);
  absl::StatusOr<PinnedPool::Lease> first = pool.Acquire(5000);
  ASSERT_TRUE(first.ok());
  EXPECT_GE(first->resource.size_bytes, 5000u);
  EXPECT_EQ(pool.outstanding_count(), 1u);
  pool.Release(first->binding.allocation);
  EXPECT_EQ(pool.outstanding_count(), 0u);
  absl::StatusOr<PinnedPool::Lease> second = pool.Acquire(6000);  // same 8 KiB class
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->resource.data, first->resource.data);
  EXPECT_EQ(backend_allocations_, 1);
  pool.Release(second->binding.allocation);
}

TEST_F(PinnedPoolTest, CacheIsCapped) {
  PinnedPool pool = MakePool(8192);
  auto a = pool.Acquire(8192);
  auto b = pool.Acquire(8192);
  pool.Release(a->binding.allocation);
  pool.Release(b->binding.allocation);  // over the cap: goes back to the backend
  EXPECT_EQ(pool.cached_bytes(), 8192u);
  EXPECT_EQ(backend_frees_, 1);
  pool.Trim();
  EXPECT_EQ(pool.cached_bytes(), 0u);
  EXPECT_EQ(backend_frees_, 2);
}

TEST_F(PinnedPoolTest, BackendRefusalIsResourceExhausted) {
  PinnedPool pool = MakePool(1 << 20);
  fail_ = true;
  EXPECT_EQ(pool.Acquire(100).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(pool.outstanding_count(), 0u);
}

TEST_F(PinnedPoolTest, ObserverSeesEveryRelease) {
  PinnedPool pool = MakePool(1 << 20);
  std::vector<uint64_t> seen;
  pool.SetReleaseObserver([&seen](uint64_t allocation) { seen.push_back(allocation); });
  auto lease = pool.Acquire(10);
  pool.Release(lease->binding.allocation);
  EXPECT_EQ(seen, std::vector<uint64_t>{lease->binding.allocation});
}

}  // namespace
}  // namespace gpucmd
