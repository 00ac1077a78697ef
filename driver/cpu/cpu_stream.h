#ifndef GPUCMDD_DRIVER_CPU_CPU_STREAM_H_
#define GPUCMDD_DRIVER_CPU_CPU_STREAM_H_

// A CPU model of a device stream: one worker thread running enqueued work in FIFO order.
// Brief work (a small copy) that finds the stream idle runs at once on the thread that
// enqueues it instead (RunOrEnqueue): waking the worker would cost more than the work,
// and nothing queued can run before it or beside it.
//
// Events are points on the stream's timeline (a count of completed work items); an
// Event completes when the worker has finished everything enqueued before it was
// recorded, and stays valid after the stream is destroyed. WaitEvent enqueues a wait,
// as cuStreamWaitEvent does: the worker blocks until the other stream's event completes.
// Event::OnComplete has the worker call back once it completed the event (as
// cuLaunchHostFunc would, without holding up the stream's later work for longer than the
// callback runs).
//
// Errors: a work item returning a non-OK status records it as the stream's pending
// error; later work still runs (each copy is independent), events still complete, and
// the next Synchronize returns and clears the first pending error.
//
// A stream may name its device's copy engine (Note [Copies on several cores] in
// driver/cpu/copy_engine.h), which its copies then share with the device's other streams.
//
// Enqueue takes part in Note [Deferred wake-ups] (base/deferred_wakeups.h): within a
// DeferredWakeups scope the worker is woken at the scope's end, or before the enqueuing
// thread waits for an Event or Synchronizes.
//
// Thread-safety: every method may be called from any thread. The destructor waits for
// all enqueued work.

#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "base/mutex.h"
#include "driver/cpu/copy_engine.h"

namespace gpucmd {

class CpuStream {
 public:
  class Event;
  using Signal = CpuStream*;
  using Work = absl::AnyInvocable<absl::Status()>;

  // `copies` (may be null: copies run on the worker alone) must outlive the stream.
  explicit CpuStream(int index, CopyEngine* copies = nullptr);
  ~CpuStream();
  CpuStream(const CpuStream&) = delete;
  CpuStream& operator=(const CpuStream&) = delete;

  // Appends `work` to the stream.
  void Enqueue(Work work);
  // Runs `work` on the calling thread, as the stream's next item, when nothing is queued
  // or running; otherwise appends it. For brief work only: the stream's later work, and
  // callbacks of events it completes, wait for it (they may run on this thread).
  void RunOrEnqueue(Work work);
  // How many work items were enqueued so far (the last one's position).
  uint64_t enqueued() const;
  Event RecordEvent();
  absl::Status WaitEvent(const Event& event);
  absl::Status Synchronize();
  Signal signal() { return this; }
  int index() const { return index_; }
  CopyEngine* copies() const { return copies_; }

 private:
  // A callback waiting for the stream to reach `sequence`.
  struct Callback {
    uint64_t sequence;
    absl::AnyInvocable<void()> callback;
  };

  // The stream's progress, shared with its events. The worker notifies `advanced` only
  // when `completed` reaches `earliest_awaited`, the smallest position a waiter is
  // blocked on: a wait for the end of a long run of work sleeps through the rest.
  struct Timeline {
    Mutex mutex;
    CondVar advanced;
    uint64_t completed ABSL_GUARDED_BY(mutex) = 0;
    uint64_t earliest_awaited ABSL_GUARDED_BY(mutex) = UINT64_MAX;
    std::vector<Callback> callbacks ABSL_GUARDED_BY(mutex);  // of OnComplete, not yet due
  };

  // After a work item: counts it complete, wakes the waiters it reached and runs the
  // callbacks that fell due.
  void Advance();
  // Runs one work item and counts it complete.
  void Complete(Work work);

  void Run();

  const int index_;
  CopyEngine* const copies_;
  const std::shared_ptr<Timeline> timeline_ = std::make_shared<Timeline>();
  mutable Mutex mutex_;
  CondVar work_ready_;
  std::deque<Work> queue_ ABSL_GUARDED_BY(mutex_);
  uint64_t enqueued_ ABSL_GUARDED_BY(mutex_) = 0;
  absl::Status pending_error_ ABSL_GUARDED_BY(mutex_);
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  // A work item is running (on the worker, or on a thread in RunOrEnqueue), or the worker
  // has not yet come back for the next.
  bool running_ ABSL_GUARDED_BY(mutex_) = false;
  std::thread worker_;
};

class CpuStream::Event {
 public:
  Event() = default;
  absl::Status Wait() const;
  bool IsComplete() const;
  // Runs `callback` once the event completed: on the stream's worker, or at once on the
  // calling thread when it is complete already. It must not wait for stream work.
  void OnComplete(absl::AnyInvocable<void()> callback) const;

 private:
  friend class CpuStream;
  Event(std::shared_ptr<Timeline> timeline, uint64_t sequence)
      : timeline_(std::move(timeline)), sequence_(sequence) {}

  std::shared_ptr<Timeline> timeline_;  // null: an event that is always complete
  uint64_t sequence_ = 0;
};

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_CPU_CPU_STREAM_H_
