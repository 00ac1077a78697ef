#ifndef GPUCMDD_DRIVER_COMPILE_HELPER_H_
#define GPUCMDD_DRIVER_COMPILE_HELPER_H_

// Note [Compile helper]
// ~~~~~~~~~~~~~~~~~~~~~
// NVRTC and hiprtc are libraries: called by the daemon, they would parse hostile source
// inside the daemon's process, with its files, its memory and no limits. The GPU
// drivers therefore compile through a helper program (gpucmd-nvrtc-helper,
// gpucmd-hiprtc-helper) that the daemon runs the way the CPU driver runs the host C++
// compiler (driver/compile_sandbox.h): in a private directory, sandboxed so that it can
// read only the system's software directories (the toolkit, libraries, headers) and its
// own, with address-space and CPU limits, its process group killed at the time limit.
// An `#include` of anything else fails to open, naming the line and nothing of the file.
//
// The kernel front end (gpucmd-kernel-front-end) runs the same way and speaks the same
// protocol, its image being the parse. The protocol, which RunCompileHelper
// (compile_helper_main.h) implements:
//
//   HELPER DIRECTORY ENTRY TARGET MAX_LOG_BYTES [OPTION...]
//
// compiles DIRECTORY/kernel.cu for TARGET (the driver's architecture) with the client's
// OPTIONs into DIRECTORY/kernel.image, and exits with the absl status code of the
// outcome: 0 with the compiler's log on stdout, or the code with the status message (a
// compile error carries the log) on stderr.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "driver/compile_sandbox.h"
#include "driver/kernel_signature.h"

namespace gpucmd {

struct CompileHelper {
  std::string path;  // the helper program
  CompileLimits limits;
};

struct HelperOutput {
  std::string log;    // the compiler's warnings
  std::string image;  // what the helper made
};

// Runs `helper` on `entry` of `source` for `target` with the client's `options`.
// The helper's status when it fails (a compile error is INVALID_ARGUMENT with the log);
// RESOURCE_EXHAUSTED past a limit, naming it; FAILED_PRECONDITION when it cannot start.
absl::StatusOr<HelperOutput> RunHelper(const CompileHelper& helper, const std::string& source,
                                       const std::string& entry,
                                       const std::vector<std::string>& options,
                                       const std::string& target);

// Reads `entry` of `source` through the kernel front end (gpucmd-kernel-front-end, Note
// [Kernel front end] in driver/front_end/kernel_parser.h). INVALID_ARGUMENT for a
// missing or malformed entry point, with the line; otherwise as RunHelper.
absl::StatusOr<ParsedKernel> ParseWithFrontEnd(const CompileHelper& front_end,
                                               const std::string& source,
                                               const std::string& entry,
                                               const std::vector<std::string>& options);

// Builds `entry` of `source` for `target` through `helper` into `output_path` (written
// atomically), its parameters read by `front_end` first. Fails as ParseWithFrontEnd and
// RunHelper do.
absl::StatusOr<CompileOutput> CompileWithHelper(const CompileHelper& front_end,
                                                const CompileHelper& helper,
                                                const std::string& source,
                                                const std::string& entry,
                                                const std::vector<std::string>& options,
                                                const std::string& target,
                                                const std::string& output_path);

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_COMPILE_HELPER_H_
