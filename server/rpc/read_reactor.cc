#include "server/rpc/read_reactor.h"

#include <algorithm>

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
  RunBatchOfOne(*environment_, context, session, "read", std::move(read),
                [this, into_shared_memory](OperationResult& result) {
                  if (!result.status.ok()) {
                    Finish(ToGrpcStatus(result.status));
                    return;
                  }
                  read_ = std::move(result.read);
                  if (into_shared_memory) {
                    // The bytes are in the region: one message saying how many.
                    sent_ = read_->bytes.size();
                    sent_any_ = true;
                    response_.Clear();
                    response_.set_total_bytes(sent_);
                    StartWrite(&response_);
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
  if (sent_ == bytes.size() && sent_any_) {
    Finish(grpc::Status::OK);
    return;
  }
  uint64_t size = std::min<uint64_t>(chunk_bytes_, bytes.size() - sent_);
  response_.Clear();
  if (!sent_any_) response_.set_total_bytes(bytes.size());
  response_.set_data(reinterpret_cast<const char*>(bytes.data()) + sent_, size);
  sent_ += size;
  sent_any_ = true;
  StartWrite(&response_);
}

}  // namespace gpucmd
