#ifndef GPUCMDD_SERVER_RPC_SUBMIT_REPLIES_H_
#define GPUCMDD_SERVER_RPC_SUBMIT_REPLIES_H_

// The responses a Submit batch is answered with, cut to the message limit and
// serialized straight from the batch's replies (Note [Replies the client does not read]
// in server/rpc/submit_reactor.h).
//
// Thread-safety: pure functions over their arguments; they cache each reply's size in
// it (protobuf's ByteSizeLong), so a reply must not be serialized by two threads at once.

#include <cstddef>
#include <cstdint>

#include "gpucmd/v1/gpucmd.pb.h"
#include "grpcpp/support/byte_buffer.h"

namespace gpucmd {

// The end of the longest run of replies from `begin` (before `end`) whose response
// takes at most `message_bytes`; at least one reply, whatever its size.
size_t RepliesThatFit(const v1::SubmitResponse& replies, size_t begin, size_t end,
                      uint64_t message_bytes);

// The SubmitResponse holding replies [begin, end) of `replies` and `batch_done`, as
// gRPC would send it, each reply's bytes copied once, into gRPC's own memory.
grpc::ByteBuffer SerializeReplies(const v1::SubmitResponse& replies, size_t begin, size_t end,
                                  bool batch_done);

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_RPC_SUBMIT_REPLIES_H_
