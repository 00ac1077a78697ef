#include "driver/cooperative_groups_headers.h"

namespace gpucmd {
namespace {

constexpr char kCooperativeGroups[] = R"HEADER(#pragma once
// cooperative_groups over CUDA's warp primitives, for drivers whose toolkit has none the
// kernels can use: the block, and tiles of up to a warp (a tile is `Size` consecutive
// threads of the block, by linear index).
namespace cooperative_groups {
namespace details {
__device__ inline unsigned linear_thread() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
__device__ inline unsigned block_threads() { return blockDim.x * blockDim.y * blockDim.z; }
// The lanes of the calling thread's tile of `size` threads in its warp.
__device__ inline unsigned tile_mask(unsigned size) {
  if (size >= 32) return 0xffffffffu;
  return ((1u << size) - 1u) << (linear_thread() % 32 / size * size);
}
}  // namespace details

class thread_block {
 public:
  __device__ void sync() const { __syncthreads(); }
  __device__ unsigned thread_rank() const { return details::linear_thread(); }
  __device__ unsigned size() const { return details::block_threads(); }
  __device__ unsigned num_threads() const { return details::block_threads(); }
  __device__ dim3 group_index() const { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
  __device__ dim3 thread_index() const { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
  __device__ dim3 group_dim() const { return dim3(blockDim.x, blockDim.y, blockDim.z); }
  __device__ dim3 dim_threads() const { return group_dim(); }
};

__device__ inline thread_block this_thread_block() { return thread_block(); }

// A tile whose size is known only when the kernel runs (tiled_partition(g, n)).
class thread_group {
 public:
  __device__ explicit thread_group(unsigned size) : size_(size) {}
  __device__ void sync() const {
    if (size_ <= 32) {
      __syncwarp(details::tile_mask(size_));
    } else {
      __syncthreads();
    }
  }
  __device__ unsigned thread_rank() const { return details::linear_thread() % size_; }
  __device__ unsigned size() const { return size_; }
  __device__ unsigned num_threads() const { return size_; }
  __device__ unsigned meta_group_rank() const { return details::linear_thread() / size_; }
  __device__ unsigned meta_group_size() const {
    return (details::block_threads() + size_ - 1) / size_;
  }

 private:
  unsigned size_;
};

template <unsigned Size>
class thread_block_tile {
  static_assert(Size > 0 && Size <= 32 && (Size & (Size - 1)) == 0,
                "a tile holds a power of two of threads, at most a warp");

 public:
  __device__ void sync() const { __syncwarp(mask()); }
  __device__ unsigned thread_rank() const { return details::linear_thread() % Size; }
  __device__ static constexpr unsigned size() { return Size; }
  __device__ static constexpr unsigned num_threads() { return Size; }
  __device__ unsigned meta_group_rank() const { return details::linear_thread() / Size; }
  __device__ unsigned meta_group_size() const {
    return (details::block_threads() + Size - 1) / Size;
  }
  template <typename T>
  __device__ T shfl(T var, int source_rank) const {
    return __shfl_sync(mask(), var, source_rank, Size);
  }
  template <typename T>
  __device__ T shfl_down(T var, unsigned delta) const {
    return __shfl_down_sync(mask(), var, delta, Size);
  }
  template <typename T>
  __device__ T shfl_up(T var, unsigned delta) const {
    return __shfl_up_sync(mask(), var, delta, Size);
  }
  template <typename T>
  __device__ T shfl_xor(T var, unsigned lane_mask) const {
    return __shfl_xor_sync(mask(), var, static_cast<int>(lane_mask), Size);
  }
  __device__ int any(int predicate) const { return __any_sync(mask(), predicate); }
  __device__ int all(int predicate) const { return __all_sync(mask(), predicate); }
  // Bit i for the thread of rank i.
  __device__ unsigned ballot(int predicate) const {
    return __ballot_sync(mask(), predicate) >> shift();
  }
  template <typename T>
  __device__ unsigned match_any(T value) const {
    return __match_any_sync(mask(), value) >> shift();
  }

 private:
  __device__ static unsigned mask() { return details::tile_mask(Size); }
  __device__ static unsigned shift() {
    return Size >= 32 ? 0 : details::linear_thread() % 32 / Size * Size;
  }
};

template <unsigned Size, typename Parent>
__device__ thread_block_tile<Size> tiled_partition(const Parent&) {
  return thread_block_tile<Size>();
}

template <typename Parent>
__device__ thread_group tiled_partition(const Parent&, unsigned size) {
  return thread_group(size);
}

template <typename Group>
__device__ void sync(const Group& group) {
  group.sync();
}

}  // namespace cooperative_groups
)HEADER";

constexpr char kCooperativeGroupsReduce[] = R"HEADER(#pragma once
#include <cooperative_groups.h>
namespace cooperative_groups {
template <typename T>
struct plus {
  __device__ T operator()(T a, T b) const { return a + b; }
};
template <typename T>
struct less {
  __device__ T operator()(T a, T b) const { return b < a ? b : a; }
};
template <typename T>
struct greater {
  __device__ T operator()(T a, T b) const { return a < b ? b : a; }
};
template <typename T>
struct bit_and {
  __device__ T operator()(T a, T b) const { return a & b; }
};
template <typename T>
struct bit_or {
  __device__ T operator()(T a, T b) const { return a | b; }
};
template <typename T>
struct bit_xor {
  __device__ T operator()(T a, T b) const { return a ^ b; }
};
// The tile's values combined by `op` (a butterfly over shfl_xor); every thread gets it.
template <unsigned Size, typename T, typename Op>
__device__ T reduce(const thread_block_tile<Size>& tile, T value, Op op) {
  for (unsigned offset = Size / 2; offset > 0; offset /= 2) {
    value = op(value, tile.shfl_xor(value, offset));
  }
  return value;
}
}  // namespace cooperative_groups
)HEADER";

constexpr char kCooperativeGroupsScan[] = R"HEADER(#pragma once
#include <cooperative_groups/reduce.h>
namespace cooperative_groups {
// Each thread's value combined by `op` with those of the tile's lower ranks, its own
// included (a Hillis-Steele scan over shfl_up).
template <unsigned Size, typename T, typename Op = plus<T>>
__device__ T inclusive_scan(const thread_block_tile<Size>& tile, T value, Op op = Op()) {
  for (unsigned offset = 1; offset < Size; offset *= 2) {
    const T lower = tile.shfl_up(value, offset);
    if (tile.thread_rank() >= offset) value = op(lower, value);
  }
  return value;
}
// The same without the thread's own value; rank 0 gets T().
template <unsigned Size, typename T, typename Op = plus<T>>
__device__ T exclusive_scan(const thread_block_tile<Size>& tile, T value, Op op = Op()) {
  const T lower = tile.shfl_up(inclusive_scan(tile, value, op), 1);
  return tile.thread_rank() == 0 ? T() : lower;
}
}  // namespace cooperative_groups
)HEADER";

}  // namespace

const std::vector<std::pair<std::string, std::string>>& CooperativeGroupsHeaders() {
  static const auto* const kHeaders = new std::vector<std::pair<std::string, std::string>>{
      {"cooperative_groups.h", kCooperativeGroups},
      {"cooperative_groups/reduce.h", kCooperativeGroupsReduce},
      {"cooperative_groups/scan.h", kCooperativeGroupsScan},
  };
  return *kHeaders;
}

}  // namespace gpucmd
