#ifndef GPUCMDD_BASE_LOCK_ORDER_CHECKS_H_
#define GPUCMDD_BASE_LOCK_ORDER_CHECKS_H_

// Debian's abseil is built in its debug mode, where every absl::Mutex acquisition is
// recorded in a process-wide lock-order graph (one global lock taken on each, stack
// traces kept per edge) and the first acquisition order that ever formed a cycle aborts
// the process, deadlock or not. gRPC's mutexes are absl::Mutex, so a long-running
// process that links them pays that on every RPC and can die on a reordering that never
// deadlocks. The project's own locks are std::mutex (base/mutex.h), checked by TSan.
//
// Thread-safety: call once at process start, before other threads take absl mutexes.

namespace gpucmd {

// Stops abseil's lock-order graph for the rest of the process: absl::Mutex acquisitions
// are no longer recorded, and a cycle in their order no longer aborts.
void StopAbseilLockOrderChecks();

}  // namespace gpucmd

#endif  // GPUCMDD_BASE_LOCK_ORDER_CHECKS_H_
