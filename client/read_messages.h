#ifndef GPUCMDD_CLIENT_READ_MESSAGES_H_
#define GPUCMDD_CLIENT_READ_MESSAGES_H_

// Note [Read payloads land in place]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A streamed Read's bytes arrived as ReadResponse messages, each parsed into a string of
// its own and then appended to the result: two copies in the client, the first into
// memory fresh for each message (a 16 MiB read faulted in 16 MiB per call, some 4,000
// page faults, wherever the allocator handed that memory back in between). The client
// now takes each message as gRPC received it and copies its `data` once, from gRPC's
// slices into the result, which the first message's `total_bytes` reserves whole (in
// huge pages from base/huge_pages.h's threshold).

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "grpcpp/support/byte_buffer.h"

namespace gpucmd {

// The full name of the Read method ("/gpucmd.v1.GpuCommand/Read").
const std::string& ReadMethodName();

// Appends the `data` of `message`, one ReadResponse as gRPC received it, to `result`, as
// parsing and appending it would (the last `data` field of the message counts); `first`
// says it is the stream's first message, whose `total_bytes` reserves the whole read.
// INTERNAL, with `result` as it was, for a message that does not parse.
absl::Status AppendReadMessage(grpc::ByteBuffer& message, bool first, std::string& result);

// Copies the `data` of `message`, one ReadResponse as gRPC received it, into `into` from
// `filled` on, and advances `filled` past it (the last `data` field of the message counts,
// as in parsing). INTERNAL for a message that does not parse, or whose bytes do not fit
// in `into` past `filled`; `filled` stays as it was then, and `into`'s bytes past it are
// unspecified.
absl::Status CopyReadMessage(grpc::ByteBuffer& message, absl::Span<std::byte> into,
                             size_t& filled);

}  // namespace gpucmd

#endif  // GPUCMDD_CLIENT_READ_MESSAGES_H_
