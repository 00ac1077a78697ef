// The CPU driver's kernels against the same computation written as plain C++: a
// barrier-free elementwise kernel (saxpy over 4 Mi floats, whose blocks run as loops)
// and a shared-memory tiled matrix multiply of 256x256 (barriers: its threads run as
// fibers). Each kernel is launched on an in-process Command<CpuDriver> (its executor
// process, two workers), up to the Synchronize; each plain loop is compiled by the same
// host compiler with the same flags into a module this process loads, and runs on one
// thread. `x_plain`: the plain loop's time over the kernel's (higher is better).
//
//   bazel run -c opt //tests/bench:cpu_kernel_speed_bench

#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "benchmark/benchmark.h"
#include "driver/cpu/cpu_compiler.h"
#include "driver/cpu/cpu_driver.h"
#include "server/command/command.h"
#include "tests/bench/bench_support.h"
#include "tests/kernels/kernel_sources.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/random_bytes.h"

namespace gpucmd {
namespace {

using bench::SecondsSince;

constexpr SessionId kSession = 1;
constexpr int kSaxpyElements = 4 << 20;
constexpr int kMatrix = 256;

// The plain C++ of both computations.
constexpr char kPlainLoops[] = R"(
extern "C" void saxpy_loop(int n, float a, const float* x, float* y) {
  for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];
}
extern "C" void matmul_loop(const float* A, const float* B, float* C, int M, int K, int N) {
  for (int row = 0; row < M; ++row) {
    for (int col = 0; col < N; ++col) {
      float sum = 0.0f;
      for (int k = 0; k < K; ++k) sum += A[row * K + k] * B[k * N + col];
      C[row * N + col] = sum;
    }
  }
})";

// Seconds per run of each plain loop, set by the plain benchmarks (registered first).
double plain_saxpy_seconds = 0;
double plain_matmul_seconds = 0;

std::vector<float> RandomFloats(size_t count) { return testing::RandomFloats(count, 7); }

// The plain loops, built with the flags kernel code gets (CpuKernelCodeFlags).
void* PlainModule() {
  static void* const kModule = [] {
    const std::string directory = testing::ShortTempDir();
    std::ofstream(directory + "/plain.cc") << kPlainLoops;
    const std::string build = absl::StrCat("g++ ", absl::StrJoin(CpuKernelCodeFlags(), " "),
                                           " -shared -o ", directory, "/plain.so ", directory,
                                           "/plain.cc");
    if (std::system(build.c_str()) != 0) return static_cast<void*>(nullptr);
    return dlopen((directory + "/plain.so").c_str(), RTLD_NOW);
  }();
  return kModule;
}

void BM_PlainSaxpy(benchmark::State& state) {
  auto* saxpy = reinterpret_cast<void (*)(int, float, const float*, float*)>(
      PlainModule() ? dlsym(PlainModule(), "saxpy_loop") : nullptr);
  if (saxpy == nullptr) return state.SkipWithError("cannot build the plain loops");
  std::vector<float> x = RandomFloats(kSaxpyElements), y = RandomFloats(kSaxpyElements);
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    saxpy(kSaxpyElements, 2.0f, x.data(), y.data());
    benchmark::ClobberMemory();
  }
  plain_saxpy_seconds = SecondsSince(start) / static_cast<double>(state.iterations());
}

void BM_PlainMatmul(benchmark::State& state) {
  auto* matmul = reinterpret_cast<void (*)(const float*, const float*, float*, int, int, int)>(
      PlainModule() ? dlsym(PlainModule(), "matmul_loop") : nullptr);
  if (matmul == nullptr) return state.SkipWithError("cannot build the plain loops");
  std::vector<float> a = RandomFloats(kMatrix * kMatrix), b = RandomFloats(kMatrix * kMatrix);
  std::vector<float> c(kMatrix * kMatrix);
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    matmul(a.data(), b.data(), c.data(), kMatrix, kMatrix, kMatrix);
    benchmark::ClobberMemory();
  }
  plain_matmul_seconds = SecondsSince(start) / static_cast<double>(state.iterations());
}

// One CPU device with an executor, a kernel compiled into its module store.
struct KernelDevice {
  KernelDevice(const char* source, const char* entry) {
    const std::string modules = testing::ShortTempDir();
    ModuleStore store = *ModuleStore::Open(modules, ".so");
    absl::StatusOr<CompileOutput> built =
        CompileCpuKernel(source, entry, {}, store.ArtifactPath(kernel), {});
    if (!built.ok() || !store.Commit(kernel, entry, built->params).ok()) return;
    params = ShareKernelParams(built->params);
    backend = *CpuBackend::Create(
        {.capacity_bytes = 256 << 20,
         .stream_count = 1,
         .executor_path = testing::RunfilePath("driver/cpu/gpucmd-kernel-executor"),
         .modules = store});
    command = std::make_unique<Command<CpuDriver>>(*backend, CommandOptions());
  }

  BufferId Upload(const std::vector<float>& values) {
    BufferId id = *command->Allocate(kSession, values.size() * sizeof(float));
    (void)command->Write(kSession, 0, id, CopyLayout::Contiguous(0, values.size() * sizeof(float)),
                         std::string(reinterpret_cast<const char*>(values.data()),
                                     values.size() * sizeof(float)));
    return id;
  }

  // Runs `launch` and waits for it, per iteration; seconds per run.
  double Time(benchmark::State& state, const KernelLaunch& launch) {
    auto start = std::chrono::steady_clock::now();
    for (auto _ : state) {
      benchmark::DoNotOptimize(command->Launch(kSession, 0, launch));
      benchmark::DoNotOptimize(WaitFor(command->Synchronize(kSession, 0)));
    }
    return SecondsSince(start) / static_cast<double>(state.iterations());
  }

  const KernelId kernel{"speed"};
  SharedKernelParams params;
  std::unique_ptr<CpuBackend> backend;
  std::unique_ptr<Command<CpuDriver>> command;
};

LaunchArgument Buffer(BufferId id, BufferAccess access) {
  return {.kind = ParamKind::kBuffer, .buffer = id, .access = access};
}

LaunchArgument Scalar(ScalarKind kind, uint64_t bits) {
  return {.kind = ParamKind::kScalar, .scalar = kind, .bits = bits};
}

void ReportAgainstPlain(benchmark::State& state, double plain_seconds, double kernel_seconds) {
  if (plain_seconds > 0) state.counters["x_plain"] = plain_seconds / kernel_seconds;
}

void BM_KernelSaxpy(benchmark::State& state) {
  KernelDevice device(kernels::kSaxpy, "saxpy");
  if (device.command == nullptr) return state.SkipWithError("cannot build the kernel");
  BufferId x = device.Upload(RandomFloats(kSaxpyElements));
  BufferId y = device.Upload(RandomFloats(kSaxpyElements));
  float a = 2.0f;
  uint32_t a_bits;
  std::memcpy(&a_bits, &a, 4);
  KernelLaunch launch{.kernel = device.kernel,
                      .params = device.params,
                      .grid = {kSaxpyElements / 256, 1, 1},
                      .block = {256, 1, 1},
                      .args = {Scalar(ScalarKind::kI32, kSaxpyElements),
                               Scalar(ScalarKind::kF32, a_bits),
                               Buffer(x, BufferAccess::kRead),
                               Buffer(y, BufferAccess::kReadWrite)}};
  ReportAgainstPlain(state, plain_saxpy_seconds, device.Time(state, launch));
}

void BM_KernelTiledMatmul(benchmark::State& state) {
  KernelDevice device(kernels::kTiledMatmul, "matmul");
  if (device.command == nullptr) return state.SkipWithError("cannot build the kernel");
  BufferId a = device.Upload(RandomFloats(kMatrix * kMatrix));
  BufferId b = device.Upload(RandomFloats(kMatrix * kMatrix));
  BufferId c = device.Upload(std::vector<float>(kMatrix * kMatrix));
  KernelLaunch launch{.kernel = device.kernel,
                      .params = device.params,
                      .grid = {kMatrix / 16, kMatrix / 16, 1},
                      .block = {16, 16, 1},
                      .args = {Buffer(a, BufferAccess::kRead), Buffer(b, BufferAccess::kRead),
                               Buffer(c, BufferAccess::kWrite),
                               Scalar(ScalarKind::kI32, kMatrix), Scalar(ScalarKind::kI32, kMatrix),
                               Scalar(ScalarKind::kI32, kMatrix)}};
  ReportAgainstPlain(state, plain_matmul_seconds, device.Time(state, launch));
}

BENCHMARK(BM_PlainSaxpy)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_KernelSaxpy)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PlainMatmul)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_KernelTiledMatmul)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpucmd
