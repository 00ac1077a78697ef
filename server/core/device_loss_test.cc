// Device loss (Note [Device loss] in server/device_worker.h) through DeviceWorker and
// Command<D>, on a test double: the CPU driver whose device health the test can fail,
// as a GPU context fails after a sticky error. A backend created afterwards (the new
// context) is healthy again. The CUDA driver's own detection and context reset are
// tested over the libcuda double in server/device_loss_cuda_test.cc.

#include <future>
#include <map>

#include "base/mutex.h"
#include "driver/cpu/cpu_driver.h"
#include "gtest/gtest.h"
#include "server/command/command_factory.h"
#include "server/core/device_worker.h"
#include "server/core/worker_test_calls.h"

namespace gpucmd {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// Injected faults by device ordinal, and how many backends each device had.
class FaultInjector {
 public:
  static FaultInjector& Get() {
    static FaultInjector* const kInjector = new FaultInjector();
    return *kInjector;
  }
  void Fail(int device, absl::Status fault) {
    MutexLock lock(&mutex_);
    faults_[device] = std::move(fault);
  }
  absl::Status Fault(int device) {
    MutexLock lock(&mutex_);
    return faults_[device];
  }
  // A new backend: a fresh context, healthy again.
  void Created(int device) {
    MutexLock lock(&mutex_);
    faults_[device] = absl::OkStatus();
    ++created_[device];
  }
  int created(int device) {
    MutexLock lock(&mutex_);
    return created_[device];
  }
  void Clear() {
    MutexLock lock(&mutex_);
    faults_.clear();
    created_.clear();
  }

 private:
  Mutex mutex_;
  std::map<int, absl::Status> faults_ ABSL_GUARDED_BY(mutex_);
  std::map<int, int> created_ ABSL_GUARDED_BY(mutex_);
};

struct LosableCpuDriver : CpuDriver {
  static absl::Status DeviceHealth(Context& context) {
    return FaultInjector::Get().Fault(context.ordinal);
  }
};
static_assert(Driver<LosableCpuDriver>);

// Makes a device's backends; fails from the `fail_from`-th creation on (0: never).
DeviceWorker::Factory LosableFactory(int device, int fail_from = 0) {
  return MakeCommandFactory<LosableCpuDriver>(
      [device, fail_from]() -> absl::StatusOr<std::unique_ptr<CpuBackend>> {
        FaultInjector& injector = FaultInjector::Get();
        if (fail_from != 0 && injector.created(device) + 1 >= fail_from) {
          return absl::InternalError("the device does not come back");
        }
        injector.Created(device);
        return CpuBackend::Create(
            {.ordinal = device, .capacity_bytes = 16 * kMiB, .stream_count = 2});
      },
      CommandOptions());
}

class DeviceLossTest : public ::testing::Test {
 protected:
  void SetUp() override { FaultInjector::Get().Clear(); }
};

TEST_F(DeviceLossTest, LostDeviceIsRecreatedAndOnlyItsWorkFails) {
  Metrics metrics(2);
  DeviceWorker lost({.ordinal = 0}, LosableFactory(0), &metrics);
  DeviceWorker bystander({.ordinal = 1}, LosableFactory(1), &metrics);
  const std::string data(5000, 'q');
  absl::StatusOr<BufferId> first = AllocateAndWrite(lost, 1, data);
  absl::StatusOr<BufferId> other_session = AllocateAndWrite(lost, 2, data);
  absl::StatusOr<BufferId> elsewhere = AllocateAndWrite(bystander, 1, data);
  ASSERT_TRUE(first.ok() && other_session.ok() && elsewhere.ok());

  FaultInjector::Get().Fail(0, absl::UnavailableError("illegal address (injected)"));

  // The session's in-flight work is reported once, naming the cause.
  absl::Status synced = SynchronizeAll(lost, 1);
  EXPECT_EQ(synced.code(), absl::StatusCode::kUnavailable) << synced;
  EXPECT_NE(synced.message().find("device 0 was reset"), std::string::npos) << synced;
  EXPECT_NE(synced.message().find("illegal address (injected)"), std::string::npos) << synced;
  EXPECT_TRUE(SynchronizeAll(lost, 1).ok());

  // Every session's buffers on the device are lost, not silently empty.
  absl::StatusOr<std::string> lost_read = ReadBack(lost, 2, *other_session, data.size());
  EXPECT_EQ(lost_read.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(lost_read.status().message().find("was lost"), std::string::npos)
      << lost_read.status();
  EXPECT_EQ(SynchronizeAll(lost, 2).code(), absl::StatusCode::kUnavailable);
  // A foreign session still learns nothing about the handle.
  EXPECT_EQ(ReadBack(lost, 3, *other_session, data.size()).status().code(),
            absl::StatusCode::kNotFound);
  // Freeing a lost handle is fine, once.
  auto free = [&](SessionId session, BufferId id) {
    return OnDevice<absl::Status>(
        lost, session, [&](CommandInterface& command) { return command.Free(session, id); });
  };
  EXPECT_TRUE(free(2, *other_session).ok());
  EXPECT_EQ(free(2, *other_session).code(), absl::StatusCode::kNotFound);

  // The device serves again, and new ids never name a lost buffer.
  absl::StatusOr<BufferId> fresh = AllocateAndWrite(lost, 1, data);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_GT(*fresh, std::max(*first, *other_session));
  EXPECT_EQ(ReadBack(lost, 1, *fresh, data.size()).value_or(""), data);
  EXPECT_EQ(ReadBack(lost, 1, *first, data.size()).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_TRUE(lost.ready());
  EXPECT_EQ(FaultInjector::Get().created(0), 2);
  EXPECT_EQ(metrics.DeviceResets(0).Value(), 1);

  // The other device never noticed.
  EXPECT_EQ(ReadBack(bystander, 1, *elsewhere, data.size()).value_or(""), data);
  EXPECT_TRUE(SynchronizeAll(bystander, 1).ok());
  EXPECT_EQ(FaultInjector::Get().created(1), 1);
  EXPECT_EQ(metrics.DeviceResets(1).Value(), 0);
}

TEST_F(DeviceLossTest, ClosingASessionForgetsItsLostHandles) {
  Metrics metrics(1);
  DeviceWorker worker({.ordinal = 0}, LosableFactory(0), &metrics);
  absl::StatusOr<BufferId> id = AllocateAndWrite(worker, 1, "payload");
  ASSERT_TRUE(id.ok());
  FaultInjector::Get().Fail(0, absl::UnavailableError("ECC error (injected)"));
  EXPECT_EQ(ReadBack(worker, 1, *id, 7).status().code(), absl::StatusCode::kUnavailable);
  OnDevice<uint64_t>(worker, 1, [](CommandInterface& command) { return command.CloseSession(1); });
  EXPECT_EQ(ReadBack(worker, 1, *id, 7).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(SynchronizeAll(worker, 1).ok());
}

TEST_F(DeviceLossTest, DeviceThatDoesNotComeBackAnswersUnavailable) {
  Metrics metrics(1);
  DeviceWorker worker({.ordinal = 0}, LosableFactory(0, /*fail_from=*/2), &metrics);
  absl::StatusOr<BufferId> id = AllocateAndWrite(worker, 1, "payload");
  ASSERT_TRUE(id.ok());
  FaultInjector::Get().Fail(0, absl::UnavailableError("fell off the bus (injected)"));
  absl::Status synced = SynchronizeAll(worker, 1);
  EXPECT_EQ(synced.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(synced.message().find("is down"), std::string::npos) << synced;
  EXPECT_NE(synced.message().find("fell off the bus"), std::string::npos) << synced;
  EXPECT_FALSE(worker.ready());
  EXPECT_EQ(worker.Submit(1, [](CommandInterface&) {}).code(), absl::StatusCode::kUnavailable);
}

TEST_F(DeviceLossTest, WorkQueuedBeforeAFailedStartIsAnswered) {
  std::promise<void> start;
  std::shared_future<void> started = start.get_future().share();
  Metrics metrics(1);
  DeviceWorker worker(
      {.ordinal = 0},
      [started]() -> absl::StatusOr<std::shared_ptr<CommandInterface>> {
        started.wait();
        return absl::InternalError("no such device");
      },
      &metrics);
  std::promise<absl::Status> answer;
  ASSERT_TRUE(worker.Submit(1, [&answer](CommandInterface& command) {
    answer.set_value(command.Allocate(1, 64).status());
  }).ok());
  start.set_value();
  absl::Status status = answer.get_future().get();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(status.message().find("no such device"), std::string::npos) << status;
}

}  // namespace
}  // namespace gpucmd
