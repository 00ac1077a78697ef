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
  if (absl::Status started = Start(context, request); !started.ok()) {
    Finish(ToGrpcStatus(started));
  }
}

absl::Status ReadReactor::Start(grpc::CallbackServerContext* context,
                                const v1::ReadRequest& request) {
  RETURN_IF_ERROR(ValidateRead(request));
  ASSIGN_OR_RETURN(SessionInfo session, environment_->Touch(request.session()));
  ASSIGN_OR_RETURN(Operation read, ToOperation(request, BatchAllocations()));
  RunBatchOfOne(*environment_, context, session, "read", std::move(read),
                [this](OperationResult& result) {
                  if (!result.status.ok()) {
                    Finish(ToGrpcStatus(result.status));
                    return;
                  }
                  read_ = std::move(result.read);
                  WriteNextChunk();
                });
  return absl::OkStatus();
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
