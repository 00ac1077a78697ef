#ifndef GPUCMDD_DRIVER_COMPILE_OPTIONS_H_
#define GPUCMDD_DRIVER_COMPILE_OPTIONS_H_

// The compile options a client may pass, the same on every driver: -DNAME[=VALUE],
// -UNAME, -O0..-O3 and --use_fast_math. Each driver says how its compiler spells them.

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gpucmd {

struct CompilerSpelling {
  std::string fast_math;           // e.g. "-ffast-math", "--use_fast_math"
  bool passes_optimization = true;  // false: -O levels are accepted and dropped
};

// The client's options in the compiler's spelling; INVALID_ARGUMENT naming any other.
absl::StatusOr<std::vector<std::string>> TranslateCompileOptions(
    const std::vector<std::string>& options, const CompilerSpelling& spelling);

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_COMPILE_OPTIONS_H_
