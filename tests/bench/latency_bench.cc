// Unary round trips through the daemon against gRPC's own: a raw unary RPC (a health
// Check over a Unix socket, the same kind of socket the daemon listens on) measured first
// against a bare server in this process and against one in a process of its own
// (raw_echo_server), then gRPC's health service in the daemon's process and the daemon's
// ListDevices, idle Synchronize and empty-kernel Launch, back to back, each also reported
// as a ratio of both raw round trips (`x_raw`: in this process; `x_raw_process`: across
// processes, as every call to a daemon is; lower is better). Then the medians of single
// round trips with nothing else running, each daemon call alternating with a raw one
// across processes (`x_raw_p50`), and so a launch with the Synchronize that waits for it.
// Then head-of-line blocking: one session's idle Synchronize, p50 and p99, alone and while
// another session runs ~50 ms kernels back to back, over eight rounds of each
// (`x_alone_p99`: the p99 beside the kernels over the p99 alone).
//
//   bazel run -c opt //tests/bench:latency_bench

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "benchmark/benchmark.h"
#include "client/client.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tests/bench/bench_support.h"
#include "tests/bench/echo_baseline.h"
#include "tests/testing/daemon_process.h"

namespace gpucmd {
namespace {

using bench::BenchDaemon;
using bench::EmptyKernelDaemon;
using bench::MeasureAgainstEcho;
using bench::Percentile;
using bench::SecondsSince;
using bench::SharedEcho;

// Launches are synchronized this often, untimed, so they never meet backpressure.
constexpr int kLaunchesPerSync = 256;

// The raw round trips of this run, set by the BM_RawGrpcUnary benchmarks (registered
// first).
double raw_round_trip_seconds = 0;
double raw_process_round_trip_seconds = 0;

void ReportAgainstRaw(benchmark::State& state, double loop_seconds) {
  if (state.iterations() == 0) return;
  const double per_call = loop_seconds / static_cast<double>(state.iterations());
  if (raw_round_trip_seconds > 0) state.counters["x_raw"] = per_call / raw_round_trip_seconds;
  if (raw_process_round_trip_seconds > 0) {
    state.counters["x_raw_process"] = per_call / raw_process_round_trip_seconds;
  }
}

// Seconds per health Check at `target`, over the benchmark's iterations.
double HealthCheckSeconds(benchmark::State& state, const std::string& target) {
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    grpc::ClientContext context;
    benchmark::DoNotOptimize(stub->Check(&context, request, &response));
  }
  return SecondsSince(start) / static_cast<double>(std::max<int64_t>(state.iterations(), 1));
}

void BM_RawGrpcUnary(benchmark::State& state) {
  const std::string socket = testing::ShortTempDir() + "/raw.sock";
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  raw_round_trip_seconds = HealthCheckSeconds(state, "unix:" + socket);
  server->Shutdown();
}

void BM_RawGrpcUnaryOtherProcess(benchmark::State& state) {
  if (!SharedEcho().ready) {
    state.SkipWithError("raw_echo_server did not start");
    return;
  }
  raw_process_round_trip_seconds = HealthCheckSeconds(state, "unix:" + SharedEcho().socket);
}

EmptyKernelDaemon& SharedDaemon() {
  static EmptyKernelDaemon daemon;
  return daemon;
}

// gRPC's own health service, answered by the daemon's process: no daemon code on the
// path, so what the daemon's process costs a call beyond a bare server's.
void BM_DaemonGrpcHealthCheck(benchmark::State& state) {
  const double seconds =
      HealthCheckSeconds(state, SharedDaemon().daemon.process->grpc_target());
  ReportAgainstRaw(state, seconds * static_cast<double>(state.iterations()));
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

void BM_AgainstEchoIdleSynchronize(benchmark::State& state) {
  BenchDaemon& daemon = SharedDaemon().daemon;
  Session& session = *daemon.session;
  MeasureAgainstEcho(
      state, [&] { benchmark::DoNotOptimize(session.Synchronize()); }, [] {},
      bench::DaemonCalls{&*daemon.process, bench::kSynchronizeRpc});
}

void BM_AgainstEchoEmptyLaunch(benchmark::State& state) {
  EmptyKernelDaemon& shared = SharedDaemon();
  bench::MeasureEmptyLaunchAgainstEcho(state, *shared.daemon.session, shared.kernel,
                                       /*with_synchronize=*/false, *shared.daemon.process);
}

void BM_AgainstEchoLaunchThenSynchronize(benchmark::State& state) {
  EmptyKernelDaemon& shared = SharedDaemon();
  bench::MeasureEmptyLaunchAgainstEcho(state, *shared.daemon.session, shared.kernel,
                                       /*with_synchronize=*/true, *shared.daemon.process);
}

// A kernel that spins for `iterations` rounds.
constexpr char kSpinKernel[] = R"(
  extern "C" __global__ void spin(long iterations, int* out) {
    volatile long sum = 0;
    for (long i = 0; i < iterations; ++i) sum += i;
    out[0] = static_cast<int>(sum);
  })";

// Appends the times of `count` idle Synchronize calls of `session` to `seconds`.
void TimeIdleSynchronize(Session& session, int count, std::vector<double>& seconds) {
  for (int i = 0; i < count; ++i) {
    auto start = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(session.Synchronize());
    seconds.push_back(SecondsSince(start));
  }
}

// Runs `kernel` with `iterations` and synchronizes, over and over, until `stop`.
void SpinUntil(Session& session, const std::string& kernel, long iterations, Buffer& out,
               const std::atomic<bool>& stop) {
  const LaunchShape one{MakeDim3(1), MakeDim3(1)};
  while (!stop) {
    benchmark::DoNotOptimize(session.Launch(
        kernel, one, {Int64Argument(iterations), BufferArgument(out, v1::ACCESS_WRITE)}));
    benchmark::DoNotOptimize(session.Synchronize());
  }
}

void BM_IdleSynchronizeBesideLongKernels(benchmark::State& state) {
  constexpr int kSamples = 250;
  BenchDaemon& daemon = SharedDaemon().daemon;
  Session& victim = *daemon.session;
  absl::StatusOr<Session> busy = daemon.client->OpenSession(0, "long kernels");
  absl::StatusOr<Buffer> out = busy.ok() ? busy->Allocate(64) : busy.status();
  absl::StatusOr<v1::CompileResponse> spin =
      busy.ok() ? busy->Compile(kSpinKernel, "spin") : busy.status();
  if (!out.ok() || !spin.ok()) {
    state.SkipWithError("cannot set up the long kernels");
    return;
  }
  // ~50 ms a launch, scaled from the time of a probe (after a first launch, which loads
  // the module).
  constexpr long kProbe = 20'000'000;
  const LaunchShape one{MakeDim3(1), MakeDim3(1)};
  (void)busy->Launch(spin->kernel_id(), one,
                     {Int64Argument(1), BufferArgument(*out, v1::ACCESS_WRITE)});
  (void)busy->Synchronize();
  auto start = std::chrono::steady_clock::now();
  (void)busy->Launch(spin->kernel_id(), one,
                     {Int64Argument(kProbe), BufferArgument(*out, v1::ACCESS_WRITE)});
  (void)busy->Synchronize();
  const long iterations = static_cast<long>(kProbe * 0.050 / SecondsSince(start));
  start = std::chrono::steady_clock::now();
  (void)busy->Launch(spin->kernel_id(), one,
                     {Int64Argument(iterations), BufferArgument(*out, v1::ACCESS_WRITE)});
  (void)busy->Synchronize();
  state.counters["kernel_ms"] = SecondsSince(start) * 1e3;
  // Each iteration is a round of kSamples alone, then kSamples beside the kernels; the
  // percentiles are over every round's samples, so that a p99 rests on more than a few
  // calls and both sides meet the VM's drift alike.
  std::vector<double> alone;
  std::vector<double> beside;
  for (auto _ : state) {
    TimeIdleSynchronize(victim, kSamples, alone);
    std::atomic<bool> stop{false};
    std::thread kernels(
        [&] { SpinUntil(*busy, spin->kernel_id(), iterations, *out, stop); });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // kernels running
    TimeIdleSynchronize(victim, kSamples, beside);
    stop = true;
    kernels.join();
  }
  std::sort(alone.begin(), alone.end());
  std::sort(beside.begin(), beside.end());
  state.counters["alone_p50_us"] = Percentile(alone, 0.5) * 1e6;
  state.counters["alone_p99_us"] = Percentile(alone, 0.99) * 1e6;
  state.counters["beside_p50_us"] = Percentile(beside, 0.5) * 1e6;
  state.counters["beside_p99_us"] = Percentile(beside, 0.99) * 1e6;
  state.counters["x_alone_p99"] = Percentile(beside, 0.99) / Percentile(alone, 0.99);
}

BENCHMARK(BM_RawGrpcUnary)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RawGrpcUnaryOtherProcess)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DaemonGrpcHealthCheck)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DaemonListDevices)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DaemonIdleSynchronize)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DaemonEmptyLaunch)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AgainstEchoIdleSynchronize)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AgainstEchoEmptyLaunch)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AgainstEchoLaunchThenSynchronize)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_IdleSynchronizeBesideLongKernels)
    ->Iterations(8)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpucmd
