#include "driver/cpu/cpu_prelude.h"

#include <regex>

#include "absl/strings/str_cat.h"
#include "driver/cpu/kernel_abi.h"

namespace gpucmd {
namespace {

constexpr absl::string_view kPrelude = R"PRELUDE(
// ---- gpucmd CPU kernel prelude ----
#include <math.h>
#include <stdint.h>
#include <stddef.h>
#include <time.h>
#include <cstring>
#include <type_traits>
#include <utility>

namespace gpucmd_rt {
struct Dim3 { unsigned x, y, z; };
struct ThreadContext {
  Dim3 thread_idx, block_idx, block_dim, grid_dim;
  void* dynamic_shared;
  void (*sync)(ThreadContext*);
  void* scheduler;
};
}  // namespace gpucmd_rt

static thread_local gpucmd_rt::ThreadContext* gpucmd_ctx = nullptr;
// Modules link without the C runtime's start files (driver/cpu/module_checks.h), which
// define the handle function-local statics register their destructors against.
extern "C" __attribute__((visibility("hidden"))) void* __dso_handle = &__dso_handle;
extern "C" void gpucmd_bind(gpucmd_rt::ThreadContext* context) { gpucmd_ctx = context; }

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 { unsigned x, y, z; };

#define threadIdx (gpucmd_ctx->thread_idx)
#define blockIdx (gpucmd_ctx->block_idx)
#define blockDim (gpucmd_ctx->block_dim)
#define gridDim (gpucmd_ctx->grid_dim)
#define warpSize 32
#define __syncthreads() (gpucmd_ctx->sync(gpucmd_ctx))
#define __threadfence() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define __threadfence_block() __atomic_thread_fence(__ATOMIC_SEQ_CST)

#define __global__
#define __host__
#define __device__
#define __constant__
#define __shared__ static thread_local
#define __restrict__ __restrict
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) alignas(n)

template <typename A, typename B>
inline auto min(A a, B b) -> decltype(a < b ? a : b) { return b < a ? b : a; }
template <typename A, typename B>
inline auto max(A a, B b) -> decltype(a < b ? a : b) { return a < b ? b : a; }

// A counter that only moves forward: here it counts nanoseconds (a GPU counts its
// multiprocessor's cycles). For timing inside a kernel and for spinning.
inline long long clock64() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec * 1000000000LL + now.tv_nsec;
}

inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __saturatef(float x) { return x < 0.f ? 0.f : (x > 1.f ? 1.f : x); }
inline float __int_as_float(int x) { float f; std::memcpy(&f, &x, 4); return f; }
inline int __float_as_int(float f) { int x; std::memcpy(&x, &f, 4); return x; }

// Atomics: device memory is shared by the blocks running on every worker thread.
template <typename T>
inline T atomicAdd(T* address, T value) {
  if constexpr (std::is_integral_v<T>) {
    return __atomic_fetch_add(address, value, __ATOMIC_SEQ_CST);
  } else {
    T old = __atomic_load_n(address, __ATOMIC_SEQ_CST);
    while (!__atomic_compare_exchange(address, &old, &(const T&)(old + value), false,
                                      __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
    return old;
  }
}
template <typename T>
inline T atomicSub(T* address, T value) { return atomicAdd(address, static_cast<T>(-value)); }
template <typename T, typename Op>
inline T gpucmd_atomic_update(T* address, Op op) {
  T old = __atomic_load_n(address, __ATOMIC_SEQ_CST);
  T desired;
  do {
    desired = op(old);
  } while (!__atomic_compare_exchange(address, &old, &desired, false, __ATOMIC_SEQ_CST,
                                      __ATOMIC_SEQ_CST));
  return old;
}
template <typename T>
inline T atomicMax(T* address, T value) {
  return gpucmd_atomic_update(address, [value](T old) { return old < value ? value : old; });
}
template <typename T>
inline T atomicMin(T* address, T value) {
  return gpucmd_atomic_update(address, [value](T old) { return value < old ? value : old; });
}
template <typename T>
inline T atomicExch(T* address, T value) {
  T old;
  __atomic_exchange(address, &value, &old, __ATOMIC_SEQ_CST);
  return old;
}
template <typename T>
inline T atomicCAS(T* address, T compare, T value) {
  __atomic_compare_exchange(address, &compare, &value, false, __ATOMIC_SEQ_CST,
                            __ATOMIC_SEQ_CST);
  return compare;
}
template <typename T>
inline T atomicAnd(T* address, T value) { return __atomic_fetch_and(address, value, __ATOMIC_SEQ_CST); }
template <typename T>
inline T atomicOr(T* address, T value) { return __atomic_fetch_or(address, value, __ATOMIC_SEQ_CST); }
template <typename T>
inline T atomicXor(T* address, T value) { return __atomic_fetch_xor(address, value, __ATOMIC_SEQ_CST); }

template <typename... P>
constexpr size_t gpucmd_arity(void (*)(P...)) { return sizeof...(P); }
template <typename... P, size_t... I>
inline void gpucmd_call(void (*kernel)(P...), void** args, std::index_sequence<I...>) {
  kernel(*static_cast<std::remove_cv_t<std::remove_reference_t<P>>*>(args[I])...);
}
// ---- end of prelude ----
#line 1 "kernel.cu"
)PRELUDE";

struct Unsupported {
  const char* pattern;
  const char* feature;
};

constexpr Unsupported kUnsupported[] = {
    {R"(\b__shfl\w*\s*\()", "warp shuffles (__shfl*)"},
    {R"(\b__(ballot|any|all|activemask|match_any|match_all)\w*\s*\()", "warp votes"},
    {R"(\b(tex1D|tex2D|tex3D|tex1Dfetch|texture\s*<|cudaTextureObject_t)\w*)", "textures"},
    {R"(\b(surf1D|surf2D|surf3D)\w*|cudaSurfaceObject_t)", "surfaces"},
};

}  // namespace

absl::string_view CpuKernelPrelude() { return kPrelude; }

absl::StatusOr<std::string> CpuKernelTranslationUnit(absl::string_view source,
                                                     absl::string_view entry) {
  std::string code(source);
  for (const Unsupported& unsupported : kUnsupported) {
    std::smatch match;
    if (std::regex_search(code, match, std::regex(unsupported.pattern))) {
      return absl::InvalidArgumentError(
          absl::StrCat("the CPU driver does not support ", unsupported.feature, ": found \"",
                       match.str(), "\""));
    }
  }
  // extern __shared__ T name[];  ->  `name` names the launch's per-block dynamic shared
  // memory, wherever it is declared (a macro: evaluated where it is used).
  code = std::regex_replace(
      code, std::regex(R"(extern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s*)?([\w\s:]*?[\w:]+)\s+(\w+)\s*\[\s*\]\s*;)"),
      "\n#define $2 (static_cast<$1*>(gpucmd_ctx->dynamic_shared))\n");
  bool uses_barrier = code.find("__syncthreads") != std::string::npos;
  return absl::StrCat(kPrelude, code, "\n#line 1 \"gpucmd-exports\"\n",
                      "extern \"C\" const int gpucmd_abi_version = ", kKernelAbiVersion, ";\n",
                      "extern \"C\" const int gpucmd_uses_barrier = ", uses_barrier ? 1 : 0,
                      ";\n", "extern \"C\" void gpucmd_entry(void** args) {\n",
                      "  gpucmd_call(&", entry, ", args, std::make_index_sequence<",
                      "gpucmd_arity(&", entry, ")>());\n}\n");
}

}  // namespace gpucmd
