#ifndef GPUCMDD_SERVER_RPC_KEEP_ALIVE_REACTOR_H_
#define GPUCMDD_SERVER_RPC_KEEP_ALIVE_REACTOR_H_

// The lease: while a KeepAlive stream is open its session lives; when the stream breaks
// (the client died or half-closed) the session is reclaimed after the grace period.
// A stream serves one session; its first message names it.
//
// Thread-safety: gRPC runs one reactor callback at a time; the registry is thread-safe.

#include <string>

#include "gpucmd/v1/gpucmd.grpc.pb.h"
#include "server/core/session_registry.h"
#include "server/rpc/grpc_status.h"
#include "server/rpc/raw_messages.h"

namespace gpucmd {

// Served raw (Note [Requests that do not parse] in server/rpc/raw_messages.h).
class KeepAliveReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit KeepAliveReactor(SessionRegistry* sessions) : sessions_(sessions) {
    StartRead(&incoming_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client half-closed or went away
      EndLease();
      Finish(grpc::Status::OK);
      return;
    }
    if (absl::Status parsed = ParseRequest(&incoming_, &request_); !parsed.ok()) {
      EndLease();
      Finish(ToGrpcStatus(parsed));
      return;
    }
    if (token_.empty()) {
      if (request_.session().empty() ||
          !sessions_->LeaseOpened(request_.session(), SessionRegistry::Clock::now())) {
        Finish(ToGrpcStatus(absl::NotFoundError("unknown session")));
        return;
      }
      token_ = request_.session();
    } else if (request_.session() != token_) {
      Finish(ToGrpcStatus(absl::InvalidArgumentError("a lease stream serves one session")));
      return;
    } else if (!sessions_->Touch(token_, SessionRegistry::Clock::now()).ok()) {
      token_.clear();  // closed meanwhile: nothing to hold
      Finish(ToGrpcStatus(absl::NotFoundError("session closed")));
      return;
    }
    StartWrite(&response_);
  }

  void OnWriteDone(bool ok) override {
    if (ok) {
      StartRead(&incoming_);
    } else {
      EndLease();
      Finish(grpc::Status::OK);
    }
  }

  void OnDone() override {
    EndLease();
    delete this;
  }

 private:
  void EndLease() {
    if (!token_.empty()) sessions_->LeaseClosed(token_, SessionRegistry::Clock::now());
    token_.clear();
  }

  SessionRegistry* const sessions_;
  grpc::ByteBuffer incoming_;
  v1::KeepAliveRequest request_;
  // An empty KeepAliveResponse: its serialization has no bytes.
  grpc::ByteBuffer response_ = SerializeResponse(v1::KeepAliveResponse());
  std::string token_;  // set while this stream holds the session's lease
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_RPC_KEEP_ALIVE_REACTOR_H_
