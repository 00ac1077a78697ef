#ifndef GPUCMDD_DRIVER_DEVICE_DESCRIPTION_H_
#define GPUCMDD_DRIVER_DEVICE_DESCRIPTION_H_

// What a driver reports about one of its devices. A plain value type.

#include <cstdint>
#include <string>

namespace gpucmd {

enum class DriverKind { kCpu, kCuda, kHip };

struct DeviceDescription {
  int ordinal = 0;
  std::string name;
  DriverKind driver = DriverKind::kCpu;
  std::string architecture;  // "sm_90", "gfx90a", "x86_64"
  uint64_t memory_capacity_bytes = 0;
  uint32_t max_threads_per_block = 0;
  uint32_t max_shared_memory_per_block_bytes = 0;
  // The largest grid, per dimension (CUDA: x up to 2^31-1, y and z up to 65535).
  uint32_t max_grid_x = 2147483647;
  uint32_t max_grid_y = 65535;
  uint32_t max_grid_z = 65535;
  // Whether launches may pass tensor-map arguments (only the CUDA driver encodes them).
  bool takes_tensor_maps = false;
};

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_DEVICE_DESCRIPTION_H_
