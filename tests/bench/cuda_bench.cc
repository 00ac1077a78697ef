// The GPU benchmark table of tests/gpu/device_check.sh (build with --config=cuda):
// NVRTC compile time; host<->device bandwidth through the daemon against a direct
// cuMemcpy{HtoD,DtoH}Async from pinned memory in the same run (`x_direct`), inline and
// from a shared-memory region (`direct_access`: registered with the device), one unary
// call per copy and in Submit batches two in flight; a pitched 2D copy through the
// daemon; empty-kernel launch rate in-process (Command<CudaDriver>) against the daemon,
// unary and in Submit batches (`x_in_process`); the medians of an empty unary launch, an
// idle Synchronize and a launch with its Synchronize, each alternating with a raw gRPC
// echo across processes (`x_raw_p50`); the daemon's CPU while a session waits for long kernels
// (`daemon_busy_cpus`). Benchmarks that need a GPU skip themselves, saying why, where
// there is none.

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "benchmark/benchmark.h"
#include "driver/cuda/cuda_driver.h"
#include "driver/cuda/nvrtc_compiler.h"
#include "server/command/command.h"
#include "tests/bench/bench_support.h"
#include "tests/bench/echo_baseline.h"
#include "tests/kernels/kernel_sources.h"

namespace gpucmd {
namespace {

using bench::BenchDaemon;
using bench::kEmptyKernel;
using bench::SecondsSince;

constexpr int kArchitecture = 90;

// Baselines of this run, by transfer size, and the in-process launch rate.
std::map<int64_t, double> direct_to_device_bytes_per_second;
std::map<int64_t, double> direct_to_host_bytes_per_second;
double in_process_launches_per_second = 0;

// A backend whose kernels come from `modules` (a fresh directory by default), or null
// with the benchmark skipped, saying why.
std::unique_ptr<CudaBackend> BackendOrSkip(benchmark::State& state,
                                           const std::string& modules = testing::ShortTempDir()) {
  absl::StatusOr<ModuleStore> store = ModuleStore::Open(modules, ".cubin");
  absl::StatusOr<std::unique_ptr<CudaBackend>> backend =
      store.ok() ? CudaBackend::Create({.ordinal = 0, .stream_count = 2, .modules = *store})
                 : absl::StatusOr<std::unique_ptr<CudaBackend>>(store.status());
  if (!backend.ok()) {
    state.SkipWithError(std::string(backend.status().message()).c_str());
    return nullptr;
  }
  return *std::move(backend);
}

void BM_NvrtcCompile(benchmark::State& state) {
  std::string path = testing::ShortTempDir() + "/vector_add.cubin";
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        CompileWithNvrtc(kernels::kVectorAdd, "vector_add", {}, kArchitecture, path, {}, nullptr));
  }
}

// A direct asynchronous copy between pinned host memory and the device, per iteration.
void DirectCopy(benchmark::State& state, bool to_device, std::map<int64_t, double>& baseline) {
  const uint64_t size = state.range(0);
  std::unique_ptr<CudaBackend> backend = BackendOrSkip(state);
  if (backend == nullptr) return;
  DeviceResource device = *backend->AllocateDevice(size);
  HostResource host = *backend->AllocatePinned(size);
  Bytes bytes(host.data, size, [] {});
  CudaStream& stream = backend->stream(0);
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    absl::Status copied =
        to_device ? CudaDriver::CopyToDevice(device, CopyLayout::Contiguous(0, size),
                                             bytes.const_span(), stream)
                  : CudaDriver::CopyToHost(device, CopyLayout::Contiguous(0, size), bytes, stream);
    benchmark::DoNotOptimize(copied);
    benchmark::DoNotOptimize(stream.Synchronize());
  }
  double seconds = SecondsSince(start);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
  baseline[state.range(0)] = static_cast<double>(state.iterations() * size) / seconds;
  backend->FreePinned(host);
  backend->FreeDevice(device);
}

void BM_DirectHostToDevice(benchmark::State& state) {
  DirectCopy(state, true, direct_to_device_bytes_per_second);
}

void BM_DirectDeviceToHost(benchmark::State& state) {
  DirectCopy(state, false, direct_to_host_bytes_per_second);
}

// False (and the benchmark skipped, saying why) when this machine has no CUDA device.
bool HaveGpuOrSkip(benchmark::State& state) {
  absl::StatusOr<std::vector<DeviceDescription>> devices = DescribeCudaDevices();
  if (devices.ok()) return true;
  state.SkipWithError(std::string(devices.status().message()).c_str());
  return false;
}

BenchDaemon& SharedDaemon() {
  static BenchDaemon daemon("");
  return daemon;
}

// Bytes per second over `seconds`, an iteration being `copies` copies of range(0) bytes,
// against the direct copy of the same size (`x_direct`).
void ReportAgainstDirect(benchmark::State& state, double seconds,
                         const std::map<int64_t, double>& baseline, int copies = 1) {
  double bytes = static_cast<double>(state.iterations() * copies * state.range(0));
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  auto direct = baseline.find(state.range(0));
  if (direct != baseline.end()) state.counters["x_direct"] = bytes / seconds / direct->second;
}

void BM_DaemonWrite(benchmark::State& state) {
  if (!HaveGpuOrSkip(state)) return;
  Session& session = *SharedDaemon().session;
  Buffer buffer = *session.Allocate(state.range(0));
  std::string data(state.range(0), 'w');
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    benchmark::DoNotOptimize(session.Write(buffer, 0, data));
    benchmark::DoNotOptimize(session.Synchronize(0));
  }
  ReportAgainstDirect(state, SecondsSince(start), direct_to_device_bytes_per_second);
}

void BM_DaemonRead(benchmark::State& state) {
  if (!HaveGpuOrSkip(state)) return;
  Session& session = *SharedDaemon().session;
  Buffer buffer = *session.Allocate(state.range(0));
  bench::WriteUntimed(session, buffer, std::string(state.range(0), 'r'));
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) benchmark::DoNotOptimize(session.Read(buffer, 0, state.range(0)));
  ReportAgainstDirect(state, SecondsSince(start), direct_to_host_bytes_per_second);
}

// A shared-memory region of `size` bytes registered in the bench daemon's session, or
// nothing with the benchmark skipped, saying why; `direct_access` says whether the daemon
// registered it with the device.
std::optional<SharedMemoryRegion> RegionOrSkip(benchmark::State& state, uint64_t size) {
  absl::StatusOr<SharedMemoryRegion> region =
      SharedMemoryRegion::Create(*SharedDaemon().session, size);
  if (!region.ok()) {
    state.SkipWithError(std::string(region.status().message()).c_str());
    return std::nullopt;
  }
  std::memset(region->data(), 's', size);
  state.counters["direct_access"] = region->direct_device_access() ? 1 : 0;
  return *std::move(region);
}

// One copy between a shared-memory region and the device per iteration, against the
// direct pinned copy: a unary Write or Read naming the region returns once its bytes
// landed, so each iteration is one round trip and one copy.
void DaemonSharedCopy(benchmark::State& state, bool to_device,
                      const std::map<int64_t, double>& baseline) {
  if (!HaveGpuOrSkip(state)) return;
  const uint64_t size = state.range(0);
  Session& session = *SharedDaemon().session;
  Buffer buffer = *session.Allocate(size);
  std::optional<SharedMemoryRegion> region = RegionOrSkip(state, size);
  if (!region.has_value()) return;
  const RegionSlice slice{*region, 0, size};
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    absl::Status copied =
        to_device ? session.Write(buffer, 0, slice) : session.Read(buffer, 0, slice);
    if (!copied.ok()) {
      state.SkipWithError(std::string(copied.message()).c_str());
      return;
    }
  }
  ReportAgainstDirect(state, SecondsSince(start), baseline);
}

// The throughput path: copies between a shared-memory region and the device in Submit
// batches, two batches in flight, so that one batch's round trip overlaps the other's
// copies. A batch holds `copies_per_batch` copies of the whole region and a Synchronize;
// an iteration is one batch. Against the direct pinned copy of the same size.
void DaemonSharedCopyBatches(benchmark::State& state, bool to_device,
                             const std::map<int64_t, double>& baseline) {
  if (!HaveGpuOrSkip(state)) return;
  const uint64_t size = state.range(0);
  const int copies_per_batch = static_cast<int>(std::clamp<uint64_t>((256 << 20) / size, 1, 64));
  BenchDaemon& daemon = SharedDaemon();
  Buffer buffer = *daemon.session->Allocate(size);
  std::optional<SharedMemoryRegion> region = RegionOrSkip(state, size);
  if (!region.has_value()) return;
  v1::SubmitRequest batch;
  for (int i = 0; i <= copies_per_batch; ++i) {
    v1::Command* command = batch.add_commands();
    command->set_sequence(i);
    if (i == copies_per_batch) {
      command->mutable_synchronize()->set_session(daemon.session->token());
      continue;
    }
    v1::SharedMemorySlice* slice;
    if (to_device) {
      v1::WriteHeader* write = command->mutable_write()->mutable_header();
      write->set_session(daemon.session->token());
      write->set_buffer(buffer.id());
      slice = write->mutable_shared_memory();
    } else {
      v1::ReadRequest* read = command->mutable_read();
      read->set_session(daemon.session->token());
      read->set_buffer(buffer.id());
      read->set_size_bytes(size);
      slice = read->mutable_shared_memory();
    }
    slice->set_region(region->id());
    slice->set_size_bytes(size);
  }
  bench::RepeatedBatches batches(*daemon.client, std::move(batch));
  // Reads the answer of one batch; false (the benchmark skipped, saying why) on a failure.
  auto answered = [&] {
    const v1::SubmitResponse* response = batches.Receive();
    if (response == nullptr) {
      state.SkipWithError("the Submit call ended");
      return false;
    }
    for (const v1::CommandReply& reply : response->replies()) {
      if (reply.status().code() != 0) {
        state.SkipWithError(reply.status().message().c_str());
        return false;
      }
    }
    return true;
  };
  batches.Send();
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    batches.Send();
    if (!answered()) return;
  }
  if (!answered()) return;  // the batch sent ahead
  const double seconds = SecondsSince(start);
  state.counters["copies_per_batch"] = copies_per_batch;
  ReportAgainstDirect(state, seconds, baseline, copies_per_batch);
}

void BM_DaemonSharedWrite(benchmark::State& state) {
  DaemonSharedCopy(state, true, direct_to_device_bytes_per_second);
}

void BM_DaemonSharedRead(benchmark::State& state) {
  DaemonSharedCopy(state, false, direct_to_host_bytes_per_second);
}

void BM_DaemonSharedWriteBatches(benchmark::State& state) {
  DaemonSharedCopyBatches(state, true, direct_to_device_bytes_per_second);
}

void BM_DaemonSharedReadBatches(benchmark::State& state) {
  DaemonSharedCopyBatches(state, false, direct_to_host_bytes_per_second);
}

void BM_DaemonPitched2DWrite(benchmark::State& state) {
  if (!HaveGpuOrSkip(state)) return;
  constexpr uint64_t kWidth = 4000, kHeight = 1024, kStride = 4096;
  Session& session = *SharedDaemon().session;
  Buffer buffer = *session.Allocate(kStride * kHeight);
  std::string rows(kWidth * kHeight, 'p');
  Pitched pitched{.width_bytes = kWidth, .height = kHeight, .stride_bytes = kStride};
  for (auto _ : state) {
    benchmark::DoNotOptimize(session.Write(buffer, 0, rows, 0, pitched));
    benchmark::DoNotOptimize(session.Synchronize(0));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * rows.size()));
}

void BM_LaunchEmptyInProcess(benchmark::State& state) {
  std::string modules = testing::ShortTempDir();
  ModuleStore store = *ModuleStore::Open(modules, ".cubin");
  const KernelId empty{"empty"};
  const std::vector<KernelParam> params = {{ParamKind::kScalar, ScalarKind::kI32, "int n"}};
  absl::StatusOr<std::string> compiled = CompileWithNvrtc(
      kEmptyKernel, "empty", {}, kArchitecture, store.ArtifactPath(empty), {}, nullptr);
  absl::Status committed =
      compiled.ok() ? store.Commit(empty, "empty", params) : compiled.status();
  std::unique_ptr<CudaBackend> backend = BackendOrSkip(state, modules);
  if (backend == nullptr || !committed.ok()) return;
  Command<CudaDriver> command(*backend, CommandOptions());
  KernelLaunch launch{.kernel = KernelId{"empty"},
                      .params = ShareKernelParams(params),
                      .grid = {1, 1, 1},
                      .block = {1, 1, 1},
                      .args = {{.kind = ParamKind::kScalar, .scalar = ScalarKind::kI32}}};
  in_process_launches_per_second = bench::LaunchInProcess(state, command, launch);
}

void BM_LaunchEmptyDaemonUnary(benchmark::State& state) {
  if (!HaveGpuOrSkip(state)) return;
  BenchDaemon& daemon = SharedDaemon();
  std::string kernel = daemon.session->Compile(kEmptyKernel, "empty")->kernel_id();
  bench::ReportLaunchRate(state, bench::LaunchThroughUnaryRpcs(state, *daemon.session, kernel),
                          in_process_launches_per_second);
}

void BM_LaunchEmptyDaemonSubmit(benchmark::State& state) {
  if (!HaveGpuOrSkip(state)) return;
  BenchDaemon& daemon = SharedDaemon();
  std::string kernel = daemon.session->Compile(kEmptyKernel, "empty")->kernel_id();
  bench::ReportLaunchRate(
      state, bench::LaunchThroughSubmit(state, *daemon.client, *daemon.session, kernel),
      in_process_launches_per_second);
}

// An empty unary launch against a raw echo (bench::MeasureEmptyLaunchAgainstEcho); with
// its Synchronize, answered once the runtime called back that the kernel ran (Note
// [Completions called back on a GPU] in driver/gpu/gpu_driver.h).
void AgainstEchoEmptyLaunch(benchmark::State& state, bool with_synchronize) {
  if (!HaveGpuOrSkip(state)) return;
  BenchDaemon& daemon = SharedDaemon();
  const std::string kernel = daemon.session->Compile(kEmptyKernel, "empty")->kernel_id();
  bench::MeasureEmptyLaunchAgainstEcho(state, *daemon.session, kernel, with_synchronize,
                                       *daemon.process);
}

void BM_AgainstEchoEmptyLaunch(benchmark::State& state) {
  AgainstEchoEmptyLaunch(state, /*with_synchronize=*/false);
}

void BM_AgainstEchoLaunchThenSynchronize(benchmark::State& state) {
  AgainstEchoEmptyLaunch(state, /*with_synchronize=*/true);
}

void BM_AgainstEchoIdleSynchronize(benchmark::State& state) {
  if (!HaveGpuOrSkip(state)) return;
  BenchDaemon& daemon = SharedDaemon();
  Session& session = *daemon.session;
  bench::MeasureAgainstEcho(
      state, [&] { benchmark::DoNotOptimize(session.Synchronize()); }, [] {},
      bench::DaemonCalls{&*daemon.process, bench::kSynchronizeRpc});
}

// gpucmdd's CPU while a session waits for long kernels: each iteration launches kSpin for
// kSpinTicks of the GPU's clock (about 50 ms on a 2 GHz GPU) and synchronizes.
// `daemon_busy_cpus` is the daemon's CPU seconds over the loop's wall seconds: about 1
// where its completion thread busy-waits for the kernel, near 0 where it sleeps (Note
// [Waiting for the GPU without spinning] in driver/gpu/gpu_driver.h); `wait_ms` is one
// launch and Synchronize.
void BM_DaemonCpuWhileWaiting(benchmark::State& state) {
  constexpr int64_t kSpinTicks = 100'000'000;
  if (!HaveGpuOrSkip(state)) return;
  BenchDaemon& daemon = SharedDaemon();
  Session& session = *daemon.session;
  absl::StatusOr<v1::CompileResponse> spin = session.Compile(kernels::kSpin, "spin");
  if (!spin.ok()) return state.SkipWithError(std::string(spin.status().message()).c_str());
  const LaunchShape one{MakeDim3(1), MakeDim3(1)};
  const double cpu_before = bench::UsageOf(daemon.process->pid()).cpu_seconds;
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    benchmark::DoNotOptimize(session.Launch(spin->kernel_id(), one, {Int64Argument(kSpinTicks)}));
    benchmark::DoNotOptimize(session.Synchronize());
  }
  const double seconds = SecondsSince(start);
  const double cpu_seconds = bench::UsageOf(daemon.process->pid()).cpu_seconds - cpu_before;
  state.counters["daemon_busy_cpus"] = cpu_seconds / seconds;
  state.counters["wait_ms"] = seconds * 1e3 / static_cast<double>(state.iterations());
}

#define TRANSFER_SIZES RangeMultiplier(16)->Range(64 << 10, 256 << 20)->UseRealTime()

BENCHMARK(BM_NvrtcCompile)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DirectHostToDevice)->TRANSFER_SIZES;
BENCHMARK(BM_DirectDeviceToHost)->TRANSFER_SIZES;
BENCHMARK(BM_DaemonWrite)->TRANSFER_SIZES;
BENCHMARK(BM_DaemonRead)->TRANSFER_SIZES;
BENCHMARK(BM_DaemonSharedWrite)->TRANSFER_SIZES;
BENCHMARK(BM_DaemonSharedRead)->TRANSFER_SIZES;
BENCHMARK(BM_DaemonSharedWriteBatches)->TRANSFER_SIZES;
BENCHMARK(BM_DaemonSharedReadBatches)->TRANSFER_SIZES;
BENCHMARK(BM_DaemonPitched2DWrite)->UseRealTime();
BENCHMARK(BM_LaunchEmptyInProcess)->UseRealTime();
BENCHMARK(BM_LaunchEmptyDaemonUnary)->UseRealTime();
BENCHMARK(BM_LaunchEmptyDaemonSubmit)->UseRealTime();
BENCHMARK(BM_AgainstEchoEmptyLaunch)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AgainstEchoIdleSynchronize)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AgainstEchoLaunchThenSynchronize)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DaemonCpuWhileWaiting)->UseRealTime()->Iterations(10)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpucmd
