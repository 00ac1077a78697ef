// The 2D copy parameters the CUDA driver hands cuMemcpy2DAsync, checked without a GPU.

#include "driver/cuda/cuda_driver.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

TEST(Pitched2DCopyTest, HostToDeviceUsesPackedSourceAndPitchedTarget) {
  std::byte host[300];
  CUDA_MEMCPY2D copy = Pitched2DCopy({.host = host,
                                      .device = 0x1000 + 64,
                                      .width_bytes = 100,
                                      .height = 3,
                                      .device_stride_bytes = 256,
                                      .to_device = true});
  EXPECT_EQ(copy.srcMemoryType, CU_MEMORYTYPE_HOST);
  EXPECT_EQ(copy.srcHost, host);
  EXPECT_EQ(copy.srcPitch, 100u);
  EXPECT_EQ(copy.dstMemoryType, CU_MEMORYTYPE_DEVICE);
  EXPECT_EQ(copy.dstDevice, 0x1000u + 64);
  EXPECT_EQ(copy.dstPitch, 256u);
  EXPECT_EQ(copy.WidthInBytes, 100u);
  EXPECT_EQ(copy.Height, 3u);
  EXPECT_EQ(copy.srcXInBytes + copy.srcY + copy.dstXInBytes + copy.dstY, 0u);
}

TEST(Pitched2DCopyTest, DeviceToHostMirrorsIt) {
  std::byte host[300];
  CUDA_MEMCPY2D copy = Pitched2DCopy({.host = host,
                                      .device = 0x2000,
                                      .width_bytes = 100,
                                      .height = 3,
                                      .device_stride_bytes = 128,
                                      .to_device = false});
  EXPECT_EQ(copy.srcMemoryType, CU_MEMORYTYPE_DEVICE);
  EXPECT_EQ(copy.srcDevice, 0x2000u);
  EXPECT_EQ(copy.srcPitch, 128u);
  EXPECT_EQ(copy.dstMemoryType, CU_MEMORYTYPE_HOST);
  EXPECT_EQ(copy.dstHost, host);
  EXPECT_EQ(copy.dstPitch, 100u);
}

TEST(CudaApiTest, NoDriverIsReportedClearly) {
  absl::StatusOr<const CudaApi*> api = LoadCudaApi();
  if (api.ok()) GTEST_SKIP() << "this machine has a CUDA driver";
  EXPECT_EQ(api.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(api.status().message().find("CUDA driver"), absl::string_view::npos);
  EXPECT_EQ(CudaBackend::Create({}).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace gpucmd
