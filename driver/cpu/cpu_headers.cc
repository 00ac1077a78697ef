#include "driver/cpu/cpu_headers.h"

#include "driver/bfloat16_header.h"
#include "driver/cooperative_groups_headers.h"

namespace gpucmd {
namespace {

// Everything a device-side caller of the runtime headers needs is in the prelude.
constexpr char kRuntimeHeader[] = R"HEADER(#pragma once
// Device-side declarations come with the CPU driver's prelude.
)HEADER";

constexpr char kHalfHeader[] = R"HEADER(#pragma once
// Half precision on the CPU driver: __half holds IEEE binary16 bits; arithmetic is done in
// float and rounded back to the nearest half (ties to even), as CUDA's _rn operations.
#include <stdint.h>
#include <string.h>

struct __half {
  uint16_t bits;
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
__device__ inline __half __int2half_rn(int i) { return __float2half_rn(static_cast<float>(i)); }
__device__ inline int __half2int_rz(__half h) { return static_cast<int>(__half2float(h)); }
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
GPUCMD_HALF_BINARY(__hmax, x < y ? y : x)
GPUCMD_HALF_BINARY(__hmin, y < x ? y : x)
#undef GPUCMD_HALF_BINARY
__device__ inline __half __hfma(__half a, __half b, __half c) {
  return __float2half_rn(__half2float(a) * __half2float(b) + __half2float(c));
}
__device__ inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) {
  return __half2{__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)};
}
__device__ inline __half __hneg(__half a) {
  return __half{static_cast<uint16_t>(a.bits ^ 0x8000u)};
}
__device__ inline __half __habs(__half a) {
  return __half{static_cast<uint16_t>(a.bits & 0x7fffu)};
}
__device__ inline bool __heq(__half a, __half b) { return __half2float(a) == __half2float(b); }
__device__ inline bool __hlt(__half a, __half b) { return __half2float(a) < __half2float(b); }
__device__ inline bool __hgt(__half a, __half b) { return __half2float(a) > __half2float(b); }
__device__ inline bool __hle(__half a, __half b) { return __half2float(a) <= __half2float(b); }
__device__ inline bool __hge(__half a, __half b) { return __half2float(a) >= __half2float(b); }
__device__ inline __half hsqrt(__half a) { return __float2half_rn(sqrtf(__half2float(a))); }

__device__ inline __half operator+(__half a, __half b) { return __hadd(a, b); }
__device__ inline __half operator-(__half a, __half b) { return __hsub(a, b); }
__device__ inline __half operator*(__half a, __half b) { return __hmul(a, b); }
__device__ inline __half operator/(__half a, __half b) { return __hdiv(a, b); }
__device__ inline __half operator-(__half a) { return __hneg(a); }
__device__ inline bool operator==(__half a, __half b) { return __heq(a, b); }
__device__ inline bool operator<(__half a, __half b) { return __hlt(a, b); }
__device__ inline bool operator>(__half a, __half b) { return __hgt(a, b); }
__device__ inline __half2 operator+(__half2 a, __half2 b) { return __hadd2(a, b); }
__device__ inline __half2 operator*(__half2 a, __half2 b) { return __hmul2(a, b); }
)HEADER";

}  // namespace

const std::vector<std::pair<std::string, std::string>>& CpuKernelHeaders() {
  static const auto* const kHeaders = [] {
    auto* headers = new std::vector<std::pair<std::string, std::string>>{
        {"cuda_runtime.h", kRuntimeHeader},
        {"cuda_runtime_api.h", kRuntimeHeader},
        {"device_launch_parameters.h", kRuntimeHeader},
        {"cuda_fp16.h", kHalfHeader},
        {"cuda_bf16.h", BFloat16Header()},
    };
    for (const auto& header : CooperativeGroupsHeaders()) headers->push_back(header);
    return headers;
  }();
  return *kHeaders;
}

}  // namespace gpucmd
