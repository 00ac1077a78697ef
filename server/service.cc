#include "server/service.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/grpc_status.h"
#include "server/request_validation.h"
#include "server/version.h"

namespace gpucmd {
namespace {

using Clock = SessionRegistry::Clock;

constexpr absl::string_view kKernelIdTrailer = "gpucmd-kernel-id";

// Framing and field overhead left free in each streamed chunk.
constexpr uint64_t kChunkOverheadBytes = 1024;
// Session key for administrative device work (no client session).
constexpr SessionKey kAdminSessionKey = 0;

// Finishes a unary call with `status`.
grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context,
                                      const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// UNIMPLEMENTED naming the missing capability, after the request's shape is checked.
absl::Status NotYet(const absl::Status& validation, absl::string_view capability) {
  if (!validation.ok()) return validation;
  return absl::UnimplementedError(
      absl::StrCat(capability, " is not implemented in this build of gpucmdd"));
}

// Why a call should not run any more, or OK.
absl::Status CallAbandoned(grpc::CallbackServerContext* context) {
  if (!context->IsCancelled()) return absl::OkStatus();
  if (context->deadline() <= std::chrono::system_clock::now()) {
    return absl::DeadlineExceededError("deadline passed before the device reached the call");
  }
  return absl::CancelledError("the client cancelled the call");
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

absl::StatusOr<CopyLayout> ReadLayout(const v1::ReadRequest& request) {
  if (request.has_pitched()) {
    const v1::PitchedLayout& pitched = request.pitched();
    return CopyLayout::Pitched(request.offset_bytes(), pitched.width_bytes(), pitched.height(),
                               pitched.stride_bytes());
  }
  return CopyLayout::Contiguous(request.offset_bytes(), request.size_bytes());
}

v1::ArgKind ToProto(ParamKind kind) {
  switch (kind) {
    case ParamKind::kBuffer:
      return v1::ARG_KIND_BUFFER;
    case ParamKind::kScalar:
      return v1::ARG_KIND_SCALAR;
    case ParamKind::kTensorMap:
      return v1::ARG_KIND_TENSOR_MAP;
  }
  return v1::ARG_KIND_UNSPECIFIED;
}

v1::ScalarType ToProto(ScalarKind kind) {
  switch (kind) {
    case ScalarKind::kI32:
      return v1::SCALAR_TYPE_I32;
    case ScalarKind::kU32:
      return v1::SCALAR_TYPE_U32;
    case ScalarKind::kI64:
      return v1::SCALAR_TYPE_I64;
    case ScalarKind::kU64:
      return v1::SCALAR_TYPE_U64;
    case ScalarKind::kF32:
      return v1::SCALAR_TYPE_F32;
    case ScalarKind::kF64:
      return v1::SCALAR_TYPE_F64;
    case ScalarKind::kNone:
      break;
  }
  return v1::SCALAR_TYPE_UNSPECIFIED;
}

Dim3 ToDim3(const v1::Dim3& dim) { return Dim3{dim.x(), dim.y(), dim.z()}; }

BufferAccess ToAccess(v1::Access access) {
  switch (access) {
    case v1::ACCESS_READ:
      return BufferAccess::kRead;
    case v1::ACCESS_WRITE:
      return BufferAccess::kWrite;
    default:
      return BufferAccess::kReadWrite;  // unspecified: the safe assumption
  }
}

TensorMapSpec ToTensorMapSpec(const v1::TensorMapArg& map) {
  static constexpr TensorDataType kTypes[] = {
      TensorDataType::kF32,  // unspecified: the common case
      TensorDataType::kU8,  TensorDataType::kU16, TensorDataType::kU32, TensorDataType::kI32,
      TensorDataType::kU64, TensorDataType::kI64, TensorDataType::kF16, TensorDataType::kF32,
      TensorDataType::kF64, TensorDataType::kBF16};
  static constexpr TensorSwizzle kSwizzles[] = {TensorSwizzle::kNone, TensorSwizzle::k32B,
                                                TensorSwizzle::k64B, TensorSwizzle::k128B};
  TensorMapSpec spec;
  int type = map.data_type();
  spec.data_type = kTypes[type >= 0 && type < 11 ? type : 0];
  int swizzle = map.swizzle();
  spec.swizzle = kSwizzles[swizzle >= 0 && swizzle < 4 ? swizzle : 0];
  spec.global_dims.assign(map.global_dims().begin(), map.global_dims().end());
  spec.global_strides_bytes.assign(map.global_strides_bytes().begin(),
                                   map.global_strides_bytes().end());
  spec.box_dims.assign(map.box_dims().begin(), map.box_dims().end());
  spec.element_strides.assign(map.element_strides().begin(), map.element_strides().end());
  return spec;
}

// The value's bits in the low bytes of a 64-bit slot.
template <typename T>
uint64_t SlotBits(T value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(value));
  return bits;
}

LaunchArgument ToLaunchArgument(const v1::KernelArg& arg) {
  LaunchArgument out;
  switch (arg.arg_case()) {
    case v1::KernelArg::kBuffer:
      out.kind = ParamKind::kBuffer;
      out.buffer = arg.buffer().buffer();
      out.offset_bytes = arg.buffer().offset_bytes();
      out.access = ToAccess(arg.buffer().access());
      break;
    case v1::KernelArg::kTensorMap:
      out.kind = ParamKind::kTensorMap;
      out.buffer = arg.tensor_map().buffer().buffer();
      out.offset_bytes = arg.tensor_map().buffer().offset_bytes();
      out.access = ToAccess(arg.tensor_map().buffer().access());
      out.tensor_map = ToTensorMapSpec(arg.tensor_map());
      break;
    case v1::KernelArg::kScalar:
    case v1::KernelArg::ARG_NOT_SET:
      out.kind = ParamKind::kScalar;
      switch (arg.scalar().value_case()) {
        case v1::ScalarArg::kI32:
          out.scalar = ScalarKind::kI32;
          out.bits = SlotBits(arg.scalar().i32());
          break;
        case v1::ScalarArg::kU32:
          out.scalar = ScalarKind::kU32;
          out.bits = SlotBits(arg.scalar().u32());
          break;
        case v1::ScalarArg::kI64:
          out.scalar = ScalarKind::kI64;
          out.bits = SlotBits(arg.scalar().i64());
          break;
        case v1::ScalarArg::kU64:
          out.scalar = ScalarKind::kU64;
          out.bits = SlotBits(arg.scalar().u64());
          break;
        case v1::ScalarArg::kF32:
          out.scalar = ScalarKind::kF32;
          out.bits = SlotBits(arg.scalar().f32());
          break;
        case v1::ScalarArg::kF64:
          out.scalar = ScalarKind::kF64;
          out.bits = SlotBits(arg.scalar().f64());
          break;
        case v1::ScalarArg::VALUE_NOT_SET:
          break;
      }
      break;
  }
  return out;
}

constexpr absl::string_view kSharedMemory = "shared-memory regions";

// The device-thread half of each command, shared by the unary RPCs and Submit.

absl::Status RunAllocate(CommandInterface& command, SessionId session,
                         const v1::AllocateRequest& request, v1::AllocateResponse* response) {
  absl::StatusOr<BufferId> id = command.Allocate(session, request.size_bytes());
  if (id.ok()) response->set_buffer(*id);
  return id.status();
}

absl::Status RunCopy(CommandInterface& command, SessionId session,
                     const v1::CopyRequest& request) {
  return command.Copy(session, request.stream(), request.source_buffer(),
                      request.source_offset_bytes(), request.target_buffer(),
                      request.target_offset_bytes(), request.size_bytes());
}

absl::Status RunSynchronize(CommandInterface& command, SessionId session,
                            const v1::SynchronizeRequest& request) {
  std::optional<LogicalStream> stream;
  if (request.has_stream()) stream = request.stream();
  return command.Synchronize(session, stream);
}

absl::StatusOr<CopyLayout> WriteLayout(const v1::WriteHeader& header, uint64_t size) {
  if (!header.has_pitched()) return CopyLayout::Contiguous(header.offset_bytes(), size);
  const v1::PitchedLayout& pitched = header.pitched();
  CopyLayout layout = CopyLayout::Pitched(header.offset_bytes(), pitched.width_bytes(),
                                          pitched.height(), pitched.stride_bytes());
  if (layout.host_bytes() != size) {
    return absl::InvalidArgumentError(absl::StrCat("pitched write carries ", size,
                                                   " bytes but its layout holds ",
                                                   layout.host_bytes()));
  }
  return layout;
}

}  // namespace

GpuCommandService::GpuCommandService(std::vector<DeviceDescription> devices, ServerCore* core,
                                     CompileCache* compiler, Metrics* metrics,
                                     uint64_t max_message_bytes)
    : devices_(std::move(devices)),
      core_(core),
      compiler_(compiler),
      metrics_(metrics),
      read_chunk_bytes_(max_message_bytes - kChunkOverheadBytes) {}

template <typename Work>
grpc::ServerUnaryReactor* GpuCommandService::RunOnDevice(grpc::CallbackServerContext* context,
                                                         const std::string& token, Work work) {
  absl::StatusOr<SessionInfo> session = core_->sessions().Touch(token, Clock::now());
  if (!session.ok()) return FinishUnary(context, session.status());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  SessionId id = session->id;
  DeviceWorker* worker = &core_->worker(session->device);
  absl::Status queued = worker->Submit(
      id, [reactor, context, id, worker, work = std::move(work)](CommandInterface& command) mutable {
        absl::Status abandoned = CallAbandoned(context);
        grpc::Status status = ToGrpcStatus(abandoned.ok() ? work(command, id) : abandoned);
        worker->Defer([reactor, status] { reactor->Finish(status); });
      });
  if (!queued.ok()) reactor->Finish(ToGrpcStatus(queued));
  return reactor;
}

// Sessions ------------------------------------------------------------------------------

grpc::ServerUnaryReactor* GpuCommandService::OpenSession(grpc::CallbackServerContext* context,
                                                         const v1::OpenSessionRequest* request,
                                                         v1::OpenSessionResponse* response) {
  absl::Status valid = ValidateOpenSession(*request, core_->device_count());
  if (!valid.ok()) return FinishUnary(context, valid);
  if (!core_->worker(request->device()).ready()) {
    return FinishUnary(context, absl::UnavailableError(absl::StrCat(
                                    "device ", request->device(), " is not ready")));
  }
  response->set_session(
      core_->sessions().Open(request->device(), request->client_name(), Clock::now()));
  return FinishUnary(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* GpuCommandService::CloseSession(
    grpc::CallbackServerContext* context, const v1::CloseSessionRequest* request,
    v1::CloseSessionResponse* response) {
  absl::Status valid = ValidateSessionToken(request->session());
  if (!valid.ok()) return FinishUnary(context, valid);
  std::optional<SessionInfo> session = core_->sessions().Close(request->session());
  if (!session) {
    return FinishUnary(context, absl::NotFoundError("unknown session (closed, expired, or "
                                                    "never opened)"));
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  DeviceWorker* worker = &core_->worker(session->device);
  absl::Status queued = worker->Submit(
      session->id, [reactor, response, worker, id = session->id](CommandInterface& command) {
        response->set_reclaimed_bytes(command.CloseSession(id));
        worker->Defer([reactor] { reactor->Finish(grpc::Status::OK); });
      });
  if (!queued.ok()) {
    core_->Reclaim(*session);  // the memory is reclaimed later; the session is closed now
    reactor->Finish(grpc::Status::OK);
  }
  return reactor;
}

// The lease: while this stream is open the session lives; when it breaks the session is
// reclaimed after the grace period.
class GpuCommandService::KeepAliveReactor final
    : public grpc::ServerBidiReactor<v1::KeepAliveRequest, v1::KeepAliveResponse> {
 public:
  explicit KeepAliveReactor(SessionRegistry* sessions) : sessions_(sessions) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client half-closed or went away
      EndLease();
      Finish(grpc::Status::OK);
      return;
    }
    if (token_.empty()) {
      if (request_.session().empty() ||
          !sessions_->LeaseOpened(request_.session(), Clock::now())) {
        Finish(ToGrpcStatus(absl::NotFoundError("unknown session")));
        return;
      }
      token_ = request_.session();
    } else if (request_.session() != token_) {
      Finish(ToGrpcStatus(absl::InvalidArgumentError("a lease stream serves one session")));
      return;
    } else if (!sessions_->Touch(token_, Clock::now()).ok()) {
      token_.clear();  // closed meanwhile: nothing to hold
      Finish(ToGrpcStatus(absl::NotFoundError("session closed")));
      return;
    }
    StartWrite(&response_);
  }

  void OnWriteDone(bool ok) override {
    if (ok) {
      StartRead(&request_);
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
    if (!token_.empty()) sessions_->LeaseClosed(token_, Clock::now());
    token_.clear();
  }

  SessionRegistry* const sessions_;
  v1::KeepAliveRequest request_;
  v1::KeepAliveResponse response_;
  std::string token_;  // set while this stream holds the session's lease
};

grpc::ServerBidiReactor<v1::KeepAliveRequest, v1::KeepAliveResponse>*
GpuCommandService::KeepAlive(grpc::CallbackServerContext*) {
  return new KeepAliveReactor(&core_->sessions());
}

// Devices -------------------------------------------------------------------------------

grpc::ServerUnaryReactor* GpuCommandService::ListDevices(grpc::CallbackServerContext* context,
                                                         const v1::ListDevicesRequest*,
                                                         v1::ListDevicesResponse* response) {
  for (const DeviceDescription& device : devices_) {
    const DeviceWorker& worker = core_->worker(device.ordinal);
    v1::DeviceInfo* info = response->add_devices();
    info->set_ordinal(device.ordinal);
    info->set_name(device.name);
    info->set_driver(ToProto(device.driver));
    info->set_architecture(device.architecture);
    info->set_memory_capacity_bytes(device.memory_capacity_bytes);
    info->set_memory_used_bytes(worker.usage().memory_used_bytes);
    info->set_max_threads_per_block(device.max_threads_per_block);
    info->set_max_shared_memory_per_block_bytes(device.max_shared_memory_per_block_bytes);
    info->set_ready(worker.ready());
  }
  return FinishUnary(context, absl::OkStatus());
}

// Memory --------------------------------------------------------------------------------

grpc::ServerUnaryReactor* GpuCommandService::Allocate(grpc::CallbackServerContext* context,
                                                      const v1::AllocateRequest* request,
                                                      v1::AllocateResponse* response) {
  absl::Status valid = ValidateAllocate(*request);
  if (!valid.ok()) return FinishUnary(context, valid);
  return RunOnDevice(context, request->session(),
                     [request, response](CommandInterface& command, SessionId session) {
                       return RunAllocate(command, session, *request, response);
                     });
}

grpc::ServerUnaryReactor* GpuCommandService::Free(grpc::CallbackServerContext* context,
                                                  const v1::FreeRequest* request,
                                                  v1::FreeResponse*) {
  absl::Status valid = ValidateSessionToken(request->session());
  if (!valid.ok()) return FinishUnary(context, valid);
  return RunOnDevice(context, request->session(),
                     [request](CommandInterface& command, SessionId session) {
                       return command.Free(session, request->buffer());
                     });
}

// Host -> device: collects the header and the inline chunks, then queues the write.
class GpuCommandService::WriteReactor final : public grpc::ServerReadReactor<v1::WriteRequest> {
 public:
  WriteReactor(ServerCore* core, grpc::CallbackServerContext* context,
               v1::WriteResponse* response)
      : core_(core), context_(context), response_(response) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Submit();
      return;
    }
    if (!header_) {
      if (absl::Status accepted = AcceptHeader(); !accepted.ok()) {
        Finish(ToGrpcStatus(accepted));
        return;
      }
    } else if (request_.has_header()) {
      Finish(ToGrpcStatus(absl::InvalidArgumentError("only the first message has a header")));
      return;
    }
    if (data_.size() + request_.data().size() > header_->inline_size_bytes()) {
      Finish(ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(
          "write sends more than the ", header_->inline_size_bytes(), " bytes it declared"))));
      return;
    }
    data_.append(request_.data());
    StartRead(&request_);
  }

  void OnDone() override { delete this; }

 private:
  absl::Status AcceptHeader() {
    if (!request_.has_header()) {
      return absl::InvalidArgumentError("the first write message must carry the header");
    }
    header_ = request_.header();
    RETURN_IF_ERROR(ValidateWriteHeader(*header_));
    ASSIGN_OR_RETURN(session_, core_->sessions().Touch(header_->session(), Clock::now()));
    if (header_->has_shared_memory()) {
      return NotYet(absl::OkStatus(), kSharedMemory);
    }
    uint64_t capacity = core_->worker(session_.device).usage().memory_capacity_bytes;
    if (header_->inline_size_bytes() > capacity) {
      return absl::InvalidArgumentError(
          absl::StrCat("write of ", header_->inline_size_bytes(), " bytes exceeds the device's ",
                       capacity, " bytes"));
    }
    ASSIGN_OR_RETURN(layout_, WriteLayout(*header_, header_->inline_size_bytes()));
    data_.reserve(header_->inline_size_bytes());
    return absl::OkStatus();
  }

  void Submit() {
    if (!header_) {
      Finish(ToGrpcStatus(absl::InvalidArgumentError("write stream carried no header")));
      return;
    }
    if (data_.size() != header_->inline_size_bytes()) {
      Finish(ToGrpcStatus(absl::InvalidArgumentError(
          absl::StrCat("write declared ", header_->inline_size_bytes(), " bytes but sent ",
                       data_.size(), " (client went away?)"))));
      return;
    }
    DeviceWorker* worker = &core_->worker(session_.device);
    absl::Status queued = worker->Submit(session_.id, [this, worker](CommandInterface& command) {
      absl::Status status = CallAbandoned(context_);
      if (status.ok()) {
        uint64_t size = data_.size();
        status = command.Write(session_.id, header_->stream(), header_->buffer(), layout_,
                               std::move(data_));
        if (status.ok()) response_->set_bytes_written(size);
      }
      worker->Defer([this, status] { Finish(ToGrpcStatus(status)); });
    });
    if (!queued.ok()) Finish(ToGrpcStatus(queued));
  }

  ServerCore* const core_;
  grpc::CallbackServerContext* const context_;
  v1::WriteResponse* const response_;
  v1::WriteRequest request_;
  std::optional<v1::WriteHeader> header_;
  SessionInfo session_;
  CopyLayout layout_;
  std::string data_;
};

grpc::ServerReadReactor<v1::WriteRequest>* GpuCommandService::Write(
    grpc::CallbackServerContext* context, v1::WriteResponse* response) {
  return new WriteReactor(core_, context, response);
}

// Device -> host: queues the read, waits for its fence off the device thread, then
// streams the bytes in chunks.
class GpuCommandService::ReadReactor final : public grpc::ServerWriteReactor<v1::ReadResponse> {
 public:
  ReadReactor(ServerCore* core, grpc::CallbackServerContext* context,
              const v1::ReadRequest* request, uint64_t chunk_bytes)
      : chunk_bytes_(chunk_bytes) {
    if (absl::Status started = Start(core, context, *request); !started.ok()) {
      Finish(ToGrpcStatus(started));
    }
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(ToGrpcStatus(absl::CancelledError("the client stopped reading")));
      return;
    }
    WriteNextChunk();
  }

  void OnDone() override { delete this; }

 private:
  absl::Status Start(ServerCore* core, grpc::CallbackServerContext* context,
                     const v1::ReadRequest& request) {
    RETURN_IF_ERROR(ValidateRead(request));
    if (request.has_shared_memory()) return NotYet(absl::OkStatus(), kSharedMemory);
    ASSIGN_OR_RETURN(SessionInfo session, core->sessions().Touch(request.session(), Clock::now()));
    ASSIGN_OR_RETURN(CopyLayout layout, ReadLayout(request));
    DeviceWorker* worker = &core->worker(session.device);
    return worker->Submit(session.id, [this, worker, context, layout, session,
                                       stream = request.stream(),
                                       buffer = request.buffer()](CommandInterface& command) {
      absl::Status abandoned = CallAbandoned(context);
      if (!abandoned.ok()) {
        Finish(ToGrpcStatus(abandoned));
        return;
      }
      absl::StatusOr<PendingRead> read = command.Read(session.id, stream, buffer, layout);
      if (!read.ok()) {
        Finish(ToGrpcStatus(read.status()));
        return;
      }
      pending_ = *std::move(read);
      worker->Complete([this] { return pending_.wait(); },
                       [this](absl::Status status) {
                         if (status.ok()) {
                           WriteNextChunk();
                         } else {
                           Finish(ToGrpcStatus(status));
                         }
                       });
    });
  }

  void WriteNextChunk() {
    const Bytes& bytes = pending_.bytes;
    if (sent_ == bytes.size() && sent_any_) {
      Finish(grpc::Status::OK);
      return;
    }
    uint64_t size = std::min<uint64_t>(chunk_bytes_, bytes.size() - sent_);
    response_.Clear();
    if (!sent_any_) response_.set_total_bytes(bytes.size());
    response_.set_data(reinterpret_cast<const char*>(bytes.data()) + sent_, size);
    sent_ += size;
    sent_any_ = true;
    StartWrite(&response_);
  }

  const uint64_t chunk_bytes_;
  PendingRead pending_;
  v1::ReadResponse response_;
  uint64_t sent_ = 0;
  bool sent_any_ = false;
};

grpc::ServerWriteReactor<v1::ReadResponse>* GpuCommandService::Read(
    grpc::CallbackServerContext* context, const v1::ReadRequest* request) {
  return new ReadReactor(core_, context, request, read_chunk_bytes_);
}

grpc::ServerUnaryReactor* GpuCommandService::Copy(grpc::CallbackServerContext* context,
                                                  const v1::CopyRequest* request,
                                                  v1::CopyResponse*) {
  absl::Status valid = ValidateCopy(*request);
  if (!valid.ok()) return FinishUnary(context, valid);
  return RunOnDevice(context, request->session(),
                     [request](CommandInterface& command, SessionId session) {
                       return RunCopy(command, session, *request);
                     });
}

grpc::ServerUnaryReactor* GpuCommandService::Defragment(grpc::CallbackServerContext* context,
                                                        const v1::DefragmentRequest* request,
                                                        v1::DefragmentResponse* response) {
  if (request->device() >= static_cast<uint32_t>(core_->device_count())) {
    return FinishUnary(context, absl::InvalidArgumentError(absl::StrCat(
                                    "device ", request->device(), " does not exist")));
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  DeviceWorker* worker = &core_->worker(request->device());
  absl::Status queued = worker->Submit(
      kAdminSessionKey, [reactor, response, worker](CommandInterface& command) {
        absl::StatusOr<RelocationReport> report = command.Relocate();
        if (report.ok()) {
          response->set_pages_relocated(report->pages_relocated);
          response->set_allocations_moved(report->allocations_moved);
          response->set_bytes_moved(report->bytes_moved);
        }
        worker->Defer([reactor, status = ToGrpcStatus(report.status())] {
          reactor->Finish(status);
        });
      });
  if (!queued.ok()) reactor->Finish(ToGrpcStatus(queued));
  return reactor;
}

// Kernels -------------------------------------------------------------------------------

grpc::ServerUnaryReactor* GpuCommandService::Compile(grpc::CallbackServerContext* context,
                                                     const v1::CompileRequest* request,
                                                     v1::CompileResponse* response) {
  absl::Status valid = ValidateCompile(*request);
  if (!valid.ok()) return FinishUnary(context, valid);
  absl::StatusOr<SessionInfo> session = core_->sessions().Touch(request->session(), Clock::now());
  if (!session.ok()) return FinishUnary(context, session.status());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  KernelSource kernel{request->source(), request->entry_point(),
                      {request->options().begin(), request->options().end()}};
  // A failed compile is remembered under its id: clients get it in trailing metadata so
  // a launch of it can be skipped and taint its outputs.
  context->AddTrailingMetadata(std::string(kKernelIdTrailer), compiler_->IdFor(kernel).hex);
  compiler_->Compile(std::move(kernel), [reactor, response](
                                            absl::StatusOr<CompileCache::Result> result) {
    if (result.ok()) {
      response->set_kernel_id(result->kernel.id.hex);
      response->set_cache_hit(result->cache_hit);
      response->set_log(result->kernel.log);
      for (const KernelParam& param : result->kernel.params) {
        v1::KernelParam* out = response->add_params();
        out->set_kind(ToProto(param.kind));
        out->set_scalar_type(ToProto(param.scalar));
        out->set_declared_type(param.declared_type);
      }
    }
    reactor->Finish(ToGrpcStatus(result.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* GpuCommandService::Launch(grpc::CallbackServerContext* context,
                                                    const v1::LaunchRequest* request,
                                                    v1::LaunchResponse*) {
  absl::Status valid = ValidateLaunch(*request);
  if (!valid.ok()) return FinishUnary(context, valid);
  absl::StatusOr<KernelLaunch> launch = PrepareLaunch(*request);
  if (!launch.ok()) return FinishUnary(context, launch.status());
  return RunOnDevice(context, request->session(),
                     [launch = *std::move(launch), stream = request->stream()](
                         CommandInterface& command, SessionId session) {
                       return command.Launch(session, stream, launch);
                     });
}

absl::StatusOr<KernelLaunch> GpuCommandService::PrepareLaunch(
    const v1::LaunchRequest& request) const {
  KernelLaunch launch;
  launch.kernel = KernelId{request.kernel_id()};
  absl::StatusOr<CompiledKernel> compiled = compiler_->Lookup(launch.kernel);
  if (absl::IsNotFound(compiled.status())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "kernel ", request.kernel_id(), " is not compiled: call Compile first"));
  }
  if (compiled.ok()) {
    launch.params = compiled->params;
  } else {
    launch.params = compiled.status();  // the launch is skipped; its outputs tainted
  }
  launch.grid = ToDim3(request.grid());
  launch.block = ToDim3(request.block());
  launch.dynamic_shared_memory_bytes = request.dynamic_shared_memory_bytes();
  for (const v1::KernelArg& arg : request.args()) launch.args.push_back(ToLaunchArgument(arg));
  return launch;
}

// Ordering ------------------------------------------------------------------------------

grpc::ServerUnaryReactor* GpuCommandService::Synchronize(grpc::CallbackServerContext* context,
                                                         const v1::SynchronizeRequest* request,
                                                         v1::SynchronizeResponse*) {
  absl::Status valid = ValidateSessionToken(request->session());
  if (!valid.ok()) return FinishUnary(context, valid);
  return RunOnDevice(context, request->session(),
                     [request](CommandInterface& command, SessionId session) {
                       return RunSynchronize(command, session, *request);
                     });
}

// Batches of commands on one stream. A batch runs in order and is answered as a whole:
// consecutive commands of one session run as one device task (one queue hop for the
// lot); a compile runs on the compile pool between them; reads finish off the device
// thread. One batch is in flight per stream.
class GpuCommandService::SubmitReactor final
    : public grpc::ServerBidiReactor<v1::SubmitRequest, v1::SubmitResponse> {
 public:
  SubmitReactor(GpuCommandService* service, grpc::CallbackServerContext* context)
      : service_(service), context_(context) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);
      return;
    }
    response_.Clear();
    for (const v1::Command& command : request_.commands()) {
      response_.add_replies()->set_sequence(command.sequence());
    }
    next_ = 0;
    RunNext();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(ToGrpcStatus(absl::CancelledError("the client stopped reading replies")));
      return;
    }
    StartRead(&request_);
  }

  void OnDone() override { delete this; }

 private:
  static void SetStatus(v1::CommandReply* reply, const absl::Status& status) {
    reply->mutable_status()->set_code(static_cast<int>(status.code()));
    reply->mutable_status()->set_message(std::string(status.message()));
  }

  static const std::string& SessionOf(const v1::Command& command) {
    switch (command.command_case()) {
      case v1::Command::kAllocate:
        return command.allocate().session();
      case v1::Command::kFree:
        return command.free().session();
      case v1::Command::kWrite:
        return command.write().header().session();
      case v1::Command::kRead:
        return command.read().session();
      case v1::Command::kCopy:
        return command.copy().session();
      case v1::Command::kCompile:
        return command.compile().session();
      case v1::Command::kLaunch:
        return command.launch().session();
      case v1::Command::kSynchronize:
        return command.synchronize().session();
      case v1::Command::COMMAND_NOT_SET:
        break;
    }
    static const std::string* const kNone = new std::string();
    return *kNone;
  }

  // Runs the batch from `next_`; writes the replies after the last command.
  void RunNext() {
    const int count = request_.commands_size();
    if (next_ >= count) {
      StartWrite(&response_);
      return;
    }
    const v1::Command& first = request_.commands(next_);
    v1::CommandReply* reply = response_.mutable_replies(next_);
    absl::Status abandoned = CallAbandoned(context_);
    absl::StatusOr<SessionInfo> session =
        abandoned.ok() ? service_->core_->sessions().Touch(SessionOf(first), Clock::now())
                       : absl::StatusOr<SessionInfo>(abandoned);
    if (first.command_case() == v1::Command::COMMAND_NOT_SET) {
      session = absl::InvalidArgumentError("empty command");
    }
    if (!session.ok()) {
      SetStatus(reply, session.status());
      ++next_;
      RunNext();
      return;
    }
    if (first.command_case() == v1::Command::kCompile) {
      RunCompile(first.compile(), reply);
      return;
    }
    int end = next_;
    while (end < count && request_.commands(end).command_case() != v1::Command::kCompile &&
           request_.commands(end).command_case() != v1::Command::COMMAND_NOT_SET &&
           SessionOf(request_.commands(end)) == SessionOf(first)) {
      ++end;
    }
    RunOnDevice(*session, next_, end);
  }

  void RunCompile(const v1::CompileRequest& request, v1::CommandReply* reply) {
    absl::Status valid = ValidateCompile(request);
    if (!valid.ok()) {
      SetStatus(reply, valid);
      ++next_;
      RunNext();
      return;
    }
    KernelSource kernel{request.source(), request.entry_point(),
                        {request.options().begin(), request.options().end()}};
    service_->compiler_->Compile(
        std::move(kernel), [this, reply](absl::StatusOr<CompileCache::Result> result) {
          if (result.ok()) {
            v1::CompileResponse* compiled = reply->mutable_compile();
            compiled->set_kernel_id(result->kernel.id.hex);
            compiled->set_cache_hit(result->cache_hit);
            compiled->set_log(result->kernel.log);
          }
          SetStatus(reply, result.status());
          ++next_;
          RunNext();
        });
  }

  // Commands [begin, end) of one session, in one device task.
  void RunOnDevice(const SessionInfo& session, int begin, int end) {
    // Launches are resolved against the compile cache first, off the device thread.
    std::vector<absl::StatusOr<KernelLaunch>> launches(end - begin,
                                                       absl::UnknownError("not a launch"));
    for (int i = begin; i < end; ++i) {
      const v1::Command& command = request_.commands(i);
      if (command.has_launch()) {
        absl::Status valid = ValidateLaunch(command.launch());
        launches[i - begin] = valid.ok() ? service_->PrepareLaunch(command.launch())
                                         : absl::StatusOr<KernelLaunch>(valid);
      }
    }
    DeviceWorker* worker = &service_->core_->worker(session.device);
    absl::Status queued = worker->Submit(
        session.id, [this, worker, session, begin, end,
                     launches = std::move(launches)](CommandInterface& command) mutable {
          auto reads = std::make_shared<std::vector<std::pair<int, PendingRead>>>();
          for (int i = begin; i < end; ++i) {
            absl::StatusOr<PendingRead> read = absl::UnknownError("not a read");
            absl::Status status =
                Execute(command, session.id, request_.commands(i), launches[i - begin], &read,
                        response_.mutable_replies(i));
            if (request_.commands(i).has_read() && status.ok()) {
              reads->emplace_back(i, *std::move(read));
            }
            SetStatus(response_.mutable_replies(i), status);
          }
          worker->Complete(
              [reads] {
                for (auto& [index, read] : *reads) read.wait().IgnoreError();
                return absl::OkStatus();
              },
              [this, reads, end](absl::Status) {
                for (auto& [index, read] : *reads) {
                  v1::CommandReply* reply = response_.mutable_replies(index);
                  absl::Status status = read.wait();  // complete: returns at once
                  if (status.ok()) {
                    reply->mutable_read()->set_total_bytes(read.bytes.size());
                    reply->mutable_read()->set_data(
                        reinterpret_cast<const char*>(read.bytes.data()), read.bytes.size());
                  }
                  SetStatus(reply, status);
                }
                reads->clear();
                next_ = end;
                RunNext();
              });
        });
    if (!queued.ok()) {
      for (int i = begin; i < end; ++i) SetStatus(response_.mutable_replies(i), queued);
      next_ = end;
      RunNext();
    }
  }

  // One command on the device thread. Reads only enqueue; their bytes come later.
  static absl::Status Execute(CommandInterface& command, SessionId session,
                              const v1::Command& request,
                              const absl::StatusOr<KernelLaunch>& launch,
                              absl::StatusOr<PendingRead>* read, v1::CommandReply* reply) {
    switch (request.command_case()) {
      case v1::Command::kAllocate: {
        RETURN_IF_ERROR(ValidateAllocate(request.allocate()));
        return RunAllocate(command, session, request.allocate(), reply->mutable_allocate());
      }
      case v1::Command::kFree:
        reply->mutable_free();
        return command.Free(session, request.free().buffer());
      case v1::Command::kWrite: {
        const v1::WriteRequest& write = request.write();
        if (write.header().has_shared_memory()) return NotYet(absl::OkStatus(), kSharedMemory);
        RETURN_IF_ERROR(ValidatePitchedLayoutIfAny(write.header()));
        ASSIGN_OR_RETURN(CopyLayout layout, WriteLayout(write.header(), write.data().size()));
        RETURN_IF_ERROR(command.Write(session, write.header().stream(), write.header().buffer(),
                                      layout, write.data()));
        reply->mutable_write()->set_bytes_written(write.data().size());
        return absl::OkStatus();
      }
      case v1::Command::kRead: {
        RETURN_IF_ERROR(ValidateRead(request.read()));
        if (request.read().has_shared_memory()) return NotYet(absl::OkStatus(), kSharedMemory);
        ASSIGN_OR_RETURN(CopyLayout layout, ReadLayout(request.read()));
        *read = command.Read(session, request.read().stream(), request.read().buffer(), layout);
        return read->status();
      }
      case v1::Command::kCopy:
        RETURN_IF_ERROR(ValidateCopy(request.copy()));
        reply->mutable_copy();
        return RunCopy(command, session, request.copy());
      case v1::Command::kLaunch:
        RETURN_IF_ERROR(launch.status());
        reply->mutable_launch();
        return command.Launch(session, request.launch().stream(), *launch);
      case v1::Command::kSynchronize:
        reply->mutable_synchronize();
        return RunSynchronize(command, session, request.synchronize());
      case v1::Command::kCompile:
      case v1::Command::COMMAND_NOT_SET:
        break;
    }
    return absl::InvalidArgumentError("unexpected command in a device batch");
  }

  static absl::Status ValidatePitchedLayoutIfAny(const v1::WriteHeader& header) {
    return header.has_pitched() ? ValidatePitchedLayout(header.pitched()) : absl::OkStatus();
  }

  GpuCommandService* const service_;
  grpc::CallbackServerContext* const context_;
  v1::SubmitRequest request_;
  v1::SubmitResponse response_;
  int next_ = 0;
};

grpc::ServerBidiReactor<v1::SubmitRequest, v1::SubmitResponse>* GpuCommandService::Submit(
    grpc::CallbackServerContext* context) {
  return new SubmitReactor(this, context);
}

// Shared memory -------------------------------------------------------------------------

grpc::ServerUnaryReactor* GpuCommandService::RegisterSharedMemory(
    grpc::CallbackServerContext* context, const v1::RegisterSharedMemoryRequest* request,
    v1::RegisterSharedMemoryResponse*) {
  return FinishUnary(context, NotYet(ValidateSessionToken(request->session()), kSharedMemory));
}

grpc::ServerUnaryReactor* GpuCommandService::UnregisterSharedMemory(
    grpc::CallbackServerContext* context, const v1::UnregisterSharedMemoryRequest* request,
    v1::UnregisterSharedMemoryResponse*) {
  return FinishUnary(context, NotYet(ValidateSessionToken(request->session()), kSharedMemory));
}

// Observability -------------------------------------------------------------------------

grpc::ServerUnaryReactor* GpuCommandService::GetStats(grpc::CallbackServerContext* context,
                                                      const v1::GetStatsRequest* request,
                                                      v1::GetStatsResponse* response) {
  if (!request->session().empty()) {
    absl::StatusOr<SessionInfo> session =
        core_->sessions().Touch(request->session(), Clock::now());
    if (!session.ok()) return FinishUnary(context, session.status());
    DeviceUsage usage = core_->worker(session->device).usage();
    SessionUsage mine = usage.sessions.contains(session->id) ? usage.sessions[session->id]
                                                             : SessionUsage();
    v1::SessionStats* stats = response->mutable_session();
    stats->set_client_name(session->client_name);
    stats->set_device(session->device);
    stats->set_memory_used_bytes(mine.memory_used_bytes);
    stats->set_buffers(mine.buffers);
  }
  for (int device = 0; device < core_->device_count(); ++device) {
    const DeviceWorker& worker = core_->worker(device);
    DeviceUsage usage = worker.usage();
    v1::DeviceStats* stats = response->add_devices();
    stats->set_device(device);
    stats->set_memory_capacity_bytes(usage.memory_capacity_bytes);
    stats->set_memory_used_bytes(usage.memory_used_bytes);
    stats->set_memory_reserved_bytes(usage.memory_reserved_bytes);
    stats->set_queue_depth(worker.queue_depth());
    stats->set_commands_in_flight(
        static_cast<uint64_t>(metrics_->CommandsInFlight(device).Value()));
    stats->set_drop_queue_bytes(usage.drop_queue_bytes);
    stats->set_drop_queue_entries(usage.drop_queue_entries);
    stats->set_relocations(usage.relocations);
    stats->set_sessions(usage.sessions.size());
  }
  response->set_sessions_open(core_->sessions().size());
  response->set_uptime_seconds(static_cast<uint64_t>(metrics_->UptimeSeconds()));
  response->set_version(kVersion);
  return FinishUnary(context, absl::OkStatus());
}

}  // namespace gpucmd
