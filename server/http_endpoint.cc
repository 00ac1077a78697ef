#include "server/http_endpoint.h"

#include <civetweb.h>

#include "absl/strings/string_view.h"
#include "absl/strings/str_cat.h"

namespace gpucmd {
namespace {

absl::string_view ReasonPhrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 405:
      return "Method Not Allowed";
    case 503:
      return "Service Unavailable";
  }
  return "Status";
}

// Writes a whole response; returns `status` for civetweb's access log.
int Reply(mg_connection* connection, int status, absl::string_view content_type,
          absl::string_view body) {
  std::string head = absl::StrCat("HTTP/1.1 ", status, " ", ReasonPhrase(status),
                                  "\r\nContent-Type: ", content_type,
                                  "\r\nContent-Length: ", body.size(),
                                  "\r\nCache-Control: no-store\r\n\r\n");
  mg_write(connection, head.data(), head.size());
  bool is_head = absl::string_view(mg_get_request_info(connection)->request_method) == "HEAD";
  if (!is_head) mg_write(connection, body.data(), body.size());
  return status;
}

bool IsGet(mg_connection* connection) {
  absl::string_view method = mg_get_request_info(connection)->request_method;
  return method == "GET" || method == "HEAD";
}

int MethodNotAllowed(mg_connection* connection) {
  return Reply(connection, 405, "text/plain", "only GET is served here\n");
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(const HostPort& address,
                                                                   Callbacks callbacks) {
  std::unique_ptr<HttpEndpoint> endpoint(new HttpEndpoint(std::move(callbacks)));
  std::string ports = absl::StrCat(address.host, ":", address.port);
  // Connections that send nothing hold a worker only briefly, and there are workers to
  // spare, so the health endpoints answer while other connections idle.
  const char* options[] = {"listening_ports", ports.c_str(), "num_threads", "16",
                           "request_timeout_ms", "1000", nullptr};
  mg_callbacks no_callbacks{};
  endpoint->context_ = mg_start(&no_callbacks, nullptr, options);
  if (endpoint->context_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve HTTP on ", ports, " (address in use or invalid?)"));
  }
  mg_server_port bound[1];
  if (mg_get_server_ports(endpoint->context_, 1, bound) < 1) {
    return absl::InternalError("civetweb reports no bound port");
  }
  endpoint->host_ = address.host;
  endpoint->port_ = bound[0].port;
  mg_set_request_handler(endpoint->context_, "/healthz$", &HandleHealthz, endpoint.get());
  mg_set_request_handler(endpoint->context_, "/readyz$", &HandleReadyz, endpoint.get());
  mg_set_request_handler(endpoint->context_, "/metrics$", &HandleMetrics, endpoint.get());
  return endpoint;
}

HttpEndpoint::~HttpEndpoint() {
  if (context_ != nullptr) mg_stop(context_);
}

int HttpEndpoint::HandleHealthz(mg_connection* connection, void* self) {
  if (!IsGet(connection)) return MethodNotAllowed(connection);
  return Reply(connection, 200, "text/plain", "ok\n");
}

int HttpEndpoint::HandleReadyz(mg_connection* connection, void* self) {
  if (!IsGet(connection)) return MethodNotAllowed(connection);
  std::string reason = static_cast<HttpEndpoint*>(self)->callbacks_.not_ready_reason();
  if (reason.empty()) return Reply(connection, 200, "text/plain", "ready\n");
  return Reply(connection, 503, "text/plain", absl::StrCat("not ready: ", reason, "\n"));
}

int HttpEndpoint::HandleMetrics(mg_connection* connection, void* self) {
  if (!IsGet(connection)) return MethodNotAllowed(connection);
  return Reply(connection, 200, "text/plain; version=0.0.4; charset=utf-8",
               static_cast<HttpEndpoint*>(self)->callbacks_.render_metrics());
}

}  // namespace gpucmd
