#include "driver/cub_headers.h"

namespace gpucmd {
namespace {

constexpr char kCollectives[] = R"CUB(#pragma once
#ifndef GPUCMD_CUB_COLLECTIVES_
#define GPUCMD_CUB_COLLECTIVES_
namespace cub {

enum BlockReduceAlgorithm {
  BLOCK_REDUCE_RAKING_COMMUTATIVE_ONLY,
  BLOCK_REDUCE_RAKING,
  BLOCK_REDUCE_WARP_REDUCTIONS,
};
enum BlockScanAlgorithm { BLOCK_SCAN_RAKING, BLOCK_SCAN_RAKING_MEMOIZE, BLOCK_SCAN_WARP_SCANS };

namespace gpucmd_detail {

struct Sum {
  template <typename T>
  __device__ T operator()(const T& a, const T& b) const { return a + b; }
};

// Room for `kCount` items of T that nothing constructs (so that it may be __shared__
// whatever T is), as CUB's TempStorage.
template <typename T, int kCount>
struct Items {
  alignas(T) unsigned char bytes[sizeof(T) * kCount];
  __device__ T* items() { return reinterpret_cast<T*>(bytes); }
};

// `count` items folded with `op`, in order.
template <typename T, typename Op>
__device__ inline T Fold(const T* items, int count, Op op) {
  T result = items[0];
  for (int i = 1; i < count; ++i) result = op(result, items[i]);
  return result;
}

// Where the participants of a reduction or a scan meet: participant `rank` of `count` (a
// block's threads, or a logical warp's lanes) puts its item in `items`, and `meet` is
// their barrier.
template <typename T, typename Meet>
struct Meeting {
  T* items;
  int rank;
  int count;
  Meet meet;

  // The fold of the first `valid` items, in the first participant (CUB defines it there
  // only; the others get their own item back).
  template <typename Op>
  __device__ T Reduce(T item, Op op, int valid) {
    items[rank] = item;
    meet();
    if (rank != 0) return item;
    return Fold(items, valid < 1 ? 1 : valid < count ? valid : count, op);
  }

  // The fold of the items before this participant's (`initial` before them all, when
  // given) into `exclusive`, and of all of them (`initial` left out) into `aggregate`.
  // False, `exclusive` untouched, for the first participant without `initial`.
  template <typename Op>
  __device__ bool Scan(T item, Op op, const T* initial, T& exclusive, T& aggregate) {
    items[rank] = item;
    meet();
    if (rank == 0) {
      for (int i = 1; i < count; ++i) items[i] = op(items[i - 1], items[i]);
    }
    meet();
    aggregate = items[count - 1];
    if (rank > 0) {
      exclusive = initial != nullptr ? op(*initial, items[rank - 1]) : items[rank - 1];
    } else if (initial != nullptr) {
      exclusive = *initial;
    }
    return rank > 0 || initial != nullptr;
  }
};

// The scans CUB's BlockScan and WarpScan share, over Collective::Meet(), on one item or
// several per participant (scanned from the exclusive prefix of their fold).
template <typename T, typename Collective>
class Scans {
 public:
  __device__ void InclusiveSum(T input, T& output) {
    T ignored;
    InclusiveSum(input, output, ignored);
  }
  __device__ void InclusiveSum(T input, T& output, T& aggregate) {
    InclusiveScan(input, output, Sum(), aggregate);
  }
  __device__ void ExclusiveSum(T input, T& output) {
    T ignored;
    ExclusiveSum(input, output, ignored);
  }
  __device__ void ExclusiveSum(T input, T& output, T& aggregate) {
    ExclusiveScan(input, output, T(), Sum(), aggregate);
  }
  template <typename ScanOp>
  __device__ void InclusiveScan(T input, T& output, ScanOp op) {
    T ignored;
    InclusiveScan(input, output, op, ignored);
  }
  template <typename ScanOp>
  __device__ void InclusiveScan(T input, T& output, ScanOp op, T& aggregate) {
    T items[1] = {input};
    ScanItems(items, items, op, nullptr, true, aggregate);
    output = items[0];
  }
  template <typename ScanOp>
  __device__ void ExclusiveScan(T input, T& output, T initial_value, ScanOp op) {
    T ignored;
    ExclusiveScan(input, output, initial_value, op, ignored);
  }
  template <typename ScanOp>
  __device__ void ExclusiveScan(T input, T& output, T initial_value, ScanOp op, T& aggregate) {
    T items[1] = {input};
    ScanItems(items, items, op, &initial_value, false, aggregate);
    output = items[0];
  }
  template <typename ScanOp>
  __device__ void ExclusiveScan(T input, T& output, ScanOp op) {
    T ignored;
    ExclusiveScan(input, output, op, ignored);
  }
  template <typename ScanOp>
  __device__ void ExclusiveScan(T input, T& output, ScanOp op, T& aggregate) {
    T items[1] = {input};
    ScanItems(items, items, op, nullptr, false, aggregate);
    output = items[0];
  }
  template <int ITEMS_PER_THREAD>
  __device__ void InclusiveSum(T (&input)[ITEMS_PER_THREAD], T (&output)[ITEMS_PER_THREAD]) {
    T ignored;
    ScanItems(input, output, Sum(), nullptr, true, ignored);
  }
  template <int ITEMS_PER_THREAD>
  __device__ void InclusiveSum(T (&input)[ITEMS_PER_THREAD], T (&output)[ITEMS_PER_THREAD],
                               T& aggregate) {
    ScanItems(input, output, Sum(), nullptr, true, aggregate);
  }
  template <int ITEMS_PER_THREAD>
  __device__ void ExclusiveSum(T (&input)[ITEMS_PER_THREAD], T (&output)[ITEMS_PER_THREAD]) {
    T ignored;
    const T zero = T();
    ScanItems(input, output, Sum(), &zero, false, ignored);
  }
  template <int ITEMS_PER_THREAD>
  __device__ void ExclusiveSum(T (&input)[ITEMS_PER_THREAD], T (&output)[ITEMS_PER_THREAD],
                               T& aggregate) {
    const T zero = T();
    ScanItems(input, output, Sum(), &zero, false, aggregate);
  }
  template <int ITEMS_PER_THREAD, typename ScanOp>
  __device__ void InclusiveScan(T (&input)[ITEMS_PER_THREAD], T (&output)[ITEMS_PER_THREAD],
                                ScanOp op) {
    T ignored;
    ScanItems(input, output, op, nullptr, true, ignored);
  }
  template <int ITEMS_PER_THREAD, typename ScanOp>
  __device__ void InclusiveScan(T (&input)[ITEMS_PER_THREAD], T (&output)[ITEMS_PER_THREAD],
                                ScanOp op, T& aggregate) {
    ScanItems(input, output, op, nullptr, true, aggregate);
  }
  template <int ITEMS_PER_THREAD, typename ScanOp>
  __device__ void ExclusiveScan(T (&input)[ITEMS_PER_THREAD], T (&output)[ITEMS_PER_THREAD],
                                T initial_value, ScanOp op) {
    T ignored;
    ScanItems(input, output, op, &initial_value, false, ignored);
  }
  template <int ITEMS_PER_THREAD, typename ScanOp>
  __device__ void ExclusiveScan(T (&input)[ITEMS_PER_THREAD], T (&output)[ITEMS_PER_THREAD],
                                T initial_value, ScanOp op, T& aggregate) {
    ScanItems(input, output, op, &initial_value, false, aggregate);
  }

 private:
  // `input` scanned into `output` (which may be `input`), inclusively or not.
  template <int kItems, typename Op>
  __device__ void ScanItems(const T (&input)[kItems], T (&output)[kItems], Op op,
                            const T* initial, bool inclusive, T& aggregate) {
    T running = T();
    bool have_running = static_cast<Collective*>(this)->Meet().Scan(
        Fold(input, kItems, op), op, initial, running, aggregate);
    for (int i = 0; i < kItems; ++i) {
      const T item = input[i];
      const T next = have_running ? op(running, item) : item;
      output[i] = inclusive ? next : running;
      running = next;
      have_running = true;
    }
  }
};

struct BlockBarrier {
  __device__ void operator()() const { __syncthreads(); }
};
struct WarpBarrier {
  __device__ void operator()() const { __syncwarp(); }
};

// The calling thread's rank in its block, kDimX by kDimY by some threads...
template <int kDimX, int kDimY>
__device__ inline int BlockRank() {
  return static_cast<int>(threadIdx.x + kDimX * (threadIdx.y + kDimY * threadIdx.z));
}
// ... and in its logical warp of kLanes: warps are a block's runs of 32 linear ranks.
template <int kLanes>
__device__ inline int LaneRank() {
  return static_cast<int>(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) %
         32 % kLanes;
}

}  // namespace gpucmd_detail

template <typename T, int BLOCK_DIM_X,
          BlockReduceAlgorithm ALGORITHM = BLOCK_REDUCE_WARP_REDUCTIONS, int BLOCK_DIM_Y = 1,
          int BLOCK_DIM_Z = 1>
class BlockReduce {
 public:
  static constexpr int BLOCK_THREADS = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z;
  struct TempStorage : gpucmd_detail::Items<T, BLOCK_THREADS> {};

  __device__ explicit BlockReduce(TempStorage& storage) : storage_(storage) {}

  template <typename ReductionOp>
  __device__ T Reduce(T input, ReductionOp op) { return Reduce(input, op, BLOCK_THREADS); }
  template <typename ReductionOp>
  __device__ T Reduce(T input, ReductionOp op, int num_valid) {
    return gpucmd_detail::Meeting<T, gpucmd_detail::BlockBarrier>{
        storage_.items(), gpucmd_detail::BlockRank<BLOCK_DIM_X, BLOCK_DIM_Y>(), BLOCK_THREADS,
        {}}.Reduce(input, op, num_valid);
  }
  template <int ITEMS_PER_THREAD, typename ReductionOp>
  __device__ T Reduce(T (&inputs)[ITEMS_PER_THREAD], ReductionOp op) {
    return Reduce(gpucmd_detail::Fold(inputs, ITEMS_PER_THREAD, op), op);
  }
  __device__ T Sum(T input) { return Reduce(input, gpucmd_detail::Sum()); }
  __device__ T Sum(T input, int num_valid) {
    return Reduce(input, gpucmd_detail::Sum(), num_valid);
  }
  template <int ITEMS_PER_THREAD>
  __device__ T Sum(T (&inputs)[ITEMS_PER_THREAD]) {
    return Reduce(inputs, gpucmd_detail::Sum());
  }

 private:
  TempStorage& storage_;
};

template <typename T, int BLOCK_DIM_X, BlockScanAlgorithm ALGORITHM = BLOCK_SCAN_RAKING,
          int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1>
class BlockScan : public gpucmd_detail::Scans<T, BlockScan<T, BLOCK_DIM_X, ALGORITHM,
                                                          BLOCK_DIM_Y, BLOCK_DIM_Z>> {
 public:
  static constexpr int BLOCK_THREADS = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z;
  struct TempStorage : gpucmd_detail::Items<T, BLOCK_THREADS> {};

  __device__ explicit BlockScan(TempStorage& storage) : storage_(storage) {}

 private:
  friend class gpucmd_detail::Scans<T, BlockScan>;
  __device__ gpucmd_detail::Meeting<T, gpucmd_detail::BlockBarrier> Meet() {
    return {storage_.items(), gpucmd_detail::BlockRank<BLOCK_DIM_X, BLOCK_DIM_Y>(),
            BLOCK_THREADS, {}};
  }
  TempStorage& storage_;
};

template <typename T, int LOGICAL_WARP_THREADS = 32>
class WarpReduce {
 public:
  struct TempStorage : gpucmd_detail::Items<T, LOGICAL_WARP_THREADS> {};

  __device__ explicit WarpReduce(TempStorage& storage) : storage_(storage) {}

  template <typename ReductionOp>
  __device__ T Reduce(T input, ReductionOp op) {
    return Reduce(input, op, LOGICAL_WARP_THREADS);
  }
  template <typename ReductionOp>
  __device__ T Reduce(T input, ReductionOp op, int valid_items) {
    return gpucmd_detail::Meeting<T, gpucmd_detail::WarpBarrier>{
        storage_.items(), gpucmd_detail::LaneRank<LOGICAL_WARP_THREADS>(), LOGICAL_WARP_THREADS,
        {}}.Reduce(input, op, valid_items);
  }
  __device__ T Sum(T input) { return Reduce(input, gpucmd_detail::Sum()); }
  __device__ T Sum(T input, int valid_items) {
    return Reduce(input, gpucmd_detail::Sum(), valid_items);
  }

 private:
  TempStorage& storage_;
};

template <typename T, int LOGICAL_WARP_THREADS = 32>
class WarpScan : public gpucmd_detail::Scans<T, WarpScan<T, LOGICAL_WARP_THREADS>> {
 public:
  struct TempStorage : gpucmd_detail::Items<T, LOGICAL_WARP_THREADS> {};

  __device__ explicit WarpScan(TempStorage& storage) : storage_(storage) {}

  using gpucmd_detail::Scans<T, WarpScan>::InclusiveScan;
  // A warp's inclusive scan may start from an initial value too.
  template <typename ScanOp>
  __device__ void InclusiveScan(T input, T& output, T initial_value, ScanOp op) {
    T exclusive = initial_value, ignored;
    Meet().Scan(input, op, &initial_value, exclusive, ignored);
    output = op(exclusive, input);
  }
  // Lane `src_lane`'s input, in every lane.
  __device__ T Broadcast(T input, unsigned int src_lane) {
    T* items = storage_.items();
    items[gpucmd_detail::LaneRank<LOGICAL_WARP_THREADS>()] = input;
    __syncwarp();
    return items[src_lane];
  }

 private:
  friend class gpucmd_detail::Scans<T, WarpScan>;
  __device__ gpucmd_detail::Meeting<T, gpucmd_detail::WarpBarrier> Meet() {
    return {storage_.items(), gpucmd_detail::LaneRank<LOGICAL_WARP_THREADS>(),
            LOGICAL_WARP_THREADS, {}};
  }
  TempStorage& storage_;
};

}  // namespace cub
#endif  // GPUCMD_CUB_COLLECTIVES_
)CUB";

}  // namespace

const std::vector<std::pair<std::string, std::string>>& CubHeaders() {
  static const auto* const kHeaders = [] {
    auto* headers = new std::vector<std::pair<std::string, std::string>>;
    for (const char* name : {"cub/block/block_reduce.cuh", "cub/block/block_scan.cuh",
                             "cub/warp/warp_reduce.cuh", "cub/warp/warp_scan.cuh"}) {
      headers->emplace_back(name, kCollectives);
    }
    return headers;
  }();
  return *kHeaders;
}

}  // namespace gpucmd
