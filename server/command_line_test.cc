#include "server/command_line.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

absl::StatusOr<CommandLine> Parse(std::vector<const char*> args) {
  args.insert(args.begin(), "gpucmdd");
  return ParseCommandLine(args);
}

TEST(CommandLineTest, ListenIsRepeatableAndKeepsOrder) {
  absl::StatusOr<CommandLine> parsed =
      Parse({"--listen=unix:/a.sock", "--listen", "tcp:127.0.0.1:0", "--http_listen=:0"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->listen, (std::vector<std::string>{"unix:/a.sock", "tcp:127.0.0.1:0"}));
  EXPECT_EQ(parsed->http_listen, ":0");
}

TEST(CommandLineTest, VersionAndConfig) {
  absl::StatusOr<CommandLine> parsed = Parse({"--version", "--config=/etc/x"});
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->version);
  EXPECT_EQ(parsed->config_path, "/etc/x");
}

TEST(CommandLineTest, UnknownFlagIsAnError) {
  absl::StatusOr<CommandLine> parsed = Parse({"--lisen=unix:/a"});
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(parsed.status().message(), ::testing::HasSubstr("--lisen"));
}

TEST(CommandLineTest, MissingValueIsAnError) {
  EXPECT_FALSE(Parse({"--config"}).ok());
  EXPECT_FALSE(Parse({"--config", "--version"}).ok());
}

TEST(CommandLineTest, FlagsOverrideTheConfigFile) {
  v1::DaemonConfig config;
  config.add_listen("unix:/from/file.sock");
  config.set_http_listen("127.0.0.1:1");
  config.set_log_level("warn");
  absl::StatusOr<CommandLine> parsed = Parse({"--listen=unix:/flag.sock", "--log_level=debug"});
  ASSERT_TRUE(parsed.ok());
  ApplyCommandLine(*parsed, &config);
  ASSERT_EQ(config.listen_size(), 1);
  EXPECT_EQ(config.listen(0), "unix:/flag.sock");
  EXPECT_EQ(config.http_listen(), "127.0.0.1:1");
  EXPECT_EQ(config.log_level(), "debug");
}

}  // namespace
}  // namespace gpucmd
