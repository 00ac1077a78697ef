#ifndef GPUCMDD_BASE_COUNTDOWN_H_
#define GPUCMDD_BASE_COUNTDOWN_H_

// Joins callbacks: CountdownTo(n, callback) is a function to hand to n notifiers (events,
// notices), whose copies together run `callback` once, at the n-th call among them.
//
// Thread-safety: the copies may be called from any threads; `callback` runs on the thread
// that makes the last call.

#include <atomic>
#include <cstddef>
#include <memory>
#include <utility>

#include "absl/functional/any_invocable.h"

namespace gpucmd {

// `calls` > 0. Each copy may be called any number of times; the calls of all count.
inline auto CountdownTo(size_t calls, absl::AnyInvocable<void()> callback) {
  struct Countdown {
    Countdown(size_t calls, absl::AnyInvocable<void()> callback)
        : left(calls), callback(std::move(callback)) {}
    std::atomic<size_t> left;
    absl::AnyInvocable<void()> callback;
  };
  return [countdown = std::make_shared<Countdown>(calls, std::move(callback))] {
    if (countdown->left.fetch_sub(1, std::memory_order_acq_rel) == 1) countdown->callback();
  };
}

}  // namespace gpucmd

#endif  // GPUCMDD_BASE_COUNTDOWN_H_
