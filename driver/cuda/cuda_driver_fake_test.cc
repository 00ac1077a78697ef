// Runs the driver conformance suite on the real CudaDriver code over the fake driver
// library (fake_libcuda.cc, a test double of libcuda.so.1 on host memory): copies in both
// directions, pitched 2D with padding, relocation copies, events and out-of-memory go
// through the exact driver API calls and parameters the CUDA driver makes.

#include <dlfcn.h>

#include "driver/cuda/cuda_driver.h"
#include "driver/driver_conformance.h"

namespace gpucmd {

// Loads the double under the name the driver asks for: once a library with the soname
// libcuda.so.1 is loaded, dlopen("libcuda.so.1") returns it.
void LoadFakeDriver() {
  static void* const kFake = [] {
    std::string path =
        std::string(getenv("TEST_SRCDIR")) + "/gpucmdd/driver/cuda/fake/libcuda.so.1";
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    EXPECT_NE(handle, nullptr) << dlerror();
    return handle;
  }();
  (void)kFake;
}

template <>
struct ConformanceBackend<CudaDriver> {
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(uint64_t) {
    LoadFakeDriver();
    return CudaBackend::Create({.ordinal = 0, .stream_count = 2});
  }
};

INSTANTIATE_TYPED_TEST_SUITE_P(FakeCuda, DriverConformanceTest, CudaDriver);

}  // namespace gpucmd
