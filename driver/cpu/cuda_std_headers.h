#ifndef GPUCMDD_DRIVER_CPU_CUDA_STD_HEADERS_H_
#define GPUCMDD_DRIVER_CPU_CUDA_STD_HEADERS_H_

// libcu++'s headers as the CPU driver provides them, so that kernels written against
// CUDA's standard library (`#include <cuda/std/atomic>`, `cuda::atomic_ref`), which
// NVRTC finds in the toolkit, build here too. A kernel's threads run on the host, so
// `cuda::std` is the host's standard library (C++17), with what libcu++ adds to it in
// C++17 declared here: std::atomic_ref, the <bit> functions, std::span, and in
// <cuda/atomic> the scoped `cuda::atomic` and `cuda::atomic_ref` with fetch_min and
// fetch_max (every scope is the whole device's: the blocks share memory), and
// <cuda/functional>'s maximum and minimum and <cuda/cmath>'s ceil_div, round_up,
// round_down, ilog2 and ilog10. HIP 5.2 has no libcu++.

#include <string>
#include <utility>
#include <vector>

namespace gpucmd {

// (path below the include directory, contents) of every header.
const std::vector<std::pair<std::string, std::string>>& CudaStdHeaders();

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_CPU_CUDA_STD_HEADERS_H_
