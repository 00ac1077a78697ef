#include "server/rpc/read_reactor.h"

#include <algorithm>
#include <variant>

#include "base/status_macros.h"
#include "gpucmd/v1/gpucmd.pb.h"
#include "server/rpc/grpc_status.h"
#include "server/rpc/raw_messages.h"
#include "server/rpc/read_chunks.h"
#include "server/rpc/request_conversion.h"
#include "server/rpc/request_validation.h"

namespace gpucmd {

ReadReactor::ReadReactor(const RpcEnvironment* environment,
                         grpc::CallbackServerContext* context, const grpc::ByteBuffer& request)
    : chunk_bytes_(environment->read_chunk_bytes), environment_(environment) {
  if (absl::Status started = Start(context, request); !started.ok()) {
    Finish(ToGrpcStatus(started));
  }
}

absl::Status ReadReactor::Start(grpc::CallbackServerContext* context,
                                grpc::ByteBuffer received) {
  v1::ReadRequest request;
  RETURN_IF_ERROR(ParseRequest(&received, &request));
  RETURN_IF_ERROR(ValidateRead(request));
  ASSIGN_OR_RETURN(SessionInfo session, environment_->Touch(request.session()));
  ASSIGN_OR_RETURN(Operation read,
                   ToOperation(request, BatchAllocations(),
                               SessionRegions{&environment_->core->shared_memory(), session.id}));
  const bool into_shared_memory = request.has_shared_memory();
  if (!into_shared_memory) {
    ReadOp& inline_read = std::get<ReadOp>(read);
    absl::StatusOr<InlineBudget::Reservation> reservation =
        environment_->core->inline_budget().Reserve(session.id, inline_read.layout.host_bytes());
    if (reservation.ok()) {
      reservation_.emplace(*std::move(reservation));
    } else {
      inline_read.over_budget = reservation.status();
    }
  }
  RunBatchOfOne(*environment_, [context] { return CallAbandoned(context); }, session, "read",
                std::move(read),
                [this, into_shared_memory](OperationResult& result) {
                  if (!result.status.ok()) {
                    Finish(ToGrpcStatus(result.status));
                    return;
                  }
                  if (into_shared_memory) {
                    // The bytes are in the region: one message saying how many, and the
                    // status with it.
                    v1::ReadResponse response;
                    response.set_total_bytes(result.read->bytes.size());
                    message_ = SerializeResponse(response);
                    StartWriteAndFinish(&message_, grpc::WriteOptions(), grpc::Status::OK);
                    return;
                  }
                  bytes_ = ShareReadBytes(std::move(result.read->bytes),
                                          environment_->core->shared_payloads());
                  WriteNextChunk();
                },
                DeviceWorker::Answering::kWhereWorkEndedOrAfterTheTask);
  return absl::OkStatus();
}

void ReadReactor::OnDone() { delete this; }

void ReadReactor::OnWriteDone(bool ok) {
  if (!ok) {
    Finish(ToGrpcStatus(absl::CancelledError("the client stopped reading")));
    return;
  }
  WriteNextChunk();
}

void ReadReactor::WriteNextChunk() {
  const uint64_t total = bytes_->size();
  const uint64_t size = std::min<uint64_t>(chunk_bytes_, total - sent_);
  message_ = ReadChunkMessage(bytes_, sent_, size,
                              sent_ == 0 ? std::optional<uint64_t>(total) : std::nullopt);
  sent_ += size;
  // The last chunk carries the status along; the read's bytes are let go (but for what
  // gRPC still sends) and its budget given back before the client can hear the call end.
  if (sent_ == total) {
    bytes_.reset();
    reservation_.reset();
    StartWriteAndFinish(&message_, grpc::WriteOptions(), grpc::Status::OK);
  } else {
    StartWrite(&message_);
  }
}

}  // namespace gpucmd
