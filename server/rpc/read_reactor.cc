#include "server/rpc/read_reactor.h"

#include <algorithm>
#include <variant>

#include "base/status_macros.h"
#include "server/rpc/grpc_status.h"
#include "server/rpc/request_conversion.h"
#include "server/rpc/request_validation.h"

namespace gpucmd {

ReadReactor::ReadReactor(const RpcEnvironment* environment,
                         grpc::CallbackServerContext* context, const v1::ReadRequest& request)
    : chunk_bytes_(environment->read_chunk_bytes), environment_(environment) {
  *response_.mutable_data() = environment_->core->payloads().Take();
  if (absl::Status started = Start(context, request); !started.ok()) {
    Finish(ToGrpcStatus(started));
  }
}

absl::Status ReadReactor::Start(grpc::CallbackServerContext* context,
                                const v1::ReadRequest& request) {
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
                  read_ = std::move(result.read);
                  if (into_shared_memory) {
                    // The bytes are in the region: one message saying how many, and the
                    // status with it.
                    response_.Clear();
                    response_.set_total_bytes(read_->bytes.size());
                    StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
                    return;
                  }
                  WriteNextChunk();
                });
  return absl::OkStatus();
}

void ReadReactor::OnDone() {
  environment_->core->payloads().Give(std::move(*response_.mutable_data()));
  delete this;
}

void ReadReactor::OnWriteDone(bool ok) {
  if (!ok) {
    Finish(ToGrpcStatus(absl::CancelledError("the client stopped reading")));
    return;
  }
  WriteNextChunk();
}

void ReadReactor::WriteNextChunk() {
  const Bytes& bytes = read_->bytes;
  uint64_t size = std::min<uint64_t>(chunk_bytes_, bytes.size() - sent_);
  response_.Clear();
  if (sent_ == 0) response_.set_total_bytes(bytes.size());
  response_.set_data(reinterpret_cast<const char*>(bytes.data()) + sent_, size);
  sent_ += size;
  // The last chunk carries the status along; the read's bytes are let go before the
  // client can hear the call end.
  if (sent_ == bytes.size()) {
    read_.reset();
    reservation_.reset();
    StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
  } else {
    StartWrite(&response_);
  }
}

}  // namespace gpucmd
