#ifndef GPUCMDD_BASE_FILE_H_
#define GPUCMDD_BASE_FILE_H_

// Whole-file reads and atomic whole-file writes.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpucmd {

// The file's bytes; empty when it cannot be read.
std::string ReadFileOrEmpty(const std::string& path);

// The bytes of the regular file at `path` (a configuration, a certificate), whose
// messages start with the path. NOT_FOUND or PERMISSION_DENIED when it cannot be opened;
// INVALID_ARGUMENT when it is not a regular file (a directory, a device such as
// /dev/zero, a pipe) or holds more than `max_bytes`.
absl::StatusOr<std::string> ReadRegularFile(const std::string& path, uint64_t max_bytes);

// Writes `contents` to `path` through a temporary file renamed into place, so readers
// never see a partial file. INTERNAL naming the path on failure.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

}  // namespace gpucmd

#endif  // GPUCMDD_BASE_FILE_H_
