#ifndef GPUCMDD_SERVER_RPC_WRITE_REACTOR_H_
#define GPUCMDD_SERVER_RPC_WRITE_REACTOR_H_

// Host -> device over the streaming Write RPC: checks the header of the first message
// (before any payload is buffered), collects the inline chunks up to the declared size,
// then converts the whole write into an Operation (the same conversion a Submit write
// gets) and runs it as a batch of one. Messages are parsed into the payload pool's memory,
// and a payload that arrives in one message is taken as it is (Note [Payload pool]).
//
// Thread-safety: gRPC runs one reactor callback at a time; the device thread finishes
// the call once, after the last read callback.

#include <optional>
#include <string>

#include "gpucmd/v1/gpucmd.grpc.pb.h"
#include "server/core/inline_budget.h"
#include "server/rpc/rpc_environment.h"

namespace gpucmd {

// Served raw (Note [Requests that do not parse] in server/rpc/raw_messages.h).
class WriteReactor final : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  // `environment` must outlive the call; `response` receives the WriteResponse.
  WriteReactor(const RpcEnvironment* environment, grpc::CallbackServerContext* context,
               grpc::ByteBuffer* response);

  void OnReadDone(bool ok) override;
  // Gives the call's payload memory back to the pool.
  void OnDone() override;

 private:
  // Checks the header and reserves its payload's inline budget: a refusal is kept in
  // `over_budget_` (no reservation), not returned.
  absl::Status AcceptHeader();
  // Appends the bytes of a continuation message that carries nothing but `data` within
  // the declared size to `data_` (which holds the payload's first bytes, if any, and its
  // whole capacity), copied once from gRPC's slices. False, with `data_` and the message
  // untouched, for any other message (it is then parsed whole).
  bool AppendDataOnlyMessage();
  // Ends the call with `status`, its inline budget given back first.
  void End(const absl::Status& status);
  // Runs the write once its payload arrived.
  void Run();
  // Runs `write` on the device and ends the call with its outcome.
  void Execute(absl::StatusOr<Operation> write);

  const RpcEnvironment* const environment_;
  grpc::CallbackServerContext* const context_;
  grpc::ByteBuffer* const response_;
  grpc::ByteBuffer incoming_;
  v1::WriteRequest request_;
  std::optional<v1::WriteHeader> header_;
  // The payload's share of the session's inline budget, from the header until the call
  // ends.
  std::optional<InlineBudget::Reservation> reservation_;
  absl::Status over_budget_;  // why reservation_ was refused
  SessionInfo session_;
  std::string data_;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_RPC_WRITE_REACTOR_H_
