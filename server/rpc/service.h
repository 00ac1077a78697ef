#ifndef GPUCMDD_SERVER_RPC_SERVICE_H_
#define GPUCMDD_SERVER_RPC_SERVICE_H_

// gpucmd.v1.GpuCommand over gRPC's callback API.
//
// Every handler checks its request's shape first (INVALID_ARGUMENT before anything
// else), resolves the session token, converts the request into an Operation
// (request_conversion.h) and runs it as a batch of one on the session's device thread
// (Note [One command path] in server/core/batch.h); Submit runs many the same way. The
// streaming calls have their own reactors (write_reactor.h, read_reactor.h,
// keep_alive_reactor.h, submit_reactor.h). Handlers never block a reactor thread on
// device work and hold no lock across reactor callbacks. A call whose client cancelled
// or whose deadline passed before the device reached it is not run. RPCs whose behaviour
// this build lacks finish with UNIMPLEMENTED and a message naming what is missing.
//
// Thread-safety: handlers run concurrently on gRPC's threads; the service's own state
// is immutable after construction; ServerCore and CompileCache are thread-safe.

#include <vector>

#include "gpucmd/v1/gpucmd.grpc.pb.h"
#include "server/rpc/lease_streams.h"
#include "server/rpc/peer_identity.h"
#include "server/rpc/request_conversion.h"
#include "server/rpc/rpc_environment.h"

namespace gpucmd {

namespace service_internal {
using G = v1::GpuCommand;
// Every method on the callback API (GpuCommand::CallbackService), but KeepAlive, Write,
// Read and Submit served raw (Note [Requests that do not parse] in
// server/rpc/raw_messages.h; Note [Read chunks sent from the read's bytes] in
// server/rpc/read_chunks.h).
using GpuCommandServiceBase = G::WithCallbackMethod_OpenSession<
    G::WithCallbackMethod_CloseSession<G::WithRawCallbackMethod_KeepAlive<
        G::WithCallbackMethod_ListDevices<G::WithCallbackMethod_Allocate<
            G::WithCallbackMethod_Free<G::WithRawCallbackMethod_Write<G::WithRawCallbackMethod_Read<
                G::WithCallbackMethod_WriteShared<G::WithCallbackMethod_ReadShared<
                    G::WithCallbackMethod_Copy<G::WithCallbackMethod_Fill<
                        G::WithCallbackMethod_Defragment<G::WithCallbackMethod_Compile<
                            G::WithCallbackMethod_GetCompileLog<G::WithCallbackMethod_Launch<
                                G::WithCallbackMethod_Synchronize<G::WithRawCallbackMethod_Submit<
                                    G::WithCallbackMethod_RegisterSharedMemory<
                                        G::WithCallbackMethod_UnregisterSharedMemory<
                                            G::WithCallbackMethod_GetStats<
                                                G::WithCallbackMethod_ListSessions<
                                                    G::Service>>>>>>>>>>>>>>>>>>>>>>;
}  // namespace service_internal

using service_internal::GpuCommandServiceBase;

class GpuCommandService final : public GpuCommandServiceBase {
 public:
  // The environment's pointees must outlive the service. Read replies are cut into
  // chunks of at most `max_message_bytes` (minus framing). `admin` says who sees every
  // client's sessions.
  GpuCommandService(std::vector<DeviceDescription> devices, ServerCore* core,
                    CompileCache* compiler, Metrics* metrics, uint64_t max_message_bytes,
                    AdminPolicy admin = AdminPolicy());

  grpc::ServerUnaryReactor* ListDevices(grpc::CallbackServerContext* context,
                                        const v1::ListDevicesRequest* request,
                                        v1::ListDevicesResponse* response) override;
  grpc::ServerUnaryReactor* OpenSession(grpc::CallbackServerContext* context,
                                        const v1::OpenSessionRequest* request,
                                        v1::OpenSessionResponse* response) override;
  grpc::ServerUnaryReactor* CloseSession(grpc::CallbackServerContext* context,
                                         const v1::CloseSessionRequest* request,
                                         v1::CloseSessionResponse* response) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* KeepAlive(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* Allocate(grpc::CallbackServerContext* context,
                                     const v1::AllocateRequest* request,
                                     v1::AllocateResponse* response) override;
  grpc::ServerUnaryReactor* Free(grpc::CallbackServerContext* context,
                                 const v1::FreeRequest* request,
                                 v1::FreeResponse* response) override;
  grpc::ServerReadReactor<grpc::ByteBuffer>* Write(grpc::CallbackServerContext* context,
                                                   grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Read(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* WriteShared(grpc::CallbackServerContext* context,
                                        const v1::WriteHeader* request,
                                        v1::WriteResponse* response) override;
  grpc::ServerUnaryReactor* ReadShared(grpc::CallbackServerContext* context,
                                       const v1::ReadRequest* request,
                                       v1::ReadResponse* response) override;
  grpc::ServerUnaryReactor* Copy(grpc::CallbackServerContext* context,
                                 const v1::CopyRequest* request,
                                 v1::CopyResponse* response) override;
  grpc::ServerUnaryReactor* Fill(grpc::CallbackServerContext* context,
                                 const v1::FillRequest* request,
                                 v1::FillResponse* response) override;
  grpc::ServerUnaryReactor* Defragment(grpc::CallbackServerContext* context,
                                       const v1::DefragmentRequest* request,
                                       v1::DefragmentResponse* response) override;
  grpc::ServerUnaryReactor* Compile(grpc::CallbackServerContext* context,
                                    const v1::CompileRequest* request,
                                    v1::CompileResponse* response) override;
  grpc::ServerUnaryReactor* Launch(grpc::CallbackServerContext* context,
                                   const v1::LaunchRequest* request,
                                   v1::LaunchResponse* response) override;
  grpc::ServerUnaryReactor* Synchronize(grpc::CallbackServerContext* context,
                                        const v1::SynchronizeRequest* request,
                                        v1::SynchronizeResponse* response) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Submit(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* RegisterSharedMemory(
      grpc::CallbackServerContext* context, const v1::RegisterSharedMemoryRequest* request,
      v1::RegisterSharedMemoryResponse* response) override;
  grpc::ServerUnaryReactor* UnregisterSharedMemory(
      grpc::CallbackServerContext* context, const v1::UnregisterSharedMemoryRequest* request,
      v1::UnregisterSharedMemoryResponse* response) override;
  grpc::ServerUnaryReactor* GetCompileLog(grpc::CallbackServerContext* context,
                                          const v1::GetCompileLogRequest* request,
                                          v1::GetCompileLogResponse* response) override;
  grpc::ServerUnaryReactor* GetStats(grpc::CallbackServerContext* context,
                                     const v1::GetStatsRequest* request,
                                     v1::GetStatsResponse* response) override;
  grpc::ServerUnaryReactor* ListSessions(grpc::CallbackServerContext* context,
                                         const v1::ListSessionsRequest* request,
                                         v1::ListSessionsResponse* response) override;

 // Ends every lease stream (KeepAlive) with `status`, and every one opened later: a
  // daemon shutting down does not wait for clients that hold them while they live.
  void EndLeases(const absl::Status& status);

 private:
  // Checks the shape (`valid`), resolves `token`, converts with `convert` (given the
  // session's device and shared-memory regions) and runs the operation as a batch of one;
  // `reply` fills the response from a successful result, unless the call ended first
  // (Note [Cancelled calls end at once] in server/rpc/unary_call.h).
  grpc::ServerUnaryReactor* RunUnary(
      grpc::CallbackServerContext* context, const absl::Status& valid,
      const std::string& token, absl::string_view kind,
      absl::AnyInvocable<absl::StatusOr<Operation>(const DeviceDescription&,
                                                   const SessionRegions&)>
          convert,
      absl::AnyInvocable<void(const OperationResult&)> reply);

  const RpcEnvironment environment_;
  const AdminPolicy admin_;
  LeaseStreams lease_streams_;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_RPC_SERVICE_H_
