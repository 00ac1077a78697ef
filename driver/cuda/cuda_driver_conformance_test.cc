// Runs the driver conformance suite on the CUDA driver: on a machine with an NVIDIA GPU
// it checks the real device; elsewhere the suite skips, saying why.

#include "driver/cuda/cuda_driver.h"
#include "driver/testing/driver_conformance.h"

namespace gpucmd {

template <>
struct ConformanceBackend<CudaDriver> {
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(uint64_t) {
    return CudaBackend::Create({.ordinal = 0, .stream_count = 2});
  }
};

INSTANTIATE_TYPED_TEST_SUITE_P(Cuda, DriverConformanceTest, CudaDriver);

}  // namespace gpucmd
