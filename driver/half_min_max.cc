#include "driver/half_min_max.h"

namespace gpucmd {

const char* HalfMinMaxDefinitions() {
  return R"HEADER(
__device__ inline __half gpucmd_hmax(__half a, __half b) {
  const float x = __half2float(a), y = __half2float(b);
  if (x != x) return y != y ? __ushort_as_half(0x7fff) : b;
  if (y != y) return a;
  if (x == y) return (__half_as_ushort(a) & 0x8000) ? b : a;
  return x > y ? a : b;
}
__device__ inline __half gpucmd_hmin(__half a, __half b) {
  const float x = __half2float(a), y = __half2float(b);
  if (x != x) return y != y ? __ushort_as_half(0x7fff) : b;
  if (y != y) return a;
  if (x == y) return (__half_as_ushort(a) & 0x8000) ? a : b;
  return x < y ? a : b;
}
#define __hmax gpucmd_hmax
#define __hmin gpucmd_hmin
)HEADER";
}

}  // namespace gpucmd
