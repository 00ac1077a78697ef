#include "server/config.h"

#include <algorithm>
#include <cstdlib>
#include <thread>
#include <cstring>

#include "absl/strings/string_view.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/container/flat_hash_set.h"
#include "base/file.h"
#include "base/status_macros.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "server/listen_address.h"

namespace gpucmd {
namespace {

constexpr uint64_t kDefaultDeviceMemoryBytes = uint64_t{4} << 30;  // 4 GiB
constexpr uint32_t kMaxCpuDevices = 64;
constexpr uint64_t kDefaultMaxMessageBytes = uint64_t{16} << 20;  // 16 MiB
constexpr uint64_t kMinMaxMessageBytes = uint64_t{64} << 10;      // 64 KiB
constexpr uint64_t kMaxConfigFileBytes = uint64_t{1} << 20;       // 1 MiB

// Collects the parser's complaints, each with its line's text so the error shows the
// field it concerns (the parser names only the offending token).
class ParseErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  explicit ParseErrorCollector(std::vector<absl::string_view> lines)
      : lines_(std::move(lines)) {}

  void AddError(int line, int column, const std::string& message) override {
    std::string error = absl::StrCat("line ", line + 1, ":", column + 1, ": ", message);
    if (line >= 0 && static_cast<size_t>(line) < lines_.size()) {
      absl::StrAppend(&error, " (in `", absl::StripAsciiWhitespace(lines_[line]), "`)");
    }
    errors_.push_back(std::move(error));
  }
  void AddWarning(int line, int column, const std::string& message) override {}
  std::string Joined() const { return absl::StrJoin(errors_, "; "); }

 private:
  const std::vector<absl::string_view> lines_;
  std::vector<std::string> errors_;
};

// $XDG_CACHE_HOME/gpucmdd, else ~/.cache/gpucmdd, else /tmp/gpucmdd-cache.
std::string DefaultCacheDirectory() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return absl::StrCat(xdg, "/gpucmdd");
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return absl::StrCat(home, "/.cache/gpucmdd");
  }
  return "/tmp/gpucmdd-cache";
}

absl::Status FieldError(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("field ", field, ": ", problem));
}

}  // namespace

absl::StatusOr<v1::DaemonConfig> LoadConfigFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadRegularFile(path, kMaxConfigFileBytes);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("config file ", text.status().message()));
  }
  return ParseConfigText(*text, absl::StrCat("config file ", path));
}

absl::StatusOr<v1::DaemonConfig> ParseConfigText(const std::string& contents,
                                                 absl::string_view source) {
  v1::DaemonConfig config;
  google::protobuf::TextFormat::Parser parser;
  ParseErrorCollector errors(absl::StrSplit(contents, '\n'));
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(contents, &config)) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", errors.Joined()));
  }
  return config;
}

void ApplyConfigDefaults(v1::DaemonConfig* config) {
  if (config->listen().empty()) config->add_listen("unix:/tmp/gpucmdd.sock");
  if (config->http_listen().empty()) config->set_http_listen("127.0.0.1:9464");
  if (config->log_level().empty()) config->set_log_level("info");
  if (!config->has_drain_timeout_seconds()) config->set_drain_timeout_seconds(10);
  if (!config->has_socket_mode()) config->set_socket_mode(0660);

  v1::CpuDriverConfig* cpu = config->mutable_cpu();
  if (!cpu->has_device_count()) cpu->set_device_count(1);
  if (!cpu->has_memory_bytes_per_device()) {
    cpu->set_memory_bytes_per_device(kDefaultDeviceMemoryBytes);
  }
  if (!cpu->has_streams_per_device()) cpu->set_streams_per_device(4);
  if (!cpu->has_kernel_timeout_seconds()) cpu->set_kernel_timeout_seconds(60);
  if (!cpu->has_executor_memory_bytes()) cpu->set_executor_memory_bytes(uint64_t{2} << 30);
  if (!cpu->has_executor_workers()) {
    cpu->set_executor_workers(std::max(1u, std::thread::hardware_concurrency()));
  }
  if (cpu->host_compiler().empty()) cpu->set_host_compiler("g++");
  if (cpu->executor_user().empty()) cpu->set_executor_user("nobody");

  v1::LimitsConfig* limits = config->mutable_limits();
  if (!limits->has_max_message_bytes()) limits->set_max_message_bytes(kDefaultMaxMessageBytes);
  if (!limits->has_session_memory_quota_bytes()) limits->set_session_memory_quota_bytes(0);
  if (!limits->has_session_queued_commands()) limits->set_session_queued_commands(1024);
  if (!limits->has_device_queue_capacity()) limits->set_device_queue_capacity(4096);
  if (!limits->has_session_idle_timeout_seconds()) {
    limits->set_session_idle_timeout_seconds(600);
  }
  if (!limits->has_session_lease_grace_seconds()) limits->set_session_lease_grace_seconds(5);
  if (!limits->has_max_shared_memory_regions()) limits->set_max_shared_memory_regions(64);
  if (!limits->has_max_sessions()) limits->set_max_sessions(4096);
  if (!limits->has_max_sessions_per_client()) limits->set_max_sessions_per_client(1024);
  if (!limits->has_max_client_name_bytes()) limits->set_max_client_name_bytes(256);
  if (!limits->has_max_streams_per_session()) limits->set_max_streams_per_session(256);
  if (!limits->has_tcp_handshake_timeout_seconds()) {
    limits->set_tcp_handshake_timeout_seconds(10);
  }
  if (!limits->has_max_inline_bytes_per_session()) {
    limits->set_max_inline_bytes_per_session(uint64_t{1} << 30);
  }
  if (!limits->has_max_shared_memory_bytes()) {
    limits->set_max_shared_memory_bytes(uint64_t{64} << 30);
  }
  if (!limits->has_max_inline_bytes()) limits->set_max_inline_bytes(uint64_t{4} << 30);
  if (!limits->has_max_calls_per_connection()) {
    const uint64_t above_leases = uint64_t{limits->max_sessions_per_client()} + 1024;
    limits->set_max_calls_per_connection(
        static_cast<uint32_t>(std::clamp<uint64_t>(above_leases, 4096, (1u << 31) - 1)));
  }
  if (!limits->has_max_connections_per_client()) limits->set_max_connections_per_client(256);
  if (!limits->has_max_submit_bytes()) limits->set_max_submit_bytes(uint64_t{1} << 30);
  if (!limits->has_payload_cache_bytes()) limits->set_payload_cache_bytes(uint64_t{64} << 20);
  if (!limits->has_max_registered_shared_memory_bytes()) {
    limits->set_max_registered_shared_memory_bytes(uint64_t{8} << 30);
  }

  v1::CompileConfig* compile = config->mutable_compile();
  if (compile->cache_dir().empty()) compile->set_cache_dir(DefaultCacheDirectory());
  if (!compile->has_timeout_seconds()) compile->set_timeout_seconds(60);
  if (!compile->has_max_log_bytes()) compile->set_max_log_bytes(64 << 10);
  if (!compile->has_workers()) compile->set_workers(2);
  if (!compile->has_max_memory_bytes()) compile->set_max_memory_bytes(uint64_t{2} << 30);
  if (!compile->has_max_waiting_source_bytes()) {
    compile->set_max_waiting_source_bytes(uint64_t{256} << 20);
  }
  if (!compile->has_max_cache_bytes()) compile->set_max_cache_bytes(uint64_t{4} << 30);
}

absl::Status ValidateConfig(const v1::DaemonConfig& config) {
  absl::flat_hash_set<std::string> unix_paths;
  for (const std::string& listen : config.listen()) {
    absl::StatusOr<ListenAddress> address = ParseListenAddress(listen);
    if (!address.ok()) return FieldError("listen", address.status().message());
    if (address->kind == ListenAddress::Kind::kUnix && !unix_paths.insert(address->path).second) {
      return FieldError("listen", absl::StrCat("\"", listen, "\" is listed twice"));
    }
    if (address->kind == ListenAddress::Kind::kTcp && !config.tls().cert_file().empty() &&
        config.tls().key_file().empty()) {
      return FieldError("tls.key_file", "required when tls.cert_file is set");
    }
    if (address->kind == ListenAddress::Kind::kTcp && config.tls().cert_file().empty() &&
        !IsLoopbackHost(address->host_port.host) && !config.allow_insecure_remote()) {
      return FieldError("listen", absl::StrCat(
          "\"", listen, "\" is a plaintext listener beyond this machine: configure tls, "
          "listen on loopback, or set allow_insecure_remote: true"));
    }
  }
  if (absl::StatusOr<HostPort> http = ParseHostPort(config.http_listen()); !http.ok()) {
    return FieldError("http_listen", http.status().message());
  }
  static constexpr absl::string_view kLevels[] = {"trace", "debug", "info",    "warn",
                                                 "error", "critical", "off"};
  if (std::find(std::begin(kLevels), std::end(kLevels), config.log_level()) ==
      std::end(kLevels)) {
    return FieldError("log_level",
                      absl::StrCat("\"", config.log_level(),
                                   "\" is not one of trace, debug, info, warn, error, "
                                   "critical, off"));
  }
  const v1::CpuDriverConfig& cpu = config.cpu();
  if (cpu.device_count() < 1 || cpu.device_count() > kMaxCpuDevices) {
    return FieldError("cpu.device_count",
                      absl::StrCat(cpu.device_count(), " is outside 1..", kMaxCpuDevices));
  }
  if (cpu.memory_bytes_per_device() == 0) {
    return FieldError("cpu.memory_bytes_per_device", "must be positive");
  }
  if (cpu.streams_per_device() < 1 || cpu.streams_per_device() > 64) {
    return FieldError("cpu.streams_per_device",
                      absl::StrCat(cpu.streams_per_device(), " is outside 1..64"));
  }
  if (cpu.memory_bytes_per_device() > (uint64_t{1} << 40)) {
    return FieldError("cpu.memory_bytes_per_device", "is above the 1 TiB limit");
  }
  if (cpu.kernel_timeout_seconds() == 0) {
    return FieldError("cpu.kernel_timeout_seconds", "must be positive");
  }
  if (cpu.executor_memory_bytes() < (uint64_t{64} << 20)) {
    return FieldError("cpu.executor_memory_bytes", "is below 64 MiB");
  }
  const v1::LimitsConfig& limits = config.limits();
  if (limits.max_message_bytes() < kMinMaxMessageBytes ||
      limits.max_message_bytes() > (uint64_t{1} << 31) - 1) {
    return FieldError("limits.max_message_bytes",
                      absl::StrCat(limits.max_message_bytes(), " is outside 64 KiB..2 GiB"));
  }
  if (limits.max_submit_bytes() / 4 < limits.max_message_bytes()) {
    return FieldError("limits.max_submit_bytes",
                      absl::StrCat(limits.max_submit_bytes(),
                                   " is below four times limits.max_message_bytes (",
                                   limits.max_message_bytes(), ")"));
  }
  if (limits.max_inline_bytes() != 0 && limits.max_inline_bytes() < limits.max_message_bytes()) {
    return FieldError("limits.max_inline_bytes",
                      absl::StrCat(limits.max_inline_bytes(),
                                   " is below limits.max_message_bytes (",
                                   limits.max_message_bytes(), ")"));
  }
  if (limits.max_calls_per_connection() <= limits.max_sessions_per_client() ||
      limits.max_calls_per_connection() > (1u << 31) - 1) {
    return FieldError("limits.max_calls_per_connection",
                      absl::StrCat(limits.max_calls_per_connection(),
                                   " must be above limits.max_sessions_per_client (",
                                   limits.max_sessions_per_client(), ") and below 2^31"));
  }
  if (limits.max_connections_per_client() == 0) {
    return FieldError("limits.max_connections_per_client", "must be positive");
  }
  if (limits.device_queue_capacity() == 0) {
    return FieldError("limits.device_queue_capacity", "must be positive");
  }
  if (limits.session_queued_commands() == 0) {
    return FieldError("limits.session_queued_commands", "must be positive");
  }
  if (limits.tcp_handshake_timeout_seconds() == 0) {
    return FieldError("limits.tcp_handshake_timeout_seconds", "must be positive");
  }
  if (config.socket_mode() > 0777) {
    return FieldError("socket_mode", absl::StrFormat("%#o is not a permission mode (0..0777)",
                                                     config.socket_mode()));
  }
  if (config.compile().workers() == 0) {
    return FieldError("compile.workers", "must be positive");
  }
  if (config.compile().max_memory_bytes() < (uint64_t{256} << 20)) {
    return FieldError("compile.max_memory_bytes", "is below 256 MiB");
  }
  if (config.compile().max_waiting_source_bytes() < (uint64_t{1} << 20)) {
    return FieldError("compile.max_waiting_source_bytes", "is below 1 MiB");
  }
  if (config.compile().max_cache_bytes() < (uint64_t{64} << 20)) {
    return FieldError("compile.max_cache_bytes", "is below 64 MiB");
  }
  return absl::OkStatus();
}

}  // namespace gpucmd
