// Starts the real gpucmdd binary and talks to it the way users and operators do: the
// C++ client library, gpucmdctl, gRPC health, and the HTTP endpoint.

#include <arpa/inet.h>
#include <grp.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "absl/functional/any_invocable.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "client/client.h"
#include "client/submit_stream.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/impl/client_unary_call.h"
#include "gtest/gtest.h"
#include "tests/kernels/kernel_sources.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/process_census.h"
#include "tests/testing/tcp_connect.h"

namespace gpucmd {
namespace {

using ::gpucmd::testing::CommandResult;
using ::gpucmd::testing::DaemonProcess;
using ::gpucmd::testing::HttpGet;
using ::gpucmd::testing::RunCommand;
using ::gpucmd::testing::RunfilePath;
using ::gpucmd::testing::ShortTempDir;
using ::gpucmd::testing::ConnectTcp;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t kGiB = uint64_t{1} << 30;

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = ShortTempDir();
    socket_path_ = directory_ + "/gpucmdd.sock";
    config_path_ = directory_ + "/gpucmdd.textproto";
    std::ofstream(config_path_) << "cpu { device_count: 2 memory_bytes_per_device: "
                                << kGiB << " }\nlog_level: \"debug\"\n";
    absl::StatusOr<DaemonProcess> daemon = DaemonProcess::Start(
        {"--listen=unix:" + socket_path_, "--listen=tcp:127.0.0.1:0",
         "--http_listen=127.0.0.1:0", "--config=" + config_path_});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_.emplace(*std::move(daemon));
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(daemon_->grpc_target());
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  CommandResult Ctl(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {RunfilePath("client/gpucmdctl"),
                                     "--target=" + daemon_->grpc_target()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv);
  }

  std::string directory_;
  std::string socket_path_;
  std::string config_path_;
  std::optional<DaemonProcess> daemon_;
  std::unique_ptr<Client> client_;
};

TEST_F(DaemonTest, ReadyLineNamesEveryBoundAddress) {
  EXPECT_THAT(daemon_->ready_line(), HasSubstr("grpc=unix:" + socket_path_ + ",tcp:127.0.0.1:"));
  ASSERT_EQ(daemon_->grpc_targets().size(), 2u);
  EXPECT_GT(daemon_->http_port(), 0);
  // The TCP listener (bound on port 0) answers on the port the line names.
  absl::StatusOr<std::unique_ptr<Client>> tcp = Client::Connect(daemon_->grpc_targets()[1]);
  ASSERT_TRUE(tcp.ok()) << tcp.status();
  EXPECT_TRUE((*tcp)->ListDevices().ok());
}

TEST_F(DaemonTest, GrpcHealthIsServing) {
  absl::StatusOr<bool> daemon = client_->IsServing("");
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  EXPECT_TRUE(*daemon);
  absl::StatusOr<bool> service = client_->IsServing("gpucmd.v1.GpuCommand");
  ASSERT_TRUE(service.ok()) << service.status();
  EXPECT_TRUE(*service);
  EXPECT_EQ(client_->IsServing("no.such.Service").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(DaemonTest, ListDevicesReportsTheConfiguredDevices) {
  absl::StatusOr<std::vector<v1::DeviceInfo>> devices = client_->ListDevices();
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 2u);
  for (uint32_t i = 0; i < 2; ++i) {
    EXPECT_EQ((*devices)[i].ordinal(), i);
    EXPECT_EQ((*devices)[i].driver(), v1::DRIVER_KIND_CPU);
    EXPECT_EQ((*devices)[i].memory_capacity_bytes(), kGiB);
    EXPECT_TRUE((*devices)[i].ready());
  }
}

TEST_F(DaemonTest, GpucmdctlHealthAndDevices) {
  CommandResult health = Ctl({"health"});
  EXPECT_EQ(health.exit_code, 0) << health.stderr_text;
  EXPECT_THAT(health.stdout_text, HasSubstr("gpucmd.v1.GpuCommand: SERVING"));

  CommandResult devices = Ctl({"devices"});
  EXPECT_EQ(devices.exit_code, 0) << devices.stderr_text;
  EXPECT_THAT(devices.stdout_text, HasSubstr("gpucmd CPU device 1"));
  EXPECT_THAT(devices.stdout_text, HasSubstr("1.0 GiB"));

  CommandResult json = Ctl({"--json", "devices"});
  ASSERT_EQ(json.exit_code, 0) << json.stderr_text;
  v1::ListDevicesResponse parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json.stdout_text, &parsed).ok())
      << json.stdout_text;
  EXPECT_EQ(parsed.devices_size(), 2);

  CommandResult stats = Ctl({"stats"});
  EXPECT_EQ(stats.exit_code, 0) << stats.stderr_text;
  EXPECT_THAT(stats.stdout_text, HasSubstr("gpucmdd 0."));
}

TEST_F(DaemonTest, GpucmdctlBenchMeasuresEveryPathThroughTheDaemon) {
  CommandResult bench =
      Ctl({"bench", "--bench_seconds=0.05", "--bench_bytes=65536"});
  ASSERT_EQ(bench.exit_code, 0) << bench.stderr_text;
  for (const char* row : {"ListDevices round trip", "idle Synchronize",
                          "empty launches + Synchronize, unary",
                          "empty launches + Synchronize, Submit batches of 64",
                          "inline write answered once copied", "inline read",
                          "shared-memory write", "shared-memory read"}) {
    EXPECT_THAT(bench.stdout_text, HasSubstr(row)) << bench.stdout_text;
  }
  EXPECT_THAT(bench.stdout_text, Not(HasSubstr("("))) << "a figure could not be measured";
  EXPECT_THAT(bench.stdout_text, HasSubstr("launches/s"));
  EXPECT_THAT(bench.stdout_text, HasSubstr("B/s")) << "a byte rate, in the unit it fills";
  EXPECT_EQ(client_->GetStats()->sessions_open(), 0u) << "the bench closes its session";
}

// A figure a limit of the daemon's keeps from being measured says so, and the others
// are measured all the same.
TEST_F(DaemonTest, GpucmdctlBenchSaysWhichFiguresItCouldNotMeasureAndWhy) {
  absl::StatusOr<DaemonProcess> daemon = DaemonProcess::StartWithConfig(
      "limits { max_shared_memory_regions: 0 session_memory_quota_bytes: 1048576 }");
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  for (const char* bytes : {"--bench_bytes=65536", "--bench_bytes=2097152"}) {
    CommandResult bench = RunCommand({RunfilePath("client/gpucmdctl"),
                                      "--target=" + daemon->grpc_target(), "bench",
                                      "--bench_seconds=0.05", bytes});
    ASSERT_EQ(bench.exit_code, 0) << bench.stderr_text;
    EXPECT_THAT(bench.stdout_text, HasSubstr("launches/s")) << bench.stdout_text;
    if (std::string(bytes) == "--bench_bytes=65536") {
      EXPECT_THAT(bench.stdout_text, HasSubstr("B/s")) << "the inline transfers fit the quota";
      EXPECT_THAT(bench.stdout_text,
                  HasSubstr("not measured (the session holds 0 shared-memory regions, its "
                            "limit (limits.max_shared_memory_regions))"));
    } else {  // no buffer for any transfer
      EXPECT_THAT(bench.stdout_text, Not(HasSubstr("B/s")));
      EXPECT_THAT(bench.stdout_text, HasSubstr("inline read, 2.0 MiB"));
      EXPECT_THAT(bench.stdout_text, HasSubstr("not measured (session quota"));
    }
  }
}

TEST_F(DaemonTest, GpucmdctlBenchRefusesOptionsThatMeasureNothing) {
  for (const char* option : {"--bench_bytes=0", "--bench_seconds=0", "--bench_seconds=-1",
                             "--bench_seconds=nan", "--bench_seconds=inf"}) {
    CommandResult bench = Ctl({"bench", option});
    EXPECT_EQ(bench.exit_code, 2) << option << ": " << bench.stdout_text;
    EXPECT_THAT(bench.stderr_text, HasSubstr("INVALID_ARGUMENT")) << option;
    EXPECT_THAT(bench.stderr_text, HasSubstr("must be positive")) << option;
  }
  EXPECT_EQ(client_->GetStats()->sessions_open(), 0u) << "nothing ran";
}

TEST(ClientTest, MessageLimitsTooSmallForAWritesHeaderAreRefused) {
  for (int limit : {-1, 0, 1024, ClientOptions::kMinMessageBytes - 1}) {
    absl::StatusOr<std::unique_ptr<Client>> client =
        Client::Connect("unix:" + ShortTempDir() + "/nobody.sock",
                        ClientOptions{.max_message_bytes = limit});
    EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument) << limit;
  }
}

TEST(ClientTest, MalformedTargetsAreRefusedAtOnceSayingWhy) {
  for (const char* target : {"", "unix:", "tcp:", "tcp:localhost", "tcp:[::1", "tcp:[::1]:",
                             "tcp::8080", "tcp:host:0", "tcp:host:65536", "tcp:host:+80",
                             "tcp:host: 80", "tcp:::1]:80", "tcp:::1:80", "tcp:[a[b]:80"}) {
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(target);
    EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument) << target;
    EXPECT_THAT(std::string(client.status().message()), HasSubstr("target")) << target;
  }
  // IP literals: a name would go to c-ares, whose resolver leaks a few bytes under LSan.
  for (const char* target : {"tcp:127.0.0.1:1", "tcp:[::1]:1", "tcp:127.0.0.1:65535"}) {
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(
        target, ClientOptions{.connect_timeout = std::chrono::milliseconds(200)});
    EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable) << target;
  }
}

TEST(GpucmdctlTest, UnreachableDaemonIsAFailure) {
  CommandResult result =
      RunCommand({RunfilePath("client/gpucmdctl"), "--timeout_ms=300",
                  "--target=unix:" + ShortTempDir() + "/nobody.sock", "health"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.stderr_text, HasSubstr("not reachable"));
}

TEST(GpucmdctlTest, FlagsNoCommandCanUseAreRefusedBeforeConnecting) {
  for (const char* flag : {"--timeout_ms=0", "--timeout_ms=-5", "--interval_seconds=0",
                           "--interval_seconds=-1", "--interval_seconds=nan",
                           "--interval_seconds=1e300", "--frames=-1"}) {
    CommandResult result =
        RunCommand({RunfilePath("client/gpucmdctl"),
                    "--target=unix:" + ShortTempDir() + "/nobody.sock", flag, "top"});
    EXPECT_EQ(result.exit_code, 2) << flag;
    const std::string name(flag, std::string(flag).find('='));
    EXPECT_THAT(result.stderr_text, HasSubstr("INVALID_ARGUMENT: " + name)) << flag;
  }
}

TEST(GpucmdctlTest, AnotherCommandsFlagIsAUsageErrorNotIgnored) {
  const std::string target = "--target=unix:" + ShortTempDir() + "/nobody.sock";
  for (const auto& [command, flag] :
       std::vector<std::pair<std::string, std::string>>{{"bench", "--once"},
                                                        {"stats", "--frames=3"},
                                                        {"health", "--interval_seconds=2"},
                                                        {"top", "--bench_bytes=4096"},
                                                        {"sessions", "--bench_seconds=1"}}) {
    CommandResult result = RunCommand({RunfilePath("client/gpucmdctl"), target, flag, command});
    EXPECT_EQ(result.exit_code, 2) << command << " " << flag;
    const std::string name = flag.substr(0, flag.find('='));
    EXPECT_THAT(result.stderr_text, HasSubstr("INVALID_ARGUMENT: " + name + " is a flag of `"))
        << command << " " << flag;
    EXPECT_THAT(result.stderr_text, HasSubstr("not of `" + command + "`")) << flag;
  }
  // A flag given its default changes nothing and is accepted: the daemon's absence is
  // then the failure.
  CommandResult defaults = RunCommand(
      {RunfilePath("client/gpucmdctl"), "--timeout_ms=300", target, "--once=false", "health"});
  EXPECT_EQ(defaults.exit_code, 1) << defaults.stderr_text;
  EXPECT_THAT(defaults.stderr_text, HasSubstr("not reachable"));
}

TEST(GpucmdctlTest, UnknownCommandIsAUsageError) {
  CommandResult result = RunCommand({RunfilePath("client/gpucmdctl"), "frobnicate"});
  EXPECT_EQ(result.exit_code, 2);
}

TEST_F(DaemonTest, HttpHealthzReadyzAndMetrics) {
  absl::StatusOr<testing::HttpResponse> healthz =
      HttpGet(daemon_->http_host(), daemon_->http_port(), "/healthz");
  ASSERT_TRUE(healthz.ok()) << healthz.status();
  EXPECT_EQ(healthz->status, 200);

  absl::StatusOr<testing::HttpResponse> readyz =
      HttpGet(daemon_->http_host(), daemon_->http_port(), "/readyz");
  ASSERT_TRUE(readyz.ok()) << readyz.status();
  EXPECT_EQ(readyz->status, 200);

  absl::StatusOr<testing::HttpResponse> unknown =
      HttpGet(daemon_->http_host(), daemon_->http_port(), "/nope");
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ(unknown->status, 404);

  ASSERT_TRUE(client_->ListDevices().ok());
  absl::StatusOr<testing::HttpResponse> metrics =
      HttpGet(daemon_->http_host(), daemon_->http_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(metrics->status, 200);
  EXPECT_THAT(metrics->body, HasSubstr("gpucmd_queue_depth{device=\"0\"} 0"));
  EXPECT_THAT(metrics->body, HasSubstr("gpucmd_queue_depth{device=\"1\"} 0"));
  EXPECT_THAT(metrics->body, HasSubstr("gpucmd_commands_in_flight{device=\"0\"}"));
  EXPECT_THAT(metrics->body, HasSubstr("gpucmd_uptime_seconds"));
  EXPECT_THAT(metrics->body,
              HasSubstr("gpucmd_requests_total{code=\"OK\",rpc=\"gpucmd.v1.GpuCommand/"
                        "ListDevices\"}"));

  // The exposition must parse as Prometheus text: promtool is the reference parser.
  std::string path = directory_ + "/metrics.txt";
  std::ofstream(path) << metrics->body;
  CommandResult check = RunCommand({"/bin/sh", "-c", "promtool check metrics < " + path});
  EXPECT_EQ(check.exit_code, 0) << check.stdout_text << check.stderr_text;
  EXPECT_EQ(check.stdout_text + check.stderr_text, "") << "promtool's lint remarks";
}

// The batch stream counts itself rather than through the metrics interceptor: in flight
// while it is open, then by status code like every other call.
TEST_F(DaemonTest, MetricsCountTheBatchStreamLikeOtherCalls) {
  auto in_flight = [this] {
    return testing::MetricValue(daemon_->http_host(), daemon_->http_port(),
                                "gpucmd_rpcs_in_flight")
        .value_or(-1);
  };
  const double before = in_flight();
  ASSERT_GE(before, 0);
  {
    grpc::ClientContext context;
    auto stream = client_->stub().Submit(&context);
    v1::SubmitRequest batch;
    v1::Command* command = batch.add_commands();
    command->set_sequence(1);
    command->mutable_synchronize()->set_session("no-such-session");
    ASSERT_TRUE(stream->Write(batch));
    v1::SubmitResponse replies;
    ASSERT_TRUE(stream->Read(&replies));
    ASSERT_EQ(replies.replies_size(), 1);
    EXPECT_EQ(replies.replies(0).status().code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_EQ(in_flight(), before + 1) << "the open stream is a call in flight";
    ASSERT_TRUE(stream->WritesDone());
    EXPECT_TRUE(stream->Finish().ok());
  }
  // The stream leaves the count once gRPC is done with it, just after its status left.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (in_flight() != before && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(in_flight(), before);
  absl::StatusOr<testing::HttpResponse> metrics =
      HttpGet(daemon_->http_host(), daemon_->http_port(), "/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_THAT(metrics->body, HasSubstr("gpucmd_requests_total{code=\"OK\",rpc=\"gpucmd.v1."
                                       "GpuCommand/Submit\"} 1"));
  EXPECT_THAT(metrics->body,
              HasSubstr("gpucmd_request_duration_seconds_count{rpc=\"gpucmd.v1.GpuCommand/"
                        "Submit\"} 1"));
}

// A call names its method itself: calls of names no service serves all count as "other"
// (Note in server/rpc/metrics_interceptor.h), so made-up names cannot grow the metrics
// without end, while the served methods of every service keep series of their own.
TEST_F(DaemonTest, MetricsCountCallsOfUnservedMethodsAsOther) {
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(daemon_->grpc_target(), grpc::InsecureChannelCredentials());
  constexpr int kMadeUp = 40;
  for (int i = 0; i < kMadeUp; ++i) {
    // Half in a service the daemon serves, half in one it does not.
    const std::string method = i % 2 == 0 ? absl::StrCat("/gpucmd.v1.GpuCommand/MadeUp", i)
                                          : absl::StrCat("/made.up.Service", i, "/Call");
    grpc::ClientContext context;
    grpc::Slice empty;
    grpc::ByteBuffer request(&empty, 1);
    grpc::ByteBuffer response;
    const grpc::Status status =
        grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
            channel.get(),
            grpc::internal::RpcMethod(method.c_str(), grpc::internal::RpcMethod::NORMAL_RPC),
            &context, request, &response);
    ASSERT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED) << method;
  }
  ASSERT_TRUE(client_->IsServing("").ok());
  ASSERT_TRUE(client_->ListDevices().ok());

  absl::StatusOr<testing::HttpResponse> metrics =
      HttpGet(daemon_->http_host(), daemon_->http_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_THAT(metrics->body,
              HasSubstr(absl::StrCat("gpucmd_requests_total{code=\"UNIMPLEMENTED\",rpc=\"other\"} ",
                                     kMadeUp, "\n")));
  EXPECT_THAT(
      metrics->body,
      HasSubstr(absl::StrCat("gpucmd_request_duration_seconds_count{rpc=\"other\"} ", kMadeUp)));
  EXPECT_THAT(metrics->body, Not(HasSubstr("MadeUp")));
  EXPECT_THAT(metrics->body, Not(HasSubstr("made.up")));
  EXPECT_THAT(
      metrics->body,
      HasSubstr("gpucmd_requests_total{code=\"OK\",rpc=\"grpc.health.v1.Health/Check\"} 1"));
  EXPECT_THAT(metrics->body, HasSubstr("gpucmd_requests_total{code=\"OK\",rpc=\"gpucmd.v1."
                                       "GpuCommand/ListDevices\"} 1"));
}

// Per-client and per-device activity (Note [Per-client metrics]): launches and bytes by
// client name and by device, sessions and memory by client; past the limit of labelled
// names, a new client counts as client="other"; promtool finds nothing to remark.
TEST_F(DaemonTest, MetricsCountActivityPerClientWithBoundedLabels) {
  std::deque<Session> sessions;  // Sessions stay where they are made
  for (const std::string name : {"alice", "bob"}) {
    absl::StatusOr<Session> session = client_->OpenSession(0, name);
    ASSERT_TRUE(session.ok()) << session.status();
    sessions.push_back(*std::move(session));
  }
  absl::StatusOr<v1::CompileResponse> add = sessions[0].Compile(kernels::kVectorAdd, "vector_add");
  ASSERT_TRUE(add.ok()) << add.status();
  absl::StatusOr<Buffer> a = sessions[0].Allocate(4096);
  absl::StatusOr<Buffer> b = sessions[0].Allocate(4096);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(sessions[0].Write(*a, 0, std::string(4096, '\1')).ok());
  ASSERT_TRUE(sessions[0].Copy(*a, 0, *b, 0, 1000).ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(sessions[0]
                    .Launch(add->kernel_id(), {MakeDim3(1), MakeDim3(4)},
                            {BufferArgument(*a, v1::ACCESS_READ), BufferArgument(*a, v1::ACCESS_READ),
                             BufferArgument(*b, v1::ACCESS_WRITE), Int32Argument(4)})
                    .ok());
  }
  ASSERT_TRUE(sessions[0].Read(*b, 0, 100).ok());
  absl::StatusOr<Buffer> bobs = sessions[1].Allocate(64);
  ASSERT_TRUE(bobs.ok() && sessions[1].Write(*bobs, 0, std::string(64, 'b')).ok());
  // More names with sessions open than get labels of their own: the rest are "other".
  for (int i = 0; i < 25; ++i) {
    absl::StatusOr<Session> session = client_->OpenSession(0, absl::StrCat("many-", i));
    ASSERT_TRUE(session.ok()) << session.status();
    sessions.push_back(*std::move(session));
  }
  absl::StatusOr<testing::HttpResponse> metrics =
      HttpGet(daemon_->http_host(), daemon_->http_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  const std::string& body = metrics->body;
  EXPECT_THAT(body, HasSubstr("gpucmd_client_launches_total{client=\"alice\"} 3"));
  EXPECT_THAT(body, HasSubstr(
      "gpucmd_client_bytes_total{client=\"alice\",direction=\"host_to_device\"} 4096"));
  EXPECT_THAT(body, HasSubstr(
      "gpucmd_client_bytes_total{client=\"alice\",direction=\"device_to_device\"} 1000"));
  EXPECT_THAT(body, HasSubstr(
      "gpucmd_client_bytes_total{client=\"alice\",direction=\"device_to_host\"} 100"));
  EXPECT_THAT(body, HasSubstr("gpucmd_client_sessions{client=\"alice\"} 1"));
  EXPECT_THAT(body, HasSubstr("gpucmd_client_memory_bytes{client=\"alice\"} 8192"));
  EXPECT_THAT(body, HasSubstr("gpucmd_client_sessions{client=\"bob\"} 1"))
      << "bob was active before the names past the limit came";
  EXPECT_THAT(body, HasSubstr("gpucmd_launches_total{device=\"0\"} 3"));
  EXPECT_THAT(body, HasSubstr(
      "gpucmd_copy_bytes_total{device=\"0\",direction=\"host_to_device\"} 4160"))
      << "alice's 4096 bytes and bob's 64";
  EXPECT_THAT(body, HasSubstr("gpucmd_queue_wait_seconds_count{device=\"0\"}"));
  EXPECT_THAT(body, HasSubstr("gpucmd_client_sessions{client=\"other\"} 7"))
      << "27 names with sessions, 20 labels of their own";
  int labelled = 0;
  for (size_t at = body.find("gpucmd_client_sessions{client="); at != std::string::npos;
       at = body.find("gpucmd_client_sessions{client=", at + 1)) {
    ++labelled;
  }
  EXPECT_EQ(labelled, 21) << "20 client names and \"other\"";

  std::string path = directory_ + "/metrics.txt";
  std::ofstream(path) << body;
  CommandResult check = RunCommand({"/bin/sh", "-c", "promtool check metrics < " + path});
  EXPECT_EQ(check.exit_code, 0) << check.stdout_text << check.stderr_text;
  EXPECT_EQ(check.stdout_text + check.stderr_text, "") << "promtool's lint remarks";
}

// `gpucmdctl top`: JSON frames with rates while a session launches, and the live table
// in a terminal (tmux), refreshed in place.
TEST_F(DaemonTest, GpucmdctlTopShowsDevicesLive) {
  absl::StatusOr<Session> session = client_->OpenSession(0, "busy");
  ASSERT_TRUE(session.ok()) << session.status();
  absl::StatusOr<v1::CompileResponse> spin = session->Compile(kernels::kSpin, "spin");
  ASSERT_TRUE(spin.ok()) << spin.status();
  std::atomic<bool> launching{true};
  std::thread launcher([&] {
    while (launching) {
      if (!session->Launch(spin->kernel_id(), {MakeDim3(1), MakeDim3(1)}, {Int64Argument(0)})
               .ok()) {
        session->Synchronize().IgnoreError();
      }
    }
  });
  CommandResult frames = Ctl({"--json", "--frames=3", "--interval_seconds=0.3", "top"});
  launching = false;
  launcher.join();
  ASSERT_EQ(frames.exit_code, 0) << frames.stderr_text;
  std::vector<std::string> lines = absl::StrSplit(frames.stdout_text, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u) << frames.stdout_text;
  for (const std::string& line : lines) {
    EXPECT_THAT(line, HasSubstr("\"device\":0,\"ready\":true"));
    EXPECT_THAT(line, HasSubstr("\"device\":1,"));
  }
  EXPECT_THAT(frames.stdout_text, ::testing::ContainsRegex("\"launches_per_second\":[1-9]"))
      << "the launches showed as a rate";
  // The caller's own session, with its owner and its launch rate.
  EXPECT_THAT(lines.back(),
              ::testing::ContainsRegex(absl::StrCat(
                  "\"client_name\":\"busy\",\"device\":0,\"owner\":\"uid:", geteuid(),
                  "\".*\"launches_per_second\":[1-9]")));

  const std::string tmux_session = absl::StrCat("gpucmd-top-", getpid());
  const std::string top = absl::StrCat(RunfilePath("client/gpucmdctl"), " --target=",
                                       daemon_->grpc_target(), " --interval_seconds=0.2 top");
  ASSERT_EQ(RunCommand({"/usr/bin/tmux", "new-session", "-d", "-s", tmux_session, "-x", "160", "-y",
                        "20", top})
                .exit_code,
            0);
  std::string screen;
  for (int attempt = 0; attempt < 50 && !absl::StrContains(screen, "DEV"); ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    screen = RunCommand({"/usr/bin/tmux", "capture-pane", "-p", "-t", tmux_session}).stdout_text;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // a few frames more
  screen = RunCommand({"/usr/bin/tmux", "capture-pane", "-p", "-t", tmux_session}).stdout_text;
  RunCommand({"/usr/bin/tmux", "kill-session", "-t", tmux_session});
  EXPECT_THAT(screen, HasSubstr("gpucmd top: gpucmdd"));
  EXPECT_THAT(screen, HasSubstr("LAUNCH/S"));
  EXPECT_EQ(std::count(screen.begin(), screen.end(), '['), 2) << "one frame, two devices:\n"
                                                              << screen;
  EXPECT_THAT(screen, ::testing::ContainsRegex(absl::StrCat("busy +0 +uid:", geteuid())))
      << "the session's row:\n" << screen;
}

// Connections that send nothing, or only the start of a request, do not keep the
// health endpoints from answering (Note [Health under idle connections]): more of them
// than the endpoint keeps open, each of which would hold a thread for a second if
// connections held threads (HttpGet gives up after 10 s without an answer).
TEST_F(DaemonTest, HealthAnswersWhileOtherConnectionsIdle) {
  std::vector<int> idle;
  for (int i = 0; i < 300; ++i) {
    absl::StatusOr<int> connected = ConnectTcp(daemon_->http_host(), daemon_->http_port());
    ASSERT_TRUE(connected.ok()) << connected.status();
    const int fd = *connected;
    if (i % 2 == 1) {
      const std::string start = "GET /metrics HTTP/1.1\r\nX-Slow: ";
      ASSERT_EQ(write(fd, start.data(), start.size()), static_cast<ssize_t>(start.size()));
    }
    idle.push_back(fd);
  }
  for (const char* path : {"/healthz", "/readyz", "/metrics"}) {
    absl::StatusOr<testing::HttpResponse> answer =
        HttpGet(daemon_->http_host(), daemon_->http_port(), path);
    ASSERT_TRUE(answer.ok()) << path << ": " << answer.status();
    EXPECT_EQ(answer->status, 200) << path;
  }
  for (int fd : idle) close(fd);
}

// What the README promises of the endpoint's connections, through the daemon:
// keep-alive requests on one connection, oversized requests refused, and a connection
// that sends nothing closed after its second.
TEST_F(DaemonTest, TheHttpEndpointKeepsConnectionsAliveAndBoundsThem) {
  auto receive_all = [](int fd) {
    std::string received;
    char buffer[4096];
    for (ssize_t n; (n = recv(fd, buffer, sizeof(buffer), 0)) > 0;) received.append(buffer, n);
    return received;
  };
  absl::StatusOr<int> keep_alive = ConnectTcp(daemon_->http_host(), daemon_->http_port());
  ASSERT_TRUE(keep_alive.ok()) << keep_alive.status();
  const std::string requests =
      "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
      "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  ASSERT_EQ(write(*keep_alive, requests.data(), requests.size()),
            static_cast<ssize_t>(requests.size()));
  const std::string answers = receive_all(*keep_alive);
  close(*keep_alive);
  EXPECT_THAT(answers, ::testing::ContainsRegex("^HTTP/1.1 200 OK\r\n(.|\r|\n)*ok\n"
                                                "HTTP/1.1 200 OK\r\n(.|\r|\n)*ready\n$"))
      << answers;

  absl::StatusOr<int> oversized = ConnectTcp(daemon_->http_host(), daemon_->http_port());
  ASSERT_TRUE(oversized.ok()) << oversized.status();
  const std::string big = absl::StrCat("GET /healthz HTTP/1.1\r\nX-Big: ",
                                       std::string(9000, 'a'), "\r\n\r\n");
  ASSERT_EQ(write(*oversized, big.data(), big.size()), static_cast<ssize_t>(big.size()));
  EXPECT_THAT(receive_all(*oversized), ::testing::StartsWith("HTTP/1.1 431 "));
  close(*oversized);

  absl::StatusOr<int> silent = ConnectTcp(daemon_->http_host(), daemon_->http_port());
  ASSERT_TRUE(silent.ok()) << silent.status();
  char byte;
  EXPECT_EQ(recv(*silent, &byte, 1, 0), 0) << "closed by the daemon within the patience";
  close(*silent);
}

// A connection to a TCP listener that never opens HTTP/2 is closed after
// limits.tcp_handshake_timeout_seconds (gRPC's own default: two minutes), so such
// connections cannot pile up.
TEST_F(DaemonTest, ATcpConnectionThatNeverSpeaksIsClosed) {
  absl::StatusOr<DaemonProcess> daemon = DaemonProcess::StartWithConfig(
      "limits { tcp_handshake_timeout_seconds: 1 }", {"--listen=tcp:127.0.0.1:0"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  ASSERT_EQ(daemon->grpc_targets().size(), 2u);
  const std::string& target = daemon->grpc_targets()[1];
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(target.substr(target.rfind(':') + 1), &port)) << target;
  absl::StatusOr<int> connected = ConnectTcp("127.0.0.1", port, std::chrono::seconds(30));
  ASSERT_TRUE(connected.ok()) << connected.status();
  const int fd = *connected;
  char buffer[256];
  ssize_t n;
  while ((n = recv(fd, buffer, sizeof(buffer), 0)) > 0) {
  }
  EXPECT_TRUE(n == 0 || errno == ECONNRESET) << "still open after 30 s: " << strerror(errno);
  close(fd);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(target);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE((*client)->ListDevices().ok()) << "a client that speaks is served";
}

// A session opened without a lease says how long it lives idle, and goes after that:
// its token is unknown and its memory back on the device.
TEST_F(DaemonTest, ASessionWithoutALeaseSaysHowLongItLivesIdleAndGoesAfterIt) {
  absl::StatusOr<DaemonProcess> daemon =
      DaemonProcess::StartWithConfig("limits { session_idle_timeout_seconds: 1 }");
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(daemon->grpc_target());
  ASSERT_TRUE(client.ok()) << client.status();
  v1::GpuCommand::Stub& stub = (*client)->stub();
  v1::OpenSessionResponse opened;
  {
    grpc::ClientContext context;
    v1::OpenSessionRequest request;
    request.set_client_name("no lease");
    ASSERT_TRUE(stub.OpenSession(&context, request, &opened).ok());
  }
  EXPECT_EQ(opened.idle_timeout_ms(), 1000u);
  v1::AllocateRequest allocate;
  allocate.set_session(opened.session());
  allocate.set_size_bytes(uint64_t{1} << 20);
  {
    grpc::ClientContext context;
    v1::AllocateResponse allocated;
    ASSERT_TRUE(stub.Allocate(&context, allocate, &allocated).ok());
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  absl::StatusOr<v1::GetStatsResponse> stats;
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    stats = (*client)->GetStats();
    ASSERT_TRUE(stats.ok()) << stats.status();
  } while (stats->sessions_open() != 0 && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(stats->sessions_open(), 0u) << "still open 30 s after a 1 s idle timeout";
  grpc::ClientContext context;
  v1::AllocateResponse allocated;
  EXPECT_EQ(stub.Allocate(&context, allocate, &allocated).error_code(), grpc::NOT_FOUND);
  do {
    stats = (*client)->GetStats();
    ASSERT_TRUE(stats.ok()) << stats.status();
  } while (stats->devices(0).memory_used_bytes() != 0 &&
           std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(stats->devices(0).memory_used_bytes(), 0u);
}

// Every client connection and handed-over descriptor holds a descriptor: the daemon
// takes what the hard limit allows, not the soft limit it was started with (1024 under
// systemd).
TEST_F(DaemonTest, TheDescriptorLimitIsRaisedToTheHardLimit) {
  rlimit inherited;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &inherited), 0);
  if (inherited.rlim_max <= 1024) GTEST_SKIP() << "a hard limit of 1024 leaves nothing to raise";
  rlimit lowered = inherited;
  lowered.rlim_cur = 1024;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
  absl::StatusOr<DaemonProcess> daemon = DaemonProcess::StartWithConfig("", {});
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &inherited), 0);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  std::ifstream limits(absl::StrCat("/proc/", daemon->pid(), "/limits"));
  std::string line;
  while (std::getline(limits, line) && !absl::StartsWith(line, "Max open files")) {
  }
  std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
  ASSERT_EQ(fields.size(), 6u) << line;  // Max open files SOFT HARD files
  EXPECT_EQ(fields[3], std::to_string(inherited.rlim_max)) << line;
  EXPECT_EQ(fields[4], std::to_string(inherited.rlim_max)) << line;
}

// An operator's `top -H` or a profiler tells the daemon's threads apart by name: each of
// the two devices has its device thread, completion threads and stream workers named.
TEST_F(DaemonTest, ThreadsCarryNamesThatSayWhatTheyDo) {
  std::vector<std::string> names;
  for (const auto& [thread, name] : testing::ThreadNamesOf(daemon_->pid())) names.push_back(name);
  for (const char* expected : {"gpucmd-device0", "gpucmd-device1", "gpucmd-wait0",
                               "gpucmd-wait1", "gpucmd-stream0", "gpucmd-reaper",
                               "gpucmd-accept", "gpucmd-http", "gpucmd-compile"}) {
    EXPECT_THAT(names, ::testing::Contains(expected));
  }
}

// Note [Completions called back] in server/core/device_worker.h, for waits for room:
// batches waiting for room to queue (limits.session_queued_commands) hold no completion
// thread while they wait. Twelve sessions share the device's one stream behind another
// session's kernel of a second or more; each sends a batch of three launches with room
// for two. Were each wait for room to block a thread, the daemon would start a completion
// thread for each waiting session beyond its first four.
TEST_F(DaemonTest, BatchesWaitingForRoomHoldNoCompletionThreads) {
  constexpr int kSessions = 12;
  absl::StatusOr<DaemonProcess> daemon = DaemonProcess::StartWithConfig(
      "cpu { streams_per_device: 1 }\nlimits { session_queued_commands: 2 }");
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(daemon->grpc_target());
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<Session> long_kernel = (*client)->OpenSession(0, "long kernel");
  ASSERT_TRUE(long_kernel.ok()) << long_kernel.status();
  absl::StatusOr<v1::CompileResponse> spin = long_kernel->Compile(kernels::kSpin, "spin");
  ASSERT_TRUE(spin.ok()) << spin.status();
  const LaunchShape one{MakeDim3(1), MakeDim3(1)};
  std::vector<Session> sessions;
  std::vector<SubmitStream> streams;
  for (int i = 0; i < kSessions; ++i) {
    absl::StatusOr<Session> session = (*client)->OpenSession(0, "waiting " + std::to_string(i));
    ASSERT_TRUE(session.ok()) << session.status();
    sessions.push_back(*std::move(session));
    absl::StatusOr<SubmitStream> stream = SubmitStream::Open(sessions.back());
    ASSERT_TRUE(stream.ok()) << stream.status();
    streams.push_back(*std::move(stream));
  }
  // The threads the device started, once each named itself (a thread just started still
  // has its creator's name): the count stays the same over ten looks 20 ms apart.
  int threads_before = testing::ThreadsNamed(daemon->pid(), "gpucmd-wait0");
  for (int same = 0, looks = 0; same < 10 && looks < 250; ++looks) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const int now = testing::ThreadsNamed(daemon->pid(), "gpucmd-wait0");
    same = now == threads_before ? same + 1 : 0;
    threads_before = now;
  }
  ASSERT_TRUE(long_kernel->Launch(spin->kernel_id(), one, {Int64Argument(4'000'000'000)}).ok());
  for (int i = 0; i < kSessions; ++i) {
    SubmitBatch batch(sessions[i]);
    for (int launch = 0; launch < 3; ++launch) {
      batch.Launch(spin->kernel_id(), one, {Int64Argument(0)});
    }
    ASSERT_TRUE(streams[i].Send(batch).ok());
  }
  std::vector<absl::AnyInvocable<void()>> receives;
  for (SubmitStream& stream : streams) {
    receives.push_back([&stream] {
      absl::StatusOr<BatchReplies> replies = stream.Receive();
      EXPECT_TRUE(replies.ok()) << replies.status();
      if (replies.ok()) {
        EXPECT_TRUE(replies->FirstError().ok()) << replies->FirstError();
      }
    });
  }
  const int most =
      testing::MostThreadsNamedDuring(daemon->pid(), "gpucmd-wait0", std::move(receives));
  EXPECT_EQ(most, threads_before)
      << "batches waiting for room held completion threads (" << threads_before << " before)";
  EXPECT_TRUE(long_kernel->Synchronize().ok());
}

// Note [Device work yields to the control plane] in base/batch_scheduling.h: the stream
// workers and the executor that ran a client's kernel are batch work; the threads that
// answer clients are not.
TEST_F(DaemonTest, DeviceWorkRunsAsBatchWorkAndAnswersDoNot) {
  absl::StatusOr<Session> session = client_->OpenSession(0, "batch work");
  ASSERT_TRUE(session.ok()) << session.status();
  absl::StatusOr<v1::CompileResponse> spin = session->Compile(kernels::kSpin, "spin");
  ASSERT_TRUE(spin.ok()) << spin.status();
  ASSERT_TRUE(
      session->Launch(spin->kernel_id(), {MakeDim3(1), MakeDim3(1)}, {Int64Argument(0)}).ok());
  ASSERT_TRUE(session->Synchronize().ok());
  int stream_workers = 0;
  for (const auto& [thread, name] : testing::ThreadNamesOf(daemon_->pid())) {
    if (absl::StartsWith(name, "gpucmd-stream")) {
      ++stream_workers;
      EXPECT_EQ(sched_getscheduler(thread), SCHED_BATCH) << name;
    } else if (absl::StartsWith(name, "gpucmd-device") || name == "gpucmd-accept") {
      EXPECT_EQ(sched_getscheduler(thread), SCHED_OTHER) << name;
    }
  }
  EXPECT_GT(stream_workers, 0);
  const std::vector<pid_t> executor =
      ::gpucmd::testing::ThreadsOfChildrenMatching(daemon_->pid(), "gpucmd-kernel-executor");
  ASSERT_FALSE(executor.empty()) << "the launch started no executor";
  for (pid_t thread : executor) EXPECT_EQ(sched_getscheduler(thread), SCHED_BATCH) << thread;
}

TEST_F(DaemonTest, MalformedRequestsAreInvalidArgumentAndTheDaemonServesOn) {
  grpc::ClientContext open_context;
  v1::OpenSessionRequest open;
  open.set_device(7);
  v1::OpenSessionResponse opened;
  grpc::Status status = client_->stub().OpenSession(&open_context, open, &opened);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("device 7 does not exist"));

  grpc::ClientContext allocate_context;
  v1::AllocateRequest allocate;  // no session, no size
  v1::AllocateResponse allocated;
  status = client_->stub().Allocate(&allocate_context, allocate, &allocated);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  grpc::ClientContext read_context;
  v1::ReadRequest read;
  read.set_session("s");
  read.mutable_pitched()->set_width_bytes(64);
  read.mutable_pitched()->set_stride_bytes(16);
  read.mutable_pitched()->set_height(2);
  std::unique_ptr<grpc::ClientReader<v1::ReadResponse>> reader =
      client_->stub().Read(&read_context, read);
  v1::ReadResponse chunk;
  while (reader->Read(&chunk)) {
  }
  status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("smaller than width_bytes"));

  EXPECT_TRUE(client_->ListDevices().ok());
  absl::StatusOr<testing::HttpResponse> metrics =
      HttpGet(daemon_->http_host(), daemon_->http_port(), "/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_THAT(metrics->body, HasSubstr("gpucmd_requests_total{code=\"INVALID_ARGUMENT\","
                                       "rpc=\"gpucmd.v1.GpuCommand/OpenSession\"} 1"));
}

TEST_F(DaemonTest, TheDescriptorSocketSitsBesideTheGrpcSocketWithItsAccess) {
  struct stat grpc_socket, descriptor_socket;
  ASSERT_EQ(stat(socket_path_.c_str(), &grpc_socket), 0);
  ASSERT_EQ(stat((socket_path_ + ".fds").c_str(), &descriptor_socket), 0)
      << "shared-memory regions are handed over there";
  EXPECT_TRUE(S_ISSOCK(descriptor_socket.st_mode));
  EXPECT_EQ(descriptor_socket.st_mode & 0777, grpc_socket.st_mode & 0777);
  EXPECT_EQ(descriptor_socket.st_gid, grpc_socket.st_gid);
}

TEST_F(DaemonTest, SecondDaemonOnTheSameSocketIsRefused) {
  absl::StatusOr<DaemonProcess> second =
      DaemonProcess::Start({"--listen=unix:" + socket_path_, "--http_listen=127.0.0.1:0"});
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("in use"));
  // The first daemon still owns and serves its socket.
  EXPECT_EQ(access(socket_path_.c_str(), F_OK), 0);
  EXPECT_TRUE(client_->ListDevices().ok());
}

TEST_F(DaemonTest, SigtermExitsZeroAndRemovesTheSocket) {
  client_.reset();
  EXPECT_EQ(daemon_->Stop(SIGTERM), 0);
  EXPECT_NE(access(socket_path_.c_str(), F_OK), 0) << "socket file left behind";
  EXPECT_NE(access((socket_path_ + ".fds").c_str(), F_OK), 0) << "descriptor socket left behind";
}

// A lease stream holds no work: SIGTERM ends it at once, UNAVAILABLE, instead of the
// drain waiting its whole time (10 s by default) for the client to let go. Nor does a
// client that is not reading its connection hold the exit: the library's lease waits on
// no thread, and once no call is in flight the daemon closes the connections itself.
TEST_F(DaemonTest, SigtermEndsLeaseStreamsAtOnce) {
  absl::StatusOr<Session> session = client_->OpenSession(0, "leased");  // the library's lease
  ASSERT_TRUE(session.ok()) << session.status();
  auto stub = v1::GpuCommand::NewStub(
      grpc::CreateChannel(daemon_->grpc_target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  auto lease = stub->KeepAlive(&context);  // and one held by hand
  v1::KeepAliveRequest request;
  request.set_session(session->token());
  v1::KeepAliveResponse response;
  ASSERT_TRUE(lease->Write(request));
  ASSERT_TRUE(lease->Read(&response)) << "the lease is held";
  // As a client holds a lease: reading until the daemon ends it.
  grpc::Status ended;
  std::thread holder([&] {
    while (lease->Read(&response)) {
    }
    ended = lease->Finish();
  });

  const auto signalled = std::chrono::steady_clock::now();
  EXPECT_EQ(daemon_->Stop(SIGTERM, std::chrono::seconds(30)), 0);
  const auto exited = std::chrono::steady_clock::now();
  holder.join();
  EXPECT_LT(exited - signalled, std::chrono::seconds(8)) << "the drain waited for the lease";
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::UNAVAILABLE) << ended.error_message();
  EXPECT_THAT(ended.error_message(), HasSubstr("shutting down"));
}

// Past the drain time a running kernel is stopped: the call waiting for it ends
// UNAVAILABLE (not CANCELLED) and the daemon exits soon after the drain time.
TEST(DaemonShutdownTest, ADrainBoundsShutdownPastARunningKernel) {
  absl::StatusOr<DaemonProcess> daemon = DaemonProcess::StartWithConfig(
      "drain_timeout_seconds: 1\n"
      "cpu { kernel_timeout_seconds: 120 }\n"
      "compile { cache_dir: \"{dir}/cache\" }\n");
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(daemon->grpc_target());
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<Session> session = (*client)->OpenSession(0, "long");
  ASSERT_TRUE(session.ok()) << session.status();
  absl::StatusOr<v1::CompileResponse> spin = session->Compile(kernels::kSpin, "spin");
  ASSERT_TRUE(spin.ok()) << spin.status();
  ASSERT_TRUE(session
                  ->Launch(spin->kernel_id(), {MakeDim3(1), MakeDim3(1)},
                           {Int64Argument(60'000'000'000LL)})  // a minute
                  .ok());
  absl::Status synchronized;
  std::thread waiter([&] { synchronized = session->Synchronize(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the Synchronize is in flight

  const auto signalled = std::chrono::steady_clock::now();
  EXPECT_EQ(daemon->Stop(SIGTERM, std::chrono::seconds(60)), 0);
  const auto exited = std::chrono::steady_clock::now();
  waiter.join();
  EXPECT_LT(exited - signalled, std::chrono::seconds(10)) << "the kernel held the exit";
  EXPECT_EQ(synchronized.code(), absl::StatusCode::kUnavailable) << synchronized;
}

// A test (or benchmark) that dies without running its destructors, as a failed check's
// abort does, takes the daemons it started along: none is left running.
TEST(DaemonProcessTest, ADaemonEndsWithTheProcessThatStartedIt) {
  GTEST_FLAG_SET(death_test_style, "fast");  // the child sees the socket path below
  const std::string socket_path = ShortTempDir() + "/orphaned.sock";
  EXPECT_DEATH(
      {
        absl::StatusOr<DaemonProcess> daemon = DaemonProcess::Start(
            {"--listen=unix:" + socket_path, "--http_listen=127.0.0.1:0"});
        if (daemon.ok()) std::cerr << "started" << std::endl;
        std::abort();
      },
      "started");
  EXPECT_TRUE(::gpucmd::testing::NoProcessMatches(socket_path)) << "the daemon outlived it";
}

TEST(DaemonStartupTest, StaleSocketIsReplaced) {
  std::string socket_path = ShortTempDir() + "/stale.sock";
  {
    absl::StatusOr<DaemonProcess> first =
        DaemonProcess::Start({"--listen=unix:" + socket_path, "--http_listen=127.0.0.1:0"});
    ASSERT_TRUE(first.ok()) << first.status();
    first->Stop(SIGKILL);  // dies without cleaning up: the socket file stays
  }
  ASSERT_EQ(access(socket_path.c_str(), F_OK), 0);
  absl::StatusOr<DaemonProcess> second =
      DaemonProcess::Start({"--listen=unix:" + socket_path, "--http_listen=127.0.0.1:0"});
  ASSERT_TRUE(second.ok()) << second.status();
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(second->grpc_target());
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE((*client)->ListDevices().ok());
}

TEST(DaemonStartupTest, InvalidConfigExitsTwoNamingFileAndField) {
  std::string path = ShortTempDir() + "/bad.textproto";
  std::ofstream(path) << "cpu { device_count: 0 }\n";
  CommandResult result = RunCommand({RunfilePath("server/gpucmdd"), "--config=" + path,
                                     "--http_listen=127.0.0.1:0"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.stderr_text, HasSubstr(path));
  EXPECT_THAT(result.stderr_text, HasSubstr("cpu.device_count"));
}

TEST(DaemonStartupTest, UnparsableConfigExitsTwoNamingFileAndField) {
  std::string path = ShortTempDir() + "/garbled.textproto";
  std::ofstream(path) << "cpu {\n  memory_bytes_per_device: lots\n}\n";
  CommandResult result = RunCommand({RunfilePath("server/gpucmdd"), "--config=" + path});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.stderr_text, HasSubstr(path));
  EXPECT_THAT(result.stderr_text, HasSubstr("line 2"));
  EXPECT_THAT(result.stderr_text, HasSubstr("memory_bytes_per_device"));
}

TEST(DaemonStartupTest, UnreadableConfigExitsTwo) {
  CommandResult result =
      RunCommand({RunfilePath("server/gpucmdd"), "--config=/nonexistent/gpucmdd.textproto"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.stderr_text, HasSubstr("/nonexistent/gpucmdd.textproto"));
}

TEST(DaemonStartupTest, PlaintextRemoteListenersAreRefusedUnlessAllowed) {
  std::string directory = ShortTempDir();
  CommandResult refused = RunCommand({RunfilePath("server/gpucmdd"), "--listen=tcp:0.0.0.0:0",
                                      "--http_listen=127.0.0.1:0"});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_THAT(refused.stderr_text, HasSubstr("allow_insecure_remote"));

  std::string config = directory + "/insecure.textproto";
  std::ofstream(config) << "allow_insecure_remote: true\n";
  absl::StatusOr<DaemonProcess> daemon = DaemonProcess::Start(
      {"--config=" + config, "--listen=tcp:0.0.0.0:0", "--http_listen=127.0.0.1:0"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  EXPECT_THAT(daemon->StderrText(), HasSubstr("plaintext listener beyond this machine"));
}

TEST(DaemonStartupTest, UnixSocketsGetTheConfiguredModeWhateverTheUmask) {
  std::string directory = ShortTempDir();
  for (uint32_t mode : {0660u, 0600u}) {
    std::string config = absl::StrCat(directory, "/mode-", mode, ".textproto");
    std::ofstream(config) << "socket_mode: " << mode << "\n";
    std::string socket = absl::StrCat(directory, "/mode-", mode, ".sock");
    mode_t umask_before = umask(0);  // the daemon inherits it: the widest there is
    absl::StatusOr<DaemonProcess> daemon = DaemonProcess::Start(
        {"--config=" + config, "--listen=unix:" + socket, "--http_listen=127.0.0.1:0"});
    umask(umask_before);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    struct stat info;
    ASSERT_EQ(stat(socket.c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 0777, mode) << std::oct << (info.st_mode & 0777);
  }
}

TEST(DaemonStartupTest, UnixSocketsGetTheConfiguredGroup) {
  std::string directory = ShortTempDir();
  const group* mine = getgrgid(getgid());
  ASSERT_NE(mine, nullptr);
  std::string config = directory + "/group.textproto";
  std::ofstream(config) << "socket_group: \"" << mine->gr_name << "\"\n";
  std::string socket = directory + "/group.sock";
  absl::StatusOr<DaemonProcess> daemon = DaemonProcess::Start(
      {"--config=" + config, "--listen=unix:" + socket, "--http_listen=127.0.0.1:0"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  struct stat info;
  ASSERT_EQ(stat(socket.c_str(), &info), 0);
  EXPECT_EQ(info.st_gid, getgid());

  std::string missing = directory + "/missing-group.textproto";
  std::ofstream(missing) << "socket_group: \"gpucmd-no-such-group\"\n";
  CommandResult refused =
      RunCommand({RunfilePath("server/gpucmdd"), "--config=" + missing,
                  "--listen=unix:" + directory + "/refused.sock", "--http_listen=127.0.0.1:0"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.stderr_text, HasSubstr("gpucmd-no-such-group"));
}

// compile.max_cache_bytes bounds the module store on disk: a store past it when the
// daemon starts is swept back under it, the modules used longest ago first, and kernels
// compile and run as before.
TEST(DaemonStartupTest, TheModuleStoreIsSweptBackUnderItsBound) {
  const std::string cache = ShortTempDir() + "/cache";
  std::filesystem::create_directories(cache);
  constexpr uint64_t kBound = uint64_t{64} << 20;
  constexpr int kModules = 80;  // of 1 MiB each, module i used 1000 - i seconds ago
  for (int i = 0; i < kModules; ++i) {
    const std::string stem = absl::StrCat(cache, "/module", i);
    std::ofstream(stem + ".so") << std::string(1 << 20, 'x');
    std::ofstream(stem + ".entry") << "k";
    std::ofstream(stem + ".sig") << "";
    std::filesystem::last_write_time(
        stem + ".sig", std::filesystem::file_time_type::clock::now() - std::chrono::seconds(1000 - i));
  }
  absl::StatusOr<DaemonProcess> daemon = DaemonProcess::StartWithConfig(absl::StrCat(
      "compile { cache_dir: \"", cache, "\" max_cache_bytes: ", kBound, " }"));
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  uint64_t bytes = 0;
  for (const auto& entry : std::filesystem::directory_iterator(cache)) {
    if (entry.is_regular_file()) bytes += entry.file_size();
  }
  EXPECT_LE(bytes, kBound / 10 * 9);
  EXPECT_FALSE(std::filesystem::exists(cache + "/module0.so")) << "the oldest module stayed";
  EXPECT_TRUE(std::filesystem::exists(cache + "/module79.so")) << "the newest module went";

  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(daemon->grpc_target());
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<Session> session = (*client)->OpenSession(0, "sweep");
  ASSERT_TRUE(session.ok()) << session.status();
  absl::StatusOr<v1::CompileResponse> compiled = session->Compile(
      "extern \"C\" __global__ void one(int* out) { out[0] = 1; }", "one");
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  absl::StatusOr<Buffer> out = session->Allocate(sizeof(int));
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_TRUE(session->Launch(compiled->kernel_id(), {MakeDim3(1), MakeDim3(1)},
                              {BufferArgument(*out, v1::ACCESS_WRITE)})
                  .ok());
  absl::StatusOr<std::string> read = session->Read(*out, 0, sizeof(int));
  ASSERT_TRUE(read.ok()) << read.status();
  int value = 0;
  std::memcpy(&value, read->data(), sizeof(value));
  EXPECT_EQ(value, 1);
}

// An installation of the daemon (a copy of gpucmdd beside its companion programs) that
// compiles one kernel over `cache` and returns its answer.
absl::StatusOr<v1::CompileResponse> CompileInInstallation(const std::string& install,
                                                          const std::string& cache) {
  const std::string directory = ShortTempDir();
  std::ofstream(directory + "/gpucmdd.textproto") << "compile { cache_dir: \"" << cache << "\" }";
  // The launcher runs the installation's gpucmdd in place of the runfiles' one.
  ASSIGN_OR_RETURN(DaemonProcess daemon,
                   DaemonProcess::StartThrough(
                       {"/bin/sh", "-c", "shift; exec \"$0\" \"$@\"", install + "/gpucmdd"},
                       {"--listen=unix:" + directory + "/gpucmdd.sock", "--http_listen=127.0.0.1:0",
                        "--config=" + directory + "/gpucmdd.textproto"}));
  ASSIGN_OR_RETURN(std::unique_ptr<Client> client, Client::Connect(daemon.grpc_target()));
  ASSIGN_OR_RETURN(Session session, client->OpenSession(0, "toolchain"));
  return session.Compile(kernels::kVectorAdd, "vector_add");
}

// A kernel id names the toolchain that built it: the same installation started again
// takes its module from the cache, and one whose kernel front end changed (an upgrade;
// here one byte more) compiles afresh, under another id.
TEST(DaemonStartupTest, AnUpgradedToolchainCompilesAgainUnderAnotherKernelId) {
  namespace fs = std::filesystem;
  const std::string install = ShortTempDir();
  fs::permissions(install, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                               fs::perms::others_read | fs::perms::others_exec);
  for (const char* program : {"server/gpucmdd", "driver/front_end/gpucmd-kernel-front-end",
                              "driver/cpu/gpucmd-kernel-executor"}) {
    fs::copy_file(RunfilePath(program), install + "/" + fs::path(program).filename().string());
  }
  const std::string cache = ShortTempDir() + "/cache";
  absl::StatusOr<v1::CompileResponse> first = CompileInInstallation(install, cache);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->cache_hit());
  absl::StatusOr<v1::CompileResponse> restarted = CompileInInstallation(install, cache);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  EXPECT_TRUE(restarted->cache_hit());
  EXPECT_EQ(restarted->kernel_id(), first->kernel_id());

  std::ofstream(install + "/gpucmd-kernel-front-end", std::ios::app) << '\0';
  absl::StatusOr<v1::CompileResponse> upgraded = CompileInInstallation(install, cache);
  ASSERT_TRUE(upgraded.ok()) << upgraded.status();
  EXPECT_FALSE(upgraded->cache_hit()) << "the module its predecessor built was taken";
  EXPECT_NE(upgraded->kernel_id(), first->kernel_id());
}

TEST(DaemonStartupTest, VersionPrintsAndExits) {
  CommandResult result = RunCommand({RunfilePath("server/gpucmdd"), "--version"});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_THAT(result.stdout_text, HasSubstr("gpucmdd 0."));
}

}  // namespace
}  // namespace gpucmd
