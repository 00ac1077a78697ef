#include "driver/kernel_signature.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

ParsedKernel SampleKernel() {
  return ParsedKernel{
      .params = {{ParamKind::kScalar, ScalarKind::kI32, "int n"},
                 {ParamKind::kBuffer, ScalarKind::kNone, "const float *__restrict x", true},
                 {ParamKind::kBuffer, ScalarKind::kNone, "float *y"},
                 {ParamKind::kTensorMap, ScalarKind::kNone, "const CUtensorMap map"}},
      .dynamic_shared = {{.begin = 10, .end = 42, .name = "tile", .element_type = "unsigned int"},
                         {.begin = 50, .end = 70, .in_function = true, .name = "staged",
                          .element_type = "float [32]"}},
      .unsupported = {{.feature = "inline PTX (asm)", .line = 7}},
      .threads_meet = true};
}

TEST(KernelSignatureTest, SignatureRoundTrips) {
  std::vector<KernelParam> params = SampleKernel().params;
  EXPECT_EQ(*DeserializeSignature(SerializeSignature(params)), params);
  EXPECT_EQ(DeserializeSignature("garbage\n").status().code(), absl::StatusCode::kDataLoss);
}

TEST(KernelSignatureTest, ParsedKernelRoundTrips) {
  const ParsedKernel kernel = SampleKernel();
  EXPECT_EQ(*DeserializeParsedKernel(SerializeParsedKernel(kernel)), kernel);
  EXPECT_EQ(*DeserializeParsedKernel(SerializeParsedKernel(ParsedKernel{})), ParsedKernel{});
}

TEST(KernelSignatureTest, CorruptFrontEndAnswersAreDataLoss) {
  for (const char* corrupt : {"threads_meet\n", "dynamic_shared 9 3 0 tile int\n",
                              "dynamic_shared x 3 0 tile int\n", "dynamic_shared 1 3 2 tile int\n", "unsupported x asm\n",
                              "param garbage\n", "something else\n"}) {
    EXPECT_EQ(DeserializeParsedKernel(corrupt).status().code(), absl::StatusCode::kDataLoss)
        << corrupt;
  }
}

TEST(KernelSignatureTest, ScalarSizes) {
  EXPECT_EQ(ScalarSize(ScalarKind::kI32), 4u);
  EXPECT_EQ(ScalarSize(ScalarKind::kF64), 8u);
  EXPECT_EQ(ScalarSize(ScalarKind::kNone), 0u);
}

}  // namespace
}  // namespace gpucmd
