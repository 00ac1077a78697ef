// gpucmdd: flags and config, start the daemon, wait for SIGTERM/SIGINT, drain, exit (with
// status 75 when the daemon asked for its own restart: server/restart_request.h).

#include <signal.h>
#include <sys/resource.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "base/freed_memory.h"
#include "base/lock_order_checks.h"
#include "server/command_line.h"
#include "server/config.h"
#include "server/daemon.h"
#include "server/driver_setup.h"
#include "server/restart_request.h"
#include "server/version.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace {

constexpr int kExitConfigError = 2;

// Each client connection, handed-over memfd and HTTP connection holds a descriptor, and
// the usual soft limit (1024, systemd's default) is far below what the session limits
// allow. Nothing in the daemon uses select(), so the soft limit is raised to the hard one.
void RaiseDescriptorLimit() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

}  // namespace

int main(int argc, char** argv) {
  gpucmd::StopAbseilLockOrderChecks();  // before gRPC takes its first lock
  absl::StatusOr<gpucmd::CommandLine> command_line =
      gpucmd::ParseCommandLine(absl::MakeConstSpan(argv, argc));
  if (!command_line.ok()) {
    std::cerr << "gpucmdd: " << command_line.status().message() << "\n"
              << gpucmd::CommandLineUsage();
    return kExitConfigError;
  }
  if (command_line->help) {
    std::cout << gpucmd::CommandLineUsage();
    return 0;
  }
  if (command_line->version) {
    std::cout << "gpucmdd " << gpucmd::kVersion << " (driver: " << gpucmd::SelectedDriverName()
              << ")\n";
    return 0;
  }

  gpucmd::v1::DaemonConfig config;
  if (command_line->config_path) {
    absl::StatusOr<gpucmd::v1::DaemonConfig> loaded =
        gpucmd::LoadConfigFile(*command_line->config_path);
    if (!loaded.ok()) {
      std::cerr << "gpucmdd: " << loaded.status().message() << "\n";
      return kExitConfigError;
    }
    config = *std::move(loaded);
  }
  gpucmd::ApplyCommandLine(*command_line, &config);
  gpucmd::ApplyConfigDefaults(&config);
  if (absl::Status valid = gpucmd::ValidateConfig(config); !valid.ok()) {
    std::cerr << "gpucmdd: " << (command_line->config_path ? *command_line->config_path + ": "
                                                           : std::string())
              << valid.message() << "\n";
    return kExitConfigError;
  }
  if (command_line->check_config) {
    std::cout << "gpucmdd: configuration is valid\n";
    return 0;
  }
  // Logs go to stderr; stdout carries only the ready line scripts wait for.
  spdlog::set_default_logger(spdlog::stderr_color_mt("gpucmdd"));
  spdlog::set_level(spdlog::level::from_str(config.log_level()));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");

  // Block the stop signals in every thread the daemon starts; this thread takes them
  // with sigwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  gpucmd::KeepFreedMemory();
  RaiseDescriptorLimit();
  absl::StatusOr<std::unique_ptr<gpucmd::Daemon>> daemon = gpucmd::Daemon::Start(config);
  if (!daemon.ok()) {
    spdlog::critical("cannot start: {}", std::string(daemon.status().message()));
    return 1;
  }
  std::cout << (*daemon)->ReadyLine() << std::endl;
  spdlog::info("{}", (*daemon)->ReadyLine());

  siginfo_t received{};
  while (sigwaitinfo(&stop_signals, &received) < 0) {
    // EINTR: a signal outside the set ended the wait.
  }
  const bool restart = gpucmd::IsRestartRequest(received);
  const int exit_code = restart ? gpucmd::kRestartExitCode : 0;
  if (restart) {
    spdlog::critical("a device was lost for good: draining for up to {} s, then exiting "
                     "with status {} so that the service manager starts the daemon again",
                     config.drain_timeout_seconds(), exit_code);
  } else {
    spdlog::info("received {}, draining for up to {} s", strsignal(received.si_signo),
                 config.drain_timeout_seconds());
  }
  if (!(*daemon)->Shutdown()) {
    spdlog::warn("a device was still busy after the drain (a kernel that cannot be stopped); "
                 "exiting without waiting for it");
    spdlog::shutdown();
    std::_Exit(exit_code);
  }
  spdlog::info("stopped");
  return exit_code;
}
