#ifndef GPUCMDD_BASE_DEFERRED_WAKEUPS_H_
#define GPUCMDD_BASE_DEFERRED_WAKEUPS_H_

// Note [Deferred wake-ups]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// A thread that queues several items in a row for a worker that sleeps on a CondVar (a
// batch's launches for a CPU stream's worker) wakes it at the first: the worker then
// takes that item alone, before the rest are queued, and each wake-up is a system call
// on the queuing thread. While a DeferredWakeups scope is open on a thread, a queue that
// takes part (CpuStream) hands its wake-up to DeferWakeup instead of notifying; the
// outermost scope's end notifies each such CondVar once, so the worker finds the whole
// run queued. A thread about to block on the progress of such a queue calls
// WakeDeferredNow first: deferring never leaves a thread waiting on its own wake-up. So
// does a task about to do slow host-side work of its own (a batch's write copying its
// bytes, an allocation): the device work queued before it runs alongside.
//
// A deferred CondVar must outlive the scope (the queue's owner outlives the task that
// opened it).
//
// Thread-safety: scopes and deferred wake-ups are per thread.

#include "base/mutex.h"

namespace gpucmd {

class DeferredWakeups {
 public:
  DeferredWakeups();
  ~DeferredWakeups();  // the outermost scope's end performs the deferred wake-ups
  DeferredWakeups(const DeferredWakeups&) = delete;
  DeferredWakeups& operator=(const DeferredWakeups&) = delete;
};

// True when a scope is open on this thread: `worker_ready` will be notified (NotifyOne,
// once however often deferred) when the scope ends or WakeDeferredNow runs. False: the
// caller notifies now.
bool DeferWakeup(CondVar* worker_ready);

// Notifies what this thread deferred so far.
void WakeDeferredNow();

}  // namespace gpucmd

#endif  // GPUCMDD_BASE_DEFERRED_WAKEUPS_H_
