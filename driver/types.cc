#include "driver/types.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace gpucmd {

namespace {

// CheckLayoutBounds, the message naming the operation (`what`: "copy", "fill").
absl::Status CheckLayoutOf(const char* what, const CopyLayout& layout, uint64_t resource_size) {
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
    return absl::InvalidArgumentError(absl::StrCat(what, " of ", extent, " bytes at offset ",
                                                   layout.offset_bytes, " is out of bounds of a ",
                                                   resource_size, "-byte buffer"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckLayoutBounds(const CopyLayout& layout, uint64_t resource_size) {
  return CheckLayoutOf("copy", layout, resource_size);
}

absl::Status CheckFill(FillPattern pattern, const CopyLayout& layout, uint64_t resource_size) {
  const uint32_t element = pattern.element_bytes;
  if (element != 1 && element != 2 && element != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("a fill's elements are 1, 2 or 4 bytes, not ", element));
  }
  if (element < 4 && pattern.value >> (8 * element) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("fill value ", pattern.value, " does not fit in ", element, " bytes"));
  }
  // A row's stride only matters between rows.
  const bool pitched = layout.height > 1;
  const uint64_t stride = pitched ? layout.stride_bytes : 0;
  if (layout.offset_bytes % element != 0 || layout.width_bytes % element != 0 ||
      stride % element != 0) {
    const std::string range =
        pitched ? absl::StrCat("offset ", layout.offset_bytes, ", row width ", layout.width_bytes,
                               " and stride ", stride)
                : absl::StrCat("offset ", layout.offset_bytes, " and size ", layout.width_bytes);
    return absl::InvalidArgumentError(absl::StrCat("a fill of ", element,
                                                   "-byte elements starts and ends on whole "
                                                   "elements: ",
                                                   range, " are not multiples of ", element));
  }
  return CheckLayoutOf("fill", layout, resource_size);
}

}  // namespace gpucmd
