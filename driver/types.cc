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

std::string DescribeRows(const CopyLayout& layout) {
  if (layout.is_contiguous()) {
    return absl::StrCat("[", layout.offset_bytes, ", +", layout.host_bytes(), ")");
  }
  return absl::StrCat(layout.height, " rows of ", layout.width_bytes, " bytes, ",
                      layout.stride_bytes, " apart from ", layout.offset_bytes);
}

bool CopyRowsOverlap(const DeviceCopyLayout& copy) {
  if (copy.size_bytes() == 0) return false;
  const CopyLayout source = copy.source();
  const CopyLayout target = copy.target();
  const CopyLayout& first = source.offset_bytes <= target.offset_bytes ? source : target;
  const CopyLayout& second = &first == &source ? target : source;
  const uint64_t distance = second.offset_bytes - first.offset_bytes;
  if (distance >= first.device_extent()) return false;  // disjoint spans
  if (first.is_contiguous() && second.is_contiguous()) return true;
  if (first.stride_bytes != second.stride_bytes) return true;
  // Rows a stride apart on both sides: row i of `first` and row j of `second` share a
  // byte when |distance + (j - i) * stride| < width, which only j <= i can meet (the
  // stride is at least the width). The rows nearest `distance` decide.
  const uint64_t stride = first.stride_bytes;
  const uint64_t width = first.width_bytes;
  const uint64_t below = distance / stride;  // < height: the spans overlap
  return distance - below * stride < width ||
         (below + 1 < first.height && (below + 1) * stride - distance < width);
}

}  // namespace gpucmd
