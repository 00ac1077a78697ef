// Runs the driver conformance suite on the CPU driver.

#include "driver/cpu/cpu_driver.h"
#include "driver/testing/driver_conformance.h"

namespace gpucmd {

template <>
struct ConformanceBackend<CpuDriver> {
  static absl::StatusOr<std::unique_ptr<CpuBackend>> Create(uint64_t capacity_bytes) {
    return CpuBackend::Create({.ordinal = 0, .capacity_bytes = capacity_bytes, .stream_count = 2});
  }
};

INSTANTIATE_TYPED_TEST_SUITE_P(Cpu, DriverConformanceTest, CpuDriver);

}  // namespace gpucmd
