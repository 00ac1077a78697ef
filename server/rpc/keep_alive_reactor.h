#ifndef GPUCMDD_SERVER_RPC_KEEP_ALIVE_REACTOR_H_
#define GPUCMDD_SERVER_RPC_KEEP_ALIVE_REACTOR_H_

// The lease: while a KeepAlive stream is open its session lives; when the stream breaks
// (the client died or half-closed) the session is reclaimed after the grace period.
// A stream serves one session; its first message names it.
//
// Thread-safety: gRPC runs one reactor callback at a time; End may come from any thread.

#include <optional>
#include <string>

#include "gpucmd/v1/gpucmd.grpc.pb.h"
#include "base/mutex.h"
#include "server/core/session_registry.h"
#include "server/rpc/grpc_status.h"
#include "server/rpc/lease_streams.h"
#include "server/rpc/raw_messages.h"

namespace gpucmd {

// Served raw (Note [Requests that do not parse] in server/rpc/raw_messages.h). A daemon
// shutting down ends it (LeaseStreams::EndAll) from outside its callbacks: `mutex_`
// makes sure it finishes once, and never while its write is in flight.
class KeepAliveReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
      public LeaseStream {
 public:
  KeepAliveReactor(SessionRegistry* sessions, LeaseStreams* streams)
      : sessions_(sessions), streams_(streams) {
    StartRead(&incoming_);
    streams_->Add(this);  // ends it at once when the daemon is shutting down
  }

  void OnReadDone(bool ok) override {
    MutexLock lock(&mutex_);
    if (!ok) {  // the client half-closed or went away
      FinishLocked(absl::OkStatus());
      return;
    }
    if (finished_) return;
    if (absl::Status parsed = ParseRequest(&incoming_, &request_); !parsed.ok()) {
      FinishLocked(parsed);
      return;
    }
    if (token_.empty()) {
      if (request_.session().empty() ||
          !sessions_->LeaseOpened(request_.session(), SessionRegistry::Clock::now())) {
        FinishLocked(absl::NotFoundError("unknown session"));
        return;
      }
      token_ = request_.session();
    } else if (request_.session() != token_) {
      FinishLocked(absl::InvalidArgumentError("a lease stream serves one session"));
      return;
    } else if (!sessions_->Touch(token_, SessionRegistry::Clock::now()).ok()) {
      token_.clear();  // closed meanwhile: nothing to hold
      FinishLocked(absl::NotFoundError("session closed"));
      return;
    }
    writing_ = true;
    StartWrite(&response_);
  }

  void OnWriteDone(bool ok) override {
    MutexLock lock(&mutex_);
    writing_ = false;
    if (ending_.has_value()) {
      FinishLocked(*ending_);
    } else if (ok) {
      StartRead(&incoming_);
    } else {
      FinishLocked(absl::OkStatus());
    }
  }

  void End(const absl::Status& status) override {
    MutexLock lock(&mutex_);
    if (writing_) {
      ending_ = status;  // OnWriteDone finishes
    } else {
      FinishLocked(status);
    }
  }

  void OnDone() override {
    streams_->Remove(this);
    {
      MutexLock lock(&mutex_);
      EndLeaseLocked();
    }
    delete this;
  }

 private:
  void FinishLocked(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    EndLeaseLocked();
    if (finished_) return;
    finished_ = true;
    Finish(ToGrpcStatus(status));
  }

  void EndLeaseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    if (!token_.empty()) sessions_->LeaseClosed(token_, SessionRegistry::Clock::now());
    token_.clear();
  }

  SessionRegistry* const sessions_;
  LeaseStreams* const streams_;
  Mutex mutex_;
  grpc::ByteBuffer incoming_;
  v1::KeepAliveRequest request_ ABSL_GUARDED_BY(mutex_);
  // An empty KeepAliveResponse: its serialization has no bytes.
  const grpc::ByteBuffer response_ = SerializeResponse(v1::KeepAliveResponse());
  std::string token_ ABSL_GUARDED_BY(mutex_);  // set while this stream holds the lease
  bool writing_ ABSL_GUARDED_BY(mutex_) = false;
  bool finished_ ABSL_GUARDED_BY(mutex_) = false;
  std::optional<absl::Status> ending_ ABSL_GUARDED_BY(mutex_);  // End came during a write
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_RPC_KEEP_ALIVE_REACTOR_H_
