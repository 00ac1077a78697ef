#ifndef GPUCMDD_DRIVER_CPU_CPU_PRELUDE_H_
#define GPUCMDD_DRIVER_CPU_CPU_PRELUDE_H_

// The C++ prelude that lets the host compiler build CUDA C++ kernels for the CPU driver,
// and the source rewriting that goes with it.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpucmd {

// threadIdx/blockIdx/blockDim/gridDim, __device__/__global__/__shared__ and the other
// qualifiers, __syncthreads, the atomics, min/max and the CUDA math functions.
absl::string_view CpuKernelPrelude();

// The whole translation unit for `entry` in `source`: the prelude, the client's source
// (with `extern __shared__ T name[];` made per-block dynamic shared memory), and the
// module's exports (kernel_abi.h). INVALID_ARGUMENT naming the feature when the source
// uses what the CPU driver cannot run: inline PTX, textures and surfaces.
absl::StatusOr<std::string> CpuKernelTranslationUnit(absl::string_view source,
                                                     absl::string_view entry);

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_CPU_CPU_PRELUDE_H_
