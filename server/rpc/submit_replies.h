#ifndef GPUCMDD_SERVER_RPC_SUBMIT_REPLIES_H_
#define GPUCMDD_SERVER_RPC_SUBMIT_REPLIES_H_

// The responses a Submit batch is answered with, cut to the message limit and
// serialized straight from the batch's replies (Note [Replies the client does not read]
// in server/rpc/submit_reactor.h).
//
// Note [A batch's reads sent from their bytes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A read in a batch was answered with its bytes copied into its reply, which was then
// copied again into the buffer gRPC sends: an 8 MiB read copied 16 MiB, and allocated
// 8 MiB afresh, before the socket. Its reply now leaves `read` unset, and the response
// writes that field itself after the reply's others: the ReadResponse's total_bytes and
// the data's tag and length, then the read's own bytes, as a slice that shares them when
// they are many (Note [Read chunks sent from the read's bytes] in
// server/rpc/read_chunks.h) or copied into the message when they are few. The client
// parses the same message as before.
//
// Thread-safety: pure functions over their arguments; they cache each reply's size in
// it (protobuf's ByteSizeLong), so a reply must not be serialized by two threads at once.

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/types/span.h"
#include "driver/bytes.h"
#include "gpucmd/v1/gpucmd.pb.h"
#include "grpcpp/support/byte_buffer.h"

namespace gpucmd {

// A batch's replies as they are sent. `read_bytes` is empty, or holds one entry per reply:
// null, or the bytes of a read whose reply has `read` unset, written from them (Note [A
// batch's reads sent from their bytes]).
struct RepliesToSend {
  const v1::SubmitResponse& replies;
  absl::Span<const std::shared_ptr<const Bytes>> read_bytes;
};

// The end of the longest run of replies from `begin` (before `end`) whose response
// takes at most `message_bytes`; at least one reply, whatever its size.
size_t RepliesThatFit(const RepliesToSend& replies, size_t begin, size_t end,
                      uint64_t message_bytes);

// The SubmitResponse holding replies [begin, end) of `replies` and `batch_done`, as
// gRPC would send it: each reply copied once, into gRPC's own memory, but for a read's
// many bytes, which it shares.
grpc::ByteBuffer SerializeReplies(const RepliesToSend& replies, size_t begin, size_t end,
                                  bool batch_done);

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_RPC_SUBMIT_REPLIES_H_
