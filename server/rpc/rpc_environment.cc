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
// (Batch::Run); `reply` gets its final result, where `answering` says.
void RunUntilAnswered(DeviceWorker& worker, std::function<absl::Status()> abandoned,
                      const SessionInfo& session, std::shared_ptr<Batch> batch, Reply reply,
                      DeviceWorker::Answering answering) {
  absl::Status queued = batch->Run(
      worker, session, 0, 1, abandoned,
      [&worker, abandoned, session, batch, reply, answering] {
        if (batch->TakeStoppedAt().has_value()) {
          RunUntilAnswered(worker, abandoned, session, batch, reply, answering);
          return;
        }
        (*reply)(batch->result(0));
      },
      /*queued=*/nullptr, answering);
  if (!queued.ok()) {
    batch->Fail(0, queued);
    (*reply)(batch->result(0));
  }
}

}  // namespace

void RunBatchOfOne(const RpcEnvironment& environment,
                   std::function<absl::Status()> abandoned, const SessionInfo& session,
                   absl::string_view kind, Operation operation,
                   absl::AnyInvocable<void(OperationResult&)> done,
                   DeviceWorker::Answering answering) {
  if (auto* launch = std::get_if<LaunchOp>(&operation)) {
    PrepareLaunch(*launch, *environment.compiler);
  }
  std::vector<BatchCommand> commands;
  commands.push_back(BatchCommand{.kind = kind, .operation = std::move(operation)});
  // Shared: each run's task holds one reference, and it is dropped when it cannot be
  // queued.
  RunUntilAnswered(environment.core->worker(session.device), std::move(abandoned), session,
                   std::make_shared<Batch>(std::move(commands)),
                   std::make_shared<absl::AnyInvocable<void(OperationResult&)>>(std::move(done)),
                   answering);
}

absl::Status AbandonedStatus(bool cancelled, std::chrono::system_clock::time_point deadline) {
  if (!cancelled) return absl::OkStatus();
  if (deadline <= std::chrono::system_clock::now()) {
    return absl::DeadlineExceededError("deadline passed before the device reached the call");
  }
  return absl::CancelledError("the client cancelled the call");
}

absl::Status CallAbandoned(grpc::CallbackServerContext* context) {
  return AbandonedStatus(context->IsCancelled(), context->deadline());
}

}  // namespace gpucmd
