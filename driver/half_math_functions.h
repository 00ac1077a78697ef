#ifndef GPUCMDD_DRIVER_HALF_MATH_FUNCTIONS_H_
#define GPUCMDD_DRIVER_HALF_MATH_FUNCTIONS_H_

// CUDA's math functions on the half-precision types (hsqrt, hexp2, hrint...), as one list
// that the CPU driver's <cuda_fp16.h> and the shared <cuda_bf16.h> each turn into their
// type's h<name> and h2<name>: GPUCMD_HALF_MATH_FUNCTIONS(F) calls F(name, expression)
// for each, the expression computing it in float from `x`.

namespace gpucmd {

// The list's definition, guarded so that both headers may include it.
const char* HalfMathFunctions();

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_HALF_MATH_FUNCTIONS_H_
