#include "tests/testing/daemon_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string_view>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "base/file.h"
#include "tests/testing/tcp_connect.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace gpucmd::testing {
namespace {

// fork + exec with stdout to `stdout_fd` and stderr to `stderr_path`. The child gets
// SIGTERM when the thread that spawned it ends: a test or benchmark that dies without
// running its destructors (a failed check's abort) takes its daemons along.
pid_t Spawn(const std::vector<std::string>& argv, int stdout_fd,
            const std::string& stderr_path) {
  std::vector<char*> raw;
  for (const std::string& arg : argv) raw.push_back(const_cast<char*>(arg.c_str()));
  raw.push_back(nullptr);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent) _exit(127);
    int err = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(stdout_fd, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    execv(raw[0], raw.data());
    _exit(127);
  }
  return pid;
}

int ExitCode(int wait_status) {
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
}

}  // namespace

std::string RunfilePath(const std::string& workspace_relative) {
  // Tests get TEST_SRCDIR; other binaries (benchmarks) find their runfiles tree next to
  // the executable.
  const char* srcdir = std::getenv("TEST_SRCDIR");
  std::string root;
  if (srcdir != nullptr) {
    root = srcdir;
  } else {
    char self[4096];
    ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
    root = absl::StrCat(std::string(self, std::max<ssize_t>(length, 0)), ".runfiles");
  }
  return absl::StrCat(root, "/gpucmdd/", workspace_relative);
}

std::string ShortTempDir() {
  char pattern[] = "/tmp/gpucmd-test-XXXXXX";
  return mkdtemp(pattern);
}

CommandResult RunCommand(const std::vector<std::string>& argv) {
  std::string directory = ShortTempDir();
  std::string out_path = directory + "/stdout";
  std::string err_path = directory + "/stderr";
  int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = Spawn(argv, out, err_path);
  close(out);
  int wait_status = 0;
  waitpid(pid, &wait_status, 0);
  return {ExitCode(wait_status), ReadFileOrEmpty(out_path), ReadFileOrEmpty(err_path)};
}

BackgroundCommand StartCommand(const std::vector<std::string>& argv) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return {};
  pid_t pid = Spawn(argv, pipe_fds[1], ShortTempDir() + "/stderr");
  close(pipe_fds[1]);
  return {pid, pipe_fds[0]};
}

std::string DaemonDriver() {
  constexpr std::string_view kField = "driver: ";
  std::string version = RunCommand({RunfilePath("server/gpucmdd"), "--version"}).stdout_text;
  size_t at = version.find(kField);
  if (at == std::string::npos) return "unknown";
  at += kField.size();
  return version.substr(at, version.find_first_of(")\n", at) - at);
}

absl::StatusOr<HttpResponse> HttpGet(const std::string& host, int port,
                                     const std::string& path) {
  absl::StatusOr<int> connected = ConnectTcp(host, port);
  if (!connected.ok()) return connected.status();
  const int fd = *connected;
  std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", host,
                                     "\r\nConnection: close\r\n\r\n");
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return absl::UnavailableError("short write");
  }
  std::string raw;
  char buffer[4096];
  for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) > 0;) raw.append(buffer, n);
  close(fd);
  size_t header_end = raw.find("\r\n\r\n");
  std::vector<std::string> status_line = absl::StrSplit(raw.substr(0, raw.find("\r\n")), ' ');
  HttpResponse response;
  if (header_end == std::string::npos || status_line.size() < 2 ||
      !absl::SimpleAtoi(status_line[1], &response.status)) {
    return absl::DataLossError(absl::StrCat("malformed HTTP response: ", raw));
  }
  response.body = raw.substr(header_end + 4);
  return response;
}

absl::StatusOr<double> MetricValue(const std::string& host, int port,
                                   const std::string& series) {
  absl::StatusOr<HttpResponse> metrics = HttpGet(host, port, "/metrics");
  if (!metrics.ok()) return metrics.status();
  const std::string line_start = "\n" + series + " ";
  const size_t at = metrics->body.find(line_start);
  double value = 0;
  if (at == std::string::npos) {
    return absl::NotFoundError(absl::StrCat(series, " is not on /metrics:\n", metrics->body));
  }
  const size_t start = at + line_start.size();
  if (!absl::SimpleAtod(metrics->body.substr(start, metrics->body.find('\n', start) - start),
                        &value)) {
    return absl::DataLossError(absl::StrCat(series, "'s value does not parse"));
  }
  return value;
}

absl::StatusOr<DaemonProcess> DaemonProcess::StartWithConfig(
    const std::string& config, const std::vector<std::string>& args) {
  const std::string directory = ShortTempDir();
  const std::string path = directory + "/gpucmdd.textproto";
  std::ofstream(path) << absl::StrReplaceAll(config, {{"{dir}", directory}});
  std::vector<std::string> argv = {"--listen=unix:" + directory + "/gpucmdd.sock",
                                   "--http_listen=127.0.0.1:0", "--config=" + path};
  argv.insert(argv.end(), args.begin(), args.end());
  return Start(argv);
}

absl::StatusOr<DaemonProcess> DaemonProcess::Start(const std::vector<std::string>& args,
                                                   std::chrono::milliseconds timeout) {
  return StartThrough({}, args, timeout);
}

absl::StatusOr<DaemonProcess> DaemonProcess::StartThrough(
    const std::vector<std::string>& launcher, const std::vector<std::string>& args,
    std::chrono::milliseconds timeout) {
  DaemonProcess daemon;
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return absl::InternalError("pipe2 failed");
  std::vector<std::string> argv = launcher;
  argv.push_back(RunfilePath("server/gpucmdd"));
  argv.insert(argv.end(), args.begin(), args.end());
  daemon.stderr_path_ = ShortTempDir() + "/stderr";
  daemon.pid_ = Spawn(argv, pipe_fds[1], daemon.stderr_path_);
  close(pipe_fds[1]);
  daemon.stdout_fd_ = pipe_fds[0];

  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string output;
  while (!absl::StrContains(output, "\n")) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd poll_fd{daemon.stdout_fd_, POLLIN, 0};
    if (left.count() <= 0 || poll(&poll_fd, 1, static_cast<int>(left.count())) <= 0) {
      return absl::DeadlineExceededError(
          absl::StrCat("gpucmdd printed no ready line; stderr: ", daemon.StderrText()));
    }
    char buffer[1024];
    ssize_t n = read(daemon.stdout_fd_, buffer, sizeof(buffer));
    if (n <= 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("gpucmdd exited before ready; stderr: ", daemon.StderrText()));
    }
    output.append(buffer, n);
  }
  daemon.ready_line_ = output.substr(0, output.find('\n'));
  if (!absl::StartsWith(daemon.ready_line_, "gpucmdd ready ")) {
    return absl::FailedPreconditionError(
        absl::StrCat("unexpected first line: ", daemon.ready_line_));
  }
  for (absl::string_view field : absl::StrSplit(daemon.ready_line_, ' ')) {
    if (absl::ConsumePrefix(&field, "grpc=")) {
      daemon.grpc_targets_ = absl::StrSplit(field, ',');
    } else if (absl::ConsumePrefix(&field, "http=")) {
      size_t colon = field.rfind(':');
      daemon.http_host_ = std::string(field.substr(0, colon));
      if (!absl::SimpleAtoi(field.substr(colon + 1), &daemon.http_port_)) {
        return absl::FailedPreconditionError("ready line has no HTTP port");
      }
    }
  }
  if (daemon.grpc_targets_.empty()) return absl::FailedPreconditionError("no gRPC address");
  return daemon;
}

DaemonProcess::DaemonProcess(DaemonProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      stdout_fd_(std::exchange(other.stdout_fd_, -1)),
      stderr_path_(std::move(other.stderr_path_)),
      ready_line_(std::move(other.ready_line_)),
      grpc_targets_(std::move(other.grpc_targets_)),
      http_host_(std::move(other.http_host_)),
      http_port_(other.http_port_) {}

DaemonProcess::~DaemonProcess() {
  if (pid_ > 0) Stop(SIGKILL);
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

int DaemonProcess::Stop(int signal, std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  kill(pid_, signal);
  return AwaitExit(timeout);
}

int DaemonProcess::AwaitExit(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  int wait_status = 0;
  while (waitpid(pid_, &wait_status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &wait_status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pid_ = -1;
  return ExitCode(wait_status);
}

std::string DaemonProcess::StderrText() const { return ReadFileOrEmpty(stderr_path_); }

}  // namespace gpucmd::testing
