#ifndef GPUCMDD_DRIVER_CPU_CPU_DEVICES_H_
#define GPUCMDD_DRIVER_CPU_CPU_DEVICES_H_

// The devices the CPU driver models: `count` devices of `memory_bytes` each, described
// like a GPU (1024 threads per block, 48 KiB of static shared memory per block).

#include <cstdint>
#include <vector>

#include "driver/device_description.h"

namespace gpucmd {

inline constexpr uint32_t kCpuMaxThreadsPerBlock = 1024;
inline constexpr uint32_t kCpuMaxSharedMemoryPerBlockBytes = 48 << 10;

std::vector<DeviceDescription> DescribeCpuDevices(int count, uint64_t memory_bytes);

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_CPU_CPU_DEVICES_H_
