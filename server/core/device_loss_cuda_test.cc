// Device loss on the CUDA driver, over the libcuda.so.1 TEST DOUBLE (no GPU here): a
// sticky error injected into device 0's context is seen by CudaDriver::DeviceHealth, the
// device worker resets that context (cuDevicePrimaryCtxReset) and serves again, and
// device 1 keeps its data; an error that no new context clears, as a kernel fault on a
// real GPU, leaves the device down and asks for a restart. The server-side rules are
// tested in device_loss_test.cc.

#include <future>
#include <memory>
#include <vector>

#include "driver/cuda/cuda_driver.h"
#include "driver/testing/fake_gpu_control.h"
#include "gtest/gtest.h"
#include "server/command/command_factory.h"
#include "server/core/device_worker.h"
#include "server/core/worker_test_calls.h"

namespace gpucmd {
namespace {

DeviceWorker::Factory CudaFactory(int device) {
  return MakeCommandFactory<CudaDriver>(
      [device] { return CudaBackend::Create({.ordinal = device, .stream_count = 2}); },
      CommandOptions());
}

TEST(CudaDeviceLossTest, StickyErrorResetsOnlyThatDevicesContext) {
  absl::StatusOr<const FakeGpuControl*> fake = LoadFakeGpu("driver/testing/cuda/libcuda.so.1");
  ASSERT_TRUE(fake.ok()) << fake.status();
  (*fake)->set_device_count(2);
  Metrics metrics(2);
  DeviceWorker lost({.ordinal = 0}, CudaFactory(0), &metrics);
  DeviceWorker bystander({.ordinal = 1}, CudaFactory(1), &metrics);
  const std::string data(3000, 'z');
  absl::StatusOr<BufferId> before = AllocateAndWrite(lost, 1, data);
  absl::StatusOr<BufferId> elsewhere = AllocateAndWrite(bystander, 1, data);
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_TRUE(elsewhere.ok()) << elsewhere.status();
  const int resets_before[] = {(*fake)->context_resets(0), (*fake)->context_resets(1)};

  (*fake)->inject_sticky_error(0, CUDA_ERROR_ILLEGAL_ADDRESS);

  absl::Status synced = SynchronizeAll(lost, 1);
  EXPECT_EQ(synced.code(), absl::StatusCode::kUnavailable) << synced;
  EXPECT_NE(synced.message().find("an illegal memory access was encountered"),
            std::string::npos)
      << synced;
  EXPECT_EQ((*fake)->context_resets(0), resets_before[0] + 1);
  EXPECT_EQ((*fake)->context_resets(1), resets_before[1]);
  EXPECT_EQ(ReadBack(lost, 1, *before, data.size()).status().code(),
            absl::StatusCode::kUnavailable);

  // A new session works on the new context.
  absl::StatusOr<BufferId> after = AllocateAndWrite(lost, 2, data);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(ReadBack(lost, 2, *after, data.size()).value_or(""), data);
  EXPECT_EQ(ReadBack(bystander, 1, *elsewhere, data.size()).value_or(""), data);
  EXPECT_EQ(metrics.DeviceResets(0).Value(), 1);
  EXPECT_EQ(metrics.DeviceResets(1).Value(), 0);
}

TEST(CudaDeviceLossTest, AReadInFlightWhenTheContextFailsEndsUnavailable) {
  absl::StatusOr<const FakeGpuControl*> fake = LoadFakeGpu("driver/testing/cuda/libcuda.so.1");
  ASSERT_TRUE(fake.ok()) << fake.status();
  Metrics metrics(1);
  DeviceWorker worker({.ordinal = 0}, CudaFactory(0), &metrics);
  const std::string data(1000, 'r');
  absl::StatusOr<BufferId> id = AllocateAndWrite(worker, 1, data);
  ASSERT_TRUE(id.ok()) << id.status();
  const int resets = (*fake)->context_resets(0);

  std::promise<absl::Status> finished;
  ASSERT_TRUE(worker.Submit(1, [&](CommandInterface& command) {
    absl::StatusOr<PendingRead> read =
        command.Read(1, 0, *id, CopyLayout::Contiguous(0, data.size()));
    if (!read.ok()) {
      finished.set_value(read.status());
      return;
    }
    // The device faults while the copy is in flight.
    (*fake)->inject_sticky_error(0, CUDA_ERROR_ILLEGAL_ADDRESS);
    auto pending = std::make_shared<PendingRead>(*std::move(read));
    worker.Complete(1, [pending] { return pending->wait(); },
                    [pending, &finished](absl::Status status) {
                      // Moved, not copied: ThreadSanitizer cannot see the reference
                      // count of a status shared between threads (Debian's abseil).
                      finished.set_value(std::move(status));
                    });
  }).ok());
  absl::Status status = finished.get_future().get();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_NE(status.message().find("an illegal memory access was encountered"), std::string::npos)
      << status;

  // The next command finds the context reset and the buffer gone with it.
  EXPECT_EQ(ReadBack(worker, 1, *id, data.size()).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ((*fake)->context_resets(0), resets + 1);
}

// Runs last: the device it loses stays lost in this process, as on a GPU.
TEST(CudaDeviceLossTest, ADeviceLostForGoodStaysDownAndAsksOnceForARestart) {
  absl::StatusOr<const FakeGpuControl*> fake = LoadFakeGpu("driver/testing/cuda/libcuda.so.1");
  ASSERT_TRUE(fake.ok()) << fake.status();
  (*fake)->set_device_count(3);
  constexpr int kLost = 2;
  Metrics metrics(3);
  std::vector<absl::Status> restart_requests;
  DeviceWorker lost({.ordinal = kLost,
                     .on_lost_for_good =
                         [&](const absl::Status& down) { restart_requests.push_back(down); }},
                    CudaFactory(kLost), &metrics);
  DeviceWorker bystander({.ordinal = 0}, CudaFactory(0), &metrics);
  const std::string data(2000, 'g');
  absl::StatusOr<BufferId> before = AllocateAndWrite(lost, 1, data);
  absl::StatusOr<BufferId> elsewhere = AllocateAndWrite(bystander, 1, data);
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_TRUE(elsewhere.ok()) << elsewhere.status();

  (*fake)->inject_error_for_good(kLost, CUDA_ERROR_ILLEGAL_ADDRESS);

  absl::Status synced = SynchronizeAll(lost, 1);
  EXPECT_EQ(synced.code(), absl::StatusCode::kUnavailable) << synced;
  // Every later call, from any session, is refused saying the device is down and why.
  for (SessionId session : {1, 2}) {
    absl::Status refused = lost.Submit(session, [](CommandInterface&) {});
    EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable) << refused;
    EXPECT_NE(refused.message().find("device 2 is down"), std::string::npos) << refused;
    EXPECT_NE(refused.message().find("the daemon restarts"), std::string::npos) << refused;
  }
  ASSERT_EQ(restart_requests.size(), 1u);
  EXPECT_NE(restart_requests[0].message().find("cuDevicePrimaryCtxRetain"), std::string::npos)
      << restart_requests[0];
  EXPECT_EQ(metrics.DeviceReady(kLost).Value(), 0);
  EXPECT_EQ(ReadBack(bystander, 1, *elsewhere, data.size()).value_or(""), data);
}

}  // namespace
}  // namespace gpucmd
