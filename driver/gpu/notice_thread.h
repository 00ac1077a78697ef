#ifndef GPUCMDD_DRIVER_GPU_NOTICE_THREAD_H_
#define GPUCMDD_DRIVER_GPU_NOTICE_THREAD_H_

// Where a GPU's completion notices run (Note [Completions called back on a GPU] in
// driver/gpu/gpu_driver.h). A GPU runtime reports a stream's progress by calling a
// function on a thread of its own, where that function must not call the runtime's API
// and must not wait; what the server does once a wait ended (finish the wait, answer the
// client, drop the events and staging it held) does both. So the runtime's call only
// relays: Relay wraps a callback into a report for the runtime, and the report, when the
// runtime calls it, queues the callback for this thread, which runs the callbacks in the
// order their reports came.
//
// A runtime calls each report exactly once, even after a device error. For a context lost
// beyond that (a report the runtime never makes), the destructor runs every callback
// still unreported, and a report made after that does nothing.
//
// Thread-safety: Relay and the reports may be called from any thread; the destructor
// from one thread, not the notice thread.

#include <cstdint>
#include <memory>
#include <string>

#include "absl/functional/any_invocable.h"

namespace gpucmd {

class NoticeThread {
 public:
  // Starts the thread, named `name` (base/thread_name.h).
  explicit NoticeThread(const std::string& name);
  // Runs the callbacks queued and those never reported, then ends the thread.
  ~NoticeThread();
  NoticeThread(const NoticeThread&) = delete;
  NoticeThread& operator=(const NoticeThread&) = delete;

  // What the runtime is to call for `callback`: brief, it makes no call but queueing. It
  // stays valid after this NoticeThread is gone.
  absl::AnyInvocable<void()> Relay(absl::AnyInvocable<void()> callback);

 private:
  struct Shared;
  std::shared_ptr<Shared> shared_;
};

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_GPU_NOTICE_THREAD_H_
