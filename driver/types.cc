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

}  // namespace gpucmd
