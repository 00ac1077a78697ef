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
#include <string>

#include "benchmark/benchmark.h"
#include "grpc/health/v1/health.grpc.pb.h"

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

// Latency with nothing else running: each iteration times one raw echo across processes
// and one `call` to the daemon, alternating, so that both meet the machine in the same
// state, then runs `settle` untimed (what the call left running finishes before the next
// round trip). Reports both medians and their ratio (`x_raw_p50`, lower is better).
void MeasureAgainstEcho(benchmark::State& state, const std::function<void()>& call,
                        const std::function<void()>& settle);

}  // namespace gpucmd::bench

#endif  // GPUCMDD_TESTS_BENCH_ECHO_BASELINE_H_
