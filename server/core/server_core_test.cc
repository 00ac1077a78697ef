#include "server/core/server_core.h"

#include <chrono>
#include <future>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "server/command/fake_command.h"

namespace gpucmd {
namespace {

using Clock = std::chrono::steady_clock;

std::unique_ptr<ServerCore> CoreOfOneFakeDevice(Metrics& metrics) {
  std::vector<std::unique_ptr<DeviceWorker>> workers;
  workers.push_back(std::make_unique<DeviceWorker>(
      DeviceWorker::Options{.ordinal = 0},
      []() -> absl::StatusOr<std::shared_ptr<CommandInterface>> {
        return std::make_shared<FakeCommand>(1 << 20);
      },
      &metrics));
  return std::make_unique<ServerCore>(std::move(workers), ServerCore::Options());
}

TEST(ServerCoreTest, StopByReturnsOnceTheDevicesStopped) {
  Metrics metrics(1);
  std::unique_ptr<ServerCore> core = CoreOfOneFakeDevice(metrics);
  core->worker(0).AwaitInitialised();
  EXPECT_TRUE(core->StopBy(Clock::now() + std::chrono::seconds(30)));
}

// A device busy in a call that cannot be stopped (a GPU kernel's synchronisation, here a
// task that waits) does not hold StopBy past its deadline; destruction waits for it.
TEST(ServerCoreTest, StopByGivesUpOnADeviceThatStaysBusy) {
  Metrics metrics(1);
  std::unique_ptr<ServerCore> core = CoreOfOneFakeDevice(metrics);
  std::promise<void> started, release;
  std::shared_future<void> released = release.get_future().share();
  ASSERT_TRUE(core->worker(0)
                  .Submit(1,
                          [&started, released](CommandInterface&) {
                            started.set_value();
                            released.wait();
                          })
                  .ok());
  started.get_future().wait();
  const auto deadline = Clock::now() + std::chrono::milliseconds(200);
  EXPECT_FALSE(core->StopBy(deadline));
  EXPECT_GE(Clock::now(), deadline);
  release.set_value();
  core.reset();  // waits for the stop that outlived its deadline
}

}  // namespace
}  // namespace gpucmd
