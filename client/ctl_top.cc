#include "client/ctl_top.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/ctl_output.h"

namespace gpucmd {
namespace {

constexpr int kBarWidth = 20;

// Per second, from two readings of a counter; 0 when it went back (a restarted daemon).
double Rate(uint64_t before, uint64_t now, double seconds) {
  return now >= before && seconds > 0 ? static_cast<double>(now - before) / seconds : 0;
}

// [####++......]: used, reserved but free, free.
std::string MemoryBar(const v1::DeviceStats& device) {
  const double capacity = std::max<double>(1, static_cast<double>(device.memory_capacity_bytes()));
  const int used = static_cast<int>(std::lround(kBarWidth * device.memory_used_bytes() / capacity));
  const int reserved = std::max(
      used, static_cast<int>(std::lround(kBarWidth * device.memory_reserved_bytes() / capacity)));
  return absl::StrCat("[", std::string(used, '#'), std::string(reserved - used, '+'),
                      std::string(kBarWidth - reserved, '.'), "]");
}

struct DeviceRates {
  double launches, bytes_in, bytes_out, bytes_device;
};

DeviceRates RatesOf(const TopSample& before, const v1::DeviceStats& now, double seconds) {
  v1::DeviceStats earlier;  // a device absent before counts from zero
  for (const v1::DeviceStats& device : before.stats.devices()) {
    if (device.device() == now.device()) earlier = device;
  }
  return {Rate(earlier.launches(), now.launches(), seconds),
          Rate(earlier.bytes_host_to_device(), now.bytes_host_to_device(), seconds),
          Rate(earlier.bytes_device_to_host(), now.bytes_device_to_host(), seconds),
          Rate(earlier.bytes_device_to_device(), now.bytes_device_to_device(), seconds)};
}

bool ReadyOf(const TopSample& sample, uint32_t device) {
  for (const v1::DeviceInfo& info : sample.devices) {
    if (info.ordinal() == device) return info.ready();
  }
  return false;
}

// Launches per second of `now`, by the same session's count in `before` (from zero
// for a session new since).
double LaunchRate(const TopSample& before, const v1::SessionSummary& now, double seconds) {
  for (const v1::SessionSummary& earlier : before.sessions.sessions()) {
    if (earlier.id() == now.id()) return Rate(earlier.launches(), now.launches(), seconds);
  }
  return Rate(0, now.launches(), seconds);
}

struct SessionRow {
  const v1::SessionSummary* session;
  double launches_per_second;
};

// The sessions of `now`, busiest first (launch rate, then memory).
std::vector<SessionRow> SessionRows(const TopSample& before, const TopSample& now,
                                    double seconds) {
  std::vector<SessionRow> rows;
  for (const v1::SessionSummary& session : now.sessions.sessions()) {
    rows.push_back({&session, LaunchRate(before, session, seconds)});
  }
  std::stable_sort(rows.begin(), rows.end(), [](const SessionRow& a, const SessionRow& b) {
    if (a.launches_per_second != b.launches_per_second) {
      return a.launches_per_second > b.launches_per_second;
    }
    return a.session->memory_used_bytes() > b.session->memory_used_bytes();
  });
  return rows;
}

}  // namespace

std::string FormatRate(double per_second) {
  static constexpr const char* kPrefixes[] = {"", " k", " M", " G", " T"};
  int prefix = 0;
  while (per_second >= 1000 && prefix < 4) {
    per_second /= 1000;
    ++prefix;
  }
  return absl::StrFormat(prefix == 0 ? "%.0f%s" : "%.1f%s", per_second, kPrefixes[prefix]);
}

std::string FormatTopFrame(const TopSample& before, const TopSample& now, double seconds,
                           bool json) {
  const v1::GetStatsResponse& stats = now.stats;
  std::string out;
  if (json) {
    absl::StrAppend(&out, "{\"uptime_seconds\":", stats.uptime_seconds(),
                    ",\"sessions_open\":", stats.sessions_open(),
                    ",\"interval_seconds\":", absl::StrFormat("%.3f", seconds), ",\"devices\":[");
    for (int i = 0; i < stats.devices_size(); ++i) {
      const v1::DeviceStats& device = stats.devices(i);
      const DeviceRates rates = RatesOf(before, device, seconds);
      absl::StrAppend(
          &out, i == 0 ? "" : ",", "{\"device\":", device.device(),
          ",\"ready\":", ReadyOf(now, device.device()) ? "true" : "false",
          ",\"queue_depth\":", device.queue_depth(),
          ",\"commands_in_flight\":", device.commands_in_flight(),
          ",\"stream_queued_commands\":", device.stream_queued_commands(),
          ",\"memory_used_bytes\":", device.memory_used_bytes(),
          ",\"memory_reserved_bytes\":", device.memory_reserved_bytes(),
          ",\"memory_capacity_bytes\":", device.memory_capacity_bytes(),
          ",\"drop_queue_bytes\":", device.drop_queue_bytes(), ",\"sessions\":", device.sessions(),
          absl::StrFormat(",\"launches_per_second\":%.1f,\"bytes_in_per_second\":%.0f,"
                          "\"bytes_out_per_second\":%.0f,\"bytes_on_device_per_second\":%.0f}",
                          rates.launches, rates.bytes_in, rates.bytes_out, rates.bytes_device));
    }
    absl::StrAppend(&out, "],\"all_clients\":", now.sessions.all_clients() ? "true" : "false",
                    ",\"sessions_omitted\":", now.sessions.omitted(), ",\"sessions\":[");
    const std::vector<SessionRow> rows = SessionRows(before, now, seconds);
    for (size_t i = 0; i < rows.size(); ++i) {
      absl::StrAppend(&out, i == 0 ? "" : ",", "{\"session\":", MessageJson(*rows[i].session),
                      absl::StrFormat(",\"launches_per_second\":%.1f}", rows[i].launches_per_second));
    }
    return out + "]}\n";
  }
  absl::StrAppend(&out, "gpucmd top: gpucmdd ", stats.version(), ", up ", stats.uptime_seconds(),
                  " s, ", stats.sessions_open(), " session(s) open, every ",
                  absl::StrFormat("%.1f", seconds), " s\n");
  absl::StrAppend(&out,
                  absl::StrFormat("%-4s %-5s %6s %9s %10s %-22s %21s %10s %8s %10s %10s %10s\n",
                                  "DEV", "READY", "QUEUE", "IN-FLIGHT", "ON-STREAMS", "MEMORY",
                                  "USED/CAPACITY", "DROP-QUEUE", "SESSIONS", "LAUNCH/S",
                                  "IN B/S", "OUT B/S"));
  for (const v1::DeviceStats& device : stats.devices()) {
    const DeviceRates rates = RatesOf(before, device, seconds);
    absl::StrAppend(
        &out, absl::StrFormat(
                  "%-4d %-5s %6d %9d %10d %-22s %21s %10s %8d %10s %10s %10s\n",
                  device.device(), ReadyOf(now, device.device()) ? "yes" : "no",
                  device.queue_depth(), device.commands_in_flight(),
                  device.stream_queued_commands(), MemoryBar(device),
                  absl::StrCat(FormatBytes(device.memory_used_bytes()), "/",
                               FormatBytes(device.memory_capacity_bytes())),
                  FormatBytes(device.drop_queue_bytes()), device.sessions(),
                  FormatRate(rates.launches), FormatRate(rates.bytes_in),
                  FormatRate(rates.bytes_out)));
  }
  const std::vector<SessionRow> rows = SessionRows(before, now, seconds);
  absl::StrAppend(&out, "\nSESSIONS: ", SessionScope(now.sessions), "\n");
  absl::StrAppend(&out, absl::StrFormat("%-8s %-24s %-4s %-16s %12s %7s %10s\n", "ID", "CLIENT",
                                        "DEV", "OWNER", "MEMORY", "QUEUED", "LAUNCH/S"));
  for (size_t i = 0; i < rows.size() && i < kTopSessionRows; ++i) {
    const v1::SessionSummary& session = *rows[i].session;
    absl::StrAppend(
        &out, absl::StrFormat("%-8d %-24s %-4d %-16s %12s %7d %10s\n", session.id(),
                              TerminalText(session.client_name(), 24), session.device(),
                              TerminalText(session.owner().empty() ? "-" : session.owner(), 16),
                              FormatBytes(session.memory_used_bytes()),
                              session.queued_commands(), FormatRate(rows[i].launches_per_second)));
  }
  const uint64_t unlisted =
      rows.size() - std::min<size_t>(rows.size(), kTopSessionRows) + now.sessions.omitted();
  if (unlisted > 0) absl::StrAppend(&out, "... and ", unlisted, " more\n");
  return out;
}

}  // namespace gpucmd
