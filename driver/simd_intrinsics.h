#ifndef GPUCMDD_DRIVER_SIMD_INTRINSICS_H_
#define GPUCMDD_DRIVER_SIMD_INTRINSICS_H_

// CUDA's SIMD intrinsics as device C++, for the drivers that lack them (the CPU driver's
// prelude and HIP's CUDA spellings): __vadd2, __vabsdiffu4, __vcmpgts2, __vsads4 and the
// rest, each on the two 16-bit halves (…2) or the four bytes (…4) of 32-bit words, lane
// by lane as PTX's SIMD video instructions define them (vadd2, vavrg4, vset2, ...):
// lanes wrap unless the name says they saturate (ss: to the signed range, us: to the
// unsigned one); a signed rounded average rounds halves away from zero (vavrg), an
// unsigned one up, __vhaddu truncates; a comparison gives all ones in each lane that
// holds (__vcmp…) or 1 (__vset…); __vsads and __vsadu sum the lanes' absolute
// differences into one word. And Hopper's DPX intrinsics (__vimax3_s32, __viaddmin_u16x2,
// __vibmax_s16x2 and the rest), on ints or on the halves of words, as CUDA documents them.

namespace gpucmd {

// The definitions; they use nothing but the language.
const char* SimdIntrinsicDefinitions();

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_SIMD_INTRINSICS_H_
