#ifndef GPUCMDD_TESTS_TESTING_DAEMON_PROCESS_H_
#define GPUCMDD_TESTS_TESTING_DAEMON_PROCESS_H_

// Test helpers that run the real binaries: a gpucmdd child process found through the
// test's runfiles, waited on until it prints its ready line; a one-shot command runner;
// and a minimal HTTP GET for the health endpoint.
//
// Thread-safety: none; one test thread drives each object.

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gpucmd::testing {

// Path of a binary built by this workspace (e.g. "server/gpucmdd"), from the runfiles.
std::string RunfilePath(const std::string& workspace_relative);

// A fresh directory under /tmp, short enough for Unix socket paths.
std::string ShortTempDir();

struct CommandResult {
  int exit_code = -1;  // -1 when killed by a signal
  std::string stdout_text;
  std::string stderr_text;
};

// Runs `argv` to completion, capturing its output.
CommandResult RunCommand(const std::vector<std::string>& argv);

struct BackgroundCommand {
  pid_t pid = -1;
  int stdout_fd = -1;  // the read end of its stdout; the caller closes it
};

// Starts `argv` without waiting for it; its stderr goes to a file nobody reads.
BackgroundCommand StartCommand(const std::vector<std::string>& argv);

// The driver the runfiles' gpucmdd was built with, from its --version: "cpu", "cuda",
// "hip", or "unknown".
std::string DaemonDriver();

struct HttpResponse {
  int status = 0;
  std::string body;
};

// GET http://host:port/path over a fresh connection (HTTP/1.0, Connection: close).
absl::StatusOr<HttpResponse> HttpGet(const std::string& host, int port,
                                     const std::string& path);

// The value of the series `series` on the /metrics page at host:port: a metric's name,
// followed by its labels as the page writes them when it has some (e.g.
// "gpucmd_rpcs_in_flight", `gpucmd_request_duration_seconds_count{rpc="..."}`);
// NOT_FOUND when the page has no such line.
absl::StatusOr<double> MetricValue(const std::string& host, int port,
                                   const std::string& series);

class DaemonProcess {
 public:
  // Starts gpucmdd with `args` and waits up to `timeout` for "gpucmdd ready". The
  // ready line's addresses are then available.
  static absl::StatusOr<DaemonProcess> Start(
      const std::vector<std::string>& args,
      std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // Start, through `launcher`: a command that runs its arguments in its place (e.g.
  // {"systemd-socket-activate", "-l", PATH}), given gpucmdd's path and `args`.
  static absl::StatusOr<DaemonProcess> StartThrough(
      const std::vector<std::string>& launcher, const std::vector<std::string>& args,
      std::chrono::milliseconds timeout = std::chrono::seconds(20));

  // Starts gpucmdd on a Unix socket and an HTTP port of its own, with the config
  // `config` (text format; "{dir}" stands for a fresh directory, e.g. for the compile
  // cache) and further `args`.
  static absl::StatusOr<DaemonProcess> StartWithConfig(const std::string& config,
                                                       const std::vector<std::string>& args = {});

  DaemonProcess(DaemonProcess&& other) noexcept;
  DaemonProcess& operator=(DaemonProcess&&) = delete;
  // Kills the daemon if it is still running.
  ~DaemonProcess();

  // Sends `signal` and waits for the exit; returns the exit code (-1 if signalled).
  int Stop(int signal, std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // Waits up to `timeout` for the daemon to exit by itself (then kills it); returns the
  // exit code (-1 if signalled).
  int AwaitExit(std::chrono::milliseconds timeout = std::chrono::seconds(20));

  pid_t pid() const { return pid_; }
  const std::string& ready_line() const { return ready_line_; }
  // The first gRPC address of the ready line ("unix:/path" or "tcp:host:port").
  const std::string& grpc_target() const { return grpc_targets_.front(); }
  const std::vector<std::string>& grpc_targets() const { return grpc_targets_; }
  const std::string& http_host() const { return http_host_; }
  int http_port() const { return http_port_; }
  // What the daemon wrote to stderr so far.
  std::string StderrText() const;

 private:
  DaemonProcess() = default;

  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string stderr_path_;
  std::string ready_line_;
  std::vector<std::string> grpc_targets_;
  std::string http_host_;
  int http_port_ = 0;
};

}  // namespace gpucmd::testing

#endif  // GPUCMDD_TESTS_TESTING_DAEMON_PROCESS_H_
