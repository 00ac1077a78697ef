#include "client/ctl_output.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace gpucmd {
namespace {

std::string ToJson(const google::protobuf::Message& message) {
  return MessageJson(message) + "\n";
}

absl::string_view DriverName(v1::DriverKind driver) {
  switch (driver) {
    case v1::DRIVER_KIND_CPU:
      return "cpu";
    case v1::DRIVER_KIND_CUDA:
      return "cuda";
    case v1::DRIVER_KIND_HIP:
      return "hip";
    default:
      return "unknown";
  }
}

}  // namespace

std::string FormatBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 5) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", value, kUnits[unit]);
}

std::string FormatHealth(bool daemon_serving, bool service_serving, bool json) {
  if (json) {
    return absl::StrCat("{\"daemon\":\"", daemon_serving ? "SERVING" : "NOT_SERVING",
                        "\",\"gpucmd.v1.GpuCommand\":\"",
                        service_serving ? "SERVING" : "NOT_SERVING", "\"}\n");
  }
  return absl::StrCat("daemon: ", daemon_serving ? "SERVING" : "NOT_SERVING",
                      "\ngpucmd.v1.GpuCommand: ",
                      service_serving ? "SERVING" : "NOT_SERVING", "\n");
}

std::string FormatDevices(const std::vector<v1::DeviceInfo>& devices, bool json) {
  if (json) {
    v1::ListDevicesResponse response;
    for (const v1::DeviceInfo& device : devices) *response.add_devices() = device;
    return ToJson(response);
  }
  std::string out = absl::StrFormat("%-4s %-28s %-6s %-8s %12s %12s %s\n", "DEV", "NAME",
                                    "DRIVER", "ARCH", "MEMORY", "USED", "READY");
  for (const v1::DeviceInfo& device : devices) {
    absl::StrAppend(&out, absl::StrFormat("%-4d %-28s %-6s %-8s %12s %12s %s\n",
                                          device.ordinal(), device.name(),
                                          DriverName(device.driver()), device.architecture(),
                                          FormatBytes(device.memory_capacity_bytes()),
                                          FormatBytes(device.memory_used_bytes()),
                                          device.ready() ? "yes" : "no"));
  }
  return out;
}

std::string FormatStats(const v1::GetStatsResponse& stats, bool json) {
  if (json) return ToJson(stats);
  std::string out = absl::StrCat("gpucmdd ", stats.version(), ", up ", stats.uptime_seconds(),
                                 " s, ", stats.sessions_open(), " session(s) open\n");
  absl::StrAppend(&out, absl::StrFormat("%-4s %12s %12s %12s %7s %9s %10s %12s %11s\n", "DEV",
                                        "CAPACITY", "USED", "RESERVED", "QUEUED", "IN-FLIGHT",
                                        "ON-STREAMS", "DROP-QUEUE", "RELOCATIONS"));
  for (const v1::DeviceStats& device : stats.devices()) {
    absl::StrAppend(
        &out, absl::StrFormat("%-4d %12s %12s %12s %7d %9d %10d %12s %11d\n", device.device(),
                              FormatBytes(device.memory_capacity_bytes()),
                              FormatBytes(device.memory_used_bytes()),
                              FormatBytes(device.memory_reserved_bytes()),
                              device.queue_depth(), device.commands_in_flight(),
                              device.stream_queued_commands(),
                              FormatBytes(device.drop_queue_bytes()), device.relocations()));
  }
  if (stats.has_session()) {
    const v1::SessionStats& session = stats.session();
    absl::StrAppend(&out, "session \"", session.client_name(), "\" on device ",
                    session.device(), ": ", session.buffers(), " buffer(s), ",
                    FormatBytes(session.memory_used_bytes()), ", ", session.queued_commands(),
                    " queued\n");
  }
  return out;
}

std::string MessageJson(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  // Serialising a well-formed message cannot fail.
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

std::string JsonString(const std::string& text) {
  google::protobuf::Value value;
  value.set_string_value(text);
  return MessageJson(value);
}

std::string TerminalText(const std::string& text, size_t width) {
  std::string shown = text.size() > width && width > 0 ? text.substr(0, width - 1) + "~" : text;
  for (char& c : shown) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return shown;
}

std::string SessionScope(const v1::ListSessionsResponse& sessions) {
  if (sessions.all_clients()) return "every client";
  if (sessions.caller().empty()) {
    return "none: the daemon cannot tell who you are on this connection (use the Unix "
           "socket or a TLS client certificate)";
  }
  return absl::StrCat("those of ", sessions.caller(), " (an administrator sees every client's)");
}

std::string FormatSessions(const v1::ListSessionsResponse& sessions, bool json) {
  if (json) return ToJson(sessions);
  std::string out = absl::StrCat(sessions.sessions_size(), " session(s); shown: ",
                                 SessionScope(sessions), "\n");
  if (sessions.omitted() > 0) {
    absl::StrAppend(&out, sessions.omitted(),
                    " more not listed (the reply's size limit, limits.max_message_bytes)\n");
  }
  absl::StrAppend(&out, absl::StrFormat("%-8s %-24s %-4s %-16s %12s %8s %7s %10s %8s\n", "ID",
                                        "CLIENT", "DEV", "OWNER", "MEMORY", "BUFFERS", "QUEUED",
                                        "LAUNCHES", "AGE"));
  for (const v1::SessionSummary& session : sessions.sessions()) {
    absl::StrAppend(&out, absl::StrFormat("%-8d %-24s %-4d %-16s %12s %8d %7d %10d %7ds\n",
                                          session.id(), TerminalText(session.client_name(), 24),
                                          session.device(),
                                          TerminalText(session.owner().empty() ? "-" : session.owner(), 16),
                                          FormatBytes(session.memory_used_bytes()),
                                          session.buffers(), session.queued_commands(),
                                          session.launches(), session.age_seconds()));
  }
  return out;
}

}  // namespace gpucmd
