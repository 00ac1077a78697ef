#ifndef GPUCMDD_DRIVER_EVENT_POOL_H_
#define GPUCMDD_DRIVER_EVENT_POOL_H_

// The idle events of one GPU context: recording an event takes one, and it comes back
// when the last copy of the driver's event handle goes, instead of a create and destroy
// per command. Each GPU leaf instantiates it over its raw event type, with how to create
// and destroy one in its context.
//
// Thread-safety: Take, Give and DestroyIdle may be called from any thread (events die on
// the device and completion threads); so must `create` and `destroy` be.

#include <cstddef>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"

namespace gpucmd {

template <typename RawEvent>
class EventPool {
 public:
  using Create = absl::AnyInvocable<absl::StatusOr<RawEvent>()>;
  using Destroy = absl::AnyInvocable<void(RawEvent)>;

  // More idle events than this are destroyed when given back.
  static constexpr size_t kMaxIdle = 4096;

  EventPool(Create create, Destroy destroy)
      : create_(std::move(create)), destroy_(std::move(destroy)) {}
  ~EventPool() { DestroyIdle(); }
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;

  // An idle event, or a new one.
  absl::StatusOr<RawEvent> Take() {
    {
      MutexLock lock(&mutex_);
      if (!idle_.empty()) {
        RawEvent event = idle_.back();
        idle_.pop_back();
        return event;
      }
    }
    return create_();
  }

  void Give(RawEvent event) {
    {
      MutexLock lock(&mutex_);
      if (idle_.size() < kMaxIdle) {
        idle_.push_back(event);
        return;
      }
    }
    destroy_(event);
  }

  // Destroys the idle events: before their context goes.
  void DestroyIdle() {
    std::vector<RawEvent> idle;
    {
      MutexLock lock(&mutex_);
      idle.swap(idle_);
    }
    for (RawEvent event : idle) destroy_(event);
  }

  size_t idle() const {
    MutexLock lock(&mutex_);
    return idle_.size();
  }

 private:
  Create create_;
  Destroy destroy_;
  mutable Mutex mutex_;
  std::vector<RawEvent> idle_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_EVENT_POOL_H_
