#include "client/submit_stream.h"

#include <atomic>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "client/request_builders.h"
#include "grpcpp/grpcpp.h"

namespace gpucmd {

namespace {

// What the daemon takes in one batch (SubmitRequest.commands in gpucmd.proto).
constexpr size_t kMaxCommandsPerBatch = 16384;

}  // namespace

SubmitBatch::SubmitBatch(const Session& session) : token_(session.token()) {}

v1::Command& SubmitBatch::Add() {
  v1::Command& command = *request_.add_commands();
  command.set_sequence(request_.commands_size() - 1);
  return command;
}

size_t SubmitBatch::Write(const Buffer& buffer, uint64_t offset, absl::string_view data,
                          uint64_t stream, const std::optional<Pitched>& pitched) {
  v1::WriteRequest& write = *Add().mutable_write();
  *write.mutable_header() = InlineWrite(token_, buffer, offset, data.size(), pitched, stream);
  write.set_data(data.data(), data.size());
  return size() - 1;
}

size_t SubmitBatch::Write(const Buffer& buffer, uint64_t offset, const RegionSlice& source,
                          uint64_t stream, const std::optional<Pitched>& pitched) {
  *Add().mutable_write()->mutable_header() =
      SharedWrite(token_, buffer, offset, source, stream, pitched);
  return size() - 1;
}

size_t SubmitBatch::Read(const Buffer& buffer, uint64_t offset, uint64_t size, uint64_t stream) {
  *Add().mutable_read() = ContiguousRead(token_, buffer, offset, size, stream);
  return this->size() - 1;
}

size_t SubmitBatch::ReadPitched(const Buffer& buffer, uint64_t offset, const Pitched& rows,
                                uint64_t stream) {
  *Add().mutable_read() = PitchedRead(token_, buffer, offset, rows, stream);
  return size() - 1;
}

size_t SubmitBatch::Read(const Buffer& buffer, uint64_t offset, const RegionSlice& target,
                         uint64_t stream, const std::optional<Pitched>& pitched) {
  *Add().mutable_read() = SharedRead(token_, buffer, offset, target, stream, pitched);
  return size() - 1;
}

size_t SubmitBatch::Copy(const Buffer& source, uint64_t source_offset, const Buffer& target,
                         uint64_t target_offset, uint64_t size_bytes, uint64_t stream) {
  *Add().mutable_copy() =
      CopyBetween(token_, source, source_offset, target, target_offset, size_bytes, stream);
  return size() - 1;
}

size_t SubmitBatch::Copy(const Buffer& source, uint64_t source_offset, const Buffer& target,
                         uint64_t target_offset, const CopyRows& rows, uint64_t stream) {
  *Add().mutable_copy() =
      PitchedCopyBetween(token_, source, source_offset, target, target_offset, rows, stream);
  return size() - 1;
}

size_t SubmitBatch::Fill(const Buffer& buffer, uint64_t offset, uint64_t size_bytes, uint32_t value,
                         uint32_t element_bytes, uint64_t stream) {
  *Add().mutable_fill() = FillOf(token_, buffer, offset, size_bytes, value, element_bytes, stream);
  return size() - 1;
}

size_t SubmitBatch::Fill(const Buffer& buffer, uint64_t offset, const Pitched& rows, uint32_t value,
                         uint32_t element_bytes, uint64_t stream) {
  *Add().mutable_fill() = PitchedFillOf(token_, buffer, offset, rows, value, element_bytes, stream);
  return size() - 1;
}

size_t SubmitBatch::Launch(const std::string& kernel_id, const LaunchShape& shape,
                           const std::vector<v1::KernelArg>& args, uint64_t stream) {
  *Add().mutable_launch() = LaunchOf(token_, kernel_id, shape, args, stream);
  return size() - 1;
}

size_t SubmitBatch::Synchronize(std::optional<uint64_t> stream) {
  *Add().mutable_synchronize() = SynchronizeOf(token_, stream);
  return size() - 1;
}

absl::Status BatchReplies::status(size_t index) const {
  const v1::CommandStatus& status = reply(index).status();
  return absl::Status(static_cast<absl::StatusCode>(status.code()), status.message());
}

absl::Status BatchReplies::FirstError() const {
  for (size_t i = 0; i < replies_.size(); ++i) {
    if (absl::Status failed = status(i); !failed.ok()) {
      return absl::Status(failed.code(),
                          absl::StrCat("command ", i, " of the batch: ", failed.message()));
    }
  }
  return absl::OkStatus();
}

struct SubmitStream::Call {
  std::shared_ptr<const ClientConnection> connection;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<v1::SubmitRequest, v1::SubmitResponse>> stream;
  std::atomic<size_t> owed{0};  // batches sent (or being sent) and not yet received
  std::atomic<bool> closed{false};
  // Held while a batch is written, and while Receive ends the call: gRPC takes a Write
  // beside a Read on another thread, not beside Finish.
  std::mutex sending;
};

SubmitStream::SubmitStream(std::unique_ptr<Call> call) : call_(std::move(call)) {}
SubmitStream::SubmitStream(SubmitStream&&) noexcept = default;
SubmitStream::~SubmitStream() {
  if (call_ == nullptr || call_->closed) return;
  // Answers nobody will receive are not waited for.
  if (call_->owed > 0) call_->context.TryCancel();
  Close().IgnoreError();
}

absl::StatusOr<SubmitStream> SubmitStream::Open(const Session& session) {
  auto call = std::make_unique<Call>();
  call->connection = session.handle_->connection;
  call->stream = call->connection->stub->Submit(&call->context);
  if (call->stream == nullptr) return absl::UnavailableError("the Submit call did not start");
  return SubmitStream(std::move(call));
}

absl::Status SubmitStream::CheckOpen() const {
  if (call_ == nullptr || call_->closed) {
    return absl::FailedPreconditionError("the Submit stream is closed");
  }
  return absl::OkStatus();
}

absl::Status SubmitStream::Send(const SubmitBatch& batch) {
  RETURN_IF_ERROR(CheckOpen());
  if (batch.size() > kMaxCommandsPerBatch) {
    return absl::InvalidArgumentError(absl::StrCat("a batch holds at most ", kMaxCommandsPerBatch,
                                                   " commands, not ", batch.size(), ": split it"));
  }
  const size_t bytes = batch.request().ByteSizeLong();
  const auto limit = static_cast<size_t>(call_->connection->options.max_message_bytes);
  if (bytes > limit) {
    return absl::InvalidArgumentError(
        absl::StrCat("a batch of ", bytes, " bytes is over the message limit of ", limit,
                     ": split it, or send large payloads with Session::Write or a region slice"));
  }
  std::lock_guard<std::mutex> sending(call_->sending);
  RETURN_IF_ERROR(CheckOpen());  // again: Receive may have ended the call meanwhile
  ++call_->owed;  // before it can be answered: a receiving thread may wait for it at once
  if (!call_->stream->Write(batch.request())) {
    --call_->owed;
    return absl::UnavailableError("the Submit call ended; Receive reports why");
  }
  return absl::OkStatus();
}

absl::StatusOr<BatchReplies> SubmitStream::Receive() {
  RETURN_IF_ERROR(CheckOpen());
  if (call_->owed == 0) return absl::FailedPreconditionError("no batch is waiting for answers");
  std::vector<v1::CommandReply> replies;
  v1::SubmitResponse response;
  while (call_->stream->Read(&response)) {
    for (v1::CommandReply& reply : *response.mutable_replies()) {
      replies.push_back(std::move(reply));
    }
    if (response.batch_done()) {
      --call_->owed;
      return BatchReplies(std::move(replies));
    }
  }
  std::lock_guard<std::mutex> sending(call_->sending);
  call_->closed = true;
  call_->owed = 0;
  absl::Status ended = FromGrpcStatus(call_->stream->Finish());
  if (ended.ok()) return absl::InternalError("the Submit call ended before its answers");
  return ended;
}

absl::StatusOr<BatchReplies> SubmitStream::Run(const SubmitBatch& batch) {
  if (absl::Status sent = Send(batch); !sent.ok()) return sent;
  return Receive();
}

absl::Status SubmitStream::Close() {
  RETURN_IF_ERROR(CheckOpen());
  call_->stream->WritesDone();
  v1::SubmitResponse dropped;
  while (call_->stream->Read(&dropped)) {
  }
  call_->closed = true;
  return FromGrpcStatus(call_->stream->Finish());
}

}  // namespace gpucmd
