#include "driver/cpu/cpu_stream.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "base/batch_scheduling.h"
#include "base/deferred_wakeups.h"
#include "base/thread_name.h"

namespace gpucmd {

CpuStream::CpuStream(int index, CopyEngine* copies)
    : index_(index), copies_(copies), worker_([this] {
        NameThisThread(absl::StrCat("gpucmd-stream", index_));
        // Note [Device work yields to the control plane] in base/batch_scheduling.h.
        ScheduleThisThreadAsBatchWork();
        Run();
      }) {}

CpuStream::~CpuStream() {
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
    work_ready_.NotifyAll();
  }
  worker_.join();
}

void CpuStream::Enqueue(Work work) {
  {
    MutexLock lock(&mutex_);
    queue_.push_back(std::move(work));
    ++enqueued_;
  }
  // After unlocking: a worker woken under the lock would only block on it again. Within
  // a DeferredWakeups scope, once the scope's run is queued.
  if (!DeferWakeup(&work_ready_)) work_ready_.NotifyOne();
}

void CpuStream::RunOrEnqueue(Work work) {
  {
    MutexLock lock(&mutex_);
    if (running_ || !queue_.empty() || stopping_) {
      queue_.push_back(std::move(work));
      ++enqueued_;
      // The worker is awake (running_), or woken by whoever queued ahead.
      return;
    }
    running_ = true;
    ++enqueued_;
  }
  Complete(std::move(work));
  MutexLock lock(&mutex_);
  running_ = false;
  // Work queued meanwhile waited for this item.
  if (!queue_.empty()) work_ready_.NotifyOne();
}

uint64_t CpuStream::enqueued() const {
  MutexLock lock(&mutex_);
  return enqueued_;
}

CpuStream::Event CpuStream::RecordEvent() {
  MutexLock lock(&mutex_);
  return Event(timeline_, enqueued_);
}

absl::Status CpuStream::WaitEvent(const Event& event) {
  if (event.timeline_ == timeline_ || event.IsComplete()) return absl::OkStatus();
  Enqueue([event]() { return event.Wait(); });
  return absl::OkStatus();
}

absl::Status CpuStream::Synchronize() {
  RecordEvent().Wait().IgnoreError();  // waiting itself cannot fail
  MutexLock lock(&mutex_);
  return std::exchange(pending_error_, absl::OkStatus());
}

void CpuStream::Run() {
  // Whether running_ is the worker's own, from its last item: before its first, it may be
  // a thread's in RunOrEnqueue, not to be cleared here.
  bool ran = false;
  while (true) {
    Work work;
    {
      MutexLock lock(&mutex_);
      if (ran) running_ = false;
      work_ready_.Await(&mutex_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return (!queue_.empty() && !running_) || (queue_.empty() && stopping_);
      });
      if (queue_.empty()) return;  // stopping, and everything ran
      work = std::move(queue_.front());
      queue_.pop_front();
      running_ = ran = true;
    }
    Complete(std::move(work));
  }
}

void CpuStream::Complete(Work work) {
  absl::Status status = work();
  work = nullptr;  // captured resources go before the work counts as complete
  if (!status.ok()) {
    MutexLock lock(&mutex_);
    if (pending_error_.ok()) pending_error_ = status;
  }
  Advance();
}

void CpuStream::Advance() {
  bool reached_a_waiter = false;
  std::vector<Callback> due;
  {
    MutexLock lock(&timeline_->mutex);
    const uint64_t completed = ++timeline_->completed;
    if (completed >= timeline_->earliest_awaited) {
      // Every waiter wakes; those still short of their position set it again.
      timeline_->earliest_awaited = UINT64_MAX;
      reached_a_waiter = true;
    }
    std::vector<Callback>& callbacks = timeline_->callbacks;
    auto first_due = std::partition(callbacks.begin(), callbacks.end(),
                                    [completed](const Callback& callback) {
                                      return callback.sequence > completed;
                                    });
    std::move(first_due, callbacks.end(), std::back_inserter(due));
    callbacks.erase(first_due, callbacks.end());
  }
  if (reached_a_waiter) timeline_->advanced.NotifyAll();
  for (Callback& callback : due) callback.callback();
}

absl::Status CpuStream::Event::Wait() const {
  if (timeline_ == nullptr) return absl::OkStatus();
  WakeDeferredNow();  // the work waited for may be this thread's, its wake-up deferred
  MutexLock lock(&timeline_->mutex);
  while (timeline_->completed < sequence_) {
    timeline_->earliest_awaited = std::min(timeline_->earliest_awaited, sequence_);
    timeline_->advanced.Wait(&timeline_->mutex);
  }
  return absl::OkStatus();
}

void CpuStream::Event::OnComplete(absl::AnyInvocable<void()> callback) const {
  if (timeline_ != nullptr) {
    MutexLock lock(&timeline_->mutex);
    if (timeline_->completed < sequence_) {
      timeline_->callbacks.push_back(Callback{sequence_, std::move(callback)});
      return;
    }
  }
  callback();
}

bool CpuStream::Event::IsComplete() const {
  if (timeline_ == nullptr) return true;
  MutexLock lock(&timeline_->mutex);
  return timeline_->completed >= sequence_;
}

}  // namespace gpucmd
