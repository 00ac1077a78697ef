#include "driver/cpu/cpu_devices.h"

#include <string>

namespace gpucmd {

std::vector<DeviceDescription> DescribeCpuDevices(int count, uint64_t memory_bytes) {
  std::vector<DeviceDescription> devices;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    devices.push_back(DeviceDescription{
        .ordinal = ordinal,
        .name = "gpucmd CPU device " + std::to_string(ordinal),
        .driver = DriverKind::kCpu,
        .architecture = "x86_64",
        .memory_capacity_bytes = memory_bytes,
        .max_threads_per_block = kCpuMaxThreadsPerBlock,
        .max_shared_memory_per_block_bytes = kCpuMaxSharedMemoryPerBlockBytes,
    });
  }
  return devices;
}

}  // namespace gpucmd
