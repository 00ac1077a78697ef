#include "driver/tensor_map.h"

#include "absl/strings/str_cat.h"

namespace gpucmd {
namespace {

constexpr uint64_t kMaxStrideBytes = uint64_t{1} << 40;
constexpr uint64_t kMaxDimension = uint64_t{1} << 32;

uint32_t SwizzleSpanBytes(TensorSwizzle swizzle) {
  switch (swizzle) {
    case TensorSwizzle::kNone:
      return 0;
    case TensorSwizzle::k32B:
      return 32;
    case TensorSwizzle::k64B:
      return 64;
    case TensorSwizzle::k128B:
      return 128;
  }
  return 0;
}

absl::Status Invalid(const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat("tensor map: ", message));
}

}  // namespace

uint32_t ElementBytes(TensorDataType type) {
  switch (type) {
    case TensorDataType::kU8:
      return 1;
    case TensorDataType::kU16:
    case TensorDataType::kF16:
    case TensorDataType::kBF16:
      return 2;
    case TensorDataType::kU32:
    case TensorDataType::kI32:
    case TensorDataType::kF32:
      return 4;
    case TensorDataType::kU64:
    case TensorDataType::kI64:
    case TensorDataType::kF64:
      return 8;
  }
  return 0;
}

absl::Status ValidateTensorMap(const TensorMapSpec& spec, DeviceAddress address,
                               uint64_t available_bytes) {
  const size_t rank = spec.global_dims.size();
  if (rank < 1 || rank > 5) return Invalid(absl::StrCat("rank ", rank, " is outside 1..5"));
  if (spec.global_strides_bytes.size() != rank - 1) {
    return Invalid(absl::StrCat("rank ", rank, " needs ", rank - 1, " global strides, got ",
                                spec.global_strides_bytes.size()));
  }
  if (spec.box_dims.size() != rank || spec.element_strides.size() != rank) {
    return Invalid(absl::StrCat("rank ", rank, " needs ", rank,
                                " box dimensions and element strides"));
  }
  if (address % 16 != 0) {
    return Invalid(absl::StrCat("global address ", address, " is not 16-byte aligned"));
  }
  const uint64_t element = ElementBytes(spec.data_type);
  for (size_t i = 0; i < rank; ++i) {
    if (spec.global_dims[i] == 0 || spec.global_dims[i] > kMaxDimension) {
      return Invalid(absl::StrCat("global dimension ", i, " (", spec.global_dims[i],
                                  ") is outside 1..2^32"));
    }
    if (spec.box_dims[i] == 0 || spec.box_dims[i] > 256) {
      return Invalid(absl::StrCat("box dimension ", i, " (", spec.box_dims[i],
                                  ") is outside 1..256"));
    }
    if (spec.element_strides[i] == 0 || spec.element_strides[i] > 8) {
      return Invalid(absl::StrCat("element stride ", i, " (", spec.element_strides[i],
                                  ") is outside 1..8"));
    }
  }
  // Each stride must cover the dimension below it; the tensor's last byte must fit.
  uint64_t extent = spec.global_dims[0] * element;
  for (size_t i = 0; i + 1 < rank; ++i) {
    uint64_t stride = spec.global_strides_bytes[i];
    if (stride % 16 != 0 || stride >= kMaxStrideBytes) {
      return Invalid(absl::StrCat("global stride ", i, " (", stride,
                                  " bytes) must be a multiple of 16 below 2^40"));
    }
    if (stride < extent) {
      return Invalid(absl::StrCat("global stride ", i, " (", stride,
                                  " bytes) is smaller than the ", extent,
                                  " bytes of the dimension below"));
    }
    extent = (spec.global_dims[i + 1] - 1) * stride + extent;
  }
  if (extent > available_bytes) {
    return Invalid(absl::StrCat("the tensor spans ", extent, " bytes but its buffer has ",
                                available_bytes, " from the argument's offset"));
  }
  const uint64_t inner_box_bytes = spec.box_dims[0] * element;
  if (inner_box_bytes % 16 != 0) {
    return Invalid(absl::StrCat("the innermost box dimension spans ", inner_box_bytes,
                                " bytes; it must be a multiple of 16"));
  }
  if (uint32_t span = SwizzleSpanBytes(spec.swizzle); span != 0 && inner_box_bytes > span) {
    return Invalid(absl::StrCat("the innermost box dimension spans ", inner_box_bytes,
                                " bytes, more than the ", span, "-byte swizzle"));
  }
  return absl::OkStatus();
}

}  // namespace gpucmd
