#include "server/config.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

using ::testing::HasSubstr;

std::string WriteTempFile(const std::string& name, const std::string& contents) {
  std::string path = std::string(getenv("TEST_TMPDIR")) + "/" + name;
  std::ofstream(path) << contents;
  return path;
}

v1::DaemonConfig Defaulted(v1::DaemonConfig config) {
  ApplyConfigDefaults(&config);
  return config;
}

TEST(ConfigTest, DefaultsAreOneDeviceOfFourGiB) {
  v1::DaemonConfig config = Defaulted({});
  EXPECT_EQ(config.cpu().device_count(), 1u);
  EXPECT_EQ(config.cpu().memory_bytes_per_device(), uint64_t{4} << 30);
  EXPECT_EQ(config.listen_size(), 1);
  EXPECT_EQ(config.limits().max_connections_per_client(), 256u);
  EXPECT_TRUE(ValidateConfig(config).ok());
}

// A connection's calls are more than a client's sessions, whose leases are open calls.
TEST(ConfigTest, CallsPerConnectionDefaultAboveTheSessionsPerClient) {
  EXPECT_EQ(Defaulted({}).limits().max_calls_per_connection(), 4096u);
  v1::DaemonConfig many_sessions;
  many_sessions.mutable_limits()->set_max_sessions_per_client(8192);
  many_sessions = Defaulted(many_sessions);
  EXPECT_EQ(many_sessions.limits().max_calls_per_connection(), 8192u + 1024);
  EXPECT_TRUE(ValidateConfig(many_sessions).ok());
}

TEST(ConfigTest, PlaintextListenersBeyondThisMachineNeedConsent) {
  v1::DaemonConfig config = Defaulted({});
  config.add_listen("tcp:0.0.0.0:0");
  absl::Status refused = ValidateConfig(config);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("allow_insecure_remote"));
  config.set_allow_insecure_remote(true);
  EXPECT_TRUE(ValidateConfig(config).ok());
  config.set_allow_insecure_remote(false);
  config.mutable_tls()->set_cert_file("/etc/gpucmdd/cert.pem");
  config.mutable_tls()->set_key_file("/etc/gpucmdd/key.pem");
  EXPECT_TRUE(ValidateConfig(config).ok()) << "TLS listeners may face the network";
  config.clear_tls();
  config.set_listen(1, "tcp:[::1]:0");
  EXPECT_TRUE(ValidateConfig(config).ok()) << "loopback is this machine";
}

TEST(ConfigTest, SocketModeDefaultsToOwnerAndGroup) {
  v1::DaemonConfig config = Defaulted({});
  EXPECT_EQ(config.socket_mode(), 0660u);
  config.set_socket_mode(01777);
  EXPECT_THAT(std::string(ValidateConfig(config).message()), HasSubstr("socket_mode"));
}

TEST(ConfigTest, LoadsTextFormat) {
  std::string path = WriteTempFile("good.textproto", R"(
    listen: "unix:/tmp/a.sock"
    listen: "tcp:127.0.0.1:0"
    http_listen: "127.0.0.1:0"
    cpu { device_count: 3 memory_bytes_per_device: 1048576 }
  )");
  absl::StatusOr<v1::DaemonConfig> config = LoadConfigFile(path);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->listen_size(), 2);
  EXPECT_EQ(config->cpu().device_count(), 3u);
  EXPECT_TRUE(ValidateConfig(Defaulted(*config)).ok());
}

TEST(ConfigTest, ExplicitValuesSurviveDefaulting) {
  v1::DaemonConfig config;
  config.mutable_cpu()->set_device_count(5);
  config.set_log_level("debug");
  config = Defaulted(config);
  EXPECT_EQ(config.cpu().device_count(), 5u);
  EXPECT_EQ(config.log_level(), "debug");
}

TEST(ConfigTest, MissingFileIsNotFoundNamingThePath) {
  absl::StatusOr<v1::DaemonConfig> config = LoadConfigFile("/nonexistent/gpucmdd.textproto");
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("/nonexistent/gpucmdd.textproto"));
}

TEST(ConfigTest, AConfigThatIsNoRegularFileOrTooLargeIsRefusedNamingThePath) {
  for (const std::string& path : {std::string(getenv("TEST_TMPDIR")), std::string("/dev/zero")}) {
    absl::StatusOr<v1::DaemonConfig> config = LoadConfigFile(path);
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument) << path;
    EXPECT_THAT(std::string(config.status().message()),
                HasSubstr(absl::StrCat("config file ", path, ": not a regular file")));
  }
  const std::string large = WriteTempFile("large.textproto", std::string(2 << 20, '#'));
  absl::StatusOr<v1::DaemonConfig> config = LoadConfigFile(large);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("holds more than"));
}

TEST(ConfigTest, AUnixSocketListedTwiceIsRefused) {
  v1::DaemonConfig config;
  config.add_listen("unix:/tmp/gpucmdd-twice.sock");
  config.add_listen("tcp:127.0.0.1:0");
  config.add_listen("unix:/tmp/gpucmdd-twice.sock");
  absl::Status valid = ValidateConfig(Defaulted(config));
  EXPECT_EQ(valid.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(valid.message()), HasSubstr("listed twice"));
  config.set_listen(2, "tcp:127.0.0.1:0");  // two ports the kernel picks: two listeners
  EXPECT_TRUE(ValidateConfig(Defaulted(config)).ok());
}

TEST(ConfigTest, UnknownFieldNamesFileLineAndField) {
  std::string path = WriteTempFile("unknown.textproto", "http_listen: \"127.0.0.1:1\"\nbogus: 3\n");
  absl::StatusOr<v1::DaemonConfig> config = LoadConfigFile(path);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(config.status().message()), HasSubstr(path));
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("line 2"));
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("bogus"));
}

TEST(ConfigTest, WrongTypeIsRejected) {
  std::string path = WriteTempFile("type.textproto", "cpu { device_count: \"many\" }\n");
  absl::StatusOr<v1::DaemonConfig> config = LoadConfigFile(path);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("device_count"));
}

struct BadValue {
  std::string text;
  std::string field;
};

class ConfigValidationTest : public ::testing::TestWithParam<BadValue> {};

TEST_P(ConfigValidationTest, NamesTheBadField) {
  v1::DaemonConfig config;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(GetParam().text, &config));
  absl::Status status = ValidateConfig(Defaulted(config));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("field " + GetParam().field));
}

INSTANTIATE_TEST_SUITE_P(
    BadValues, ConfigValidationTest,
    ::testing::Values(BadValue{"cpu { device_count: 0 }", "cpu.device_count"},
                      BadValue{"cpu { device_count: 65 }", "cpu.device_count"},
                      BadValue{"cpu { memory_bytes_per_device: 0 }",
                               "cpu.memory_bytes_per_device"},
                      BadValue{"listen: \"http://x\"", "listen"},
                      BadValue{"listen: \"tcp:localhost\"", "listen"},
                      BadValue{"http_listen: \"127.0.0.1:99999\"", "http_listen"},
                      BadValue{"log_level: \"loud\"", "log_level"},
                      BadValue{"limits { max_message_bytes: 10 }", "limits.max_message_bytes"},
                      BadValue{"limits { max_submit_bytes: 67108863 }",
                               "limits.max_submit_bytes"},
                      BadValue{"limits { max_message_bytes: 1073741824 }",
                               "limits.max_submit_bytes"},
                      BadValue{"limits { max_inline_bytes: 65536 }", "limits.max_inline_bytes"},
                      BadValue{"limits { max_calls_per_connection: 1024 }",
                               "limits.max_calls_per_connection"},
                      BadValue{"limits { max_connections_per_client: 0 }",
                               "limits.max_connections_per_client"},
                      BadValue{"limits { device_queue_capacity: 0 }",
                               "limits.device_queue_capacity"},
                      BadValue{"limits { tcp_handshake_timeout_seconds: 0 }",
                               "limits.tcp_handshake_timeout_seconds"},
                      BadValue{"compile { workers: 0 }", "compile.workers"},
                      BadValue{"compile { max_waiting_source_bytes: 1000 }",
                               "compile.max_waiting_source_bytes"},
                      BadValue{"compile { max_cache_bytes: 1000000 }", "compile.max_cache_bytes"}));

}  // namespace
}  // namespace gpucmd
