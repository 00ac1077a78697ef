#include "server/core/batch.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/deferred_wakeups.h"
#include "spdlog/spdlog.h"

namespace gpucmd {
namespace {

template <typename... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};

// True when running `operation` only enqueues device work: it copies no host bytes on
// the thread that runs it and makes no driver call that may wait for the device
// (allocating and freeing may, on a GPU).
bool OnlyEnqueues(const Operation& operation) {
  return std::visit(
      Overloaded{
          [](const AllocateOp&) { return false; },
          [](const FreeOp&) { return false; },
          // The thread that runs a write copies its bytes into pinned memory when it is
          // inline and small, or from a slice the device cannot copy from directly.
          [](const WriteOp& write) { return write.shared.has_value() && write.shared->pinned(); },
          [](const ReadOp&) { return true; },
          [](const CopyOp&) { return true; },
          [](const FillOp&) { return true; },
          [](const LaunchOp&) { return true; },
          [](const SynchronizeOp&) { return true; },
      },
      operation);
}

// The most inline bytes a run's writes may copy into staging memory for the run to go on
// the submitting thread of an idle device: a few microseconds of copying, less than the
// hop to the device thread and back (a pinned pool that must grow first allocates once).
constexpr uint64_t kStagedOnTheSubmittingThreadBytes = 64 << 10;

// The bytes a write carries inline (none for a shared-memory slice or another command).
std::optional<uint64_t> InlineWriteBytes(const Operation& operation) {
  const auto* write = std::get_if<WriteOp>(&operation);
  if (write == nullptr || write->shared.has_value()) return std::nullopt;
  return write->data.size();
}

// A copy refused for its bytes (`refusal`) answers its own range's error first: the
// client is told to retry only a copy that can succeed.
absl::Status RangeOrRefusal(CommandInterface& command, SessionId session, BufferId buffer,
                            const CopyLayout& layout, absl::Status refusal) {
  absl::Status range = command.CheckRange(session, buffer, layout);
  return range.ok() ? refusal : range;
}

}  // namespace

Batch::Batch(std::vector<BatchCommand> commands, PastTheStreamLimit past_the_limit)
    : past_the_limit_(past_the_limit),
      commands_(std::move(commands)),
      results_(commands_.size()),
      failures_(commands_.size()),
      allocated_(commands_.size()),
      waited_for_memory_(commands_.size()) {
  for (size_t i = 0; i < commands_.size(); ++i) {
    if (!commands_[i].operation.ok()) Fail(i, commands_[i].operation.status());
  }
}

void Batch::Pass(size_t index) {
  const BatchCommand& command = commands_[index];
  if (command.session == kNoSession || failures_[index].ok()) return;
  for (const BufferRef& ref : command.rejected_writes) {
    if (!ref.batch_index.has_value()) {
      failed_writer_[{command.session, ref.id}] = index;
    } else if (allocated_[*ref.batch_index].has_value()) {
      failed_writer_[{command.session, *allocated_[*ref.batch_index]}] = index;
    }
  }
}

void Batch::Fail(size_t index, absl::Status status) {
  results_[index].status = status;
  failures_[index] = std::move(status);
}

void Batch::CollectKernelOutput(SessionId session, OperationResult& result) {
  if (result.printed == nullptr) return;
  result.kernel_output = result.printed->Take();
  if (!result.kernel_output.empty()) {
    spdlog::debug("session {}: its kernels printed:\n{}", session, result.kernel_output);
  }
}

absl::Status Batch::Run(DeviceWorker& worker, const SessionInfo& info, size_t begin,
                        size_t end, absl::AnyInvocable<absl::Status()> abandoned,
                        absl::AnyInvocable<void()> done, absl::AnyInvocable<void()> queued,
                        DeviceWorker::Answering answering) {
  const SessionId session = info.id;
  // Commands that only enqueue device work, besides staging a few inline bytes: the
  // submitting thread may run them when the device is idle.
  bool here_when_idle = true;
  uint64_t staged_bytes = 0;
  for (size_t i = begin; i < end && here_when_idle; ++i) {
    if (answered(i)) continue;
    const Operation& operation = *commands_[i].operation;
    const std::optional<uint64_t> inline_bytes = InlineWriteBytes(operation);
    staged_bytes += inline_bytes.value_or(0);
    here_when_idle = (inline_bytes.has_value() || OnlyEnqueues(operation)) &&
                     staged_bytes <= kStagedOnTheSubmittingThreadBytes;
  }
  const DeviceWorker::Placement placement = here_when_idle
                                                ? DeviceWorker::Placement::kHereWhenIdle
                                                : DeviceWorker::Placement::kDeviceThread;
  return worker.Submit(session, [self = shared_from_this(), worker = &worker, session,
                                 client = info.client_name, closed = info.closed, begin, end,
                                 abandoned = std::move(abandoned),
                                 done = std::move(done), queued = std::move(queued),
                                 answering](CommandInterface& command) mutable {
    absl::Status gone = abandoned();
    // The session's reclaim, queued when it was closed, may have run already: nothing
    // may make it hold device memory again.
    if (gone.ok() && closed != nullptr && closed->load(std::memory_order_acquire)) {
      gone = absl::NotFoundError("the session was closed before this command ran");
    }
    bool waits = false;
    RoomWait room;  // a wait set: the run stops at `ran_to`, before a command that must wait
    size_t ran_to = end;
    uint64_t launches = 0;
    for (size_t i = begin; i < end; ++i) {
      if (self->answered(i)) {
        self->Pass(i);
        continue;
      }
      if (!gone.ok()) {
        self->Fail(i, gone);
        continue;
      }
      room = self->RoomToWaitFor(command, session, i);
      if (room.wait == nullptr) {
        // What the run queued so far starts before this command's own host-side work
        // (Note [Deferred wake-ups] in base/deferred_wakeups.h).
        if (!OnlyEnqueues(*self->commands_[i].operation)) WakeDeferredNow();
        self->Execute(command, session, i);
        room = self->MemoryToWaitFor(command, i);
      }
      if (room.wait != nullptr) {
        ran_to = i;
        self->stopped_at_ = i;
        break;
      }
      const OperationResult& result = self->results_[i];
      if (result.status.ok()) self->Count(*worker, client, i, &launches);
      waits |= result.read.has_value() || result.synchronization != nullptr;
    }
    if (launches > 0) worker->metrics().RecordLaunches(worker->ordinal(), client, launches);
    if (!waits && room.wait == nullptr) {
      for (size_t i = begin; i < ran_to; ++i) CollectKernelOutput(session, self->results_[i]);
      worker->Defer(std::move(done));
      return;
    }
    if (room.wait == nullptr && queued != nullptr) queued();
    // Its reads and synchronizations wait for their streams' work so far, which the
    // notice covers; a wait for room is for other work, which its own notice covers. The
    // run that goes on after room was made starts from a completion thread.
    WorkEndNotice ended = command.NoticeOfWorkEnd(session, self->StreamsWaitedFor(begin, ran_to));
    DeviceWorker::Answering answered_where = self->AnsweringOf(begin, ran_to, answering);
    if (room.wait != nullptr) {
      ended = BothEnded(std::move(ended), std::move(room.notice));
      answered_where = DeviceWorker::Answering::kOnCompletionThread;
    }
    worker->Complete(
        session,
        [self, session, begin, ran_to, room = std::move(room.wait)]() mutable {
          for (size_t i = begin; i < ran_to; ++i) {
            OperationResult& result = self->results_[i];
            if (result.read.has_value()) result.status = result.read->wait();
            if (result.synchronization != nullptr) result.status = result.synchronization();
            CollectKernelOutput(session, result);
          }
          return WaitFor(std::move(room));
        },
        [done = std::move(done)](absl::Status) mutable { done(); }, std::move(ended),
        answered_where);
  }, placement);
}

DeviceWorker::Answering Batch::AnsweringOf(size_t begin, size_t end,
                                           DeviceWorker::Answering answering) const {
  if (answering == DeviceWorker::Answering::kOnCompletionThread) return answering;
  for (size_t i = begin; i < end; ++i) {
    const OperationResult& result = results_[i];
    if (!result.read.has_value()) continue;
    const auto* read = std::get_if<ReadOp>(&*commands_[i].operation);
    const bool into_shared_memory = read != nullptr && read->into.has_value();
    if (!into_shared_memory && result.read->bytes.size() > kBriefAnswerBytes) {
      return DeviceWorker::Answering::kOnCompletionThread;
    }
  }
  return answering;
}

std::optional<std::vector<LogicalStream>> Batch::StreamsWaitedFor(size_t begin,
                                                                  size_t end) const {
  std::vector<LogicalStream> streams;
  for (size_t i = begin; i < end; ++i) {
    const OperationResult& result = results_[i];
    if (!result.read.has_value() && result.synchronization == nullptr) continue;
    const std::optional<LogicalStream> stream = std::visit(
        Overloaded{
            [](const SynchronizeOp& synchronize) { return synchronize.stream; },
            [](const auto& operation) -> std::optional<LogicalStream> {
              if constexpr (requires { operation.stream; }) {
                return operation.stream;
              } else {
                return std::nullopt;  // waits for nothing of its own: all of them
              }
            },
        },
        *commands_[i].operation);
    if (!stream.has_value()) return std::nullopt;
    streams.push_back(*stream);
  }
  return streams;
}

RoomWait Batch::RoomToWaitFor(CommandInterface& command, SessionId session, size_t index) {
  const Operation& operation = *commands_[index].operation;
  if (const auto* write = std::get_if<WriteOp>(&operation)) {
    return command.StagingRoom(session, write->stream);
  }
  const bool queues_on_a_stream =
      std::holds_alternative<LaunchOp>(operation) || std::holds_alternative<CopyOp>(operation) ||
      std::holds_alternative<FillOp>(operation) || std::holds_alternative<ReadOp>(operation);
  if (past_the_limit_ == PastTheStreamLimit::kWait && queues_on_a_stream) {
    return command.StreamRoom(session);
  }
  return RoomWait();
}

RoomWait Batch::MemoryToWaitFor(CommandInterface& command, size_t index) {
  const auto* allocate = std::get_if<AllocateOp>(&*commands_[index].operation);
  if (allocate == nullptr || !absl::IsResourceExhausted(results_[index].status) ||
      waited_for_memory_[index]) {
    return RoomWait();
  }
  RoomWait freed = command.MemoryBeingFreed(allocate->size_bytes);
  if (freed.wait == nullptr) return freed;
  waited_for_memory_[index] = true;
  results_[index] = OperationResult();  // not answered: it runs again
  failures_[index] = absl::OkStatus();
  return freed;
}

Batch::BufferUses Batch::UsesOf(Operation& operation) {
  return std::visit(
      Overloaded{
          [](AllocateOp&) { return BufferUses(); },
          [](FreeOp& free) {
            return BufferUses{{&free.buffer, false, false}};
          },
          [](WriteOp& write) {
            return BufferUses{{&write.buffer, false, true}};
          },
          [](ReadOp& read) {
            return BufferUses{{&read.buffer, true, false}};
          },
          [](CopyOp& copy) {
            return BufferUses{{&copy.source, true, false}, {&copy.target, false, true}};
          },
          [](FillOp& fill) {
            return BufferUses{{&fill.target, false, true}};
          },
          [](LaunchOp& launch) {
            BufferUses uses;
            for (size_t i = 0; i < launch.launch.args.size(); ++i) {
              const LaunchArgument& arg = launch.launch.args[i];
              if (arg.kind == ParamKind::kScalar) continue;
              uses.push_back({&launch.buffers[i], arg.access != BufferAccess::kWrite,
                              arg.access != BufferAccess::kRead});
            }
            return uses;
          },
          [](SynchronizeOp&) { return BufferUses(); },
      },
      operation);
}

OperationResult Batch::Apply(CommandInterface& command, SessionId session,
                             Operation& operation) {
  OperationResult result;
  std::visit(
      Overloaded{
          [&](AllocateOp& allocate) {
            absl::StatusOr<BufferId> id = command.Allocate(session, allocate.size_bytes);
            result.status = id.status();
            if (id.ok()) result.allocated = *id;
          },
          [&](FreeOp& free) { result.status = command.Free(session, free.buffer.id); },
          [&](WriteOp& write) {
            if (!write.over_budget.ok()) {
              result.status = RangeOrRefusal(command, session, write.buffer.id, write.layout,
                                             write.over_budget);
              return;
            }
            const uint64_t size = write.layout.host_bytes();
            result.status =
                write.shared.has_value()
                    ? command.WriteShared(session, write.stream, write.buffer.id, write.layout,
                                          *std::move(write.shared))
                    : command.Write(session, write.stream, write.buffer.id, write.layout,
                                    std::move(write.data));
            if (!result.status.ok()) return;
            result.bytes_written = size;
            // An empty write queued nothing: the stream's last work is another command's.
            if (write.answer_when_copied && size > 0) {
              result.synchronization = command.LastWorkEnd(session, write.stream);
            }
          },
          [&](ReadOp& read) {
            if (!read.over_budget.ok()) {
              result.status = RangeOrRefusal(command, session, read.buffer.id, read.layout,
                                             read.over_budget);
              return;
            }
            absl::StatusOr<PendingRead> pending =
                read.into.has_value()
                    ? command.ReadShared(session, read.stream, read.buffer.id, read.layout,
                                         *std::move(read.into))
                    : command.Read(session, read.stream, read.buffer.id, read.layout);
            result.status = pending.status();
            if (pending.ok()) result.read = *std::move(pending);
          },
          [&](CopyOp& copy) {
            result.status =
                command.Copy(session, copy.stream, copy.source.id, copy.target.id, copy.layout);
          },
          [&](FillOp& fill) {
            result.status =
                command.Fill(session, fill.stream, fill.target.id, fill.layout, fill.pattern);
          },
          [&](LaunchOp& launch) {
            if (!launch.refused.ok()) {
              result.status = launch.refused;
              return;
            }
            for (size_t i = 0; i < launch.launch.args.size(); ++i) {
              if (launch.launch.args[i].kind != ParamKind::kScalar) {
                launch.launch.args[i].buffer = launch.buffers[i].id;
              }
            }
            result.status = command.Launch(session, launch.stream, launch.launch);
          },
          [&](SynchronizeOp& synchronize) {
            // Null: the session's work had ended already; answered without a wait.
            result.synchronization = command.Synchronize(session, synchronize.stream);
            result.printed = command.KernelOutputOf(session);
          },
      },
      operation);
  return result;
}

void Batch::Count(DeviceWorker& worker, const std::string& client, size_t index,
                  uint64_t* launches) const {
  Metrics& metrics = worker.metrics();
  const int device = worker.ordinal();
  std::visit(Overloaded{
                 [&](const WriteOp&) {
                   metrics.RecordCopy(device, client, Metrics::Direction::kHostToDevice,
                                      results_[index].bytes_written);
                 },
                 [&](const ReadOp& read) {
                   metrics.RecordCopy(device, client, Metrics::Direction::kDeviceToHost,
                                      read.layout.host_bytes());
                 },
                 [&](const CopyOp& copy) {
                   metrics.RecordCopy(device, client, Metrics::Direction::kDeviceToDevice,
                                      copy.layout.size_bytes());
                 },
                 [&](const LaunchOp&) { ++*launches; },
                 [](const auto&) {},
             },
             *commands_[index].operation);
}

void Batch::Execute(CommandInterface& command, SessionId session, size_t index) {
  Operation& operation = *commands_[index].operation;
  BufferUses uses = UsesOf(operation);
  absl::Status blocked;
  for (BufferUse& use : uses) {
    if (use.ref->batch_index.has_value()) {
      size_t allocate = *use.ref->batch_index;
      if (!allocated_[allocate].has_value()) {
        blocked = DependencyError(allocate);
        break;
      }
      use.ref->id = *allocated_[allocate];
    }
    if (auto writer = failed_writer_.find({session, use.ref->id});
        use.reads && writer != failed_writer_.end()) {
      blocked = DependencyError(writer->second);
      break;
    }
  }
  if (blocked.ok()) results_[index] = Apply(command, session, operation);
  else results_[index].status = blocked;
  if (results_[index].status.ok()) {
    if (std::holds_alternative<AllocateOp>(operation)) {
      allocated_[index] = results_[index].allocated;
    }
    return;
  }
  failures_[index] = results_[index].status;
  for (const BufferUse& use : uses) {
    bool resolved = !use.ref->batch_index.has_value() || allocated_[*use.ref->batch_index];
    if (use.writes && resolved) failed_writer_[{session, use.ref->id}] = index;
  }
}

absl::Status Batch::DependencyError(size_t failed) const {
  const BatchCommand& cause = commands_[failed];
  return absl::FailedPreconditionError(
      absl::StrCat("depends on command ", cause.sequence, " (", cause.kind,
                   ") of this batch, which failed: ", failures_[failed].message()));
}

}  // namespace gpucmd
