// Compile cost (miss, memory-cache hit, disk-cache hit) and empty-kernel launch rates
// in-process and through the daemon (unary RPCs, Submit batches one at a time and four
// in flight), and the same batches' bytes through a bare gRPC stream. Each rate is also
// reported as a ratio of its baseline measured earlier in the same run: compiles against
// the miss (`x_miss`), daemon launches against the in-process rate (`x_in_process`); each
// launch row also gives the CPU it took per launch (bench::LaunchCpuMeter). Last, what
// publishing a device's usage costs with launches queued behind a stuck stream, and what
// the upkeep before each device task costs with freed buffers waiting behind one.
//
//   bazel run -c opt //tests/bench:kernel_bench

#include <algorithm>
#include <atomic>
#include <fstream>
#include <future>
#include <memory>
#include <utility>
#include <vector>

#include "benchmark/benchmark.h"
#include "client/client.h"
#include "driver/cpu/cpu_compiler.h"
#include "driver/cpu/cpu_driver.h"
#include "driver/cpu/stream_gate.h"
#include "gpucmd/bench/raw_bytes.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "server/command/command.h"
#include "server/command/command_factory.h"
#include "server/core/compile_cache.h"
#include "server/core/device_worker.h"
#include "server/core/metrics.h"
#include "tests/bench/bench_support.h"
#include "tests/bench/echo_baseline.h"

namespace gpucmd {
namespace {

using bench::EmptyKernelDaemon;
using bench::kEmptyKernel;
using bench::LaunchThroughSubmit;
using bench::LaunchThroughUnaryRpcs;
using bench::ReportLaunchRate;
using bench::SecondsSince;


// Baselines of this run, set by the benchmarks that measure them (registered first).
double compile_miss_seconds = 0;
double in_process_launches_per_second = 0;

std::unique_ptr<CompileCache> MakeCache(const std::string& directory) {
  return CompileCache::Create(
      {.driver = "cpu", .architecture = "x86_64", .workers = 1},
      *ModuleStore::Open(directory, ".so"),
      [](const KernelSource& kernel, const std::string& artifact) {
        return CompileCpuKernel(kernel.source, kernel.entry_point, kernel.options, artifact, {});
      });
}

absl::StatusOr<CompileCache::Result> CompileNow(CompileCache& cache, KernelSource kernel) {
  std::promise<absl::StatusOr<CompileCache::Result>> promise;
  cache.Compile(/*client=*/0, std::move(kernel), [&](absl::StatusOr<CompileCache::Result> result) {
    promise.set_value(std::move(result));
  });
  return promise.get_future().get();
}

// Sets `name` to the baseline's time per iteration over this benchmark's (a speed-up).
void ReportAgainst(benchmark::State& state, const char* name, double baseline_seconds,
                   double loop_seconds) {
  if (baseline_seconds > 0 && state.iterations() > 0) {
    state.counters[name] =
        baseline_seconds / (loop_seconds / static_cast<double>(state.iterations()));
  }
}


void BM_CompileMiss(benchmark::State& state) {
  auto cache = MakeCache(testing::ShortTempDir());
  int unique = 0;
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    KernelSource kernel{std::string(kEmptyKernel) + "// " + std::to_string(unique++), "empty", {}};
    benchmark::DoNotOptimize(CompileNow(*cache, std::move(kernel)));
  }
  compile_miss_seconds = SecondsSince(start) / static_cast<double>(state.iterations());
}

void BM_CompileMemoryHit(benchmark::State& state) {
  auto cache = MakeCache(testing::ShortTempDir());
  (void)CompileNow(*cache, {kEmptyKernel, "empty", {}});
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) benchmark::DoNotOptimize(CompileNow(*cache, {kEmptyKernel, "empty", {}}));
  // x_miss: how many hits fit in the time of one miss.
  ReportAgainst(state, "x_miss", compile_miss_seconds, SecondsSince(start));
}

void BM_CompileDiskHit(benchmark::State& state) {
  std::string directory = testing::ShortTempDir();
  (void)CompileNow(*MakeCache(directory), {kEmptyKernel, "empty", {}});
  double timed = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto restarted = MakeCache(directory);  // a restarted daemon: nothing in memory
    state.ResumeTiming();
    auto start = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(CompileNow(*restarted, {kEmptyKernel, "empty", {}}));
    timed += SecondsSince(start);
  }
  ReportAgainst(state, "x_miss", compile_miss_seconds, timed);
}

// Command<CpuDriver> over a CPU backend of its own, kEmptyKernel compiled for it, and a
// launch of it: the launch-rate baseline.
struct InProcessEmptyKernel {
  explicit InProcessEmptyKernel(const CommandOptions& options = CommandOptions())
      : directory(testing::ShortTempDir()),
        cache(MakeCache(directory)),
        compiled(*CompileNow(*cache, {kEmptyKernel, "empty", {}})),
        backend(*CpuBackend::Create(
            {.capacity_bytes = 64 << 20,
             .stream_count = 1,
             .executor_path = testing::RunfilePath("driver/cpu/gpucmd-kernel-executor"),
             .modules = *ModuleStore::Open(directory, ".so")})),
        command(*backend, options),
        launch{.kernel = compiled.kernel.id,
               .params = compiled.kernel.params,
               .grid = {1, 1, 1},
               .block = {1, 1, 1},
               .args = {{.kind = ParamKind::kScalar, .scalar = ScalarKind::kI32}}} {}

  std::string directory;
  std::unique_ptr<CompileCache> cache;
  CompileCache::Result compiled;
  std::unique_ptr<CpuBackend> backend;
  Command<CpuDriver> command;
  KernelLaunch launch;
};

InProcessEmptyKernel& SharedInProcess() {
  static InProcessEmptyKernel device;
  return device;
}

void BM_LaunchEmptyInProcess(benchmark::State& state) {
  InProcessEmptyKernel& device = SharedInProcess();
  bench::LaunchCpuMeter cpu;
  in_process_launches_per_second = bench::LaunchInProcess(state, device.command, device.launch);
  cpu.Report(state);
}

EmptyKernelDaemon& SharedDaemon() {
  static EmptyKernelDaemon daemon;
  return daemon;
}

void BM_LaunchEmptyDaemonUnary(benchmark::State& state) {
  EmptyKernelDaemon& shared = SharedDaemon();
  bench::LaunchCpuMeter cpu(shared.daemon.process->pid());
  double seconds = LaunchThroughUnaryRpcs(state, *shared.daemon.session, shared.kernel);
  ReportLaunchRate(state, seconds, in_process_launches_per_second);
  cpu.Report(state);
}

void BM_LaunchEmptyDaemonSubmit(benchmark::State& state) {
  EmptyKernelDaemon& shared = SharedDaemon();
  bench::LaunchCpuMeter cpu(shared.daemon.process->pid());
  double seconds = LaunchThroughSubmit(state, *shared.daemon.client, *shared.daemon.session,
                                       shared.kernel);
  ReportLaunchRate(state, seconds, in_process_launches_per_second);
  cpu.Report(state);
}

// Four batches in flight: the daemon reads, converts and answers around the one running.
void BM_LaunchEmptyDaemonSubmitFourInFlight(benchmark::State& state) {
  EmptyKernelDaemon& shared = SharedDaemon();
  bench::LaunchCpuMeter cpu(shared.daemon.process->pid());
  double seconds = LaunchThroughSubmit(state, *shared.daemon.client, *shared.daemon.session,
                                       shared.kernel, /*in_flight=*/4);
  ReportLaunchRate(state, seconds, in_process_launches_per_second);
  cpu.Report(state);
}

// The four-in-flight row's messages through a bare gRPC stream instead of the daemon:
// raw_echo_server's Exchange, on the callback API over a Unix socket as the daemon
// serves, answers each batch's bytes with as many bytes as the daemon's answer to it
// takes, and does nothing else. Its rate and CPU per launch (`daemon_cpu_us_per_launch`
// is the bare server's here) are what gRPC alone costs the batched path, the floor under
// the daemon's rows.
void BM_LaunchBatchBareStreamFourInFlight(benchmark::State& state) {
  if (!bench::SharedEcho().ready) return state.SkipWithError("raw_echo_server did not start");
  EmptyKernelDaemon& shared = SharedDaemon();
  const v1::SubmitRequest request = bench::EmptyLaunchBatch(*shared.daemon.session, shared.kernel);
  bench::Chunk batch;
  batch.set_data(request.SerializeAsString());
  {
    bench::RepeatedBatches daemon_batches(*shared.daemon.client, request);
    daemon_batches.Send();
    const v1::SubmitResponse* answer = daemon_batches.Receive();
    if (answer == nullptr) return state.SkipWithError("the daemon did not answer a batch");
    batch.set_reply_bytes(answer->ByteSizeLong());
  }
  std::unique_ptr<bench::RawBytes::Stub> stub = bench::RawBytes::NewStub(grpc::CreateChannel(
      "unix:" + bench::SharedEcho().socket, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<bench::Chunk, bench::Chunk>> stream =
      stub->Exchange(&context);
  bench::Chunk answer;
  bench::LaunchCpuMeter cpu(bench::SharedEcho().server.pid());
  const double seconds = bench::PipelinedSeconds(
      state, /*in_flight=*/4, [&] { stream->Write(batch); }, [&] { stream->Read(&answer); });
  ReportLaunchRate(state, seconds, in_process_launches_per_second);
  cpu.Report(state);
  stream->WritesDone();
  if (grpc::Status status = stream->Finish(); !status.ok()) {
    state.SkipWithError(("Exchange ended " + status.error_message()).c_str());
  }
}

// Submit batches (range(0) in flight) against the in-process rate, in alternating chunks
// of kChunkBatches batches each, so that both meet the machine in the same state (this
// VM's speed drifts within seconds): the quartiles of the chunk pairs' ratios
// (`x_in_process_p25`, `_p50`, `_p75`; higher is better).
void BM_LaunchEmptyAlternating(benchmark::State& state) {
  constexpr int kChunkBatches = 32;
  InProcessEmptyKernel& device = SharedInProcess();
  EmptyKernelDaemon& shared = SharedDaemon();
  bench::RepeatedBatches batches(*shared.daemon.client,
                                bench::EmptyLaunchBatch(*shared.daemon.session, shared.kernel));
  const int in_flight = static_cast<int>(state.range(0));
  std::vector<double> ratios;
  std::vector<double> in_process_rates;
  std::vector<double> daemon_rates;
  constexpr double kChunkLaunches = double{kChunkBatches} * bench::kLaunchesPerSync;
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kChunkBatches; ++i) {
      bench::LaunchBatchInProcess(device.command, device.launch);
    }
    const double in_process_seconds = SecondsSince(start);
    start = std::chrono::steady_clock::now();
    batches.Run(kChunkBatches, in_flight);
    const double daemon_seconds = SecondsSince(start);
    ratios.push_back(in_process_seconds / daemon_seconds);
    in_process_rates.push_back(kChunkLaunches / in_process_seconds);
    daemon_rates.push_back(kChunkLaunches / daemon_seconds);
  }
  bench::ReportQuartiles(state, "x_in_process", ratios);
  // The chunks' own launch rates (launches per second), to compare with the rows above.
  bench::ReportQuartiles(state, "in_process_rate", in_process_rates);
  bench::ReportQuartiles(state, "daemon_rate", daemon_rates);
}

// What the device's figures cost (CommandInterface::Usage; the device worker's report
// after every task counts each session's queued work alike) with range(0) sessions of
// kQueued launches each queued behind a stuck stream, against the same sessions with
// nothing queued, measured first (`x_nothing_queued`: 1 when the queued work costs Usage
// nothing; it grew with every launch queued while Usage asked the stream about each one).
void BM_UsageBehindQueuedLaunches(benchmark::State& state) {
  constexpr int kQueued = 1000;
  const int sessions = static_cast<int>(state.range(0));
  InProcessEmptyKernel device;
  auto each_session = [&](auto run) {
    for (SessionId session = 1; session <= static_cast<SessionId>(sessions); ++session) {
      run(session);
    }
  };
  each_session([&](SessionId session) {
    (void)device.command.Launch(session, 0, device.launch);
    (void)WaitFor(device.command.Synchronize(session, 0));
  });
  constexpr int kBaselineCalls = 1000;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kBaselineCalls; ++i) benchmark::DoNotOptimize(device.command.Usage());
  const double nothing_queued_seconds = SecondsSince(start) / kBaselineCalls;
  StreamGate gate;
  gate.Block(device.backend->stream(0));
  each_session([&](SessionId session) {
    for (int i = 0; i < kQueued; ++i) {
      if (!device.command.Launch(session, 0, device.launch).ok()) {
        return state.SkipWithError("a launch behind the stuck stream was refused");
      }
    }
  });
  if (state.error_occurred()) return;  // the gate opens as it goes
  start = std::chrono::steady_clock::now();
  for (auto _ : state) benchmark::DoNotOptimize(device.command.Usage());
  const double queued_seconds = SecondsSince(start) / static_cast<double>(state.iterations());
  state.counters["x_nothing_queued"] = queued_seconds / nothing_queued_seconds;
  gate.Open();
  each_session([&](SessionId session) { (void)WaitFor(device.command.Synchronize(session, 0)); });
}

// What the device worker's upkeep before every task (CommandInterface::ReclaimFinished)
// costs with range(0) freed buffers whose memory waits for writes queued behind a stuck
// stream, against the same upkeep with the first of them waiting, measured first
// (`x_one_deferred`: 1 when the upkeep costs the same however many wait; it grew with
// every one while the upkeep asked about each).
void BM_ReclaimBehindDeferredFrees(benchmark::State& state) {
  constexpr SessionId kSession = 1;
  const int frees = static_cast<int>(state.range(0));
  CommandOptions options;
  options.session_queued_on_streams = 0;  // every write waits behind the gate
  InProcessEmptyKernel device(options);
  std::vector<BufferId> buffers;
  for (int i = 0; i < frees; ++i) {
    absl::StatusOr<BufferId> buffer = device.command.Allocate(kSession, 256);
    if (!buffer.ok()) return state.SkipWithError(buffer.status().ToString().c_str());
    buffers.push_back(*buffer);
  }
  StreamGate gate;
  gate.Block(device.backend->stream(0));
  double one_deferred_seconds = 0;
  for (BufferId buffer : buffers) {
    if (!device.command.Write(kSession, 0, buffer, CopyLayout::Contiguous(0, 4), "four").ok() ||
        !device.command.Free(kSession, buffer).ok()) {
      state.SkipWithError("a write or free behind the stuck stream was refused");
      break;
    }
    if (one_deferred_seconds == 0) {
      constexpr int kBaselineCalls = 100'000;
      auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < kBaselineCalls; ++i) device.command.ReclaimFinished();
      one_deferred_seconds = SecondsSince(start) / kBaselineCalls;
    }
  }
  if (!state.error_occurred()) {
    auto start = std::chrono::steady_clock::now();
    for (auto _ : state) device.command.ReclaimFinished();
    const double deferred_seconds =
        SecondsSince(start) / static_cast<double>(state.iterations());
    state.counters["x_one_deferred"] = deferred_seconds / one_deferred_seconds;
  }
  gate.Open();
  (void)WaitFor(device.command.Synchronize(kSession, std::nullopt));
}

// What a device task costs its device worker (the upkeep before it, the usage it
// publishes after it) beside range(0) idle sessions that each hold a buffer on the
// device, against the same worker before they came, measured first
// (`x_no_idle_sessions`: 1 when idle sessions cost a task nothing; publishing every
// session's figures after every task made it grow with them). Each task is empty and
// waited for; it runs on the submitting thread when the device is idle, as a launch to
// an idle device does.
void BM_TaskBesideIdleSessions(benchmark::State& state) {
  const int idle_sessions = static_cast<int>(state.range(0));
  Metrics metrics(1);
  DeviceWorker worker(
      {.ordinal = 0},
      MakeCommandFactory<CpuDriver>(
          [] { return CpuBackend::Create({.capacity_bytes = 256 << 20, .stream_count = 4}); },
          CommandOptions()),
      &metrics);
  worker.AwaitInitialised();
  constexpr SessionId kBusy = 1;
  absl::Status refused;
  auto empty_tasks = [&](int64_t count) {  // each waited for: run here, or queued if busy
    auto start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < count; ++i) {
      std::promise<void> ran;
      absl::Status submitted =
          worker.Submit(kBusy, [&ran](CommandInterface&) { ran.set_value(); },
                        DeviceWorker::Placement::kHereWhenIdle);
      if (submitted.ok()) ran.get_future().wait();
      refused.Update(submitted);
    }
    return SecondsSince(start) / static_cast<double>(count);
  };
  constexpr int kBaselineTasks = 20'000;
  const double alone_seconds = empty_tasks(kBaselineTasks);
  for (SessionId session = kBusy + 1; session <= static_cast<SessionId>(idle_sessions) + kBusy;
       ++session) {
    std::promise<absl::Status> allocated;
    absl::Status status = worker.Submit(session, [&](CommandInterface& command) {
      allocated.set_value(command.Allocate(session, 256).status());
    });
    if (status.ok()) status = allocated.get_future().get();
    if (!status.ok()) {
      return state.SkipWithError(status.ToString().c_str());
    }
  }
  double seconds = 0;
  for (auto _ : state) seconds += empty_tasks(1);
  if (!refused.ok()) return state.SkipWithError(refused.ToString().c_str());
  state.counters["x_no_idle_sessions"] =
      seconds / static_cast<double>(state.iterations()) / alone_seconds;
  worker.Stop();
}

BENCHMARK(BM_CompileMiss)->Iterations(5)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CompileMemoryHit)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CompileDiskHit)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LaunchEmptyInProcess)->UseRealTime();
BENCHMARK(BM_LaunchEmptyDaemonUnary)->UseRealTime();
BENCHMARK(BM_LaunchEmptyDaemonSubmit)->UseRealTime();
BENCHMARK(BM_LaunchEmptyDaemonSubmitFourInFlight)->UseRealTime();
BENCHMARK(BM_LaunchBatchBareStreamFourInFlight)->UseRealTime();
BENCHMARK(BM_LaunchEmptyAlternating)->Arg(1)->Arg(4)->UseRealTime();
BENCHMARK(BM_UsageBehindQueuedLaunches)->Arg(1)->Arg(16)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ReclaimBehindDeferredFrees)->Arg(1000)->Arg(16000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TaskBesideIdleSessions)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpucmd
