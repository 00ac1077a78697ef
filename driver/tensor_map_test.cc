#include "driver/tensor_map.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

using ::testing::HasSubstr;

// A 64x32 float matrix with rows padded to 512 bytes, loaded in 32x16 tiles.
TensorMapSpec Matrix() {
  return {.data_type = TensorDataType::kF32,
          .global_dims = {64, 32},
          .global_strides_bytes = {512},
          .box_dims = {32, 16},
          .element_strides = {1, 1},
          .swizzle = TensorSwizzle::k128B};
}

std::string Check(const TensorMapSpec& spec, DeviceAddress address = 0x1000,
                  uint64_t bytes = 512 * 32) {
  return std::string(ValidateTensorMap(spec, address, bytes).message());
}

TEST(TensorMapTest, AValidMatrix) {
  EXPECT_TRUE(ValidateTensorMap(Matrix(), 0x1000, 512 * 32).ok());
  EXPECT_TRUE(ValidateTensorMap(Matrix(), 0x1000, 511 * 32 + 256).ok()) << "last row unpadded";
}

TEST(TensorMapTest, EachRuleIsNamed) {
  TensorMapSpec spec = Matrix();
  spec.global_dims = {1, 2, 3, 4, 5, 6};
  EXPECT_THAT(Check(spec), HasSubstr("rank 6"));

  spec = Matrix();
  spec.global_strides_bytes = {};
  EXPECT_THAT(Check(spec), HasSubstr("needs 1 global strides"));

  EXPECT_THAT(Check(Matrix(), 0x1004), HasSubstr("not 16-byte aligned"));

  spec = Matrix();
  spec.global_strides_bytes = {520};
  EXPECT_THAT(Check(spec), HasSubstr("multiple of 16"));

  spec = Matrix();
  spec.global_strides_bytes = {128};
  EXPECT_THAT(Check(spec), HasSubstr("smaller than the 256 bytes"));

  spec = Matrix();
  spec.box_dims = {32, 300};
  EXPECT_THAT(Check(spec), HasSubstr("box dimension 1"));

  spec = Matrix();
  spec.element_strides = {1, 9};
  EXPECT_THAT(Check(spec), HasSubstr("element stride 1"));

  spec = Matrix();
  spec.box_dims = {2, 16};
  EXPECT_THAT(Check(spec), HasSubstr("multiple of 16"));

  spec = Matrix();
  spec.swizzle = TensorSwizzle::k64B;
  EXPECT_THAT(Check(spec), HasSubstr("64-byte swizzle"));

  EXPECT_THAT(Check(Matrix(), 0x1000, 4096), HasSubstr("spans 16128 bytes"));
}

}  // namespace
}  // namespace gpucmd
