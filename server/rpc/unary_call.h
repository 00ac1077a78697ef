#ifndef GPUCMDD_SERVER_RPC_UNARY_CALL_H_
#define GPUCMDD_SERVER_RPC_UNARY_CALL_H_

// Note [Cancelled calls end at once]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A unary call carried by device work (RunUnary in server/rpc/service.h) may wait long:
// a Synchronize behind another launch's long kernel, a read behind a copy. Every open
// call costs the daemon some tens of KiB in gRPC, and a connection's calls are bounded
// only while they are open (limits.max_calls_per_connection): a call the daemon kept
// until its work ended, after its client cancelled it, let a client cancel and open calls
// again without end (48,000 held behind one 50 s kernel, 871 MB). So a call whose work
// is still running when its handler returns gets a reactor of its own (UnaryCall), which
// ends it as soon as its client cancels it or its deadline passes: CANCELLED or
// DEADLINE_EXCEEDED, and gRPC gives back the call, its request and its response. Its work,
// once the device thread took it, runs to its end in the device's order and then
// answers no one; work the device thread has not reached does not run (Abandoned).
//
// Work answered before its handler returns (an idle device runs it on the receiving
// thread) finishes gRPC's default reactor instead: such a call has nothing to wait for,
// and a reactor of its own cost an empty unary Launch about 15 us of its round trip (p50
// 104-120 us against 88-105 us, four alternating runs of latency_bench AgainstEcho).

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "base/mutex.h"
#include "grpcpp/grpcpp.h"
#include "server/rpc/grpc_status.h"
#include "server/rpc/rpc_environment.h"

namespace gpucmd {

// The reactor of a call whose work outlives its handler. Thread-safety: gRPC's reactions
// and Answer may run concurrently; whichever comes first ends the call, and the object
// lives until both gRPC (OnDone) and the work (Answer) let go of it.
class UnaryCall final : public grpc::ServerUnaryReactor {
 public:
  // `cancelled` is set once the call is cancelled. Deletes itself once gRPC is done with
  // the call and Answer ran.
  UnaryCall(grpc::CallbackServerContext* context, std::shared_ptr<std::atomic<bool>> cancelled)
      : deadline_(context->deadline()), cancelled_(std::move(cancelled)) {}

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
  const std::shared_ptr<std::atomic<bool>> cancelled_;
  std::atomic<bool> ended_{false};
  std::atomic<int> references_{2};  // gRPC's and the work's
};

// Carries a unary call's answer from its work to gRPC, by the default reactor when the
// work answered before the handler returned, else by a UnaryCall. Shared by the handler
// and the work's callback. Thread-safety: Answer and Reactor may run concurrently.
class UnaryAnswer {
 public:
  // `context` must stay valid until Reactor returned.
  explicit UnaryAnswer(grpc::CallbackServerContext* context) : context_(context) {}

  // Why the call's work should not run any more (CallAbandoned), or OK; usable after the
  // call ended.
  std::function<absl::Status()> Abandoned() const {
    return [cancelled = cancelled_, deadline = context_->deadline()] {
      return AbandonedStatus(cancelled->load(std::memory_order_acquire), deadline);
    };
  }

  // From the work, exactly once: `fill_response` writes the response, and the call ends
  // with `status` (unless it ended already).
  void Answer(const absl::Status& status, absl::FunctionRef<void()> fill_response) {
    UnaryCall* call;
    {
      MutexLock lock(&mutex_);
      call = call_;
      if (call == nullptr) {  // the handler has not returned: it finishes the call
        fill_response();
        early_ = status;
        return;
      }
    }
    call->Answer(status, fill_response);
  }

  // From the handler, once, after it started the work: the reactor it returns.
  grpc::ServerUnaryReactor* Reactor() {
    MutexLock lock(&mutex_);
    if (early_.has_value()) {
      grpc::ServerUnaryReactor* reactor = context_->DefaultReactor();
      reactor->Finish(ToGrpcStatus(*early_));
      return reactor;
    }
    call_ = new UnaryCall(context_, cancelled_);
    return call_;
  }

 private:
  grpc::CallbackServerContext* const context_;
  const std::shared_ptr<std::atomic<bool>> cancelled_ = std::make_shared<std::atomic<bool>>();
  Mutex mutex_;
  std::optional<absl::Status> early_ ABSL_GUARDED_BY(mutex_);
  UnaryCall* call_ ABSL_GUARDED_BY(mutex_) = nullptr;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_RPC_UNARY_CALL_H_
