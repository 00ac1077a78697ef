#include "server/rpc/rpc_environment.h"

#include <chrono>
#include <utility>
#include <variant>

#include "server/rpc/request_conversion.h"

namespace gpucmd {

absl::StatusOr<SessionInfo> RpcEnvironment::Touch(const std::string& token) const {
  return core->sessions().Touch(token, SessionRegistry::Clock::now());
}

void RunBatchOfOne(const RpcEnvironment& environment, grpc::CallbackServerContext* context,
                   const SessionInfo& session, absl::string_view kind, Operation operation,
                   absl::AnyInvocable<void(OperationResult&)> done) {
  if (auto* launch = std::get_if<LaunchOp>(&operation)) {
    PrepareLaunch(*launch, *environment.compiler);
  }
  std::vector<BatchCommand> commands;
  commands.push_back(BatchCommand{.kind = kind, .operation = std::move(operation)});
  auto batch = std::make_shared<Batch>(std::move(commands));
  // Shared: the task owns one reference, and is dropped when it cannot be queued.
  auto reply = std::make_shared<absl::AnyInvocable<void(OperationResult&)>>(std::move(done));
  absl::Status queued = batch->Run(
      environment.core->worker(session.device), session, 0, 1,
      [context] { return CallAbandoned(context); },
      [batch, reply] { (*reply)(batch->result(0)); });
  if (!queued.ok()) {
    batch->Fail(0, queued);
    (*reply)(batch->result(0));
  }
}

absl::Status CallAbandoned(grpc::CallbackServerContext* context) {
  if (!context->IsCancelled()) return absl::OkStatus();
  if (context->deadline() <= std::chrono::system_clock::now()) {
    return absl::DeadlineExceededError("deadline passed before the device reached the call");
  }
  return absl::CancelledError("the client cancelled the call");
}

}  // namespace gpucmd
