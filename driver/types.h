#ifndef GPUCMDD_DRIVER_TYPES_H_
#define GPUCMDD_DRIVER_TYPES_H_

// Value types shared by every driver and by the server: device and host resources, copy
// layouts, kernel ids, grid dimensions.

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace gpucmd {

// A device address. Every backend's pointers fit: CUdeviceptr, hipDeviceptr_t, and the
// CPU driver's addresses inside its device-memory mapping.
using DeviceAddress = uint64_t;

// A resolved, live range of device memory.
struct DeviceResource {
  DeviceAddress address = 0;
  uint64_t size_bytes = 0;
};

// What a fill writes into every element of a range of device memory (cuMemsetD8/16/32,
// or cuMemsetD2D8/16/32 for pitched rows): the low `element_bytes` bytes of `value`,
// `element_bytes` 1, 2 or 4. The range's address and size (and a pitched range's row width
// and stride) are multiples of `element_bytes`.
struct FillPattern {
  uint32_t value = 0;
  uint32_t element_bytes = 1;
};

// A resolved, live range of pinned host memory.
struct HostResource {
  std::byte* data = nullptr;
  uint64_t size_bytes = 0;
};

// The owner of pinned host allocations (the server's pinned pool), as drivers see it.
class PinnedOwner {
 public:
  virtual ~PinnedOwner() = default;
  // Gives `allocation` back; called once per handed-out Bytes, from any thread.
  virtual void Release(uint64_t allocation) = 0;
};

// Names a pinned host allocation: its owner and its number there.
struct PinnedBinding {
  PinnedOwner* owner = nullptr;
  uint64_t allocation = 0;
};

// Where a copy lands in (or comes from) a device resource: `height` rows of
// `width_bytes`, consecutive rows `stride_bytes` apart, starting at `offset_bytes`.
// Host-side data is always packed (width_bytes * height bytes).
struct CopyLayout {
  uint64_t offset_bytes = 0;
  uint64_t width_bytes = 0;
  uint64_t height = 1;
  uint64_t stride_bytes = 0;

  static CopyLayout Contiguous(uint64_t offset, uint64_t size) {
    return {offset, size, 1, size};
  }
  static CopyLayout Pitched(uint64_t offset, uint64_t width, uint64_t height,
                            uint64_t stride) {
    return {offset, width, height, stride};
  }

  // Rows are not padded, so one linear copy moves everything.
  bool is_contiguous() const { return height <= 1 || stride_bytes == width_bytes; }
  // Bytes on the host side.
  uint64_t host_bytes() const { return width_bytes * height; }
  // Bytes of the device resource the copy spans, from offset_bytes.
  uint64_t device_extent() const {
    return height == 0 ? 0 : (height - 1) * stride_bytes + width_bytes;
  }
};

// A copy of `height` rows of `width_bytes` between two device resources: source rows
// `source_stride_bytes` apart from `source_offset_bytes`, target rows
// `target_stride_bytes` apart from `target_offset_bytes` (cudaMemcpy2D between device
// pointers).
struct DeviceCopyLayout {
  uint64_t source_offset_bytes = 0;
  uint64_t target_offset_bytes = 0;
  uint64_t width_bytes = 0;
  uint64_t height = 1;
  uint64_t source_stride_bytes = 0;
  uint64_t target_stride_bytes = 0;

  static DeviceCopyLayout Contiguous(uint64_t source_offset, uint64_t target_offset,
                                     uint64_t size) {
    return {source_offset, target_offset, size, 1, size, size};
  }

  CopyLayout source() const {
    return CopyLayout::Pitched(source_offset_bytes, width_bytes, height, source_stride_bytes);
  }
  CopyLayout target() const {
    return CopyLayout::Pitched(target_offset_bytes, width_bytes, height, target_stride_bytes);
  }
  // Both sides' rows are packed, so one linear copy moves everything.
  bool is_contiguous() const { return source().is_contiguous() && target().is_contiguous(); }
  uint64_t size_bytes() const { return width_bytes * height; }
};

// Checks `layout` against a resource of `resource_size` bytes: stride at least width,
// no 64-bit overflow, and the spanned bytes inside the resource. INVALID_ARGUMENT
// otherwise, naming the numbers.
absl::Status CheckLayoutBounds(const CopyLayout& layout, uint64_t resource_size);

// Checks a fill of `layout`'s rows with `pattern` in a resource of `resource_size` bytes
// against FillPattern's contract (the offset, the row width and, between rows, the stride
// are whole elements) and the resource's bounds, as CheckLayoutBounds. INVALID_ARGUMENT
// otherwise, naming the numbers.
absl::Status CheckFill(FillPattern pattern, const CopyLayout& layout, uint64_t resource_size);

// How messages name `layout`'s bytes: "[offset, +size)", or for padded rows "<height>
// rows of <width> bytes, <stride> apart from <offset>".
std::string DescribeRows(const CopyLayout& layout);

// Whether `copy`, with both sides in one resource, would read bytes it writes. Rows of
// equal strides are compared exactly; rows of different strides count as overlapping
// where their spans share a byte. Both sides passed CheckLayoutBounds.
bool CopyRowsOverlap(const DeviceCopyLayout& copy);

// Content hash of (source, entry point, options, driver, target architecture), hex.
struct KernelId {
  std::string hex;
  friend bool operator==(const KernelId&, const KernelId&) = default;
};

struct Dim3 {
  uint32_t x = 1;
  uint32_t y = 1;
  uint32_t z = 1;
  uint64_t volume() const { return uint64_t{x} * y * z; }
};

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_TYPES_H_
