#ifndef GPUCMDD_SERVER_SERVICE_H_
#define GPUCMDD_SERVER_SERVICE_H_

// gpucmd.v1.GpuCommand over gRPC's callback API.
//
// Every handler validates the request's shape first (request_validation.h), then
// resolves the session token, then queues the work on the session's device thread
// (ServerCore); the device thread finishes the call. Reads finish off the device
// thread, streaming their bytes in chunks below the message limit. Handlers never block
// a reactor thread on device work and hold no lock across reactor callbacks. A call
// whose client cancelled or whose deadline passed before the device reached it is not
// run. RPCs whose behaviour this build lacks finish with UNIMPLEMENTED and a message
// naming what is missing.
//
// Thread-safety: handlers run concurrently on gRPC's threads; the service's own state
// is immutable after construction; ServerCore is thread-safe.

#include <vector>

#include "driver/device_description.h"
#include "gpucmd/v1/gpucmd.grpc.pb.h"
#include "server/compile_cache.h"
#include "server/metrics.h"
#include "server/server_core.h"

namespace gpucmd {

class GpuCommandService final : public v1::GpuCommand::CallbackService {
 public:
  // `core` and `metrics` must outlive the service. Read replies are cut into chunks of
  // at most `max_message_bytes` (minus framing).
  GpuCommandService(std::vector<DeviceDescription> devices, ServerCore* core,
                    CompileCache* compiler, Metrics* metrics, uint64_t max_message_bytes);

  grpc::ServerUnaryReactor* ListDevices(grpc::CallbackServerContext* context,
                                        const v1::ListDevicesRequest* request,
                                        v1::ListDevicesResponse* response) override;
  grpc::ServerUnaryReactor* OpenSession(grpc::CallbackServerContext* context,
                                        const v1::OpenSessionRequest* request,
                                        v1::OpenSessionResponse* response) override;
  grpc::ServerUnaryReactor* CloseSession(grpc::CallbackServerContext* context,
                                         const v1::CloseSessionRequest* request,
                                         v1::CloseSessionResponse* response) override;
  grpc::ServerBidiReactor<v1::KeepAliveRequest, v1::KeepAliveResponse>* KeepAlive(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* Allocate(grpc::CallbackServerContext* context,
                                     const v1::AllocateRequest* request,
                                     v1::AllocateResponse* response) override;
  grpc::ServerUnaryReactor* Free(grpc::CallbackServerContext* context,
                                 const v1::FreeRequest* request,
                                 v1::FreeResponse* response) override;
  grpc::ServerReadReactor<v1::WriteRequest>* Write(grpc::CallbackServerContext* context,
                                                   v1::WriteResponse* response) override;
  grpc::ServerWriteReactor<v1::ReadResponse>* Read(grpc::CallbackServerContext* context,
                                                   const v1::ReadRequest* request) override;
  grpc::ServerUnaryReactor* Copy(grpc::CallbackServerContext* context,
                                 const v1::CopyRequest* request,
                                 v1::CopyResponse* response) override;
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
  grpc::ServerBidiReactor<v1::SubmitRequest, v1::SubmitResponse>* Submit(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* RegisterSharedMemory(
      grpc::CallbackServerContext* context, const v1::RegisterSharedMemoryRequest* request,
      v1::RegisterSharedMemoryResponse* response) override;
  grpc::ServerUnaryReactor* UnregisterSharedMemory(
      grpc::CallbackServerContext* context, const v1::UnregisterSharedMemoryRequest* request,
      v1::UnregisterSharedMemoryResponse* response) override;
  grpc::ServerUnaryReactor* GetStats(grpc::CallbackServerContext* context,
                                     const v1::GetStatsRequest* request,
                                     v1::GetStatsResponse* response) override;

 private:
  class WriteReactor;
  class ReadReactor;
  class KeepAliveReactor;
  class SubmitReactor;

  // A launch with its kernel's parameters looked up (or the reason it will be skipped).
  // FAILED_PRECONDITION when the kernel was never compiled.
  absl::StatusOr<KernelLaunch> PrepareLaunch(const v1::LaunchRequest& request) const;

  // Resolves `token` and queues `work(command, session)` on the session's device; the
  // call finishes with the status `work` returns.
  template <typename Work>
  grpc::ServerUnaryReactor* RunOnDevice(grpc::CallbackServerContext* context,
                                        const std::string& token, Work work);

  const std::vector<DeviceDescription> devices_;
  ServerCore* const core_;
  CompileCache* const compiler_;
  Metrics* const metrics_;
  const uint64_t read_chunk_bytes_;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_SERVICE_H_
