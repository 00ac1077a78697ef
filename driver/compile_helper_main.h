#ifndef GPUCMDD_DRIVER_COMPILE_HELPER_MAIN_H_
#define GPUCMDD_DRIVER_COMPILE_HELPER_MAIN_H_

// The body of a compile helper program (Note [Compile helper] in
// driver/compile_helper.h): parses its arguments, reads the source, calls the vendor's
// compiler in this process and reports the outcome by the protocol.

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gpucmd {

// Builds `entry` of `source` for `target` into `output_path`; returns the compile log
// (warnings), cut at `max_log_bytes`.
using HelperCompiler = absl::StatusOr<std::string> (*)(
    const std::string& source, const std::string& entry, const std::vector<std::string>& options,
    const std::string& target, const std::string& output_path, size_t max_log_bytes);

// main() of a helper built on `compile`.
int RunCompileHelper(int argc, char** argv, HelperCompiler compile);

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_COMPILE_HELPER_MAIN_H_
