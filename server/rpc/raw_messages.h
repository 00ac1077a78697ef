#ifndef GPUCMDD_SERVER_RPC_RAW_MESSAGES_H_
#define GPUCMDD_SERVER_RPC_RAW_MESSAGES_H_

// Note [Requests that do not parse]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// gRPC answers a request body that does not parse with UNIMPLEMENTED and no message
// (unary calls), and ends a stream's reads as if the client had half-closed (streams),
// which a reactor cannot tell from a finished stream. The daemon answers
// INVALID_ARGUMENT "the request could not be parsed" instead: unary calls through
// UnparsedRequestInterceptor, which rewrites the status; the three streams that read
// many messages (KeepAlive, Write, Submit), and Read (whose answers are written raw:
// Note [Read chunks sent from the read's bytes] in server/rpc/read_chunks.h), are served
// raw, on grpc::ByteBuffer, and parse their requests themselves with ParseRequest.

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/support/byte_buffer.h"

namespace gpucmd {

// The status of a request that did not parse; `what` names what it should have been.
inline absl::Status UnparsedRequest(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("the request could not be parsed (", what, ")"));
}

// The status of a request that did not parse as a `Message`.
template <typename Message>
absl::Status UnparsedRequestOf() {
  return UnparsedRequest(absl::StrCat("not a ", Message::descriptor()->full_name()));
}

// Parses `buffer` (consumed) into `message`, as gRPC would have.
template <typename Message>
absl::Status ParseRequest(grpc::ByteBuffer* buffer, Message* message) {
  if (grpc::SerializationTraits<Message>::Deserialize(buffer, message).ok()) {
    return absl::OkStatus();
  }
  return UnparsedRequestOf<Message>();
}

// `message` serialized, as gRPC would send it.
template <typename Message>
grpc::ByteBuffer SerializeResponse(const Message& message) {
  grpc::ByteBuffer buffer;
  bool own_buffer = false;
  grpc::SerializationTraits<Message>::Serialize(message, &buffer, &own_buffer).IgnoreError();
  return buffer;
}

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_RPC_RAW_MESSAGES_H_
