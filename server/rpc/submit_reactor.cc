#include "server/rpc/submit_reactor.h"

#include "server/rpc/grpc_status.h"
#include "server/rpc/request_conversion.h"

namespace gpucmd {

SubmitReactor::SubmitReactor(const RpcEnvironment* environment,
                             grpc::CallbackServerContext* context)
    : environment_(environment), context_(context) {
  StartRead(&request_);
}

void SubmitReactor::OnReadDone(bool ok) {
  if (!ok) {
    Finish(grpc::Status::OK);
    return;
  }
  Convert();
  next_ = 0;
  RunNext();
}

void SubmitReactor::OnWriteDone(bool ok) {
  if (!ok) {
    Finish(ToGrpcStatus(absl::CancelledError("the client stopped reading replies")));
    return;
  }
  StartRead(&request_);
}

void SubmitReactor::Convert() {
  const size_t count = request_.commands_size();
  response_.Clear();
  sessions_.assign(count, std::nullopt);
  std::vector<BatchCommand> commands(count);
  BatchAllocations earlier;
  for (size_t i = 0; i < count; ++i) {
    v1::Command& command = *request_.mutable_commands(static_cast<int>(i));
    response_.add_replies()->set_sequence(command.sequence());
    commands[i].sequence = command.sequence();
    commands[i].kind = KindOf(command);
    absl::StatusOr<Operation>& operation = commands[i].operation;
    absl::Status shape = CheckShape(command);
    absl::StatusOr<SessionInfo> session = environment_->Touch(SessionOf(command));
    // Taken before conversion, which moves a write's payload out of the command.
    std::vector<BufferRef> writes = WrittenBuffers(command, earlier);
    if (!shape.ok()) {
      operation = shape;
    } else if (!session.ok()) {
      operation = session.status();
    } else if (command.has_compile()) {
      sessions_[i] = *session;
      operation = absl::InternalError("a compile runs on the compile pool, not on the device");
    } else {
      sessions_[i] = *session;
      operation = ToOperation(command, environment_->devices[session->device], earlier,
                              SessionRegions{&environment_->core->shared_memory(), session->id});
    }
    if (!operation.ok() && session.ok()) {
      commands[i].session = session->id;
      commands[i].rejected_writes = std::move(writes);
    }
    // Registered whether or not it converted: a reference to a failed Allocate is a
    // dependency on it, not a dangling name.
    if (command.has_allocate()) earlier.Add(command.sequence(), i);
  }
  batch_ = std::make_shared<Batch>(std::move(commands));
}

void SubmitReactor::RunNext() {
  const size_t count = batch_->size();
  while (next_ < count) {
    if (IsCompile(next_) && sessions_[next_].has_value()) {
      RunCompile(next_);
      return;
    }
    if (batch_->answered(next_)) {
      batch_->Pass(next_);
      Answer(next_, next_ + 1);
      ++next_;
      continue;
    }
    const SessionId session = sessions_[next_]->id;
    size_t end = next_ + 1;
    while (end < count && !IsCompile(end) &&
           (batch_->answered(end) || sessions_[end]->id == session)) {
      ++end;
    }
    RunOnDevice(next_, end);
    return;
  }
  batch_.reset();
  StartWrite(&response_);
}

void SubmitReactor::RunCompile(size_t index) {
  const v1::CompileRequest& request = request_.commands(static_cast<int>(index)).compile();
  KernelSource kernel{request.source(), request.entry_point(),
                      {request.options().begin(), request.options().end()}};
  KernelId id = environment_->compiler->IdFor(kernel);
  environment_->compiler->Compile(
      sessions_[index]->id, std::move(kernel), [this, index, id](absl::StatusOr<CompileCache::Result> result) {
        v1::CommandReply* reply = response_.mutable_replies(static_cast<int>(index));
        FillCompileResponse(id, result, reply->mutable_compile());
        SetReplyStatus(result.status(), reply);
        next_ = index + 1;
        RunNext();
      });
}

void SubmitReactor::RunOnDevice(size_t begin, size_t end) {
  // Kernels are looked up now, after the batch's earlier compiles finished.
  for (size_t i = begin; i < end; ++i) {
    if (batch_->answered(i)) continue;
    if (auto* launch = std::get_if<LaunchOp>(&*batch_->command(i).operation)) {
      PrepareLaunch(*launch, *environment_->compiler);
    }
  }
  const SessionInfo& session = *sessions_[begin];
  absl::Status queued = batch_->Run(
      environment_->core->worker(session.device), session.id, begin, end,
      [context = context_] { return CallAbandoned(context); },
      [this, begin, end] {
        Answer(begin, end);
        next_ = end;
        RunNext();
      });
  if (!queued.ok()) {
    for (size_t i = begin; i < end; ++i) {
      if (!batch_->answered(i)) batch_->Fail(i, queued);
    }
    Answer(begin, end);
    next_ = end;
    RunNext();
  }
}

void SubmitReactor::Answer(size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) {
    if (IsCompile(i) && sessions_[i].has_value()) continue;  // answered by its compile
    v1::CommandReply* reply = response_.mutable_replies(static_cast<int>(i));
    const absl::StatusOr<Operation>& operation = batch_->command(i).operation;
    if (operation.ok()) {
      FillReply(*operation, batch_->result(i), reply);
    } else {
      SetReplyStatus(batch_->result(i).status, reply);
    }
  }
}

}  // namespace gpucmd
