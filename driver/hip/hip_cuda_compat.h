#ifndef GPUCMDD_DRIVER_HIP_HIP_CUDA_COMPAT_H_
#define GPUCMDD_DRIVER_HIP_HIP_CUDA_COMPAT_H_

// CUDA's spellings that HIP (Debian's ROCm 5.2) lacks, in HIP's terms, so that the same
// kernel sources build with hiprtc: the _sync warp primitives over HIP's maskless ones
// (the first 32 lanes of a 64-lane wavefront are a CUDA warp's), the 16-bit atomicCAS,
// 64-bit signed atomicMin/atomicMax, the _block atomics, hrcp/h2rcp (HIP's do not
// link), and the SIMD intrinsics (driver/simd_intrinsics.h). hiprtc compiles the prelude ahead of
// the client's source, whose lines keep their numbers; <cuda_fp16.h> is empty there (hiprtc
// declares HIP's half-precision types itself).

#include "absl/strings/string_view.h"

namespace gpucmd {

absl::string_view HipCudaCompatPrelude();

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_HIP_HIP_CUDA_COMPAT_H_
