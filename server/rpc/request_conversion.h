#ifndef GPUCMDD_SERVER_RPC_REQUEST_CONVERSION_H_
#define GPUCMDD_SERVER_RPC_REQUEST_CONVERSION_H_

// Requests to Operations, and results back to replies: the single place where the wire
// API meets the core (Note [One command path] in server/core/batch.h). A unary RPC and
// the same command inside a Submit batch go through the same function here, so they
// are checked alike and answered with the same fields.
//
// Conversion runs on the RPC thread, before anything is queued: shape checks
// (request_validation.h), enum ranges, launch dimensions against the device, and
// batch-local references. Thread-safety: pure functions over their arguments.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "driver/device_description.h"
#include "gpucmd/v1/gpucmd.pb.h"
#include "server/core/compile_cache.h"
#include "server/core/operation.h"
#include "server/core/shared_memory.h"

namespace gpucmd {

// The Allocates met so far in a batch: their sequence numbers and positions. Empty for
// a unary call (a batch of one).
class BatchAllocations {
 public:
  // Command `index` of the batch is an Allocate with `sequence`.
  void Add(uint64_t sequence, size_t index);
  // The position of the earlier Allocate with `sequence`; INVALID_ARGUMENT when there is
  // none or more than one.
  absl::StatusOr<size_t> Find(uint64_t sequence) const;

 private:
  static constexpr size_t kAmbiguous = ~size_t{0};
  absl::flat_hash_map<uint64_t, size_t> index_by_sequence_;
};

// The command's kind for messages ("allocate", "write", ...), and its session token.
absl::string_view KindOf(const v1::Command& command);
const std::string& SessionOf(const v1::Command& command);

// The shared-memory regions of the session a request comes from, for the slices it
// names (Note [Shared-memory regions] in server/core/shared_memory.h).
struct SessionRegions {
  const SharedMemoryTable* table = nullptr;
  SessionId session = kNoSession;

  // The slice, keeping its region mapped; NOT_FOUND or INVALID_ARGUMENT as the table.
  absl::StatusOr<Bytes> Slice(const v1::SharedMemorySlice& slice) const;
};

// The buffers `command` would write (a write's target, a copy's target, a launch's
// buffers not declared read-only), as far as they can be named; for a command that is
// rejected, so that its readers still see it failed.
std::vector<BufferRef> WrittenBuffers(const v1::Command& command,
                                      const BatchAllocations& earlier);

// The shape checks of a command that need neither its session nor its device
// (request_validation.h), made first so a malformed command is INVALID_ARGUMENT whatever
// its session token. The ToOperation of each kind repeats them.
absl::Status CheckShape(const v1::Command& command);

absl::StatusOr<Operation> ToOperation(const v1::AllocateRequest& request);
absl::StatusOr<Operation> ToOperation(const v1::FreeRequest& request,
                                      const BatchAllocations& earlier);
// An inline write whose payload the inline budget refused (`refusal`, kept as its
// over_budget): it carries no data and answers its range's error, else the refusal.
absl::StatusOr<Operation> ToOverBudgetWrite(const v1::WriteHeader& header,
                                            const DeviceDescription& device,
                                            absl::Status refusal);
// `data` is the whole inline payload; it must be exactly the header's inline_size_bytes
// and fit the device. A write from shared memory carries none.
absl::StatusOr<Operation> ToOperation(const v1::WriteHeader& header, std::string data,
                                      const DeviceDescription& device,
                                      const BatchAllocations& earlier,
                                      const SessionRegions& regions);
absl::StatusOr<Operation> ToOperation(const v1::ReadRequest& request,
                                      const BatchAllocations& earlier,
                                      const SessionRegions& regions);
absl::StatusOr<Operation> ToOperation(const v1::CopyRequest& request,
                                      const BatchAllocations& earlier);
absl::StatusOr<Operation> ToOperation(const v1::FillRequest& request,
                                      const BatchAllocations& earlier);
// The launch's kernel is looked up later (PrepareLaunch), when earlier compiles of its
// batch have finished.
absl::StatusOr<Operation> ToOperation(const v1::LaunchRequest& request,
                                      const DeviceDescription& device,
                                      const BatchAllocations& earlier);
absl::StatusOr<Operation> ToOperation(const v1::SynchronizeRequest& request);
// Any command of a batch but Compile (which runs on the compile pool, not the device),
// once CheckShape(command) passed: a launch's shape is not checked again. Takes the
// write's payload and the launch's kernel id out of `command`.
absl::StatusOr<Operation> ToOperation(v1::Command& command, const DeviceDescription& device,
                                      const BatchAllocations& earlier,
                                      const SessionRegions& regions);

// The header checks of a Write that can be made before its payload arrives.
absl::Status CheckWriteHeader(const v1::WriteHeader& header, const DeviceDescription& device);

// Gives the launch its kernel's parameters, or marks it skipped (its compile failed: it
// taints its outputs) or refused (never compiled: FAILED_PRECONDITION, nothing touched).
void PrepareLaunch(LaunchOp& launch, CompileCache& compiler);

// The reply of a finished command of `operation`'s kind, with its status; but for the
// bytes of a read that RepliesWithReadBytes: its `read` is left unset, for the caller to
// send from the bytes (Note [A batch's reads sent from their bytes] in
// server/rpc/submit_replies.h).
void FillReply(const Operation& operation, const OperationResult& result,
               v1::CommandReply* reply);
// Whether the reply of `operation` carries bytes the read returned inline (it succeeded,
// and its bytes are not in shared memory).
bool RepliesWithReadBytes(const Operation& operation, const OperationResult& result);
// Sets `reply`'s status, its message cut as a call's is (CapStatusMessage); an OK one is
// left absent (it reads as code 0).
void SetReplyStatus(const absl::Status& status, v1::CommandReply* reply);
// A compile's response: on success the kernel and its parameters, and in every case
// the kernel id.
void FillCompileResponse(const KernelId& id, const absl::StatusOr<CompileCache::Result>& result,
                         v1::CompileResponse* response);

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_RPC_REQUEST_CONVERSION_H_
