#include "driver/kernel_signature.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

TEST(KernelSignatureTest, ClassifiesBuffersAndScalars) {
  absl::StatusOr<std::vector<KernelParam>> params = ParseKernelSignature(
      R"(
        __device__ float helper(float x) { return x; }
        // extern "C" __global__ void saxpy(int wrong);
        extern "C" __global__ void saxpy(int n, float a, const float* __restrict__ x,
                                         float *y, unsigned long long count, double d) {}
      )",
      "saxpy");
  ASSERT_TRUE(params.ok()) << params.status();
  ASSERT_EQ(params->size(), 6u);
  EXPECT_EQ((*params)[0].scalar, ScalarKind::kI32);
  EXPECT_EQ((*params)[1].scalar, ScalarKind::kF32);
  EXPECT_EQ((*params)[2].kind, ParamKind::kBuffer);
  EXPECT_EQ((*params)[3].kind, ParamKind::kBuffer);
  EXPECT_EQ((*params)[4].scalar, ScalarKind::kU64);
  EXPECT_EQ((*params)[5].scalar, ScalarKind::kF64);
  EXPECT_EQ((*params)[2].declared_type, "const float* __restrict__ x");
}

TEST(KernelSignatureTest, EmptyParameterList) {
  EXPECT_TRUE(ParseKernelSignature("extern \"C\" __global__ void k() {}", "k")->empty());
  EXPECT_TRUE(ParseKernelSignature("extern \"C\" __global__ void k(void) {}", "k")->empty());
}

TEST(KernelSignatureTest, MissingEntryAndUnsupportedTypes) {
  absl::Status missing = ParseKernelSignature("__global__ void k() {}", "k").status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(missing.message()), ::testing::HasSubstr("extern \"C\""));
  absl::Status bad =
      ParseKernelSignature("extern \"C\" __global__ void k(struct S s) {}", "k").status();
  EXPECT_THAT(std::string(bad.message()), ::testing::HasSubstr("unsupported parameter type"));
}

TEST(KernelSignatureTest, SerializationRoundTrips) {
  std::vector<KernelParam> params = *ParseKernelSignature(
      "extern \"C\" __global__ void k(int n, float* out, CUtensorMap map) {}", "k");
  EXPECT_EQ(params[2].kind, ParamKind::kTensorMap);
  EXPECT_EQ(*DeserializeSignature(SerializeSignature(params)), params);
  EXPECT_FALSE(DeserializeSignature("garbage\n").ok());
}

}  // namespace
}  // namespace gpucmd
