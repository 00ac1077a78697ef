#ifndef GPUCMDD_DRIVER_CPU_CPU_PRELUDE_H_
#define GPUCMDD_DRIVER_CPU_CPU_PRELUDE_H_

// The C++ prelude that lets the host compiler build CUDA C++ kernels for the CPU driver,
// and the translation unit built around the client's source.

#include <string>

#include "absl/strings/string_view.h"
#include "driver/kernel_signature.h"

namespace gpucmd {

// threadIdx/blockIdx/blockDim/gridDim, __device__/__global__/__shared__ and the other
// qualifiers, __syncthreads, the atomics, min/max and the CUDA math functions.
absl::string_view CpuKernelPrelude();

// The whole translation unit for `entry` in `source`, as the kernel front end `parsed`
// it: the prelude, the client's source (its `extern __shared__ T name[]` declarations
// made per-block dynamic shared memory, its lines where they were), and the module's
// exports (kernel_abi.h), which run the block's threads as fibers when they meet.
std::string CpuKernelTranslationUnit(absl::string_view source, absl::string_view entry,
                                     const ParsedKernel& parsed);

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_CPU_CPU_PRELUDE_H_
