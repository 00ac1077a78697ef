#ifndef GPUCMDD_DRIVER_HALF_MIN_MAX_H_
#define GPUCMDD_DRIVER_HALF_MIN_MAX_H_

// CUDA's __hmax and __hmin as device C++ over the half type's own conversions
// (__half2float, __half_as_ushort, __ushort_as_half), for the drivers whose half header
// lacks them or lacks their semantics (the CPU driver; HIP 5.2): a NaN loses to a number
// (two NaNs give the canonical NaN), and +0 is greater than -0. Defined under names of
// their own and mapped by macros, so that a header that has them keeps its own while
// kernels get these.

namespace gpucmd {

// The definitions, to follow the half type's declaration.
const char* HalfMinMaxDefinitions();

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_HALF_MIN_MAX_H_
