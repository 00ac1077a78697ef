#ifndef GPUCMDD_DRIVER_CUDA_NVRTC_COMPILER_H_
#define GPUCMDD_DRIVER_CUDA_NVRTC_COMPILER_H_

// Compiles a CUDA C++ kernel with NVRTC: a CUBIN for the device's compute capability, or,
// when this NVRTC does not know that architecture (a GPU newer than the toolkit), PTX
// for the newest virtual architecture it knows, which the driver JIT-compiles at load.
// Works without a GPU.

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gpucmd {

struct NvrtcOptions {
  size_t max_log_bytes = 64 << 10;
};

// The architectures this NVRTC can build CUBINs for, e.g. {75, 80, 86, 89, 90, ...}.
std::vector<int> NvrtcSupportedArchitectures();

// Builds `entry` of `source` for compute capability `architecture` (e.g. 90 for sm_90)
// into `output_path` (CUBIN, or PTX when the architecture is newer than NVRTC knows;
// *produced_ptx says which); returns NVRTC's log (warnings). INVALID_ARGUMENT with the
// log on compile errors.
absl::StatusOr<std::string> CompileWithNvrtc(const std::string& source,
                                             const std::string& entry,
                                             const std::vector<std::string>& options,
                                             int architecture, const std::string& output_path,
                                             const NvrtcOptions& nvrtc, bool* produced_ptx);

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_CUDA_NVRTC_COMPILER_H_
