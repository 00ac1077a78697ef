#ifndef GPUCMDD_SERVER_RPC_READ_REACTOR_H_
#define GPUCMDD_SERVER_RPC_READ_REACTOR_H_

// Device -> host over the streaming Read RPC, served raw (Note [Requests that do not
// parse] in server/rpc/raw_messages.h): the read runs as a batch of one (the same
// operation a Submit read is); once its copy completed (off the device thread) the bytes
// are streamed in chunks below the message limit, the last with the status, each sent
// from the read's own bytes (Note [Read chunks sent from the read's bytes]). The read's
// bytes count against its session's inline budget (Note [Inline payload budget]) from
// the call's start until its last chunk is handed to gRPC, before the client can hear
// the call end: a client that stops reading holds at most its budget.
//
// Thread-safety: gRPC runs one reactor callback at a time; the completion thread starts
// the first write once, before any write callback can run.

#include <memory>
#include <optional>

#include "driver/bytes.h"
#include "grpcpp/support/byte_buffer.h"
#include "server/core/inline_budget.h"
#include "server/rpc/rpc_environment.h"

namespace gpucmd {

class ReadReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  // `environment` must outlive the call; `request` is a ReadRequest as received.
  ReadReactor(const RpcEnvironment* environment, grpc::CallbackServerContext* context,
              const grpc::ByteBuffer& request);

  void OnWriteDone(bool ok) override;
  void OnDone() override;

 private:
  absl::Status Start(grpc::CallbackServerContext* context, grpc::ByteBuffer request);
  void WriteNextChunk();

  const uint64_t chunk_bytes_;
  const RpcEnvironment* const environment_;
  std::optional<InlineBudget::Reservation> reservation_;  // an inline read's bytes
  std::shared_ptr<const Bytes> bytes_;                     // the read's, once it completed
  grpc::ByteBuffer message_;                               // the one being written
  uint64_t sent_ = 0;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_RPC_READ_REACTOR_H_
