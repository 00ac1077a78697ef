#include "driver/cpu/cuda_std_headers.h"

#include "absl/strings/str_cat.h"

namespace gpucmd {
namespace {

// Included by every <cuda/std/...> header: `cuda::std` names the host's library, and
// what a header below declares in it comes first.
constexpr char kNamespace[] = R"HEADER(#pragma once
namespace cuda {
namespace std {
using namespace ::std;
}  // namespace std
}  // namespace cuda
)HEADER";

// The <cuda/std/...> headers whose names the host's C++17 library has as they are.
constexpr const char* kHostHeaders[] = {
    "array",       "cassert", "cfloat",  "climits",  "cmath",      "complex",
    "cstddef",     "cstdint", "cstdlib", "cstring",  "functional", "initializer_list",
    "iterator",    "limits",  "numeric", "optional", "ratio",      "tuple",
    "type_traits", "utility", "variant",
};

constexpr char kAtomic[] = R"HEADER(#pragma once
#include <atomic>
#include <cuda/std/__gpucmd_namespace>
namespace cuda {
namespace std {
namespace gpucmd_detail {
// A compare-exchange's order when it fails, from the order it was given.
__device__ constexpr int failure_order(::std::memory_order order) {
  return order == ::std::memory_order_acq_rel   ? __ATOMIC_ACQUIRE
         : order == ::std::memory_order_release ? __ATOMIC_RELAXED
                                                : static_cast<int>(order);
}
}  // namespace gpucmd_detail

// An atomic view of an object that is not a std::atomic (C++20's std::atomic_ref, which
// libcu++ offers in C++17): integers add and subtract in one instruction, floating-point
// values in a compare-exchange loop.
template <typename T>
class atomic_ref {
  static_assert(::std::is_trivially_copyable<T>::value,
                "atomic_ref holds a trivially copyable type");

 public:
  using value_type = T;
  static constexpr bool is_always_lock_free = sizeof(T) <= 8;
  static constexpr ::std::size_t required_alignment = alignof(T);

  __device__ explicit atomic_ref(T& object) : object_(&object) {}
  __device__ atomic_ref(const atomic_ref&) = default;
  atomic_ref& operator=(const atomic_ref&) = delete;

  __device__ bool is_lock_free() const { return is_always_lock_free; }
  __device__ T load(::std::memory_order order = ::std::memory_order_seq_cst) const {
    T value;
    __atomic_load(object_, &value, static_cast<int>(order));
    return value;
  }
  __device__ operator T() const { return load(); }
  __device__ void store(T value, ::std::memory_order order = ::std::memory_order_seq_cst) const {
    __atomic_store(object_, &value, static_cast<int>(order));
  }
  __device__ T operator=(T value) const {
    store(value);
    return value;
  }
  __device__ T exchange(T value, ::std::memory_order order = ::std::memory_order_seq_cst) const {
    T old;
    __atomic_exchange(object_, &value, &old, static_cast<int>(order));
    return old;
  }
  __device__ bool compare_exchange_weak(T& expected, T desired, ::std::memory_order success,
                                        ::std::memory_order failure) const {
    return exchange_if(expected, desired, true, static_cast<int>(success),
                       static_cast<int>(failure));
  }
  __device__ bool compare_exchange_weak(
      T& expected, T desired, ::std::memory_order order = ::std::memory_order_seq_cst) const {
    return exchange_if(expected, desired, true, static_cast<int>(order),
                       gpucmd_detail::failure_order(order));
  }
  __device__ bool compare_exchange_strong(T& expected, T desired, ::std::memory_order success,
                                          ::std::memory_order failure) const {
    return exchange_if(expected, desired, false, static_cast<int>(success),
                       static_cast<int>(failure));
  }
  __device__ bool compare_exchange_strong(
      T& expected, T desired, ::std::memory_order order = ::std::memory_order_seq_cst) const {
    return exchange_if(expected, desired, false, static_cast<int>(order),
                       gpucmd_detail::failure_order(order));
  }
  __device__ T fetch_add(T value, ::std::memory_order order = ::std::memory_order_seq_cst) const {
    if constexpr (::std::is_integral<T>::value) {
      return __atomic_fetch_add(object_, value, static_cast<int>(order));
    } else {
      return update([value](T old) { return old + value; }, order);
    }
  }
  __device__ T fetch_sub(T value, ::std::memory_order order = ::std::memory_order_seq_cst) const {
    if constexpr (::std::is_integral<T>::value) {
      return __atomic_fetch_sub(object_, value, static_cast<int>(order));
    } else {
      return update([value](T old) { return old - value; }, order);
    }
  }
  __device__ T fetch_and(T value, ::std::memory_order order = ::std::memory_order_seq_cst) const {
    return __atomic_fetch_and(object_, value, static_cast<int>(order));
  }
  __device__ T fetch_or(T value, ::std::memory_order order = ::std::memory_order_seq_cst) const {
    return __atomic_fetch_or(object_, value, static_cast<int>(order));
  }
  __device__ T fetch_xor(T value, ::std::memory_order order = ::std::memory_order_seq_cst) const {
    return __atomic_fetch_xor(object_, value, static_cast<int>(order));
  }
  __device__ T operator++() const { return fetch_add(T(1)) + T(1); }
  __device__ T operator++(int) const { return fetch_add(T(1)); }
  __device__ T operator--() const { return fetch_sub(T(1)) - T(1); }
  __device__ T operator--(int) const { return fetch_sub(T(1)); }
  __device__ T operator+=(T value) const { return fetch_add(value) + value; }
  __device__ T operator-=(T value) const { return fetch_sub(value) - value; }
  __device__ T operator&=(T value) const { return fetch_and(value) & value; }
  __device__ T operator|=(T value) const { return fetch_or(value) | value; }
  __device__ T operator^=(T value) const { return fetch_xor(value) ^ value; }

 protected:
  // Replaces the value `old` with next(old), atomically; returns `old`.
  template <typename Next>
  __device__ T update(Next next, ::std::memory_order order) const {
    T old = load(::std::memory_order_relaxed);
    while (!compare_exchange_weak(old, next(old), order, ::std::memory_order_relaxed)) {
    }
    return old;
  }

 private:
  // A compare-exchange (`weak`: it may fail spuriously) in the builtins' orders.
  __device__ bool exchange_if(T& expected, T desired, bool weak, int success,
                              int failure) const {
    return __atomic_compare_exchange(object_, &expected, &desired, weak, success, failure);
  }

  T* object_;
};
}  // namespace std
}  // namespace cuda
)HEADER";

constexpr char kScopedAtomic[] = R"HEADER(#pragma once
#include <cuda/std/atomic>
namespace cuda {
enum thread_scope {
  thread_scope_system = 0,
  thread_scope_device = 1,
  thread_scope_block = 2,
  thread_scope_thread = 3,
};
namespace gpucmd_detail {
// fetch_min and fetch_max, libcu++'s additions to its scoped atomics, over a
// compare-exchange: `keep(value, old)` says whether `value` replaces `old`.
template <typename Atomic, typename T, typename Keep>
__device__ T fetch_if(Atomic& atomic, T value, ::std::memory_order order, Keep keep) {
  T old = atomic.load(::std::memory_order_relaxed);
  while (keep(value, old) &&
         !atomic.compare_exchange_weak(old, value, order, ::std::memory_order_relaxed)) {
  }
  return old;
}
template <typename T>
struct less_than_old {
  __device__ bool operator()(T value, T old) const { return value < old; }
};
template <typename T>
struct greater_than_old {
  __device__ bool operator()(T value, T old) const { return old < value; }
};
}  // namespace gpucmd_detail

// Every scope is the device's on the CPU driver: its blocks share memory.
template <typename T, thread_scope Scope = thread_scope_system>
class atomic_ref : public ::cuda::std::atomic_ref<T> {
 public:
  using ::cuda::std::atomic_ref<T>::atomic_ref;
  using ::cuda::std::atomic_ref<T>::operator=;
  __device__ T fetch_min(T value, ::std::memory_order order = ::std::memory_order_seq_cst) const {
    return gpucmd_detail::fetch_if(*this, value, order, gpucmd_detail::less_than_old<T>());
  }
  __device__ T fetch_max(T value, ::std::memory_order order = ::std::memory_order_seq_cst) const {
    return gpucmd_detail::fetch_if(*this, value, order, gpucmd_detail::greater_than_old<T>());
  }
};
template <typename T, thread_scope Scope = thread_scope_system>
class atomic : public ::std::atomic<T> {
 public:
  using ::std::atomic<T>::atomic;
  using ::std::atomic<T>::operator=;
  __device__ T fetch_min(T value, ::std::memory_order order = ::std::memory_order_seq_cst) {
    return gpucmd_detail::fetch_if(*this, value, order, gpucmd_detail::less_than_old<T>());
  }
  __device__ T fetch_max(T value, ::std::memory_order order = ::std::memory_order_seq_cst) {
    return gpucmd_detail::fetch_if(*this, value, order, gpucmd_detail::greater_than_old<T>());
  }
};
__device__ inline void atomic_thread_fence(::std::memory_order order,
                                           thread_scope = thread_scope_system) {
  ::std::atomic_thread_fence(order);
}
}  // namespace cuda
)HEADER";

constexpr char kBit[] = R"HEADER(#pragma once
#include <cuda/std/limits>
#include <cuda/std/type_traits>
namespace cuda {
namespace std {
// C++20's <bit>, which libcu++ offers in C++17, for unsigned integers.
template <typename T>
__device__ constexpr int countl_zero(T x) noexcept {
  static_assert(::std::is_unsigned<T>::value, "the <bit> functions take unsigned integers");
  return x == 0 ? ::std::numeric_limits<T>::digits
                : __builtin_clzll(x) - (64 - ::std::numeric_limits<T>::digits);
}
template <typename T>
__device__ constexpr int countr_zero(T x) noexcept {
  static_assert(::std::is_unsigned<T>::value, "the <bit> functions take unsigned integers");
  return x == 0 ? ::std::numeric_limits<T>::digits : __builtin_ctzll(x);
}
template <typename T>
__device__ constexpr int countl_one(T x) noexcept {
  return countl_zero(static_cast<T>(~x));
}
template <typename T>
__device__ constexpr int countr_one(T x) noexcept {
  return countr_zero(static_cast<T>(~x));
}
template <typename T>
__device__ constexpr int popcount(T x) noexcept {
  static_assert(::std::is_unsigned<T>::value, "the <bit> functions take unsigned integers");
  return __builtin_popcountll(x);
}
template <typename T>
__device__ constexpr bool has_single_bit(T x) noexcept {
  return popcount(x) == 1;
}
template <typename T>
__device__ constexpr int bit_width(T x) noexcept {
  return ::std::numeric_limits<T>::digits - countl_zero(x);
}
template <typename T>
__device__ constexpr T bit_floor(T x) noexcept {
  return x == 0 ? T(0) : static_cast<T>(T(1) << (bit_width(x) - 1));
}
template <typename T>
__device__ constexpr T bit_ceil(T x) noexcept {
  return x <= 1 ? T(1) : static_cast<T>(T(1) << bit_width(static_cast<T>(x - 1)));
}
template <typename T>
__device__ constexpr T rotl(T x, int shift) noexcept {
  constexpr int kDigits = ::std::numeric_limits<T>::digits;
  const int r = (shift % kDigits + kDigits) % kDigits;
  return r == 0 ? x : static_cast<T>((x << r) | (x >> (kDigits - r)));
}
template <typename T>
__device__ constexpr T rotr(T x, int shift) noexcept {
  return rotl(x, -(shift % ::std::numeric_limits<T>::digits));
}
template <typename To, typename From>
__device__ constexpr To bit_cast(const From& from) noexcept {
  static_assert(sizeof(To) == sizeof(From), "bit_cast keeps the size");
  return __builtin_bit_cast(To, from);
}
}  // namespace std
}  // namespace cuda
)HEADER";

constexpr char kSpan[] = R"HEADER(#pragma once
#include <cuda/std/array>
#include <cuda/std/cstddef>
#include <cuda/std/type_traits>
namespace cuda {
namespace std {
inline constexpr ::std::size_t dynamic_extent = static_cast<::std::size_t>(-1);
// C++20's std::span, which libcu++ offers in C++17: a view of size() consecutive objects
// (Extent of them, when it is not dynamic_extent); its iterators are pointers.
template <typename T, ::std::size_t Extent = dynamic_extent>
class span {
  // Whether a span of U may view as one of T, and `count` of them fit Extent.
  template <typename U, ::std::size_t Count>
  static constexpr bool kViews =
      ::std::is_convertible<U (*)[], T (*)[]>::value &&
      (Extent == dynamic_extent || Count == dynamic_extent || Count == Extent);

 public:
  using element_type = T;
  using value_type = ::std::remove_cv_t<T>;
  using size_type = ::std::size_t;
  using difference_type = ::std::ptrdiff_t;
  using pointer = T*;
  using const_pointer = const T*;
  using reference = T&;
  using const_reference = const T&;
  using iterator = T*;
  static constexpr ::std::size_t extent = Extent;

  template <::std::size_t E = Extent, typename = ::std::enable_if_t<E == 0 || E == dynamic_extent>>
  __device__ constexpr span() noexcept : data_(nullptr), size_(0) {}
  __device__ constexpr span(T* first, size_type count) : data_(first), size_(count) {}
  template <typename End,
            typename = ::std::enable_if_t<!::std::is_convertible<End, size_type>::value>>
  __device__ constexpr span(T* first, End last)
      : data_(first), size_(static_cast<size_type>(last - first)) {}
  template <::std::size_t N, typename = ::std::enable_if_t<kViews<T, N>>>
  __device__ constexpr span(T (&array)[N]) noexcept : data_(array), size_(N) {}
  template <typename U, ::std::size_t N, typename = ::std::enable_if_t<kViews<U, N>>>
  __device__ constexpr span(::std::array<U, N>& array) noexcept
      : data_(array.data()), size_(N) {}
  template <typename U, ::std::size_t N, typename = ::std::enable_if_t<kViews<const U, N>>>
  __device__ constexpr span(const ::std::array<U, N>& array) noexcept
      : data_(array.data()), size_(N) {}
  template <typename U, ::std::size_t N, typename = ::std::enable_if_t<kViews<U, N>>>
  __device__ constexpr span(const span<U, N>& other) noexcept
      : data_(other.data()), size_(other.size()) {}
  __device__ constexpr span(const span&) noexcept = default;
  __device__ constexpr span& operator=(const span&) noexcept = default;

  __device__ constexpr iterator begin() const noexcept { return data_; }
  __device__ constexpr iterator end() const noexcept { return data_ + size_; }
  __device__ constexpr reference front() const { return data_[0]; }
  __device__ constexpr reference back() const { return data_[size_ - 1]; }
  __device__ constexpr reference operator[](size_type index) const { return data_[index]; }
  __device__ constexpr pointer data() const noexcept { return data_; }
  __device__ constexpr size_type size() const noexcept { return size_; }
  __device__ constexpr size_type size_bytes() const noexcept { return size_ * sizeof(T); }
  __device__ constexpr bool empty() const noexcept { return size_ == 0; }

  template <::std::size_t Count>
  __device__ constexpr span<T, Count> first() const {
    return span<T, Count>(data_, Count);
  }
  __device__ constexpr span<T> first(size_type count) const { return span<T>(data_, count); }
  template <::std::size_t Count>
  __device__ constexpr span<T, Count> last() const {
    return span<T, Count>(data_ + size_ - Count, Count);
  }
  __device__ constexpr span<T> last(size_type count) const {
    return span<T>(data_ + size_ - count, count);
  }
  template <::std::size_t Offset, ::std::size_t Count = dynamic_extent>
  __device__ constexpr auto subspan() const {
    constexpr ::std::size_t kExtent =
        Count != dynamic_extent ? Count
                                : (Extent != dynamic_extent ? Extent - Offset : dynamic_extent);
    return span<T, kExtent>(data_ + Offset, Count != dynamic_extent ? Count : size_ - Offset);
  }
  __device__ constexpr span<T> subspan(size_type offset,
                                       size_type count = dynamic_extent) const {
    return span<T>(data_ + offset, count == dynamic_extent ? size_ - offset : count);
  }

 private:
  T* data_;
  size_type size_;
};
template <typename T, ::std::size_t N>
span(T (&)[N]) -> span<T, N>;
template <typename T, ::std::size_t N>
span(::std::array<T, N>&) -> span<T, N>;
template <typename T, ::std::size_t N>
span(const ::std::array<T, N>&) -> span<const T, N>;
template <typename T>
span(T*, ::std::size_t) -> span<T>;

template <typename T, ::std::size_t N>
__device__ span<const ::std::byte, N == dynamic_extent ? dynamic_extent : N * sizeof(T)>
as_bytes(span<T, N> s) noexcept {
  return {reinterpret_cast<const ::std::byte*>(s.data()), s.size_bytes()};
}
template <typename T, ::std::size_t N, typename = ::std::enable_if_t<!::std::is_const<T>::value>>
__device__ span<::std::byte, N == dynamic_extent ? dynamic_extent : N * sizeof(T)>
as_writable_bytes(span<T, N> s) noexcept {
  return {reinterpret_cast<::std::byte*>(s.data()), s.size_bytes()};
}
}  // namespace std
}  // namespace cuda
)HEADER";

// <cuda/functional>: libcu++'s function objects beyond the standard's.
constexpr char kFunctional[] = R"HEADER(#pragma once
#include <cuda/std/functional>
namespace cuda {
// The larger and the smaller of two values, as libcu++'s maximum and minimum (which CUB's
// collectives take as operators): `name`<T> and `name`<void>, which keep a where `keep_a`.
#define GPUCMD_PICK(name, keep_a)                                              \
  template <typename T = void>                                                 \
  struct name {                                                                \
    __device__ constexpr T operator()(const T& a, const T& b) const {          \
      return (keep_a) ? a : b;                                                 \
    }                                                                          \
  };                                                                           \
  template <>                                                                  \
  struct name<void> {                                                          \
    template <typename A, typename B>                                          \
    __device__ constexpr ::std::common_type_t<A, B> operator()(const A& a,     \
                                                               const B& b) const { \
      return (keep_a) ? a : b;                                                 \
    }                                                                          \
  };
GPUCMD_PICK(maximum, !(a < b))
GPUCMD_PICK(minimum, !(b < a))
#undef GPUCMD_PICK
}  // namespace cuda
)HEADER";

// <cuda/cmath>: libcu++'s integer arithmetic for sizes and grids, on non-negative values
// and positive divisors, as libcu++ requires.
constexpr char kCmath[] = R"HEADER(#pragma once
#include <cuda/std/cmath>
#include <cuda/std/type_traits>
namespace cuda {
// a / b rounded up, without overflowing where a + b - 1 would.
template <typename T, typename U,
          typename = ::std::enable_if_t<::std::is_integral_v<T> && ::std::is_integral_v<U>>>
__device__ constexpr ::std::common_type_t<T, U> ceil_div(const T a, const U b) noexcept {
  using Unsigned = ::std::make_unsigned_t<decltype(T{} / U{})>;
  const auto dividend = static_cast<Unsigned>(a), divisor = static_cast<Unsigned>(b);
  const Unsigned quotient = dividend / divisor;
  return static_cast<::std::common_type_t<T, U>>(quotient + (quotient * divisor != dividend));
}
// a rounded up, and down, to a multiple of b.
template <typename T, typename U,
          typename = ::std::enable_if_t<::std::is_integral_v<T> && ::std::is_integral_v<U>>>
__device__ constexpr ::std::common_type_t<T, U> round_up(const T a, const U b) noexcept {
  return static_cast<::std::common_type_t<T, U>>(::cuda::ceil_div(a, b) * b);
}
template <typename T, typename U,
          typename = ::std::enable_if_t<::std::is_integral_v<T> && ::std::is_integral_v<U>>>
__device__ constexpr ::std::common_type_t<T, U> round_down(const T a, const U b) noexcept {
  return static_cast<::std::common_type_t<T, U>>(a / b * b);
}
// The integer logarithms of a positive value, rounded down.
template <typename T, typename = ::std::enable_if_t<::std::is_integral_v<T>>>
__device__ constexpr int ilog2(T t) noexcept {
  int log = -1;
  for (auto rest = static_cast<::std::make_unsigned_t<T>>(t); rest != 0; rest >>= 1) ++log;
  return log;
}
template <typename T, typename = ::std::enable_if_t<::std::is_integral_v<T>>>
__device__ constexpr int ilog10(T t) noexcept {
  int log = -1;
  for (auto rest = static_cast<::std::make_unsigned_t<T>>(t); rest != 0; rest /= 10) ++log;
  return log;
}
}  // namespace cuda
)HEADER";

}  // namespace

const std::vector<std::pair<std::string, std::string>>& CudaStdHeaders() {
  static const auto* const kHeaders = [] {
    auto* headers = new std::vector<std::pair<std::string, std::string>>{
        {"cuda/std/__gpucmd_namespace", kNamespace},
        {"cuda/std/atomic", kAtomic},
        {"cuda/std/bit", kBit},
        {"cuda/std/span", kSpan},
        {"cuda/atomic", kScopedAtomic},
        {"cuda/functional", kFunctional},
        {"cuda/cmath", kCmath},
    };
    for (const char* name : kHostHeaders) {
      headers->emplace_back(absl::StrCat("cuda/std/", name),
                            absl::StrCat("#pragma once\n#include <", name,
                                         ">\n#include <cuda/std/__gpucmd_namespace>\n"));
    }
    return headers;
  }();
  return *kHeaders;
}

}  // namespace gpucmd
