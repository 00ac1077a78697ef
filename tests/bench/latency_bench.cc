// Unary round trips through the daemon against gRPC's own: a raw unary RPC (the gRPC
// health service, served by a bare server in this process over a Unix socket, the same
// kind of socket the daemon listens on) measured first, then the daemon's ListDevices,
// idle Synchronize and empty-kernel Launch, each also reported as a ratio of the raw
// round trip (`x_raw`, lower is better).
//
//   bazel run -c opt //tests/bench:latency_bench

#include <chrono>
#include <memory>
#include <string>

#include "benchmark/benchmark.h"
#include "client/client.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tests/bench/bench_support.h"
#include "tests/testing/daemon_process.h"

namespace gpucmd {
namespace {

using bench::EmptyKernelDaemon;
using bench::SecondsSince;

// Launches are synchronized this often, untimed, so they never meet backpressure.
constexpr int kLaunchesPerSync = 256;

// The raw round trip of this run, set by BM_RawGrpcUnary (registered first).
double raw_round_trip_seconds = 0;

void ReportAgainstRaw(benchmark::State& state, double loop_seconds) {
  if (raw_round_trip_seconds > 0 && state.iterations() > 0) {
    state.counters["x_raw"] =
        loop_seconds / static_cast<double>(state.iterations()) / raw_round_trip_seconds;
  }
}

void BM_RawGrpcUnary(benchmark::State& state) {
  const std::string socket = testing::ShortTempDir() + "/raw.sock";
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()));
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    grpc::ClientContext context;
    benchmark::DoNotOptimize(stub->Check(&context, request, &response));
  }
  raw_round_trip_seconds = SecondsSince(start) / static_cast<double>(state.iterations());
  server->Shutdown();
}

EmptyKernelDaemon& SharedDaemon() {
  static EmptyKernelDaemon daemon;
  return daemon;
}

void BM_DaemonListDevices(benchmark::State& state) {
  Client& client = *SharedDaemon().daemon.client;
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) benchmark::DoNotOptimize(client.ListDevices());
  ReportAgainstRaw(state, SecondsSince(start));
}

void BM_DaemonIdleSynchronize(benchmark::State& state) {
  Session& session = *SharedDaemon().daemon.session;
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) benchmark::DoNotOptimize(session.Synchronize());
  ReportAgainstRaw(state, SecondsSince(start));
}

void BM_DaemonEmptyLaunch(benchmark::State& state) {
  EmptyKernelDaemon& shared = SharedDaemon();
  Session& session = *shared.daemon.session;
  const LaunchShape one{MakeDim3(1), MakeDim3(1)};
  int launched = 0;
  double timed = 0;
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(session.Launch(shared.kernel, one, {Int32Argument(0)}));
    timed += SecondsSince(start);
    if (++launched % kLaunchesPerSync == 0) {
      state.PauseTiming();
      benchmark::DoNotOptimize(session.Synchronize());
      state.ResumeTiming();
    }
  }
  ReportAgainstRaw(state, timed);
}

BENCHMARK(BM_RawGrpcUnary)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DaemonListDevices)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DaemonIdleSynchronize)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DaemonEmptyLaunch)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpucmd

BENCHMARK_MAIN();
