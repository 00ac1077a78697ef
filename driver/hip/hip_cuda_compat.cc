#include "driver/hip/hip_cuda_compat.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "driver/portable_intrinsics.h"
#include "driver/simd_intrinsics.h"

namespace gpucmd {
namespace {

constexpr absl::string_view kPreludeBegin = R"PRELUDE(
// ---- gpucmd: CUDA spellings on HIP ----
template <typename T>
__device__ inline T __shfl_sync(unsigned, T var, int source_lane, int width = 32) {
  return __shfl(var, source_lane, width);
}
template <typename T>
__device__ inline T __shfl_up_sync(unsigned, T var, unsigned delta, int width = 32) {
  return __shfl_up(var, delta, width);
}
template <typename T>
__device__ inline T __shfl_down_sync(unsigned, T var, unsigned delta, int width = 32) {
  return __shfl_down(var, delta, width);
}
template <typename T>
__device__ inline T __shfl_xor_sync(unsigned, T var, int lane_mask, int width = 32) {
  return __shfl_xor(var, lane_mask, width);
}
__device__ inline unsigned __ballot_sync(unsigned mask, int predicate) {
  return static_cast<unsigned>(__ballot(predicate)) & mask;
}
__device__ inline int __any_sync(unsigned, int predicate) { return __any(predicate); }
__device__ inline int __all_sync(unsigned, int predicate) { return __all(predicate); }
__device__ inline unsigned __activemask() { return static_cast<unsigned>(__ballot(1)); }
// The lanes that reached the call together: those running it (any call site).
__device__ inline unsigned gpucmd_coalesced_lanes(unsigned long long) { return __activemask(); }
#define GPUCMD_CALL_SITE 0ull
// Ends the launch with an error (the reason is the CPU driver's to report).
__device__ inline void gpucmd_fail_launch(const char*) { __builtin_trap(); }
// HIP 5.2's hrcp and h2rcp call an intrinsic its device library lacks (the link fails):
// kernels get these (and <cuda_bf16.h>'s bfloat16 forms are named alike).
__device__ inline __half gpucmd_hrcp(__half a) { return __float2half(1.0f / __half2float(a)); }
__device__ inline __half2 gpucmd_h2rcp(__half2 a) {
  return __halves2half2(gpucmd_hrcp(__low2half(a)), gpucmd_hrcp(__high2half(a)));
}
#define hrcp gpucmd_hrcp
#define h2rcp gpucmd_h2rcp
__device__ inline void __syncwarp(unsigned = 0xffffffffu) { __builtin_amdgcn_wave_barrier(); }
template <typename T>
__device__ inline unsigned __match_any_sync(unsigned mask, T value) {
  unsigned same = 0;
  for (int lane = 0; lane < 32; ++lane) {
    if (__shfl(value, lane) == value) same |= 1u << lane;
  }
  return same & mask;
}
template <typename T>
__device__ inline unsigned __match_all_sync(unsigned mask, T value, int* predicate) {
  const unsigned same = __match_any_sync(mask, value);
  const unsigned arrived = __ballot_sync(mask, 1);
  *predicate = same == arrived;
  return same == arrived ? same : 0u;
}
// s_sleep 1 waits about 64 clocks: about 32 ns at 2 GHz (CUDA: at most a millisecond).
__device__ inline void __nanosleep(unsigned nanoseconds) {
  for (unsigned slept = 0; slept < nanoseconds && slept < 1000000u; slept += 32) {
    __builtin_amdgcn_s_sleep(1);
  }
}
// On the aligned 32-bit word that holds the 16 bits.
__device__ inline unsigned short atomicCAS(unsigned short* address, unsigned short compare,
                                           unsigned short value) {
  const unsigned long long at = reinterpret_cast<unsigned long long>(address);
  unsigned* word = reinterpret_cast<unsigned*>(at & ~3ull);
  const unsigned shift = static_cast<unsigned>(at & 2ull) * 8u;
  unsigned old = *word, assumed;
  do {
    assumed = old;
    if (((assumed >> shift) & 0xffffu) != compare) break;
    old = atomicCAS(word, assumed,
                    (assumed & ~(0xffffu << shift)) | (static_cast<unsigned>(value) << shift));
  } while (old != assumed);
  return static_cast<unsigned short>((old >> shift) & 0xffffu);
}
template <typename Pick>
__device__ inline long long gpucmd_atomic_pick(long long* address, long long value, Pick pick) {
  unsigned long long* bits = reinterpret_cast<unsigned long long*>(address);
  unsigned long long old = *bits, assumed;
  do {
    assumed = old;
    const long long chosen = pick(static_cast<long long>(assumed), value);
    old = atomicCAS(bits, assumed, static_cast<unsigned long long>(chosen));
  } while (old != assumed);
  return static_cast<long long>(old);
}
__device__ inline long long atomicMin(long long* address, long long value) {
  return gpucmd_atomic_pick(address, value, [](long long a, long long b) { return b < a ? b : a; });
}
__device__ inline long long atomicMax(long long* address, long long value) {
  return gpucmd_atomic_pick(address, value, [](long long a, long long b) { return a < b ? b : a; });
}
#define GPUCMD_BLOCK_ATOMIC(name) \
  template <typename... A> __device__ inline auto name##_block(A... a) { return name(a...); }
GPUCMD_BLOCK_ATOMIC(atomicAdd) GPUCMD_BLOCK_ATOMIC(atomicSub) GPUCMD_BLOCK_ATOMIC(atomicExch)
GPUCMD_BLOCK_ATOMIC(atomicMin) GPUCMD_BLOCK_ATOMIC(atomicMax) GPUCMD_BLOCK_ATOMIC(atomicInc)
GPUCMD_BLOCK_ATOMIC(atomicDec) GPUCMD_BLOCK_ATOMIC(atomicCAS) GPUCMD_BLOCK_ATOMIC(atomicAnd)
GPUCMD_BLOCK_ATOMIC(atomicOr) GPUCMD_BLOCK_ATOMIC(atomicXor)
#undef GPUCMD_BLOCK_ATOMIC
// ---- (driver/portable_intrinsics.h, then driver/simd_intrinsics.h) ----
)PRELUDE";

constexpr absl::string_view kPreludeEnd = R"PRELUDE(
// ---- end of prelude ----
#line 1 "kernel.cu"
)PRELUDE";

}  // namespace

absl::string_view HipCudaCompatPrelude() {
  static const std::string* const prelude = new std::string(absl::StrCat(
      kPreludeBegin, PortableIntrinsicDefinitions(), SimdIntrinsicDefinitions(), kPreludeEnd));
  return *prelude;
}

}  // namespace gpucmd
