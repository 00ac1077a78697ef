#ifndef GPUCMDD_BASE_SUBPROCESS_H_
#define GPUCMDD_BASE_SUBPROCESS_H_

// Running a program without a shell: argv as given, in a chosen directory, its stdout and
// stderr into a file, in a process group of its own that is killed as a whole at the
// time limit (and when the program ends, so nothing it started outlives it), under
// resource limits and optionally a sandbox (Note [Sandbox] in base/sandbox.h).

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/sandbox.h"

namespace gpucmd {

struct ProcessResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
};

struct ProcessLimits {
  std::chrono::milliseconds timeout{60'000};
  uint64_t address_space_bytes = 0;  // per process (RLIMIT_AS); 0: unlimited
  uint64_t cpu_seconds = 0;          // per process (RLIMIT_CPU); 0: unlimited
  const Sandbox* sandbox = nullptr;  // enforced in the child before exec; must outlive the call
  // "NAME=value" entries; empty: the caller's environment.
  std::vector<std::string> environment;
};

// Runs argv[0] (searched in PATH when it has no slash). NOT_FOUND when it cannot be
// started; RESOURCE_EXHAUSTED, after killing its process group, when it runs past the
// time limit; INTERNAL when the sandbox cannot be enforced (it does not run then).
absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                         const std::string& working_directory,
                                         const std::string& output_path,
                                         const ProcessLimits& limits);

// The absolute path of `program` found in PATH; NOT_FOUND otherwise.
absl::StatusOr<std::string> FindInPath(const std::string& program);

}  // namespace gpucmd

#endif  // GPUCMDD_BASE_SUBPROCESS_H_
