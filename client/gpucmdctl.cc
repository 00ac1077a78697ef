// gpucmdctl: the operator's command line for a running gpucmdd.
//
//   gpucmdctl --target=unix:/run/gpucmdd/gpucmdd.sock
//             health|devices|stats|sessions|bench|top [--json]
//
// `sessions` lists open sessions: every client's for an administrator (uid 0, the
// daemon's user or admin.group on the Unix socket, admin.client_subjects on TLS), the
// caller's own otherwise. `bench` measures the host through the daemon
// (client/ctl_bench.h) and prints one table. `top` shows the devices and sessions live
// (client/ctl_top.h): a refreshing table on a terminal, JSON lines with --json; --once
// prints one frame, --frames=N stops after N.
//
// Exit status: 0 success, 1 the daemon is unreachable, unhealthy or refused the call,
// 2 usage error (an unknown command, a flag's value no command can use, another
// command's flag).

#include <unistd.h>

#include <chrono>
#include <iostream>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/lock_order_checks.h"
#include "client/client.h"
#include "client/ctl_bench.h"
#include "client/ctl_output.h"
#include "client/ctl_top.h"

ABSL_FLAG(std::string, target, "unix:/tmp/gpucmdd.sock",
          "daemon address: unix:PATH, tcp:HOST:PORT or HOST:PORT");
ABSL_FLAG(bool, json, false, "print JSON instead of tables");
ABSL_FLAG(int, timeout_ms, 5000, "connect and call timeout in milliseconds");
ABSL_FLAG(uint64_t, bench_bytes, 16 << 20, "bench: bytes per write and read");
ABSL_FLAG(double, bench_seconds, 0.5, "bench: seconds per figure");
ABSL_FLAG(double, interval_seconds, 1.0, "top: seconds between frames");
ABSL_FLAG(bool, once, false, "top: print one frame and exit");
ABSL_FLAG(int, frames, 0, "top: stop after this many frames (0: until interrupted)");

namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
// A day: the longest interval between two frames of `top`.
constexpr double kMaxIntervalSeconds = 86400;

// Prints `status` and returns `exit_code`: kExitFailure for the daemon's refusal or
// absence, kExitUsage for a mistake on the command line.
int Fail(const absl::Status& status, int exit_code = kExitFailure) {
  std::cerr << "gpucmdctl: " << status << "\n";
  return exit_code;
}

gpucmd::BenchOptions BenchOptionsFromFlags() {
  return {.transfer_bytes = absl::GetFlag(FLAGS_bench_bytes),
          .seconds = std::chrono::duration<double>(absl::GetFlag(FLAGS_bench_seconds))};
}

// The flags that only one command reads.
struct CommandFlag {
  absl::string_view flag;
  absl::string_view command;
};
constexpr CommandFlag kCommandFlags[] = {{"bench_bytes", "bench"},
                                         {"bench_seconds", "bench"},
                                         {"interval_seconds", "top"},
                                         {"once", "top"},
                                         {"frames", "top"}};

// INVALID_ARGUMENT naming the first flag `command` cannot use: a value no command can use
// (a typo such as --interval_seconds=-1 would otherwise poll the daemon as fast as it
// answers), or another command's flag set to other than its default (which `command`
// would silently ignore).
absl::Status ValidateFlags(absl::string_view command) {
  for (const CommandFlag& owned : kCommandFlags) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(owned.flag);
    if (command != owned.command && flag->CurrentValue() != flag->DefaultValue()) {
      return absl::InvalidArgumentError(absl::StrCat("--", owned.flag, " is a flag of `",
                                                     owned.command, "`, not of `", command, "`"));
    }
  }
  if (absl::GetFlag(FLAGS_timeout_ms) <= 0) {
    return absl::InvalidArgumentError("--timeout_ms must be positive");
  }
  if (command == "bench") return gpucmd::ValidateBenchOptions(BenchOptionsFromFlags());
  if (command != "top") return absl::OkStatus();
  const double interval = absl::GetFlag(FLAGS_interval_seconds);
  if (!(interval > 0 && interval <= kMaxIntervalSeconds)) {  // NaN fails both
    return absl::InvalidArgumentError(absl::StrCat(
        "--interval_seconds must be above 0 and at most ", kMaxIntervalSeconds));
  }
  if (absl::GetFlag(FLAGS_frames) < 0) {
    return absl::InvalidArgumentError("--frames must be 0 (until interrupted) or more");
  }
  return absl::OkStatus();
}

absl::StatusOr<gpucmd::TopSample> Sample(gpucmd::Client& client) {
  gpucmd::TopSample sample;
  absl::StatusOr<gpucmd::v1::GetStatsResponse> stats = client.GetStats();
  if (!stats.ok()) return stats.status();
  absl::StatusOr<std::vector<gpucmd::v1::DeviceInfo>> devices = client.ListDevices();
  if (!devices.ok()) return devices.status();
  absl::StatusOr<gpucmd::v1::ListSessionsResponse> sessions = client.ListSessions();
  if (!sessions.ok()) return sessions.status();
  sample.stats = *std::move(stats);
  sample.devices = *std::move(devices);
  sample.sessions = *std::move(sessions);
  return sample;
}

// `top`: a frame per interval, each from the samples at its start and end.
int Top(gpucmd::Client& client, bool json) {
  const auto interval = std::chrono::duration<double>(absl::GetFlag(FLAGS_interval_seconds));
  const int frames = absl::GetFlag(FLAGS_once) ? 1 : absl::GetFlag(FLAGS_frames);
  // A refreshing table on a terminal; frames one after another otherwise.
  const bool redraw = !json && isatty(STDOUT_FILENO);
  absl::StatusOr<gpucmd::TopSample> before = Sample(client);
  if (!before.ok()) return Fail(before.status());
  auto sampled = std::chrono::steady_clock::now();
  for (int frame = 0; frames == 0 || frame < frames; ++frame) {
    std::this_thread::sleep_for(interval);
    absl::StatusOr<gpucmd::TopSample> now = Sample(client);
    if (!now.ok()) return Fail(now.status());
    const auto now_sampled = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now_sampled - sampled).count();
    std::cout << (redraw ? "\x1b[H\x1b[J" : "")
              << gpucmd::FormatTopFrame(*before, *now, seconds, json) << std::flush;
    before = *std::move(now);
    sampled = now_sampled;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  gpucmd::StopAbseilLockOrderChecks();  // before gRPC takes its first lock
  absl::SetProgramUsageMessage(
      "gpucmdctl [--target=ADDR] [--json] health|devices|stats|sessions|bench|top");
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() != 2) {
    std::cerr << "usage: " << absl::ProgramUsageMessage() << "\n";
    return kExitUsage;
  }
  const std::string command = positional[1];
  if (command != "health" && command != "devices" && command != "stats" &&
      command != "sessions" && command != "bench" && command != "top") {
    std::cerr << "gpucmdctl: unknown command \"" << command
              << "\"; expected health, devices, stats, sessions, bench or top\n";
    return kExitUsage;
  }
  if (absl::Status flags = ValidateFlags(command); !flags.ok()) return Fail(flags, kExitUsage);
  const bool json = absl::GetFlag(FLAGS_json);
  gpucmd::ClientOptions options;
  options.connect_timeout = std::chrono::milliseconds(absl::GetFlag(FLAGS_timeout_ms));
  options.call_timeout = options.connect_timeout;
  absl::StatusOr<std::unique_ptr<gpucmd::Client>> client =
      gpucmd::Client::Connect(absl::GetFlag(FLAGS_target), options);
  if (!client.ok()) return Fail(client.status());

  if (command == "health") {
    absl::StatusOr<bool> daemon = (*client)->IsServing("");
    if (!daemon.ok()) return Fail(daemon.status());
    absl::StatusOr<bool> service = (*client)->IsServing("gpucmd.v1.GpuCommand");
    if (!service.ok()) return Fail(service.status());
    std::cout << gpucmd::FormatHealth(*daemon, *service, json);
    return *daemon && *service ? 0 : kExitFailure;
  }
  if (command == "devices") {
    absl::StatusOr<std::vector<gpucmd::v1::DeviceInfo>> devices = (*client)->ListDevices();
    if (!devices.ok()) return Fail(devices.status());
    std::cout << gpucmd::FormatDevices(*devices, json);
    return 0;
  }
  if (command == "top") return Top(**client, json);
  if (command == "sessions") {
    absl::StatusOr<gpucmd::v1::ListSessionsResponse> sessions = (*client)->ListSessions();
    if (!sessions.ok()) return Fail(sessions.status());
    std::cout << gpucmd::FormatSessions(*sessions, json);
    return 0;
  }
  if (command == "bench") {
    absl::StatusOr<std::vector<gpucmd::BenchRow>> rows =
        gpucmd::RunHostBench(**client, BenchOptionsFromFlags());
    if (!rows.ok()) return Fail(rows.status());
    std::cout << gpucmd::FormatBench(*rows, json);
    return 0;
  }
  absl::StatusOr<gpucmd::v1::GetStatsResponse> stats = (*client)->GetStats();
  if (!stats.ok()) return Fail(stats.status());
  std::cout << gpucmd::FormatStats(*stats, json);
  return 0;
}
