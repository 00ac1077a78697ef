#include "server/rpc/submit_reactor.h"

#include <algorithm>
#include <variant>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/rpc/batch_request.h"
#include "server/rpc/grpc_status.h"
#include "server/rpc/metrics_interceptor.h"
#include "server/rpc/read_chunks.h"
#include "server/rpc/request_conversion.h"
#include "server/rpc/submit_replies.h"

namespace gpucmd {

SubmitReactor::SubmitReactor(const RpcEnvironment* environment,
                             grpc::CallbackServerContext* context)
    : environment_(environment), context_(context) {
  environment_->metrics->RpcStarted();
  StartRead(&incoming_);
}

void SubmitReactor::OnReadDone(bool ok) {
  std::unique_ptr<InFlight> batch;
  absl::Status parsed;
  if (ok) {
    batch = std::make_unique<InFlight>();
    parsed = ParseBatch(&incoming_, environment_->core->payloads(), batch->request);
    if (parsed.ok() && batch->request->commands_size() > kMaxCommandsPerBatch) {
      parsed = absl::InvalidArgumentError(absl::StrCat(
          "a batch holds at most ", kMaxCommandsPerBatch, " commands, not ",
          batch->request->commands_size(), ": split it (several batches may be in flight)"));
    }
    if (parsed.ok()) {
      Convert(*batch);
      parsed = ReserveHeld(*batch);
    }
    if (!parsed.ok()) batch.reset();
  }
  incoming_.Clear();
  Next next;
  {
    MutexLock lock(&mutex_);
    reading_ = false;
    if (batch != nullptr) {
      waiting_.push_back(std::move(batch));
    } else {
      reads_done_ = true;
      refused_ = parsed;
    }
    next = Advance();
  }
  Act(next);
}

void SubmitReactor::OnWriteDone(bool ok) {
  Next next;
  std::vector<std::unique_ptr<InFlight>> retired;  // freed unlocked
  {
    MutexLock lock(&mutex_);
    retired.swap(retired_);
    writing_ = false;
    outgoing_.pop_front();
    if (!ok) {
      client_gone_ = true;
      outgoing_.clear();
    }
    next = Advance();
  }
  Act(next);
}

SubmitReactor::Next SubmitReactor::Advance() {
  Next next;
  if (finished_) return next;
  if (client_gone_) waiting_.clear();  // nobody to answer
  // Note [Overlapping batches]: the next starts once the last one started only waits.
  const bool may_start =
      started_.empty() || (started_.size() < kMaxBatchesStarted && started_.back().queued_all);
  // Note [Replies the client does not read]: no batch starts while answers pile up.
  if (may_start && !waiting_.empty() && outgoing_.size() < kMaxBatchesAhead) {
    started_.push_back(Started{.in_flight = std::move(waiting_.front())});
    waiting_.pop_front();
    next.run = started_.back().in_flight.get();
  }
  if (!reading_ && !reads_done_ && !client_gone_ && waiting_.size() < kMaxBatchesAhead) {
    reading_ = true;
    next.read = true;
  }
  if (!writing_ && !outgoing_.empty() && !client_gone_) {
    writing_ = true;
    // From here on the client may hear the answer: the reads' budget is given back first.
    outgoing_.front().read_reservations.clear();
    next.write = &outgoing_.front().message;
  }
  if (started_.empty() && !writing_ && (client_gone_ || (reads_done_ && outgoing_.empty()))) {
    finished_ = true;
    next.finish = client_gone_ ? ToGrpcStatus(absl::CancelledError(
                                     "the client stopped reading replies"))
                               : ToGrpcStatus(refused_);
  }
  return next;
}

void SubmitReactor::Act(const Next& next) {
  if (next.finish) {
    RecordFinishedCall(*environment_->metrics, environment_->metrics->RequestsOf(kMethod),
                       *next.finish, started_at_);
    Finish(*next.finish);
    return;
  }
  if (next.read) StartRead(&incoming_);
  if (next.write != nullptr) StartWrite(next.write);
  if (next.run != nullptr) RunNext(*next.run);
}

SubmitReactor::Started& SubmitReactor::StartedOf(const InFlight& batch) {
  // A batch is in started_ from its start until it is answered, and only then retired.
  return *std::find_if(started_.begin(), started_.end(), [&batch](const Started& started) {
    return started.in_flight.get() == &batch;
  });
}

void SubmitReactor::Retire() {
  while (!started_.empty() && started_.front().answered) {
    retired_.push_back(std::move(started_.front().in_flight));
    started_.pop_front();
    if (started_.empty()) break;
    std::deque<Outgoing>& held = started_.front().held;
    if (!client_gone_) {
      for (Outgoing& message : held) outgoing_.push_back(std::move(message));
    }
    held.clear();
  }
}

absl::Status SubmitReactor::ReserveInline(Operation& operation, SessionId session,
                                          InFlight& in_flight) const {
  uint64_t bytes = 0;
  std::vector<InlineBudget::Reservation>* held = nullptr;
  absl::Status* refusal = nullptr;
  auto* write = std::get_if<WriteOp>(&operation);
  if (write != nullptr) {
    bytes = write->data.size();
    held = &in_flight.write_reservations;
    refusal = &write->over_budget;
  } else if (auto* read = std::get_if<ReadOp>(&operation);
             read != nullptr && !read->into.has_value()) {
    bytes = read->layout.host_bytes();
    if (bytes > environment_->read_chunk_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a read in a batch returns at most ", environment_->read_chunk_bytes,
          " bytes (one response under limits.max_message_bytes), not ", bytes,
          ": split it, or use the Read RPC or a shared-memory slice"));
    }
    held = &in_flight.read_reservations;
    refusal = &read->over_budget;
  }
  if (held == nullptr || bytes == 0) return absl::OkStatus();
  absl::StatusOr<InlineBudget::Reservation> reservation =
      environment_->core->inline_budget().Reserve(session, bytes);
  if (reservation.ok()) {
    held->push_back(*std::move(reservation));
    return absl::OkStatus();
  }
  *refusal = reservation.status();
  if (write != nullptr) std::string().swap(write->data);  // not held past the refusal
  return absl::OkStatus();
}

void SubmitReactor::Convert(InFlight& in_flight) const {
  const size_t count = in_flight.request->commands_size();
  in_flight.sessions.assign(count, nullptr);
  std::vector<BatchCommand> commands(count);
  BatchAllocations earlier;
  std::string session_token;  // that `session` was looked up for
  absl::Status session_status = absl::NotFoundError("no session");
  std::shared_ptr<const SessionInfo> session;  // null when session_status is not OK
  for (size_t i = 0; i < count; ++i) {
    v1::Command& command = *in_flight.request->mutable_commands(static_cast<int>(i));
    in_flight.response->add_replies()->set_sequence(command.sequence());
    commands[i].sequence = command.sequence();
    commands[i].kind = KindOf(command);
    absl::StatusOr<Operation>& operation = commands[i].operation;
    absl::Status shape = CheckShape(command);
    // Looked up once per run of commands naming the same session.
    if (i == 0 || SessionOf(command) != session_token) {
      session_token = SessionOf(command);
      absl::StatusOr<SessionInfo> touched = environment_->Touch(session_token);
      session_status = touched.status();
      session = touched.ok() ? std::make_shared<const SessionInfo>(*std::move(touched)) : nullptr;
    }
    // Taken before conversion, which moves a write's payload out of the command.
    std::vector<BufferRef> writes = WrittenBuffers(command, earlier);
    if (!shape.ok()) {
      operation = shape;
    } else if (session == nullptr) {
      operation = session_status;
    } else if (command.has_compile()) {
      in_flight.sessions[i] = session;
      operation = absl::InternalError("a compile runs on the compile pool, not on the device");
    } else {
      in_flight.sessions[i] = session;
      operation = ToOperation(command, environment_->devices[session->device], earlier,
                              SessionRegions{&environment_->core->shared_memory(), session->id});
      if (operation.ok()) {
        if (absl::Status reserved = ReserveInline(*operation, session->id, in_flight);
            !reserved.ok()) {
          operation = reserved;
        }
      }
    }
    if (!operation.ok() && session != nullptr) {
      commands[i].session = session->id;
      commands[i].rejected_writes = std::move(writes);
    }
    // Registered whether or not it converted: a reference to a failed Allocate is a
    // dependency on it, not a dangling name.
    if (command.has_allocate()) earlier.Add(command.sequence(), i);
  }
  in_flight.batch =
      std::make_shared<Batch>(std::move(commands), Batch::PastTheStreamLimit::kWait);
}

absl::Status SubmitReactor::ReserveHeld(InFlight& in_flight) const {
  // The arena holds the commands as parsed and their replies; the rest is per command.
  const uint64_t bytes =
      static_cast<uint64_t>(in_flight.arena.SpaceAllocated()) +
      in_flight.batch->size() * (sizeof(BatchCommand) + sizeof(in_flight.sessions[0]));
  ASSIGN_OR_RETURN(ByteBudget::Reservation held,
                   environment_->core->submit_budget().Reserve(bytes, "this batch"));
  in_flight.held = std::move(held);
  return absl::OkStatus();
}

void SubmitReactor::RunNext(InFlight& in_flight) {
  Batch& batch = *in_flight.batch;
  const size_t count = batch.size();
  size_t& next = in_flight.next;
  while (next < count) {
    if (IsCompile(in_flight, next) && in_flight.sessions[next] != nullptr) {
      RunCompile(in_flight, next);
      return;
    }
    if (batch.answered(next)) {
      batch.Pass(next);
      Answer(in_flight, next, next + 1);
      ++next;
      continue;
    }
    const SessionId session = in_flight.sessions[next]->id;
    size_t end = next + 1;
    while (end < count && !IsCompile(in_flight, end) &&
           (batch.answered(end) || in_flight.sessions[end]->id == session)) {
      ++end;
    }
    RunOnDevice(in_flight, next, end);
    return;
  }
  FinishBatch(in_flight);
}

void SubmitReactor::RunCompile(InFlight& in_flight, size_t index) {
  const v1::CompileRequest& request =
      in_flight.request->commands(static_cast<int>(index)).compile();
  KernelSource kernel{request.source(), request.entry_point(),
                      {request.options().begin(), request.options().end()}};
  KernelId id = environment_->compiler->IdFor(kernel);
  Ref();  // the compile cache calls back exactly once
  environment_->compiler->Compile(
      in_flight.sessions[index]->id, std::move(kernel),
      [this, &in_flight, index, id](absl::StatusOr<CompileCache::Result> result) {
        v1::CommandReply* reply = in_flight.response->mutable_replies(static_cast<int>(index));
        FillCompileResponse(id, result, reply->mutable_compile());
        SetReplyStatus(result.status(), reply);
        if (in_flight.request->stream_replies()) {
          SendReplies(in_flight, index + 1, /*batch_done=*/false);
        }
        in_flight.next = index + 1;
        RunNext(in_flight);
        Unref();
      });
}

void SubmitReactor::RunOnDevice(InFlight& in_flight, size_t begin, size_t end) {
  Batch& batch = *in_flight.batch;
  // Kernels are looked up now, after the batch's earlier compiles finished; a run of
  // launches of one kernel looks it up once.
  const LaunchOp* previous = nullptr;
  for (size_t i = begin; i < end; ++i) {
    if (batch.answered(i)) continue;
    auto* launch = std::get_if<LaunchOp>(&*batch.command(i).operation);
    if (launch == nullptr) continue;
    if (previous != nullptr && previous->launch.kernel.hex == launch->launch.kernel.hex) {
      launch->launch.params = previous->launch.params;
      launch->refused = previous->refused;
    } else {
      PrepareLaunch(*launch, *environment_->compiler);
    }
    previous = launch;
  }
  const SessionInfo& session = *in_flight.sessions[begin];
  DeviceWorker& worker = environment_->core->worker(session.device);
  // The batch's last run: once it is queued the next batch may start.
  absl::AnyInvocable<void()> queued_all;
  if (end == batch.size()) {
    queued_all = [this, &in_flight, &worker] { QueuedAll(in_flight, worker); };
  }
  Ref();  // for the device's callback
  absl::Status queued = batch.Run(
      worker, session, begin, end, [context = context_] { return CallAbandoned(context); },
      [this, &in_flight, begin, end] {
        // A run that stopped for launch room goes on from there (Note [Launch
        // backpressure] in server/command/command.h).
        const size_t ran_to = in_flight.batch->TakeStoppedAt().value_or(end);
        Answer(in_flight, begin, ran_to);
        in_flight.next = ran_to;
        RunNext(in_flight);
        Unref();
      },
      std::move(queued_all), AnsweringOf(batch, begin, end));
  if (!queued.ok()) {
    for (size_t i = begin; i < end; ++i) {
      if (!batch.answered(i)) batch.Fail(i, queued);
    }
    Answer(in_flight, begin, end);
    in_flight.next = end;
    RunNext(in_flight);
    Unref();  // the device's callback will not run
  }
}

DeviceWorker::Answering SubmitReactor::AnsweringOf(const Batch& batch, size_t begin,
                                                   size_t end) {
  return begin == 0 && end == batch.size() && batch.size() <= kBriefBatchCommands
             ? DeviceWorker::Answering::kWhereWorkEnded
             : DeviceWorker::Answering::kOnCompletionThread;
}

void SubmitReactor::QueuedAll(InFlight& in_flight, DeviceWorker& worker) {
  {
    MutexLock lock(&mutex_);
    StartedOf(in_flight).queued_all = true;
  }
  Ref();  // for the deferred action
  worker.Defer([this] {
    Next next;
    {
      MutexLock lock(&mutex_);
      next = Advance();
    }
    Act(next);
    Unref();
  });
}

void SubmitReactor::Answer(InFlight& in_flight, size_t begin, size_t end) {
  Batch& batch = *in_flight.batch;
  for (size_t i = begin; i < end; ++i) {
    // Answered by its compile.
    if (IsCompile(in_flight, i) && in_flight.sessions[i] != nullptr) continue;
    v1::CommandReply* reply = in_flight.response->mutable_replies(static_cast<int>(i));
    const absl::StatusOr<Operation>& operation = batch.command(i).operation;
    if (operation.ok()) {
      OperationResult& result = batch.result(i);
      FillReply(*operation, result, reply);
      if (RepliesWithReadBytes(*operation, result)) {
        if (in_flight.read_bytes.empty()) in_flight.read_bytes.resize(batch.size());
        in_flight.read_bytes[i] = ShareReadBytes(std::move(result.read->bytes),
                                                 environment_->core->shared_payloads());
      }
    } else {
      SetReplyStatus(batch.result(i).status, reply);
    }
  }
  if (in_flight.request->stream_replies()) SendReplies(in_flight, end, /*batch_done=*/false);
}

void SubmitReactor::SendReplies(InFlight& in_flight, size_t end, bool batch_done) {
  const RepliesToSend replies{*in_flight.response, in_flight.read_bytes};
  std::deque<Outgoing> messages;  // (Outgoing is not copyable: a deque never relocates)
  size_t& next = in_flight.unsent;
  do {  // at least one message: the one that says batch_done may carry no reply
    const size_t fit = RepliesThatFit(replies, next, end, environment_->read_chunk_bytes);
    messages.push_back({SerializeReplies(replies, next, fit, batch_done && fit == end)});
    next = fit;
  } while (next < end);
  if (batch_done) {
    messages.back().read_reservations = std::move(in_flight.read_reservations);
    messages.back().held = std::move(in_flight.held);
  }
  Next after;
  {
    MutexLock lock(&mutex_);
    Started& started = StartedOf(in_flight);
    if (!client_gone_) {
      // After the older batches' responses.
      std::deque<Outgoing>& into = &started == &started_.front() ? outgoing_ : started.held;
      for (Outgoing& message : messages) into.push_back(std::move(message));
    }
    if (batch_done) {
      started.answered = true;
      Retire();
    }
    after = Advance();
  }
  Act(after);
}

void SubmitReactor::FinishBatch(InFlight& in_flight) {
  // Its writes have run: their budget is given back before the client hears so.
  in_flight.write_reservations.clear();
  SendReplies(in_flight, in_flight.batch->size(), /*batch_done=*/true);  // `in_flight` goes
}

}  // namespace gpucmd
