#ifndef GPUCMDD_SERVER_RPC_READ_REACTOR_H_
#define GPUCMDD_SERVER_RPC_READ_REACTOR_H_

// Device -> host over the streaming Read RPC: the read runs as a batch of one (the same
// operation a Submit read is); once its copy completed (off the device thread) the bytes
// are streamed in chunks below the message limit, the last with the status, each copied
// into a message whose memory comes from the payload pool (Note [Payload pool]). The
// read's bytes count against its session's inline budget (Note [Inline payload budget])
// from the call's start until its last chunk is handed to gRPC, before the client can
// hear the call end: a client that stops reading holds at most its budget.
//
// Thread-safety: gRPC runs one reactor callback at a time; the completion thread starts
// the first write once, before any write callback can run.

#include <optional>

#include "gpucmd/v1/gpucmd.grpc.pb.h"
#include "server/core/inline_budget.h"
#include "server/rpc/rpc_environment.h"

namespace gpucmd {

class ReadReactor final : public grpc::ServerWriteReactor<v1::ReadResponse> {
 public:
  // `environment` must outlive the call.
  ReadReactor(const RpcEnvironment* environment, grpc::CallbackServerContext* context,
              const v1::ReadRequest& request);

  void OnWriteDone(bool ok) override;
  // Gives the call's message memory back to the payload pool.
  void OnDone() override;

 private:
  absl::Status Start(grpc::CallbackServerContext* context, const v1::ReadRequest& request);
  void WriteNextChunk();

  const uint64_t chunk_bytes_;
  const RpcEnvironment* const environment_;
  std::optional<InlineBudget::Reservation> reservation_;  // an inline read's bytes
  std::optional<PendingRead> read_;
  v1::ReadResponse response_;
  uint64_t sent_ = 0;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_RPC_READ_REACTOR_H_
