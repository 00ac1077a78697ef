#ifndef GPUCMDD_DRIVER_BFLOAT16_HEADER_H_
#define GPUCMDD_DRIVER_BFLOAT16_HEADER_H_

// <cuda_bf16.h> for the drivers whose toolkit has none a CUDA kernel can use (the CPU
// driver; HIP, whose bfloat16 type differs): __nv_bfloat16 and __nv_bfloat162 with
// CUDA's conversions, arithmetic and comparisons, written in portable device C++ (no
// includes). NVRTC uses the CUDA toolkit's own.

namespace gpucmd {

// The header's contents.
const char* BFloat16Header();

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_BFLOAT16_HEADER_H_
