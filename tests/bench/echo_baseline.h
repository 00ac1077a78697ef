#ifndef GPUCMDD_TESTS_BENCH_ECHO_BASELINE_H_
#define GPUCMDD_TESTS_BENCH_ECHO_BASELINE_H_

// The raw gRPC round trip that daemon latencies are reported against: raw_echo_server
// (gRPC's health service alone, in a process of its own, on a Unix socket like the
// daemon's), and a measurement that alternates its round trips with the daemon's.
// Benchmarks that use it list //tests/bench:raw_echo_server in their data.
//
// Thread-safety: for a benchmark's thread.

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "benchmark/benchmark.h"
#include "client/client.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/testing/daemon_process.h"

namespace gpucmd::bench {

// raw_echo_server, started with its standard input on a pipe this process holds: it
// exits when the pipe closes, at the latest when this process ends.
class EchoServerProcess {
 public:
  explicit EchoServerProcess(const std::string& socket);
  ~EchoServerProcess();
  EchoServerProcess(const EchoServerProcess&) = delete;
  EchoServerProcess& operator=(const EchoServerProcess&) = delete;

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int keep_alive_ = -1;
};

// The echo in a process of its own, connected.
struct OtherProcessEcho {
  OtherProcessEcho();
  // One round trip.
  void Check();

  std::string socket;
  EchoServerProcess server;
  bool ready = false;
  std::unique_ptr<grpc::health::v1::Health::Stub> stub;
};

// One echo for the whole run.
OtherProcessEcho& SharedEcho();

// The daemon's methods as its /metrics page labels them.
inline constexpr char kLaunchRpc[] = "gpucmd.v1.GpuCommand/Launch";
inline constexpr char kSynchronizeRpc[] = "gpucmd.v1.GpuCommand/Synchronize";

// The calls a measurement makes, as the daemon counts them on its /metrics page.
struct DaemonCalls {
  const testing::DaemonProcess* daemon;
  std::string rpc;  // as the page labels it, e.g. "gpucmd.v1.GpuCommand/Launch"
};

// Latency with nothing else running: each iteration times one raw echo across processes
// and one `call` to the daemon, alternating, so that both meet the machine in the same
// state, then runs `settle` untimed (what the call left running finishes before the next
// round trip). Reports both medians and their ratio (`x_raw_p50`, lower is better).
// With `calls` (`settle` must make none of them), also the daemon's mean time from a
// call's arrival to its status (`daemon_mean_us`): what of the round trip the daemon
// spends serving it, the rest being gRPC's and the client's.
void MeasureAgainstEcho(benchmark::State& state, const std::function<void()>& call,
                        const std::function<void()>& settle,
                        const std::optional<DaemonCalls>& calls = std::nullopt);

// MeasureAgainstEcho of an empty launch of `kernel` (one int argument, one thread) by
// `session` of `daemon`: timed alone, its Synchronize after it untimed, or
// `with_synchronize`, timed with the Synchronize that waits for it (two round trips and
// the kernel's run: the cost of a launch answered and then waited for; 2.0 would be two
// bare round trips).
void MeasureEmptyLaunchAgainstEcho(benchmark::State& state, Session& session,
                                   const std::string& kernel, bool with_synchronize,
                                   const testing::DaemonProcess& daemon);

}  // namespace gpucmd::bench

#endif  // GPUCMDD_TESTS_BENCH_ECHO_BASELINE_H_
