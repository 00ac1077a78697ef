#ifndef GPUCMDD_BASE_FILE_H_
#define GPUCMDD_BASE_FILE_H_

// Whole-file reads and atomic whole-file writes.

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gpucmd {

// The file's bytes; empty when it cannot be read.
std::string ReadFileOrEmpty(const std::string& path);

// Writes `contents` to `path` through a temporary file renamed into place, so readers
// never see a partial file. INTERNAL naming the path on failure.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

}  // namespace gpucmd

#endif  // GPUCMDD_BASE_FILE_H_
