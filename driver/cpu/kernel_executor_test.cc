// Runs real kernel modules in the real executor process over a device-memory mapping,
// from several threads at once, including kernels that crash or hang.

#include "driver/cpu/kernel_executor.h"

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "driver/cpu/cpu_compiler.h"
#include "driver/cpu/cpu_device_memory.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/process_census.h"

namespace gpucmd {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string ExecutorPath() {
  return std::string(getenv("TEST_SRCDIR")) + "/gpucmdd/driver/cpu/gpucmd-kernel-executor";
}

std::string Build(const std::string& name, const std::string& source) {
  std::string path = std::string(getenv("TEST_TMPDIR")) + "/" + name + ".so";
  absl::StatusOr<CompileOutput> output = CompileCpuKernel(source, name, {}, path, {});
  EXPECT_TRUE(output.ok()) << output.status();
  return path;
}

KernelExecutor::ModulePath Shared(const std::string& module_path) {
  return std::make_shared<const std::string>(module_path);
}

class KernelExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override { Reset(std::nullopt); }

  // A new device memory and executor; `reply_within` as in KernelExecutor::Options.
  void Reset(std::optional<std::chrono::milliseconds> reply_within) {
    executor_.reset();
    memory_.reset();
    auto memory = CpuDeviceMemory::Create(16 << 20, 0);
    ASSERT_TRUE(memory.ok()) << memory.status();
    memory_ = *std::move(memory);
    executor_ = std::make_unique<KernelExecutor>(KernelExecutor::Options{
        .executor_path = ExecutorPath(),
        .memfd = memory_->memfd(),
        .base = reinterpret_cast<uint64_t>(memory_->base()),
        .size_bytes = memory_->capacity_bytes(),
        .workers = 2,
        .kernel_timeout = std::chrono::milliseconds(1500),
        .reply_within = reply_within,
        .module_directory = getenv("TEST_TMPDIR")});
  }

  std::unique_ptr<CpuDeviceMemory> memory_;
  std::unique_ptr<KernelExecutor> executor_;
};

constexpr char kFill[] = R"(
  extern "C" __global__ void fill(int* out, int value) {
    out[blockIdx.x * blockDim.x + threadIdx.x] = value + blockIdx.x;
  })";

constexpr char kReverse[] = R"(
  extern "C" __global__ void reverse(int* data) {
    __shared__ int tile[256];
    int t = threadIdx.x;
    tile[t] = data[blockIdx.x * blockDim.x + t];
    __syncthreads();
    data[blockIdx.x * blockDim.x + t] = tile[blockDim.x - 1 - t];
  })";

TEST_F(KernelExecutorTest, RunsLoopAndBarrierKernelsOverDeviceMemory) {
  DeviceResource buffer = *memory_->Allocate(4 * 256 * sizeof(int));
  int* data = reinterpret_cast<int*>(buffer.address);
  ASSERT_TRUE(executor_->Launch(Build("fill", kFill), {4, 1, 1}, {256, 1, 1}, 0,
                                {buffer.address, 7}, {buffer})
                  .ok());
  for (int i = 0; i < 1024; ++i) ASSERT_EQ(data[i], 7 + i / 256) << i;
  for (int i = 0; i < 1024; ++i) data[i] = i;
  ASSERT_TRUE(executor_->Launch(Build("reverse", kReverse), {4, 1, 1}, {256, 1, 1}, 0,
                                {buffer.address}, {buffer})
                  .ok());
  for (int block = 0; block < 4; ++block) {
    for (int t = 0; t < 256; ++t) ASSERT_EQ(data[block * 256 + t], block * 256 + 255 - t);
  }
  // One-block grids run on the executor's serving thread, barriers too.
  ASSERT_TRUE(executor_->Launch(Build("reverse", kReverse), {1, 1, 1}, {256, 1, 1}, 0,
                                {buffer.address}, {buffer})
                  .ok());
  for (int t = 0; t < 256; ++t) ASSERT_EQ(data[t], t) << "reversed twice";
  ASSERT_TRUE(executor_->Launch(Build("fill", kFill), {1, 1, 1}, {256, 1, 1}, 0,
                                {buffer.address, 3}, {buffer})
                  .ok());
  for (int t = 0; t < 256; ++t) ASSERT_EQ(data[t], 3);
  EXPECT_EQ(data[256], 256 + 255) << "beyond the one block: untouched";
  EXPECT_EQ(executor_->starts(), 1);
}

TEST_F(KernelExecutorTest, ConcurrentLaunchersAreServedOneAtATime) {
  std::string module = Build("fill", kFill);
  DeviceResource buffer = *memory_->Allocate(8 * 64 * sizeof(int));
  // Started by this thread, which outlives the launchers (the executor dies with the
  // thread that started it).
  ASSERT_TRUE(executor_->Launch(module, {1, 1, 1}, {1, 1, 1}, 0, {buffer.address, 0}, {buffer})
                  .ok());
  std::vector<std::thread> launchers;
  for (int t = 0; t < 4; ++t) {
    launchers.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        uint64_t slice = buffer.address + t * 2 * 64 * sizeof(int);
        absl::Status launched = executor_->Launch(module, {2, 1, 1}, {64, 1, 1}, 0,
                                                  {slice, 100u * t}, {buffer});
        EXPECT_TRUE(launched.ok()) << launched;
      }
    });
  }
  for (std::thread& launcher : launchers) launcher.join();
  EXPECT_EQ(executor_->starts(), 1);
  int* data = reinterpret_cast<int*>(buffer.address);
  for (int t = 0; t < 4; ++t) EXPECT_EQ(data[t * 128 + 64], 100 * t + 1);
}

TEST_F(KernelExecutorTest, TheExecutorDiesWithTheThreadThatStartedIt) {
  DeviceResource buffer = *memory_->Allocate(4096);
  std::string module = Build("fill", kFill);
  std::thread starter([&] {
    const absl::Status launched =
        executor_->Launch(module, {1, 1, 1}, {1, 1, 1}, 0, {buffer.address, 1}, {buffer});
    EXPECT_TRUE(launched.ok()) << launched;
  });
  starter.join();
  // Its executor gets SIGKILL (a parent-death signal); the next launch starts another.
  siginfo_t ended{};
  for (int i = 0; i < 1000 && ended.si_pid == 0; ++i) {
    ASSERT_EQ(waitid(P_ALL, 0, &ended, WEXITED | WNOWAIT | WNOHANG), 0);
    if (ended.si_pid == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_NE(ended.si_pid, 0) << "the executor outlived the thread that started it";
  EXPECT_EQ(ended.si_code, CLD_KILLED);
  EXPECT_EQ(ended.si_status, SIGKILL);
  absl::Status after =
      executor_->Launch(module, {1, 1, 1}, {1, 1, 1}, 0, {buffer.address, 3}, {buffer});
  EXPECT_TRUE(after.ok()) << after;
  EXPECT_EQ(executor_->starts(), 2);
}

// Note [Device work yields to the control plane] in base/batch_scheduling.h.
TEST_F(KernelExecutorTest, KernelsRunAsBatchWork) {
  DeviceResource buffer = *memory_->Allocate(4 * 256 * sizeof(int));
  ASSERT_TRUE(executor_->Launch(Build("fill", kFill), {4, 1, 1}, {256, 1, 1}, 0,
                                {buffer.address, 7}, {buffer})
                  .ok());
  const std::vector<pid_t> threads = testing::ThreadsOfChildrenMatching(getpid(), ExecutorPath());
  ASSERT_GE(threads.size(), 3u) << "the executor's serving thread and its two block workers";
  for (pid_t thread : threads) EXPECT_EQ(sched_getscheduler(thread), SCHED_BATCH) << thread;
}

TEST_F(KernelExecutorTest, AnswersSpreadOverSeveralMessagesAreMatchedInOrder) {
  // Answering at once: one reply message per launch after the first.
  Reset(std::chrono::milliseconds(0));
  DeviceResource buffer = *memory_->Allocate(4096);
  int* data = reinterpret_cast<int*>(buffer.address);
  const std::string fill = Build("fill", kFill);
  const std::string missing = ::testing::TempDir() + "/missing.so";
  std::vector<KernelExecutor::Request> requests;
  for (int i = 0; i < 10; ++i) {
    // Every third launch names no module: its own answer, in its place.
    requests.push_back({Shared(i % 3 == 2 ? missing : fill), {1, 1, 1}, {1, 1, 1}, 0,
                        {buffer.address, uint64_t(i)}, {buffer}});
  }
  std::vector<KernelExecutor::Result> results = executor_->LaunchAll(requests);
  ASSERT_EQ(results.size(), requests.size());
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(results[i].status.ok(), i % 3 != 2) << i << ": " << results[i].status;
  }
  EXPECT_EQ(data[0], 9) << "the last one ran last";
}

// Note [Failed assertions]: in a block run as fibers (barriers) and in one run as a loop.
TEST_F(KernelExecutorTest, AFailedAssertionFailsTheLaunchAndTheExecutorServesOn) {
  DeviceResource buffer = *memory_->Allocate(4096);
  const std::string fibers = Build("assert_fibers", R"(#include <assert.h>
    extern "C" __global__ void assert_fibers(int* out, int bad) {
      out[threadIdx.x] = 1;
      __syncthreads();
      assert(threadIdx.x != bad);
      __syncthreads();
      out[threadIdx.x] = 2;
    })");
  const std::string loop = Build("assert_loop", R"(#include <assert.h>
    extern "C" __global__ void assert_loop(int* out, int bad) {
      assert(blockIdx.x != bad);
      out[blockIdx.x] = 3;
    })");
  for (const std::string& module : {fibers, loop}) {
    absl::Status failed =
        executor_->Launch(module, {8, 1, 1}, {32, 1, 1}, 0, {buffer.address, 5}, {buffer});
    EXPECT_EQ(failed.code(), absl::StatusCode::kAborted) << failed;
    EXPECT_THAT(std::string(failed.message()), HasSubstr("!= bad"));
    EXPECT_TRUE(
        executor_->Launch(module, {8, 1, 1}, {32, 1, 1}, 0, {buffer.address, 1000}, {buffer})
            .ok());
  }
  EXPECT_EQ(executor_->starts(), 1) << "no executor died";
}

TEST_F(KernelExecutorTest, WhatALaunchPrintsComesBackWithItsResult) {
  DeviceResource buffer = *memory_->Allocate(4096);
  const std::string chatty = Build("chatty", R"(#include <stdio.h>
    extern "C" __global__ void chatty(int* out, int lines) {
      if (threadIdx.x < lines) printf("block %u thread %u\n", blockIdx.x, threadIdx.x);
      if (threadIdx.x == 0) puts("done");
    })");
  const std::string loud = Build("loud", R"(#include <stdio.h>
    extern "C" __global__ void loud(int* out, int lines) {
      for (int i = 0; i < lines; ++i) printf("%0100d\n", i);
    })");
  std::vector<KernelExecutor::Request> requests = {
      {Shared(chatty), {1, 1, 1}, {4, 1, 1}, 0, {buffer.address, 2}, {buffer}},
      {Shared(loud), {1, 1, 1}, {1, 1, 1}, 0, {buffer.address, 1000}, {buffer}},
      {Shared(chatty), {2, 1, 1}, {4, 1, 1}, 0, {buffer.address, 0}, {buffer}}};
  std::vector<KernelExecutor::Result> results = executor_->LaunchAll(requests);
  ASSERT_EQ(results.size(), 3u);
  for (const KernelExecutor::Result& result : results) EXPECT_TRUE(result.status.ok());
  // A block without barriers runs its threads one after another.
  EXPECT_EQ(results[0].output, "block 0 thread 0\ndone\nblock 0 thread 1\n");
  EXPECT_LE(results[1].output.size(), kMaxLaunchOutputBytes);
  EXPECT_THAT(results[1].output, HasSubstr("output cut")) << "100 KB printed, 16 KiB kept";
  EXPECT_EQ(results[2].output, "done\ndone\n") << "each launch its own output";
}

// A full message of launches that each print as much as a launch keeps: their replies
// exceed what one datagram of the socket holds, and still all come back.
TEST_F(KernelExecutorTest, AFullMessageOfLoudLaunchesIsAnsweredWhole) {
  DeviceResource buffer = *memory_->Allocate(4096);
  const std::string loud = Build("loud", R"(#include <stdio.h>
    extern "C" __global__ void loud(int* out, int lines) {
      for (int i = 0; i < lines; ++i) printf("%0100d\n", i);
    })");
  std::vector<KernelExecutor::Request> requests(
      KernelExecutor::kMaxPipelined,
      {Shared(loud), {1, 1, 1}, {1, 1, 1}, 0, {buffer.address, 1000}, {buffer}});
  std::vector<KernelExecutor::Result> results = executor_->LaunchAll(requests);
  ASSERT_EQ(results.size(), requests.size());
  for (const KernelExecutor::Result& result : results) {
    EXPECT_TRUE(result.status.ok()) << result.status;
    EXPECT_THAT(result.output, HasSubstr("output cut"));
  }
  EXPECT_EQ(executor_->starts(), 1) << "no executor died";
}

TEST_F(KernelExecutorTest, PipelinedLaunchesRunInOrderAndStopAtADeath) {
  DeviceResource buffer = *memory_->Allocate(4096);
  int* data = reinterpret_cast<int*>(buffer.address);
  const std::string fill = Build("fill", kFill);
  std::vector<KernelExecutor::Request> requests;
  for (int i = 0; i < static_cast<int>(KernelExecutor::kMaxPipelined); ++i) {
    requests.push_back(
        {Shared(fill), {1, 1, 1}, {1, 1, 1}, 0, {buffer.address, uint64_t(i)}, {buffer}});
  }
  for (const KernelExecutor::Result& result : executor_->LaunchAll(requests)) {
    EXPECT_TRUE(result.status.ok()) << result.status;
  }
  EXPECT_EQ(data[0], static_cast<int>(KernelExecutor::kMaxPipelined) - 1) << "the last one ran last";

  const std::string crash =
      Build("crash", "extern \"C\" __global__ void crash(int* p) { *(volatile int*)0 = 1; }");
  std::vector<KernelExecutor::Request> dying = {
      {Shared(fill), {1, 1, 1}, {1, 1, 1}, 0, {buffer.address, 100}, {buffer}},
      {Shared(crash), {1, 1, 1}, {1, 1, 1}, 0, {buffer.address}, {buffer}},
      {Shared(fill), {1, 1, 1}, {1, 1, 1}, 0, {buffer.address, 200}, {buffer}}};
  std::vector<KernelExecutor::Result> results = executor_->LaunchAll(dying);
  ASSERT_EQ(results.size(), 3u);
  // One message: the death costs each of its launches its outcome, the one that ran
  // before the crash too (its bytes are there, as on a GPU whose context a fault lost).
  for (const KernelExecutor::Result& result : results) {
    EXPECT_EQ(result.status.code(), absl::StatusCode::kUnavailable) << result.status;
    EXPECT_THAT(std::string(result.status.message()), HasSubstr("Segmentation fault"));
  }
  EXPECT_EQ(data[0], 100) << "the first ran, the last did not";
  EXPECT_TRUE(executor_->Launch(fill, {1, 1, 1}, {1, 1, 1}, 0, {buffer.address, 7}, {buffer}).ok());
  EXPECT_EQ(data[0], 7);
}

TEST_F(KernelExecutorTest, CrashAndHangKillOnlyTheExecutor) {
  DeviceResource buffer = *memory_->Allocate(4096);
  absl::Status crashed = executor_->Launch(
      Build("crash", "extern \"C\" __global__ void crash(int* p) { *(volatile int*)0 = 1; }"),
      {1, 1, 1}, {1, 1, 1}, 0, {buffer.address}, {buffer});
  EXPECT_EQ(crashed.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(crashed.message()), HasSubstr("Segmentation fault"));
  absl::Status hung = executor_->Launch(
      Build("hang", "extern \"C\" __global__ void hang(int* p) { volatile int f = 1; while (f) {} }"),
      {1, 1, 1}, {1, 1, 1}, 0, {buffer.address}, {buffer});
  EXPECT_EQ(hung.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(hung.message()), HasSubstr("time limit"));
  ASSERT_TRUE(executor_->Launch(Build("fill", kFill), {1, 1, 1}, {4, 1, 1}, 0,
                                {buffer.address, 5}, {buffer})
                  .ok());
  EXPECT_EQ(reinterpret_cast<int*>(buffer.address)[3], 5);
  EXPECT_EQ(executor_->starts(), 3);
}

// Kill ends a running kernel from another thread: the launch fails UNAVAILABLE well
// before the time limit, and the next launch gets a fresh executor.
TEST_F(KernelExecutorTest, KillEndsTheRunningKernelFromAnotherThread) {
  DeviceResource buffer = *memory_->Allocate(4096);
  const std::string hang = Build("hang_killed", R"(
      extern "C" __global__ void hang_killed(int* p) {
        *(volatile int*)p = 77;
        volatile int f = 1;
        while (f) {}
      })");
  const std::string fill = Build("fill", kFill);
  const absl::Status filled =
      executor_->Launch(fill, {1, 1, 1}, {4, 1, 1}, 0, {buffer.address, 1}, {buffer});
  ASSERT_TRUE(filled.ok()) << filled;
  absl::Status hung;
  std::thread launcher([&] {
    hung = executor_->Launch(hang, {1, 1, 1}, {1, 1, 1}, 0, {buffer.address}, {buffer});
  });
  const volatile int* marker = reinterpret_cast<const volatile int*>(buffer.address);
  while (*marker != 77) std::this_thread::sleep_for(std::chrono::milliseconds(5));  // spinning
  executor_->Kill();
  launcher.join();
  EXPECT_EQ(hung.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(hung.message()), Not(HasSubstr("time limit"))) << hung;
  ASSERT_TRUE(executor_->Launch(fill, {1, 1, 1}, {4, 1, 1}, 0, {buffer.address, 5}, {buffer}).ok());
  EXPECT_EQ(reinterpret_cast<int*>(buffer.address)[3], 5);
  EXPECT_EQ(executor_->starts(), 2);
}

// An executor that dies between launches (killed from outside, out of memory) costs no
// launch: the next one is sent to a fresh executor and runs.
TEST_F(KernelExecutorTest, AnExecutorThatDiedBetweenLaunchesCostsNoLaunch) {
  DeviceResource buffer = *memory_->Allocate(4096);
  const std::string fill = Build("fill", kFill);
  ASSERT_TRUE(executor_->Launch(fill, {1, 1, 1}, {4, 1, 1}, 0, {buffer.address, 1}, {buffer}).ok());
  executor_->Kill();
  siginfo_t exited{};
  ASSERT_EQ(waitid(P_ALL, 0, &exited, WEXITED | WNOWAIT), 0);  // dead, not yet reaped
  absl::Status launched =
      executor_->Launch(fill, {1, 1, 1}, {4, 1, 1}, 0, {buffer.address, 5}, {buffer});
  ASSERT_TRUE(launched.ok()) << launched;
  EXPECT_EQ(reinterpret_cast<int*>(buffer.address)[3], 5);
  EXPECT_EQ(executor_->starts(), 2);
}

TEST_F(KernelExecutorTest, ALaunchTouchesOnlyItsBuffers) {
  DeviceResource mine = *memory_->Allocate(4096);
  DeviceResource other = *memory_->Allocate(4096);
  reinterpret_cast<int*>(other.address)[0] = 1234;
  std::string module = Build("reach", R"(
      extern "C" __global__ void reach(int* mine, long long distance) {
        mine[distance / sizeof(int)] = 666;
      })");
  long long distance = static_cast<long long>(other.address - mine.address);
  absl::Status reached =
      executor_->Launch(module, {1, 1, 1}, {1, 1, 1}, 0,
                        {mine.address, static_cast<uint64_t>(distance)}, {mine});
  EXPECT_EQ(reached.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(reached.message()), HasSubstr("Segmentation fault"));
  EXPECT_EQ(reinterpret_cast<int*>(other.address)[0], 1234);
  // Passed as an argument, the same memory is the launch's to write.
  ASSERT_TRUE(executor_->Launch(module, {1, 1, 1}, {1, 1, 1}, 0,
                                {mine.address, static_cast<uint64_t>(distance)}, {mine, other})
                  .ok());
  EXPECT_EQ(reinterpret_cast<int*>(other.address)[0], 666);
}

// A launch sees its own buffers only, not those the launch before it had open (the
// window changes between launches only where it must).
TEST_F(KernelExecutorTest, ALaunchDoesNotSeeTheBuffersOfTheLaunchBefore) {
  DeviceResource first = *memory_->Allocate(3 * 4096);
  DeviceResource second = *memory_->Allocate(4096);
  DeviceResource third = *memory_->Allocate(4096);
  std::string module = Build("reach_back", R"(
      extern "C" __global__ void reach_back(int* mine, long long distance) {
        mine[0] = 1;
        mine[distance / sizeof(int)] = 666;
      })");
  auto distance_to = [](const DeviceResource& from, const DeviceResource& to) {
    return static_cast<uint64_t>(static_cast<long long>(to.address - from.address));
  };
  // First and second open; then only the second, reaching into the first's middle page.
  ASSERT_TRUE(executor_->Launch(module, {1, 1, 1}, {1, 1, 1}, 0,
                                {first.address, distance_to(first, second)}, {first, second})
                  .ok());
  reinterpret_cast<int*>(first.address + 4096)[0] = 1234;
  absl::Status reached = executor_->Launch(module, {1, 1, 1}, {1, 1, 1}, 0,
                                           {second.address, distance_to(second, first) + 4096},
                                           {second, third});
  EXPECT_EQ(reached.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(reached.message()), HasSubstr("Segmentation fault"));
  EXPECT_EQ(reinterpret_cast<int*>(first.address + 4096)[0], 1234);
  // The same launch twice: its buffers stay open and it runs again.
  for (int run = 0; run < 2; ++run) {
    ASSERT_TRUE(executor_->Launch(module, {1, 1, 1}, {1, 1, 1}, 0,
                                  {third.address, distance_to(third, second)}, {second, third})
                    .ok());
  }
  EXPECT_EQ(reinterpret_cast<int*>(second.address)[0], 666);
}

TEST_F(KernelExecutorTest, MissingModuleIsAnError) {
  absl::Status status =
      executor_->Launch("/nonexistent/module.so", {1, 1, 1}, {1, 1, 1}, 0, {}, {});
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("cannot load"));
}

}  // namespace
}  // namespace gpucmd
