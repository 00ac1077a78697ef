#ifndef GPUCMDD_SERVER_CORE_DEVICE_QUEUE_H_
#define GPUCMDD_SERVER_CORE_DEVICE_QUEUE_H_

// Note [Device queue]
// ~~~~~~~~~~~~~~~~~~~
// Every device has one thread that owns its state; everything else reaches it through
// this queue. The queue is bounded twice: in total (`capacity`) and per session
// (`per_session_limit`), so one client flooding the device gets RESOURCE_EXHAUSTED
// instead of growing the daemon's memory or starving the others. Each session has its
// own FIFO sub-queue and the consumer serves the sessions with work round-robin, one
// task each in turn: a session's tasks keep their order, sessions share the device
// fairly.
//
// Thread-safety: Push, Close and the accessors may be called from any thread; AwaitWork
// and TryPop from the consumer (whoever runs the device's tasks). Tasks are moved out
// before they run; the queue never runs them.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "server/command/ids.h"

namespace gpucmd {

template <typename Task>
class DeviceQueue {
 public:
  DeviceQueue(size_t capacity, size_t per_session_limit)
      : capacity_(capacity), per_session_limit_(per_session_limit) {}
  DeviceQueue(const DeviceQueue&) = delete;
  DeviceQueue& operator=(const DeviceQueue&) = delete;

  // Appends `task` to `session`'s sub-queue. RESOURCE_EXHAUSTED when the queue or the
  // session's share is full, UNAVAILABLE after Close; `task` is dropped then.
  absl::Status Push(SessionId session, Task task) {
    {
      MutexLock lock(&mutex_);
      if (closed_) return absl::UnavailableError("device queue is closed (daemon draining)");
      if (depth_ >= capacity_) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "device queue is full: ", capacity_,
            " commands queued, its capacity (limits.device_queue_capacity); retry later"));
      }
      std::deque<Task>& tasks = sessions_[session];
      if (tasks.size() >= per_session_limit_) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "the session has ", tasks.size(),
            " commands queued for the device, its limit (limits.session_queued_commands): "
            "retry once some have run"));
      }
      if (tasks.empty()) ready_sessions_.push_back(session);
      tasks.push_back(std::move(task));
      if (depth_++ == 0) waiting_since_ = std::chrono::steady_clock::now();
    }
    // After unlocking: a consumer woken under the lock would only block on it again.
    not_empty_.NotifyOne();
    return absl::OkStatus();
  }

  // Waits until a task is queued or Wake is called (true), or the queue is closed and
  // empty (false): queued tasks are still handed out after Close.
  bool AwaitWork() {
    MutexLock lock(&mutex_);
    not_empty_.Await(&mutex_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return depth_ > 0 || closed_ || woken_;
    });
    woken_ = false;
    return depth_ > 0 || !closed_;
  }

  // Like AwaitWork, but gives up at `deadline` (true: look again).
  bool AwaitWorkUntil(std::chrono::steady_clock::time_point deadline) {
    MutexLock lock(&mutex_);
    not_empty_.AwaitUntil(&mutex_, deadline, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return depth_ > 0 || closed_ || woken_;
    });
    woken_ = false;
    return depth_ > 0 || !closed_;
  }

  // Tasks `session` has queued.
  size_t QueuedFor(SessionId session) const {
    MutexLock lock(&mutex_);
    auto it = sessions_.find(session);
    return it == sessions_.end() ? 0 : it->second.size();
  }

  // Wakes the consumer from AwaitWork without a task (true once, as if one had come).
  void Wake() {
    {
      MutexLock lock(&mutex_);
      woken_ = true;
    }
    not_empty_.NotifyOne();
  }

  // Takes the next task if one is queued, without waiting.
  std::optional<Task> TryPop() {
    MutexLock lock(&mutex_);
    if (depth_ == 0) return std::nullopt;
    return PopLocked();
  }

  // Refuses further pushes and wakes the consumer; tasks already queued stay poppable.
  void Close() {
    MutexLock lock(&mutex_);
    closed_ = true;
    not_empty_.NotifyAll();
  }

  size_t depth() const {
    MutexLock lock(&mutex_);
    return depth_;
  }

  bool closed() const {
    MutexLock lock(&mutex_);
    return closed_;
  }

  // Since when tasks have waited without the consumer taking one (since the queue
  // became non-empty, or since its last take that left tasks queued); nullopt while empty.
  std::optional<std::chrono::steady_clock::time_point> waiting_since() const {
    MutexLock lock(&mutex_);
    return waiting_since_;
  }

  size_t session_depth(SessionId session) const {
    MutexLock lock(&mutex_);
    auto it = sessions_.find(session);
    return it == sessions_.end() ? 0 : it->second.size();
  }

 private:
  // The next session in line gives up its oldest task; requires depth_ > 0.
  Task PopLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    SessionId session = ready_sessions_.front();
    ready_sessions_.pop_front();
    auto it = sessions_.find(session);
    Task task = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) {
      sessions_.erase(it);
    } else {
      ready_sessions_.push_back(session);  // back of the line: round-robin
    }
    if (--depth_ == 0) {
      waiting_since_.reset();
    } else {
      waiting_since_ = std::chrono::steady_clock::now();  // the consumer moves
    }
    return task;
  }

  const size_t capacity_;
  const size_t per_session_limit_;
  mutable Mutex mutex_;
  CondVar not_empty_;
  bool closed_ ABSL_GUARDED_BY(mutex_) = false;
  bool woken_ ABSL_GUARDED_BY(mutex_) = false;
  size_t depth_ ABSL_GUARDED_BY(mutex_) = 0;
  std::optional<std::chrono::steady_clock::time_point> waiting_since_ ABSL_GUARDED_BY(mutex_);
  absl::flat_hash_map<SessionId, std::deque<Task>> sessions_ ABSL_GUARDED_BY(mutex_);
  // Sessions with queued tasks, in serving order; each appears at most once.
  std::deque<SessionId> ready_sessions_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_CORE_DEVICE_QUEUE_H_
