#include "base/deferred_wakeups.h"

#include <thread>

#include "gtest/gtest.h"

namespace gpucmd {
namespace {

// A worker that counts the times it woke up.
class CountingWorker {
 public:
  CountingWorker()
      : thread_([this] {
          MutexLock lock(&mutex_);
          while (!stopping_) {
            waiting_ = true;
            changed_.NotifyAll();  // seen once the wait below releases the lock
            ready_.Wait(&mutex_);
            waiting_ = false;
            ++wakeups_;
            changed_.NotifyAll();
          }
        }) {}
  ~CountingWorker() {
    {
      MutexLock lock(&mutex_);
      stopping_ = true;
    }
    ready_.NotifyOne();
    thread_.join();
  }

  // Notifies the worker, once it waits, unless a scope takes the wake-up (as a queue
  // taking part does).
  void Wake() {
    MutexLock lock(&mutex_);
    changed_.Await(&mutex_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return waiting_; });
    if (!DeferWakeup(&ready_)) ready_.NotifyOne();
  }

  // Blocks until the worker woke `count` times in all.
  void AwaitWakeups(int count) {
    MutexLock lock(&mutex_);
    changed_.Await(&mutex_, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return wakeups_ >= count; });
  }

  int wakeups() {
    MutexLock lock(&mutex_);
    return wakeups_;
  }

  CondVar* ready() { return &ready_; }

 private:
  Mutex mutex_;
  CondVar ready_;
  CondVar changed_;
  bool waiting_ ABSL_GUARDED_BY(mutex_) = false;
  int wakeups_ ABSL_GUARDED_BY(mutex_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::thread thread_;
};

TEST(DeferredWakeupsTest, WithoutAScopeAWakeupHappensAtOnce) {
  CountingWorker worker;
  EXPECT_FALSE(DeferWakeup(worker.ready()));
  worker.Wake();
  worker.AwaitWakeups(1);
}

TEST(DeferredWakeupsTest, AScopeWakesEachWorkerOnceAtItsEnd) {
  CountingWorker first;
  CountingWorker second;
  {
    DeferredWakeups scope;
    {
      DeferredWakeups nested;  // only the outermost scope's end wakes
      for (int i = 0; i < 3; ++i) first.Wake();
      second.Wake();
    }
    for (int i = 0; i < 3; ++i) first.Wake();
    EXPECT_EQ(first.wakeups(), 0);
    EXPECT_EQ(second.wakeups(), 0);
  }
  first.AwaitWakeups(1);
  second.AwaitWakeups(1);
  EXPECT_EQ(first.wakeups(), 1);
  EXPECT_EQ(second.wakeups(), 1);
}

TEST(DeferredWakeupsTest, WakeDeferredNowWakesWithinTheScope) {
  CountingWorker worker;
  DeferredWakeups scope;
  worker.Wake();
  WakeDeferredNow();
  worker.AwaitWakeups(1);  // would block forever had the wake-up waited for the scope
  worker.Wake();  // deferred again, and performed at the scope's end
}

TEST(DeferredWakeupsTest, ScopesBelongToTheirThread) {
  CountingWorker worker;
  DeferredWakeups scope;
  bool deferred_elsewhere = true;
  std::thread([&] { deferred_elsewhere = DeferWakeup(worker.ready()); }).join();
  EXPECT_FALSE(deferred_elsewhere);
}

}  // namespace
}  // namespace gpucmd
