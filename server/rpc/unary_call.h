#ifndef GPUCMDD_SERVER_RPC_UNARY_CALL_H_
#define GPUCMDD_SERVER_RPC_UNARY_CALL_H_

// Note [Cancelled calls end at once]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A unary call carried by device work (RunUnary in server/rpc/service.h) may wait long:
// a Synchronize behind another launch's long kernel, a read behind a copy. Every open
// call costs the daemon some tens of KiB in gRPC, and a connection's calls are bounded
// only while they are open (limits.max_calls_per_connection): a call the daemon kept
// until its work ended, after its client cancelled it, let a client cancel and open calls
// again without end (48,000 held behind one 50 s kernel, 871 MB). So a call ends as soon
// as its client cancels it or its deadline passes: CANCELLED or DEADLINE_EXCEEDED, and
// gRPC gives back the call, its request and its response. Its work, once queued, runs to
// its end as the device's order demands, then finds the call ended and answers no one;
// work not started yet does not run (Abandoned).
//
// Thread-safety: gRPC's reactions and Answer may run concurrently; whichever comes first
// ends the call, and the object lives until both gRPC (OnDone) and the work (Answer) let
// go of it.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "grpcpp/grpcpp.h"
#include "server/rpc/grpc_status.h"
#include "server/rpc/rpc_environment.h"

namespace gpucmd {

class UnaryCall final : public grpc::ServerUnaryReactor {
 public:
  // Deletes itself once gRPC is done with the call and Answer ran.
  explicit UnaryCall(grpc::CallbackServerContext* context) : deadline_(context->deadline()) {}

  // Why the call's work should not run any more (CallAbandoned), or OK; usable after the
  // call ended.
  std::function<absl::Status()> Abandoned() const {
    return [cancelled = cancelled_, deadline = deadline_] {
      return AbandonedStatus(cancelled->load(std::memory_order_acquire), deadline);
    };
  }

  // The work's result: `fill_response` writes the response and the call ends with
  // `status`, unless it ended already. Called exactly once; the work's reference goes.
  void Answer(const absl::Status& status, absl::FunctionRef<void()> fill_response) {
    if (!ended_.exchange(true, std::memory_order_acq_rel)) {
      fill_response();
      Finish(ToGrpcStatus(status));
    }
    Unref();
  }

  void OnCancel() override {
    cancelled_->store(true, std::memory_order_release);
    if (!ended_.exchange(true, std::memory_order_acq_rel)) {
      Finish(ToGrpcStatus(AbandonedStatus(true, deadline_)));
    }
  }
  void OnDone() override { Unref(); }

 private:
  void Unref() {
    if (references_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  const std::chrono::system_clock::time_point deadline_;
  const std::shared_ptr<std::atomic<bool>> cancelled_ = std::make_shared<std::atomic<bool>>();
  std::atomic<bool> ended_{false};
  std::atomic<int> references_{2};  // gRPC's and the work's
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_RPC_UNARY_CALL_H_
