// Runs the driver conformance suite on the real HipDriver code over the libamdhip64.so.5
// test double (fake_libamdhip64.cc, host memory): copies in both directions, pitched 2D
// with padding, relocation copies, events, out-of-memory and a sticky error go through
// the exact runtime calls and parameters the HIP driver makes; and the double-only checks
// of driver/testing/gpu_double_tests.h (memory pools, event reuse).

#include "driver/testing/driver_conformance.h"
#include "driver/testing/gpu_double_tests.h"
#include "driver/hip/hip_driver.h"

namespace gpucmd {

template <>
struct ConformanceBackend<HipDriver> {
  static const FakeGpuControl& Fake() {
    return RequireFakeGpu("driver/testing/hip/libamdhip64.so.5");
  }
  static absl::StatusOr<std::unique_ptr<HipBackend>> Create(uint64_t) {
    absl::StatusOr<std::unique_ptr<HipBackend>> backend =
        HipBackend::Create({.ordinal = 0, .stream_count = 2});
    // The double always has a device: failing here must fail the suite, not skip it.
    if (!backend.ok()) return absl::InternalError(backend.status().ToString());
    return backend;
  }
  static int ContextResets() { return Fake().context_resets(0); }
  static void InjectStickyError() { Fake().inject_sticky_error(0, hipErrorIllegalAddress); }
};

INSTANTIATE_TYPED_TEST_SUITE_P(FakeHip, DriverConformanceTest, HipDriver);
INSTANTIATE_TYPED_TEST_SUITE_P(FakeHip, GpuDoubleTest, HipDriver);

namespace {

TEST(HipDevicesTest, DescribesTheDoublesDevice) {
  absl::StatusOr<std::vector<DeviceDescription>> devices = DescribeHipDevices();
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ((*devices)[0].architecture, "gfx90a");
  EXPECT_EQ((*devices)[0].name, "Fake HIP device (test double)");
}

}  // namespace
}  // namespace gpucmd
