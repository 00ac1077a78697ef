// Runs the driver conformance suite on the real CudaDriver code over the fake driver
// library (fake_libcuda.cc, a test double of libcuda.so.1 on host memory): copies in both
// directions, pitched 2D with padding, relocation copies, events and out-of-memory go
// through the exact driver API calls and parameters the CUDA driver makes. Also checks
// which allocator pages come from and event reuse.

#include "driver/cuda/cuda_driver.h"
#include "driver/fake/fake_gpu_control.h"
#include "driver/driver_conformance.h"

namespace gpucmd {

const FakeGpuControl& Fake() {
  absl::StatusOr<const FakeGpuControl*> control = LoadFakeGpu("driver/cuda/fake/libcuda.so.1");
  if (!control.ok()) {
    ADD_FAILURE() << control.status();
    std::abort();
  }
  return **control;
}

template <>
struct ConformanceBackend<CudaDriver> {
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(uint64_t) {
    Fake().set_memory_pools(1);
    return CudaBackend::Create({.ordinal = 0, .stream_count = 2});
  }
  static int ContextResets() { return Fake().context_resets(0); }
  static void InjectStickyError() { Fake().inject_sticky_error(0, CUDA_ERROR_ILLEGAL_ADDRESS); }
};

INSTANTIATE_TYPED_TEST_SUITE_P(FakeCuda, DriverConformanceTest, CudaDriver);

namespace {

TEST(CudaBackendTest, PagesComeFromTheMemoryPoolWhereTheDeviceHasOne) {
  Fake().set_memory_pools(1);
  absl::StatusOr<std::unique_ptr<CudaBackend>> backend = CudaBackend::Create({.ordinal = 0});
  ASSERT_TRUE(backend.ok()) << backend.status();
  int before = Fake().async_allocations();
  absl::StatusOr<DeviceResource> page = (*backend)->AllocateDevice(1 << 20);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(Fake().async_allocations(), before + 1);
  (*backend)->FreeDevice(*page);
}

TEST(CudaBackendTest, PagesFallBackToCuMemAllocWithoutMemoryPools) {
  Fake().set_memory_pools(0);
  absl::StatusOr<std::unique_ptr<CudaBackend>> backend = CudaBackend::Create({.ordinal = 0});
  Fake().set_memory_pools(1);
  ASSERT_TRUE(backend.ok()) << backend.status();
  int before = Fake().async_allocations();
  absl::StatusOr<DeviceResource> page = (*backend)->AllocateDevice(1 << 20);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(Fake().async_allocations(), before);
  (*backend)->FreeDevice(*page);
}

TEST(CudaBackendTest, EventsAreReusedOnceTheirLastCopyIsGone) {
  absl::StatusOr<std::unique_ptr<CudaBackend>> backend = CudaBackend::Create({.ordinal = 0});
  ASSERT_TRUE(backend.ok()) << backend.status();
  CudaStream& stream = (*backend)->stream(0);
  {
    CudaEvent first = stream.RecordEvent();
    CudaEvent second = stream.RecordEvent();
    CudaEvent copy = first;
    EXPECT_TRUE(copy.Wait().ok());
  }
  EXPECT_EQ((*backend)->event_pool().idle(), 2u);
  int created = Fake().events_created();
  for (int i = 0; i < 100; ++i) {
    CudaEvent event = stream.RecordEvent();
    EXPECT_TRUE(event.IsComplete());
  }
  EXPECT_EQ(Fake().events_created(), created) << "every event came from the pool";
}

TEST(CudaBackendTest, NonStickyErrorsAreNotADeviceLoss) {
  absl::StatusOr<std::unique_ptr<CudaBackend>> backend = CudaBackend::Create({.ordinal = 0});
  ASSERT_TRUE(backend.ok()) << backend.status();
  absl::StatusOr<DeviceResource> huge = (*backend)->AllocateDevice(uint64_t{1} << 40);
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(CudaDriver::DeviceHealth((*backend)->context()).ok());
}

}  // namespace
}  // namespace gpucmd
