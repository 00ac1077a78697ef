#include "client/ctl_output.h"

#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

using ::testing::HasSubstr;

TEST(FormatBytesTest, UsesBinaryUnits) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(uint64_t{4} << 30), "4.0 GiB");
}

TEST(FormatDevicesTest, TableNamesEachDevice) {
  v1::DeviceInfo device;
  device.set_ordinal(3);
  device.set_name("gpucmd CPU device 3");
  device.set_driver(v1::DRIVER_KIND_CPU);
  device.set_architecture("x86_64");
  device.set_memory_capacity_bytes(uint64_t{2} << 30);
  device.set_ready(true);
  std::string table = FormatDevices({device}, /*json=*/false);
  EXPECT_THAT(table, HasSubstr("gpucmd CPU device 3"));
  EXPECT_THAT(table, HasSubstr("2.0 GiB"));
  EXPECT_THAT(table, HasSubstr("cpu"));
}

TEST(FormatDevicesTest, JsonRoundTrips) {
  v1::DeviceInfo device;
  device.set_ordinal(1);
  device.set_memory_capacity_bytes(12345);
  std::string json = FormatDevices({device}, /*json=*/true);
  v1::ListDevicesResponse parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &parsed).ok()) << json;
  ASSERT_EQ(parsed.devices_size(), 1);
  EXPECT_EQ(parsed.devices(0).ordinal(), 1u);
  EXPECT_EQ(parsed.devices(0).memory_capacity_bytes(), 12345u);
}

TEST(FormatHealthTest, ReportsBothServices) {
  EXPECT_EQ(FormatHealth(true, false, /*json=*/false),
            "daemon: SERVING\ngpucmd.v1.GpuCommand: NOT_SERVING\n");
  EXPECT_THAT(FormatHealth(true, true, /*json=*/true),
              HasSubstr("\"gpucmd.v1.GpuCommand\":\"SERVING\""));
}

TEST(FormatStatsTest, ShowsDeviceFigures) {
  v1::GetStatsResponse stats;
  stats.set_version("9.9.9");
  stats.set_sessions_open(2);
  v1::DeviceStats* device = stats.add_devices();
  device->set_memory_capacity_bytes(uint64_t{1} << 30);
  device->set_queue_depth(17);
  device->set_stream_queued_commands(23);
  std::string table = FormatStats(stats, /*json=*/false);
  EXPECT_THAT(table, HasSubstr("gpucmdd 9.9.9"));
  EXPECT_THAT(table, HasSubstr("2 session(s) open"));
  EXPECT_THAT(table, HasSubstr("1.0 GiB"));
  EXPECT_THAT(table, HasSubstr(" 17 "));
  EXPECT_THAT(table, HasSubstr("ON-STREAMS"));
  EXPECT_THAT(table, HasSubstr(" 23 "));
}

TEST(FormatSessionsTest, SaysWhoseSessionsItShows) {
  v1::ListSessionsResponse sessions;
  sessions.set_caller("uid:1000");
  v1::SessionSummary* session = sessions.add_sessions();
  session->set_id(7);
  session->set_client_name("trainer");
  session->set_owner("uid:1000");
  session->set_memory_used_bytes(3 << 20);
  session->set_launches(42);
  std::string table = FormatSessions(sessions, /*json=*/false);
  EXPECT_THAT(table, HasSubstr("1 session(s); shown: those of uid:1000"));
  EXPECT_THAT(table, ::testing::ContainsRegex("7 +trainer +0 +uid:1000 +3.0 MiB"));
  sessions.set_all_clients(true);
  EXPECT_THAT(FormatSessions(sessions, false), HasSubstr("shown: every client"));
  sessions.set_omitted(12);
  EXPECT_THAT(FormatSessions(sessions, false), HasSubstr("12 more not listed"));
  sessions.set_all_clients(false);
  sessions.set_caller("");
  EXPECT_THAT(FormatSessions(sessions, false), HasSubstr("shown: none: the daemon cannot tell"));
  v1::ListSessionsResponse parsed;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(FormatSessions(sessions, true), &parsed).ok());
  EXPECT_EQ(parsed.sessions(0).launches(), 42u);
}

// A client names its sessions: the name reaches an operator's terminal only as
// printable text of the column's width.
TEST(TerminalTextTest, HostileNamesArePrintableAndCut) {
  EXPECT_EQ(TerminalText("plain", 10), "plain");
  EXPECT_EQ(TerminalText("\x1b[2J\x1b]0;owned\x07", 40), "?[2J?]0;owned?");
  EXPECT_EQ(TerminalText("abcdefghij", 5), "abcd~");
  EXPECT_EQ(TerminalText("caf\xc3\xa9", 10), "caf??");
}

}  // namespace
}  // namespace gpucmd
