#ifndef GPUCMDD_SERVER_DAEMON_H_
#define GPUCMDD_SERVER_DAEMON_H_

// The daemon as a library: devices, the gRPC server (gpucmd, health, reflection) on
// every configured listener, and the HTTP health/metrics endpoint. main() only parses
// flags, starts one, waits for a signal and shuts it down.
//
// Thread-safety: Start and Shutdown are called from one controlling thread; the
// accessors are safe from any thread after Start returns.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gpucmd/v1/config.pb.h"
#include "grpcpp/server.h"
#include "server/core/compile_cache.h"
#include "server/http_endpoint.h"
#include "server/core/metrics.h"
#include "server/core/server_core.h"
#include "server/descriptor_socket.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "server/rpc/service.h"
#include "server/service_notifier.h"
#include "server/unix_listener.h"

namespace gpucmd {

class Daemon {
 public:
  // Starts serving with a defaulted, validated config. FAILED_PRECONDITION when a Unix
  // socket is held by a live daemon or a configured group does not exist, UNAVAILABLE
  // when an address cannot be bound. Unix sockets a service manager passed (socket
  // activation, LISTEN_FDS) are served as they are: not bound, given access or removed.
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(const v1::DaemonConfig& config);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // "gpucmdd ready grpc=unix:/run/x.sock,127.0.0.1:40123 http=127.0.0.1:9464 devices=1"
  // with the ports actually bound.
  std::string ReadyLine() const;

  // Stops accepting, lets in-flight RPCs finish for up to the configured drain time
  // (then cancels them), stops the HTTP endpoint, removes the Unix sockets and stops the
  // devices. False when a device was still busy just short of a second past the drain
  // (a GPU kernel runs on): the caller should then exit the process at once, without
  // destroying the daemon, which would wait for it.
  bool Shutdown();

 private:
  Daemon() = default;

  // The service manager's STATUS= line (Note [Service manager]).
  std::string StatusLine() const;
  // Empty while every device thread and the gRPC server make progress within `within`;
  // else what does not. Called on the notifier's thread only.
  std::string Stalled(std::chrono::steady_clock::duration within);

  v1::DaemonConfig config_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<CompileCache> compiler_;
  std::unique_ptr<ServerCore> core_;
  std::unique_ptr<GpuCommandService> service_;
  std::unique_ptr<grpc::Server> server_;
  // Serves every descriptor socket's connections (declared before the listeners that
  // hand them over, so it goes after them).
  std::unique_ptr<DescriptorSocketServer> descriptor_server_;
  // The Unix gRPC sockets (Note [Peer identity] in server/rpc/peer_identity.h) and
  // the descriptor socket beside each, which hands descriptors to the core.
  std::vector<std::unique_ptr<UnixListener>> unix_listeners_;
  std::unique_ptr<HttpEndpoint> http_;
  std::vector<std::string> bound_grpc_addresses_;
  int device_count_ = 0;
  bool shut_down_ = false;
  // The health stub of the watchdog's probe, over the in-process channel.
  std::unique_ptr<grpc::health::v1::Health::Stub> health_stub_;
  // Stopped first at Shutdown: it probes the server and the devices.
  std::unique_ptr<ServiceNotifier> notifier_;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_DAEMON_H_
