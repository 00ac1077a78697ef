#ifndef GPUCMDD_SERVER_RPC_SUBMIT_REACTOR_H_
#define GPUCMDD_SERVER_RPC_SUBMIT_REACTOR_H_

// Batches of commands over the Submit stream. Each message is one batch: every command
// is checked and converted on arrival (the same conversion its unary RPC gets), then the
// batch runs in order and is answered as a whole. Consecutive device commands of one
// session run as one device task (one queue hop for the lot); a compile runs on the
// compile pool between them; reads finish off the device thread. One batch is in flight
// per stream. Batch-local references and failure propagation: Note [One command path]
// in server/core/batch.h.
//
// Thread-safety: gRPC runs one reactor callback at a time; while a batch runs, only the
// thread that carries it on (device, completion or compile thread) touches the reactor.

#include <memory>
#include <optional>
#include <vector>

#include "gpucmd/v1/gpucmd.grpc.pb.h"
#include "server/core/batch.h"
#include "server/rpc/rpc_environment.h"

namespace gpucmd {

class SubmitReactor final
    : public grpc::ServerBidiReactor<v1::SubmitRequest, v1::SubmitResponse> {
 public:
  // `environment` must outlive the call.
  SubmitReactor(const RpcEnvironment* environment, grpc::CallbackServerContext* context);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override { delete this; }

 private:
  // Checks and converts every command of `request_` into `batch_`.
  void Convert();
  // Runs the batch from `next_`; writes the replies after the last command.
  void RunNext();
  void RunCompile(size_t index);
  // Commands [begin, end) of one session (and answered ones), in one device task.
  void RunOnDevice(size_t begin, size_t end);
  void Answer(size_t begin, size_t end);
  bool IsCompile(size_t index) const {
    return request_.commands(static_cast<int>(index)).has_compile();
  }

  const RpcEnvironment* const environment_;
  grpc::CallbackServerContext* const context_;
  v1::SubmitRequest request_;
  v1::SubmitResponse response_;
  std::shared_ptr<Batch> batch_;
  std::vector<std::optional<SessionInfo>> sessions_;  // per command, when it resolved
  size_t next_ = 0;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_RPC_SUBMIT_REACTOR_H_
