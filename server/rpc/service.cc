#include "server/rpc/service.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/rpc/grpc_status.h"
#include "server/rpc/keep_alive_reactor.h"
#include "server/rpc/read_reactor.h"
#include "server/rpc/request_conversion.h"
#include "server/rpc/request_validation.h"
#include "server/rpc/submit_reactor.h"
#include "server/rpc/unary_call.h"
#include "server/rpc/write_reactor.h"
#include "server/version.h"

namespace gpucmd {
namespace {

constexpr absl::string_view kKernelIdTrailer = "gpucmd-kernel-id";
// Framing and field overhead left free in each streamed chunk.
constexpr uint64_t kChunkOverheadBytes = 1024;

// Finishes a unary call with `status`.
grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context,
                                      const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// `valid`, or else INVALID_ARGUMENT saying `missing` when the request names no
// shared-memory slice.
absl::Status NamesSlice(absl::Status valid, bool names_slice, absl::string_view missing) {
  if (valid.ok() && !names_slice) return absl::InvalidArgumentError(missing);
  return valid;
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

}  // namespace

GpuCommandService::GpuCommandService(std::vector<DeviceDescription> devices, ServerCore* core,
                                     CompileCache* compiler, Metrics* metrics,
                                     uint64_t max_message_bytes, AdminPolicy admin)
    : environment_{.devices = std::move(devices),
                   .core = core,
                   .compiler = compiler,
                   .metrics = metrics,
                   .read_chunk_bytes = max_message_bytes - kChunkOverheadBytes},
      admin_(std::move(admin)) {}

grpc::ServerUnaryReactor* GpuCommandService::RunUnary(
    grpc::CallbackServerContext* context, const absl::Status& valid, const std::string& token,
    absl::string_view kind,
    absl::AnyInvocable<absl::StatusOr<Operation>(const DeviceDescription&,
                                                 const SessionRegions&)>
        convert,
    absl::AnyInvocable<void(const OperationResult&)> reply) {
  if (!valid.ok()) return FinishUnary(context, valid);
  absl::StatusOr<SessionInfo> session = environment_.Touch(token);
  if (!session.ok()) return FinishUnary(context, session.status());
  absl::StatusOr<Operation> operation =
      convert(environment_.devices[session->device],
              SessionRegions{&environment_.core->shared_memory(), session->id});
  if (!operation.ok()) return FinishUnary(context, operation.status());
  // Note [Cancelled calls end at once].
  auto answer = std::make_shared<UnaryAnswer>(context);
  RunBatchOfOne(environment_, answer->Abandoned(), *session, kind, *std::move(operation),
                [answer, reply = std::move(reply)](OperationResult& result) mutable {
                  answer->Answer(result.status, [&] {
                    if (result.status.ok()) reply(result);
                  });
                });
  return answer->Reactor();
}

// Sessions ------------------------------------------------------------------------------

grpc::ServerUnaryReactor* GpuCommandService::OpenSession(grpc::CallbackServerContext* context,
                                                         const v1::OpenSessionRequest* request,
                                                         v1::OpenSessionResponse* response) {
  ServerCore& core = *environment_.core;
  absl::Status valid = ValidateOpenSession(*request, core.device_count());
  if (!valid.ok()) return FinishUnary(context, valid);
  const DeviceWorker& worker = core.worker(request->device());
  if (!worker.ready()) {
    // With why the device failed to start or is down since a loss, if it is not starting.
    absl::Status why = worker.init_status();
    return FinishUnary(context, absl::UnavailableError(absl::StrCat(
                                    "device ", request->device(), " is not ready",
                                    why.ok() ? "" : ": ", why.message())));
  }
  absl::StatusOr<std::string> token =
      core.sessions().Open(request->device(), request->client_name(),
                           IdentifyPeer(*context).Key(), SessionRegistry::Clock::now());
  if (token.ok()) {
    response->set_session(*std::move(token));
    response->set_idle_timeout_ms(
        std::chrono::duration_cast<std::chrono::milliseconds>(core.sessions().idle_timeout())
            .count());
  }
  return FinishUnary(context, token.status());
}

grpc::ServerUnaryReactor* GpuCommandService::CloseSession(
    grpc::CallbackServerContext* context, const v1::CloseSessionRequest* request,
    v1::CloseSessionResponse* response) {
  absl::Status valid = ValidateSessionToken(request->session());
  if (!valid.ok()) return FinishUnary(context, valid);
  ServerCore& core = *environment_.core;
  std::optional<SessionInfo> session = core.sessions().Close(request->session());
  if (!session) {
    return FinishUnary(context, absl::NotFoundError("unknown session (closed, expired, or "
                                                    "never opened)"));
  }
  core.shared_memory().DropSession(session->id);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  DeviceWorker* worker = &core.worker(session->device);
  absl::Status queued = worker->Submit(
      session->id, [reactor, response, worker, id = session->id](CommandInterface& command) {
        response->set_reclaimed_bytes(command.CloseSession(id));
        worker->Defer([reactor] { reactor->Finish(grpc::Status::OK); });
      });
  if (!queued.ok()) {
    core.Reclaim(*session);  // the memory is reclaimed later; the session is closed now
    reactor->Finish(grpc::Status::OK);
  }
  return reactor;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* GpuCommandService::KeepAlive(
    grpc::CallbackServerContext*) {
  return new KeepAliveReactor(&environment_.core->sessions(), &lease_streams_);
}

void GpuCommandService::EndLeases(const absl::Status& status) { lease_streams_.EndAll(status); }

// Devices -------------------------------------------------------------------------------

grpc::ServerUnaryReactor* GpuCommandService::ListDevices(grpc::CallbackServerContext* context,
                                                         const v1::ListDevicesRequest*,
                                                         v1::ListDevicesResponse* response) {
  for (const DeviceDescription& device : environment_.devices) {
    const DeviceWorker& worker = environment_.core->worker(device.ordinal);
    v1::DeviceInfo* info = response->add_devices();
    info->set_ordinal(device.ordinal);
    info->set_name(device.name);
    info->set_driver(ToProto(device.driver));
    info->set_architecture(device.architecture);
    info->set_memory_capacity_bytes(device.memory_capacity_bytes);
    info->set_memory_used_bytes(worker.device_usage().memory_used_bytes);
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
  return RunUnary(
      context, ValidateAllocate(*request), request->session(), "allocate",
      [request](const DeviceDescription&, const SessionRegions&) { return ToOperation(*request); },
      [response](const OperationResult& result) { response->set_buffer(result.allocated); });
}

grpc::ServerUnaryReactor* GpuCommandService::Free(grpc::CallbackServerContext* context,
                                                  const v1::FreeRequest* request,
                                                  v1::FreeResponse*) {
  return RunUnary(
      context, ValidateSessionToken(request->session()), request->session(), "free",
      [request](const DeviceDescription&, const SessionRegions&) {
        return ToOperation(*request, BatchAllocations());
      },
      [](const OperationResult&) {});
}

grpc::ServerReadReactor<grpc::ByteBuffer>* GpuCommandService::Write(
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response) {
  return new WriteReactor(&environment_, context, response);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* GpuCommandService::Read(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return new ReadReactor(&environment_, context, *request);
}

grpc::ServerUnaryReactor* GpuCommandService::WriteShared(grpc::CallbackServerContext* context,
                                                         const v1::WriteHeader* request,
                                                         v1::WriteResponse* response) {
  return RunUnary(
      context,
      NamesSlice(ValidateWriteHeader(*request), request->has_shared_memory(),
                 "WriteShared copies from a shared-memory slice: set `shared_memory` (inline "
                 "bytes go through Write)"),
      request->session(), "write",
      [request](const DeviceDescription& device,
                const SessionRegions& regions) -> absl::StatusOr<Operation> {
        ASSIGN_OR_RETURN(Operation write,
                         ToOperation(*request, "", device, BatchAllocations(), regions));
        std::get<WriteOp>(write).answer_when_copied = true;
        return write;
      },
      [response](const OperationResult& result) {
        response->set_bytes_written(result.bytes_written);
      });
}

grpc::ServerUnaryReactor* GpuCommandService::ReadShared(grpc::CallbackServerContext* context,
                                                        const v1::ReadRequest* request,
                                                        v1::ReadResponse* response) {
  return RunUnary(
      context,
      NamesSlice(ValidateRead(*request), request->has_shared_memory(),
                 "ReadShared copies into a shared-memory slice: set `shared_memory` (inline "
                 "reads go through Read)"),
      request->session(), "read",
      [request](const DeviceDescription&, const SessionRegions& regions) {
        return ToOperation(*request, BatchAllocations(), regions);
      },
      [response](const OperationResult& result) {
        response->set_total_bytes(result.read->bytes.size());
      });
}

grpc::ServerUnaryReactor* GpuCommandService::Copy(grpc::CallbackServerContext* context,
                                                  const v1::CopyRequest* request,
                                                  v1::CopyResponse*) {
  return RunUnary(
      context, ValidateCopy(*request), request->session(), "copy",
      [request](const DeviceDescription&, const SessionRegions&) {
        return ToOperation(*request, BatchAllocations());
      },
      [](const OperationResult&) {});
}

grpc::ServerUnaryReactor* GpuCommandService::Fill(grpc::CallbackServerContext* context,
                                                  const v1::FillRequest* request,
                                                  v1::FillResponse*) {
  return RunUnary(
      context, ValidateFill(*request), request->session(), "fill",
      [request](const DeviceDescription&, const SessionRegions&) {
        return ToOperation(*request, BatchAllocations());
      },
      [](const OperationResult&) {});
}

grpc::ServerUnaryReactor* GpuCommandService::Defragment(grpc::CallbackServerContext* context,
                                                        const v1::DefragmentRequest* request,
                                                        v1::DefragmentResponse* response) {
  ServerCore& core = *environment_.core;
  if (request->device() >= static_cast<uint32_t>(core.device_count())) {
    return FinishUnary(context, absl::InvalidArgumentError(absl::StrCat(
                                    "device ", request->device(), " does not exist")));
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  DeviceWorker* worker = &core.worker(request->device());
  absl::Status queued = worker->Submit(
      kNoSession, [reactor, response, worker](CommandInterface& command) {
        absl::StatusOr<RelocationReport> report = command.Relocate();
        if (report.ok()) {
          response->set_pages_relocated(report->pages_relocated);
          response->set_allocations_moved(report->allocations_moved);
          response->set_bytes_moved(report->bytes_moved);
          response->set_deferred(report->deferred);
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
  absl::StatusOr<SessionInfo> session = environment_.Touch(request->session());
  if (!session.ok()) return FinishUnary(context, session.status());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  KernelSource kernel{request->source(), request->entry_point(),
                      {request->options().begin(), request->options().end()}};
  KernelId id = environment_.compiler->IdFor(kernel);
  // A failed compile is remembered under its id: clients get it in trailing metadata so
  // a launch of it can be skipped and taint its outputs.
  context->AddTrailingMetadata(std::string(kKernelIdTrailer), id.hex);
  environment_.compiler->Compile(
      session->id, std::move(kernel),
      [reactor, response, id](absl::StatusOr<CompileCache::Result> result) {
        FillCompileResponse(id, result, response);
        reactor->Finish(ToGrpcStatus(result.status()));
      });
  return reactor;
}

grpc::ServerUnaryReactor* GpuCommandService::GetCompileLog(
    grpc::CallbackServerContext* context, const v1::GetCompileLogRequest* request,
    v1::GetCompileLogResponse* response) {
  absl::Status valid = ValidateSessionToken(request->session());
  if (valid.ok()) valid = ValidateKernelId(request->kernel_id());
  if (!valid.ok()) return FinishUnary(context, valid);
  absl::StatusOr<SessionInfo> session = environment_.Touch(request->session());
  if (!session.ok()) return FinishUnary(context, session.status());
  absl::StatusOr<CompileCache::CompileLog> log =
      environment_.compiler->LogOf(KernelId{request->kernel_id()});
  if (log.ok()) {
    response->set_failed(log->failed);
    response->set_log(std::move(log->log));
  }
  return FinishUnary(context, log.status());
}

grpc::ServerUnaryReactor* GpuCommandService::Launch(grpc::CallbackServerContext* context,
                                                    const v1::LaunchRequest* request,
                                                    v1::LaunchResponse*) {
  return RunUnary(
      context, ValidateLaunch(*request), request->session(), "launch",
      [request](const DeviceDescription& device, const SessionRegions&) {
        return ToOperation(*request, device, BatchAllocations());
      },
      [](const OperationResult&) {});
}

// Ordering ------------------------------------------------------------------------------

grpc::ServerUnaryReactor* GpuCommandService::Synchronize(grpc::CallbackServerContext* context,
                                                         const v1::SynchronizeRequest* request,
                                                         v1::SynchronizeResponse* response) {
  return RunUnary(
      context, ValidateSessionToken(request->session()), request->session(), "synchronize",
      [request](const DeviceDescription&, const SessionRegions&) { return ToOperation(*request); },
      [response](const OperationResult& result) {
        response->set_kernel_output(result.kernel_output);
      });
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* GpuCommandService::Submit(
    grpc::CallbackServerContext* context) {
  return new SubmitReactor(&environment_, context);
}

// Shared memory -------------------------------------------------------------------------

grpc::ServerUnaryReactor* GpuCommandService::RegisterSharedMemory(
    grpc::CallbackServerContext* context, const v1::RegisterSharedMemoryRequest* request,
    v1::RegisterSharedMemoryResponse* response) {
  if (absl::Status valid = ValidateSessionToken(request->session()); !valid.ok()) {
    return FinishUnary(context, valid);
  }
  ServerCore& core = *environment_.core;
  absl::StatusOr<SessionInfo> session = environment_.Touch(request->session());
  // The caller's handoff is for this registration: taken whatever comes next, so that a
  // refused one does not hold one of the user's places until it expires.
  absl::StatusOr<int> fd = core.handoffs().Take(request->handoff(), IdentifyPeer(*context).Key());
  if (!session.ok()) {
    if (fd.ok()) close(*fd);
    return FinishUnary(context, session.status());
  }
  if (!fd.ok()) return FinishUnary(context, fd.status());
  SharedMemoryTable* table = &core.shared_memory();
  absl::StatusOr<RegionId> region = table->Register(session->id, *fd, request->size_bytes());
  if (!region.ok()) return FinishUnary(context, region.status());
  // A close since Touch dropped the session's regions (after marking it closed), maybe
  // before this one came: it must not outlive the session.
  if (session->closed != nullptr && session->closed->load(std::memory_order_acquire)) {
    table->Unregister(session->id, *region).IgnoreError();
    return FinishUnary(context,
                       absl::NotFoundError("the session was closed while the region registered"));
  }
  response->set_region(*region);
  // The device registers the whole region for direct copies; the reply waits for it, so
  // that the client's first copy already goes straight to the device.
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  DeviceWorker* worker = &core.worker(session->device);
  absl::Status queued = worker->Submit(
      session->id, [reactor, response, worker, table, id = session->id,
                    region = *region](CommandInterface& command) {
        response->set_direct_device_access(table->RegisterWithDevice(
            id, region, [&command](const HostResource& host) {
              return command.RegisterHost(host);
            }));
        worker->Defer([reactor] { reactor->Finish(grpc::Status::OK); });
      });
  if (!queued.ok()) {
    table->Unregister(session->id, *region).IgnoreError();
    reactor->Finish(ToGrpcStatus(queued));
  }
  return reactor;
}

grpc::ServerUnaryReactor* GpuCommandService::UnregisterSharedMemory(
    grpc::CallbackServerContext* context, const v1::UnregisterSharedMemoryRequest* request,
    v1::UnregisterSharedMemoryResponse*) {
  if (absl::Status valid = ValidateSessionToken(request->session()); !valid.ok()) {
    return FinishUnary(context, valid);
  }
  absl::StatusOr<SessionInfo> session = environment_.Touch(request->session());
  if (!session.ok()) return FinishUnary(context, session.status());
  return FinishUnary(context,
                     environment_.core->shared_memory().Unregister(session->id, request->region()));
}

// Observability -------------------------------------------------------------------------

namespace {

// The session's commands not yet run to their end: queued for its device thread, and
// launches, device copies and reads queued on its streams.
uint64_t QueuedCommands(const ServerCore& core, const SessionInfo& session,
                        const SessionUsage& usage) {
  return core.worker(session.device).queued_for(session.id) + usage.queued_on_streams;
}

}  // namespace

grpc::ServerUnaryReactor* GpuCommandService::GetStats(grpc::CallbackServerContext* context,
                                                      const v1::GetStatsRequest* request,
                                                      v1::GetStatsResponse* response) {
  ServerCore& core = *environment_.core;
  if (!request->session().empty()) {
    absl::StatusOr<SessionInfo> session = environment_.Touch(request->session());
    if (!session.ok()) return FinishUnary(context, session.status());
    const SessionUsage mine = core.worker(session->device).usage_of(session->id);
    v1::SessionStats* stats = response->mutable_session();
    stats->set_client_name(session->client_name);
    stats->set_device(session->device);
    stats->set_memory_used_bytes(mine.memory_used_bytes);
    stats->set_buffers(mine.buffers);
    stats->set_queued_commands(QueuedCommands(core, *session, mine));
    stats->set_shared_memory_regions(core.shared_memory().RegionsOf(session->id));
    stats->set_inline_bytes_held(core.inline_budget().HeldBy(session->id));
  }
  response->set_inline_bytes_held(core.inline_budget().HeldByAll());
  const SharedMemoryTable::Usage shared = core.shared_memory().usage();
  response->set_shared_memory_regions(shared.regions);
  response->set_shared_memory_bytes(shared.mapped_bytes);
  for (int device = 0; device < core.device_count(); ++device) {
    const DeviceWorker& worker = core.worker(device);
    const DeviceUsage usage = worker.device_usage();
    v1::DeviceStats* stats = response->add_devices();
    stats->set_device(device);
    stats->set_memory_capacity_bytes(usage.memory_capacity_bytes);
    stats->set_memory_used_bytes(usage.memory_used_bytes);
    stats->set_memory_reserved_bytes(usage.memory_reserved_bytes);
    stats->set_queue_depth(worker.queue_depth());
    stats->set_commands_in_flight(
        static_cast<uint64_t>(environment_.metrics->CommandsInFlight(device).Value()));
    stats->set_drop_queue_bytes(usage.drop_queue_bytes);
    stats->set_drop_queue_entries(usage.drop_queue_entries);
    stats->set_stream_queued_commands(usage.queued_on_streams);
    stats->set_relocations(usage.relocations);
    stats->set_sessions(worker.sessions_held());
    const Metrics& metrics = *environment_.metrics;
    stats->set_launches(metrics.Launches(device));
    stats->set_bytes_host_to_device(metrics.CopiedBytes(device, Metrics::Direction::kHostToDevice));
    stats->set_bytes_device_to_host(metrics.CopiedBytes(device, Metrics::Direction::kDeviceToHost));
    stats->set_bytes_device_to_device(
        metrics.CopiedBytes(device, Metrics::Direction::kDeviceToDevice));
  }
  response->set_sessions_open(core.sessions().size());
  response->set_uptime_seconds(static_cast<uint64_t>(environment_.metrics->UptimeSeconds()));
  response->set_version(kVersion);
  return FinishUnary(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* GpuCommandService::ListSessions(grpc::CallbackServerContext* context,
                                                          const v1::ListSessionsRequest*,
                                                          v1::ListSessionsResponse* response) {
  const ServerCore& core = *environment_.core;
  const PeerIdentity caller = IdentifyPeer(*context);
  const std::string caller_key = caller.Key();
  const bool all_clients = admin_.IsAdmin(caller);
  response->set_all_clients(all_clients);
  response->set_caller(caller_key);
  std::vector<ServerCore::SessionWithUsage> visible = core.SessionsWithUsage();
  std::erase_if(visible, [&](const ServerCore::SessionWithUsage& session) {
    return !all_clients && (caller_key.empty() || session.info.owner != caller_key);
  });
  std::sort(visible.begin(), visible.end(),
            [](const ServerCore::SessionWithUsage& a, const ServerCore::SessionWithUsage& b) {
              return a.info.id < b.info.id;
            });
  const auto now = SessionRegistry::Clock::now();
  // The reply fits a message: room for the fields after the list, and each entry's tag
  // and length besides its bytes.
  constexpr size_t kEntryFramingBytes = 8;
  size_t reply_bytes = 64 + caller_key.size();
  for (const auto& [session, usage] : visible) {
    v1::SessionSummary entry;
    entry.set_id(session.id);
    entry.set_client_name(session.client_name);
    entry.set_device(session.device);
    entry.set_owner(session.owner);
    entry.set_memory_used_bytes(usage.memory_used_bytes);
    entry.set_buffers(usage.buffers);
    entry.set_queued_commands(QueuedCommands(core, session, usage));
    entry.set_launches(usage.launches);
    entry.set_age_seconds(static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::seconds>(now - session.opened).count()));
    reply_bytes += entry.ByteSizeLong() + kEntryFramingBytes;
    if (reply_bytes > environment_.read_chunk_bytes) {
      response->set_omitted(response->omitted() + 1);
    } else {
      *response->add_sessions() = std::move(entry);
    }
  }
  return FinishUnary(context, absl::OkStatus());
}

}  // namespace gpucmd
