#include "absl/strings/string_view.h"
#include "server/service.h"

#include "absl/strings/str_cat.h"
#include "server/grpc_status.h"
#include "server/request_validation.h"
#include "server/version.h"

namespace gpucmd {
namespace {

// Finishes a unary call with `status`.
grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context,
                                      const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// A streaming reactor that finishes at once with a fixed status and frees itself.
template <typename Reactor>
class FinishedReactor final : public Reactor {
 public:
  explicit FinishedReactor(const absl::Status& status) { this->Finish(ToGrpcStatus(status)); }
  void OnDone() override { delete this; }
};

// UNIMPLEMENTED naming the missing capability, after the request's shape is checked.
absl::Status NotYet(const absl::Status& validation, absl::string_view capability) {
  if (!validation.ok()) return validation;
  return absl::UnimplementedError(
      absl::StrCat(capability, " is not implemented in this build of gpucmdd"));
}

v1::DriverKind ToProto(DriverKind kind) {
  switch (kind) {
    case DriverKind::kCpu:
      return v1::DRIVER_KIND_CPU;
    case DriverKind::kCuda:
      return v1::DRIVER_KIND_CUDA;
    case DriverKind::kHip:
      return v1::DRIVER_KIND_HIP;
  }
  return v1::DRIVER_KIND_UNSPECIFIED;
}

constexpr absl::string_view kSessions = "sessions (OpenSession, CloseSession, KeepAlive)";
constexpr absl::string_view kMemory = "device memory (Allocate, Free, Write, Read, Copy)";
constexpr absl::string_view kKernels = "kernels (Compile, Launch)";

}  // namespace

GpuCommandService::GpuCommandService(std::vector<DeviceDescription> devices, Metrics* metrics)
    : devices_(std::move(devices)), metrics_(metrics) {}

grpc::ServerUnaryReactor* GpuCommandService::ListDevices(grpc::CallbackServerContext* context,
                                                         const v1::ListDevicesRequest*,
                                                         v1::ListDevicesResponse* response) {
  for (const DeviceDescription& device : devices_) {
    v1::DeviceInfo* info = response->add_devices();
    info->set_ordinal(device.ordinal);
    info->set_name(device.name);
    info->set_driver(ToProto(device.driver));
    info->set_architecture(device.architecture);
    info->set_memory_capacity_bytes(device.memory_capacity_bytes);
    info->set_max_threads_per_block(device.max_threads_per_block);
    info->set_max_shared_memory_per_block_bytes(device.max_shared_memory_per_block_bytes);
    info->set_ready(true);
  }
  return FinishUnary(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* GpuCommandService::OpenSession(grpc::CallbackServerContext* context,
                                                         const v1::OpenSessionRequest* request,
                                                         v1::OpenSessionResponse*) {
  return FinishUnary(
      context, NotYet(ValidateOpenSession(*request, static_cast<int>(devices_.size())),
                      kSessions));
}

grpc::ServerUnaryReactor* GpuCommandService::CloseSession(
    grpc::CallbackServerContext* context, const v1::CloseSessionRequest* request,
    v1::CloseSessionResponse*) {
  return FinishUnary(context, NotYet(ValidateSessionToken(request->session()), kSessions));
}

grpc::ServerBidiReactor<v1::KeepAliveRequest, v1::KeepAliveResponse>*
GpuCommandService::KeepAlive(grpc::CallbackServerContext*) {
  return new FinishedReactor<grpc::ServerBidiReactor<v1::KeepAliveRequest,
                                                     v1::KeepAliveResponse>>(
      NotYet(absl::OkStatus(), kSessions));
}

grpc::ServerUnaryReactor* GpuCommandService::Allocate(grpc::CallbackServerContext* context,
                                                      const v1::AllocateRequest* request,
                                                      v1::AllocateResponse*) {
  return FinishUnary(context, NotYet(ValidateAllocate(*request), kMemory));
}

grpc::ServerUnaryReactor* GpuCommandService::Free(grpc::CallbackServerContext* context,
                                                  const v1::FreeRequest* request,
                                                  v1::FreeResponse*) {
  return FinishUnary(context, NotYet(ValidateSessionToken(request->session()), kMemory));
}

grpc::ServerReadReactor<v1::WriteRequest>* GpuCommandService::Write(
    grpc::CallbackServerContext*, v1::WriteResponse*) {
  return new FinishedReactor<grpc::ServerReadReactor<v1::WriteRequest>>(
      NotYet(absl::OkStatus(), kMemory));
}

grpc::ServerWriteReactor<v1::ReadResponse>* GpuCommandService::Read(
    grpc::CallbackServerContext*, const v1::ReadRequest* request) {
  return new FinishedReactor<grpc::ServerWriteReactor<v1::ReadResponse>>(
      NotYet(ValidateRead(*request), kMemory));
}

grpc::ServerUnaryReactor* GpuCommandService::Copy(grpc::CallbackServerContext* context,
                                                  const v1::CopyRequest* request,
                                                  v1::CopyResponse*) {
  return FinishUnary(context, NotYet(ValidateCopy(*request), kMemory));
}

grpc::ServerUnaryReactor* GpuCommandService::Defragment(grpc::CallbackServerContext* context,
                                                        const v1::DefragmentRequest* request,
                                                        v1::DefragmentResponse*) {
  absl::Status validation = absl::OkStatus();
  if (request->device() >= devices_.size()) {
    validation = absl::InvalidArgumentError(
        absl::StrCat("device ", request->device(), " does not exist"));
  }
  return FinishUnary(context, NotYet(validation, "relocation (Defragment)"));
}

grpc::ServerUnaryReactor* GpuCommandService::Compile(grpc::CallbackServerContext* context,
                                                     const v1::CompileRequest* request,
                                                     v1::CompileResponse*) {
  return FinishUnary(context, NotYet(ValidateCompile(*request), kKernels));
}

grpc::ServerUnaryReactor* GpuCommandService::Launch(grpc::CallbackServerContext* context,
                                                    const v1::LaunchRequest* request,
                                                    v1::LaunchResponse*) {
  return FinishUnary(context, NotYet(ValidateLaunch(*request), kKernels));
}

grpc::ServerUnaryReactor* GpuCommandService::Synchronize(grpc::CallbackServerContext* context,
                                                         const v1::SynchronizeRequest* request,
                                                         v1::SynchronizeResponse*) {
  return FinishUnary(context,
                     NotYet(ValidateSessionToken(request->session()), "Synchronize"));
}

grpc::ServerBidiReactor<v1::SubmitRequest, v1::SubmitResponse>* GpuCommandService::Submit(
    grpc::CallbackServerContext*) {
  return new FinishedReactor<grpc::ServerBidiReactor<v1::SubmitRequest, v1::SubmitResponse>>(
      NotYet(absl::OkStatus(), "command batches (Submit)"));
}

grpc::ServerUnaryReactor* GpuCommandService::RegisterSharedMemory(
    grpc::CallbackServerContext* context, const v1::RegisterSharedMemoryRequest* request,
    v1::RegisterSharedMemoryResponse*) {
  return FinishUnary(
      context, NotYet(ValidateSessionToken(request->session()), "shared-memory regions"));
}

grpc::ServerUnaryReactor* GpuCommandService::UnregisterSharedMemory(
    grpc::CallbackServerContext* context, const v1::UnregisterSharedMemoryRequest* request,
    v1::UnregisterSharedMemoryResponse*) {
  return FinishUnary(
      context, NotYet(ValidateSessionToken(request->session()), "shared-memory regions"));
}

grpc::ServerUnaryReactor* GpuCommandService::GetStats(grpc::CallbackServerContext* context,
                                                      const v1::GetStatsRequest* request,
                                                      v1::GetStatsResponse* response) {
  if (!request->session().empty()) {
    return FinishUnary(context, NotYet(absl::OkStatus(), "per-session statistics"));
  }
  for (const DeviceDescription& device : devices_) {
    v1::DeviceStats* stats = response->add_devices();
    stats->set_device(device.ordinal);
    stats->set_memory_capacity_bytes(device.memory_capacity_bytes);
    stats->set_queue_depth(
        static_cast<uint64_t>(metrics_->QueueDepth(device.ordinal).Value()));
    stats->set_commands_in_flight(
        static_cast<uint64_t>(metrics_->CommandsInFlight(device.ordinal).Value()));
  }
  response->set_uptime_seconds(static_cast<uint64_t>(metrics_->UptimeSeconds()));
  response->set_version(kVersion);
  return FinishUnary(context, absl::OkStatus());
}

}  // namespace gpucmd
