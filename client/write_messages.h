#ifndef GPUCMDD_CLIENT_WRITE_MESSAGES_H_
#define GPUCMDD_CLIENT_WRITE_MESSAGES_H_

// Note [Write payloads are sent in place]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A streamed Write's payload went out as WriteRequest messages: each chunk copied into
// the message's `data`, then serialized by gRPC into a buffer of its own, so a 16 MiB
// write copied and faulted in 32 MiB of fresh memory in the client before a byte left
// (about 8,000 page faults per write). The client now encodes each message itself: its
// header and the `data` field's tag and length in a few bytes of their own, then the
// chunk as a slice that points into the caller's memory. gRPC sends from there; the bytes
// on the wire are those of the serialized WriteRequest.

#include <string>

#include "absl/strings/string_view.h"
#include "gpucmd/v1/gpucmd.pb.h"
#include "grpcpp/support/byte_buffer.h"

namespace gpucmd {

// The full name of the Write method ("/gpucmd.v1.GpuCommand/Write").
const std::string& WriteMethodName();

// One WriteRequest of a Write stream as gRPC sends it: `header` (null for the messages
// after the first), then `chunk`, which is not copied: its memory must stay valid and
// unchanged until the call ended.
grpc::ByteBuffer WriteMessage(const v1::WriteHeader* header, absl::string_view chunk);

}  // namespace gpucmd

#endif  // GPUCMDD_CLIENT_WRITE_MESSAGES_H_
