#ifndef GPUCMDD_DRIVER_HIP_HIPRTC_COMPILER_H_
#define GPUCMDD_DRIVER_HIP_HIPRTC_COMPILER_H_

// Compiles a CUDA C++ kernel with hiprtc into a code object for an AMD GPU architecture
// (e.g. "gfx90a"). Works without a GPU.

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gpucmd {

// Builds `entry` of `source` for `architecture` into `output_path`; returns hiprtc's log
// (warnings). INVALID_ARGUMENT with the log on compile errors.
absl::StatusOr<std::string> CompileWithHiprtc(const std::string& source,
                                              const std::string& entry,
                                              const std::vector<std::string>& options,
                                              const std::string& architecture,
                                              const std::string& output_path,
                                              size_t max_log_bytes);

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_HIP_HIPRTC_COMPILER_H_
