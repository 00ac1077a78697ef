#include "driver/cpu/cpu_headers.h"

namespace gpucmd {
namespace {

// Everything a device-side caller of the runtime headers needs is in the prelude.
constexpr char kRuntimeHeader[] = R"HEADER(#pragma once
// Device-side declarations come with the CPU driver's prelude.
)HEADER";

constexpr char kCooperativeGroups[] = R"HEADER(#pragma once
// cooperative_groups on the CPU driver: the block, and tiles of up to a warp over the
// warp primitives (a tile is `Size` consecutive threads of the block, by linear index).
namespace cooperative_groups {
namespace details {
inline unsigned linear_thread() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
inline unsigned block_threads() { return blockDim.x * blockDim.y * blockDim.z; }
// The lanes of the calling thread's tile of `size` threads in its warp.
inline unsigned tile_mask(unsigned size) {
  if (size >= 32) return 0xffffffffu;
  return ((1u << size) - 1u) << (linear_thread() % 32 / size * size);
}
}  // namespace details

class thread_block {
 public:
  void sync() const { __syncthreads(); }
  unsigned thread_rank() const { return details::linear_thread(); }
  unsigned size() const { return details::block_threads(); }
  unsigned num_threads() const { return details::block_threads(); }
  dim3 group_index() const { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
  dim3 thread_index() const { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
  dim3 group_dim() const { return dim3(blockDim.x, blockDim.y, blockDim.z); }
  dim3 dim_threads() const { return group_dim(); }
};

inline thread_block this_thread_block() { return thread_block(); }

// A tile whose size is known only when the kernel runs (tiled_partition(g, n)).
class thread_group {
 public:
  explicit thread_group(unsigned size) : size_(size) {}
  void sync() const {
    if (size_ <= 32) {
      __syncwarp(details::tile_mask(size_));
    } else {
      __syncthreads();
    }
  }
  unsigned thread_rank() const { return details::linear_thread() % size_; }
  unsigned size() const { return size_; }
  unsigned num_threads() const { return size_; }
  unsigned meta_group_rank() const { return details::linear_thread() / size_; }
  unsigned meta_group_size() const { return (details::block_threads() + size_ - 1) / size_; }

 private:
  unsigned size_;
};

template <unsigned Size>
class thread_block_tile {
  static_assert(Size > 0 && Size <= 32 && (Size & (Size - 1)) == 0,
                "a tile holds a power of two of threads, at most a warp");

 public:
  void sync() const { __syncwarp(mask()); }
  unsigned thread_rank() const { return details::linear_thread() % Size; }
  static constexpr unsigned size() { return Size; }
  static constexpr unsigned num_threads() { return Size; }
  unsigned meta_group_rank() const { return details::linear_thread() / Size; }
  unsigned meta_group_size() const { return (details::block_threads() + Size - 1) / Size; }
  template <typename T>
  T shfl(T var, int source_rank) const { return __shfl_sync(mask(), var, source_rank, Size); }
  template <typename T>
  T shfl_down(T var, unsigned delta) const { return __shfl_down_sync(mask(), var, delta, Size); }
  template <typename T>
  T shfl_up(T var, unsigned delta) const { return __shfl_up_sync(mask(), var, delta, Size); }
  template <typename T>
  T shfl_xor(T var, unsigned lane_mask) const {
    return __shfl_xor_sync(mask(), var, static_cast<int>(lane_mask), Size);
  }
  int any(int predicate) const { return __any_sync(mask(), predicate); }
  int all(int predicate) const { return __all_sync(mask(), predicate); }
  // Bit i for the thread of rank i.
  unsigned ballot(int predicate) const { return __ballot_sync(mask(), predicate) >> shift(); }
  template <typename T>
  unsigned match_any(T value) const { return __match_any_sync(mask(), value) >> shift(); }

 private:
  static unsigned mask() { return details::tile_mask(Size); }
  static unsigned shift() { return Size >= 32 ? 0 : details::linear_thread() % 32 / Size * Size; }
};

template <unsigned Size, typename Parent>
thread_block_tile<Size> tiled_partition(const Parent&) {
  return thread_block_tile<Size>();
}

template <typename Parent>
thread_group tiled_partition(const Parent&, unsigned size) {
  return thread_group(size);
}

template <typename Group>
void sync(const Group& group) {
  group.sync();
}

}  // namespace cooperative_groups
)HEADER";

constexpr char kCooperativeGroupsReduce[] = R"HEADER(#pragma once
#include <cooperative_groups.h>
namespace cooperative_groups {
template <typename T>
struct plus {
  T operator()(T a, T b) const { return a + b; }
};
template <typename T>
struct less {
  T operator()(T a, T b) const { return b < a ? b : a; }
};
template <typename T>
struct greater {
  T operator()(T a, T b) const { return a < b ? b : a; }
};
// The tile's values combined by `op` (a butterfly over shfl_xor); every thread gets it.
template <unsigned Size, typename T, typename Op>
T reduce(const thread_block_tile<Size>& tile, T value, Op op) {
  for (unsigned offset = Size / 2; offset > 0; offset /= 2) {
    value = op(value, tile.shfl_xor(value, offset));
  }
  return value;
}
}  // namespace cooperative_groups
)HEADER";

}  // namespace

const std::vector<std::pair<std::string, std::string>>& CpuKernelHeaders() {
  static const auto* const kHeaders = new std::vector<std::pair<std::string, std::string>>{
      {"cuda_runtime.h", kRuntimeHeader},
      {"cuda_runtime_api.h", kRuntimeHeader},
      {"device_launch_parameters.h", kRuntimeHeader},
      {"cooperative_groups.h", kCooperativeGroups},
      {"cooperative_groups/reduce.h", kCooperativeGroupsReduce},
  };
  return *kHeaders;
}

}  // namespace gpucmd
