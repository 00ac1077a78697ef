#include "server/rpc/write_reactor.h"

#include "absl/strings/str_cat.h"
#include "base/coded_bytes.h"
#include "base/status_macros.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "server/rpc/grpc_status.h"
#include "server/rpc/raw_messages.h"
#include "server/rpc/request_conversion.h"
#include "server/rpc/request_validation.h"

namespace gpucmd {

WriteReactor::WriteReactor(const RpcEnvironment* environment,
                           grpc::CallbackServerContext* context, grpc::ByteBuffer* response)
    : environment_(environment), context_(context), response_(response) {
  // Messages parse into pooled memory (Note [Payload pool]).
  *request_.mutable_data() = environment_->core->payloads().Take();
  StartRead(&incoming_);
}

void WriteReactor::OnDone() {
  PayloadPool& payloads = environment_->core->payloads();
  payloads.Give(std::move(*request_.mutable_data()));
  payloads.Give(std::move(data_));
  delete this;
}

void WriteReactor::End(const absl::Status& status) {
  // The budget is given back before the client hears the outcome: a write it sends
  // next may count on it.
  reservation_.reset();
  Finish(ToGrpcStatus(status));
}

void WriteReactor::OnReadDone(bool ok) {
  if (!ok) {
    Run();
    return;
  }
  // The first bytes are taken as parsed, into pooled memory (below); later ones appended
  // to the payload, which has room for the whole from then on.
  if (header_ && data_.capacity() >= header_->inline_size_bytes() && AppendDataOnlyMessage()) {
    StartRead(&incoming_);
    return;
  }
  if (absl::Status parsed = ParseRequest(&incoming_, &request_); !parsed.ok()) {
    End(parsed);
    return;
  }
  if (!header_) {
    if (absl::Status accepted = AcceptHeader(); !accepted.ok()) {
      End(accepted);
      return;
    }
    if (!reservation_.has_value()) {
      // Refused by the inline budget: the payload is not taken.
      Execute(ToOverBudgetWrite(*header_, environment_->devices[session_.device],
                                std::move(over_budget_)));
      return;
    }
  } else if (request_.has_header()) {
    End(absl::InvalidArgumentError("only the first message has a header"));
    return;
  }
  if (data_.size() + request_.data().size() > header_->inline_size_bytes()) {
    End(absl::InvalidArgumentError(absl::StrCat(
        "write sends more than the ", header_->inline_size_bytes(), " bytes it declared")));
    return;
  }
  if (data_.capacity() < header_->inline_size_bytes()) {
    // The first bytes are taken as they were parsed, not copied: a payload that arrives
    // in one message is never re-assembled.
    data_.swap(*request_.mutable_data());
    if (data_.size() < header_->inline_size_bytes()) {
      environment_->core->payloads().Grow(data_, header_->inline_size_bytes());
      *request_.mutable_data() = environment_->core->payloads().Take();
    }
  } else {
    data_.append(request_.data());
  }
  StartRead(&incoming_);
}

bool WriteReactor::AppendDataOnlyMessage() {
  using google::protobuf::internal::WireFormatLite;
  constexpr uint32_t kDataTag = WireFormatLite::MakeTag(
      v1::WriteRequest::kDataFieldNumber, WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
  grpc::ProtoBufferReader reader(&incoming_);
  google::protobuf::io::CodedInputStream input(&reader);
  uint32_t size = 0;
  // A length past the message's own is a malformed message, for the whole parse to refuse.
  if (input.ReadTag() != kDataTag || !input.ReadVarint32(&size) || size > incoming_.Length() ||
      data_.size() + size > header_->inline_size_bytes()) {
    return false;
  }
  const size_t kept = data_.size();
  if (!AppendRawBytes(input, size, data_)) return false;
  if (input.ReadTag() != 0 || !input.ConsumedEntireMessage()) {
    data_.resize(kept);
    return false;
  }
  incoming_.Clear();
  return true;
}

absl::Status WriteReactor::AcceptHeader() {
  if (!request_.has_header()) {
    return absl::InvalidArgumentError("the first write message must carry the header");
  }
  header_ = request_.header();
  RETURN_IF_ERROR(ValidateWriteHeader(*header_));
  ASSIGN_OR_RETURN(session_, environment_->Touch(header_->session()));
  RETURN_IF_ERROR(CheckWriteHeader(*header_, environment_->devices[session_.device]));
  // Before any payload is kept (Note [Inline payload budget]).
  absl::StatusOr<InlineBudget::Reservation> reservation =
      environment_->core->inline_budget().Reserve(session_.id, header_->inline_size_bytes());
  if (reservation.ok()) {
    reservation_.emplace(*std::move(reservation));
  } else {
    over_budget_ = reservation.status();
  }
  return absl::OkStatus();
}

void WriteReactor::Run() {
  if (!header_) {
    End(absl::InvalidArgumentError("write stream carried no header"));
    return;
  }
  if (data_.size() != header_->inline_size_bytes()) {
    End(absl::InvalidArgumentError(
        absl::StrCat("write declared ", header_->inline_size_bytes(), " bytes but sent ",
                     data_.size(), " (client went away?)")));
    return;
  }
  Execute(ToOperation(*header_, std::move(data_), environment_->devices[session_.device],
                      BatchAllocations(),
                      SessionRegions{&environment_->core->shared_memory(), session_.id}));
}

void WriteReactor::Execute(absl::StatusOr<Operation> write) {
  if (!write.ok()) {
    End(write.status());
    return;
  }
  RunBatchOfOne(*environment_, [context = context_] { return CallAbandoned(context); },
                session_, "write", *std::move(write),
                [this](OperationResult& result) {
                  if (result.status.ok()) {
                    v1::WriteResponse response;
                    response.set_bytes_written(result.bytes_written);
                    *response_ = SerializeResponse(response);
                  }
                  End(result.status);
                });
}

}  // namespace gpucmd
