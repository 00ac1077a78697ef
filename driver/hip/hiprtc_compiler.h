#ifndef GPUCMDD_DRIVER_HIP_HIPRTC_COMPILER_H_
#define GPUCMDD_DRIVER_HIP_HIPRTC_COMPILER_H_

// Compiles a CUDA C++ kernel with hiprtc into a code object for an AMD GPU architecture
// (e.g. "gfx90a"). Works without a GPU.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "driver/kernel_signature.h"

namespace gpucmd {

// Builds `entry` of `source` for `architecture` into `output_path`. INVALID_ARGUMENT
// with hiprtc's log on compile errors.
absl::StatusOr<CompileOutput> CompileWithHiprtc(const std::string& source,
                                                const std::string& entry,
                                                const std::vector<std::string>& options,
                                                const std::string& architecture,
                                                const std::string& output_path,
                                                size_t max_log_bytes);

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_HIP_HIPRTC_COMPILER_H_
