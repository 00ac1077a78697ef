#include "driver/half_math_functions.h"

namespace gpucmd {

const char* HalfMathFunctions() {
  return R"LIST(
#ifndef GPUCMD_HALF_MATH_FUNCTIONS
#define GPUCMD_HALF_MATH_FUNCTIONS(F)                                                    \
  F(sqrt, sqrtf(x)) F(rsqrt, 1.0f / sqrtf(x)) F(rcp, 1.0f / x) F(exp, expf(x))          \
  F(exp2, exp2f(x)) F(exp10, exp10f(x)) F(log, logf(x)) F(log2, log2f(x))               \
  F(log10, log10f(x)) F(sin, sinf(x)) F(cos, cosf(x)) F(floor, floorf(x))               \
  F(ceil, ceilf(x)) F(trunc, truncf(x)) F(rint, rintf(x))
#endif
)LIST";
}

}  // namespace gpucmd
