#include "server/command/payload_pool.h"

#include "gtest/gtest.h"

namespace gpucmd {
namespace {

constexpr uint64_t kMiB = 1 << 20;

TEST(PayloadPoolTest, AGivenStringsMemoryIsTakenAgain) {
  PayloadPool pool(64 * kMiB);
  std::string payload(4 * kMiB, 'p');
  const char* memory = payload.data();
  pool.Give(std::move(payload));
  EXPECT_GE(pool.cached_bytes(), 4 * kMiB);
  std::string again = pool.Take();
  EXPECT_EQ(again.data(), memory) << "the same memory, pages already touched";
  EXPECT_EQ(pool.cached_bytes(), 0u);
  EXPECT_TRUE(pool.Take().empty()) << "nothing cached: a new string";
}

TEST(PayloadPoolTest, SmallStringsAndStringsPastTheLimitAreFreed) {
  PayloadPool pool(6 * kMiB);
  pool.Give(std::string(1024, 's'));
  EXPECT_EQ(pool.cached_bytes(), 0u) << "small payloads are not worth keeping";
  pool.Give(std::string(4 * kMiB, 'a'));
  pool.Give(std::string(4 * kMiB, 'b'));
  EXPECT_LE(pool.cached_bytes(), 6 * kMiB);
  EXPECT_GE(pool.cached_bytes(), 4 * kMiB);
}

TEST(PayloadPoolTest, BytesComeBackWhenTheyDie) {
  PayloadPool pool(64 * kMiB);
  const std::byte* memory = nullptr;
  {
    Bytes bytes = pool.TakeBytes(2 * kMiB);
    ASSERT_EQ(bytes.size(), 2 * kMiB);
    memory = bytes.data();
    EXPECT_EQ(pool.cached_bytes(), 0u);
  }
  EXPECT_GE(pool.cached_bytes(), 2 * kMiB);
  Bytes smaller = pool.TakeBytes(kMiB);
  EXPECT_EQ(smaller.data(), memory) << "a smaller payload reuses the larger memory";
  EXPECT_EQ(smaller.size(), kMiB);
}

TEST(PayloadPoolTest, AWrappedPayloadKeepsItsBytesAndComesBack) {
  PayloadPool pool(64 * kMiB);
  {
    Bytes wrapped = pool.Wrap(std::string(kMiB, 'w'));
    EXPECT_EQ(wrapped.ToString(), std::string(kMiB, 'w'));
  }
  EXPECT_GE(pool.cached_bytes(), kMiB);
}

TEST(PayloadPoolTest, APayloadTheCacheCannotHoldBecomesTheSpare) {
  PayloadPool pool(4 * kMiB);
  std::string large(16 * kMiB, 'l');
  const char* memory = large.data();
  pool.Give(std::move(large));
  EXPECT_EQ(pool.cached_bytes(), 0u);
  EXPECT_GE(pool.spare_bytes(), 16 * kMiB);
  // A write growing to about that size takes it, keeping the bytes it already had.
  std::string payload = "first chunk";
  pool.Grow(payload, 12 * kMiB);
  EXPECT_EQ(payload.data(), memory) << "the spare's pages, already in place";
  EXPECT_EQ(payload, "first chunk");
  EXPECT_GE(payload.capacity(), 12 * kMiB);
  EXPECT_EQ(pool.spare_bytes(), 0u);
  // With no spare, new capacity.
  std::string another = "x";
  pool.Grow(another, 8 * kMiB);
  EXPECT_GE(another.capacity(), 8 * kMiB);
  EXPECT_EQ(another, "x");
}

TEST(PayloadPoolTest, OnlyAPayloadOfMoreThanHalfTheSparesSizeTakesIt) {
  PayloadPool pool(4 * kMiB);
  std::string large(16 * kMiB, 'l');
  const std::byte* memory = reinterpret_cast<const std::byte*>(large.data());
  pool.Give(std::move(large));
  {
    Bytes small = pool.TakeBytes(2 * kMiB);
    EXPECT_NE(small.data(), memory);
    EXPECT_GE(pool.spare_bytes(), 16 * kMiB) << "left for a payload its size";
    Bytes read = pool.TakeBytes(10 * kMiB);
    EXPECT_EQ(read.data(), memory);
    EXPECT_EQ(read.size(), 10 * kMiB);
  }
  EXPECT_GE(pool.spare_bytes(), 16 * kMiB) << "given back when the Bytes died";
  pool.Give(std::string(32 * kMiB, 'n'));
  EXPECT_GE(pool.spare_bytes(), 32 * kMiB) << "the latest payload replaces the spare";
}

TEST(PayloadPoolTest, AReadTakesACachedStringThatHoldsItBeforeTheSpare) {
  PayloadPool pool(32 * kMiB);
  std::string older(16 * kMiB, 'o');
  std::string newer(16 * kMiB, 'n');
  const std::byte* newer_memory = reinterpret_cast<const std::byte*>(newer.data());
  pool.Give(std::move(older));
  pool.Give(std::move(newer));
  pool.Give(std::string(16 * kMiB, 's'));  // past the cache: the spare
  ASSERT_GE(pool.spare_bytes(), 16 * kMiB);
  ASSERT_GE(pool.cached_bytes(), 32 * kMiB);
  {
    Bytes read = pool.TakeBytes(16 * kMiB);
    EXPECT_EQ(read.data(), newer_memory) << "the most recently cached string that holds it";
    EXPECT_GE(pool.spare_bytes(), 16 * kMiB) << "the spare is left alone";
  }
  EXPECT_GE(pool.cached_bytes(), 32 * kMiB) << "given back to the cache, not released";
  EXPECT_GE(pool.spare_bytes(), 16 * kMiB);
}

TEST(PayloadPoolTest, ACachedStringTooSmallLeavesTheReadToTheSpare) {
  PayloadPool pool(4 * kMiB);
  pool.Give(std::string(2 * kMiB, 'c'));
  std::string large(16 * kMiB, 'l');
  const std::byte* memory = reinterpret_cast<const std::byte*>(large.data());
  pool.Give(std::move(large));
  ASSERT_GE(pool.cached_bytes(), 2 * kMiB);
  Bytes read = pool.TakeBytes(10 * kMiB);
  EXPECT_EQ(read.data(), memory);
  EXPECT_GE(pool.cached_bytes(), 2 * kMiB) << "the small string stays cached";
}

}  // namespace
}  // namespace gpucmd
