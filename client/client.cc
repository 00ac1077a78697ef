#include "client/client.h"

#include <algorithm>

#include "absl/functional/function_ref.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "base/status_macros.h"
#include "client/read_messages.h"
#include "client/request_builders.h"
#include "client/write_messages.h"
#include "grpcpp/create_channel.h"

namespace gpucmd {

absl::Status FromGrpcStatus(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

std::string GrpcTarget(const std::string& target) {
  absl::string_view rest = target;
  if (absl::ConsumePrefix(&rest, "tcp:")) return std::string(rest);
  return target;
}

absl::Status ValidateTarget(const std::string& target) {
  absl::string_view rest = target;
  if (target.empty()) {
    return absl::InvalidArgumentError("the target is empty: name unix:PATH or tcp:HOST:PORT");
  }
  if (absl::ConsumePrefix(&rest, "unix:") && rest.empty()) {
    return absl::InvalidArgumentError("the target unix: names no socket path");
  }
  if (!absl::ConsumePrefix(&rest, "tcp:")) return absl::OkStatus();
  const size_t colon = rest.rfind(':');
  const absl::string_view host = colon == absl::string_view::npos ? "" : rest.substr(0, colon);
  const absl::string_view port = colon == absl::string_view::npos ? "" : rest.substr(colon + 1);
  int port_number = 0;
  const bool port_ok = port.size() <= 5 &&
                       std::all_of(port.begin(), port.end(), absl::ascii_isdigit) &&
                       absl::SimpleAtoi(port, &port_number) && port_number >= 1 &&
                       port_number <= 65535;
  const bool bracketed = absl::StartsWith(host, "[") || absl::EndsWith(host, "]");
  const bool host_ok =
      bracketed ? host.size() >= 3 && host.front() == '[' && host.back() == ']' &&
                      host.substr(1, host.size() - 2).find_first_of("[]") == absl::string_view::npos
                : !host.empty() && !absl::StrContains(host, ':');
  if (!host_ok || !port_ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the target ", target, " is not tcp:HOST:PORT (a port in 1..65535, an IPv6 host in "
        "brackets)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const std::string& target,
                                                        const ClientOptions& options) {
  RETURN_IF_ERROR(ValidateTarget(target));
  if (options.max_message_bytes < ClientOptions::kMinMessageBytes) {
    return absl::InvalidArgumentError(absl::StrCat("max_message_bytes is ",
                                                   options.max_message_bytes, ", less than ",
                                                   ClientOptions::kMinMessageBytes));
  }
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(options.max_message_bytes);
  arguments.SetMaxSendMessageSize(options.max_message_bytes);
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(
      GrpcTarget(target), grpc::InsecureChannelCredentials(), arguments);
  auto deadline = std::chrono::system_clock::now() + options.connect_timeout;
  if (!channel->WaitForConnected(deadline)) {
    return absl::UnavailableError(absl::StrCat("gpucmdd at ", target, " is not reachable"));
  }
  auto connection = std::make_shared<ClientConnection>();
  connection->target = target;
  connection->options = options;
  connection->stub = v1::GpuCommand::NewStub(channel);
  connection->health = grpc::health::v1::Health::NewStub(channel);
  connection->channel = std::move(channel);
  return std::unique_ptr<Client>(new Client(std::move(connection)));
}

void ClientConnection::PrepareContext(grpc::ClientContext* context) const {
  context->set_deadline(std::chrono::system_clock::now() + options.call_timeout);
}

namespace {

absl::StatusOr<v1::GetStatsResponse> GetStatsOver(const ClientConnection& connection,
                                                  const std::string& session) {
  grpc::ClientContext context;
  connection.PrepareContext(&context);
  v1::GetStatsRequest request;
  request.set_session(session);
  v1::GetStatsResponse response;
  grpc::Status status = connection.stub->GetStats(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

}  // namespace

absl::StatusOr<bool> Client::IsServing(const std::string& service) {
  grpc::ClientContext context;
  connection_->PrepareContext(&context);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = connection_->health->Check(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
}

absl::StatusOr<std::vector<v1::DeviceInfo>> Client::ListDevices() {
  grpc::ClientContext context;
  connection_->PrepareContext(&context);
  v1::ListDevicesResponse response;
  grpc::Status status = connection_->stub->ListDevices(&context, v1::ListDevicesRequest(), &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return std::vector<v1::DeviceInfo>(response.devices().begin(), response.devices().end());
}

absl::StatusOr<v1::GetStatsResponse> Client::GetStats(const std::string& session) {
  return GetStatsOver(*connection_, session);
}

absl::StatusOr<v1::ListSessionsResponse> Client::ListSessions() {
  grpc::ClientContext context;
  connection_->PrepareContext(&context);
  v1::ListSessionsResponse response;
  grpc::Status status = connection_->stub->ListSessions(&context, v1::ListSessionsRequest(), &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

// The lease: a stream the daemon watches, which breaks when this process goes away.
//
// No thread of this process waits on it. Its operations complete into a queue of its own
// that is read only while the lease opens and when it closes: a thread waiting on gRPC in
// the background (as the callback API's do) also takes in the answers to the process's
// other calls and must then hand each to its caller, some 35 us more per call on a
// 2-core machine. A read stays pending, so that the stream's end, whenever the daemon
// ends it, is taken in by whichever call of this process reads the connection next.
class Session::Lease final {
 public:
  // Opens the lease of the session `token`; the daemon's first answer confirms it.
  static absl::StatusOr<std::unique_ptr<Lease>> Open(v1::GpuCommand::Stub* stub,
                                                     const std::string& token) {
    auto lease = std::unique_ptr<Lease>(new Lease());
    v1::KeepAliveRequest hello;
    hello.set_session(token);
    // The call's metadata leaves with the hello (corked): starting the call completes
    // nothing by itself, and the hello's write may follow at once.
    lease->context_.set_initial_metadata_corked(true);
    lease->stream_ = stub->PrepareAsyncKeepAlive(&lease->context_, &lease->queue_);
    lease->stream_->StartCall(nullptr);
    lease->stream_->Write(hello, &lease->written_);
    lease->stream_->Read(&lease->ack_, &lease->read_);
    // Until the daemon's answer (the write's completion comes first, or stays queued).
    void* tag = nullptr;
    bool ok = false;
    while (lease->queue_.Next(&tag, &ok) && tag != &lease->read_) {
    }
    if (tag != &lease->read_ || !ok) {  // refused, or the stream broke: its status says why
      absl::Status refused = FromGrpcStatus(lease->Finish());
      return refused.ok() ? absl::UnavailableError("the lease stream ended at once") : refused;
    }
    lease->stream_->Read(&lease->ack_, &lease->read_);
    return lease;
  }

  ~Lease() {
    if (stream_ == nullptr) return;  // finished already
    context_.TryCancel();
    Finish();
  }

 private:
  Lease() = default;

  // Ends the call: its status, once every pending operation completed.
  grpc::Status Finish() {
    grpc::Status status;
    stream_->Finish(&status, &finished_);
    queue_.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (queue_.Next(&tag, &ok)) {
    }
    stream_.reset();
    return status;
  }

  grpc::ClientContext context_;
  grpc::CompletionQueue queue_;
  std::unique_ptr<grpc::ClientAsyncReaderWriter<v1::KeepAliveRequest, v1::KeepAliveResponse>>
      stream_;
  v1::KeepAliveResponse ack_;
  // Tags: each operation's completion is told apart by the address of its own.
  char written_ = 0, read_ = 0, finished_ = 0;
};

absl::StatusOr<Session> Client::OpenSession(uint32_t device, const std::string& client_name) {
  grpc::ClientContext context;
  connection_->PrepareContext(&context);
  v1::OpenSessionRequest request;
  request.set_device(device);
  request.set_client_name(client_name);
  v1::OpenSessionResponse response;
  grpc::Status status = connection_->stub->OpenSession(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  absl::StatusOr<std::unique_ptr<Session::Lease>> lease =
      Session::Lease::Open(connection_->stub.get(), response.session());
  if (!lease.ok()) return lease.status();
  return Session(connection_, response.session(), *std::move(lease));
}

Session::Session(std::shared_ptr<const ClientConnection> connection, std::string token,
                 std::unique_ptr<Lease> lease)
    : handle_(std::make_shared<SessionHandle>(std::move(connection), std::move(token))),
      lease_(std::move(lease)) {}

Session::Session(Session&& other) noexcept
    : handle_(std::move(other.handle_)), lease_(std::move(other.lease_)) {}

Session& Session::operator=(Session&& other) noexcept {
  if (this != &other) {
    Close().IgnoreError();  // the old session goes; nobody is left to hear the outcome
    handle_ = std::move(other.handle_);
    lease_ = std::move(other.lease_);
  }
  return *this;
}

Session::~Session() { Close().IgnoreError(); }

const std::string& Session::token() const {
  static const std::string kNone;
  return handle_ != nullptr ? handle_->token : kNone;
}

absl::Status Session::Close() {
  if (handle_ == nullptr || !handle_->open.exchange(false)) return absl::OkStatus();
  const ClientConnection& connection = *handle_->connection;
  grpc::ClientContext context;
  connection.PrepareContext(&context);
  v1::CloseSessionRequest request;
  request.set_session(handle_->token);
  v1::CloseSessionResponse response;
  absl::Status status = FromGrpcStatus(connection.stub->CloseSession(&context, request, &response));
  lease_.reset();
  return status;
}

absl::StatusOr<Buffer> Session::Allocate(uint64_t size_bytes) {
  grpc::ClientContext context;
  handle_->connection->PrepareContext(&context);
  v1::AllocateRequest request;
  request.set_session(handle_->token);
  request.set_size_bytes(size_bytes);
  v1::AllocateResponse response;
  grpc::Status status = handle_->connection->stub->Allocate(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return Buffer(handle_, response.buffer(), size_bytes);
}

absl::Status Session::FreeBuffer(const SessionHandle& session, uint64_t id) {
  grpc::ClientContext context;
  session.connection->PrepareContext(&context);
  v1::FreeRequest request;
  request.set_session(session.token);
  request.set_buffer(id);
  v1::FreeResponse response;
  return FromGrpcStatus(session.connection->stub->Free(&context, request, &response));
}

absl::Status Session::Write(const Buffer& buffer, uint64_t offset, absl::string_view data,
                            uint64_t stream, std::optional<Pitched> pitched,
                            WriteReturns returns) {
  v1::WriteHeader header =
      InlineWrite(handle_->token, buffer, offset, data.size(), pitched, stream);
  header.set_answer_when_copied(returns == WriteReturns::kWhenCopied);
  return WriteRequest(std::move(header), data);
}

absl::Status Session::WriteRequest(v1::WriteHeader header, absl::string_view data) {
  header.set_session(handle_->token);
  grpc::ClientContext context;
  handle_->connection->PrepareContext(&context);
  v1::WriteResponse response;
  // The payload is sent from `data` itself (Note [Write payloads are sent in place] in
  // client/write_messages.h); the stub's writer would copy it twice.
  const grpc::internal::RpcMethod method(WriteMethodName().c_str(),
                                         grpc::internal::RpcMethod::CLIENT_STREAMING,
                                         handle_->connection->channel);
  std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> writer(
      grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(
          handle_->connection->channel.get(), method, &context, &response));
  const size_t chunk = static_cast<size_t>(handle_->connection->options.max_message_bytes) - 1024;
  // The last message carries the end of the stream (WriteLast): one write to the socket
  // for both, where Write and WritesDone take one each.
  size_t sent = 0;
  bool last = false;
  while (!last) {
    const size_t size = std::min(chunk, data.size() - sent);
    grpc::ByteBuffer message = WriteMessage(sent == 0 ? &header : nullptr, data.substr(sent, size));
    sent += size;
    last = sent == data.size();
    if (last) {
      writer->WriteLast(message, grpc::WriteOptions());
    } else if (!writer->Write(message)) {  // the server finished early: Finish says why
      writer->WritesDone();
      break;
    }
  }
  return FromGrpcStatus(writer->Finish());
}

namespace {

// Sends `request` (the session filled in) and hands each answer, as gRPC received it, to
// `take` (`first` for the stream's first), until the stream ends or `take` refuses one.
absl::Status ReadStream(const SessionHandle& session, v1::ReadRequest request,
                        absl::FunctionRef<absl::Status(grpc::ByteBuffer&, bool first)> take) {
  request.set_session(session.token);
  grpc::ClientContext context;
  session.connection->PrepareContext(&context);
  // Each answer's bytes are copied once, from gRPC's slices into the result (Note [Read
  // payloads land in place] in client/read_messages.h); the stub's reader would parse
  // them into a message of their own first.
  const grpc::internal::RpcMethod method(ReadMethodName().c_str(),
                                         grpc::internal::RpcMethod::SERVER_STREAMING,
                                         session.connection->channel);
  std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
      grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(
          session.connection->channel.get(), method, &context, request));
  grpc::ByteBuffer message;
  absl::Status taken;
  for (bool first = true; taken.ok() && reader->Read(&message); first = false) {
    taken = take(message, first);
  }
  if (!taken.ok()) context.TryCancel();
  grpc::Status status = reader->Finish();
  if (!taken.ok()) return taken;
  return FromGrpcStatus(status);
}

}  // namespace

absl::StatusOr<std::string> Session::ReadRequest(v1::ReadRequest request) {
  std::string result;
  RETURN_IF_ERROR(ReadStream(*handle_, std::move(request),
                             [&result](grpc::ByteBuffer& message, bool first) {
                               return AppendReadMessage(message, first, result);
                             }));
  return result;
}

absl::Status Session::Write(const Buffer& buffer, uint64_t offset, const RegionSlice& source,
                            uint64_t stream, const std::optional<Pitched>& pitched) {
  const v1::WriteHeader header =
      SharedWrite(handle_->token, buffer, offset, source, stream, pitched);
  grpc::ClientContext context;
  handle_->connection->PrepareContext(&context);
  v1::WriteResponse response;
  return FromGrpcStatus(handle_->connection->stub->WriteShared(&context, header, &response));
}

absl::Status Session::Read(const Buffer& buffer, uint64_t offset, const RegionSlice& target,
                           uint64_t stream, const std::optional<Pitched>& pitched) {
  const v1::ReadRequest request =
      SharedRead(handle_->token, buffer, offset, target, stream, pitched);
  grpc::ClientContext context;
  handle_->connection->PrepareContext(&context);
  v1::ReadResponse response;
  return FromGrpcStatus(handle_->connection->stub->ReadShared(&context, request, &response));
}

absl::StatusOr<std::string> Session::Read(const Buffer& buffer, uint64_t offset, uint64_t size,
                                          uint64_t stream) {
  return ReadRequest(ContiguousRead(handle_->token, buffer, offset, size, stream));
}

absl::Status Session::Read(const Buffer& buffer, uint64_t offset, absl::Span<std::byte> into,
                           uint64_t stream) {
  size_t filled = 0;
  v1::ReadRequest request = ContiguousRead(handle_->token, buffer, offset, into.size(), stream);
  RETURN_IF_ERROR(ReadStream(*handle_, std::move(request),
                             [&](grpc::ByteBuffer& message, bool) {
                               return CopyReadMessage(message, into, filled);
                             }));
  if (filled != into.size()) {
    return absl::InternalError(absl::StrCat("the daemon answered a read of ", into.size(),
                                            " bytes with ", filled));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Session::ReadPitched(const Buffer& buffer, uint64_t offset,
                                                 const Pitched& pitched, uint64_t stream) {
  return ReadRequest(PitchedRead(handle_->token, buffer, offset, pitched, stream));
}

absl::Status Session::Copy(const Buffer& source, uint64_t source_offset, const Buffer& target,
                           uint64_t target_offset, uint64_t size_bytes, uint64_t stream) {
  return CopyRequest(CopyBetween(handle_->token, source, source_offset, target, target_offset,
                                 size_bytes, stream));
}

absl::Status Session::Copy(const Buffer& source, uint64_t source_offset, const Buffer& target,
                           uint64_t target_offset, const CopyRows& rows, uint64_t stream) {
  return CopyRequest(PitchedCopyBetween(handle_->token, source, source_offset, target,
                                        target_offset, rows, stream));
}

absl::Status Session::CopyRequest(const v1::CopyRequest& request) {
  grpc::ClientContext context;
  handle_->connection->PrepareContext(&context);
  v1::CopyResponse response;
  return FromGrpcStatus(handle_->connection->stub->Copy(&context, request, &response));
}

absl::Status Session::Fill(const Buffer& buffer, uint64_t offset, uint64_t size_bytes,
                           uint32_t value, uint32_t element_bytes, uint64_t stream) {
  return FillRequest(
      FillOf(handle_->token, buffer, offset, size_bytes, value, element_bytes, stream));
}

absl::Status Session::Fill(const Buffer& buffer, uint64_t offset, const Pitched& rows,
                           uint32_t value, uint32_t element_bytes, uint64_t stream) {
  return FillRequest(
      PitchedFillOf(handle_->token, buffer, offset, rows, value, element_bytes, stream));
}

absl::Status Session::FillRequest(const v1::FillRequest& request) {
  grpc::ClientContext context;
  handle_->connection->PrepareContext(&context);
  v1::FillResponse response;
  return FromGrpcStatus(handle_->connection->stub->Fill(&context, request, &response));
}

absl::Status Session::Synchronize(std::optional<uint64_t> stream, std::string* kernel_output) {
  grpc::ClientContext context;
  handle_->connection->PrepareContext(&context);
  const v1::SynchronizeRequest request = SynchronizeOf(handle_->token, stream);
  v1::SynchronizeResponse response;
  absl::Status status =
      FromGrpcStatus(handle_->connection->stub->Synchronize(&context, request, &response));
  if (kernel_output != nullptr) *kernel_output = std::move(*response.mutable_kernel_output());
  return status;
}

absl::StatusOr<v1::GetStatsResponse> Session::Stats() { return GetStatsOver(*handle_->connection, handle_->token); }

absl::StatusOr<v1::CompileResponse> Session::Compile(const std::string& source,
                                                     const std::string& entry_point,
                                                     const std::vector<std::string>& options) {
  grpc::ClientContext context;
  handle_->connection->PrepareContext(&context);
  v1::CompileRequest request;
  request.set_session(handle_->token);
  request.set_source(source);
  request.set_entry_point(entry_point);
  for (const std::string& option : options) request.add_options(option);
  v1::CompileResponse response;
  grpc::Status status = handle_->connection->stub->Compile(&context, request, &response);
  if (!status.ok()) {
    absl::Status failure = FromGrpcStatus(status);
    const auto& trailers = context.GetServerTrailingMetadata();
    if (auto it = trailers.find("gpucmd-kernel-id"); it != trailers.end()) {
      const std::string kernel_id(it->second.data(), it->second.size());
      // The status message is cut to fit a header: the whole log comes in a body.
      if (absl::StatusOr<v1::GetCompileLogResponse> log = CompileLog(kernel_id);
          failure.code() == absl::StatusCode::kInvalidArgument && log.ok() && log->failed()) {
        failure = absl::InvalidArgumentError(log->log());
      }
      failure.SetPayload(kKernelIdPayload, absl::Cord(kernel_id));
    }
    return failure;
  }
  return response;
}

absl::StatusOr<v1::GetCompileLogResponse> Session::CompileLog(const std::string& kernel_id) {
  grpc::ClientContext context;
  handle_->connection->PrepareContext(&context);
  v1::GetCompileLogRequest request;
  request.set_session(handle_->token);
  request.set_kernel_id(kernel_id);
  v1::GetCompileLogResponse response;
  grpc::Status status = handle_->connection->stub->GetCompileLog(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::Status Session::Launch(const std::string& kernel_id, const LaunchShape& shape,
                             const std::vector<v1::KernelArg>& args, uint64_t stream) {
  grpc::ClientContext context;
  handle_->connection->PrepareContext(&context);
  const v1::LaunchRequest request = LaunchOf(handle_->token, kernel_id, shape, args, stream);
  v1::LaunchResponse response;
  return FromGrpcStatus(handle_->connection->stub->Launch(&context, request, &response));
}

v1::Dim3 MakeDim3(uint32_t x, uint32_t y, uint32_t z) {
  v1::Dim3 dim;
  dim.set_x(x);
  dim.set_y(y);
  dim.set_z(z);
  return dim;
}

v1::KernelArg BufferArgument(const Buffer& buffer, v1::Access access, uint64_t offset_bytes) {
  v1::KernelArg arg;
  arg.mutable_buffer()->set_buffer(buffer.id());
  arg.mutable_buffer()->set_access(access);
  arg.mutable_buffer()->set_offset_bytes(offset_bytes);
  return arg;
}

namespace {

template <typename T>
v1::KernelArg ScalarArgument(void (v1::ScalarArg::*set)(T), T value) {
  v1::KernelArg arg;
  (arg.mutable_scalar()->*set)(value);
  return arg;
}

}  // namespace

v1::KernelArg Int32Argument(int32_t value) { return ScalarArgument(&v1::ScalarArg::set_i32, value); }
v1::KernelArg UInt32Argument(uint32_t value) { return ScalarArgument(&v1::ScalarArg::set_u32, value); }
v1::KernelArg Int64Argument(int64_t value) { return ScalarArgument(&v1::ScalarArg::set_i64, value); }
v1::KernelArg UInt64Argument(uint64_t value) { return ScalarArgument(&v1::ScalarArg::set_u64, value); }
v1::KernelArg FloatArgument(float value) { return ScalarArgument(&v1::ScalarArg::set_f32, value); }
v1::KernelArg DoubleArgument(double value) { return ScalarArgument(&v1::ScalarArg::set_f64, value); }

Buffer::Buffer(Buffer&& other) noexcept
    : session_(std::move(other.session_)), id_(other.id_), size_bytes_(other.size_bytes_) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    Free().IgnoreError();
    session_ = std::move(other.session_);
    id_ = other.id_;
    size_bytes_ = other.size_bytes_;
  }
  return *this;
}

Buffer::~Buffer() { Free().IgnoreError(); }

absl::Status Buffer::Free() {
  std::shared_ptr<const SessionHandle> session = std::move(session_);
  if (session == nullptr || !session->open) return absl::OkStatus();
  return Session::FreeBuffer(*session, id_);
}

uint64_t Buffer::Release() {
  session_.reset();
  return id_;
}

}  // namespace gpucmd
