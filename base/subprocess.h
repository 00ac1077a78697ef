#ifndef GPUCMDD_BASE_SUBPROCESS_H_
#define GPUCMDD_BASE_SUBPROCESS_H_

// Running a program without a shell: argv as given, in a chosen directory, its stdout and
// stderr into a file, killed when it runs past a time limit.

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gpucmd {

struct ProcessResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
};

// Runs argv[0] (searched in PATH when it has no slash). NOT_FOUND when it cannot be
// started, DEADLINE_EXCEEDED (after killing it) when it runs past `timeout`.
absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                         const std::string& working_directory,
                                         const std::string& output_path,
                                         std::chrono::milliseconds timeout);

// The absolute path of `program` found in PATH; NOT_FOUND otherwise.
absl::StatusOr<std::string> FindInPath(const std::string& program);

}  // namespace gpucmd

#endif  // GPUCMDD_BASE_SUBPROCESS_H_
