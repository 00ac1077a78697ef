#include "server/rpc/request_conversion.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

using ::testing::HasSubstr;

DeviceDescription CpuLike() {
  return DeviceDescription{.memory_capacity_bytes = 1 << 20, .max_threads_per_block = 1024};
}

v1::LaunchRequest Launch() {
  v1::LaunchRequest request;
  request.set_session("s");
  request.set_kernel_id("abc");
  request.mutable_grid()->set_x(4);
  request.mutable_block()->set_x(32);
  return request;
}

const LaunchOp& AsLaunch(const absl::StatusOr<Operation>& operation) {
  EXPECT_TRUE(operation.ok()) << operation.status();
  return std::get<LaunchOp>(*operation);
}

TEST(RequestConversionTest, UnsetDimensionsAreOneAsInCuda) {
  BatchAllocations none;
  absl::StatusOr<Operation> operation = ToOperation(Launch(), CpuLike(), none);
  const LaunchOp& launch = AsLaunch(operation);
  EXPECT_EQ(launch.launch.grid.x, 4u);
  EXPECT_EQ(launch.launch.grid.y, 1u);
  EXPECT_EQ(launch.launch.grid.z, 1u);
  EXPECT_EQ(launch.launch.block.volume(), 32u);

  v1::LaunchRequest empty = Launch();
  empty.clear_grid();
  absl::StatusOr<Operation> nothing = ToOperation(empty, CpuLike(), none);
  EXPECT_EQ(AsLaunch(nothing).launch.grid.volume(), 0u) << "x of 0 is an empty launch";
}

TEST(RequestConversionTest, GridsBeyondTheDeviceAreRefused) {
  BatchAllocations none;
  DeviceDescription device = CpuLike();
  v1::LaunchRequest request = Launch();
  request.mutable_grid()->set_x(2147483647);
  request.mutable_grid()->set_y(65535);
  request.mutable_grid()->set_z(65535);
  EXPECT_TRUE(ToOperation(request, device, none).ok());
  request.mutable_grid()->set_y(65536);
  absl::StatusOr<Operation> too_big = ToOperation(request, device, none);
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_big.status().message(), HasSubstr("exceeds the device's limit"));
  request.mutable_grid()->set_y(1);
  request.mutable_grid()->set_x(2147483648u);
  EXPECT_EQ(ToOperation(request, device, none).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RequestConversionTest, EnumValuesOutsideTheirRangeAreRefused) {
  BatchAllocations none;
  v1::LaunchRequest request = Launch();
  request.add_args()->mutable_buffer()->set_access(static_cast<v1::Access>(99));
  absl::StatusOr<Operation> access = ToOperation(request, CpuLike(), none);
  EXPECT_EQ(access.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(access.status().message(), HasSubstr("access 99"));

  DeviceDescription cuda = CpuLike();
  cuda.takes_tensor_maps = true;
  request.mutable_args(0)->mutable_tensor_map()->set_data_type(
      static_cast<v1::TensorDataType>(42));
  EXPECT_THAT(ToOperation(request, cuda, none).status().message(), HasSubstr("data_type 42"));
  request.mutable_args(0)->mutable_tensor_map()->set_data_type(v1::TENSOR_DATA_TYPE_F32);
  request.mutable_args(0)->mutable_tensor_map()->set_swizzle(
      static_cast<v1::TensorSwizzle>(-3));
  EXPECT_THAT(ToOperation(request, cuda, none).status().message(), HasSubstr("swizzle -3"));
}

TEST(RequestConversionTest, TensorMapsAreRefusedWhereTheDriverHasNone) {
  BatchAllocations none;
  v1::LaunchRequest request = Launch();
  request.add_args()->mutable_tensor_map()->mutable_buffer()->set_buffer(1);
  absl::StatusOr<Operation> refused = ToOperation(request, CpuLike(), none);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("does not take tensor maps"));
}

TEST(RequestConversionTest, EmptyArgumentsAndCommandsAreRefused) {
  BatchAllocations none;
  v1::LaunchRequest request = Launch();
  request.add_args();
  EXPECT_THAT(ToOperation(request, CpuLike(), none).status().message(),
              HasSubstr("argument 0 is empty"));
  v1::Command empty;
  EXPECT_EQ(ToOperation(empty, CpuLike(), none, SessionRegions()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RequestConversionTest, BufferRefsNameEarlierAllocatesOfTheBatch) {
  BatchAllocations earlier;
  v1::FreeRequest free;
  free.set_session("s");
  free.set_buffer_ref(7);
  absl::StatusOr<Operation> unknown = ToOperation(free, earlier);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(), HasSubstr("names no earlier Allocate"));

  earlier.Add(7, 2);
  absl::StatusOr<Operation> found = ToOperation(free, earlier);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(std::get<FreeOp>(*found).buffer.batch_index, std::optional<size_t>(2));

  earlier.Add(7, 5);
  EXPECT_THAT(ToOperation(free, earlier).status().message(), HasSubstr("ambiguous"));

  free.set_buffer(12);  // the oneof: a handle replaces the reference
  absl::StatusOr<Operation> handle = ToOperation(free, earlier);
  ASSERT_TRUE(handle.ok());
  EXPECT_EQ(std::get<FreeOp>(*handle).buffer.id, 12u);
  EXPECT_FALSE(std::get<FreeOp>(*handle).buffer.batch_index.has_value());
}

TEST(RequestConversionTest, WritesCarryExactlyWhatTheyDeclare) {
  BatchAllocations none;
  v1::WriteHeader header;
  header.set_session("s");
  header.set_buffer(1);
  header.set_inline_size_bytes(uint64_t{1} << 40);
  absl::StatusOr<Operation> huge = ToOperation(header, "ab", CpuLike(), none, SessionRegions());
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
  header.set_inline_size_bytes(4);
  absl::StatusOr<Operation> short_payload = ToOperation(header, "ab", CpuLike(), none, SessionRegions());
  EXPECT_THAT(short_payload.status().message(), HasSubstr("declared 4 bytes but carries 2"));
  absl::StatusOr<Operation> exact = ToOperation(header, "abcd", CpuLike(), none, SessionRegions());
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_EQ(std::get<WriteOp>(*exact).layout.host_bytes(), 4u);
  header.mutable_pitched()->set_width_bytes(3);
  header.mutable_pitched()->set_height(2);
  header.mutable_pitched()->set_stride_bytes(8);
  EXPECT_THAT(ToOperation(header, "abcd", CpuLike(), none, SessionRegions()).status().message(),
              HasSubstr("layout holds 6"));
}

}  // namespace
}  // namespace gpucmd
