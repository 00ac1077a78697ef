#ifndef GPUCMDD_BASE_MUTEX_H_
#define GPUCMDD_BASE_MUTEX_H_

// A std::mutex with Clang thread-safety annotations.
//
// The project uses this instead of absl::Mutex: Debian's abseil is not built with
// ThreadSanitizer, so TSan cannot see absl::Mutex and reports false races on the state
// it guards. std::mutex is intercepted by TSan. Annotate guarded members with
// ABSL_GUARDED_BY(mutex_) as usual.

#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"

namespace gpucmd {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mutex_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mutex_.unlock(); }
  // Locks when nobody holds the mutex; never call it while holding it.
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mutex_.try_lock(); }

 private:
  friend class CondVar;
  std::mutex mutex_;
};

// Scoped lock over a Mutex.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mutex) ABSL_EXCLUSIVE_LOCK_FUNCTION(mutex) : mutex_(mutex) {
    mutex_->Lock();
  }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mutex_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mutex_;
};

// Condition variable for a Mutex that the caller holds.
class CondVar {
 public:
  // Atomically releases `mutex`, waits for a notification, reacquires it.
  void Wait(Mutex* mutex) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex) {
    std::unique_lock<std::mutex> lock(mutex->mutex_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }

  // Waits until `done()` holds (checked under the lock).
  template <typename Predicate>
  void Await(Mutex* mutex, Predicate done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex) {
    while (!done()) Wait(mutex);
  }

  // Like Await, but gives up at `deadline`; returns whether `done()` holds.
  template <typename Clock, typename Duration, typename Predicate>
  bool AwaitUntil(Mutex* mutex, std::chrono::time_point<Clock, Duration> deadline,
                  Predicate done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex) {
    std::unique_lock<std::mutex> lock(mutex->mutex_, std::adopt_lock);
    bool result = cv_.wait_until(lock, deadline, done);
    lock.release();
    return result;
  }

  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace gpucmd

#endif  // GPUCMDD_BASE_MUTEX_H_
