// Launch coalescing on the CPU driver (Note [Launch coalescing] in driver/cpu/cpu_driver.h),
// with real kernels in the real executor: launches queued back to back on a held stream
// are grouped per owner, so a kernel that kills the executor costs only its own owner's
// launches their outcomes, never those another owner queued on the same stream.

#include <cstdlib>
#include <memory>
#include <string>

#include "driver/cpu/cpu_compiler.h"
#include "driver/cpu/cpu_driver.h"
#include "driver/cpu/stream_gate.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

using ::testing::HasSubstr;

class LaunchGroupsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string directory = std::getenv("TEST_TMPDIR");
    absl::StatusOr<ModuleStore> store = ModuleStore::Open(directory, ".so");
    ASSERT_TRUE(store.ok()) << store.status();
    Commit(*store, fill_, "fill",
           R"(extern "C" __global__ void fill(int* out, int value) { out[0] = value; })");
    Commit(*store, crash_, "crash",
           R"(extern "C" __global__ void crash(int* out) { *(volatile int*)0 = out[0]; })");
    auto backend = CpuBackend::Create(
        {.capacity_bytes = 16 << 20,
         .stream_count = 1,
         .executor_path = std::string(std::getenv("TEST_SRCDIR")) +
                          "/gpucmdd/driver/cpu/gpucmd-kernel-executor",
         .modules = *store});
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = *std::move(backend);
    absl::StatusOr<DeviceResource> buffer = backend_->AllocateDevice(4096);
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    buffer_ = *buffer;
  }

  void Commit(const ModuleStore& store, const KernelId& id, const std::string& entry,
              const std::string& source) {
    absl::StatusOr<CompileOutput> built =
        CompileCpuKernel(source, entry, {}, store.ArtifactPath(id), {});
    ASSERT_TRUE(built.ok()) << built.status();
    ASSERT_TRUE(store.Commit(id, entry, built->params).ok());
  }

  // Enqueues `owner`'s launch of `kernel` on the stream; its outcome.
  std::shared_ptr<LaunchOutcome> Launch(uint64_t owner, const KernelId& kernel,
                                        std::vector<uint64_t> slots) {
    LaunchSpec spec;
    spec.owner = owner;
    spec.block = {1, 1, 1};
    spec.slots = std::move(slots);
    spec.buffers = {buffer_};
    spec.outcome = std::make_shared<LaunchOutcome>();
    std::shared_ptr<LaunchOutcome> outcome = spec.outcome;
    CpuLaunchArgs args(std::move(spec));
    EXPECT_TRUE(
        CpuDriver::Launch(backend_->context(), backend_->stream(0), kernel, {1, 1, 1}, args).ok());
    return outcome;
  }

  const KernelId fill_{"fill"};
  const KernelId crash_{"crash"};
  std::unique_ptr<CpuBackend> backend_;
  DeviceResource buffer_;
};

TEST_F(LaunchGroupsTest, AnotherOwnersCrashCostsNoOutcomeOfMine) {
  StreamGate gate;
  gate.Block(backend_->stream(0));  // everything below queues up behind the gate
  std::shared_ptr<LaunchOutcome> mine = Launch(1, fill_, {buffer_.address, 1});
  std::shared_ptr<LaunchOutcome> theirs = Launch(2, crash_, {buffer_.address});
  std::shared_ptr<LaunchOutcome> mine_after = Launch(1, fill_, {buffer_.address, 2});
  gate.Open();
  backend_->stream(0).Synchronize().IgnoreError();  // the crash is the stream's error

  EXPECT_TRUE(mine->status().ok()) << mine->status();
  EXPECT_EQ(theirs->status().code(), absl::StatusCode::kUnavailable) << theirs->status();
  EXPECT_THAT(std::string(theirs->status().message()), HasSubstr("Segmentation fault"));
  EXPECT_TRUE(mine_after->status().ok()) << mine_after->status() << " (a fresh executor ran it)";
  EXPECT_EQ(*reinterpret_cast<int*>(buffer_.address), 2);
}

TEST_F(LaunchGroupsTest, OneOwnersQueuedLaunchesRunInOrder) {
  StreamGate gate;
  gate.Block(backend_->stream(0));
  std::vector<std::shared_ptr<LaunchOutcome>> outcomes;
  for (uint64_t value = 1; value <= 40; ++value) {  // more than one message holds
    outcomes.push_back(Launch(7, fill_, {buffer_.address, value}));
  }
  gate.Open();
  EXPECT_TRUE(backend_->stream(0).Synchronize().ok());
  for (const std::shared_ptr<LaunchOutcome>& outcome : outcomes) {
    EXPECT_TRUE(outcome->status().ok()) << outcome->status();
  }
  EXPECT_EQ(*reinterpret_cast<int*>(buffer_.address), 40) << "the last one ran last";
}

}  // namespace
}  // namespace gpucmd
