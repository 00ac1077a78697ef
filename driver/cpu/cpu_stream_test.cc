#include "driver/cpu/cpu_stream.h"

#include <sched.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "driver/cpu/stream_gate.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

TEST(CpuStreamTest, RunsWorkInOrderOffTheCallingThread) {
  CpuStream stream(0);
  std::vector<int> order;
  std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> inline_run{false};
  for (int i = 0; i < 100; ++i) {
    stream.Enqueue([&order, &inline_run, caller, i] {
      if (std::this_thread::get_id() == caller) inline_run = true;
      order.push_back(i);
      return absl::OkStatus();
    });
  }
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_FALSE(inline_run);
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

// Note [Device work yields to the control plane] in base/batch_scheduling.h.
TEST(CpuStreamTest, WorkRunsAsBatchWorkWithoutChangingTheCaller) {
  const int caller_policy = sched_getscheduler(0);
  CpuStream stream(0);
  int worker_policy = -1;
  stream.Enqueue([&worker_policy] {
    worker_policy = sched_getscheduler(0);
    return absl::OkStatus();
  });
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_EQ(worker_policy, SCHED_BATCH);
  EXPECT_EQ(sched_getscheduler(0), caller_policy);
}

TEST(CpuStreamTest, EventCompletesOnlyAfterEarlierWork) {
  CpuStream stream(0);
  StreamGate gate;
  gate.Block(stream);
  CpuStream::Event event = stream.RecordEvent();
  EXPECT_FALSE(event.IsComplete());
  gate.Open();
  ASSERT_TRUE(event.Wait().ok());
  EXPECT_TRUE(event.IsComplete());
}

// Waiters on different positions, the latest blocked first: each wakes once its own
// position completed, none before and none left asleep (the worker wakes waiters only
// when the earliest position awaited is reached).
TEST(CpuStreamTest, WaitersOnDifferentPositionsEachWakeAtTheirOwn) {
  CpuStream stream(0);
  StreamGate gate;
  gate.Block(stream);
  std::atomic<int> done{0};
  std::vector<CpuStream::Event> events;
  for (int i = 1; i <= 9; ++i) {
    stream.Enqueue([&done] {
      ++done;
      return absl::OkStatus();
    });
    if (i % 4 == 1) events.push_back(stream.RecordEvent());  // after 1, 5 and 9 items
  }
  std::vector<int> seen(events.size(), -1);
  std::vector<std::thread> waiters;
  for (int e = static_cast<int>(events.size()) - 1; e >= 0; --e) {
    waiters.emplace_back([&, e] {
      ASSERT_TRUE(events[e].Wait().ok());
      seen[e] = done;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // blocked in that order
  }
  gate.Open();
  for (std::thread& waiter : waiters) waiter.join();
  EXPECT_GE(seen[0], 1);
  EXPECT_GE(seen[1], 5);
  EXPECT_EQ(seen[2], 9);
}

TEST(CpuStreamTest, WaitEventHoldsTheOtherStreamBack) {
  CpuStream producer(0);
  CpuStream consumer(1);
  StreamGate gate;
  std::atomic<int> value{0};
  producer.Enqueue([&] {
    gate.Wait();
    value = 42;
    return absl::OkStatus();
  });
  ASSERT_TRUE(consumer.WaitEvent(producer.RecordEvent()).ok());
  int seen = -1;
  consumer.Enqueue([&] {
    seen = value;
    return absl::OkStatus();
  });
  CpuStream::Event consumed = consumer.RecordEvent();
  EXPECT_FALSE(consumed.IsComplete());
  gate.Open();
  ASSERT_TRUE(consumer.Synchronize().ok());
  EXPECT_EQ(seen, 42);
}

TEST(CpuStreamTest, ErrorsSurfaceAtTheNextSynchronizeOnce) {
  CpuStream stream(0);
  int ran_after = 0;
  stream.Enqueue([] { return absl::DataLossError("first"); });
  stream.Enqueue([] { return absl::InternalError("second"); });
  stream.Enqueue([&ran_after] {
    ++ran_after;
    return absl::OkStatus();
  });
  absl::Status status = stream.Synchronize();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(ran_after, 1);
  EXPECT_TRUE(stream.Synchronize().ok());
}

TEST(CpuStreamTest, EventsOutliveTheirStream) {
  CpuStream::Event event;
  {
    CpuStream stream(0);
    stream.Enqueue([] { return absl::OkStatus(); });
    event = stream.RecordEvent();
  }
  EXPECT_TRUE(event.IsComplete());
  EXPECT_TRUE(event.Wait().ok());
}

}  // namespace
}  // namespace gpucmd
