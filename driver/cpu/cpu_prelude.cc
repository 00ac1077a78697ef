#include "driver/cpu/cpu_prelude.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "driver/cpu/kernel_abi.h"
#include "driver/portable_intrinsics.h"
#include "driver/simd_intrinsics.h"

namespace gpucmd {
namespace {

constexpr absl::string_view kPreludeBegin = R"PRELUDE(
// ---- gpucmd CPU kernel prelude ----
#include <assert.h>
#include <fenv.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stddef.h>
#include <time.h>
#include <cstring>
#include <limits>
#include <tuple>
#include <type_traits>
#include <utility>

struct uint3;
namespace gpucmd_rt {
// threadIdx and the other built-in indices, which convert to CUDA's types of them.
struct Dim3 {
  unsigned x, y, z;
  operator uint3() const;
};
struct ThreadContext {
  Dim3 thread_idx, block_idx, block_dim, grid_dim;
  void* dynamic_shared;
  void (*sync)(ThreadContext*);
  void* scheduler;
  unsigned long long (*warp)(ThreadContext*, int op, unsigned mask, unsigned long long value,
                             int arg, int width);
  void (*fail)(ThreadContext*, const char* message);
  void (*print)(ThreadContext*, const char* text, unsigned size);
};
// driver/cpu/kernel_abi.h's WarpOp.
enum WarpOp : int {
  kShuffle, kShuffleUp, kShuffleDown, kShuffleXor, kBallot, kAny, kAll, kMatchAny, kSync,
  kCoalesce = 10
};
}  // namespace gpucmd_rt

static thread_local gpucmd_rt::ThreadContext* gpucmd_ctx = nullptr;
namespace gpucmd_rt {
// What an `extern __shared__ T name[]` at namespace scope becomes: wherever it is used,
// the running block's dynamic shared memory.
template <typename T>
struct DynamicShared {
  operator T*() const { return static_cast<T*>(gpucmd_ctx->dynamic_shared); }
  template <typename U>
  explicit operator U*() const { return static_cast<U*>(gpucmd_ctx->dynamic_shared); }
};
}  // namespace gpucmd_rt
// Modules link without the C runtime's start files (driver/cpu/module_checks.h), which
// define the handle function-local statics register their destructors against.
extern "C" __attribute__((visibility("hidden"))) void* __dso_handle = &__dso_handle;
extern "C" void gpucmd_bind(gpucmd_rt::ThreadContext* context) { gpucmd_ctx = context; }
// A failed assert() ends the launch with the assertion's place (the module's own
// definition: hidden, so the kernel's calls reach it rather than the C library's).
extern "C" __attribute__((visibility("hidden"))) void __assert_fail(
    const char* assertion, const char* file, unsigned int line, const char* function) noexcept {
  char message[400];
  snprintf(message, sizeof(message), "%s:%u: %s: assertion `%s' failed", file, line, function,
           assertion);
  gpucmd_ctx->fail(gpucmd_ctx, message);
  __builtin_unreachable();
}
// What a kernel prints goes with its launch (as assert, the module's own definitions;
// the compiler turns some printf calls into puts or putchar).
extern "C" __attribute__((visibility("hidden"))) int printf(const char* format, ...) {
  char text[1024];
  va_list arguments;
  va_start(arguments, format);
  const int size = vsnprintf(text, sizeof(text), format, arguments);
  va_end(arguments);
  if (size > 0) {
    gpucmd_ctx->print(gpucmd_ctx, text, size < 1024 ? static_cast<unsigned>(size) : 1023u);
  }
  return size;
}
extern "C" __attribute__((visibility("hidden"))) int puts(const char* text) {
  gpucmd_ctx->print(gpucmd_ctx, text, static_cast<unsigned>(strlen(text)));
  gpucmd_ctx->print(gpucmd_ctx, "\n", 1);
  return 1;
}
extern "C" __attribute__((visibility("hidden"))) int putchar(int c) {
  const char character = static_cast<char>(c);
  gpucmd_ctx->print(gpucmd_ctx, &character, 1);
  return c;
}

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
  constexpr dim3(gpucmd_rt::Dim3 d) : x(d.x), y(d.y), z(d.z) {}
};

#define threadIdx (gpucmd_ctx->thread_idx)
#define blockIdx (gpucmd_ctx->block_idx)
#define blockDim (gpucmd_ctx->block_dim)
#define gridDim (gpucmd_ctx->grid_dim)
#define warpSize 32
#define __threadfence() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define __threadfence_block() __atomic_thread_fence(__ATOMIC_SEQ_CST)

// The kernel front end (driver/front_end/kernel_parser.h) parses with this prelude and
// GPUCMD_KERNEL_FRONT_END defined: there the CUDA qualifiers leave annotations in the
// syntax tree, and what the CPU driver cannot run is declared, marked, so that a use of
// it is found. The host compiler sees neither.
#if defined(GPUCMD_KERNEL_FRONT_END)
#define GPUCMD_MARK(name) __attribute__((annotate(name)))
#define GPUCMD_UNSUPPORTED(feature) __attribute__((annotate("gpucmd-unsupported:" feature)))
#define __shared__ GPUCMD_MARK("__shared__")
#define __managed__ GPUCMD_MARK("__managed__")
#define __grid_constant__
typedef struct alignas(64) CUtensorMap_st { unsigned long long opaque[16]; } CUtensorMap;
typedef unsigned long long cudaTextureObject_t GPUCMD_UNSUPPORTED("textures");
typedef unsigned long long cudaSurfaceObject_t GPUCMD_UNSUPPORTED("surfaces");
template <typename T, int dimensions = 1, int mode = 0>
struct GPUCMD_UNSUPPORTED("textures") texture {};
#define GPUCMD_TEXTURE_READ(name) \
  template <typename T = float, typename... A> GPUCMD_UNSUPPORTED("textures") T name(A...);
GPUCMD_TEXTURE_READ(tex1D) GPUCMD_TEXTURE_READ(tex2D) GPUCMD_TEXTURE_READ(tex3D)
GPUCMD_TEXTURE_READ(tex1Dfetch) GPUCMD_TEXTURE_READ(tex1DLayered)
GPUCMD_TEXTURE_READ(tex2DLayered) GPUCMD_TEXTURE_READ(texCubemap)
GPUCMD_TEXTURE_READ(tex1DLod) GPUCMD_TEXTURE_READ(tex2DLod) GPUCMD_TEXTURE_READ(tex3DLod)
GPUCMD_TEXTURE_READ(tex2Dgather)
#undef GPUCMD_TEXTURE_READ
#define GPUCMD_SURFACE_ACCESS(name) \
  template <typename T = int, typename... A> GPUCMD_UNSUPPORTED("surfaces") T name(A...);
GPUCMD_SURFACE_ACCESS(surf1Dread) GPUCMD_SURFACE_ACCESS(surf2Dread)
GPUCMD_SURFACE_ACCESS(surf3Dread) GPUCMD_SURFACE_ACCESS(surf1Dwrite)
GPUCMD_SURFACE_ACCESS(surf2Dwrite) GPUCMD_SURFACE_ACCESS(surf3Dwrite)
#undef GPUCMD_SURFACE_ACCESS
#else
#define GPUCMD_MARK(name)
#define __shared__ static thread_local
#endif
#define __global__ GPUCMD_MARK("__global__")
#define __host__ GPUCMD_MARK("__host__")
#define __device__ GPUCMD_MARK("__device__")
#define __constant__ GPUCMD_MARK("__constant__")
#define __restrict__ __restrict
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))

inline void __syncthreads() { gpucmd_ctx->sync(gpucmd_ctx); }
// How many of the block's threads pass a nonzero `predicate`, once all have arrived.
inline int __syncthreads_count(int predicate) {
  static thread_local int count;
  __syncthreads();  // every thread has read the count of the call before
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) count = 0;
  __syncthreads();
  if (predicate) __atomic_fetch_add(&count, 1, __ATOMIC_RELAXED);
  __syncthreads();
  return count;
}
inline int __syncthreads_and(int predicate) {
  return __syncthreads_count(predicate) == static_cast<int>(blockDim.x * blockDim.y * blockDim.z);
}
inline int __syncthreads_or(int predicate) { return __syncthreads_count(predicate) != 0; }

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

inline float __uint_as_float(unsigned x) { float f; std::memcpy(&f, &x, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned x; std::memcpy(&x, &f, 4); return x; }
inline double __longlong_as_double(long long x) { double d; std::memcpy(&d, &x, 8); return d; }
inline long long __double_as_longlong(double d) { long long x; std::memcpy(&x, &d, 8); return x; }
inline int __double2hiint(double d) { return static_cast<int>(__double_as_longlong(d) >> 32); }
inline int __double2loint(double d) { return static_cast<int>(__double_as_longlong(d)); }
inline double __hiloint2double(int hi, int lo) {
  return __longlong_as_double(static_cast<long long>(
      (static_cast<unsigned long long>(static_cast<unsigned>(hi)) << 32) |
      static_cast<unsigned>(lo)));
}

// CUDA's roundings of arithmetic and conversions: _rn to nearest even (the default
// mode, in which the plain operators round), _rz toward zero, _rd down, _ru up. The
// operands are read, and the result written, through volatile copies, so that the
// compiler computes it between the mode's change and its restore.
#define GPUCMD_ROUNDED(name, R, mode, parameters, operands, expression) \
  inline R name parameters {                                            \
    const int saved = fegetround();                                     \
    fesetround(mode);                                                   \
    operands;                                                           \
    volatile R result = (expression);                                   \
    fesetround(saved);                                                  \
    return result;                                                      \
  }
// `signature`: GPUCMD_UNARY, _BINARY or _TERNARY, the parameters and their copies.
#define GPUCMD_ROUNDED_SPLIT(...) GPUCMD_ROUNDED(__VA_ARGS__)
#define GPUCMD_DIRECTED(name, R, signature, expression)                        \
  GPUCMD_ROUNDED_SPLIT(name##_rz, R, FE_TOWARDZERO, signature, expression)     \
  GPUCMD_ROUNDED_SPLIT(name##_rd, R, FE_DOWNWARD, signature, expression)       \
  GPUCMD_ROUNDED_SPLIT(name##_ru, R, FE_UPWARD, signature, expression)
#define GPUCMD_ROUNDINGS(name, R, signature, expression)                       \
  GPUCMD_ROUNDED_SPLIT(name##_rn, R, FE_TONEAREST, signature, expression)      \
  GPUCMD_ROUNDED_SPLIT(name##_rz, R, FE_TOWARDZERO, signature, expression)     \
  GPUCMD_ROUNDED_SPLIT(name##_rd, R, FE_DOWNWARD, signature, expression)       \
  GPUCMD_ROUNDED_SPLIT(name##_ru, R, FE_UPWARD, signature, expression)
#define GPUCMD_UNARY(T) (T x), volatile T a = x
#define GPUCMD_BINARY(T) (T x, T y), volatile T a = x; volatile T b = y
#define GPUCMD_TERNARY(T) (T x, T y, T z), volatile T a = x; volatile T b = y; volatile T c = z
inline float __fadd_rn(float x, float y) { return x + y; }
inline float __fsub_rn(float x, float y) { return x - y; }
inline float __fmul_rn(float x, float y) { return x * y; }
inline float __fdiv_rn(float x, float y) { return x / y; }
inline float __fmaf_rn(float x, float y, float z) { return fmaf(x, y, z); }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __frsqrt_rn(float x) { return static_cast<float>(1.0 / sqrt(static_cast<double>(x))); }
GPUCMD_DIRECTED(__fadd, float, GPUCMD_BINARY(float), a + b)
GPUCMD_DIRECTED(__fsub, float, GPUCMD_BINARY(float), a - b)
GPUCMD_DIRECTED(__fmul, float, GPUCMD_BINARY(float), a * b)
GPUCMD_DIRECTED(__fdiv, float, GPUCMD_BINARY(float), a / b)
GPUCMD_DIRECTED(__fmaf, float, GPUCMD_TERNARY(float), fmaf(a, b, c))
GPUCMD_DIRECTED(__frcp, float, GPUCMD_UNARY(float), 1.0f / a)
GPUCMD_DIRECTED(__fsqrt, float, GPUCMD_UNARY(float), sqrtf(a))
inline double __dadd_rn(double x, double y) { return x + y; }
inline double __dsub_rn(double x, double y) { return x - y; }
inline double __dmul_rn(double x, double y) { return x * y; }
inline double __ddiv_rn(double x, double y) { return x / y; }
inline double __fma_rn(double x, double y, double z) { return fma(x, y, z); }
inline double __drcp_rn(double x) { return 1.0 / x; }
inline double __dsqrt_rn(double x) { return sqrt(x); }
GPUCMD_DIRECTED(__dadd, double, GPUCMD_BINARY(double), a + b)
GPUCMD_DIRECTED(__dsub, double, GPUCMD_BINARY(double), a - b)
GPUCMD_DIRECTED(__dmul, double, GPUCMD_BINARY(double), a * b)
GPUCMD_DIRECTED(__ddiv, double, GPUCMD_BINARY(double), a / b)
GPUCMD_DIRECTED(__fma, double, GPUCMD_TERNARY(double), fma(a, b, c))
GPUCMD_DIRECTED(__drcp, double, GPUCMD_UNARY(double), 1.0 / a)
GPUCMD_DIRECTED(__dsqrt, double, GPUCMD_UNARY(double), sqrt(a))
// Integers to floating point, rounded as the name says.
GPUCMD_ROUNDINGS(__int2float, float, GPUCMD_UNARY(int), static_cast<float>(a))
GPUCMD_ROUNDINGS(__uint2float, float, GPUCMD_UNARY(unsigned), static_cast<float>(a))
GPUCMD_ROUNDINGS(__ll2float, float, GPUCMD_UNARY(long long), static_cast<float>(a))
GPUCMD_ROUNDINGS(__ull2float, float, GPUCMD_UNARY(unsigned long long), static_cast<float>(a))
GPUCMD_ROUNDINGS(__ll2double, double, GPUCMD_UNARY(long long), static_cast<double>(a))
GPUCMD_ROUNDINGS(__ull2double, double, GPUCMD_UNARY(unsigned long long), static_cast<double>(a))
GPUCMD_ROUNDINGS(__double2float, float, GPUCMD_UNARY(double), static_cast<float>(a))
inline double __int2double_rn(int x) { return x; }
inline double __uint2double_rn(unsigned x) { return x; }
#undef GPUCMD_ROUNDED
#undef GPUCMD_ROUNDED_SPLIT
#undef GPUCMD_DIRECTED
#undef GPUCMD_ROUNDINGS
#undef GPUCMD_UNARY
#undef GPUCMD_BINARY
#undef GPUCMD_TERNARY
// Floating point to integers, as a GPU converts: `rounded` (already a whole number, or
// NaN or infinite) saturates to I's range, and NaN is 0.
template <typename I>
inline I gpucmd_saturated(double rounded) {
  if (rounded != rounded) return 0;
  if (rounded <= static_cast<double>(std::numeric_limits<I>::min())) {
    return std::numeric_limits<I>::min();
  }
  if (rounded >= static_cast<double>(std::numeric_limits<I>::max())) {
    return std::numeric_limits<I>::max();
  }
  return static_cast<I>(rounded);
}
#define GPUCMD_TO_INTEGER(name, F, I)                                                      \
  inline I name##_rn(F x) { return gpucmd_saturated<I>(nearbyint(static_cast<double>(x))); } \
  inline I name##_rz(F x) { return gpucmd_saturated<I>(trunc(static_cast<double>(x))); }     \
  inline I name##_rd(F x) { return gpucmd_saturated<I>(floor(static_cast<double>(x))); }     \
  inline I name##_ru(F x) { return gpucmd_saturated<I>(ceil(static_cast<double>(x))); }
GPUCMD_TO_INTEGER(__float2int, float, int)
GPUCMD_TO_INTEGER(__float2uint, float, unsigned)
GPUCMD_TO_INTEGER(__float2ll, float, long long)
GPUCMD_TO_INTEGER(__float2ull, float, unsigned long long)
GPUCMD_TO_INTEGER(__double2int, double, int)
GPUCMD_TO_INTEGER(__double2uint, double, unsigned)
GPUCMD_TO_INTEGER(__double2ll, double, long long)
GPUCMD_TO_INTEGER(__double2ull, double, unsigned long long)
#undef GPUCMD_TO_INTEGER

// CUDA's math library beyond C's, and its fast versions (here as exact as C's).
inline float __tanf(float x) { return tanf(x); }
inline float __exp10f(float x) { return exp10f(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __log10f(float x) { return log10f(x); }
inline void __sincosf(float x, float* s, float* c) { sincosf(x, s, c); }
// sin(pi x) and cos(pi x), exact at the integers and half-integers as CUDA's are.
inline double sinpi(double x) {
  const double r = remainder(x, 2.0);  // in [-1, 1]
  if (r == 0.0 || fabs(r) == 1.0) return copysign(0.0, x);
  return sin(M_PI * r);
}
inline double cospi(double x) {
  const double r = fabs(remainder(x, 2.0));
  if (r == 0.5) return 0.0;
  return r == 1.0 ? -1.0 : (r == 0.0 ? 1.0 : cos(M_PI * r));
}
inline float sinpif(float x) { return static_cast<float>(sinpi(x)); }
inline float cospif(float x) { return static_cast<float>(cospi(x)); }
inline void sincospif(float x, float* s, float* c) { *s = sinpif(x); *c = cospif(x); }
inline void sincospi(double x, double* s, double* c) { *s = sinpi(x); *c = cospi(x); }
inline double norm3d(double a, double b, double c) { return hypot(hypot(a, b), c); }
inline double rnorm3d(double a, double b, double c) { return 1.0 / norm3d(a, b, c); }
inline double norm4d(double a, double b, double c, double d) { return hypot(norm3d(a, b, c), d); }
inline double rnorm4d(double a, double b, double c, double d) { return 1.0 / norm4d(a, b, c, d); }
inline float norm3df(float a, float b, float c) { return static_cast<float>(norm3d(a, b, c)); }
inline float rnorm3df(float a, float b, float c) { return static_cast<float>(rnorm3d(a, b, c)); }
inline float norm4df(float a, float b, float c, float d) { return static_cast<float>(norm4d(a, b, c, d)); }
inline float rnorm4df(float a, float b, float c, float d) { return static_cast<float>(rnorm4d(a, b, c, d)); }
inline double rhypot(double x, double y) { return 1.0 / hypot(x, y); }
inline float rhypotf(float x, float y) { return static_cast<float>(rhypot(x, y)); }
inline double rcbrt(double x) { return 1.0 / cbrt(x); }
inline float rcbrtf(float x) { return static_cast<float>(rcbrt(x)); }
inline double normcdf(double x) { return 0.5 * erfc(-x * M_SQRT1_2); }
inline float normcdff(float x) { return static_cast<float>(normcdf(x)); }
inline float fdividef(float x, float y) { return x / y; }
// The inverse error functions, by Newton's method: on erf near 0, on log erfc beyond
// (where erfc is far below 1 and its logarithm nearly linear in y^2).
inline double erfcinv(double x) {
  if (!(x > 0.0 && x < 2.0)) return x == 0.0 ? INFINITY : (x == 2.0 ? -INFINITY : NAN);
  if (x > 1.0) return -erfcinv(2.0 - x);
  double y = sqrt(-log(x));
  for (int i = 0; i < 100; ++i) {
    const double e = erfc(y);
    const double step = (log(e) - log(x)) * e / (-M_2_SQRTPI * exp(-y * y));
    y -= step;
    if (fabs(step) <= 1e-16 * fabs(y)) break;
  }
  return y;
}
inline double erfinv(double x) {
  if (fabs(x) >= 0.5) return x > 0 ? erfcinv(1.0 - x) : -erfcinv(1.0 + x);
  double y = x / M_2_SQRTPI;
  for (int i = 0; i < 100; ++i) {
    const double step = (erf(y) - x) / (M_2_SQRTPI * exp(-y * y));
    y -= step;
    if (fabs(step) <= 1e-17 * fabs(y)) break;
  }
  return y;
}
inline float erfinvf(float x) { return static_cast<float>(erfinv(x)); }
inline float erfcinvf(float x) { return static_cast<float>(erfcinv(x)); }
inline double normcdfinv(double p) { return -M_SQRT2 * erfcinv(2.0 * p); }
inline float normcdfinvf(float p) { return static_cast<float>(normcdfinv(p)); }
// exp(x^2) erfc(x); past x = 26, where erfc underflows, its asymptotic series.
inline double erfcx(double x) {
  if (x < 26.0) return exp(x * x) * erfc(x);
  const double r = 1.0 / (2.0 * x * x);
  return (1.0 - r * (1.0 - 3.0 * r * (1.0 - 5.0 * r * (1.0 - 7.0 * r)))) / (x * sqrt(M_PI));
}
inline float erfcxf(float x) { return static_cast<float>(erfcx(x)); }
// The modified Bessel functions of the first kind, by their power series.
inline double gpucmd_bessel_i(double x, int order) {
  const double q = x * x / 4.0;
  double term = order == 0 ? 1.0 : x / 2.0;
  double sum = term;
  for (int k = 1; k < 1000 && term > sum * 1e-17; ++k) {
    term *= q / (k * static_cast<double>(k + order));
    sum += term;
  }
  return sum;
}
inline double cyl_bessel_i0(double x) { return gpucmd_bessel_i(x, 0); }
inline double cyl_bessel_i1(double x) {
  return x < 0 ? -gpucmd_bessel_i(-x, 1) : gpucmd_bessel_i(x, 1);
}
inline float cyl_bessel_i0f(float x) { return static_cast<float>(cyl_bessel_i0(x)); }
inline float cyl_bessel_i1f(float x) { return static_cast<float>(cyl_bessel_i1(x)); }
// Waits about `nanoseconds` (CUDA: at most a millisecond), on the kernel's own clock.
inline void __nanosleep(unsigned nanoseconds) {
  const long long until = clock64() + (nanoseconds < 1000000u ? nanoseconds : 1000000u);
  while (clock64() < until) {
  }
}

// Integer intrinsics, with CUDA's results for every input (0 included).
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) {
  return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x));
}
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}
inline unsigned long long __brevll(unsigned long long x) {
  return (static_cast<unsigned long long>(__brev(static_cast<unsigned>(x))) << 32) |
         __brev(static_cast<unsigned>(x >> 32));
}
inline int __mul24(int x, int y) {
  return static_cast<int>(static_cast<long long>((x << 8) >> 8) * ((y << 8) >> 8));
}
inline unsigned __umul24(unsigned x, unsigned y) { return (x & 0xffffffu) * (y & 0xffffffu); }
inline int __mulhi(int x, int y) { return static_cast<int>((static_cast<long long>(x) * y) >> 32); }
inline unsigned __umulhi(unsigned x, unsigned y) {
  return static_cast<unsigned>((static_cast<unsigned long long>(x) * y) >> 32);
}
inline long long __mul64hi(long long x, long long y) {
  return static_cast<long long>((static_cast<__int128>(x) * y) >> 64);
}
inline unsigned long long __umul64hi(unsigned long long x, unsigned long long y) {
  return static_cast<unsigned long long>((static_cast<unsigned __int128>(x) * y) >> 64);
}
// Bytes of y:x (x the low word) picked by the selector's four nibbles (their low 3 bits).
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned selector) {
  const unsigned long long bytes = (static_cast<unsigned long long>(y) << 32) | x;
  unsigned result = 0;
  for (int i = 0; i < 4; ++i) {
    const unsigned pick = (selector >> (4 * i)) & 7u;
    result |= static_cast<unsigned>((bytes >> (8 * pick)) & 0xffu) << (8 * i);
  }
  return result;
}
// hi:lo shifted by `shift` (modulo 32, or clamped to 32 for the _c forms): the high word
// of a left shift, the low word of a right one.
inline unsigned long long gpucmd_funnel(unsigned lo, unsigned hi) {
  return (static_cast<unsigned long long>(hi) << 32) | lo;
}
inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned shift) {
  return static_cast<unsigned>((gpucmd_funnel(lo, hi) << (shift & 31u)) >> 32);
}
inline unsigned __funnelshift_lc(unsigned lo, unsigned hi, unsigned shift) {
  return static_cast<unsigned>((gpucmd_funnel(lo, hi) << (shift < 32u ? shift : 32u)) >> 32);
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift) {
  return static_cast<unsigned>(gpucmd_funnel(lo, hi) >> (shift & 31u));
}
inline unsigned __funnelshift_rc(unsigned lo, unsigned hi, unsigned shift) {
  return static_cast<unsigned>(gpucmd_funnel(lo, hi) >> (shift < 32u ? shift : 32u));
}
// |x - y| + z.
inline unsigned __sad(int x, int y, unsigned z) {
  return (x > y ? static_cast<unsigned>(x) - static_cast<unsigned>(y)
                : static_cast<unsigned>(y) - static_cast<unsigned>(x)) + z;
}
inline unsigned __usad(unsigned x, unsigned y, unsigned z) { return (x > y ? x - y : y - x) + z; }
// Averages without overflow: (x + y) >> 1, and rounded up, (x + y + 1) >> 1.
inline int __hadd(int x, int y) { return static_cast<int>((static_cast<long long>(x) + y) >> 1); }
inline int __rhadd(int x, int y) {
  return static_cast<int>((static_cast<long long>(x) + y + 1) >> 1);
}
inline unsigned __uhadd(unsigned x, unsigned y) {
  return static_cast<unsigned>((static_cast<unsigned long long>(x) + y) >> 1);
}
inline unsigned __urhadd(unsigned x, unsigned y) {
  return static_cast<unsigned>((static_cast<unsigned long long>(x) + y + 1) >> 1);
}
// Loads through the read-only cache on a GPU; a plain load here.
template <typename T>
inline T __ldg(const T* address) { return *address; }
// Ends the launch with an error saying `why`.
[[noreturn]] inline void gpucmd_fail_launch(const char* why) {
  gpucmd_ctx->fail(gpucmd_ctx, why);
  __builtin_unreachable();
}
// Ends the launch with an error, as a GPU's trap does.
[[noreturn]] inline void __trap() { gpucmd_fail_launch("the kernel called __trap()"); }
[[noreturn]] inline void __brkpt() {
  gpucmd_ctx->fail(gpucmd_ctx, "the kernel called __brkpt()");
  __builtin_unreachable();
}
#define __threadfence_system() __atomic_thread_fence(__ATOMIC_SEQ_CST)

// Warp-level primitives, 32 lanes a warp: the lanes meet in the executor (driver/cpu/
// kernel_abi.h), so values cross between them as on a GPU.
template <typename T>
inline unsigned long long gpucmd_bits(T value) {
  static_assert(sizeof(T) <= 8, "a warp exchanges values of up to 8 bytes");
  unsigned long long bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}
template <typename T>
inline T gpucmd_from_bits(unsigned long long bits) {
  T value;
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}
inline unsigned long long gpucmd_warp(int op, unsigned mask, unsigned long long value,
                                      int arg = 0, int width = 32) {
  return gpucmd_ctx->warp(gpucmd_ctx, op, mask, value, arg, width);
}
template <typename T>
inline T __shfl_sync(unsigned mask, T var, int source_lane, int width = 32) {
  return gpucmd_from_bits<T>(
      gpucmd_warp(gpucmd_rt::kShuffle, mask, gpucmd_bits(var), source_lane, width));
}
template <typename T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  return gpucmd_from_bits<T>(gpucmd_warp(gpucmd_rt::kShuffleUp, mask, gpucmd_bits(var),
                                         static_cast<int>(delta), width));
}
template <typename T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  return gpucmd_from_bits<T>(gpucmd_warp(gpucmd_rt::kShuffleDown, mask, gpucmd_bits(var),
                                         static_cast<int>(delta), width));
}
template <typename T>
inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32) {
  return gpucmd_from_bits<T>(
      gpucmd_warp(gpucmd_rt::kShuffleXor, mask, gpucmd_bits(var), lane_mask, width));
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  return static_cast<unsigned>(gpucmd_warp(gpucmd_rt::kBallot, mask, predicate != 0));
}
inline int __any_sync(unsigned mask, int predicate) {
  return static_cast<int>(gpucmd_warp(gpucmd_rt::kAny, mask, predicate != 0));
}
inline int __all_sync(unsigned mask, int predicate) {
  return static_cast<int>(gpucmd_warp(gpucmd_rt::kAll, mask, predicate != 0));
}
inline void __syncwarp(unsigned mask = 0xffffffffu) { gpucmd_warp(gpucmd_rt::kSync, mask, 0); }
// The lanes of the warp that reached the call at `site` together
// (cooperative_groups::coalesced_threads).
inline unsigned gpucmd_coalesced_lanes(unsigned long long site) {
  return static_cast<unsigned>(gpucmd_warp(gpucmd_rt::kCoalesce, 0, site));
}
// A call site: its file, and its line in the high bits (driver/cpu/kernel_abi.h's
// kWarpCoalesce orders sites by it).
#define GPUCMD_CALL_SITE                                      \
  (reinterpret_cast<unsigned long long>(__builtin_FILE()) ^ \
   (static_cast<unsigned long long>(__builtin_LINE()) << 48))
// The lanes running this call together: in a branch, the lanes that took it. (`site`
// names the call; leave it out.)
inline unsigned __activemask(unsigned long long site = GPUCMD_CALL_SITE) {
  return gpucmd_coalesced_lanes(site);
}
template <typename T>
inline unsigned __match_any_sync(unsigned mask, T value) {
  return static_cast<unsigned>(gpucmd_warp(gpucmd_rt::kMatchAny, mask, gpucmd_bits(value)));
}
template <typename T>
inline unsigned __match_all_sync(unsigned mask, T value, int* predicate) {
  const unsigned same = __match_any_sync(mask, value);
  const unsigned arrived = __ballot_sync(mask, 1);
  *predicate = same == arrived;
  return same == arrived ? same : 0u;
}

// Atomics, with CUDA's overload set (not templates, so that arguments convert as they do
// under nvcc): device memory is shared by the blocks running on every worker thread.
template <typename T, typename Op>
inline T gpucmd_atomic_update(T* address, Op op) {
  T old;
  __atomic_load(address, &old, __ATOMIC_SEQ_CST);
  T desired;
  do {
    desired = op(old);
  } while (!__atomic_compare_exchange(address, &old, &desired, false, __ATOMIC_SEQ_CST,
                                      __ATOMIC_SEQ_CST));
  return old;
}
#define GPUCMD_ATOMIC_FETCH(name, builtin, T) \
  inline T name(T* address, T value) { return builtin(address, value, __ATOMIC_SEQ_CST); }
#define GPUCMD_ATOMIC_UPDATE(name, T, expression)                                    \
  inline T name(T* address, T value) {                                               \
    return gpucmd_atomic_update(address, [value](T old) -> T { return expression; }); \
  }
GPUCMD_ATOMIC_FETCH(atomicAdd, __atomic_fetch_add, int)
GPUCMD_ATOMIC_FETCH(atomicAdd, __atomic_fetch_add, unsigned)
GPUCMD_ATOMIC_FETCH(atomicAdd, __atomic_fetch_add, unsigned long long)
GPUCMD_ATOMIC_UPDATE(atomicAdd, float, old + value)
GPUCMD_ATOMIC_UPDATE(atomicAdd, double, old + value)
GPUCMD_ATOMIC_FETCH(atomicSub, __atomic_fetch_sub, int)
GPUCMD_ATOMIC_FETCH(atomicSub, __atomic_fetch_sub, unsigned)
GPUCMD_ATOMIC_UPDATE(atomicExch, int, value)
GPUCMD_ATOMIC_UPDATE(atomicExch, unsigned, value)
GPUCMD_ATOMIC_UPDATE(atomicExch, unsigned long long, value)
GPUCMD_ATOMIC_UPDATE(atomicExch, float, value)
GPUCMD_ATOMIC_UPDATE(atomicMin, int, value < old ? value : old)
GPUCMD_ATOMIC_UPDATE(atomicMin, unsigned, value < old ? value : old)
GPUCMD_ATOMIC_UPDATE(atomicMin, long long, value < old ? value : old)
GPUCMD_ATOMIC_UPDATE(atomicMin, unsigned long long, value < old ? value : old)
GPUCMD_ATOMIC_UPDATE(atomicMax, int, old < value ? value : old)
GPUCMD_ATOMIC_UPDATE(atomicMax, unsigned, old < value ? value : old)
GPUCMD_ATOMIC_UPDATE(atomicMax, long long, old < value ? value : old)
GPUCMD_ATOMIC_UPDATE(atomicMax, unsigned long long, old < value ? value : old)
// Wraps to 0 past `value`; counts down from `value` at 0 or past it.
GPUCMD_ATOMIC_UPDATE(atomicInc, unsigned, old >= value ? 0u : old + 1u)
GPUCMD_ATOMIC_UPDATE(atomicDec, unsigned, (old == 0u || old > value) ? value : old - 1u)
GPUCMD_ATOMIC_FETCH(atomicAnd, __atomic_fetch_and, int)
GPUCMD_ATOMIC_FETCH(atomicAnd, __atomic_fetch_and, unsigned)
GPUCMD_ATOMIC_FETCH(atomicAnd, __atomic_fetch_and, unsigned long long)
GPUCMD_ATOMIC_FETCH(atomicOr, __atomic_fetch_or, int)
GPUCMD_ATOMIC_FETCH(atomicOr, __atomic_fetch_or, unsigned)
GPUCMD_ATOMIC_FETCH(atomicOr, __atomic_fetch_or, unsigned long long)
GPUCMD_ATOMIC_FETCH(atomicXor, __atomic_fetch_xor, int)
GPUCMD_ATOMIC_FETCH(atomicXor, __atomic_fetch_xor, unsigned)
GPUCMD_ATOMIC_FETCH(atomicXor, __atomic_fetch_xor, unsigned long long)
#undef GPUCMD_ATOMIC_FETCH
#undef GPUCMD_ATOMIC_UPDATE
#define GPUCMD_ATOMIC_CAS(T)                                                   \
  inline T atomicCAS(T* address, T compare, T value) {                         \
    __atomic_compare_exchange(address, &compare, &value, false, __ATOMIC_SEQ_CST, \
                              __ATOMIC_SEQ_CST);                               \
    return compare;                                                            \
  }
GPUCMD_ATOMIC_CAS(int)
GPUCMD_ATOMIC_CAS(unsigned)
GPUCMD_ATOMIC_CAS(unsigned long long)
GPUCMD_ATOMIC_CAS(unsigned short)
#undef GPUCMD_ATOMIC_CAS
// The scoped variants: every scope is the whole device here.
#define GPUCMD_ATOMIC_SCOPES(name)                                                 \
  template <typename... A> inline auto name##_block(A... a) { return name(a...); } \
  template <typename... A> inline auto name##_system(A... a) { return name(a...); }
GPUCMD_ATOMIC_SCOPES(atomicAdd) GPUCMD_ATOMIC_SCOPES(atomicSub)
GPUCMD_ATOMIC_SCOPES(atomicExch) GPUCMD_ATOMIC_SCOPES(atomicMin)
GPUCMD_ATOMIC_SCOPES(atomicMax) GPUCMD_ATOMIC_SCOPES(atomicInc)
GPUCMD_ATOMIC_SCOPES(atomicDec) GPUCMD_ATOMIC_SCOPES(atomicCAS)
GPUCMD_ATOMIC_SCOPES(atomicAnd) GPUCMD_ATOMIC_SCOPES(atomicOr)
GPUCMD_ATOMIC_SCOPES(atomicXor)
#undef GPUCMD_ATOMIC_SCOPES

// CUDA's vector types, aligned as CUDA aligns them, and their make_ functions.
#define GPUCMD_VECTOR1(T, name) \
  struct name { T x; };          \
  inline name make_##name(T x) { return name{x}; }
#define GPUCMD_VECTOR2(T, name, align) \
  struct alignas(align) name { T x, y; }; \
  inline name make_##name(T x, T y) { return name{x, y}; }
#define GPUCMD_VECTOR3(T, name) \
  struct name { T x, y, z; };    \
  inline name make_##name(T x, T y, T z) { return name{x, y, z}; }
#define GPUCMD_VECTOR4(T, name, align)       \
  struct alignas(align) name { T x, y, z, w; }; \
  inline name make_##name(T x, T y, T z, T w) { return name{x, y, z, w}; }
#define GPUCMD_VECTORS(T, name, align2, align4) \
  GPUCMD_VECTOR1(T, name##1) GPUCMD_VECTOR2(T, name##2, align2) \
  GPUCMD_VECTOR3(T, name##3) GPUCMD_VECTOR4(T, name##4, align4)
GPUCMD_VECTORS(signed char, char, 2, 4)
GPUCMD_VECTORS(unsigned char, uchar, 2, 4)
GPUCMD_VECTORS(short, short, 4, 8)
GPUCMD_VECTORS(unsigned short, ushort, 4, 8)
GPUCMD_VECTORS(int, int, 8, 16)
GPUCMD_VECTORS(unsigned, uint, 8, 16)
GPUCMD_VECTORS(long, long, 16, 16)
GPUCMD_VECTORS(unsigned long, ulong, 16, 16)
GPUCMD_VECTORS(long long, longlong, 16, 16)
GPUCMD_VECTORS(unsigned long long, ulonglong, 16, 16)
GPUCMD_VECTORS(float, float, 8, 16)
GPUCMD_VECTORS(double, double, 16, 16)
#undef GPUCMD_VECTORS
inline gpucmd_rt::Dim3::operator uint3() const { return uint3{x, y, z}; }
#undef GPUCMD_VECTOR1
#undef GPUCMD_VECTOR2
#undef GPUCMD_VECTOR3
#undef GPUCMD_VECTOR4
// ---- (driver/portable_intrinsics.h, then driver/simd_intrinsics.h) ----
)PRELUDE";

constexpr absl::string_view kPreludeEnd = R"PRELUDE(
template <typename... P>
constexpr size_t gpucmd_arity(void (*)(P...)) { return sizeof...(P); }
template <typename... P, size_t... I>
inline void gpucmd_call(void (*kernel)(P...), void** args, std::index_sequence<I...>) {
  kernel(*static_cast<std::remove_cv_t<std::remove_reference_t<P>>*>(args[I])...);
}
// Every thread of the bound block, one after another: the arguments are unpacked once and
// `call` (the kernel, inlined here) runs per thread.
template <typename... P, size_t... I, typename Call>
inline void gpucmd_run_threads(void (*)(P...), void** args, std::index_sequence<I...>,
                               Call call) {
  std::tuple<std::remove_cv_t<std::remove_reference_t<P>>...> values(
      *static_cast<std::remove_cv_t<std::remove_reference_t<P>>*>(args[I])...);
  gpucmd_rt::ThreadContext* const context = gpucmd_ctx;
  const gpucmd_rt::Dim3 block = context->block_dim;
  // Each index is stored where it changes: the innermost loop stores one word a thread.
  for (unsigned z = 0; z < block.z; ++z) {
    context->thread_idx.z = z;
    for (unsigned y = 0; y < block.y; ++y) {
      context->thread_idx.y = y;
      for (unsigned x = 0; x < block.x; ++x) {
        context->thread_idx.x = x;
        call(std::get<I>(values)...);
      }
    }
  }
}
// ---- end of prelude ----
#line 1 "kernel.cu"
)PRELUDE";

}  // namespace

absl::string_view CpuKernelPrelude() {
  static const std::string* const prelude = new std::string(absl::StrCat(
      kPreludeBegin, PortableIntrinsicDefinitions(), SimdIntrinsicDefinitions(), kPreludeEnd));
  return *prelude;
}

std::string CpuKernelTranslationUnit(absl::string_view source, absl::string_view entry,
                                     const ParsedKernel& parsed) {
  // Each `extern __shared__ T name[]` becomes a name for the launch's per-block dynamic
  // shared memory, on the lines it was written on: in a function, a pointer to it; at
  // namespace scope, an object that converts to one wherever it is used.
  std::string code(source);
  for (auto array = parsed.dynamic_shared.rbegin(); array != parsed.dynamic_shared.rend();
       ++array) {
    const absl::string_view declaration =
        source.substr(array->begin, array->end - array->begin);
    std::string replacement =
        array->in_function
            ? absl::StrCat("std::add_pointer_t<", array->element_type, "> const ", array->name,
                           " = static_cast<std::add_pointer_t<", array->element_type,
                           ">>(gpucmd_ctx->dynamic_shared)")
            : absl::StrCat("constexpr gpucmd_rt::DynamicShared<", array->element_type, "> ",
                           array->name, "{}");
    replacement.append(std::count(declaration.begin(), declaration.end(), '\n'), '\n');
    code.replace(array->begin, array->end - array->begin, replacement);
  }
  return absl::StrCat(CpuKernelPrelude(), code, "\n#line 1 \"gpucmd-exports\"\n",
                      "extern \"C\" const int gpucmd_abi_version = ", kKernelAbiVersion, ";\n",
                      "extern \"C\" const int gpucmd_uses_barrier = ", parsed.threads_meet ? 1 : 0,
                      ";\n", "extern \"C\" void gpucmd_entry(void** args) {\n", "  gpucmd_call(&",
                      entry, ", args, std::make_index_sequence<", "gpucmd_arity(&", entry,
                      ")>());\n}\n", "extern \"C\" void gpucmd_run_block(void** args) {\n",
                      "  gpucmd_run_threads(&", entry, ", args, std::make_index_sequence<",
                      "gpucmd_arity(&", entry, ")>(), [](auto&... a) { ", entry,
                      "(a...); });\n}\n");
}

}  // namespace gpucmd
