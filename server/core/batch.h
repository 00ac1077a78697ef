#ifndef GPUCMDD_SERVER_CORE_BATCH_H_
#define GPUCMDD_SERVER_CORE_BATCH_H_

// Note [One command path]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Every request runs as a Batch: a unary RPC is a batch of one, a Submit message a batch
// of many. The RPC layer converts each command into an Operation (server/core/
// operation.h) and rejects malformed ones before anything is queued; the Batch then runs
// consecutive commands of one session as one device task, through one function
// (Batch::Execute), whatever the RPC they came from.
//
// Batch-local references. A command may name the buffer of an earlier Allocate of the
// same batch (BufferRef::batch_index); it is resolved on the device thread once that
// Allocate ran. A failed command fails the commands that depend on it with
// FAILED_PRECONDITION naming it: those whose reference it could not resolve (a failed
// Allocate), and those that read a buffer it was to write (a failed Write, Copy or
// Launch), so a batch never returns stale bytes as if its own earlier write had landed.
// Commands that do not depend on it still run.
//
// Thread-safety: a Batch is used by one thread at a time, handed between the RPC thread,
// the device thread (Execute) and the completion thread through the DeviceWorker's
// queue, which orders those hand-offs. Run's task holds a reference to the batch.

#include <cstddef>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "server/core/device_worker.h"
#include "server/core/operation.h"
#include "server/core/session_registry.h"

namespace gpucmd {

class Batch : public std::enable_shared_from_this<Batch> {
 public:
  // What a launch, device copy or read past its session's limit of work queued on
  // streams gets (Note [Stream backpressure] in server/command/command.h).
  enum class PastTheStreamLimit {
    kRefused,  // RESOURCE_EXHAUSTED: a unary call, whose client retries
    kWait,     // the run stops before it, to go on once there is room: a Submit batch
  };

  // Commands whose operation is an error are answered with it and count as failed.
  explicit Batch(std::vector<BatchCommand> commands,
                 PastTheStreamLimit past_the_limit = PastTheStreamLimit::kRefused);

  size_t size() const { return commands_.size(); }
  BatchCommand& command(size_t index) { return commands_[index]; }
  OperationResult& result(size_t index) { return results_[index]; }
  // True when the command has its answer before running (rejected or failed).
  bool answered(size_t index) const { return !failures_[index].ok(); }

  // Answers command `index` with `status` without running it (counts as failed).
  void Fail(size_t index, absl::Status status);

  // Passes over command `index`, answered before it ran (rejected before queueing), in
  // the batch's order: from now on, reading what it was to write fails as depending on
  // it. Run does this for the answered commands of its range.
  void Pass(size_t index);

  // Queues commands [begin, end), all of `session`, as one task on `worker` (run on the
  // calling thread instead when they only enqueue device work, i.e. launches, reads,
  // device copies, synchronizes and writes from shared-memory slices the device copies
  // from directly (pinned), or inline writes that together stage at most 64 KiB, and the
  // device is idle: DeviceWorker::Placement::kHereWhenIdle). When the task runs,
  // `abandoned` is asked first: a non-OK answer fails every command with it; so does
  // NOT_FOUND when `session` was closed meanwhile (SessionInfo::closed). `done` runs
  // once the task finished and every read, synchronize and write answered when copied
  // among the commands completed (results final): after the task, or when there were
  // any, on a completion thread (or where their work ended: `answering` below).
  // An error means nothing was queued and `done` will not run.
  // What ran is counted for the session's client (Metrics::RecordLaunches, RecordCopy).
  // The run may stop before a command that must wait, and `done` then runs once the
  // wait ended: with PastTheStreamLimit::kWait, before a launch, copy or read that found
  // no room (until the session's oldest work on streams has run); before a write whose
  // stream's drop queue is full (until the stream ran the copies it holds: Note [Drop
  // queue] in server/command/drop_queue.h); and, once per command, at an Allocate that
  // found the device full while freed memory that could hold it waits for work in flight
  // (until that work ended: Note [Out of device memory] in server/command/command.h).
  // TakeStoppedAt then says where to run from next; the caller runs on from there.
  // `queued`, when set, runs in the task once it queued its whole range and only waits
  // are left before `done` (a completion thread runs that): the thread still holds the
  // device, so it must not wait, but may call DeviceWorker::Defer. It does not run when
  // the run stops early or nothing waits.
  // `answering` other than kOnCompletionThread says `done` is brief, never waits and
  // takes no device (a unary call's answer, a small batch's), apart from copying its
  // reads' bytes:
  // a run whose inline reads return at most kBriefAnswerBytes is then answered where its
  // work ended (Note [Brief answers where the work ended] in server/core/device_worker.h).
  absl::Status Run(DeviceWorker& worker, const SessionInfo& session, size_t begin, size_t end,
                   absl::AnyInvocable<absl::Status()> abandoned,
                   absl::AnyInvocable<void()> done,
                   absl::AnyInvocable<void()> queued = nullptr,
                   DeviceWorker::Answering answering =
                       DeviceWorker::Answering::kOnCompletionThread);

  // After `done`: the first command the last Run did not run (waiting for launch room),
  // or nullopt when it ran its whole range.
  std::optional<size_t> TakeStoppedAt() { return std::exchange(stopped_at_, std::nullopt); }

 private:
  // A buffer the command reads or writes, through its reference.
  struct BufferUse {
    BufferRef* ref;
    bool reads;
    bool writes;
  };

  // Most commands use one or two buffers: held inline.
  using BufferUses = absl::InlinedVector<BufferUse, 3>;

  static BufferUses UsesOf(Operation& operation);
  // Counts what command `index`, which succeeded, moved for `client`; a launch is added
  // to `*launches` instead, which the run records at once.
  void Count(DeviceWorker& worker, const std::string& client, size_t index,
             uint64_t* launches) const;
  // A synchronize's: takes what the session's kernels printed into `result` (once the
  // synchronization ended, so every launch before it is in), and logs it at debug level.
  static void CollectKernelOutput(SessionId session, OperationResult& result);
  static OperationResult Apply(CommandInterface& command, SessionId session,
                               Operation& operation);

  // The most inline bytes reads of a run may return for it to be answered where its work
  // ended: copying them into the answer takes a few microseconds.
  static constexpr uint64_t kBriefAnswerBytes = 64 << 10;

  // How the waits of results [begin, end) are answered, for a caller's `answering`.
  DeviceWorker::Answering AnsweringOf(size_t begin, size_t end,
                                      DeviceWorker::Answering answering) const;
  // The logical streams whose work the waits of results [begin, end) are for (their
  // reads', synchronizations' and copied writes'); absent: all the session's streams.
  std::optional<std::vector<LogicalStream>> StreamsWaitedFor(size_t begin, size_t end) const;
  // Before command `index` runs: the wait for room a write or a launch needs first
  // (see Run), or none.
  RoomWait RoomToWaitFor(CommandInterface& command, SessionId session, size_t index);
  // After command `index` ran: when it is an Allocate that found the device full, for
  // the first time, and memory being freed could hold it, takes back its answer and
  // returns the wait for that memory; else none.
  RoomWait MemoryToWaitFor(CommandInterface& command, size_t index);
  // Runs command `index` on the device thread: resolves its references, checks what it
  // depends on, applies it, and records what its failure takes down.
  void Execute(CommandInterface& command, SessionId session, size_t index);
  // FAILED_PRECONDITION: command `index` depends on command `failed`, which failed.
  absl::Status DependencyError(size_t failed) const;

  const PastTheStreamLimit past_the_limit_;
  std::optional<size_t> stopped_at_;  // set by a Run's task, taken after its `done`
  std::vector<BatchCommand> commands_;
  std::vector<OperationResult> results_;
  std::vector<absl::Status> failures_;                  // per command; OK unless it failed
  std::vector<std::optional<BufferId>> allocated_;      // per command: what Allocate made
  std::vector<bool> waited_for_memory_;  // per command: an Allocate that waited once
  // (session, buffer) -> the failed command that was to write it. Buffer ids are unique
  // per device only, and one batch may hold sessions of several devices.
  absl::flat_hash_map<std::pair<SessionId, BufferId>, size_t> failed_writer_;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_CORE_BATCH_H_
