#include "server/core/device_worker.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <set>
#include <thread>

#include "base/mutex.h"
#include "driver/cpu/cpu_driver.h"
#include "gtest/gtest.h"
#include "server/command/command_factory.h"
#include "server/core/worker_test_calls.h"
#include "tests/testing/process_census.h"

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

// Note [Usage reported as it changes] in server/command/command.h: what the worker
// publishes, merged from reports of what changed, is the device's whole usage, through
// allocations, frees and closes across sessions.
TEST(DeviceWorkerTest, PublishedUsageIsTheDevicesWholeUsage) {
  Metrics metrics(1);
  DeviceWorker worker({.ordinal = 0}, CpuFactory(64 * kMiB), &metrics);
  constexpr int kSessions = 6;
  std::vector<std::vector<BufferId>> buffers(kSessions + 1);
  auto expect_published_is_whole = [&](int step) {
    const DeviceUsage whole = OnDevice<DeviceUsage>(
        worker, 99, [](CommandInterface& command) { return command.Usage(); });
    OnDevice<int>(worker, 99, [](CommandInterface&) { return 0; });  // published after it
    const DeviceUsage published = worker.usage();
    EXPECT_EQ(published.memory_used_bytes, whole.memory_used_bytes) << "step " << step;
    EXPECT_EQ(published.queued_on_streams, whole.queued_on_streams) << "step " << step;
    const DeviceUsage device_wide = worker.device_usage();
    EXPECT_EQ(device_wide.memory_used_bytes, whole.memory_used_bytes) << "step " << step;
    EXPECT_TRUE(device_wide.sessions.empty());
    ASSERT_EQ(published.sessions.size(), whole.sessions.size()) << "step " << step;
    EXPECT_EQ(worker.sessions_held(), whole.sessions.size()) << "step " << step;
    for (const auto& [id, figures] : whole.sessions) {
      ASSERT_TRUE(published.sessions.contains(id)) << "step " << step << ", session " << id;
      for (const SessionUsage& mine : {published.sessions.at(id), worker.usage_of(id)}) {
        EXPECT_EQ(mine.memory_used_bytes, figures.memory_used_bytes) << "step " << step;
        EXPECT_EQ(mine.buffers, figures.buffers) << "step " << step << ", session " << id;
        EXPECT_EQ(mine.queued_on_streams, figures.queued_on_streams) << "step " << step;
      }
    }
    EXPECT_EQ(worker.usage_of(99).buffers, 0u) << "a session the device holds nothing of";
  };
  for (int step = 0; step < 40; ++step) {
    const SessionId session = 1 + (step * 7) % kSessions;
    OnDevice<int>(worker, session, [&](CommandInterface& command) {
      if (step % 5 == 4) {
        command.CloseSession(session);
        buffers[session].clear();
      } else if (step % 3 == 2 && !buffers[session].empty()) {
        EXPECT_TRUE(command.Free(session, buffers[session].back()).ok());
        buffers[session].pop_back();
      } else {
        absl::StatusOr<BufferId> id = command.Allocate(session, 4096 * (1 + step % 4));
        EXPECT_TRUE(id.ok()) << id.status();
        if (id.ok()) buffers[session].push_back(*id);
      }
      return 0;
    });
    expect_published_is_whole(step);
  }
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

// A notice the test calls back itself.
struct HeldNotice {
  WorkEndNotice notice() {
    return [this](absl::AnyInvocable<void()> ended) { callback = std::move(ended); };
  }
  absl::AnyInvocable<void()> callback;
};

// Note [Completions called back]: a completion with a notice runs once the notice called
// back, not before, and never before the session's earlier completions, whatever order
// the notices come in; its wait is then not waited on by the worker.
TEST(DeviceWorkerTest, CompletionsWithANoticeRunOnceCalledBackInTheSessionsOrder) {
  Metrics metrics(1);
  DeviceWorker worker({.ordinal = 0}, CpuFactory(kMiB), &metrics);
  constexpr SessionId kSession = 1;
  HeldNotice first, second;
  Mutex mutex;
  std::vector<int> order;
  std::promise<void> both_ran;
  auto record = [&](int which) {
    return [&, which](absl::Status status) {
      EXPECT_TRUE(status.ok()) << status;
      MutexLock lock(&mutex);
      order.push_back(which);
      if (order.size() == 2) both_ran.set_value();
    };
  };
  ASSERT_TRUE(worker.Submit(kSession, [&](CommandInterface&) {
    worker.Complete(kSession, [] { return absl::OkStatus(); }, record(1), first.notice());
    worker.Complete(kSession, [] { return absl::OkStatus(); }, record(2), second.notice());
  }).ok());
  // Another session's completion without a notice runs meanwhile.
  std::promise<void> other_ran;
  ASSERT_TRUE(worker.Submit(2, [&](CommandInterface&) {
    worker.Complete(2, [] { return absl::OkStatus(); },
                    [&](absl::Status) { other_ran.set_value(); });
  }).ok());
  other_ran.get_future().wait();
  ASSERT_TRUE(first.callback != nullptr && second.callback != nullptr);
  std::future<void> ran = both_ran.get_future();
  second.callback();
  EXPECT_EQ(ran.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  {
    MutexLock lock(&mutex);
    EXPECT_TRUE(order.empty()) << "ran before its notice, or before the session's first";
  }
  first.callback();
  ran.wait();
  worker.Stop();
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

// Called-back completions do not block, so a burst of them (many sessions' waits ending
// with one kernel) is taken by the threads there are: none more starts, where one more
// starts for each session whose turn finds every thread held by a wait that may block
// (WaitsThatHoldEveryCompletionThreadHoldNoOtherSession).
TEST(DeviceWorkerTest, ABurstOfCalledBackCompletionsStartsNoThread) {
  Metrics metrics(1);
  DeviceWorker worker({.ordinal = 0, .completion_threads = 1}, CpuFactory(kMiB), &metrics);
  constexpr int kSessions = 32;
  std::vector<HeldNotice> notices(kSessions);
  std::atomic<int> answered = 0;
  std::promise<void> all_answered;
  for (int s = 0; s < kSessions; ++s) {
    ASSERT_TRUE(worker.Submit(s + 1, [&, s](CommandInterface&) {
      worker.Complete(s + 1, [] { return absl::OkStatus(); }, [&](absl::Status) {
        if (++answered == kSessions) all_answered.set_value();
      }, notices[s].notice());
    }).ok());
  }
  OnDevice<int>(worker, 99, [](CommandInterface&) { return 0; });  // the tasks above ran
  for (HeldNotice& notice : notices) notice.callback();  // every wait ends at once
  all_answered.get_future().wait();
  EXPECT_EQ(testing::ThreadsNamed(getpid(), "gpucmd-wait0"), 1);
  worker.Stop();
}

// A later completion's notice that calls back while the session's first completion waits
// its turn (every completion thread held) leaves the session in turn once: each of its
// completions runs once, in order.
TEST(DeviceWorkerTest, ALaterNoticeWhileTheFirstWaitsForAThreadRunsEachCompletionOnce) {
  Metrics metrics(1);
  DeviceWorker worker({.ordinal = 0, .completion_threads = 1, .max_completion_threads = 1},
                      CpuFactory(kMiB), &metrics);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> holding;
  ASSERT_TRUE(worker.Submit(1, [&](CommandInterface&) {
    worker.Complete(1, [&holding, released] {
      holding.set_value();
      released.wait();
      return absl::OkStatus();
    }, [](absl::Status) {});
  }).ok());
  holding.get_future().wait();  // the one completion thread is held
  constexpr SessionId kSession = 2;
  HeldNotice second;
  Mutex mutex;
  std::vector<int> order;
  auto record = [&](int which) {
    return [&, which](absl::Status) {
      MutexLock lock(&mutex);
      order.push_back(which);
    };
  };
  ASSERT_TRUE(worker.Submit(kSession, [&](CommandInterface&) {
    worker.Complete(kSession, [] { return absl::OkStatus(); }, record(1));
    worker.Complete(kSession, [] { return absl::OkStatus(); }, record(2), second.notice());
  }).ok());
  OnDevice<int>(worker, 3, [](CommandInterface&) { return 0; });  // the task above ran
  ASSERT_NE(second.callback, nullptr);
  second.callback();
  release.set_value();
  worker.Stop();
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

// Note [Brief answers where the work ended]: a brief completion runs on the thread whose
// call back said its work ended, before that call back returns; the session's next, whose
// notice called back before, then goes to a completion thread, in order.
TEST(DeviceWorkerTest, ABriefCompletionRunsOnTheThreadThatCalledItsNoticeBack) {
  Metrics metrics(1);
  DeviceWorker worker({.ordinal = 0}, CpuFactory(kMiB), &metrics);
  constexpr SessionId kSession = 1;
  constexpr auto kBrief = DeviceWorker::Answering::kWhereWorkEnded;
  HeldNotice first, second;
  Mutex mutex;
  std::vector<std::pair<int, std::thread::id>> ran;
  std::promise<void> both_ran;
  auto record = [&](int which) {
    return [&, which](absl::Status) {
      MutexLock lock(&mutex);
      ran.emplace_back(which, std::this_thread::get_id());
      if (ran.size() == 2) both_ran.set_value();
    };
  };
  ASSERT_TRUE(worker.Submit(kSession, [&](CommandInterface&) {
    worker.Complete(kSession, [] { return absl::OkStatus(); }, record(1), first.notice(), kBrief);
    worker.Complete(kSession, [] { return absl::OkStatus(); }, record(2), second.notice(),
                    kBrief);
  }).ok());
  OnDevice<int>(worker, 2, [](CommandInterface&) { return 0; });  // the task above ran
  ASSERT_TRUE(first.callback != nullptr && second.callback != nullptr);
  second.callback();
  {
    MutexLock lock(&mutex);
    EXPECT_TRUE(ran.empty()) << "the session's second ran before its first";
  }
  first.callback();
  {
    MutexLock lock(&mutex);
    ASSERT_FALSE(ran.empty()) << "the first did not run within its notice's call back";
    EXPECT_EQ(ran[0], std::make_pair(1, std::this_thread::get_id()));
  }
  both_ran.get_future().wait();
  worker.Stop();
  ASSERT_EQ(ran.size(), 2u);
  EXPECT_EQ(ran[1].first, 2);
  EXPECT_NE(ran[1].second, std::this_thread::get_id()) << "the second's notice called back "
                                                          "on this thread, but earlier";
}

// A notice that calls back at once, inside the task (its work had ended), leaves a brief
// completion to a completion thread (the task's thread holds the device), unless it may
// run after the task: then on the task's thread, once the task finished.
TEST(DeviceWorkerTest, ABriefCompletionWhoseNoticeCallsBackInsideTheTaskRunsElsewhere) {
  Metrics metrics(1);
  DeviceWorker worker({.ordinal = 0}, CpuFactory(kMiB), &metrics);
  std::promise<std::thread::id> task_thread, completion_thread;
  ASSERT_TRUE(worker.Submit(1, [&](CommandInterface&) {
    task_thread.set_value(std::this_thread::get_id());
    worker.Complete(
        1, [] { return absl::OkStatus(); },
        [&](absl::Status) { completion_thread.set_value(std::this_thread::get_id()); },
        [](absl::AnyInvocable<void()> ended) { ended(); },
        DeviceWorker::Answering::kWhereWorkEnded);
  }).ok());
  EXPECT_NE(completion_thread.get_future().get(), task_thread.get_future().get());
  worker.Stop();
}

TEST(DeviceWorkerTest, ABriefCompletionThatMayRunAfterItsTaskRunsThereWhenItsWorkEndedInside) {
  Metrics metrics(1);
  DeviceWorker worker({.ordinal = 0}, CpuFactory(kMiB), &metrics);
  std::promise<std::thread::id> task_thread;
  std::promise<std::pair<std::thread::id, bool>> completion;  // its thread; task finished
  bool task_finished = false;
  ASSERT_TRUE(worker.Submit(1, [&](CommandInterface&) {
    task_thread.set_value(std::this_thread::get_id());
    worker.Complete(
        1, [] { return absl::OkStatus(); },
        [&](absl::Status) {
          completion.set_value({std::this_thread::get_id(), task_finished});
        },
        [](absl::AnyInvocable<void()> ended) { ended(); },
        DeviceWorker::Answering::kWhereWorkEndedOrAfterTheTask);
    task_finished = true;
  }).ok());
  const auto [completion_thread, after_the_task] = completion.get_future().get();
  EXPECT_EQ(completion_thread, task_thread.get_future().get());
  EXPECT_TRUE(after_the_task);
  worker.Stop();
}

// A brief completion runs on a thread the device's work may wait on (a stream's worker):
// a task it submits is queued for the device thread even when it may run where submitted.
TEST(DeviceWorkerTest, ATaskABriefCompletionSubmitsRunsOnTheDeviceThread) {
  Metrics metrics(1);
  DeviceWorker worker({.ordinal = 0}, CpuFactory(kMiB), &metrics);
  const std::thread::id device_thread =
      OnDevice<std::thread::id>(worker, 1, [](CommandInterface&) {
        return std::this_thread::get_id();
      });
  HeldNotice notice;
  std::promise<std::thread::id> task_thread;
  ASSERT_TRUE(worker.Submit(1, [&](CommandInterface&) {
    worker.Complete(
        1, [] { return absl::OkStatus(); },
        [&](absl::Status) {
          ASSERT_TRUE(worker.Submit(1, [&](CommandInterface&) {
            task_thread.set_value(std::this_thread::get_id());
          }, DeviceWorker::Placement::kHereWhenIdle).ok());
        },
        notice.notice(), DeviceWorker::Answering::kWhereWorkEnded);
  }).ok());
  OnDevice<int>(worker, 2, [](CommandInterface&) { return 0; });  // the task above ran
  ASSERT_NE(notice.callback, nullptr);
  // The device is idle now, so only the answering thread's rule keeps the task off it.
  while (!worker.MakesProgress(std::chrono::nanoseconds(0))) std::this_thread::yield();
  notice.callback();
  EXPECT_EQ(task_thread.get_future().get(), device_thread);
  worker.Stop();
}

// Through a CPU Command: a read's completion made with the session's notice of its work's
// end gets the read's bytes.
TEST(DeviceWorkerTest, AReadsCompletionWithTheSessionsNoticeGetsItsBytes) {
  Metrics metrics(1);
  DeviceWorker worker({.ordinal = 0}, CpuFactory(16 * kMiB), &metrics);
  constexpr SessionId kSession = 1;
  const std::string data(100000, 'n');
  absl::StatusOr<BufferId> id = AllocateAndWrite(worker, kSession, data);
  ASSERT_TRUE(id.ok()) << id.status();
  std::promise<std::string> read_back;
  ASSERT_TRUE(worker.Submit(kSession, [&](CommandInterface& command) {
    absl::StatusOr<PendingRead> read =
        command.Read(kSession, 1, *id, CopyLayout::Contiguous(0, data.size()));
    ASSERT_TRUE(read.ok()) << read.status();
    WorkEndNotice ended = command.NoticeOfWorkEnd(kSession, std::nullopt);
    ASSERT_NE(ended, nullptr) << "CPU events call back";
    auto shared = std::make_shared<PendingRead>(*std::move(read));
    worker.Complete(kSession, [shared] { return shared->wait(); },
                    [shared, &read_back](absl::Status status) {
                      read_back.set_value(status.ok() ? shared->bytes.ToString()
                                                      : std::string(status.message()));
                    },
                    std::move(ended));
  }).ok());
  EXPECT_EQ(read_back.get_future().get(), data);
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
