#ifndef GPUCMDD_SERVER_CONFIG_H_
#define GPUCMDD_SERVER_CONFIG_H_

// Loading, defaulting and validating the daemon's configuration (a text-format
// gpucmd.v1.DaemonConfig). Errors name the file and the offending field so an operator
// can fix the file without reading code.

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpucmd/v1/config.pb.h"

namespace gpucmd {

// Reads and parses `path`. NOT_FOUND / PERMISSION_DENIED when it cannot be read,
// INVALID_ARGUMENT (naming the file, line and field) when it does not parse.
absl::StatusOr<v1::DaemonConfig> LoadConfigFile(const std::string& path);

// Parses `contents` (text format); INVALID_ARGUMENT naming `source`, the line and the
// field when it does not parse.
absl::StatusOr<v1::DaemonConfig> ParseConfigText(const std::string& contents,
                                                 absl::string_view source);

// Fills every absent field with its documented default (see config.proto).
void ApplyConfigDefaults(v1::DaemonConfig* config);

// Checks a defaulted config; INVALID_ARGUMENT naming the field when a value is unusable.
absl::Status ValidateConfig(const v1::DaemonConfig& config);

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_CONFIG_H_
