#ifndef GPUCMDD_CLIENT_SUBMIT_STREAM_H_
#define GPUCMDD_CLIENT_SUBMIT_STREAM_H_

// Batches of commands in one round trip each, several in flight: the C++ client's side of
// the Submit stream (gpucmd.proto), the throughput path for many small commands.
//
//   gpucmd::SubmitBatch batch(session);
//   batch.Write(x, 0, bytes);
//   batch.Launch(kernel_id, shape, {gpucmd::BufferArgument(x, gpucmd::v1::ACCESS_READ_WRITE)});
//   const size_t read = batch.Read(x, 0, bytes.size());
//   ASSIGN_OR_RETURN(gpucmd::SubmitStream stream, gpucmd::SubmitStream::Open(session));
//   RETURN_IF_ERROR(stream.Send(batch));  // more batches may follow before the answers
//   ASSIGN_OR_RETURN(gpucmd::BatchReplies replies, stream.Receive());
//   RETURN_IF_ERROR(replies.FirstError());
//   const std::string& result = replies.read_bytes(read);
//
// The daemon runs a batch's commands in order, as the unary calls would run, and answers
// each; a failed command does not stop the ones after it (those that depend on what it
// was to write fail with it). Batches on one stream run in the order sent.
//
// Thread-safety: a SubmitBatch belongs to one thread. A SubmitStream may have one thread
// sending and another receiving at once; it is closed (or destroyed) while neither does.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/client.h"
#include "gpucmd/v1/gpucmd.grpc.pb.h"

namespace gpucmd {

// Commands collected for one Submit batch. Each returns the command's place in the batch,
// where BatchReplies holds its answer. A batch is one message: its inline bytes must fit
// the message limit (ClientOptions::max_message_bytes), and a read in it returns at most
// the daemon's read chunk; more goes through Session::Write and Read or a region slice.
class SubmitBatch {
 public:
  // Commands of `session` (its token is copied: the batch may outlive the Session object
  // but not the session itself).
  explicit SubmitBatch(const Session& session);

  // Host -> device: `data` at `offset` of `buffer`, or packed rows landing as `pitched`
  // lays them out from there (the padding between rows left as it is).
  size_t Write(const Buffer& buffer, uint64_t offset, absl::string_view data, uint64_t stream = 0,
               const std::optional<Pitched>& pitched = std::nullopt);
  // Host -> device from shared memory: the slice's bytes land at `offset` (or, packed
  // rows, as `pitched` lays them out from there).
  size_t Write(const Buffer& buffer, uint64_t offset, const RegionSlice& source,
               uint64_t stream = 0, const std::optional<Pitched>& pitched = std::nullopt);
  // Device -> host: `size` bytes from `offset`, in the answer (BatchReplies::read_bytes).
  size_t Read(const Buffer& buffer, uint64_t offset, uint64_t size, uint64_t stream = 0);
  // Device -> host: `rows` from `offset`, packed in the answer.
  size_t ReadPitched(const Buffer& buffer, uint64_t offset, const Pitched& rows,
                     uint64_t stream = 0);
  // Device -> shared memory: the slice's size from `offset` lands in the slice (or
  // `pitched` rows from there, packed).
  size_t Read(const Buffer& buffer, uint64_t offset, const RegionSlice& target, uint64_t stream = 0,
              const std::optional<Pitched>& pitched = std::nullopt);
  size_t Copy(const Buffer& source, uint64_t source_offset, const Buffer& target,
              uint64_t target_offset, uint64_t size_bytes, uint64_t stream = 0);
  // As Session::Copy of rows.
  size_t Copy(const Buffer& source, uint64_t source_offset, const Buffer& target,
              uint64_t target_offset, const CopyRows& rows, uint64_t stream = 0);
  // As Session::Fill.
  size_t Fill(const Buffer& buffer, uint64_t offset, uint64_t size_bytes, uint32_t value,
              uint32_t element_bytes = 1, uint64_t stream = 0);
  size_t Fill(const Buffer& buffer, uint64_t offset, const Pitched& rows, uint32_t value,
              uint32_t element_bytes = 1, uint64_t stream = 0);
  size_t Launch(const std::string& kernel_id, const LaunchShape& shape,
                const std::vector<v1::KernelArg>& args, uint64_t stream = 0);
  // Waits, inside the batch, for the session's work on `stream` (every stream when
  // absent) before the commands after it run.
  size_t Synchronize(std::optional<uint64_t> stream = std::nullopt);

  size_t size() const { return static_cast<size_t>(request_.commands_size()); }
  const v1::SubmitRequest& request() const { return request_; }

 private:
  // A new command, numbered by its place.
  v1::Command& Add();

  std::string token_;
  v1::SubmitRequest request_;
};

// A batch's answers, one per command, in the batch's order.
class BatchReplies {
 public:
  explicit BatchReplies(std::vector<v1::CommandReply> replies) : replies_(std::move(replies)) {}

  size_t size() const { return replies_.size(); }
  const v1::CommandReply& reply(size_t index) const { return replies_.at(index); }
  // The outcome of command `index`.
  absl::Status status(size_t index) const;
  // What the Read at `index` returned: empty for another command or a failed read.
  const std::string& read_bytes(size_t index) const { return reply(index).read().data(); }
  // OK when every command succeeded, else the first failure, naming its command.
  absl::Status FirstError() const;

 private:
  std::vector<v1::CommandReply> replies_;
};

// A Submit call: batches sent in order, as many in flight as the caller sends before it
// receives, and their answers received in the same order. The call has no deadline: it
// lives until Close, which waits for the answers still owed, or destruction, which
// cancels the call when answers are owed (their batches may have run, or not).
class SubmitStream {
 public:
  static absl::StatusOr<SubmitStream> Open(const Session& session);
  SubmitStream(SubmitStream&&) noexcept;
  SubmitStream& operator=(SubmitStream&&) = delete;
  ~SubmitStream();

  // Sends `batch`. A batch of more commands than the daemon takes (16384) or larger than
  // the message limit is INVALID_ARGUMENT here, and the stream serves on; a batch of none
  // is sent and answered with no replies.
  absl::Status Send(const SubmitBatch& batch);
  // The answers to the oldest batch sent and not yet received. Once the call ended, its
  // status: the daemon ends it for a batch it cannot take (over its memory for batches:
  // RESOURCE_EXHAUSTED), after answering the batches before it.
  absl::StatusOr<BatchReplies> Receive();
  // Sends and receives one batch: one round trip.
  absl::StatusOr<BatchReplies> Run(const SubmitBatch& batch);
  // Ends the call once the answers still owed are received (and dropped); reports its
  // status. Later calls are FAILED_PRECONDITION.
  absl::Status Close();

 private:
  struct Call;
  explicit SubmitStream(std::unique_ptr<Call> call);
  // FAILED_PRECONDITION once moved from or closed.
  absl::Status CheckOpen() const;

  std::unique_ptr<Call> call_;  // null once moved from
};

}  // namespace gpucmd

#endif  // GPUCMDD_CLIENT_SUBMIT_STREAM_H_
