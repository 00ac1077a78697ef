#ifndef GPUCMDD_SERVER_CORE_OPERATION_H_
#define GPUCMDD_SERVER_CORE_OPERATION_H_

// The one operation type every request becomes. The RPC layer converts and validates a
// unary request or each command of a Submit batch into an Operation on its own thread;
// the device thread runs every Operation through the same code (server/core/batch.h).
// Plain values, no gRPC.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "driver/types.h"
#include "server/command/command_interface.h"
#include "server/command/ids.h"

namespace gpucmd {

// Names a buffer: a handle the session holds, or the buffer that an earlier Allocate of
// the same batch makes (resolved on the device thread, when that Allocate has run).
struct BufferRef {
  BufferId id = 0;
  std::optional<size_t> batch_index;  // when set, `id` is filled in on resolution
};

struct AllocateOp {
  uint64_t size_bytes = 0;
};

struct FreeOp {
  BufferRef buffer;
};

struct WriteOp {
  LogicalStream stream = 0;
  BufferRef buffer;
  CopyLayout layout;
  std::string data;             // inline: exactly layout.host_bytes()
  std::optional<Bytes> shared;  // or a shared-memory slice of that size (data empty)
  // Answered once its copy completed, with the copy's outcome (WriteShared, or a header's
  // `answer_when_copied`), so the client may reuse a slice on the answer; else once
  // queued.
  bool answer_when_copied = false;
  // Not OK: the inline budget refused the payload (data empty). The write does not run;
  // it answers its own range's error (CommandInterface::CheckRange) if it has one, else
  // this: a copy that can never succeed is not told to retry.
  absl::Status over_budget;
};

struct ReadOp {
  LogicalStream stream = 0;
  BufferRef buffer;
  CopyLayout layout;
  std::optional<Bytes> into;  // set: the bytes land in this shared-memory slice
  absl::Status over_budget;   // as WriteOp's
};

struct CopyOp {
  LogicalStream stream = 0;
  BufferRef source;
  BufferRef target;
  DeviceCopyLayout layout;  // the rows it copies
};

struct FillOp {
  LogicalStream stream = 0;
  BufferRef target;
  CopyLayout layout;  // the rows it sets
  FillPattern pattern;
};

struct LaunchOp {
  LogicalStream stream = 0;
  // `launch.args[i].buffer` is taken from `buffers[i]` once resolved; `launch.params` is
  // looked up in the compile cache just before the launch is queued.
  KernelLaunch launch;
  // One per argument once any argument names a buffer (empty otherwise); unused for
  // scalars.
  std::vector<BufferRef> buffers;
  // Why the launch cannot run at all (its kernel was never compiled): it is answered
  // with this status before any resource is resolved, and taints nothing.
  absl::Status refused;
};

struct SynchronizeOp {
  std::optional<LogicalStream> stream;  // all the session's streams when empty
};

using Operation =
    std::variant<AllocateOp, FreeOp, WriteOp, ReadOp, CopyOp, FillOp, LaunchOp, SynchronizeOp>;

// One command of a batch: the client's sequence number, what kind of command it is (for
// messages), and the operation, or why it was rejected before it was queued.
struct BatchCommand {
  uint64_t sequence = 0;
  absl::string_view kind;  // "allocate", "write", ... (a string literal)
  absl::StatusOr<Operation> operation;
  // For a command rejected before queueing: its session (kNoSession when that did not
  // resolve) and the buffers it was to write, so that commands reading them after it
  // fail as its dependents.
  SessionId session = kNoSession;
  std::vector<BufferRef> rejected_writes;
};

// What one operation produced.
struct OperationResult {
  absl::Status status;
  BufferId allocated = 0;           // Allocate
  uint64_t bytes_written = 0;       // Write
  std::optional<PendingRead> read;  // Read: the bytes, complete once `status` is final
  // Synchronize, or a write answered once copied: its end, waited for off the device thread.
  PendingWait synchronization;
  std::shared_ptr<KernelOutput> printed;  // Synchronize: where the session's kernels print
  std::string kernel_output;              // Synchronize: what they printed, once it ended
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_CORE_OPERATION_H_
