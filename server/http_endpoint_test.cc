// The HTTP endpoint over real sockets: what it answers, and Note [Health under idle
// connections] (connections that send nothing or trickle hold nothing up, the one that
// waited longest makes room, deadlines close them).

#include "server/http_endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/tcp_connect.h"

namespace gpucmd {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// A deadline no test waits out: a connection closed before it was closed for another
// reason.
constexpr std::chrono::milliseconds kNeverMs{3'600'000};

struct Answer {
  std::string head;  // status line and fields
  std::string body;
};

// A client connection with a patience of 10 s per read: an answer that never comes
// fails the test instead of hanging it.
class Connection {
 public:
  explicit Connection(int port) {
    absl::StatusOr<int> connected = testing::ConnectTcp("127.0.0.1", port);
    EXPECT_TRUE(connected.ok()) << connected.status();
    fd_ = connected.value_or(-1);
  }
  ~Connection() { close(fd_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // False once the endpoint has closed the connection.
  bool Send(const std::string& bytes) {
    return send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }

  // Reads one answer: its head, then as many body bytes as Content-Length says (none
  // for an answer to HEAD). An empty head: the connection ended or nothing came.
  Answer Receive(bool to_head = false) {
    Answer answer;
    size_t end;
    while ((end = received_.find("\r\n\r\n")) == std::string::npos) {
      if (!ReadMore()) return answer;
    }
    answer.head = received_.substr(0, end + 2);
    received_.erase(0, end + 4);
    size_t length = 0;
    const size_t field = answer.head.find("Content-Length: ");
    if (field != std::string::npos && !to_head) {
      const size_t start = field + 16;
      EXPECT_TRUE(absl::SimpleAtoi(
          answer.head.substr(start, answer.head.find("\r\n", start) - start), &length));
    }
    while (received_.size() < length) {
      if (!ReadMore()) break;
    }
    answer.body = received_.substr(0, length);
    received_.erase(0, length);
    return answer;
  }

  // True when the endpoint has closed the connection (waits up to 10 s for it).
  bool ClosedByPeer() {
    char byte;
    const ssize_t n = recv(fd_, &byte, 1, 0);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
  }

  // True when the connection is still open and has nothing to read (nothing came
  // within `wait`).
  bool StillOpen(std::chrono::milliseconds wait = std::chrono::milliseconds(50)) {
    pollfd entry{.fd = fd_, .events = POLLIN};
    return poll(&entry, 1, static_cast<int>(wait.count())) == 0;
  }

 private:
  bool ReadMore() {
    char buffer[4096];
    ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
    if (n <= 0) return false;
    received_.append(buffer, n);
    return true;
  }

  int fd_ = -1;
  std::string received_;
};

class HttpEndpointTest : public ::testing::Test {
 protected:
  void Serve(HttpEndpoint::Limits limits = {}) {
    absl::StatusOr<std::unique_ptr<HttpEndpoint>> endpoint = HttpEndpoint::Start(
        {.host = "127.0.0.1", .port = 0},
        {.not_ready_reason = [this] { return not_ready_reason_; },
         .render_metrics = [this] { return render_metrics_(); }},
        limits);
    ASSERT_TRUE(endpoint.ok()) << endpoint.status();
    endpoint_ = *std::move(endpoint);
  }

  Answer Get(const std::string& path) {
    Connection connection(endpoint_->port());
    EXPECT_TRUE(connection.Send(absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: x\r\n\r\n")));
    return connection.Receive();
  }

  std::string not_ready_reason_;
  std::function<std::string()> render_metrics_ = [] { return std::string("gpucmd_up 1\n"); };
  std::unique_ptr<HttpEndpoint> endpoint_;
};

TEST_F(HttpEndpointTest, AnswersHealthReadinessAndMetrics) {
  Serve();
  Answer healthz = Get("/healthz");
  EXPECT_THAT(healthz.head, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(healthz.head, HasSubstr("Cache-Control: no-store"));
  EXPECT_EQ(healthz.body, "ok\n");
  EXPECT_EQ(Get("/readyz").body, "ready\n");
  not_ready_reason_ = "device 1 failed to start";
  Answer readyz = Get("/readyz");
  EXPECT_THAT(readyz.head, StartsWith("HTTP/1.1 503 "));
  EXPECT_EQ(readyz.body, "not ready: device 1 failed to start\n");
  Answer metrics = Get("/metrics?name=gpucmd_up");
  EXPECT_THAT(metrics.head, HasSubstr("Content-Type: text/plain; version=0.0.4"));
  EXPECT_EQ(metrics.body, "gpucmd_up 1\n");
  EXPECT_THAT(Get("/healthz/more").head, StartsWith("HTTP/1.1 404 "));
}

TEST_F(HttpEndpointTest, OnlyGetAndHeadAreServed) {
  Serve();
  Connection head(endpoint_->port());
  ASSERT_TRUE(head.Send("HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n"));
  Answer headers = head.Receive(/*to_head=*/true);
  EXPECT_THAT(headers.head, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(headers.head, HasSubstr("Content-Length: 12\r\n")) << "the GET's length";
  ASSERT_TRUE(head.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(head.Receive().body, "ok\n") << "no body came after the HEAD's answer";

  Connection post(endpoint_->port());
  ASSERT_TRUE(post.Send("POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"));
  Answer refused = post.Receive();
  EXPECT_THAT(refused.head, StartsWith("HTTP/1.1 405 "));
  EXPECT_THAT(refused.head, HasSubstr("Allow: GET, HEAD"));
}

TEST_F(HttpEndpointTest, OneConnectionCarriesSeveralRequests) {
  Serve();
  Connection connection(endpoint_->port());
  for (const char* path : {"/healthz", "/readyz", "/metrics", "/healthz"}) {
    ASSERT_TRUE(connection.Send(absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: x\r\n\r\n")));
    Answer answer = connection.Receive();
    EXPECT_THAT(answer.head, StartsWith("HTTP/1.1 200 OK\r\n")) << path;
  }
  ASSERT_TRUE(connection.Send("GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(connection.Receive().body, "ok\n");
  EXPECT_TRUE(connection.ClosedByPeer()) << "closed after the answer it was asked to close";
}

TEST_F(HttpEndpointTest, MalformedOrOversizedRequestsAreRefused) {
  Serve();
  Connection garbage(endpoint_->port());
  ASSERT_TRUE(garbage.Send("\x16\x03\x01 not http at all\r\n\r\n"));
  EXPECT_THAT(garbage.Receive().head, StartsWith("HTTP/1.1 400 "));
  EXPECT_TRUE(garbage.ClosedByPeer());

  Connection with_body(endpoint_->port());
  ASSERT_TRUE(with_body.Send("GET /healthz HTTP/1.1\r\nContent-Length: 4\r\n\r\nbody"));
  EXPECT_THAT(with_body.Receive().head, StartsWith("HTTP/1.1 400 "));

  Connection oversized(endpoint_->port());
  oversized.Send(absl::StrCat("GET /healthz HTTP/1.1\r\nX-Big: ", std::string(9000, 'a'),
                              "\r\n\r\n"));
  EXPECT_THAT(oversized.Receive().head, StartsWith("HTTP/1.1 431 "));
  EXPECT_TRUE(oversized.ClosedByPeer());
  EXPECT_EQ(Get("/healthz").body, "ok\n") << "the endpoint serves on";
}

// With a thread per connection, the idle connections would hold every thread and the
// probe would wait for their deadline, which here is an hour away.
TEST_F(HttpEndpointTest, ConnectionsThatSendNothingOrTrickleHoldNoOneUp) {
  Serve({.max_connections = 256, .request_deadline = kNeverMs});
  std::vector<std::unique_ptr<Connection>> idle;
  for (int i = 0; i < 100; ++i) {
    idle.push_back(std::make_unique<Connection>(endpoint_->port()));
    if (i % 2 == 1) {
      ASSERT_TRUE(idle.back()->Send("GET /metrics HTTP/1.1\r\nX-Slow: "));
    }
  }
  for (const char* path : {"/healthz", "/readyz", "/metrics"}) {
    Answer answer = Get(path);
    EXPECT_THAT(answer.head, StartsWith("HTTP/1.1 200 OK\r\n")) << path;
  }
  for (auto& connection : idle) EXPECT_TRUE(connection->StillOpen(std::chrono::milliseconds(0)));
}

// Note [Metrics off the loop]: were metrics rendered on the loop, the health probes
// would wait for the rendering held here.
TEST_F(HttpEndpointTest, MetricsAreRenderedOffTheLoopOnceForAllWhoAsked) {
  std::mutex mutex;
  std::condition_variable released_changed;
  bool released = false;
  int renderings = 0;
  render_metrics_ = [&] {
    std::unique_lock<std::mutex> lock(mutex);
    released_changed.wait(lock, [&] { return released; });
    return absl::StrCat("renderings ", ++renderings, "\n");
  };
  Serve();
  const std::string metrics_request = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  Connection first(endpoint_->port());
  ASSERT_TRUE(first.Send(metrics_request));
  std::vector<std::unique_ptr<Connection>> later;
  for (int i = 0; i < 5; ++i) {
    later.push_back(std::make_unique<Connection>(endpoint_->port()));
    ASSERT_TRUE(later.back()->Send(metrics_request));
  }
  EXPECT_EQ(Get("/healthz").body, "ok\n") << "answered while the metrics render";
  EXPECT_EQ(Get("/readyz").body, "ready\n");
  {
    std::lock_guard<std::mutex> lock(mutex);
    released = true;
  }
  released_changed.notify_all();
  EXPECT_EQ(first.Receive().body, "renderings 1\n");
  for (auto& connection : later) {
    EXPECT_EQ(connection->Receive().body, "renderings 2\n")
        << "one rendering for all that asked while the first ran";
  }
  ASSERT_TRUE(first.Send(metrics_request));
  EXPECT_EQ(first.Receive().body, "renderings 3\n") << "a later request sees a new one";
}

TEST_F(HttpEndpointTest, AConnectionPastTheLimitClosesTheOneThatWaitedLongest) {
  Serve({.max_connections = 4, .request_deadline = kNeverMs});
  std::vector<std::unique_ptr<Connection>> idle;
  for (int i = 0; i < 4; ++i) idle.push_back(std::make_unique<Connection>(endpoint_->port()));
  // Each connection waits again from its last answer on: 1 has waited longest, 0 least.
  for (int i : {1, 2, 3, 0}) {
    ASSERT_TRUE(idle[i]->Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
    EXPECT_EQ(idle[i]->Receive().body, "ok\n");
  }

  EXPECT_EQ(Get("/healthz").body, "ok\n") << "answered although four were open";
  EXPECT_TRUE(idle[1]->ClosedByPeer()) << "the one that waited longest";
  EXPECT_TRUE(idle[0]->StillOpen());
  EXPECT_TRUE(idle[2]->StillOpen());
  EXPECT_TRUE(idle[3]->StillOpen());
}

TEST_F(HttpEndpointTest, AConnectionHasItsDeadlineForAWholeRequest) {
  Serve({.max_connections = 256, .request_deadline = std::chrono::milliseconds(200)});
  Connection silent(endpoint_->port());
  Connection trickling(endpoint_->port());
  ASSERT_TRUE(trickling.Send("GET /healthz HTTP/1.1\r\n"));
  std::atomic<bool> trickling_refused{false};
  std::thread trickle([&] {
    // A header line every 50 ms, for up to 10 s: each is well inside the deadline.
    for (int i = 0; i < 200 && !trickling_refused; ++i) {
      if (!trickling.Send(absl::StrCat("X-", i, ": 1\r\n"))) trickling_refused = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  EXPECT_TRUE(silent.ClosedByPeer());
  EXPECT_TRUE(trickling.ClosedByPeer()) << "its trickle did not extend the deadline";
  trickling_refused = true;
  trickle.join();
}

TEST_F(HttpEndpointTest, StoppingClosesEveryConnection) {
  Serve({.max_connections = 256, .request_deadline = kNeverMs});
  Connection idle(endpoint_->port());
  Connection keep_alive(endpoint_->port());
  ASSERT_TRUE(keep_alive.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(keep_alive.Receive().body, "ok\n");
  endpoint_.reset();
  EXPECT_TRUE(idle.ClosedByPeer());
  EXPECT_TRUE(keep_alive.ClosedByPeer());
}

TEST_F(HttpEndpointTest, AnAddressInUseIsUnavailable) {
  Serve();
  absl::StatusOr<std::unique_ptr<HttpEndpoint>> second =
      HttpEndpoint::Start({.host = "127.0.0.1", .port = endpoint_->port()}, {});
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("127.0.0.1"));
}

}  // namespace
}  // namespace gpucmd
