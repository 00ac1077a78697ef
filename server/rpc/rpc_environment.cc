#include "server/rpc/rpc_environment.h"

#include <chrono>
#include <utility>
#include <variant>

#include "server/rpc/request_conversion.h"

namespace gpucmd {

absl::StatusOr<SessionInfo> RpcEnvironment::Touch(const std::string& token) const {
  return core->sessions().Touch(token, SessionRegistry::Clock::now());
}

namespace {

using Reply = std::shared_ptr<absl::AnyInvocable<void(OperationResult&)>>;

// Runs the one command of `batch`, again when a run stopped before it to wait
// (Batch::Run); `reply` gets its final result.
void RunUntilAnswered(DeviceWorker& worker, grpc::CallbackServerContext* context,
                      const SessionInfo& session, std::shared_ptr<Batch> batch, Reply reply) {
  absl::Status queued = batch->Run(
      worker, session, 0, 1, [context] { return CallAbandoned(context); },
      [&worker, context, session, batch, reply] {
        if (batch->TakeStoppedAt().has_value()) {
          RunUntilAnswered(worker, context, session, batch, reply);
          return;
        }
        (*reply)(batch->result(0));
      });
  if (!queued.ok()) {
    batch->Fail(0, queued);
    (*reply)(batch->result(0));
  }
}

}  // namespace

void RunBatchOfOne(const RpcEnvironment& environment, grpc::CallbackServerContext* context,
                   const SessionInfo& session, absl::string_view kind, Operation operation,
                   absl::AnyInvocable<void(OperationResult&)> done) {
  if (auto* launch = std::get_if<LaunchOp>(&operation)) {
    PrepareLaunch(*launch, *environment.compiler);
  }
  std::vector<BatchCommand> commands;
  commands.push_back(BatchCommand{.kind = kind, .operation = std::move(operation)});
  // Shared: each run's task holds one reference, and it is dropped when it cannot be
  // queued.
  RunUntilAnswered(environment.core->worker(session.device), context, session,
                   std::make_shared<Batch>(std::move(commands)),
                   std::make_shared<absl::AnyInvocable<void(OperationResult&)>>(std::move(done)));
}

absl::Status CallAbandoned(grpc::CallbackServerContext* context) {
  if (!context->IsCancelled()) return absl::OkStatus();
  if (context->deadline() <= std::chrono::system_clock::now()) {
    return absl::DeadlineExceededError("deadline passed before the device reached the call");
  }
  return absl::CancelledError("the client cancelled the call");
}

}  // namespace gpucmd
