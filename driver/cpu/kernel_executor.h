#ifndef GPUCMDD_DRIVER_CPU_KERNEL_EXECUTOR_H_
#define GPUCMDD_DRIVER_CPU_KERNEL_EXECUTOR_H_

// The daemon's side of a CPU device's kernel executor process
// (gpucmd-kernel-executor): client kernels run there, over the device memory the
// daemon shares with it, so a kernel that faults or hangs kills only that process. The
// executor is started on the first launch and again after it dies.
//
// The executor dies with the thread whose launch started it (a parent-death signal), so
// launch from threads that live as long as the executor is wanted: the device's stream
// threads, which live as long as the device.
//
// Thread-safety: Launch may be called from any thread; launches run one at a time.

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/identity.h"
#include "base/mutex.h"
#include "driver/cpu/executor_protocol.h"
#include "driver/cpu/kernel_abi.h"
#include "driver/types.h"

namespace gpucmd {

class KernelExecutor {
 public:
  struct Options {
    std::string executor_path;
    int memfd = -1;           // the device memory, mapped by the executor at `base`
    uint64_t base = 0;
    uint64_t size_bytes = 0;
    int workers = 2;          // threads running blocks
    std::chrono::milliseconds kernel_timeout{60'000};
    // How long the executor may run the launches of one message before it answers for
    // those that ran (see LaunchAll); absent: an eighth of kernel_timeout.
    std::optional<std::chrono::milliseconds> reply_within;
    // Address space the executor may use beyond the device mapping (RLIMIT_AS).
    uint64_t memory_bytes = uint64_t{2} << 30;
    // Where kernel modules are: the only files the sandboxed executor may read besides
    // the system's libraries (Note [Sandbox] in base/sandbox.h).
    std::string module_directory;
    // Who the executor runs as (base/identity.h); absent: the daemon's user.
    std::optional<UnixIdentity> identity;
  };

  explicit KernelExecutor(Options options) : options_(std::move(options)) {}
  ~KernelExecutor();
  KernelExecutor(const KernelExecutor&) = delete;
  KernelExecutor& operator=(const KernelExecutor&) = delete;

  // A kernel module's path, shared by the launches of its kernel.
  using ModulePath = std::shared_ptr<const std::string>;

  // One launch: `module_path`'s kernel over `grid` x `block`. `buffers` are all it may
  // touch of device memory: any other access faults the launch like a device trap.
  struct Request {
    ModulePath module_path;
    KernelDim3 grid;
    KernelDim3 block;
    uint32_t dynamic_shared_memory_bytes = 0;
    std::vector<uint64_t> args;
    std::vector<DeviceResource> buffers;
  };

  // How a launch ended, and what it printed (printf; at most kMaxLaunchOutputBytes).
  struct Result {
    absl::Status status;
    std::string output;
  };

  // At most this many requests go to LaunchAll at once: one message to the executor.
  static constexpr size_t kMaxPipelined = kMaxLaunchesPerMessage;

  // Runs the requests in order and waits for them: they go to the executor in one
  // message and it runs them back to back, answering in as few (driver/cpu/
  // executor_protocol.h). One result per request: its status is UNAVAILABLE naming the signal when the
  // executor dies, or the time limit when a kernel runs past it (the executor is
  // killed; the requests after it are not run); the next launch starts a fresh
  // executor. An executor that died between launches costs no launch: it is replaced
  // before the requests go out. A launch may be stopped up to an eighth of the time limit early: the
  // executor answers for the launches before it at most that long before it starts.
  std::vector<Result> LaunchAll(absl::Span<const Request> requests);

  // LaunchAll of one; what it printed is dropped.
  absl::Status Launch(const std::string& module_path, KernelDim3 grid, KernelDim3 block,
                      uint32_t dynamic_shared_memory_bytes, absl::Span<const uint64_t> args,
                      absl::Span<const DeviceResource> buffers);

  // Executors started so far (1 after the first launch; more after deaths).
  int starts() const;

  // Kills the running executor, if any, ending its kernels: the launches waiting on it
  // fail UNAVAILABLE. May be called from any thread, while a launch runs.
  void Kill();

 private:
  absl::Status StartLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // LaunchAll of at most kMaxPipelined requests: one message.
  std::vector<Result> LaunchPart(absl::Span<const Request> requests);
  // True when the idle executor's end of the connection is closed (it died while no
  // launch was running: killed, out of memory) or it sent what nobody asked for.
  bool HungUpLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Sends one message of launches, first replacing an executor that died while idle (its
  // death cost no launch) or is not started; UNAVAILABLE when none takes the message.
  absl::Status DeliverLocked(const void* message, size_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Waits for the next datagram of replies (at most `expected`) and appends them to
  // `results`; UNAVAILABLE when the executor died, answered wrongly, or stayed silent
  // past the time limit (then it is stopped).
  absl::Status AwaitRepliesLocked(size_t expected, std::vector<Result>& results)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Reaps the executor (killing it first when `kill_now`, else after a short grace in
  // which a dying one reports its own cause); returns how it ended.
  std::string StopLocked(bool kill_now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const Options options_;
  mutable Mutex mutex_;
  pid_t pid_ ABSL_GUARDED_BY(mutex_) = -1;
  std::atomic<pid_t> live_pid_{-1};  // pid_, for Kill without the lock
  int socket_ ABSL_GUARDED_BY(mutex_) = -1;
  int starts_ ABSL_GUARDED_BY(mutex_) = 0;
  // Where reply datagrams are received (kMaxReplyDatagramBytes).
  std::string reply_buffer_ ABSL_GUARDED_BY(mutex_);
  // The replies of the datagram last received (views into reply_buffer_), kept so that
  // its storage is reused.
  std::vector<PackedReply> parsed_replies_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_CPU_KERNEL_EXECUTOR_H_
