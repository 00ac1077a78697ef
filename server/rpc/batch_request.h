#ifndef GPUCMDD_SERVER_RPC_BATCH_REQUEST_H_
#define GPUCMDD_SERVER_RPC_BATCH_REQUEST_H_

// Note [A batch's writes parsed into pooled memory]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A Submit batch parsed as protobuf parses it put each inline write's bytes in a string
// allocated for them, memory that the previous batch's write had just given to the payload
// pool: a 1 MiB write in a batch spent most of its time faulting in fresh pages (the
// parse's copy was half the daemon's CPU) and moved 0.4 GB/s where a unary Write, which
// parses into pooled memory (Note [Payload pool] in server/command/payload_pool.h), moved
// 1.1. ParseBatch reads a batch large enough to hold such a write command by command; a
// command large enough for the pool to keep (a write, but for a client's odd one) is
// given a write whose data string is taken from the pool before protobuf parses the
// command into it, which keeps the string's capacity. A smaller batch (a batch of
// launches) is parsed whole, as before. A command parses as protobuf would parse it: one
// that turns out to be of another kind replaces the write (the string then goes back to
// malloc); but one that names no kind and one whose write is empty are both left naming
// none (neither has anything to run, and both are refused INVALID_ARGUMENT).
//
// Thread-safety: as the pool's.

#include "absl/status/status.h"
#include "gpucmd/v1/gpucmd.pb.h"
#include "grpcpp/support/byte_buffer.h"
#include "server/command/payload_pool.h"

namespace gpucmd {

// Parses `buffer` (consumed) into `batch`, as ParseRequest would, with its large commands'
// write data in strings taken from `payloads`. INVALID_ARGUMENT when it does not parse.
absl::Status ParseBatch(grpc::ByteBuffer* buffer, PayloadPool& payloads,
                        v1::SubmitRequest* batch);

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_RPC_BATCH_REQUEST_H_
