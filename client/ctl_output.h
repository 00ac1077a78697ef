#ifndef GPUCMDD_CLIENT_CTL_OUTPUT_H_
#define GPUCMDD_CLIENT_CTL_OUTPUT_H_

// gpucmdctl's renderings of daemon answers: human-readable tables, or JSON for scripts.

#include <string>
#include <vector>

#include "gpucmd/v1/gpucmd.pb.h"

namespace gpucmd {

// "1.5 GiB", "512 B": binary units, one decimal.
std::string FormatBytes(uint64_t bytes);

std::string FormatHealth(bool daemon_serving, bool service_serving, bool json);
std::string FormatDevices(const std::vector<v1::DeviceInfo>& devices, bool json);
std::string FormatStats(const v1::GetStatsResponse& stats, bool json);
// `gpucmdctl sessions`: whose sessions these are, then one row (or JSON object) each.
std::string FormatSessions(const v1::ListSessionsResponse& sessions, bool json);
// Whose sessions a listing shows: "every client", "those of uid:1000", or why none.
std::string SessionScope(const v1::ListSessionsResponse& sessions);
// `text` fit for a terminal column of `width`: bytes that are not printable ASCII (a
// client's name may carry escape sequences) become '?', and a longer text is cut,
// ending in '~'.
std::string TerminalText(const std::string& text, size_t width);
// `message` as one line of JSON (field names as in the .proto), no newline.
std::string MessageJson(const google::protobuf::Message& message);
// `text` as a JSON string, quoted and escaped.
std::string JsonString(const std::string& text);

}  // namespace gpucmd

#endif  // GPUCMDD_CLIENT_CTL_OUTPUT_H_
