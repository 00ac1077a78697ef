#include "base/countdown.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace gpucmd {
namespace {

TEST(CountdownTest, RunsTheCallbackOnceAtTheLastCall) {
  int ran = 0;
  auto one_done = CountdownTo(3, [&ran] { ++ran; });
  auto copy = one_done;
  one_done();
  copy();
  EXPECT_EQ(ran, 0);
  one_done();
  EXPECT_EQ(ran, 1);
}

TEST(CountdownTest, CallsFromManyThreadsRunItOnce) {
  constexpr int kThreads = 8;
  constexpr int kCallsEach = 1000;
  std::atomic<int> ran = 0;
  auto one_done = CountdownTo(kThreads * kCallsEach, [&ran] { ++ran; });
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([one_done] {
      for (int call = 0; call < kCallsEach; ++call) one_done();
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(ran.load(), 1);
}

}  // namespace
}  // namespace gpucmd
