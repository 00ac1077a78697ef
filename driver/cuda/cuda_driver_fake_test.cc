// Runs the driver conformance suite on the real CudaDriver code over the fake driver
// library (fake_libcuda.cc, a test double of libcuda.so.1 on host memory): copies in both
// directions, pitched 2D with padding, relocation copies, events and out-of-memory go
// through the exact driver API calls and parameters the CUDA driver makes; and the
// double-only checks of driver/testing/gpu_double_tests.h (memory pools, event reuse).

#include "driver/cuda/cuda_driver.h"
#include "driver/testing/gpu_double_tests.h"
#include "driver/testing/driver_conformance.h"

namespace gpucmd {

template <>
struct ConformanceBackend<CudaDriver> {
  static const FakeGpuControl& Fake() {
    return RequireFakeGpu("driver/testing/cuda/libcuda.so.1");
  }
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(uint64_t) {
    Fake();  // loaded before the driver looks for libcuda.so.1
    absl::StatusOr<std::unique_ptr<CudaBackend>> backend =
        CudaBackend::Create({.ordinal = 0, .stream_count = 2});
    // The double always has a device: failing here must fail the suite, not skip it.
    if (!backend.ok()) return absl::InternalError(backend.status().ToString());
    return backend;
  }
  static int ContextResets() { return Fake().context_resets(0); }
  static void InjectStickyError() { Fake().inject_sticky_error(0, CUDA_ERROR_ILLEGAL_ADDRESS); }
};

INSTANTIATE_TYPED_TEST_SUITE_P(FakeCuda, DriverConformanceTest, CudaDriver);

INSTANTIATE_TYPED_TEST_SUITE_P(FakeCuda, GpuDoubleTest, CudaDriver);

}  // namespace gpucmd
