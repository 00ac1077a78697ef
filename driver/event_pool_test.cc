#include "driver/event_pool.h"

#include <atomic>
#include <thread>

#include "gtest/gtest.h"

namespace gpucmd {
namespace {

// Events are plain numbers here; the pool counts what it creates and destroys.
struct Counts {
  std::atomic<int> created{0};
  std::atomic<int> destroyed{0};
};

EventPool<int> CountingPool(Counts& counts) {
  return EventPool<int>([&counts]() -> absl::StatusOr<int> { return ++counts.created; },
                        [&counts](int) { ++counts.destroyed; });
}

TEST(EventPoolTest, GivenEventsAreTakenAgainInsteadOfCreated) {
  Counts counts;
  EventPool<int> pool = CountingPool(counts);
  int first = *pool.Take();
  int second = *pool.Take();
  EXPECT_NE(first, second);
  pool.Give(first);
  pool.Give(second);
  EXPECT_EQ(pool.idle(), 2u);
  pool.Take().IgnoreError();
  pool.Take().IgnoreError();
  EXPECT_EQ(counts.created, 2);
  EXPECT_EQ(pool.idle(), 0u);
}

TEST(EventPoolTest, IdleEventsAreDestroyedWithThePool) {
  Counts counts;
  {
    EventPool<int> pool = CountingPool(counts);
    pool.Give(*pool.Take());
    pool.Give(*pool.Take());
  }
  EXPECT_EQ(counts.created, 1);
  EXPECT_EQ(counts.destroyed, 1);
}

TEST(EventPoolTest, KeepsAtMostMaxIdle) {
  Counts counts;
  EventPool<int> pool = CountingPool(counts);
  std::vector<int> taken;
  for (size_t i = 0; i < EventPool<int>::kMaxIdle + 10; ++i) taken.push_back(*pool.Take());
  for (int event : taken) pool.Give(event);
  EXPECT_EQ(pool.idle(), EventPool<int>::kMaxIdle);
  EXPECT_EQ(counts.destroyed, 10);
}

TEST(EventPoolTest, ConcurrentTakersNeverShareAnEvent) {
  Counts counts;
  EventPool<int> pool = CountingPool(counts);
  constexpr int kThreads = 4;
  constexpr int kRounds = 2000;
  std::atomic<bool> shared{false};
  std::vector<std::atomic<int>> holders(kThreads * kRounds + 1);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < kRounds; ++round) {
        int event = *pool.Take();
        if (holders[event].fetch_add(1) != 0) shared = true;
        holders[event].fetch_sub(1);
        pool.Give(event);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_FALSE(shared);
  EXPECT_LE(counts.created, kThreads);
}

}  // namespace
}  // namespace gpucmd
