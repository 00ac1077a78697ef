#ifndef GPUCMDD_SERVER_HTTP_ENDPOINT_H_
#define GPUCMDD_SERVER_HTTP_ENDPOINT_H_

// The operator's HTTP endpoint (civetweb):
//   GET /healthz  200 "ok" while the process serves
//   GET /readyz   200 once `ready()` holds, else 503 naming what is not ready
//   GET /metrics  Prometheus text exposition
//
// Thread-safety: handlers run on civetweb's worker threads; the callbacks given to
// Start must be thread-safe and must outlive the endpoint. Stop (or the destructor)
// blocks until every handler has returned.

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/listen_address.h"

struct mg_context;
struct mg_connection;

namespace gpucmd {

class HttpEndpoint {
 public:
  struct Callbacks {
    // Empty string: ready. Otherwise the reason it is not.
    std::function<std::string()> not_ready_reason;
    std::function<std::string()> render_metrics;
  };

  // Binds `address` (port 0: a free port) and starts serving. UNAVAILABLE when the
  // address cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpEndpoint>> Start(const HostPort& address,
                                                             Callbacks callbacks);
  ~HttpEndpoint();
  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;

  // The port actually bound.
  int port() const { return port_; }
  const std::string& host() const { return host_; }

 private:
  explicit HttpEndpoint(Callbacks callbacks) : callbacks_(std::move(callbacks)) {}
  static int HandleHealthz(mg_connection* connection, void* self);
  static int HandleReadyz(mg_connection* connection, void* self);
  static int HandleMetrics(mg_connection* connection, void* self);

  Callbacks callbacks_;
  mg_context* context_ = nullptr;
  std::string host_;
  int port_ = 0;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_HTTP_ENDPOINT_H_
