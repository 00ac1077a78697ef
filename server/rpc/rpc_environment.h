#ifndef GPUCMDD_SERVER_RPC_RPC_ENVIRONMENT_H_
#define GPUCMDD_SERVER_RPC_RPC_ENVIRONMENT_H_

// What the RPC layer's handlers and reactors share: the devices' descriptions and the
// core they queue work on. Nothing here names a driver.
//
// Thread-safety: immutable after construction; the pointees are thread-safe.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "driver/device_description.h"
#include "grpcpp/grpcpp.h"
#include "server/core/batch.h"
#include "server/core/compile_cache.h"
#include "server/core/metrics.h"
#include "server/core/server_core.h"

namespace gpucmd {

struct RpcEnvironment {
  std::vector<DeviceDescription> devices;  // by ordinal
  ServerCore* core = nullptr;
  CompileCache* compiler = nullptr;
  Metrics* metrics = nullptr;
  uint64_t read_chunk_bytes = 0;  // a streamed read's bytes per message

  // The session behind `token`, marked active. NOT_FOUND for unknown tokens.
  absl::StatusOr<SessionInfo> Touch(const std::string& token) const;
};

// Why a call should not run any more, or OK: the status of a call its client cancelled
// (`cancelled`), DEADLINE_EXCEEDED when `deadline` passed.
absl::Status AbandonedStatus(bool cancelled, std::chrono::system_clock::time_point deadline);

// AbandonedStatus of the call of `context`.
absl::Status CallAbandoned(grpc::CallbackServerContext* context);

// Runs `operation` of `session` as a batch of one on the session's device (a launch's
// kernel is looked up first), unless `abandoned` (asked before each run) says the call
// should not run any more. `done` gets the final result: after the task (after a wait
// for memory being freed, for an Allocate that found the device full), after the
// copy completed for a read, or at once when the work could not be queued; where
// `answering` says (Note [Brief answers where the work ended] in
// server/core/device_worker.h), `done` being brief.
void RunBatchOfOne(
    const RpcEnvironment& environment, std::function<absl::Status()> abandoned,
    const SessionInfo& session, absl::string_view kind, Operation operation,
    absl::AnyInvocable<void(OperationResult&)> done,
    DeviceWorker::Answering answering = DeviceWorker::Answering::kWhereWorkEnded);

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_RPC_RPC_ENVIRONMENT_H_
