#include "driver/simd_intrinsics.h"

namespace gpucmd {

const char* SimdIntrinsicDefinitions() {
  return R"DEFINITIONS(
// The intrinsics' bodies: the CPU driver's kernel front end, which parses each kernel's
// calls under a memory limit and builds nothing, sees their declarations alone.
#ifdef GPUCMD_KERNEL_FRONT_END
#define GPUCMD_BODY(...) ;
#else
#define GPUCMD_BODY(...) __VA_ARGS__
#endif
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
#define GPUCMD_SIMD_BINARY(name, is_signed, saturate, expression)                     \
  __device__ inline unsigned name##2(unsigned a, unsigned b) GPUCMD_BODY({            \
    return gpucmd_simd<16, is_signed, saturate>(a, b,                                 \
                                                [](int x, int y) { return expression; }); \
  })                                                                                  \
  __device__ inline unsigned name##4(unsigned a, unsigned b) GPUCMD_BODY({            \
    return gpucmd_simd<8, is_signed, saturate>(a, b,                                  \
                                               [](int x, int y) { return expression; }); \
  })
#define GPUCMD_SIMD_UNARY(name, is_signed, saturate, expression)                      \
  __device__ inline unsigned name##2(unsigned a) GPUCMD_BODY({                        \
    return gpucmd_simd<16, is_signed, saturate>(a, 0u,                                \
                                                [](int x, int) { return expression; }); \
  })                                                                                  \
  __device__ inline unsigned name##4(unsigned a) GPUCMD_BODY({                        \
    return gpucmd_simd<8, is_signed, saturate>(a, 0u,                                 \
                                               [](int x, int) { return expression; }); \
  })
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
#define GPUCMD_SIMD_SAD(name, bits, is_signed)                          \
  __device__ inline unsigned name(unsigned a, unsigned b) GPUCMD_BODY({ \
    return gpucmd_simd_sad<bits, is_signed>(a, b);                      \
  })
GPUCMD_SIMD_SAD(__vsads2, 16, true) GPUCMD_SIMD_SAD(__vsads4, 8, true)
GPUCMD_SIMD_SAD(__vsadu2, 16, false) GPUCMD_SIMD_SAD(__vsadu4, 8, false)
#undef GPUCMD_SIMD_SAD
// Hopper's DPX intrinsics (__vimax3_s32, __viaddmin_u16x2, __vibmax_s16x2, ...), on ints
// or on the halves of words as shorts: a sum wraps, as the hardware's add does; _relu
// gives at least 0; __vibmax and __vibmin also say whether a's was taken (a >= b,
// a <= b), per half for the halves.
template <typename T>
__device__ inline T gpucmd_dpx_max(T x, T y) { return x < y ? y : x; }
template <typename T>
__device__ inline T gpucmd_dpx_min(T x, T y) { return x < y ? x : y; }
template <typename T>
__device__ inline T gpucmd_dpx_relu(T x) { return x < T(0) ? T(0) : x; }
template <typename T>
__device__ inline T gpucmd_dpx_sum(T x, T y) {
  return static_cast<T>(static_cast<unsigned>(x) + static_cast<unsigned>(y));
}
// `op` of the halves of `a`, `b` and `c`, each as a Lane.
template <typename Lane, typename Op>
__device__ inline unsigned gpucmd_dpx_halves(unsigned a, unsigned b, unsigned c, Op op) {
  unsigned result = 0;
  for (int shift = 0; shift < 32; shift += 16) {
    const Lane value = op(static_cast<Lane>(a >> shift), static_cast<Lane>(b >> shift),
                          static_cast<Lane>(c >> shift));
    result |= (static_cast<unsigned>(value) & 0xffffu) << shift;
  }
  return result;
}
// The larger (`kMax`) or the smaller of each pair of halves, and whether it was a's.
template <typename Lane, bool kMax>
__device__ inline unsigned gpucmd_dpx_pick_halves(unsigned a, unsigned b, bool* high,
                                                  bool* low) {
  unsigned result = 0;
  for (int shift = 0; shift < 32; shift += 16) {
    const Lane x = static_cast<Lane>(a >> shift), y = static_cast<Lane>(b >> shift);
    const bool first = kMax ? x >= y : x <= y;
    *(shift == 0 ? low : high) = first;
    result |= (static_cast<unsigned>(first ? x : y) & 0xffffu) << shift;
  }
  return result;
}
#define GPUCMD_DPX3_WORD(name, T, expression) \
  __device__ inline T name(T x, T y, T z) GPUCMD_BODY({ return expression; })
#define GPUCMD_DPX3_HALVES(name, Lane, expression)                                  \
  __device__ inline unsigned name(unsigned a, unsigned b, unsigned c) GPUCMD_BODY({ \
    return gpucmd_dpx_halves<Lane>(a, b, c,                                         \
                                   [](Lane x, Lane y, Lane z) -> Lane {             \
                                     return expression;                             \
                                   });                                              \
  })
// prefix_s32, prefix_u32, prefix_s16x2 and prefix_u16x2, then prefix_s32_relu and
// prefix_s16x2_relu.
#define GPUCMD_DPX3(prefix, expression)                                              \
  GPUCMD_DPX3_WORD(prefix##_s32, int, expression)                                    \
  GPUCMD_DPX3_WORD(prefix##_u32, unsigned, expression)                               \
  GPUCMD_DPX3_HALVES(prefix##_s16x2, short, expression)                              \
  GPUCMD_DPX3_HALVES(prefix##_u16x2, unsigned short, expression)                     \
  GPUCMD_DPX3_WORD(prefix##_s32_relu, int, gpucmd_dpx_relu(expression))              \
  GPUCMD_DPX3_HALVES(prefix##_s16x2_relu, short, gpucmd_dpx_relu(expression))
GPUCMD_DPX3(__vimax3, gpucmd_dpx_max(gpucmd_dpx_max(x, y), z))
GPUCMD_DPX3(__vimin3, gpucmd_dpx_min(gpucmd_dpx_min(x, y), z))
GPUCMD_DPX3(__viaddmax, gpucmd_dpx_max(gpucmd_dpx_sum(x, y), z))
GPUCMD_DPX3(__viaddmin, gpucmd_dpx_min(gpucmd_dpx_sum(x, y), z))
// prefix_s32_relu and prefix_s16x2_relu of two arguments.
#define GPUCMD_DPX2_RELU(prefix, expression)                                          \
  __device__ inline int prefix##_s32_relu(int x, int y) GPUCMD_BODY({                 \
    return gpucmd_dpx_relu(expression);                                               \
  })                                                                                  \
  __device__ inline unsigned prefix##_s16x2_relu(unsigned a, unsigned b) GPUCMD_BODY({ \
    return gpucmd_dpx_halves<short>(a, b, 0u, [](short x, short y, short) -> short {  \
      return gpucmd_dpx_relu(expression);                                             \
    });                                                                               \
  })
GPUCMD_DPX2_RELU(__vimax, gpucmd_dpx_max(x, y))
GPUCMD_DPX2_RELU(__vimin, gpucmd_dpx_min(x, y))
// prefix_s32, prefix_u32 (with one predicate), prefix_s16x2 and prefix_u16x2 (with one
// per half): a's value where `comparison` holds, else b's.
#define GPUCMD_DPX_PICK_WORD(name, T, comparison)                      \
  __device__ inline T name(T x, T y, bool* const pred) GPUCMD_BODY({   \
    *pred = comparison;                                                \
    return *pred ? x : y;                                              \
  })
#define GPUCMD_DPX_PICK(prefix, is_max, comparison)                                     \
  GPUCMD_DPX_PICK_WORD(prefix##_s32, int, comparison)                                   \
  GPUCMD_DPX_PICK_WORD(prefix##_u32, unsigned, comparison)                              \
  __device__ inline unsigned prefix##_s16x2(unsigned a, unsigned b, bool* const high,   \
                                            bool* const low) GPUCMD_BODY({              \
    return gpucmd_dpx_pick_halves<short, is_max>(a, b, high, low);                      \
  })                                                                                    \
  __device__ inline unsigned prefix##_u16x2(unsigned a, unsigned b, bool* const high,   \
                                            bool* const low) GPUCMD_BODY({              \
    return gpucmd_dpx_pick_halves<unsigned short, is_max>(a, b, high, low);             \
  })
GPUCMD_DPX_PICK(__vibmax, true, x >= y)
GPUCMD_DPX_PICK(__vibmin, false, x <= y)
#undef GPUCMD_DPX_PICK
#undef GPUCMD_DPX_PICK_WORD
#undef GPUCMD_DPX2_RELU
#undef GPUCMD_DPX3
#undef GPUCMD_DPX3_HALVES
#undef GPUCMD_DPX3_WORD
#undef GPUCMD_SIMD_COMPARE
#undef GPUCMD_BODY
#undef GPUCMD_SIMD_BOTH_SIGNS
#undef GPUCMD_SIMD_UNARY
#undef GPUCMD_SIMD_BINARY
)DEFINITIONS";
}

}  // namespace gpucmd
