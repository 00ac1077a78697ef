#ifndef GPUCMDD_DRIVER_CPU_CPU_HEADERS_H_
#define GPUCMDD_DRIVER_CPU_CPU_HEADERS_H_

// The CUDA headers kernels commonly include, as the CPU driver provides them: the CPU
// compiler puts them on the kernel's include path, so `#include <cooperative_groups.h>`
// resolves as it does under NVRTC. They build on the prelude (driver/cpu/cpu_prelude.h),
// which comes first in every translation unit.

#include <string>
#include <utility>
#include <vector>

namespace gpucmd {

// (path below the include directory, contents) of every header.
const std::vector<std::pair<std::string, std::string>>& CpuKernelHeaders();

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_CPU_CPU_HEADERS_H_
