#include "server/rpc/request_validation.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

using ::testing::HasSubstr;

TEST(RequestValidationTest, OpenSessionOnMissingDevice) {
  v1::OpenSessionRequest request;
  request.set_device(2);
  EXPECT_TRUE(ValidateOpenSession(request, 3).ok());
  absl::Status status = ValidateOpenSession(request, 2);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("device 2 does not exist"));
}

TEST(RequestValidationTest, AllocateNeedsSessionAndSize) {
  v1::AllocateRequest request;
  request.set_size_bytes(16);
  EXPECT_THAT(ValidateAllocate(request).message(), HasSubstr("session is required"));
  request.set_session("s");
  EXPECT_TRUE(ValidateAllocate(request).ok());
  request.set_size_bytes(0);
  EXPECT_EQ(ValidateAllocate(request).code(), absl::StatusCode::kInvalidArgument);
}

TEST(RequestValidationTest, PitchedStrideSmallerThanWidth) {
  v1::PitchedLayout layout;
  layout.set_width_bytes(64);
  layout.set_height(4);
  layout.set_stride_bytes(32);
  absl::Status status = ValidatePitchedLayout(layout);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("stride_bytes 32 is smaller than width_bytes 64"));
  layout.set_stride_bytes(64);
  EXPECT_TRUE(ValidatePitchedLayout(layout).ok());
}

TEST(RequestValidationTest, PitchedExtentOverflow) {
  v1::PitchedLayout layout;
  layout.set_width_bytes(1);
  layout.set_stride_bytes(uint64_t{1} << 40);
  layout.set_height(uint64_t{1} << 30);
  EXPECT_EQ(ValidatePitchedLayout(layout).code(), absl::StatusCode::kInvalidArgument);
}

TEST(RequestValidationTest, WriteNeedsASource) {
  v1::WriteHeader header;
  header.set_session("s");
  EXPECT_THAT(ValidateWriteHeader(header).message(), HasSubstr("no source"));
  header.set_inline_size_bytes(8);
  EXPECT_TRUE(ValidateWriteHeader(header).ok());
  header.set_offset_bytes(UINT64_MAX - 2);
  EXPECT_THAT(ValidateWriteHeader(header).message(), HasSubstr("overflows"));
}

TEST(RequestValidationTest, ReadTakesSizeOrLayoutNotBoth) {
  v1::ReadRequest request;
  request.set_session("s");
  request.set_size_bytes(8);
  EXPECT_TRUE(ValidateRead(request).ok());
  request.mutable_pitched()->set_width_bytes(4);
  request.mutable_pitched()->set_stride_bytes(4);
  request.mutable_pitched()->set_height(2);
  EXPECT_EQ(ValidateRead(request).code(), absl::StatusCode::kInvalidArgument);
}

TEST(RequestValidationTest, CopyOffsetsMustNotWrap) {
  v1::CopyRequest request;
  request.set_session("s");
  request.set_size_bytes(16);
  request.set_target_offset_bytes(UINT64_MAX - 1);
  EXPECT_THAT(ValidateCopy(request).message(), HasSubstr("copy target"));
}

TEST(RequestValidationTest, PitchedCopyTakesRowsOfStridesAtLeastTheirWidthAndNoSize) {
  v1::CopyRequest request;
  request.set_session("s");
  v1::PitchedCopyRows& rows = *request.mutable_pitched();
  rows.set_width_bytes(8);
  rows.set_height(4);
  rows.set_source_stride_bytes(8);
  rows.set_target_stride_bytes(32);
  EXPECT_TRUE(ValidateCopy(request).ok());
  rows.set_source_stride_bytes(7);
  EXPECT_THAT(ValidateCopy(request).message(),
              HasSubstr("source_stride_bytes 7 is smaller than width_bytes 8"));
  rows.set_source_stride_bytes(8);
  rows.set_target_stride_bytes(UINT64_MAX / 2);
  EXPECT_THAT(ValidateCopy(request).message(), HasSubstr("target_stride_bytes * height overflows"));
  rows.set_target_stride_bytes(32);
  request.set_size_bytes(32);
  EXPECT_THAT(ValidateCopy(request).message(), HasSubstr("not both"));
}

TEST(RequestValidationTest, CompileNeedsSourceAndEntry) {
  v1::CompileRequest request;
  request.set_session("s");
  EXPECT_FALSE(ValidateCompile(request).ok());
  request.set_source("extern \"C\" __global__ void k() {}");
  EXPECT_THAT(ValidateCompile(request).message(), HasSubstr("entry_point"));
  request.set_entry_point("k");
  EXPECT_TRUE(ValidateCompile(request).ok());
}

TEST(RequestValidationTest, LaunchNeedsSessionAndKernel) {
  v1::LaunchRequest request;
  EXPECT_THAT(ValidateLaunch(request).message(), HasSubstr("session"));
  request.set_session("s");
  EXPECT_THAT(ValidateLaunch(request).message(), HasSubstr("kernel_id"));
  request.set_kernel_id("abc");
  EXPECT_TRUE(ValidateLaunch(request).ok());
}

// Names and ids are bounded before anything uses them, and never echoed back whole.
TEST(RequestValidationTest, IdsAndNamesHaveLengthLimits) {
  const std::string huge(8000, 'a');
  EXPECT_EQ(ValidateSessionToken(huge).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(ValidateSessionToken(huge).message().size(), 200u);

  v1::LaunchRequest launch;
  launch.set_session("s");
  for (const std::string& bad : {huge, std::string("not-hex"), std::string(65, 'a')}) {
    launch.set_kernel_id(bad);
    absl::Status status = ValidateLaunch(launch);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad.size();
    EXPECT_LT(status.message().size(), 200u);
  }
  launch.set_kernel_id(std::string(64, 'f'));
  EXPECT_TRUE(ValidateLaunch(launch).ok());

  v1::CompileRequest compile;
  compile.set_session("s");
  compile.set_source("extern \"C\" __global__ void k() {}");
  for (const std::string& bad : {huge, std::string("1k"), std::string("k(); int x"),
                                 std::string("k k")}) {
    compile.set_entry_point(bad);
    absl::Status status = ValidateCompile(compile);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_LT(status.message().size(), 200u);
  }
  compile.set_entry_point("_kernel_2");
  EXPECT_TRUE(ValidateCompile(compile).ok());
}

}  // namespace
}  // namespace gpucmd
