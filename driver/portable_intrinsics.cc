#include "driver/portable_intrinsics.h"

namespace gpucmd {

const char* PortableIntrinsicDefinitions() {
  return R"DEFINITIONS(
// Loads and stores through a GPU's caches as their hints say, of every type: plain ones
// (where a driver has some of its own, for some types, an exact match of those wins).
#define GPUCMD_LOAD(name) \
  template <typename T> __device__ inline T name(const T* address) { return *address; }
#define GPUCMD_STORE(name) \
  template <typename T> __device__ inline void name(T* address, T value) { *address = value; }
GPUCMD_LOAD(__ldca) GPUCMD_LOAD(__ldcg) GPUCMD_LOAD(__ldcs) GPUCMD_LOAD(__ldlu)
GPUCMD_LOAD(__ldcv)
GPUCMD_STORE(__stwb) GPUCMD_STORE(__stcg) GPUCMD_STORE(__stcs) GPUCMD_STORE(__stwt)
#undef GPUCMD_LOAD
#undef GPUCMD_STORE
__device__ inline unsigned umin(unsigned x, unsigned y) { return x < y ? x : y; }
__device__ inline unsigned umax(unsigned x, unsigned y) { return x < y ? y : x; }
__device__ inline long long llmin(long long x, long long y) { return x < y ? x : y; }
__device__ inline long long llmax(long long x, long long y) { return x < y ? y : x; }
__device__ inline unsigned long long ullmin(unsigned long long x, unsigned long long y) {
  return x < y ? x : y;
}
__device__ inline unsigned long long ullmax(unsigned long long x, unsigned long long y) {
  return x < y ? y : x;
}
// The position of the |offset|-th set bit of `mask` counted from bit `base` (included),
// upwards for a positive offset and downwards for a negative one; for offset 0, `base`
// when that bit is set. 0xffffffff when there is none (PTX's fns).
__device__ inline unsigned __fns(unsigned mask, unsigned base, int offset) {
  if (base > 31) return 0xffffffffu;
  if (offset == 0) return (mask >> base & 1u) != 0 ? base : 0xffffffffu;
  const int step = offset > 0 ? 1 : -1;
  int remaining = offset > 0 ? offset : -offset;
  for (int bit = static_cast<int>(base); bit >= 0 && bit < 32; bit += step) {
    if ((mask >> bit & 1u) != 0 && --remaining == 0) return static_cast<unsigned>(bit);
  }
  return 0xffffffffu;
}
// The bytes of `a` (or, `halves` set, its two 16-bit halves) times the bytes of `b` from
// `first_byte` on, summed onto `c`.
template <typename Byte, typename Half, typename I>
__device__ inline I gpucmd_dot(I a, I b, I c, bool halves, int first_byte) {
  I sum = c;
  for (int i = 0; i < (halves ? 2 : 4); ++i) {
    const I x = halves ? static_cast<I>(static_cast<Half>(static_cast<unsigned>(a) >> (16 * i)))
                       : static_cast<I>(static_cast<Byte>(static_cast<unsigned>(a) >> (8 * i)));
    const I y = static_cast<I>(
        static_cast<Byte>(static_cast<unsigned>(b) >> (8 * (first_byte + i))));
    sum += x * y;
  }
  return sum;
}
#define GPUCMD_DOT(name, halves, first_byte)                                               \
  __device__ inline int name(int a, int b, int c) {                                        \
    return gpucmd_dot<signed char, short>(a, b, c, halves, first_byte);                    \
  }                                                                                        \
  __device__ inline unsigned name(unsigned a, unsigned b, unsigned c) {                    \
    return gpucmd_dot<unsigned char, unsigned short>(a, b, c, halves, first_byte);         \
  }
GPUCMD_DOT(__dp4a, false, 0) GPUCMD_DOT(__dp2a_lo, true, 0) GPUCMD_DOT(__dp2a_hi, true, 2)
#undef GPUCMD_DOT
// `value` reduced over the lanes of `mask`, each lane's read by a shuffle from it.
template <typename T, typename Op>
__device__ inline T gpucmd_warp_reduce(unsigned mask, T value, Op op) {
  T result = value;
  bool first = true;
  for (int lane = 0; lane < 32; ++lane) {
    if (((mask >> lane) & 1u) == 0) continue;
    const T other = __shfl_sync(mask, value, lane);
    result = first ? other : op(result, other);
    first = false;
  }
  return result;
}
#define GPUCMD_WARP_REDUCE(name, T, expression)                                       \
  __device__ inline T name(unsigned mask, T value) {                                  \
    return gpucmd_warp_reduce(mask, value, [](T x, T y) -> T { return expression; }); \
  }
GPUCMD_WARP_REDUCE(__reduce_add_sync, int, x + y)
GPUCMD_WARP_REDUCE(__reduce_add_sync, unsigned, x + y)
GPUCMD_WARP_REDUCE(__reduce_min_sync, int, y < x ? y : x)
GPUCMD_WARP_REDUCE(__reduce_min_sync, unsigned, y < x ? y : x)
GPUCMD_WARP_REDUCE(__reduce_max_sync, int, x < y ? y : x)
GPUCMD_WARP_REDUCE(__reduce_max_sync, unsigned, x < y ? y : x)
GPUCMD_WARP_REDUCE(__reduce_and_sync, unsigned, x & y)
GPUCMD_WARP_REDUCE(__reduce_or_sync, unsigned, x | y)
GPUCMD_WARP_REDUCE(__reduce_xor_sync, unsigned, x ^ y)
#undef GPUCMD_WARP_REDUCE
__device__ inline float2 atomicAdd(float2* address, float2 value) {
  return make_float2(atomicAdd(&address->x, value.x), atomicAdd(&address->y, value.y));
}
__device__ inline float4 atomicAdd(float4* address, float4 value) {
  return make_float4(atomicAdd(&address->x, value.x), atomicAdd(&address->y, value.y),
                     atomicAdd(&address->z, value.z), atomicAdd(&address->w, value.w));
}
)DEFINITIONS";
}

}  // namespace gpucmd
