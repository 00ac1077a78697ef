#include "server/core/device_worker.h"

#include <atomic>
#include <chrono>
#include <future>
#include <set>
#include <thread>

#include "driver/cpu/cpu_driver.h"
#include "gtest/gtest.h"
#include "server/command/command_factory.h"
#include "server/core/worker_test_calls.h"

namespace gpucmd {
namespace {

constexpr uint64_t kMiB = 1 << 20;

DeviceWorker::Factory CpuFactory(uint64_t capacity) {
  return MakeCommandFactory<CpuDriver>(
      [capacity] { return CpuBackend::Create({.capacity_bytes = capacity, .stream_count = 4}); },
      CommandOptions());
}

TEST(DeviceWorkerTest, ManySessionsAllocateWriteAndReadConcurrently) {
  Metrics metrics(1);
  DeviceWorker worker({.ordinal = 0}, CpuFactory(256 * kMiB), &metrics);
  constexpr int kSessions = 8;
  constexpr int kBuffersEach = 20;
  std::vector<std::thread> clients;
  std::vector<std::vector<BufferId>> ids(kSessions);
  for (int s = 0; s < kSessions; ++s) {
    clients.emplace_back([&, s] {
      SessionId session = s + 1;
      for (int b = 0; b < kBuffersEach; ++b) {
        uint64_t size = 1000 + 997 * b;
        std::string data(size, static_cast<char>('a' + s));
        absl::StatusOr<BufferId> id = OnDevice<absl::StatusOr<BufferId>>(
            worker, session, [&](CommandInterface& command) -> absl::StatusOr<BufferId> {
              ASSIGN_OR_RETURN(BufferId id, command.Allocate(session, size));
              RETURN_IF_ERROR(command.Write(session, b % 3, id, CopyLayout::Contiguous(0, size),
                                            data));
              return id;
            });
        ASSERT_TRUE(id.ok()) << id.status();
        ids[s].push_back(*id);
        // The read finishes on the completion thread.
        std::promise<std::string> read_back;
        ASSERT_TRUE(worker.Submit(session, [&](CommandInterface& command) {
          absl::StatusOr<PendingRead> read =
              command.Read(session, (b + 1) % 3, *id, CopyLayout::Contiguous(0, size));
          ASSERT_TRUE(read.ok());
          auto shared = std::make_shared<PendingRead>(*std::move(read));
          worker.Complete(session, [shared] { return shared->wait(); },
                          [shared, &read_back](absl::Status status) {
                            read_back.set_value(status.ok() ? shared->bytes.ToString()
                                                            : std::string(status.message()));
                          });
        }).ok());
        EXPECT_EQ(read_back.get_future().get(), data);
      }
    });
  }
  for (std::thread& client : clients) client.join();
  std::set<BufferId> all;
  for (const auto& session_ids : ids) all.insert(session_ids.begin(), session_ids.end());
  EXPECT_EQ(all.size(), static_cast<size_t>(kSessions * kBuffersEach)) << "ids must be unique";
  // Usage is published after each task; one more task makes sure the last one is in.
  OnDevice<int>(worker, 99, [](CommandInterface&) { return 0; });
  DeviceUsage usage = worker.usage();
  EXPECT_EQ(usage.sessions.size(), static_cast<size_t>(kSessions));
  for (int s = 1; s <= kSessions; ++s) EXPECT_EQ(usage.sessions[s].buffers, kBuffersEach + 0u);
  EXPECT_TRUE(worker.ready());
}

// Sessions whose waits hold every completion thread (each on a kernel that has not
// ended) do not keep another session from its answer: a thread more is started for it.
TEST(DeviceWorkerTest, WaitsThatHoldEveryCompletionThreadHoldNoOtherSession) {
  Metrics metrics(1);
  DeviceWorker worker({.ordinal = 0, .completion_threads = 2}, CpuFactory(kMiB), &metrics);
  constexpr int kWaiting = 5;  // more than the threads started with
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> others_answered;
  std::atomic<int> left{kWaiting};
  for (int s = 1; s <= kWaiting; ++s) {
    ASSERT_TRUE(worker.Submit(s, [&, s](CommandInterface&) {
      worker.Complete(s, [released] { released.wait(); return absl::OkStatus(); },
                      [&](absl::Status) {
                        if (--left == 0) others_answered.set_value();
                      });
    }).ok());
  }
  constexpr SessionId kFree = 100;
  std::promise<absl::Status> answered;
  ASSERT_TRUE(worker.Submit(kFree, [&](CommandInterface&) {
    worker.Complete(kFree, [] { return absl::OkStatus(); },
                    [&](absl::Status status) { answered.set_value(status); });
  }).ok());
  std::future<absl::Status> answer = answered.get_future();
  const bool in_time = answer.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  release.set_value();  // in every case, so that the worker can stop
  ASSERT_TRUE(in_time) << "the free session waited behind the others' waits";
  EXPECT_TRUE(answer.get().ok());
  others_answered.get_future().wait();
}

TEST(DeviceWorkerTest, FailedDeviceRefusesWorkAsUnavailable) {
  Metrics metrics(1);
  DeviceWorker worker({.ordinal = 0},
                      [] { return absl::StatusOr<std::shared_ptr<CommandInterface>>(
                               absl::InternalError("no such device")); },
                      &metrics);
  while (worker.init_status().ok()) std::this_thread::yield();
  EXPECT_FALSE(worker.ready());
  absl::Status status = worker.Submit(1, [](CommandInterface&) {});
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
}

TEST(DeviceWorkerTest, FullQueueIsResourceExhausted) {
  // Declared before the worker: its tasks use them until it stops.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> started;
  Metrics metrics(1);
  DeviceWorker worker({.ordinal = 0, .queue_capacity = 2, .per_session_limit = 2},
                      CpuFactory(16 * kMiB), &metrics);
  ASSERT_TRUE(worker.Submit(1, [&](CommandInterface&) {
    started.set_value();
    released.wait();
  }).ok());
  started.get_future().wait();  // the device thread is busy; the queue is empty
  ASSERT_TRUE(worker.Submit(1, [](CommandInterface&) {}).ok());
  ASSERT_TRUE(worker.Submit(2, [](CommandInterface&) {}).ok());
  EXPECT_EQ(worker.queue_depth(), 2u);
  EXPECT_EQ(metrics.QueueDepth(0).Value(), 2);
  EXPECT_EQ(worker.Submit(3, [](CommandInterface&) {}).code(),
            absl::StatusCode::kResourceExhausted);
  release.set_value();
}

// The watchdog's question (Note [Service manager] in server/service_notifier.h): a device
// held by a task, or with tasks waiting that its thread does not take, is wedged once
// that lasted `within`; an idle one is not. (Zero and an hour stand for "already" and
// "not yet": no timing here.)
TEST(DeviceWorkerTest, ADeviceHeldOrNotTakingItsQueuedTasksMakesNoProgress) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> started;
  Metrics metrics(1);
  DeviceWorker worker({.ordinal = 0}, CpuFactory(16 * kMiB), &metrics);
  worker.AwaitInitialised();
  EXPECT_TRUE(worker.MakesProgress(std::chrono::hours(1)));
  ASSERT_TRUE(worker.Submit(1, [&](CommandInterface&) {
    started.set_value();
    released.wait();
  }).ok());
  started.get_future().wait();  // the device thread holds the device
  EXPECT_FALSE(worker.MakesProgress(std::chrono::nanoseconds(0)));
  EXPECT_TRUE(worker.MakesProgress(std::chrono::hours(1)));
  release.set_value();
  worker.Stop();
  EXPECT_TRUE(worker.MakesProgress(std::chrono::nanoseconds(0))) << "idle";
}

TEST(DeviceWorkerTest, AnIdleDeviceRunsAWaitFreeTaskOnTheSubmittingThread) {
  Metrics metrics(1);
  DeviceWorker worker({.ordinal = 0}, CpuFactory(16 * kMiB), &metrics);
  worker.AwaitInitialised();
  // The device thread's upkeep may take the device at the moment a task comes, and a
  // task queued there answers while the device thread still finishes it: that task runs
  // there, which is correct too. Each attempt starts once nobody holds the device.
  std::thread::id ran_on;
  for (int attempt = 0; attempt < 1000 && ran_on != std::this_thread::get_id(); ++attempt) {
    while (!worker.MakesProgress(std::chrono::nanoseconds(0))) std::this_thread::yield();
    std::promise<std::thread::id> where;
    ASSERT_TRUE(worker.Submit(1, [&where](CommandInterface&) {
      where.set_value(std::this_thread::get_id());
    }, DeviceWorker::Placement::kHereWhenIdle).ok());
    ran_on = where.get_future().get();
  }
  EXPECT_EQ(ran_on, std::this_thread::get_id()) << "ran here, before Submit returned";
}

TEST(DeviceWorkerTest, ABusyDeviceQueuesAWaitFreeTaskBehindTheOthers) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> started;
  Metrics metrics(1);
  DeviceWorker worker({.ordinal = 0}, CpuFactory(16 * kMiB), &metrics);
  std::vector<int> order;  // written by the tasks only, one at a time
  ASSERT_TRUE(worker.Submit(1, [&](CommandInterface&) {
    started.set_value();
    released.wait();
    order.push_back(1);
  }).ok());
  started.get_future().wait();  // the device thread holds the device
  ASSERT_TRUE(worker.Submit(2, [&](CommandInterface&) { order.push_back(2); }).ok());
  std::promise<std::thread::id> where;
  ASSERT_TRUE(worker.Submit(3, [&](CommandInterface&) {
    order.push_back(3);
    where.set_value(std::this_thread::get_id());
  }, DeviceWorker::Placement::kHereWhenIdle).ok());
  EXPECT_EQ(worker.queue_depth(), 2u) << "queued, not run here";
  release.set_value();
  EXPECT_NE(where.get_future().get(), std::this_thread::get_id());
  worker.Stop();
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST(DeviceWorkerTest, StopFinishesQueuedWork) {
  Metrics metrics(1);
  auto worker = std::make_unique<DeviceWorker>(DeviceWorker::Options{.ordinal = 0},
                                               CpuFactory(16 * kMiB), &metrics);
  std::atomic<int> ran{0};
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(worker->Submit(i % 5, [&ran](CommandInterface&) { ++ran; }).ok());
  }
  worker->Stop();
  EXPECT_EQ(ran, 50);
  EXPECT_EQ(worker->Submit(1, [](CommandInterface&) {}).code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace gpucmd
