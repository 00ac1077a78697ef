#include "driver/cpu/cpu_stream.h"

#include <sched.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "driver/cpu/stream_gate.h"
#include "driver/driver.h"
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

// Brief work finding the stream idle runs on the calling thread, before RunOrEnqueue
// returns, as the stream's next item: an event recorded after it is complete.
TEST(CpuStreamTest, BriefWorkOnAnIdleStreamRunsOnTheCallingThread) {
  CpuStream stream(0);
  ASSERT_TRUE(stream.Synchronize().ok());  // the worker is back, waiting
  std::thread::id ran_on;
  // The worker may not have marked itself idle yet: a few tries.
  for (int attempt = 0; attempt < 100 && ran_on != std::this_thread::get_id(); ++attempt) {
    stream.RunOrEnqueue([&ran_on] {
      ran_on = std::this_thread::get_id();
      return absl::OkStatus();
    });
    ASSERT_TRUE(stream.Synchronize().ok());
  }
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  const uint64_t before = stream.enqueued();
  stream.RunOrEnqueue([] { return absl::InternalError("brief and failed"); });
  EXPECT_EQ(stream.enqueued(), before + 1);
  EXPECT_TRUE(stream.RecordEvent().IsComplete());
  EXPECT_EQ(stream.Synchronize().code(), absl::StatusCode::kInternal) << "errors still surface";
}

// Brief work on a busy stream waits its turn on the worker, and work queued while brief
// work runs on a calling thread waits for it: the stream's order holds either way.
TEST(CpuStreamTest, BriefWorkKeepsTheStreamsOrder) {
  CpuStream stream(0);
  std::vector<int> order;
  Mutex mutex;
  auto record = [&](int which) {
    return [&, which] {
      MutexLock lock(&mutex);
      order.push_back(which);
      return absl::OkStatus();
    };
  };
  {
    StreamGate gate;
    gate.Block(stream);
    stream.RunOrEnqueue(record(1));
    EXPECT_FALSE(stream.RecordEvent().IsComplete()) << "ran past the blocked work";
    gate.Open();
  }
  ASSERT_TRUE(stream.Synchronize().ok());
  std::promise<void> running;
  std::promise<void> finish;
  std::thread brief([&] {
    stream.RunOrEnqueue([&] {
      running.set_value();
      finish.get_future().wait();
      return record(2)();
    });
  });
  running.get_future().wait();
  stream.Enqueue(record(3));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  finish.set_value();
  brief.join();
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
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

// OnComplete calls back on the stream's worker once the event's work ran, not before, and
// at once on the caller for an event that is complete.
TEST(CpuStreamTest, OnCompleteCallsBackOnTheWorkerOnceTheEventCompleted) {
  CpuStream stream(0);
  StreamGate gate;
  gate.Block(stream);
  std::thread::id worker;
  stream.Enqueue([&worker] {
    worker = std::this_thread::get_id();
    return absl::OkStatus();
  });
  const CpuStream::Event event = stream.RecordEvent();
  stream.Enqueue([] { return absl::OkStatus(); });  // after the event: not waited for
  const CpuStream::Event later = stream.RecordEvent();
  std::promise<std::thread::id> called_on;
  event.OnComplete([&] {
    EXPECT_TRUE(event.IsComplete());
    called_on.set_value(std::this_thread::get_id());
  });
  std::future<std::thread::id> called = called_on.get_future();
  EXPECT_EQ(called.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout)
      << "called back before the event's work ran";
  gate.Open();
  EXPECT_EQ(called.get(), worker);
  ASSERT_TRUE(later.Wait().ok());
  std::thread::id at_once;
  event.OnComplete([&at_once] { at_once = std::this_thread::get_id(); });
  EXPECT_EQ(at_once, std::this_thread::get_id());
}

// OnAllComplete calls back once, after the last of events on two streams completed,
// whichever finishes last; and at once for none.
TEST(CpuStreamTest, OnAllCompleteCallsBackOnceAfterTheLastEvent) {
  for (bool first_opens_first : {true, false}) {
    CpuStream first(0), second(1);
    StreamGate first_gate, second_gate;
    first_gate.Block(first);
    second_gate.Block(second);
    std::vector<CpuStream::Event> events = {first.RecordEvent(), second.RecordEvent()};
    std::atomic<int> calls{0};
    std::promise<void> called;
    OnAllComplete(events, [&] {
      EXPECT_TRUE(events[0].IsComplete() && events[1].IsComplete());
      if (++calls == 1) called.set_value();
    });
    (first_opens_first ? first_gate : second_gate).Open();
    (first_opens_first ? first : second).Synchronize().IgnoreError();
    EXPECT_EQ(calls, 0) << "called back with one event still running";
    (first_opens_first ? second_gate : first_gate).Open();
    called.get_future().wait();
    first.Synchronize().IgnoreError();
    second.Synchronize().IgnoreError();
    EXPECT_EQ(calls, 1);
  }
  bool called_at_once = false;
  OnAllComplete(std::vector<CpuStream::Event>(), [&called_at_once] { called_at_once = true; });
  EXPECT_TRUE(called_at_once);
}

}  // namespace
}  // namespace gpucmd
