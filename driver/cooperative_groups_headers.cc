#include "driver/cooperative_groups_headers.h"

namespace gpucmd {
namespace {

constexpr char kCooperativeGroups[] = R"HEADER(#pragma once
// cooperative_groups over CUDA's warp primitives, for drivers whose toolkit has none the
// kernels can use: the block, tiles of up to a warp (a tile is `Size` consecutive threads
// of the block, by linear index), and coalesced groups (any lanes of one warp).
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
__device__ inline unsigned lane() { return linear_thread() % 32; }
// The lane of the set bit of `mask` that has `rank` set bits below it.
__device__ inline unsigned lane_of_rank(unsigned mask, unsigned rank) {
  for (; rank > 0; --rank) mask &= mask - 1u;
  return static_cast<unsigned>(__ffs(static_cast<int>(mask)) - 1);
}
// `lanes`' bits of the lanes in `mask`, packed: bit i for the lane of rank i.
__device__ inline unsigned by_rank(unsigned lanes, unsigned mask) {
  unsigned packed = 0, rank = 0;
  for (unsigned lane = 0; lane < 32; ++lane) {
    if ((mask >> lane & 1u) == 0) continue;
    packed |= (lanes >> lane & 1u) << rank;
    ++rank;
  }
  return packed;
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

// The launch's grid. No driver makes cooperative launches, so it is never valid to sync:
// sync() fails the launch.
class grid_group {
 public:
  __device__ bool is_valid() const { return false; }
  __device__ void sync() const {
    gpucmd_fail_launch("grid_group::sync() needs a cooperative launch, which gpucmd does not make");
  }
  __device__ static unsigned long long num_blocks() {
    return static_cast<unsigned long long>(gridDim.x) * gridDim.y * gridDim.z;
  }
  __device__ static unsigned long long block_rank() {
    return blockIdx.x + static_cast<unsigned long long>(gridDim.x) *
                            (blockIdx.y + static_cast<unsigned long long>(gridDim.y) * blockIdx.z);
  }
  __device__ static dim3 dim_blocks() { return dim3(gridDim.x, gridDim.y, gridDim.z); }
  __device__ static dim3 block_index() { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
  __device__ static unsigned long long num_threads() {
    return num_blocks() * details::block_threads();
  }
  __device__ static unsigned long long size() { return num_threads(); }
  __device__ static unsigned long long thread_rank() {
    return block_rank() * details::block_threads() + details::linear_thread();
  }
  __device__ static dim3 dim_threads() {
    return dim3(gridDim.x * blockDim.x, gridDim.y * blockDim.y, gridDim.z * blockDim.z);
  }
  __device__ static dim3 group_dim() { return dim_threads(); }
  __device__ static dim3 thread_index() {
    return dim3(blockIdx.x * blockDim.x + threadIdx.x, blockIdx.y * blockDim.y + threadIdx.y,
                blockIdx.z * blockDim.z + threadIdx.z);
  }
};

__device__ inline grid_group this_grid() { return grid_group(); }

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

// Some lanes of one warp, ranked in lane order: those that reached coalesced_threads()
// together, or a labeled_partition's part of a group.
class coalesced_group {
 public:
  __device__ explicit coalesced_group(unsigned lanes) : mask_(lanes) {}
  __device__ void sync() const { __syncwarp(mask_); }
  __device__ unsigned thread_rank() const {
    return static_cast<unsigned>(__popc(mask_ & ((1u << details::lane()) - 1u)));
  }
  __device__ unsigned size() const { return static_cast<unsigned>(__popc(mask_)); }
  __device__ unsigned num_threads() const { return size(); }
  __device__ unsigned meta_group_rank() const { return 0; }
  __device__ unsigned meta_group_size() const { return 1; }
  template <typename T>
  __device__ T shfl(T var, unsigned source_rank) const {
    return __shfl_sync(mask_, var, static_cast<int>(lane_of(source_rank % size())));
  }
  // Lanes without a rank `delta` above (below) theirs get their own value back.
  template <typename T>
  __device__ T shfl_down(T var, unsigned delta) const {
    const unsigned rank = thread_rank() + delta;
    const unsigned source = rank < size() ? lane_of(rank) : details::lane();
    return __shfl_sync(mask_, var, static_cast<int>(source));
  }
  template <typename T>
  __device__ T shfl_up(T var, unsigned delta) const {
    const unsigned rank = thread_rank();
    const unsigned source = rank >= delta ? lane_of(rank - delta) : details::lane();
    return __shfl_sync(mask_, var, static_cast<int>(source));
  }
  __device__ int any(int predicate) const { return __any_sync(mask_, predicate); }
  __device__ int all(int predicate) const { return __all_sync(mask_, predicate); }
  // Bit i for the thread of rank i.
  __device__ unsigned ballot(int predicate) const {
    return details::by_rank(__ballot_sync(mask_, predicate), mask_);
  }
  template <typename T>
  __device__ unsigned match_any(T value) const {
    return details::by_rank(__match_any_sync(mask_, value), mask_);
  }

 private:
  friend __device__ coalesced_group labeled_partition(const coalesced_group&, int);

  __device__ unsigned lane_of(unsigned rank) const { return details::lane_of_rank(mask_, rank); }
  unsigned mask_;
};

// The calling thread's warp's lanes that run this call together. (`site` names the
// call, where a driver runs the lanes one by one and they meet there; leave it out.)
__device__ inline coalesced_group coalesced_threads(
    unsigned long long site = GPUCMD_CALL_SITE) {
  return coalesced_group(gpucmd_coalesced_lanes(site));
}

// The threads of `group` with the calling thread's `label`.
__device__ inline coalesced_group labeled_partition(const coalesced_group& group, int label) {
  return coalesced_group(__match_any_sync(group.mask_, label));
}
template <unsigned Size>
__device__ coalesced_group labeled_partition(const thread_block_tile<Size>& tile, int label) {
  return coalesced_group(__match_any_sync(details::tile_mask(Size), label));
}
// The threads of `group` whose `predicate` is as the calling thread's.
template <typename Group>
__device__ coalesced_group binary_partition(const Group& group, bool predicate) {
  return labeled_partition(group, predicate ? 1 : 0);
}

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
// The group's values combined by `op` (a tree towards rank 0); every thread gets it.
template <typename T, typename Op>
__device__ T reduce(const coalesced_group& group, T value, Op op) {
  const unsigned rank = group.thread_rank(), size = group.size();
  for (unsigned offset = 1; offset < size; offset *= 2) {
    const T above = group.shfl_down(value, offset);
    if (rank % (2 * offset) == 0 && rank + offset < size) value = op(value, above);
  }
  return group.shfl(value, 0);
}
}  // namespace cooperative_groups
)HEADER";

constexpr char kCooperativeGroupsScan[] = R"HEADER(#pragma once
#include <cooperative_groups/reduce.h>
namespace cooperative_groups {
// Each thread's value combined by `op` with those of the group's lower ranks, its own
// included (a Hillis-Steele scan over shfl_up), in a tile or a coalesced group.
template <typename Group, typename T, typename Op = plus<T>>
__device__ T inclusive_scan(const Group& group, T value, Op op = Op()) {
  for (unsigned offset = 1; offset < group.size(); offset *= 2) {
    const T lower = group.shfl_up(value, offset);
    if (group.thread_rank() >= offset) value = op(lower, value);
  }
  return value;
}
// The same without the thread's own value; rank 0 gets T().
template <typename Group, typename T, typename Op = plus<T>>
__device__ T exclusive_scan(const Group& group, T value, Op op = Op()) {
  const T lower = group.shfl_up(inclusive_scan(group, value, op), 1);
  return group.thread_rank() == 0 ? T() : lower;
}
}  // namespace cooperative_groups
)HEADER";

constexpr char kCooperativeGroupsMemcpyAsync[] = R"HEADER(#pragma once
#include <cooperative_groups.h>
namespace cooperative_groups {
// Copies `bytes` bytes from `source` to `target`, shared by the group's threads (each
// copies its rank's part); they are the group's once it waits (wait, wait_prior). The
// threads copy at once rather than in the background, which a wait cannot tell apart.
template <typename Group, typename T>
__device__ void memcpy_async(const Group& group, T* target, const T* source,
                             unsigned long long bytes) {
  const unsigned long long threads = group.size(), rank = group.thread_rank();
  const unsigned long long part = (bytes + threads - 1) / threads;
  const unsigned long long begin = rank * part < bytes ? rank * part : bytes;
  const unsigned long long end = begin + part < bytes ? begin + part : bytes;
  __builtin_memcpy(reinterpret_cast<unsigned char*>(target) + begin,
                   reinterpret_cast<const unsigned char*>(source) + begin, end - begin);
}
// The first min(target_count, source_count) elements.
template <typename Group, typename T>
__device__ void memcpy_async(const Group& group, T* target, unsigned long long target_count,
                             const T* source, unsigned long long source_count) {
  const unsigned long long count = target_count < source_count ? target_count : source_count;
  memcpy_async(group, target, source, count * sizeof(T));
}
// Every copy the group started has landed, for all of its threads.
template <typename Group>
__device__ void wait(const Group& group) {
  group.sync();
}
// All but the last `Stages` copies have landed (here, all of them).
template <unsigned Stages, typename Group>
__device__ void wait_prior(const Group& group) {
  group.sync();
}
}  // namespace cooperative_groups
)HEADER";

}  // namespace

const std::vector<std::pair<std::string, std::string>>& CooperativeGroupsHeaders() {
  static const auto* const kHeaders = new std::vector<std::pair<std::string, std::string>>{
      {"cooperative_groups.h", kCooperativeGroups},
      {"cooperative_groups/reduce.h", kCooperativeGroupsReduce},
      {"cooperative_groups/scan.h", kCooperativeGroupsScan},
      {"cooperative_groups/memcpy_async.h", kCooperativeGroupsMemcpyAsync},
  };
  return *kHeaders;
}

}  // namespace gpucmd
