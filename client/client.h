#ifndef GPUCMDD_CLIENT_CLIENT_H_
#define GPUCMDD_CLIENT_CLIENT_H_

// The C++ client library of gpucmdd: typed calls over the gpucmd.v1 stubs, returning
// absl::Status, with RAII sessions.
//
//   ASSIGN_OR_RETURN(auto client, gpucmd::Client::Connect("unix:/run/gpucmdd/gpucmdd.sock"));
//   ASSIGN_OR_RETURN(auto devices, client->ListDevices());
//
// Thread-safety: a Client may be shared by threads (gRPC channels and stubs are
// thread-safe). A Session belongs to one owner; it closes itself when destroyed.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpucmd/v1/gpucmd.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/channel.h"

namespace gpucmd {

struct ClientOptions {
  // How long Connect waits for the daemon to accept the connection.
  std::chrono::milliseconds connect_timeout{5000};
  // Deadline of each call.
  std::chrono::milliseconds call_timeout{30000};
  // Largest message sent or received; match the daemon's limits.max_message_bytes.
  int max_message_bytes = 16 << 20;
};

// Converts a gRPC status to an absl::Status (same codes, same message).
absl::Status FromGrpcStatus(const grpc::Status& status);

// Turns "unix:PATH", "tcp:HOST:PORT" or "HOST:PORT" into a gRPC target.
std::string GrpcTarget(const std::string& target);

class Client;

// An open session; closed (and everything it holds reclaimed) when destroyed.
class Session {
 public:
  Session(Session&& other) noexcept;
  Session& operator=(Session&& other) noexcept;
  ~Session();

  const std::string& token() const { return token_; }

  // Closes now and reports the outcome; the destructor then does nothing.
  absl::Status Close();

 private:
  friend class Client;
  Session(Client* client, std::string token) : client_(client), token_(std::move(token)) {}

  Client* client_;
  std::string token_;
};

class Client {
 public:
  // Connects to `target` and waits until the channel is ready. UNAVAILABLE when the
  // daemon does not answer within options.connect_timeout.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const std::string& target,
                                                         const ClientOptions& options = {});

  // grpc.health.v1 status of `service` ("" for the whole daemon): true when SERVING.
  absl::StatusOr<bool> IsServing(const std::string& service = "");

  absl::StatusOr<std::vector<v1::DeviceInfo>> ListDevices();
  absl::StatusOr<v1::GetStatsResponse> GetStats(const std::string& session = "");

  // Opens a session on `device`.
  absl::StatusOr<Session> OpenSession(uint32_t device = 0,
                                      const std::string& client_name = "");

  // The raw stub, for RPCs the typed surface does not cover yet.
  v1::GpuCommand::Stub& stub() { return *stub_; }

 private:
  friend class Session;
  Client(std::shared_ptr<grpc::Channel> channel, const ClientOptions& options);
  void PrepareContext(grpc::ClientContext* context) const;

  ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::GpuCommand::Stub> stub_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

}  // namespace gpucmd

#endif  // GPUCMDD_CLIENT_CLIENT_H_
