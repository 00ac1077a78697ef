#include "driver/bfloat16_header.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "driver/half_math_functions.h"

namespace gpucmd {
namespace {

constexpr char kHeaderBegin[] = R"HEADER(#pragma once
// bfloat16: the upper 16 bits of an IEEE binary32. Arithmetic is done in float and
// rounded back to the nearest bfloat16 (ties to even), as CUDA's _rn operations.

__host__ __device__ inline unsigned short gpucmd_float_to_bfloat16_bits(float f) {
  unsigned int bits;
  __builtin_memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<unsigned short>((bits >> 16) | 0x40u);  // a quiet NaN stays one
  }
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<unsigned short>(bits >> 16);
}
__host__ __device__ inline float gpucmd_bfloat16_bits_to_float(unsigned short bits) {
  const unsigned int wide = static_cast<unsigned int>(bits) << 16;
  float f;
  __builtin_memcpy(&f, &wide, 4);
  return f;
}

struct __nv_bfloat16 {
  unsigned short __x;
  __nv_bfloat16() = default;
  __host__ __device__ __nv_bfloat16(float f) : __x(gpucmd_float_to_bfloat16_bits(f)) {}
  __host__ __device__ __nv_bfloat16(double f) : __nv_bfloat16(static_cast<float>(f)) {}
  __host__ __device__ __nv_bfloat16(int i) : __nv_bfloat16(static_cast<float>(i)) {}
  __host__ __device__ operator float() const { return gpucmd_bfloat16_bits_to_float(__x); }
};
struct __attribute__((aligned(4))) __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;

__host__ __device__ inline float __bfloat162float(__nv_bfloat16 b) { return static_cast<float>(b); }
__host__ __device__ inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
__host__ __device__ inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
__host__ __device__ inline __nv_bfloat16 __int2bfloat16_rn(int i) { return __nv_bfloat16(i); }
__host__ __device__ inline int __bfloat162int_rz(__nv_bfloat16 b) {
  return static_cast<int>(static_cast<float>(b));
}
__host__ __device__ inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short bits) {
  __nv_bfloat16 b;
  b.__x = bits;
  return b;
}
__host__ __device__ inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.__x; }
__host__ __device__ inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
  return __nv_bfloat162{__nv_bfloat16(a), __nv_bfloat16(b)};
}
__host__ __device__ inline __nv_bfloat162 __float2bfloat162_rn(float a) {
  return __floats2bfloat162_rn(a, a);
}
__host__ __device__ inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __nv_bfloat162{a, b};
}
__host__ __device__ inline float __low2float(__nv_bfloat162 b) { return static_cast<float>(b.x); }
__host__ __device__ inline float __high2float(__nv_bfloat162 b) { return static_cast<float>(b.y); }
__host__ __device__ inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 b) { return b.x; }
__host__ __device__ inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 b) { return b.y; }

#define GPUCMD_BFLOAT16_BINARY(name, expression)                                       \
  __host__ __device__ inline __nv_bfloat16 name(__nv_bfloat16 a, __nv_bfloat16 b) {        \
    const float x = static_cast<float>(a), y = static_cast<float>(b);                      \
    return __nv_bfloat16(expression);                                                      \
  }                                                                                        \
  __host__ __device__ inline __nv_bfloat162 name##2(__nv_bfloat162 a, __nv_bfloat162 b) {  \
    return __nv_bfloat162{name(a.x, b.x), name(a.y, b.y)};                                 \
  }
GPUCMD_BFLOAT16_BINARY(__hadd, x + y)
GPUCMD_BFLOAT16_BINARY(__hsub, x - y)
GPUCMD_BFLOAT16_BINARY(__hmul, x * y)
GPUCMD_BFLOAT16_BINARY(__hdiv, x / y)
GPUCMD_BFLOAT16_BINARY(__hmax, x < y ? y : x)
GPUCMD_BFLOAT16_BINARY(__hmin, y < x ? y : x)
#undef GPUCMD_BFLOAT16_BINARY
__host__ __device__ inline __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b,
                                                __nv_bfloat16 c) {
  return __nv_bfloat16(static_cast<float>(a) * static_cast<float>(b) + static_cast<float>(c));
}
__host__ __device__ inline __nv_bfloat162 __hfma2(__nv_bfloat162 a, __nv_bfloat162 b,
                                                  __nv_bfloat162 c) {
  return __nv_bfloat162{__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)};
}
__host__ __device__ inline __nv_bfloat16 __hneg(__nv_bfloat16 a) {
  return __ushort_as_bfloat16(static_cast<unsigned short>(a.__x ^ 0x8000u));
}
__host__ __device__ inline __nv_bfloat16 __habs(__nv_bfloat16 a) {
  return __ushort_as_bfloat16(static_cast<unsigned short>(a.__x & 0x7fffu));
}

)HEADER";

// After the list of math functions (driver/half_math_functions.h).
constexpr char kHeaderEnd[] =
    R"HEADER(// h<name> on a __nv_bfloat16 and h2<name> on each half of a __nv_bfloat162, as CUDA
// names them.
#define GPUCMD_BFLOAT16_UNARY(name, expression)                                  \
  __host__ __device__ inline __nv_bfloat16 h##name(__nv_bfloat16 a) {            \
    const float x = static_cast<float>(a);                                       \
    return __nv_bfloat16(expression);                                            \
  }                                                                              \
  __host__ __device__ inline __nv_bfloat162 h2##name(__nv_bfloat162 a) {         \
    return __nv_bfloat162{h##name(a.x), h##name(a.y)};                           \
  }
GPUCMD_HALF_MATH_FUNCTIONS(GPUCMD_BFLOAT16_UNARY)
#undef GPUCMD_BFLOAT16_UNARY

__host__ __device__ inline __nv_bfloat16 operator+(__nv_bfloat16 a, __nv_bfloat16 b) { return __hadd(a, b); }
__host__ __device__ inline __nv_bfloat16 operator-(__nv_bfloat16 a, __nv_bfloat16 b) { return __hsub(a, b); }
__host__ __device__ inline __nv_bfloat16 operator*(__nv_bfloat16 a, __nv_bfloat16 b) { return __hmul(a, b); }
__host__ __device__ inline __nv_bfloat16 operator/(__nv_bfloat16 a, __nv_bfloat16 b) { return __hdiv(a, b); }
__host__ __device__ inline __nv_bfloat16 operator-(__nv_bfloat16 a) { return __hneg(a); }
__host__ __device__ inline __nv_bfloat16& operator+=(__nv_bfloat16& a, __nv_bfloat16 b) { return a = a + b; }
__host__ __device__ inline __nv_bfloat16& operator*=(__nv_bfloat16& a, __nv_bfloat16 b) { return a = a * b; }
#define GPUCMD_BFLOAT16_COMPARE(name, op)                                                 \
  __host__ __device__ inline bool name(__nv_bfloat16 a, __nv_bfloat16 b) {                \
    return static_cast<float>(a) op static_cast<float>(b);                                \
  }                                                                                       \
  __host__ __device__ inline bool operator op(__nv_bfloat16 a, __nv_bfloat16 b) { return name(a, b); }
GPUCMD_BFLOAT16_COMPARE(__heq, ==)
GPUCMD_BFLOAT16_COMPARE(__hne, !=)
GPUCMD_BFLOAT16_COMPARE(__hlt, <)
GPUCMD_BFLOAT16_COMPARE(__hgt, >)
GPUCMD_BFLOAT16_COMPARE(__hle, <=)
GPUCMD_BFLOAT16_COMPARE(__hge, >=)
#undef GPUCMD_BFLOAT16_COMPARE
__host__ __device__ inline __nv_bfloat162 operator+(__nv_bfloat162 a, __nv_bfloat162 b) { return __hadd2(a, b); }
__host__ __device__ inline __nv_bfloat162 operator*(__nv_bfloat162 a, __nv_bfloat162 b) { return __hmul2(a, b); }
// Atomic on each bfloat16, as on a GPU (a __nv_bfloat162 as a whole is not).
__device__ inline __nv_bfloat16 atomicAdd(__nv_bfloat16* address, __nv_bfloat16 value) {
  unsigned short* const bits = reinterpret_cast<unsigned short*>(address);
  unsigned short seen = *bits;
  unsigned short expected;
  do {
    expected = seen;
    const __nv_bfloat16 sum = __hadd(__ushort_as_bfloat16(expected), value);
    seen = atomicCAS(bits, expected, __bfloat16_as_ushort(sum));
  } while (seen != expected);
  return __ushort_as_bfloat16(seen);
}
__device__ inline __nv_bfloat162 atomicAdd(__nv_bfloat162* address, __nv_bfloat162 value) {
  return __nv_bfloat162{atomicAdd(&address->x, value.x), atomicAdd(&address->y, value.y)};
}
)HEADER";

}  // namespace

const char* BFloat16Header() {
  static const std::string* const kHeader =
      new std::string(absl::StrCat(kHeaderBegin, HalfMathFunctions(), kHeaderEnd));
  return kHeader->c_str();
}

}  // namespace gpucmd
