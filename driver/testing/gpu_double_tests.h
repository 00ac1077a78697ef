#ifndef GPUCMDD_DRIVER_TESTING_GPU_DOUBLE_TESTS_H_
#define GPUCMDD_DRIVER_TESTING_GPU_DOUBLE_TESTS_H_

// Typed tests of a GPU driver over its test double: what the double lets a test see and
// real hardware does not — which allocator pages come from, whether events are reused,
// whether a wait for the device sleeps, and when events call back. A leaf runs them
// beside the conformance suite, with a ConformanceBackend<D> that also has
// `static const FakeGpuControl& Fake()`:
//
//   INSTANTIATE_TYPED_TEST_SUITE_P(FakeCuda, GpuDoubleTest, CudaDriver);
//
// The backend must expose its event pool (`event_pool()`).

#include <time.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "base/thread_name.h"
#include "driver/testing/driver_conformance.h"
#include "driver/testing/fake_gpu_control.h"
#include "gtest/gtest.h"

namespace gpucmd {

// The double at `runfile` (in the test's data), loaded once; ends the test binary when
// it cannot be loaded.
inline const FakeGpuControl& RequireFakeGpu(const std::string& runfile) {
  absl::StatusOr<const FakeGpuControl*> control = LoadFakeGpu(runfile);
  if (!control.ok()) {
    ADD_FAILURE() << control.status();
    std::abort();
  }
  return **control;
}

template <typename D>
class GpuDoubleTest : public ::testing::Test {
 protected:
  using Backend = ConformanceBackend<D>;

  static const FakeGpuControl& Fake() { return Backend::Fake(); }

  static std::unique_ptr<typename D::Backend> MakeBackend(bool memory_pools) {
    Fake().set_memory_pools(memory_pools ? 1 : 0);
    absl::StatusOr<std::unique_ptr<typename D::Backend>> backend = Backend::Create(0);
    Fake().set_memory_pools(1);
    EXPECT_TRUE(backend.ok()) << backend.status();
    return backend.ok() ? *std::move(backend) : nullptr;
  }

  // How many stream-ordered allocations one page allocation made.
  static int AsyncAllocationsOfOnePage(typename D::Backend& backend) {
    const int before = Fake().async_allocations();
    absl::StatusOr<DeviceResource> page = backend.AllocateDevice(1 << 20);
    EXPECT_TRUE(page.ok()) << page.status();
    if (page.ok()) backend.FreeDevice(*page);
    return Fake().async_allocations() - before;
  }
};

TYPED_TEST_SUITE_P(GpuDoubleTest);

TYPED_TEST_P(GpuDoubleTest, PagesComeFromTheMemoryPoolWhereTheDeviceHasOne) {
  auto backend = this->MakeBackend(/*memory_pools=*/true);
  ASSERT_NE(backend, nullptr);
  EXPECT_EQ(this->AsyncAllocationsOfOnePage(*backend), 1);
}

TYPED_TEST_P(GpuDoubleTest, PagesFallBackToPlainAllocationWithoutMemoryPools) {
  auto backend = this->MakeBackend(/*memory_pools=*/false);
  ASSERT_NE(backend, nullptr);
  EXPECT_EQ(this->AsyncAllocationsOfOnePage(*backend), 0);
}

TYPED_TEST_P(GpuDoubleTest, EventsAreReusedOnceTheirLastCopyIsGone) {
  auto backend = this->MakeBackend(/*memory_pools=*/true);
  ASSERT_NE(backend, nullptr);
  auto& stream = backend->stream(0);
  {
    auto first = stream.RecordEvent();
    auto second = stream.RecordEvent();
    auto copy = first;
    EXPECT_TRUE(copy.Wait().ok());
  }
  EXPECT_EQ(backend->event_pool().idle(), 2u);
  const int created = this->Fake().events_created();
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(stream.RecordEvent().IsComplete());
  EXPECT_EQ(this->Fake().events_created(), created) << "every event came from the pool";
}

// The CPU time the calling thread used so far.
inline double ThreadCpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// The double busy-waits for an event made without blocking waits, as the GPU runtimes
// do (Note [Waiting for the GPU without spinning]).
TYPED_TEST_P(GpuDoubleTest, AWaitForTheDeviceSleepsInsteadOfSpinning) {
  auto backend = this->MakeBackend(/*memory_pools=*/true);
  ASSERT_NE(backend, nullptr);
  this->Fake().set_event_latency_us(400'000);
  auto event = backend->stream(0).RecordEvent();
  this->Fake().set_event_latency_us(0);
  ASSERT_FALSE(event.IsComplete());
  const int sleeping_waits = this->Fake().sleeping_event_waits();
  const double cpu_before = ThreadCpuSeconds();
  EXPECT_TRUE(event.Wait().ok());
  EXPECT_LT(ThreadCpuSeconds() - cpu_before, 0.1) << "the wait spun through the 400 ms";
  EXPECT_TRUE(event.IsComplete()) << "Wait returned before the device got there";
  EXPECT_EQ(this->Fake().sleeping_event_waits(), sleeping_waits + 1);
}

TYPED_TEST_P(GpuDoubleTest, AWaitThatEndsWithinThePollingWindowDoesNotSleep) {
  auto backend = this->MakeBackend(/*memory_pools=*/true);
  ASSERT_NE(backend, nullptr);
  using Event = typename TypeParam::Backend::Stream::Event;
  static_assert(Event::kPollBeforeSleeping > std::chrono::microseconds(20));
  this->Fake().set_event_latency_us(20);
  auto event = backend->stream(0).RecordEvent();
  this->Fake().set_event_latency_us(0);
  const int sleeping_waits = this->Fake().sleeping_event_waits();
  EXPECT_TRUE(event.Wait().ok());
  EXPECT_TRUE(event.IsComplete());
  EXPECT_EQ(this->Fake().sleeping_event_waits(), sleeping_waits)
      << "the event completed within the polling window; no sleep was needed";
}

// Note [Completions called back on a GPU]: an event's callback runs on the backend's
// notice thread once the event completed, with no thread of the caller's waiting, and it
// waits for its own event only: a callback on another stream, whose event completes
// sooner, runs first.
TYPED_TEST_P(GpuDoubleTest, ACallbackRunsOnceItsOwnEventCompletedWithoutAThreadWaiting) {
  auto backend = this->MakeBackend(/*memory_pools=*/true);
  ASSERT_NE(backend, nullptr);
  this->Fake().set_event_latency_us(600'000);
  auto slow = backend->stream(0).RecordEvent();
  this->Fake().set_event_latency_us(100'000);
  auto fast = backend->stream(1).RecordEvent();
  this->Fake().set_event_latency_us(0);
  struct Called {
    std::string thread;
    bool complete = false;
  };
  Mutex mutex;
  std::vector<std::string> order;
  std::promise<Called> slow_called, fast_called;
  const int sleeping_waits = this->Fake().sleeping_event_waits();
  auto hook = [&](const auto& event, const std::string& name, std::promise<Called>& called) {
    event.OnComplete([&, name] {
      {
        MutexLock lock(&mutex);
        order.push_back(name);
      }
      called.set_value({NameOfThisThread(), event.IsComplete()});
    });
  };
  hook(slow, "slow", slow_called);
  hook(fast, "fast", fast_called);
  for (std::promise<Called>* called : {&fast_called, &slow_called}) {
    const Called result = called->get_future().get();
    EXPECT_EQ(result.thread, "gpucmd-notices0");
    EXPECT_TRUE(result.complete) << "called back before the event completed";
  }
  MutexLock lock(&mutex);
  EXPECT_EQ(order, (std::vector<std::string>{"fast", "slow"}));
  EXPECT_EQ(this->Fake().sleeping_event_waits(), sleeping_waits) << "a thread waited";
}

TYPED_TEST_P(GpuDoubleTest, ACompleteEventCallsBackAtOnceOnTheCallingThread) {
  auto backend = this->MakeBackend(/*memory_pools=*/true);
  ASSERT_NE(backend, nullptr);
  auto event = backend->stream(0).RecordEvent();
  ASSERT_TRUE(event.IsComplete());
  std::thread::id called_on;
  event.OnComplete([&called_on] { called_on = std::this_thread::get_id(); });
  EXPECT_EQ(called_on, std::this_thread::get_id());
}

// A device error does not lose the callback: the runtime still calls back, and the wait
// it is for reports the error.
TYPED_TEST_P(GpuDoubleTest, ACallbackRunsAfterADeviceErrorAndItsWaitReportsIt) {
  auto backend = this->MakeBackend(/*memory_pools=*/true);
  ASSERT_NE(backend, nullptr);
  this->Fake().set_event_latency_us(200'000);
  auto event = backend->stream(0).RecordEvent();
  this->Fake().set_event_latency_us(0);
  std::promise<absl::Status> waited;
  event.OnComplete([&] { waited.set_value(event.Wait()); });
  ConformanceBackend<TypeParam>::InjectStickyError();
  EXPECT_EQ(waited.get_future().get().code(), absl::StatusCode::kUnavailable);
  // The backend resets the lost context as it goes, for the tests after this one.
  EXPECT_FALSE(TypeParam::DeviceHealth(backend->context()).ok());
}

REGISTER_TYPED_TEST_SUITE_P(GpuDoubleTest, PagesComeFromTheMemoryPoolWhereTheDeviceHasOne,
                            PagesFallBackToPlainAllocationWithoutMemoryPools,
                            EventsAreReusedOnceTheirLastCopyIsGone,
                            AWaitForTheDeviceSleepsInsteadOfSpinning,
                            AWaitThatEndsWithinThePollingWindowDoesNotSleep,
                            ACallbackRunsOnceItsOwnEventCompletedWithoutAThreadWaiting,
                            ACompleteEventCallsBackAtOnceOnTheCallingThread,
                            ACallbackRunsAfterADeviceErrorAndItsWaitReportsIt);

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_TESTING_GPU_DOUBLE_TESTS_H_
