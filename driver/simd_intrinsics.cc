#include "driver/simd_intrinsics.h"

namespace gpucmd {

const char* SimdIntrinsicDefinitions() {
  return R"DEFINITIONS(
// Lane `lane` of `word`, `kBits` wide, sign- or zero-extended.
template <int kBits, bool kSigned>
__device__ inline int gpucmd_simd_lane(unsigned word, int lane) {
  const int value = static_cast<int>((word >> (kBits * lane)) & ((1u << kBits) - 1));
  return kSigned && value >= (1 << (kBits - 1)) ? value - (1 << kBits) : value;
}
// `op` of each pair of lanes of `a` and `b`, clamped to the lanes' range when `kSaturate`,
// else wrapped into it.
template <int kBits, bool kSigned, bool kSaturate, typename Op>
__device__ inline unsigned gpucmd_simd(unsigned a, unsigned b, Op op) {
  const int lowest = kSigned ? -(1 << (kBits - 1)) : 0;
  const int highest = kSigned ? (1 << (kBits - 1)) - 1 : (1 << kBits) - 1;
  unsigned result = 0;
  for (int lane = 0; lane < 32 / kBits; ++lane) {
    int value = op(gpucmd_simd_lane<kBits, kSigned>(a, lane),
                   gpucmd_simd_lane<kBits, kSigned>(b, lane));
    if (kSaturate) value = value < lowest ? lowest : value > highest ? highest : value;
    result |= (static_cast<unsigned>(value) & ((1u << kBits) - 1)) << (kBits * lane);
  }
  return result;
}
// The sum over the lanes of |a - b|.
template <int kBits, bool kSigned>
__device__ inline unsigned gpucmd_simd_sad(unsigned a, unsigned b) {
  unsigned sum = 0;
  for (int lane = 0; lane < 32 / kBits; ++lane) {
    const int difference =
        gpucmd_simd_lane<kBits, kSigned>(a, lane) - gpucmd_simd_lane<kBits, kSigned>(b, lane);
    sum += static_cast<unsigned>(difference < 0 ? -difference : difference);
  }
  return sum;
}
// `name`2 on halves and `name`4 on bytes, from the lanes x and y.
#define GPUCMD_SIMD_BINARY(name, is_signed, saturate, expression)                          \
  __device__ inline unsigned name##2(unsigned a, unsigned b) {                             \
    return gpucmd_simd<16, is_signed, saturate>(a, b, [](int x, int y) { return expression; }); \
  }                                                                                        \
  __device__ inline unsigned name##4(unsigned a, unsigned b) {                             \
    return gpucmd_simd<8, is_signed, saturate>(a, b, [](int x, int y) { return expression; }); \
  }
#define GPUCMD_SIMD_UNARY(name, is_signed, saturate, expression)                           \
  __device__ inline unsigned name##2(unsigned a) {                                         \
    return gpucmd_simd<16, is_signed, saturate>(a, 0u, [](int x, int) { return expression; }); \
  }                                                                                        \
  __device__ inline unsigned name##4(unsigned a) {                                         \
    return gpucmd_simd<8, is_signed, saturate>(a, 0u, [](int x, int) { return expression; }); \
  }
// The signed and the unsigned forms of one operation: `name`s… and `name`u….
#define GPUCMD_SIMD_BOTH_SIGNS(name, saturate, expression) \
  GPUCMD_SIMD_BINARY(name##s, true, saturate, expression)  \
  GPUCMD_SIMD_BINARY(name##u, false, saturate, expression)
GPUCMD_SIMD_UNARY(__vabs, true, false, x < 0 ? -x : x)
GPUCMD_SIMD_UNARY(__vabsss, true, true, x < 0 ? -x : x)
GPUCMD_SIMD_UNARY(__vneg, true, false, -x)
GPUCMD_SIMD_UNARY(__vnegss, true, true, -x)
GPUCMD_SIMD_BINARY(__vadd, false, false, x + y)
GPUCMD_SIMD_BINARY(__vaddss, true, true, x + y)
GPUCMD_SIMD_BINARY(__vaddus, false, true, x + y)
GPUCMD_SIMD_BINARY(__vsub, false, false, x - y)
GPUCMD_SIMD_BINARY(__vsubss, true, true, x - y)
GPUCMD_SIMD_BINARY(__vsubus, false, true, x - y)
GPUCMD_SIMD_BOTH_SIGNS(__vabsdiff, false, x < y ? y - x : x - y)
GPUCMD_SIMD_BINARY(__vavgs, true, false, x + y >= 0 ? (x + y + 1) >> 1 : (x + y) >> 1)
GPUCMD_SIMD_BINARY(__vavgu, false, false, (x + y + 1) >> 1)
GPUCMD_SIMD_BINARY(__vhaddu, false, false, (x + y) >> 1)
GPUCMD_SIMD_BOTH_SIGNS(__vmax, false, x < y ? y : x)
GPUCMD_SIMD_BOTH_SIGNS(__vmin, false, x < y ? x : y)
// The comparisons: all ones in a lane that holds (__vcmp…), or 1 (__vset…).
#define GPUCMD_SIMD_COMPARE(name, is_signed, comparison)                   \
  GPUCMD_SIMD_BINARY(__vcmp##name, is_signed, false, (comparison) ? -1 : 0) \
  GPUCMD_SIMD_BINARY(__vset##name, is_signed, false, (comparison) ? 1 : 0)
GPUCMD_SIMD_COMPARE(eq, false, x == y)
GPUCMD_SIMD_COMPARE(ne, false, x != y)
GPUCMD_SIMD_COMPARE(ges, true, x >= y)
GPUCMD_SIMD_COMPARE(geu, false, x >= y)
GPUCMD_SIMD_COMPARE(gts, true, x > y)
GPUCMD_SIMD_COMPARE(gtu, false, x > y)
GPUCMD_SIMD_COMPARE(les, true, x <= y)
GPUCMD_SIMD_COMPARE(leu, false, x <= y)
GPUCMD_SIMD_COMPARE(lts, true, x < y)
GPUCMD_SIMD_COMPARE(ltu, false, x < y)
#define GPUCMD_SIMD_SAD(name, bits, is_signed)                  \
  __device__ inline unsigned name(unsigned a, unsigned b) {     \
    return gpucmd_simd_sad<bits, is_signed>(a, b);              \
  }
GPUCMD_SIMD_SAD(__vsads2, 16, true) GPUCMD_SIMD_SAD(__vsads4, 8, true)
GPUCMD_SIMD_SAD(__vsadu2, 16, false) GPUCMD_SIMD_SAD(__vsadu4, 8, false)
#undef GPUCMD_SIMD_SAD
#undef GPUCMD_SIMD_COMPARE
#undef GPUCMD_SIMD_BOTH_SIGNS
#undef GPUCMD_SIMD_UNARY
#undef GPUCMD_SIMD_BINARY
)DEFINITIONS";
}

}  // namespace gpucmd
