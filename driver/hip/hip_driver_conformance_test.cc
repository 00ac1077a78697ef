// Runs the driver conformance suite on the HIP driver: on a machine with an AMD GPU it
// checks the real device; elsewhere the suite skips, saying why.

#include "driver/hip/hip_driver.h"
#include "driver/testing/driver_conformance.h"

namespace gpucmd {

template <>
struct ConformanceBackend<HipDriver> {
  static absl::StatusOr<std::unique_ptr<HipBackend>> Create(uint64_t) {
    return HipBackend::Create({.ordinal = 0, .stream_count = 2});
  }
};

INSTANTIATE_TYPED_TEST_SUITE_P(Hip, DriverConformanceTest, HipDriver);

}  // namespace gpucmd
