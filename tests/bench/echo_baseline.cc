#include "tests/bench/echo_baseline.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "tests/bench/bench_support.h"
#include "tests/testing/daemon_process.h"

namespace gpucmd::bench {

EchoServerProcess::EchoServerProcess(const std::string& socket) {
  int stdin_pipe[2];
  if (pipe2(stdin_pipe, O_CLOEXEC) != 0) return;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, stdin_pipe[0], STDIN_FILENO);
  const std::string program = testing::RunfilePath("tests/bench/raw_echo_server");
  std::vector<char*> argv = {const_cast<char*>(program.c_str()),
                             const_cast<char*>(socket.c_str()), nullptr};
  if (posix_spawn(&pid_, program.c_str(), &actions, nullptr, argv.data(), environ) != 0) {
    pid_ = -1;
  }
  posix_spawn_file_actions_destroy(&actions);
  close(stdin_pipe[0]);
  keep_alive_ = stdin_pipe[1];
}

EchoServerProcess::~EchoServerProcess() {
  close(keep_alive_);
  if (pid_ > 0) waitpid(pid_, nullptr, 0);
}

OtherProcessEcho::OtherProcessEcho()
    : socket(testing::ShortTempDir() + "/echo.sock"), server(socket) {
  auto channel = grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials());
  ready = server.started() && channel->WaitForConnected(std::chrono::system_clock::now() +
                                                        std::chrono::seconds(10));
  stub = grpc::health::v1::Health::NewStub(channel);
}

void OtherProcessEcho::Check() {
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckResponse response;
  benchmark::DoNotOptimize(stub->Check(&context, {}, &response));
}

OtherProcessEcho& SharedEcho() {
  static OtherProcessEcho echo;
  return echo;
}

namespace {

// What the daemon's request-duration histogram holds for `calls` so far.
struct ServedSoFar {
  double seconds = 0;
  double count = 0;
};

std::optional<ServedSoFar> Served(const DaemonCalls& calls) {
  const std::string labels = "{rpc=\"" + calls.rpc + "\"}";
  const testing::DaemonProcess& daemon = *calls.daemon;
  auto value = [&](const std::string& series) {
    return testing::MetricValue(daemon.http_host(), daemon.http_port(), series + labels);
  };
  absl::StatusOr<double> seconds = value("gpucmd_request_duration_seconds_sum");
  absl::StatusOr<double> count = value("gpucmd_request_duration_seconds_count");
  if (!seconds.ok() || !count.ok()) return std::nullopt;
  return ServedSoFar{*seconds, *count};
}

}  // namespace

void MeasureAgainstEcho(benchmark::State& state, const std::function<void()>& call,
                        const std::function<void()>& settle,
                        const std::optional<DaemonCalls>& calls) {
  OtherProcessEcho& echo = SharedEcho();
  if (!echo.ready) {
    state.SkipWithError("raw_echo_server did not start");
    return;
  }
  // Before the loop, the series exists once the daemon served one such call.
  if (calls.has_value()) {
    call();
    settle();
  }
  const std::optional<ServedSoFar> before =
      calls.has_value() ? Served(*calls) : std::nullopt;
  std::vector<double> raw_seconds;
  std::vector<double> daemon_seconds;
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    echo.Check();
    raw_seconds.push_back(SecondsSince(start));
    start = std::chrono::steady_clock::now();
    call();
    daemon_seconds.push_back(SecondsSince(start));
    settle();
  }
  std::sort(raw_seconds.begin(), raw_seconds.end());
  std::sort(daemon_seconds.begin(), daemon_seconds.end());
  const double raw_p50 = Percentile(raw_seconds, 0.5);
  const double daemon_p50 = Percentile(daemon_seconds, 0.5);
  state.counters["raw_p50_us"] = raw_p50 * 1e6;
  state.counters["p50_us"] = daemon_p50 * 1e6;
  if (raw_p50 > 0) state.counters["x_raw_p50"] = daemon_p50 / raw_p50;
  if (!before.has_value()) return;
  const std::optional<ServedSoFar> after = Served(*calls);
  if (after.has_value() && after->count > before->count) {
    state.counters["daemon_mean_us"] =
        (after->seconds - before->seconds) / (after->count - before->count) * 1e6;
  }
}

void MeasureEmptyLaunchAgainstEcho(benchmark::State& state, Session& session,
                                   const std::string& kernel, bool with_synchronize,
                                   const testing::DaemonProcess& daemon) {
  const LaunchShape one{MakeDim3(1), MakeDim3(1)};
  auto launch = [&] { benchmark::DoNotOptimize(session.Launch(kernel, one, {Int32Argument(0)})); };
  auto synchronize = [&] { benchmark::DoNotOptimize(session.Synchronize()); };
  if (with_synchronize) {
    MeasureAgainstEcho(
        state,
        [&] {
          launch();
          synchronize();
        },
        [] {});
  } else {
    MeasureAgainstEcho(state, launch, synchronize, DaemonCalls{&daemon, kLaunchRpc});
  }
}

}  // namespace gpucmd::bench
