#ifndef GPUCMDD_DRIVER_CPU_COPY_ENGINE_H_
#define GPUCMDD_DRIVER_CPU_COPY_ENGINE_H_

// Note [Copies on several cores]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// On the CPU driver a stream's copy is the device's DMA, and one thread copying bulk
// bytes moves about half of what the machine's memory takes from two (a standalone
// measurement on a 2-core VM: a 16 MiB memcpy in 0.69 ms on one thread, 0.34 ms split
// over two; 2.2x at 64 MiB). So a device's streams share a copy engine: helper threads
// (the daemon's CPUs less one, at most three) that join a bulk copy while they are
// idle. The thread that runs the copy (the stream's worker) takes its parts in order
// with the helpers and returns once every part was copied. It never waits for a helper
// to become free: parts no helper took are its own, so a copy takes at most one part
// longer than the worker alone would. A copy below kMinSplitBytes is not split: waking a
// helper costs more than it saves there.
//
// A helper is kept off the CPU its caller runs on: before offering a copy, the caller
// narrows the idle helpers' affinity to the engine's CPUs less its own. Where the kernel
// sees no cache shared between CPUs (a VM that exposes no cache topology, like the 2-core
// development VM), a woken thread is placed on its waker's CPU or on its own last one,
// even while another CPU idles, and there it waits behind the copying caller until load
// balancing moves it: 1.6 ms measured, longer than a whole 16 MiB copy, so the helper
// took no part. The affinity is set only when the caller's CPU changed, and a helper
// that could run nowhere else (the engine has one CPU) is left as it is.
//
// Thread-safety: Run may be called from any number of threads at once; the engine must
// outlive every Run.

#include <sched.h>
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"
#include "base/mutex.h"

namespace gpucmd {

class CopyEngine {
 public:
  // Copies of at least this many bytes are split (Note [Copies on several cores]).
  static constexpr uint64_t kMinSplitBytes = uint64_t{8} << 20;
  // The size of one part of a split copy.
  static constexpr uint64_t kPartBytes = uint64_t{1} << 20;

  // Starts `helpers` helper threads (0: every copy runs on its caller alone).
  explicit CopyEngine(int helpers);
  // Joins the helpers.
  ~CopyEngine();
  CopyEngine(const CopyEngine&) = delete;
  CopyEngine& operator=(const CopyEngine&) = delete;

  // The helpers for the CPUs the calling thread may run on (its affinity: a service's
  // CPUAffinity or a container's cpuset): one fewer, at most three.
  static int HelpersForThisThread();

  // Calls `copy_part(i)` once for every i in [0, parts), on this thread and on idle
  // helpers, and returns once every call returned.
  void Run(size_t parts, absl::FunctionRef<void(size_t)> copy_part);

  // Calls `part(offset, bytes)` for consecutive pieces covering [0, size): split in
  // pieces of kPartBytes run as Run does when `size` is at least kMinSplitBytes, else
  // one piece on this thread (none for size 0).
  void Split(uint64_t size, absl::FunctionRef<void(uint64_t offset, uint64_t bytes)> part);

  // Copies `size` bytes from `from` to `to` (not overlapping), as Split splits them.
  void Copy(std::byte* to, const std::byte* from, uint64_t size);

 private:
  // One split copy: its parts are taken in order by whoever works on it.
  struct Job {
    Job(size_t parts, absl::FunctionRef<void(size_t)> copy_part)
        : parts(parts), copy_part(copy_part) {}
    // Copies parts until none is left to take.
    void Work();
    void AwaitDone();

    const size_t parts;
    // Called only for parts taken, all of which end before AwaitDone returns: the
    // callable it refers to (on Run's caller's stack) outlives every call.
    const absl::FunctionRef<void(size_t)> copy_part;
    std::atomic<size_t> next_part{0};
    Mutex mutex;
    CondVar all_done;
    size_t parts_done ABSL_GUARDED_BY(mutex) = 0;
  };

  // The engine's CPUs less `cpu`; none when `cpu` is -1 or the engine has no other.
  std::optional<cpu_set_t> CpusOtherThan(int cpu) const;
  // Keeps every registered helper off `cpu` (Note [Copies on several cores]), unless
  // they are kept off it already.
  void KeepHelpersOffLocked(int cpu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Registers the calling helper thread, and keeps it off the CPU the others are kept off.
  void RegisterHelper();
  void Help();

  // The CPUs the thread that made the engine may run on: the helpers' to share.
  cpu_set_t cpus_;
  Mutex mutex_;
  CondVar work_ready_;
  // A job once per helper it may take; a helper holds its job while it works on it.
  std::deque<std::shared_ptr<Job>> jobs_ ABSL_GUARDED_BY(mutex_);
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  // The helpers' thread ids, as they registered.
  std::vector<pid_t> helper_ids_ ABSL_GUARDED_BY(mutex_);
  // The CPU the helpers are kept off; -1: none.
  int helpers_kept_off_ ABSL_GUARDED_BY(mutex_) = -1;
  std::vector<std::thread> helpers_;
};

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_CPU_COPY_ENGINE_H_
