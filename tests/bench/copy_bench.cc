// Write and read throughput, in-process (Command<CpuDriver>) and through the daemon
// over its Unix socket (inline bytes, and from/into a shared-memory region), each also
// reported as a ratio of a single-threaded memcpy of the same size measured in the same
// run (counter `x_memcpy`); allocate/free rates.
//
//   bazel run -c opt //tests/bench:copy_bench -- --benchmark_min_time=0.2

#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

#include "benchmark/benchmark.h"
#include "client/client.h"
#include "driver/cpu/cpu_driver.h"
#include "server/command/command.h"
#include "tests/bench/bench_support.h"

namespace gpucmd {
namespace {

constexpr uint64_t kDeviceBytes = uint64_t{2} << 30;
constexpr SessionId kSession = 1;

using bench::BenchDaemon;
using bench::ReportThroughput;
using bench::SecondsSince;

void BM_Memcpy(benchmark::State& state) {
  size_t size = state.range(0);
  std::vector<char> source(size, 1), target(size);
  for (auto _ : state) {
    std::memcpy(target.data(), source.data(), size);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}

// In-process: one Command on a CPU backend, driven from the benchmark thread as the
// device thread would.
struct InProcess {
  InProcess()
      : backend(*CpuBackend::Create({.capacity_bytes = kDeviceBytes, .stream_count = 4})),
        command(std::make_unique<Command<CpuDriver>>(*backend, CommandOptions())) {}
  std::unique_ptr<CpuBackend> backend;
  std::unique_ptr<Command<CpuDriver>> command;
};

void BM_CommandWrite(benchmark::State& state) {
  size_t size = state.range(0);
  InProcess device;
  BufferId id = *device.command->Allocate(kSession, size);
  std::string data(size, 'w');
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    // The command takes ownership of the payload, as a request's bytes are handed over.
    state.PauseTiming();
    std::string payload = data;
    state.ResumeTiming();
    benchmark::DoNotOptimize(
        device.command->Write(kSession, 0, id, CopyLayout::Contiguous(0, size), std::move(payload)));
    benchmark::DoNotOptimize(WaitFor(device.command->Synchronize(kSession, 0)));
  }
  ReportThroughput(state, size, SecondsSince(start));
}

void BM_CommandRead(benchmark::State& state) {
  size_t size = state.range(0);
  InProcess device;
  BufferId id = *device.command->Allocate(kSession, size);
  (void)device.command->Write(kSession, 0, id, CopyLayout::Contiguous(0, size),
                              std::string(size, 'r'));
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    absl::StatusOr<PendingRead> read =
        device.command->Read(kSession, 0, id, CopyLayout::Contiguous(0, size));
    benchmark::DoNotOptimize(read->wait());
  }
  ReportThroughput(state, size, SecondsSince(start));
}

void BM_CommandAllocateFree(benchmark::State& state) {
  InProcess device;
  for (auto _ : state) {
    BufferId id = *device.command->Allocate(kSession, state.range(0));
    benchmark::DoNotOptimize(device.command->Free(kSession, id));
  }
  state.SetItemsProcessed(state.iterations());
}

// Through the daemon: one gpucmdd child process for the whole run.
BenchDaemon& SharedDaemon() {
  static BenchDaemon daemon(
      "cpu { memory_bytes_per_device: " + std::to_string(kDeviceBytes) + " }");
  return daemon;
}

void BM_DaemonWrite(benchmark::State& state) {
  size_t size = state.range(0);
  Session& session = *SharedDaemon().session;
  Buffer buffer = *session.Allocate(size);
  std::string data(size, 'w');
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    benchmark::DoNotOptimize(session.Write(buffer, 0, data));
    benchmark::DoNotOptimize(session.Synchronize(0));
  }
  ReportThroughput(state, size, SecondsSince(start));
}

void BM_DaemonRead(benchmark::State& state) {
  size_t size = state.range(0);
  Session& session = *SharedDaemon().session;
  Buffer buffer = *session.Allocate(size);
  (void)session.Write(buffer, 0, std::string(size, 'r'));
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    absl::StatusOr<std::string> read = session.Read(buffer, 0, size);
    benchmark::DoNotOptimize(read);
  }
  ReportThroughput(state, size, SecondsSince(start));
}

// Through the daemon from a shared-memory region: no bytes over gRPC, one copy.
void BM_DaemonSharedMemoryWrite(benchmark::State& state) {
  size_t size = state.range(0);
  Session& session = *SharedDaemon().session;
  Buffer buffer = *session.Allocate(size);
  SharedMemoryRegion region = *SharedMemoryRegion::Create(session, size);
  std::memset(region.data(), 'w', size);
  // Untimed: the buffer's pages are touched for the first time.
  (void)session.Write(buffer, 0, RegionSlice{region, 0, size});
  (void)session.Synchronize(0);
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    benchmark::DoNotOptimize(session.Write(buffer, 0, RegionSlice{region, 0, size}));
    benchmark::DoNotOptimize(session.Synchronize(0));
  }
  ReportThroughput(state, size, SecondsSince(start));
}

void BM_DaemonSharedMemoryRead(benchmark::State& state) {
  size_t size = state.range(0);
  Session& session = *SharedDaemon().session;
  Buffer buffer = *session.Allocate(size);
  (void)session.Write(buffer, 0, std::string(size, 'r'));
  SharedMemoryRegion region = *SharedMemoryRegion::Create(session, size);
  // Untimed: the region's pages are touched for the first time.
  (void)session.Read(buffer, 0, RegionSlice{region, 0, size});
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    benchmark::DoNotOptimize(session.Read(buffer, 0, RegionSlice{region, 0, size}));
  }
  ReportThroughput(state, size, SecondsSince(start));
}

void BM_DaemonAllocateFree(benchmark::State& state) {
  Session& session = *SharedDaemon().session;
  for (auto _ : state) {
    absl::StatusOr<Buffer> buffer = session.Allocate(state.range(0));
    benchmark::DoNotOptimize(buffer->Free());
  }
  state.SetItemsProcessed(state.iterations());
}

#define THROUGHPUT_SIZES RangeMultiplier(16)->Range(4 << 10, 256 << 20)->UseRealTime()

BENCHMARK(BM_Memcpy)->THROUGHPUT_SIZES;
BENCHMARK(BM_CommandWrite)->THROUGHPUT_SIZES;
BENCHMARK(BM_CommandRead)->THROUGHPUT_SIZES;
BENCHMARK(BM_DaemonWrite)->THROUGHPUT_SIZES;
BENCHMARK(BM_DaemonRead)->THROUGHPUT_SIZES;
// Bulk sizes, where shared memory is meant to come close to memcpy.
#define BULK_SIZES Arg(16 << 20)->Arg(64 << 20)->Arg(256 << 20)->UseRealTime()
BENCHMARK(BM_DaemonSharedMemoryWrite)->BULK_SIZES;
BENCHMARK(BM_DaemonSharedMemoryRead)->BULK_SIZES;
BENCHMARK(BM_CommandAllocateFree)->Arg(4096)->Arg(1 << 20);
BENCHMARK(BM_DaemonAllocateFree)->Arg(4096)->Arg(1 << 20)->UseRealTime();

}  // namespace
}  // namespace gpucmd

BENCHMARK_MAIN();
