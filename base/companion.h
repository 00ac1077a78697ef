#ifndef GPUCMDD_BASE_COMPANION_H_
#define GPUCMDD_BASE_COMPANION_H_

// Programs the daemon starts (the kernel executor, the compile helpers) and where they
// are: installed next to the daemon, in a Bazel output tree beside it, or in its
// runfiles.

#include <string>

#include "absl/status/statusor.h"

namespace gpucmd {

// This process's executable.
std::string SelfPath();

// The absolute path of program `name`, built in Bazel package `package` (e.g.
// "driver/cpu"), for the daemon at `daemon_path`. NOT_FOUND naming the places tried.
absl::StatusOr<std::string> FindCompanionProgram(const std::string& name,
                                                 const std::string& package,
                                                 const std::string& daemon_path);

}  // namespace gpucmd

#endif  // GPUCMDD_BASE_COMPANION_H_
