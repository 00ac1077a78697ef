#ifndef GPUCMDD_DRIVER_TENSOR_MAP_H_
#define GPUCMDD_DRIVER_TENSOR_MAP_H_

// A tiled tensor map (CUDA's TMA descriptor) over a buffer, as a launch asks for it, and
// the checks cuTensorMapEncodeTiled would make, done before anything is enqueued so a
// client gets a clear INVALID_ARGUMENT naming the rule instead of a driver error code.

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "driver/types.h"

namespace gpucmd {

enum class TensorDataType { kU8, kU16, kU32, kI32, kU64, kI64, kF16, kF32, kF64, kBF16 };
enum class TensorSwizzle { kNone, k32B, k64B, k128B };

uint32_t ElementBytes(TensorDataType type);

struct TensorMapSpec {
  TensorDataType data_type = TensorDataType::kF32;
  std::vector<uint64_t> global_dims;           // innermost first; rank = size, 1..5
  std::vector<uint64_t> global_strides_bytes;  // of dimensions 1..rank-1
  std::vector<uint32_t> box_dims;              // rank entries, each 1..256
  std::vector<uint32_t> element_strides;       // rank entries, each 1..8
  TensorSwizzle swizzle = TensorSwizzle::kNone;
};

// A tensor map whose buffer is resolved: the argument slot it fills and where its data is.
struct ResolvedTensorMap {
  size_t argument = 0;
  DeviceAddress address = 0;
  TensorMapSpec spec;
};

// Checks `spec` over `available_bytes` of device memory at `address`: rank, dimensions,
// strides (multiples of 16, covering the dimension below), box sizes, element strides,
// swizzle span, alignment, and that the tensor lies inside the memory.
absl::Status ValidateTensorMap(const TensorMapSpec& spec, DeviceAddress address,
                               uint64_t available_bytes);

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_TENSOR_MAP_H_
