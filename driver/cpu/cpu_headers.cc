#include "driver/cpu/cpu_headers.h"

#include "absl/strings/str_cat.h"
#include "driver/bfloat16_header.h"
#include "driver/cooperative_groups_headers.h"
#include "driver/cpu/cuda_std_headers.h"
#include "driver/cub_headers.h"
#include "driver/half_math_functions.h"
#include "driver/half_min_max.h"
#include "driver/math_constants_header.h"

namespace gpucmd {
namespace {

// Everything a device-side caller of the runtime headers needs is in the prelude.
constexpr char kRuntimeHeader[] = R"HEADER(#pragma once
// Device-side declarations come with the CPU driver's prelude.
)HEADER";

constexpr char kHalfHeaderBegin[] = R"HEADER(#pragma once
// Half precision on the CPU driver: __half holds IEEE binary16 bits; arithmetic is done in
// float and rounded back to the nearest half (ties to even), as CUDA's _rn operations.
#include <stdint.h>
#include <string.h>

// The bits alone, as CUDA's __half_raw: how a __half is made from bits, never from a
// number.
struct __half_raw {
  unsigned short x;
};
// As CUDA's: converts from and to the arithmetic types (rounding to the nearest half).
struct __half {
  uint16_t bits;
  __half() = default;
  __device__ constexpr __half(__half_raw raw) : bits(raw.x) {}
  __device__ __half(float f);
  __device__ __half(double d);
  __device__ __half(short i);
  __device__ __half(unsigned short i);
  __device__ __half(int i);
  __device__ __half(unsigned int i);
  __device__ __half(long long i);
  __device__ __half(unsigned long long i);
  __device__ operator float() const;
  __device__ constexpr operator __half_raw() const { return __half_raw{bits}; }
};
typedef __half half;
struct __align__(4) __half2 {
  __half x, y;
};
typedef __half2 half2;

__device__ inline float __half2float(__half h) {
  const uint32_t sign = (h.bits & 0x8000u) << 16;
  uint32_t exponent = (h.bits >> 10) & 0x1fu;
  uint32_t mantissa = h.bits & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1fu) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // infinity, NaN
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;  // zero
  } else {        // subnormal: normalise
    exponent = 113;
    while (!(mantissa & 0x400u)) {
      mantissa <<= 1;
      --exponent;
    }
    bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

__device__ inline __half __float2half_rn(float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  __half h;
  if (magnitude >= 0x7f800000u) {  // infinity, NaN
    h.bits = sign | 0x7c00u | (magnitude > 0x7f800000u ? 0x200u : 0u);
  } else if (magnitude >= 0x477ff000u) {  // rounds past the largest half
    h.bits = sign | 0x7c00u;
  } else if (magnitude < 0x38800000u) {   // below the smallest normal half
    const uint32_t shift = 126u - (magnitude >> 23);
    if (shift > 24) {
      h.bits = sign;
    } else {
      // In units of the smallest subnormal half, 2^-24.
      const uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
      uint32_t value = mantissa >> shift;
      const uint32_t rest = mantissa & ((1u << shift) - 1u);
      const uint32_t halfway = 1u << (shift - 1);
      if (rest > halfway || (rest == halfway && (value & 1u))) ++value;
      h.bits = sign | static_cast<uint16_t>(value);
    }
  } else {
    uint32_t value = ((magnitude >> 13) - (112u << 10));
    const uint32_t rest = magnitude & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (value & 1u))) ++value;
    h.bits = sign | static_cast<uint16_t>(value);
  }
  return h;
}
__device__ inline __half __float2half(float f) { return __float2half_rn(f); }
__device__ inline __half::__half(float f) : __half(__float2half_rn(f)) {}
// Through float: a double that float rounds to a half's midpoint can round differently
// from CUDA's single rounding.
__device__ inline __half::__half(double d) : __half(static_cast<float>(d)) {}
__device__ inline __half::__half(short i) : __half(static_cast<float>(i)) {}
__device__ inline __half::__half(unsigned short i) : __half(static_cast<float>(i)) {}
__device__ inline __half::__half(int i) : __half(static_cast<float>(i)) {}
__device__ inline __half::__half(unsigned int i) : __half(static_cast<float>(i)) {}
__device__ inline __half::__half(long long i) : __half(static_cast<float>(i)) {}
__device__ inline __half::__half(unsigned long long i) : __half(static_cast<float>(i)) {}
__device__ inline __half::operator float() const { return __half2float(*this); }
__device__ inline unsigned short __half_as_ushort(__half h) { return h.bits; }
__device__ inline short __half_as_short(__half h) { return static_cast<short>(h.bits); }
__device__ inline __half __ushort_as_half(unsigned short bits) { return __half_raw{bits}; }
__device__ inline __half __short_as_half(short bits) {
  return __half_raw{static_cast<unsigned short>(bits)};
}
__device__ inline bool __hisnan(__half h) { return (h.bits & 0x7fffu) > 0x7c00u; }
__device__ inline int __hisinf(__half h) {
  return (h.bits & 0x7fffu) == 0x7c00u ? ((h.bits & 0x8000u) ? -1 : 1) : 0;
}
__device__ inline __half2 __floats2half2_rn(float a, float b) {
  return __half2{__float2half_rn(a), __float2half_rn(b)};
}
__device__ inline __half2 __float2half2_rn(float a) { return __floats2half2_rn(a, a); }
__device__ inline __half2 __halves2half2(__half a, __half b) { return __half2{a, b}; }
__device__ inline float __low2float(__half2 h) { return __half2float(h.x); }
__device__ inline float __high2float(__half2 h) { return __half2float(h.y); }
__device__ inline __half __low2half(__half2 h) { return h.x; }
__device__ inline __half __high2half(__half2 h) { return h.y; }
__device__ inline float2 __half22float2(__half2 h) {
  return make_float2(__half2float(h.x), __half2float(h.y));
}

#define GPUCMD_HALF_BINARY(name, expression)                         \
  __device__ inline __half name(__half a, __half b) {                \
    const float x = __half2float(a), y = __half2float(b);            \
    return __float2half_rn(expression);                              \
  }                                                                  \
  __device__ inline __half2 name##2(__half2 a, __half2 b) {          \
    return __half2{name(a.x, b.x), name(a.y, b.y)};                  \
  }
GPUCMD_HALF_BINARY(__hadd, x + y)
GPUCMD_HALF_BINARY(__hsub, x - y)
GPUCMD_HALF_BINARY(__hmul, x * y)
GPUCMD_HALF_BINARY(__hdiv, x / y)
#undef GPUCMD_HALF_BINARY
)HEADER";

// After __hmax and __hmin (driver/half_min_max.h).
constexpr char kHalfHeaderEnd[] = R"HEADER(// These let a NaN through instead.
__device__ inline __half __hmax_nan(__half a, __half b) {
  return __hisnan(a) ? a : __hisnan(b) ? b : __hmax(a, b);
}
__device__ inline __half __hmin_nan(__half a, __half b) {
  return __hisnan(a) ? a : __hisnan(b) ? b : __hmin(a, b);
}
__device__ inline __half2 __hmax2(__half2 a, __half2 b) {
  return __half2{__hmax(a.x, b.x), __hmax(a.y, b.y)};
}
__device__ inline __half2 __hmin2(__half2 a, __half2 b) {
  return __half2{__hmin(a.x, b.x), __hmin(a.y, b.y)};
}
__device__ inline __half __hfma(__half a, __half b, __half c) {
  return __float2half_rn(__half2float(a) * __half2float(b) + __half2float(c));
}
__device__ inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) {
  return __half2{__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)};
}
__device__ inline __half __hneg(__half a) {
  return __half_raw{static_cast<unsigned short>(a.bits ^ 0x8000u)};
}
__device__ inline __half __habs(__half a) {
  return __half_raw{static_cast<unsigned short>(a.bits & 0x7fffu)};
}
__device__ inline bool __heq(__half a, __half b) { return __half2float(a) == __half2float(b); }
__device__ inline bool __hlt(__half a, __half b) { return __half2float(a) < __half2float(b); }
__device__ inline bool __hgt(__half a, __half b) { return __half2float(a) > __half2float(b); }
__device__ inline bool __hle(__half a, __half b) { return __half2float(a) <= __half2float(b); }
__device__ inline bool __hge(__half a, __half b) { return __half2float(a) >= __half2float(b); }
__device__ inline bool __hne(__half a, __half b) { return __half2float(a) != __half2float(b); }
// h<name> on a __half and h2<name> on each half of a __half2, as CUDA names them.
#define GPUCMD_HALF_UNARY(name, expression)                   \
  __device__ inline __half h##name(__half a) {                \
    const float x = __half2float(a);                          \
    return __float2half_rn(expression);                       \
  }                                                           \
  __device__ inline __half2 h2##name(__half2 a) {             \
    return __half2{h##name(a.x), h##name(a.y)};               \
  }
GPUCMD_HALF_MATH_FUNCTIONS(GPUCMD_HALF_UNARY)
#undef GPUCMD_HALF_UNARY

__device__ inline __half operator+(__half a, __half b) { return __hadd(a, b); }
__device__ inline __half operator-(__half a, __half b) { return __hsub(a, b); }
__device__ inline __half operator*(__half a, __half b) { return __hmul(a, b); }
__device__ inline __half operator/(__half a, __half b) { return __hdiv(a, b); }
__device__ inline __half operator-(__half a) { return __hneg(a); }
__device__ inline __half operator+(__half a) { return a; }
__device__ inline __half& operator+=(__half& a, __half b) { return a = __hadd(a, b); }
__device__ inline __half& operator-=(__half& a, __half b) { return a = __hsub(a, b); }
__device__ inline __half& operator*=(__half& a, __half b) { return a = __hmul(a, b); }
__device__ inline __half& operator/=(__half& a, __half b) { return a = __hdiv(a, b); }
__device__ inline __half& operator++(__half& a) { return a += __half(1.0f); }
__device__ inline __half& operator--(__half& a) { return a -= __half(1.0f); }
__device__ inline bool operator==(__half a, __half b) { return __heq(a, b); }
__device__ inline bool operator!=(__half a, __half b) { return __hne(a, b); }
__device__ inline bool operator<(__half a, __half b) { return __hlt(a, b); }
__device__ inline bool operator>(__half a, __half b) { return __hgt(a, b); }
__device__ inline bool operator<=(__half a, __half b) { return __hle(a, b); }
__device__ inline bool operator>=(__half a, __half b) { return __hge(a, b); }
__device__ inline __half2 operator+(__half2 a, __half2 b) { return __hadd2(a, b); }
__device__ inline __half2 operator-(__half2 a, __half2 b) { return __hsub2(a, b); }
__device__ inline __half2 operator*(__half2 a, __half2 b) { return __hmul2(a, b); }
__device__ inline __half2 operator/(__half2 a, __half2 b) { return __hdiv2(a, b); }
__device__ inline __half2& operator+=(__half2& a, __half2 b) { return a = __hadd2(a, b); }
__device__ inline __half2& operator*=(__half2& a, __half2 b) { return a = __hmul2(a, b); }
// A half one step from `h` toward +infinity (`up`) or -infinity; a NaN, and the infinity
// it moves toward, stay.
__device__ inline __half gpucmd_half_step(__half h, bool up) {
  const unsigned short bits = h.bits;
  if (__hisnan(h) || bits == (up ? 0x7c00u : 0xfc00u)) return h;
  if ((bits & 0x7fffu) == 0) {
    return __half_raw{static_cast<unsigned short>(up ? 0x0001u : 0x8001u)};
  }
  const bool away_from_zero = ((bits & 0x8000u) == 0) == up;
  return __half_raw{static_cast<unsigned short>(away_from_zero ? bits + 1 : bits - 1)};
}
// f rounded to a half toward zero, down or up: the nearest half, moved one step when it
// lies on the other side of f.
__device__ inline __half __float2half_rz(float f) {
  const __half h = __float2half_rn(f);
  return fabsf(__half2float(h)) > fabsf(f) ? gpucmd_half_step(h, f < 0) : h;
}
__device__ inline __half __float2half_rd(float f) {
  const __half h = __float2half_rn(f);
  return __half2float(h) > f ? gpucmd_half_step(h, false) : h;
}
__device__ inline __half __float2half_ru(float f) {
  const __half h = __float2half_rn(f);
  return __half2float(h) < f ? gpucmd_half_step(h, true) : h;
}
__device__ inline __half2 __float22half2_rn(float2 f) {
  return __half2{__float2half_rn(f.x), __float2half_rn(f.y)};
}
// Integers to halves (a float holds every integer a half reaches), and halves to
// integers, saturating as a GPU converts.
// `mode`: rn, rz, rd or ru; `whole`: the C function that rounds a float so.
#define GPUCMD_HALF_ROUNDED(from, I, mode, whole)                                    \
  __device__ inline __half __##from##2half_##mode(I i) {                             \
    return __float2half_##mode(static_cast<float>(i));                               \
  }                                                                                  \
  __device__ inline I __half2##from##_##mode(__half h) {                             \
    return gpucmd_saturated<I>(whole(__half2float(h)));                              \
  }
#define GPUCMD_HALF_CONVERSIONS(from, I)                                             \
  GPUCMD_HALF_ROUNDED(from, I, rn, nearbyint) GPUCMD_HALF_ROUNDED(from, I, rz, trunc) \
  GPUCMD_HALF_ROUNDED(from, I, rd, floor) GPUCMD_HALF_ROUNDED(from, I, ru, ceil)
GPUCMD_HALF_CONVERSIONS(int, int)
GPUCMD_HALF_CONVERSIONS(uint, unsigned)
GPUCMD_HALF_CONVERSIONS(short, short)
GPUCMD_HALF_CONVERSIONS(ushort, unsigned short)
GPUCMD_HALF_CONVERSIONS(ll, long long)
GPUCMD_HALF_CONVERSIONS(ull, unsigned long long)
#undef GPUCMD_HALF_CONVERSIONS
#undef GPUCMD_HALF_ROUNDED
// Both halves' comparisons: as a __half2 of 1 and 0, and (__hb...) whether both hold.
#define GPUCMD_HALF2_COMPARE(name, scalar)                                                 \
  __device__ inline __half2 __h##name##2(__half2 a, __half2 b) {                           \
    return __half2{__float2half_rn(scalar(a.x, b.x) ? 1.0f : 0.0f),                        \
                   __float2half_rn(scalar(a.y, b.y) ? 1.0f : 0.0f)};                       \
  }                                                                                        \
  __device__ inline bool __hb##name##2(__half2 a, __half2 b) {                             \
    return scalar(a.x, b.x) && scalar(a.y, b.y);                                           \
  }
GPUCMD_HALF2_COMPARE(eq, __heq)
GPUCMD_HALF2_COMPARE(ne, __hne)
GPUCMD_HALF2_COMPARE(lt, __hlt)
GPUCMD_HALF2_COMPARE(gt, __hgt)
GPUCMD_HALF2_COMPARE(le, __hle)
GPUCMD_HALF2_COMPARE(ge, __hge)
#undef GPUCMD_HALF2_COMPARE
// Atomic on each half, as on a GPU (a __half2 as a whole is not).
__device__ inline __half atomicAdd(__half* address, __half value) {
  return gpucmd_atomic_update(address, [value](__half old) { return __hadd(old, value); });
}
__device__ inline __half2 atomicAdd(__half2* address, __half2 value) {
  return __half2{atomicAdd(&address->x, value.x), atomicAdd(&address->y, value.y)};
}
)HEADER";

}  // namespace

const std::vector<std::pair<std::string, std::string>>& CpuKernelHeaders() {
  static const auto* const kHeaders = [] {
    auto* headers = new std::vector<std::pair<std::string, std::string>>{
        {"cuda_runtime.h", kRuntimeHeader},
        {"cuda_runtime_api.h", kRuntimeHeader},
        {"device_launch_parameters.h", kRuntimeHeader},
        {"cuda_fp16.h", absl::StrCat(kHalfHeaderBegin, HalfMinMaxDefinitions(), HalfMathFunctions(),
                                     kHalfHeaderEnd)},
        {"cuda_bf16.h", BFloat16Header()},
        {"math_constants.h", MathConstantsHeader()},
    };
    for (const auto& header : CooperativeGroupsHeaders()) headers->push_back(header);
    for (const auto& header : CubHeaders()) headers->push_back(header);
    for (const auto& header : CudaStdHeaders()) headers->push_back(header);
    return headers;
  }();
  return *kHeaders;
}

}  // namespace gpucmd
