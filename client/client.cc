#include "client/client.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
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

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const std::string& target,
                                                        const ClientOptions& options) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(options.max_message_bytes);
  arguments.SetMaxSendMessageSize(options.max_message_bytes);
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(
      GrpcTarget(target), grpc::InsecureChannelCredentials(), arguments);
  auto deadline = std::chrono::system_clock::now() + options.connect_timeout;
  if (!channel->WaitForConnected(deadline)) {
    return absl::UnavailableError(absl::StrCat("gpucmdd at ", target, " is not reachable"));
  }
  return std::unique_ptr<Client>(new Client(std::move(channel), options));
}

Client::Client(std::shared_ptr<grpc::Channel> channel, const ClientOptions& options)
    : options_(options),
      channel_(std::move(channel)),
      stub_(v1::GpuCommand::NewStub(channel_)),
      health_(grpc::health::v1::Health::NewStub(channel_)) {}

void Client::PrepareContext(grpc::ClientContext* context) const {
  context->set_deadline(std::chrono::system_clock::now() + options_.call_timeout);
}

absl::StatusOr<bool> Client::IsServing(const std::string& service) {
  grpc::ClientContext context;
  PrepareContext(&context);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = health_->Check(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
}

absl::StatusOr<std::vector<v1::DeviceInfo>> Client::ListDevices() {
  grpc::ClientContext context;
  PrepareContext(&context);
  v1::ListDevicesResponse response;
  grpc::Status status = stub_->ListDevices(&context, v1::ListDevicesRequest(), &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return std::vector<v1::DeviceInfo>(response.devices().begin(), response.devices().end());
}

absl::StatusOr<v1::GetStatsResponse> Client::GetStats(const std::string& session) {
  grpc::ClientContext context;
  PrepareContext(&context);
  v1::GetStatsRequest request;
  request.set_session(session);
  v1::GetStatsResponse response;
  grpc::Status status = stub_->GetStats(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<Session> Client::OpenSession(uint32_t device, const std::string& client_name) {
  grpc::ClientContext context;
  PrepareContext(&context);
  v1::OpenSessionRequest request;
  request.set_device(device);
  request.set_client_name(client_name);
  v1::OpenSessionResponse response;
  grpc::Status status = stub_->OpenSession(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return Session(this, response.session());
}

Session::Session(Session&& other) noexcept
    : client_(std::exchange(other.client_, nullptr)), token_(std::move(other.token_)) {}

Session& Session::operator=(Session&& other) noexcept {
  if (this != &other) {
    Close().IgnoreError();  // the old session goes; nobody is left to hear the outcome
    client_ = std::exchange(other.client_, nullptr);
    token_ = std::move(other.token_);
  }
  return *this;
}

Session::~Session() { Close().IgnoreError(); }

absl::Status Session::Close() {
  if (client_ == nullptr) return absl::OkStatus();
  Client* client = std::exchange(client_, nullptr);
  grpc::ClientContext context;
  client->PrepareContext(&context);
  v1::CloseSessionRequest request;
  request.set_session(token_);
  v1::CloseSessionResponse response;
  return FromGrpcStatus(client->stub_->CloseSession(&context, request, &response));
}

}  // namespace gpucmd
