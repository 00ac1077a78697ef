#include "client/ctl_top.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

using ::testing::HasSubstr;

TopSample Sample(uint64_t launches, uint64_t bytes_in, uint64_t used, uint64_t reserved) {
  TopSample sample;
  sample.stats.set_version("9.9.9");
  sample.stats.set_uptime_seconds(42);
  sample.stats.set_sessions_open(3);
  v1::DeviceStats* device = sample.stats.add_devices();
  device->set_device(0);
  device->set_memory_capacity_bytes(1000);
  device->set_memory_used_bytes(used);
  device->set_memory_reserved_bytes(reserved);
  device->set_queue_depth(7);
  device->set_launches(launches);
  device->set_bytes_host_to_device(bytes_in);
  v1::DeviceInfo info;
  info.set_ordinal(0);
  info.set_ready(true);
  sample.devices.push_back(info);
  return sample;
}

TEST(CtlTopTest, RatesComeFromTheDifferenceOverTheInterval) {
  const std::string frame =
      FormatTopFrame(Sample(100, 0, 0, 0), Sample(2600, 4'000'000, 250, 500), 2.0, false);
  EXPECT_THAT(frame, HasSubstr("gpucmd top: gpucmdd 9.9.9, up 42 s, 3 session(s) open"));
  EXPECT_THAT(frame, HasSubstr("1.2 k"));  // (2600 - 100) / 2 launches per second
  EXPECT_THAT(frame, HasSubstr("2.0 M"));  // 4 MB in over 2 s
  EXPECT_THAT(frame, HasSubstr("[#####+++++..........]")) << "25% used, 50% reserved";
  EXPECT_THAT(frame, HasSubstr("yes"));
}

TEST(CtlTopTest, JsonFramesAreOneLineEach) {
  const std::string frame =
      FormatTopFrame(Sample(0, 0, 0, 0), Sample(10, 500, 1, 1), 0.5, true);
  EXPECT_EQ(frame.find('\n'), frame.size() - 1);
  EXPECT_THAT(frame, HasSubstr("\"launches_per_second\":20.0"));
  EXPECT_THAT(frame, HasSubstr("\"bytes_in_per_second\":1000"));
  EXPECT_THAT(frame, HasSubstr("\"ready\":true"));
  EXPECT_THAT(frame, HasSubstr("\"queue_depth\":7"));
}

TEST(CtlTopTest, ACounterThatWentBackIsNoRate) {
  EXPECT_THAT(FormatTopFrame(Sample(500, 0, 0, 0), Sample(10, 0, 0, 0), 1.0, true),
              HasSubstr("\"launches_per_second\":0.0"));
  EXPECT_EQ(FormatRate(999), "999");
  EXPECT_EQ(FormatRate(1500), "1.5 k");
  EXPECT_EQ(FormatRate(2.5e9), "2.5 G");
}

}  // namespace
}  // namespace gpucmd
