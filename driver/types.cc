#include "driver/types.h"

#include "absl/strings/str_cat.h"

namespace gpucmd {

absl::Status CheckLayoutBounds(const CopyLayout& layout, uint64_t resource_size) {
  if (layout.height > 1 && layout.stride_bytes < layout.width_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("stride_bytes ", layout.stride_bytes,
                                                   " is smaller than width_bytes ",
                                                   layout.width_bytes));
  }
  if (layout.height > 1 && layout.stride_bytes > (UINT64_MAX - layout.width_bytes) /
                                                     (layout.height - 1)) {
    return absl::InvalidArgumentError("layout extent overflows 64 bits");
  }
  uint64_t extent = layout.device_extent();
  if (layout.offset_bytes > resource_size || extent > resource_size - layout.offset_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("copy of ", extent, " bytes at offset ", layout.offset_bytes,
                     " is out of bounds of a ", resource_size, "-byte buffer"));
  }
  return absl::OkStatus();
}

absl::Status CheckFill(FillPattern pattern, uint64_t offset_bytes, uint64_t size_bytes,
                       uint64_t resource_size) {
  const uint32_t element = pattern.element_bytes;
  if (element != 1 && element != 2 && element != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("a fill's elements are 1, 2 or 4 bytes, not ", element));
  }
  if (element < 4 && pattern.value >> (8 * element) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("fill value ", pattern.value, " does not fit in ", element, " bytes"));
  }
  if (offset_bytes % element != 0 || size_bytes % element != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a fill of ", element, "-byte elements starts and ends on whole elements: offset ",
        offset_bytes, " and size ", size_bytes, " are not multiples of ", element));
  }
  if (offset_bytes > resource_size || size_bytes > resource_size - offset_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("fill of ", size_bytes, " bytes at offset ",
                                                   offset_bytes, " is out of bounds of a ",
                                                   resource_size, "-byte buffer"));
  }
  return absl::OkStatus();
}

}  // namespace gpucmd
