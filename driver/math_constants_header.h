#ifndef GPUCMDD_DRIVER_MATH_CONSTANTS_HEADER_H_
#define GPUCMDD_DRIVER_MATH_CONSTANTS_HEADER_H_

// <math_constants.h> for the drivers whose toolkit has none a CUDA kernel can include
// (the CPU driver; HIP): CUDA's CUDART_* constants in float (the _F ones) and double, the
// same bits as the CUDA toolkit's, without its _HI/_LO splits for argument reduction.

namespace gpucmd {

// The header's contents.
const char* MathConstantsHeader();

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_MATH_CONSTANTS_HEADER_H_
