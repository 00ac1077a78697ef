#ifndef GPUCMDD_SERVER_HTTP_ENDPOINT_H_
#define GPUCMDD_SERVER_HTTP_ENDPOINT_H_

// The operator's HTTP endpoint:
//   GET /healthz  200 "ok" while the process serves
//   GET /readyz   200 once `ready()` holds, else 503 naming what is not ready
//   GET /metrics  Prometheus text exposition
// (HEAD too; other methods 405, other paths 404.)
//
// Note [Health under idle connections]: a liveness probe that cannot get an answer
// restarts the daemon, and every client loses its sessions with it; so no other
// connection may keep /healthz from answering. One thread serves every connection from
// an event loop (Boost.Asio and Beast), so a connection that sends nothing, or trickles
// its request a byte at a time, holds no thread: a request that arrives whole is
// answered at once, whatever the other connections do. Each connection has
// `request_deadline` to deliver a whole request (again after each answer, for
// keep-alive) and to take its answer, else it is closed; a request's header may hold
// 8 KiB and it may carry no body (431, 400). At most `max_connections` are open:
// accepting one more closes the one that has waited longest for its request, so a
// flood of connections cannot keep a probe out either: one that sends its request at
// once is answered long before `max_connections` later connections push it out.
//
// Thread-safety: `not_ready_reason` runs on the endpoint's thread (and holds up every
// other connection while it runs: keep it short); `render_metrics` runs on a thread of
// its own, one call at a time, each answering every /metrics request that came before
// it (Note [Metrics off the loop] in the .cc). Both must be thread-safe against the rest
// of the daemon and outlive the endpoint. The destructor blocks until a running callback
// has returned and closes every connection.

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/listen_address.h"

namespace gpucmd {

struct HttpEndpointLimits {
  int max_connections = 256;
  std::chrono::milliseconds request_deadline{1000};
};

class HttpEndpoint {
 public:
  struct Callbacks {
    // Empty string: ready. Otherwise the reason it is not.
    std::function<std::string()> not_ready_reason;
    std::function<std::string()> render_metrics;
  };
  using Limits = HttpEndpointLimits;

  // Binds `address` (port 0: a free port) and starts serving. UNAVAILABLE when the
  // address cannot be resolved or bound.
  static absl::StatusOr<std::unique_ptr<HttpEndpoint>> Start(const HostPort& address,
                                                             Callbacks callbacks,
                                                             Limits limits = {});
  ~HttpEndpoint();
  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;

  // The port actually bound.
  int port() const { return port_; }
  const std::string& host() const { return host_; }

 private:
  class Server;
  class Connection;
  HttpEndpoint() = default;

  std::unique_ptr<Server> server_;
  std::string host_;
  int port_ = 0;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_HTTP_ENDPOINT_H_
