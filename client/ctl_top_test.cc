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
  device->set_stream_queued_commands(23);
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
  EXPECT_THAT(frame, ::testing::ContainsRegex("yes +7 +0 +23 "));
}

TEST(CtlTopTest, JsonFramesAreOneLineEach) {
  const std::string frame =
      FormatTopFrame(Sample(0, 0, 0, 0), Sample(10, 500, 1, 1), 0.5, true);
  EXPECT_EQ(frame.find('\n'), frame.size() - 1);
  EXPECT_THAT(frame, HasSubstr("\"launches_per_second\":20.0"));
  EXPECT_THAT(frame, HasSubstr("\"bytes_in_per_second\":1000"));
  EXPECT_THAT(frame, HasSubstr("\"ready\":true"));
  EXPECT_THAT(frame, HasSubstr("\"queue_depth\":7"));
  EXPECT_THAT(frame, HasSubstr("\"stream_queued_commands\":23"));
}

TEST(CtlTopTest, ACounterThatWentBackIsNoRate) {
  EXPECT_THAT(FormatTopFrame(Sample(500, 0, 0, 0), Sample(10, 0, 0, 0), 1.0, true),
              HasSubstr("\"launches_per_second\":0.0"));
  EXPECT_EQ(FormatRate(999), "999");
  EXPECT_EQ(FormatRate(1500), "1.5 k");
  EXPECT_EQ(FormatRate(2.5e9), "2.5 G");
}

void AddSession(TopSample& sample, uint64_t id, const std::string& name, uint64_t launches) {
  v1::SessionSummary* session = sample.sessions.add_sessions();
  session->set_id(id);
  session->set_client_name(name);
  session->set_owner("uid:1000");
  session->set_launches(launches);
}

TEST(CtlTopTest, SessionsShowTheirLaunchRatesBusiestFirst) {
  TopSample before = Sample(0, 0, 0, 0), now = Sample(0, 0, 0, 0);
  AddSession(before, 1, "quiet", 10);
  AddSession(before, 2, "busy", 10);
  AddSession(now, 1, "quiet", 10);
  AddSession(now, 2, "busy", 410);
  AddSession(now, 3, "new", 100);  // opened since: counted from zero
  now.sessions.set_caller("uid:1000");
  const std::string frame = FormatTopFrame(before, now, 2.0, false);
  EXPECT_THAT(frame, HasSubstr("SESSIONS: those of uid:1000"));
  const size_t busy = frame.find("busy"), fresh = frame.find("new "), quiet = frame.find("quiet");
  ASSERT_NE(quiet, std::string::npos);
  EXPECT_LT(busy, fresh);
  EXPECT_LT(fresh, quiet);
  EXPECT_THAT(frame, ::testing::ContainsRegex("busy +0 +uid:1000 +0 B +0 +200\n"));
  EXPECT_THAT(frame, ::testing::ContainsRegex("new +0 +uid:1000 +0 B +0 +50\n"));

  const std::string json = FormatTopFrame(before, now, 2.0, true);
  EXPECT_THAT(json, HasSubstr("\"all_clients\":false"));
  EXPECT_THAT(json, ::testing::ContainsRegex(
                        "\"client_name\":\"busy\".*\"launches_per_second\":200.0"));
}

TEST(CtlTopTest, ATerminalFrameListsTheBusiestSessionsAndHostileNamesStayText) {
  TopSample before = Sample(0, 0, 0, 0), now = Sample(0, 0, 0, 0);
  for (int id = 1; id <= kTopSessionRows + 5; ++id) AddSession(now, id, "worker", id);
  AddSession(now, 100, "\x1b[2J\"quoted\"", 0);
  now.sessions.set_omitted(4);  // sessions the reply had no room for
  const std::string frame = FormatTopFrame(before, now, 1.0, false);
  EXPECT_THAT(frame, HasSubstr("... and 10 more\n"));
  EXPECT_EQ(frame.find('\x1b'), std::string::npos) << "no escape sequence reaches the terminal";
  const std::string json = FormatTopFrame(before, now, 1.0, true);
  EXPECT_THAT(json, HasSubstr("\"client_name\":\"\\u001b[2J\\\"quoted\\\"\""))
      << "names are JSON strings";
}

}  // namespace
}  // namespace gpucmd
