#include "server/http_endpoint.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <list>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/thread_name.h"

namespace gpucmd {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using Tcp = asio::ip::tcp;

constexpr uint32_t kMaxRequestHeaderBytes = 8 * 1024;
// Room for a whole header and the start of what follows it.
constexpr size_t kReceiveBufferBytes = 2 * kMaxRequestHeaderBytes;
// How long accepting pauses after it failed (e.g. out of descriptors), rather than
// failing again at once in a loop.
constexpr std::chrono::milliseconds kAcceptRetryDelay{100};

bool IsParseError(const beast::error_code& error) {
  return error.category() == beast::error_code(http::error::bad_target).category();
}

}  // namespace

// Owns the listener, the threads and the connections. Everything but the constructor,
// Listen, the destructor and the metrics callback runs on `thread_`, which alone
// touches the connections and the lists below.
class HttpEndpoint::Server {
 public:
  Server(Callbacks callbacks, Limits limits)
      : callbacks_(std::move(callbacks)), limits_(limits) {}
  ~Server();

  // Binds and listens; UNAVAILABLE naming `address` when it cannot.
  absl::StatusOr<int> Listen(const HostPort& address);
  // Starts the thread that accepts and serves.
  void Run();

 private:
  friend class Connection;
  using Position = std::list<Connection*>::iterator;

  void Accept();
  void OnAccepted(beast::error_code error, Tcp::socket socket);
  // Makes room for one more connection: closes the one that has waited longest for its
  // request. False when every connection is past its request (then there is no room).
  bool CloseLongestWaiting();
  // Answers `connection` with the next metrics rendered after now.
  void AwaitMetrics(std::shared_ptr<Connection> connection);
  // Renders the metrics on `render_thread_` for every connection that awaits them.
  void RenderMetrics();

  const Callbacks callbacks_;
  const Limits limits_;
  asio::io_context io_{1};
  Tcp::acceptor acceptor_{io_};
  asio::steady_timer accept_retry_{io_};
  // Open connections, those waiting for a request in the order they began to wait.
  std::list<Connection*> connections_;
  // Note [Metrics off the loop]: rendering the metrics takes milliseconds with
  // thousands of sessions, so it runs on a thread of its own, never holding up the
  // loop, and one rendering at a time answers every request that came before it
  // started: any number of /metrics requests costs at most one rendering at a time.
  std::vector<std::shared_ptr<Connection>> awaiting_metrics_;
  bool rendering_ = false;
  asio::thread_pool render_thread_{1};
  std::thread thread_;
};

// One client connection: reads a request, answers it, and again while the client keeps
// the connection alive. Lives while an operation on it is pending (each handler holds
// it); touched only on the server's thread.
class HttpEndpoint::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Server& server, Tcp::socket socket)
      : server_(server),
        stream_(std::move(socket)),
        buffer_(kReceiveBufferBytes),
        position_(server.connections_.insert(server.connections_.end(), this)) {}
  ~Connection() { server_.connections_.erase(position_); }

  // Reads the next request within the deadline; the connection joins the end of the
  // waiting line.
  void AwaitRequest();
  bool awaiting_request() const { return awaiting_request_; }
  // Cancels what is pending: the connection ends once its handler has run.
  void Close();
  // Answers the /metrics request read last.
  void AnswerMetrics(std::string metrics);

 private:
  void OnRequest(beast::error_code error);
  void Answer(http::status status, std::string_view content_type, std::string body,
              bool keep_alive, bool is_head = false);
  void OnAnswered(beast::error_code error, bool keep_alive);

  Server& server_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::empty_body>> parser_;
  http::response<http::string_body> response_;
  const Server::Position position_;
  bool awaiting_request_ = false;
};

void HttpEndpoint::Connection::AwaitRequest() {
  parser_.emplace();
  parser_->header_limit(kMaxRequestHeaderBytes);
  // One deadline for the whole request, not per read: a trickle does not extend it.
  stream_.expires_after(server_.limits_.request_deadline);
  awaiting_request_ = true;
  server_.connections_.splice(server_.connections_.end(), server_.connections_, position_);
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code error, size_t) {
                     self->OnRequest(error);
                   });
}

void HttpEndpoint::Connection::Close() {
  awaiting_request_ = false;
  beast::error_code ignored;
  stream_.socket().shutdown(Tcp::socket::shutdown_both, ignored);
  stream_.close();
}

void HttpEndpoint::Connection::OnRequest(beast::error_code error) {
  awaiting_request_ = false;
  if (error == http::error::end_of_stream) return;  // closed between requests
  if (error == http::error::header_limit || error == http::error::buffer_overflow) {
    return Answer(http::status::request_header_fields_too_large, "text/plain",
                  "request header over 8 KiB\n", /*keep_alive=*/false);
  }
  if (IsParseError(error)) {
    return Answer(http::status::bad_request, "text/plain",
                  absl::StrCat("malformed request: ", error.message(), "\n"),
                  /*keep_alive=*/false);
  }
  if (error) return;  // closed, timed out or evicted: nothing to answer
  const http::request<http::empty_body>& request = parser_->get();
  const bool keep_alive = request.keep_alive();
  const bool is_head = request.method() == http::verb::head;
  if (request.method() != http::verb::get && !is_head) {
    response_.set(http::field::allow, "GET, HEAD");
    return Answer(http::status::method_not_allowed, "text/plain", "only GET is served here\n",
                  keep_alive);
  }
  std::string_view path(request.target().data(), request.target().size());
  path = path.substr(0, path.find('?'));
  const Callbacks& callbacks = server_.callbacks_;
  if (path == "/healthz") {
    return Answer(http::status::ok, "text/plain", "ok\n", keep_alive, is_head);
  }
  if (path == "/readyz") {
    std::string reason = callbacks.not_ready_reason();
    if (reason.empty()) {
      return Answer(http::status::ok, "text/plain", "ready\n", keep_alive, is_head);
    }
    return Answer(http::status::service_unavailable, "text/plain",
                  absl::StrCat("not ready: ", reason, "\n"), keep_alive, is_head);
  }
  if (path == "/metrics") return server_.AwaitMetrics(shared_from_this());
  Answer(http::status::not_found, "text/plain", "not found\n", keep_alive, is_head);
}

void HttpEndpoint::Connection::AnswerMetrics(std::string metrics) {
  const http::request<http::empty_body>& request = parser_->get();
  Answer(http::status::ok, "text/plain; version=0.0.4; charset=utf-8", std::move(metrics),
         request.keep_alive(), request.method() == http::verb::head);
}

void HttpEndpoint::Connection::Answer(http::status status, std::string_view content_type,
                                      std::string body, bool keep_alive, bool is_head) {
  response_.result(status);
  response_.version(parser_->get().version() == 10 ? 10 : 11);
  response_.set(http::field::content_type,
                beast::string_view(content_type.data(), content_type.size()));
  response_.set(http::field::cache_control, "no-store");
  response_.content_length(body.size());
  if (!is_head) response_.body() = std::move(body);
  response_.keep_alive(keep_alive);
  // A client that does not take its answer is dropped like one that sends nothing.
  stream_.expires_after(server_.limits_.request_deadline);
  http::async_write(stream_, response_,
                    [self = shared_from_this(), keep_alive](beast::error_code error, size_t) {
                      self->OnAnswered(error, keep_alive);
                    });
}

void HttpEndpoint::Connection::OnAnswered(beast::error_code error, bool keep_alive) {
  if (error) return;
  response_ = {};
  if (keep_alive) return AwaitRequest();
  beast::error_code ignored;
  stream_.socket().shutdown(Tcp::socket::shutdown_send, ignored);
}

absl::StatusOr<int> HttpEndpoint::Server::Listen(const HostPort& address) {
  const std::string where = absl::StrCat(address.host, " port ", address.port);
  beast::error_code error;
  Tcp::resolver resolver(io_);
  Tcp::resolver::results_type endpoints =
      resolver.resolve(address.host, std::to_string(address.port),
                       Tcp::resolver::passive | Tcp::resolver::numeric_service, error);
  if (error || endpoints.empty()) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve HTTP on ", where, ": ", error.message()));
  }
  const Tcp::endpoint endpoint = endpoints.begin()->endpoint();
  if (acceptor_.open(endpoint.protocol(), error) ||
      acceptor_.set_option(asio::socket_base::reuse_address(true), error) ||
      acceptor_.bind(endpoint, error) ||
      acceptor_.listen(asio::socket_base::max_listen_connections, error)) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve HTTP on ", where, ": ", error.message()));
  }
  return acceptor_.local_endpoint().port();
}

void HttpEndpoint::Server::Run() {
  Accept();
  thread_ = std::thread([this] {
    NameThisThread("gpucmd-http");
    io_.run();
  });
}

void HttpEndpoint::Server::Accept() {
  acceptor_.async_accept([this](beast::error_code error, Tcp::socket socket) {
    OnAccepted(error, std::move(socket));
  });
}

void HttpEndpoint::Server::OnAccepted(beast::error_code error, Tcp::socket socket) {
  if (error == asio::error::operation_aborted) return;  // stopping
  if (error) {
    accept_retry_.expires_after(kAcceptRetryDelay);
    accept_retry_.async_wait([this](beast::error_code error) {
      if (!error) Accept();
    });
    return;
  }
  if (static_cast<int>(connections_.size()) < limits_.max_connections ||
      CloseLongestWaiting()) {
    std::make_shared<Connection>(*this, std::move(socket))->AwaitRequest();
  }
  Accept();
}

bool HttpEndpoint::Server::CloseLongestWaiting() {
  for (Connection* connection : connections_) {
    if (connection->awaiting_request()) {
      connection->Close();
      return true;
    }
  }
  return false;
}

void HttpEndpoint::Server::AwaitMetrics(std::shared_ptr<Connection> connection) {
  awaiting_metrics_.push_back(std::move(connection));
  if (!rendering_) RenderMetrics();
}

void HttpEndpoint::Server::RenderMetrics() {
  rendering_ = true;
  // The loop runs until the rendering's answer is back, even when stopping.
  asio::post(render_thread_, [this, work = asio::make_work_guard(io_),
                              awaiting = std::move(awaiting_metrics_)]() mutable {
    std::string metrics = callbacks_.render_metrics();
    asio::post(io_, [this, metrics = std::move(metrics), awaiting = std::move(awaiting)] {
      rendering_ = false;
      for (const std::shared_ptr<Connection>& connection : awaiting) {
        connection->AnswerMetrics(metrics);
      }
      if (!awaiting_metrics_.empty()) RenderMetrics();
    });
  });
  awaiting_metrics_.clear();
}

HttpEndpoint::Server::~Server() {
  if (thread_.joinable()) {
    // Closing the listener and every connection leaves the loop without work: it returns
    // once each connection's last handler has run.
    asio::post(io_, [this] {
      beast::error_code ignored;
      acceptor_.close(ignored);
      accept_retry_.cancel();
      for (Connection* connection : connections_) connection->Close();
    });
    thread_.join();
  }
  render_thread_.join();
}

absl::StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(const HostPort& address,
                                                                   Callbacks callbacks,
                                                                   Limits limits) {
  std::unique_ptr<HttpEndpoint> endpoint(new HttpEndpoint());
  endpoint->server_ = std::make_unique<Server>(std::move(callbacks), limits);
  absl::StatusOr<int> port = endpoint->server_->Listen(address);
  if (!port.ok()) return port.status();
  endpoint->host_ = address.host;
  endpoint->port_ = *port;
  endpoint->server_->Run();
  return endpoint;
}

HttpEndpoint::~HttpEndpoint() = default;

}  // namespace gpucmd
