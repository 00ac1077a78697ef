#ifndef GPUCMDD_SERVER_COMMAND_COMMAND_INTERFACE_H_
#define GPUCMDD_SERVER_COMMAND_COMMAND_INTERFACE_H_

// What the device thread can be asked to do, independent of the driver underneath.
// Command<D> implements it; the service layer and the device worker speak only this
// interface, so nothing above server/command.h is a template over the driver.
//
// Thread-safety: every method is called on the owning device thread only.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/countdown.h"
#include "driver/bytes.h"
#include "driver/kernel_signature.h"
#include "driver/launch.h"
#include "driver/tensor_map.h"
#include "driver/types.h"
#include "server/command/ids.h"

namespace gpucmd {

// A read whose copy is enqueued: `bytes` are valid once `wait()` returned OK. `wait`
// blocks, so it is called off the device thread.
struct PendingRead {
  Bytes bytes;
  absl::AnyInvocable<absl::Status()> wait;
};

// Device work enqueued on the device thread whose end is waited for elsewhere: blocks
// until it ended and returns its status. It must run before the Command that made it is
// destroyed (the device worker runs it on a completion thread, and waits for those
// before it drops a Command). Null: nothing to wait for, and OK.
using PendingWait = absl::AnyInvocable<absl::Status()>;

// Registers `ended`, to be called once the device work a wait was made for has ended
// (on the thread that ended it, or at once): the wait then returns without blocking.
using WorkEndNotice = absl::AnyInvocable<void(absl::AnyInvocable<void()> ended) &&>;

// Calls back once both `first` and `second` did, on the thread of the later; null when
// either is (a wait then blocks a thread anyway).
inline WorkEndNotice BothEnded(WorkEndNotice first, WorkEndNotice second) {
  if (first == nullptr || second == nullptr) return nullptr;
  return [first = std::move(first), second = std::move(second)](
             absl::AnyInvocable<void()> ended) mutable {
    auto one_ended = CountdownTo(2, std::move(ended));
    std::move(first)(one_ended);
    std::move(second)(one_ended);
  };
}

// Runs `wait` (OK when null).
inline absl::Status WaitFor(PendingWait wait) { return wait == nullptr ? absl::OkStatus() : wait(); }

// A wait for room to queue more (StagingRoom, MemoryBeingFreed, StreamRoom): `wait`, for
// a completion thread, returns once there is room; null: there is room now. `notice`,
// where the driver's events can call back, says when there is room, so that the wait
// then returns without blocking (Note [Completions called back] in
// server/core/device_worker.h); null otherwise.
struct RoomWait {
  PendingWait wait;
  WorkEndNotice notice;
};

enum class BufferAccess { kRead, kWrite, kReadWrite };

// One argument of a launch, handles not yet resolved.
struct LaunchArgument {
  ParamKind kind = ParamKind::kScalar;
  // kBuffer: the kernel gets the buffer's device address plus `offset_bytes`.
  BufferId buffer = 0;
  uint64_t offset_bytes = 0;
  BufferAccess access = BufferAccess::kReadWrite;
  // kScalar: the value's bits in the low bytes of `bits`.
  ScalarKind scalar = ScalarKind::kNone;
  uint64_t bits = 0;
  // kTensorMap: the map over the buffer (from `offset_bytes`), encoded by the driver.
  TensorMapSpec tensor_map;
};

struct KernelLaunch {
  KernelId kernel;
  // The compiled kernel's parameters, or why it has none (its compile failed).
  absl::StatusOr<SharedKernelParams> params;
  Dim3 grid;
  Dim3 block;
  uint32_t dynamic_shared_memory_bytes = 0;
  std::vector<LaunchArgument> args;
};

struct RelocationReport {
  uint64_t pages_relocated = 0;
  uint64_t allocations_moved = 0;
  uint64_t bytes_moved = 0;
  // Work in flight put it off: nothing was moved (Note [Relocation] in
  // server/command/command.h).
  bool deferred = false;
};

struct SessionUsage {
  uint64_t memory_used_bytes = 0;
  uint64_t buffers = 0;
  uint64_t queued_on_streams = 0;  // launches, copies and reads not run to their end
  uint64_t launches = 0;           // queued since the session opened
};

struct DeviceUsage {
  uint64_t memory_capacity_bytes = 0;
  uint64_t memory_used_bytes = 0;
  uint64_t memory_reserved_bytes = 0;
  uint64_t drop_queue_bytes = 0;
  uint64_t drop_queue_entries = 0;
  // Launches, device copies and reads of all sessions not run to their end.
  uint64_t queued_on_streams = 0;
  uint64_t relocations = 0;
  uint64_t pinned_outstanding_bytes = 0;
  absl::flat_hash_map<SessionId, SessionUsage> sessions;
};

// A report of a device's figures (CommandInterface::TakeUsageUpdate).
struct UsageUpdate {
  // The device-wide figures; in `sessions`, those of every session when `complete`, else
  // of the sessions whose figures may have changed since the last report.
  DeviceUsage usage;
  std::vector<SessionId> gone;  // sessions no longer held since the last report
  bool complete = false;
};

// What outlives a device reset (Note [Device loss] in server/device_worker.h): the
// handles whose memory went with the old context, the sessions not yet told, and where
// buffer ids continue so that a lost handle never names a new buffer.
struct DeviceLoss {
  struct LostBuffer {
    SessionId session = 0;
    absl::Status cause;
  };
  absl::flat_hash_map<BufferId, LostBuffer> buffers;
  // Each session's first Synchronize after the reset reports its cause.
  absl::flat_hash_map<SessionId, absl::Status> unreported;
  BufferId next_buffer = 1;
};

class CommandInterface {
 public:
  virtual ~CommandInterface() = default;

  // Allocates `size_bytes` for `session`. RESOURCE_EXHAUSTED names the requested and
  // available bytes (device or session quota).
  virtual absl::StatusOr<BufferId> Allocate(SessionId session, uint64_t size_bytes) = 0;
  // NOT_FOUND for an unknown, foreign or already freed buffer. Every other method that
  // takes a buffer answers the same, and UNAVAILABLE for one lost in a device reset
  // (freeing such a handle is OK).
  virtual absl::Status Free(SessionId session, BufferId buffer) = 0;
  // Enqueues host->device: `data` (exactly layout.host_bytes()) lands per `layout`.
  virtual absl::Status Write(SessionId session, LogicalStream stream, BufferId buffer,
                             const CopyLayout& layout, std::string data) = 0;
  // Registers `host` (a shared-memory region's mapping) with the device for direct
  // copies until the registration dies; the driver's refusal when it cannot.
  virtual absl::StatusOr<HostRegistration> RegisterHost(const HostResource& host) = 0;
  // Enqueues host->device from `source`, host memory that stays valid while the Bytes
  // lives (a shared-memory region's slice), exactly layout.host_bytes(): copied from in
  // place when pinned(), else staged through pinned chunks.
  virtual absl::Status WriteShared(SessionId session, LogicalStream stream, BufferId buffer,
                                   const CopyLayout& layout, Bytes source) = 0;
  // The end of the work the session queued last on `stream` (the copy of the Write or
  // WriteShared it just queued, say): a wait (off the device thread) that returns that
  // work's outcome once it, and with it the stream's earlier work, completed. Null when
  // it has already, or when nothing was queued on the stream. Reports nothing of earlier
  // work: its errors stay the next Synchronize's.
  virtual PendingWait LastWorkEnd(SessionId session, LogicalStream stream) = 0;
  // Enqueues device->host of `layout`'s region.
  virtual absl::StatusOr<PendingRead> Read(SessionId session, LogicalStream stream,
                                           BufferId buffer, const CopyLayout& layout) = 0;
  // Enqueues device->host of `layout`'s region into `target` (exactly layout.host_bytes(),
  // valid while the Bytes lives), which the PendingRead returns: in place when pinned(),
  // else through pinned chunks copied out once the read completed.
  virtual absl::StatusOr<PendingRead> ReadShared(SessionId session, LogicalStream stream,
                                                 BufferId buffer, const CopyLayout& layout,
                                                 Bytes target) = 0;
  // OK when `layout` lies inside the session's `buffer`: NOT_FOUND for a buffer it does
  // not own, INVALID_ARGUMENT past the buffer's end. Copies nothing: it tells a copy
  // refused for another reason (an inline budget's) whether it was valid at all.
  virtual absl::Status CheckRange(SessionId session, BufferId buffer,
                                  const CopyLayout& layout) = 0;
  // Enqueues a device->device copy of `layout`'s rows of the session's buffer `source`
  // into its buffer `target` (cuMemcpyDtoDAsync, or cuMemcpy2DAsync for padded rows).
  // INVALID_ARGUMENT for rows past either buffer's end, a stride below the width, or,
  // within one buffer, rows read that are written (CopyRowsOverlap); NOT_FOUND for a
  // buffer the session does not own; FAILED_PRECONDITION for a tainted source.
  virtual absl::Status Copy(SessionId session, LogicalStream stream, BufferId source,
                            BufferId target, const DeviceCopyLayout& layout) = 0;
  // Enqueues setting the rows `layout` places in the session's `buffer` to `pattern`
  // (cuMemsetD8/16/32Async, or cuMemsetD2D* for padded rows). INVALID_ARGUMENT for a
  // pattern that is not 1, 2 or 4 bytes of a value that fits them, an offset, row width or
  // stride that is not a whole number of elements, or rows past the buffer's end
  // (CheckFill); NOT_FOUND for a buffer the session does not own. A fill of the whole
  // buffer makes its bytes fresh data, as a write of it does.
  virtual absl::Status Fill(SessionId session, LogicalStream stream, BufferId buffer,
                            const CopyLayout& layout, FillPattern pattern) = 0;
  // Enqueues a compiled kernel. Arguments are checked against its parameters first
  // (INVALID_ARGUMENT); a kernel whose compile failed is skipped before anything is
  // resolved and its output buffers are tainted (FAILED_PRECONDITION); a zero grid does
  // nothing.
  virtual absl::Status Launch(SessionId session, LogicalStream stream,
                              const KernelLaunch& launch) = 0;
  // The end of the session's work on `stream` (all its streams when absent), to be
  // waited for off the device thread, so that other sessions' commands do not queue
  // behind this session's kernels: the wait returns the first asynchronous error, or
  // once the cause of a device reset that took its work. Null when that work had
  // already ended with nothing to report.
  virtual PendingWait Synchronize(SessionId session, std::optional<LogicalStream> stream) = 0;
  // The end of the work the session queued so far on `streams` (all its streams when
  // absent): once it is called back, the reads and synchronizations made so far on them
  // do not block. Null when the driver's events cannot call back (Note [Completions
  // called back] in server/core/device_worker.h).
  virtual WorkEndNotice NoticeOfWorkEnd(
      SessionId session, const std::optional<std::vector<LogicalStream>>& streams) = 0;
  // None when a write on the session's `stream` may be staged now; otherwise (the device
  // stream's drop queue is full: Note [Drop queue] in server/command/drop_queue.h) a wait
  // that returns once the stream has run the copies whose bytes the queue holds.
  virtual RoomWait StagingRoom(SessionId session, LogicalStream stream) = 0;
  // After an Allocate of `size_bytes` found the device full: a wait that returns once the
  // work still using freed buffers ended (their memory is then free to reserve: Note [Out
  // of device memory] in server/command/command.h). None when no freed memory waits for
  // work, or too little to hold `size_bytes`.
  virtual RoomWait MemoryBeingFreed(uint64_t size_bytes) = 0;
  // None when the session may queue another launch, device copy or read on its streams
  // now (Note [Stream backpressure] in server/command/command.h); otherwise a wait that
  // returns OK once the oldest of that work has run, so that it may queue one more.
  // Reports nothing about that work: its errors are the next Synchronize's (or its
  // read's).
  virtual RoomWait StreamRoom(SessionId session) = 0;
  // Where the session's kernels' printf output gathers until a Synchronize takes it
  // (driver/launch.h); null where the driver collects none.
  virtual std::shared_ptr<KernelOutput> KernelOutputOf(SessionId session) = 0;
  // Frees everything the session holds; the bytes reclaimed.
  virtual uint64_t CloseSession(SessionId session) = 0;
  // Moves live allocations off outdated or fragmented pages; put off (`deferred`) while
  // any stream has work.
  virtual absl::StatusOr<RelocationReport> Relocate() = 0;
  // Cheap upkeep between commands: frees memory whose last users finished.
  virtual void ReclaimFinished() = 0;
  // Upkeep of an idle device: fences what was staged since the last fence and frees
  // what finished, so that nothing waits for a next command to be released. True while
  // it still holds memory that later upkeep will free (staged bytes and frees behind
  // work the device has not finished), or launches are still running.
  virtual bool ReclaimWhenIdle() = 0;
  // True when relocation would move something (checked when the device is idle).
  virtual bool WantsRelocation() const = 0;
  virtual DeviceUsage Usage() const = 0;
  // The device's figures for the device worker to publish after a task. `complete`: every
  // session's (the first report from this Command). Else a Command may report only the
  // sessions whose figures may have changed since its last report, in `usage.sessions`,
  // and those it no longer holds anything of, in `gone`: a task's report then costs what
  // it changed, not every session's (Note [Usage reported as it changes] in
  // server/command/command.h). This default reports every session each time.
  virtual UsageUpdate TakeUsageUpdate(bool complete) {
    return UsageUpdate{.usage = Usage(), .complete = true};
  }

  // OK while the device can serve; otherwise the sticky error that lost it.
  virtual absl::Status DeviceHealth() = 0;
  // Ends the kernels running now where the driver can (Driver::AbortKernels). May be
  // called from any thread.
  virtual void AbortKernels() = 0;
  // The device is lost with `cause`: every buffer and session becomes part of the
  // returned record. Called once, just before the Command and its backend are dropped.
  virtual DeviceLoss Abandon(const absl::Status& cause) = 0;
  // Takes over what an abandoned predecessor lost. Called once, before any command.
  virtual void Inherit(DeviceLoss loss) = 0;
};

// Makes a device's Command (and the backend under it) on the device's own thread;
// called again to rebuild both after a device loss.
using CommandFactory =
    absl::AnyInvocable<absl::StatusOr<std::shared_ptr<CommandInterface>>()>;

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_COMMAND_COMMAND_INTERFACE_H_
