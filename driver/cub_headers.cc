#include "driver/cub_headers.h"

#include "absl/strings/str_cat.h"

namespace gpucmd {
namespace {

constexpr char kCollectivesHeader[] = "cub/gpucmd_collectives.cuh";

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

// A block's own TempStorage of a collective built without one, as CUB's default
// constructors take: one per block (and per type), in its shared memory.
template <typename Storage>
__device__ inline Storage& PrivateStorage() {
  __shared__ Storage storage;
  return storage;
}

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

  __device__ BlockReduce() : storage_(gpucmd_detail::PrivateStorage<TempStorage>()) {}
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

  __device__ BlockScan() : storage_(gpucmd_detail::PrivateStorage<TempStorage>()) {}
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

// Loads and stores of a block's tile: thread t's items are the tile's t*N..t*N+N-1
// (blocked) or t, t+T, ... (striped: BLOCK_LOAD_STRIPED and BLOCK_STORE_STRIPED), as
// CUB's algorithms leave them; the other algorithms differ on a GPU only in how they read.
enum BlockLoadAlgorithm {
  BLOCK_LOAD_DIRECT,
  BLOCK_LOAD_STRIPED,
  BLOCK_LOAD_VECTORIZE,
  BLOCK_LOAD_TRANSPOSE,
  BLOCK_LOAD_WARP_TRANSPOSE,
  BLOCK_LOAD_WARP_TRANSPOSE_TIMESLICED,
};
enum BlockStoreAlgorithm {
  BLOCK_STORE_DIRECT,
  BLOCK_STORE_STRIPED,
  BLOCK_STORE_VECTORIZE,
  BLOCK_STORE_TRANSPOSE,
  BLOCK_STORE_WARP_TRANSPOSE,
  BLOCK_STORE_WARP_TRANSPOSE_TIMESLICED,
};

template <int BLOCK_THREADS, typename T, int ITEMS_PER_THREAD, typename InputIteratorT>
__device__ inline void LoadDirectStriped(int linear_tid, InputIteratorT block_itr,
                                         T (&items)[ITEMS_PER_THREAD]) {
  for (int i = 0; i < ITEMS_PER_THREAD; ++i) {
    items[i] = block_itr[linear_tid + i * BLOCK_THREADS];
  }
}
template <typename T, int ITEMS_PER_THREAD, typename InputIteratorT>
__device__ inline void LoadDirectBlocked(int linear_tid, InputIteratorT block_itr,
                                         T (&items)[ITEMS_PER_THREAD]) {
  for (int i = 0; i < ITEMS_PER_THREAD; ++i) {
    items[i] = block_itr[linear_tid * ITEMS_PER_THREAD + i];
  }
}
template <int BLOCK_THREADS, typename T, int ITEMS_PER_THREAD, typename OutputIteratorT>
__device__ inline void StoreDirectStriped(int linear_tid, OutputIteratorT block_itr,
                                          T (&items)[ITEMS_PER_THREAD]) {
  for (int i = 0; i < ITEMS_PER_THREAD; ++i) {
    block_itr[linear_tid + i * BLOCK_THREADS] = items[i];
  }
}
template <typename T, int ITEMS_PER_THREAD, typename OutputIteratorT>
__device__ inline void StoreDirectBlocked(int linear_tid, OutputIteratorT block_itr,
                                          T (&items)[ITEMS_PER_THREAD]) {
  for (int i = 0; i < ITEMS_PER_THREAD; ++i) {
    block_itr[linear_tid * ITEMS_PER_THREAD + i] = items[i];
  }
}

namespace gpucmd_detail {
// Where item `i` of thread `rank` sits in a tile of kThreads x kItems: blocked, striped,
// or warp-striped (each warp's run of the tile striped across its lanes).
enum class Arrangement { kBlocked, kStriped, kWarpStriped };
template <int kThreads, int kItems>
__device__ inline int PlaceIn(Arrangement arrangement, int rank, int i) {
  constexpr int kWarp = kThreads < 32 ? kThreads : 32;
  switch (arrangement) {
    case Arrangement::kStriped:
      return rank + i * kThreads;
    case Arrangement::kWarpStriped:
      return rank / kWarp * kWarp * kItems + rank % kWarp + i * kWarp;
    default:
      return rank * kItems + i;
  }
}
// Calls visit(place, i) for each item i of the calling thread whose place in a tile of
// kThreads x kItems, as `arrangement` has it, is before `valid`.
template <int kDimX, int kDimY, int kThreads, int kItems, typename Visit>
__device__ inline void ForEachPlace(Arrangement arrangement, int valid, Visit visit) {
  const int rank = BlockRank<kDimX, kDimY>();
  for (int i = 0; i < kItems; ++i) {
    const int place = PlaceIn<kThreads, kItems>(arrangement, rank, i);
    if (place < valid) visit(place, i);
  }
}
struct NoStorage {};
}  // namespace gpucmd_detail

template <typename T, int BLOCK_DIM_X, int ITEMS_PER_THREAD,
          BlockLoadAlgorithm ALGORITHM = BLOCK_LOAD_DIRECT, int BLOCK_DIM_Y = 1,
          int BLOCK_DIM_Z = 1>
class BlockLoad {
 public:
  struct TempStorage : gpucmd_detail::NoStorage {};
  __device__ BlockLoad() {}
  __device__ explicit BlockLoad(TempStorage&) {}

  template <typename InputIteratorT>
  __device__ void Load(InputIteratorT block_itr, T (&items)[ITEMS_PER_THREAD]) {
    Load(block_itr, items, kTile);
  }
  // Only the tile's first `valid_items`; the others are left as they were...
  template <typename InputIteratorT>
  __device__ void Load(InputIteratorT block_itr, T (&items)[ITEMS_PER_THREAD], int valid_items) {
    gpucmd_detail::ForEachPlace<BLOCK_DIM_X, BLOCK_DIM_Y, kThreads, ITEMS_PER_THREAD>(
        kArrangement, valid_items, [&](int place, int i) { items[i] = block_itr[place]; });
  }
  // ... or `oob_default`.
  template <typename InputIteratorT, typename DefaultT>
  __device__ void Load(InputIteratorT block_itr, T (&items)[ITEMS_PER_THREAD], int valid_items,
                       DefaultT oob_default) {
    for (int i = 0; i < ITEMS_PER_THREAD; ++i) items[i] = oob_default;
    Load(block_itr, items, valid_items);
  }

 private:
  static constexpr int kThreads = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z;
  static constexpr int kTile = kThreads * ITEMS_PER_THREAD;
  static constexpr gpucmd_detail::Arrangement kArrangement =
      ALGORITHM == BLOCK_LOAD_STRIPED ? gpucmd_detail::Arrangement::kStriped
                                      : gpucmd_detail::Arrangement::kBlocked;
};

template <typename T, int BLOCK_DIM_X, int ITEMS_PER_THREAD,
          BlockStoreAlgorithm ALGORITHM = BLOCK_STORE_DIRECT, int BLOCK_DIM_Y = 1,
          int BLOCK_DIM_Z = 1>
class BlockStore {
 public:
  struct TempStorage : gpucmd_detail::NoStorage {};
  __device__ BlockStore() {}
  __device__ explicit BlockStore(TempStorage&) {}

  template <typename OutputIteratorT>
  __device__ void Store(OutputIteratorT block_itr, T (&items)[ITEMS_PER_THREAD]) {
    Store(block_itr, items, kTile);
  }
  // Only the tile's first `valid_items`.
  template <typename OutputIteratorT>
  __device__ void Store(OutputIteratorT block_itr, T (&items)[ITEMS_PER_THREAD], int valid_items) {
    gpucmd_detail::ForEachPlace<BLOCK_DIM_X, BLOCK_DIM_Y, kThreads, ITEMS_PER_THREAD>(
        kArrangement, valid_items, [&](int place, int i) { block_itr[place] = items[i]; });
  }

 private:
  static constexpr int kThreads = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z;
  static constexpr int kTile = kThreads * ITEMS_PER_THREAD;
  static constexpr gpucmd_detail::Arrangement kArrangement =
      ALGORITHM == BLOCK_STORE_STRIPED ? gpucmd_detail::Arrangement::kStriped
                                       : gpucmd_detail::Arrangement::kBlocked;
};

struct NullType {};

}  // namespace cub

// The runtime's shared-memory bank sizes, which BlockRadixSort names among its parameters.
enum cudaSharedMemConfig {
  cudaSharedMemBankSizeDefault,
  cudaSharedMemBankSizeFourByte,
  cudaSharedMemBankSizeEightByte,
};

namespace cub {

namespace gpucmd_detail {

template <typename A, typename B>
struct Same {
  static constexpr bool kValue = false;
};
template <typename A>
struct Same<A, A> {
  static constexpr bool kValue = true;
};

// A key's bits as an unsigned integer whose order is the key's: integers' sign bit
// flipped, floating-point values' sign bit flipped when clear and every bit flipped when
// set, -0.0 taken as +0.0 (equal to it, as CUB's radix sort has them).
template <typename Key>
__device__ inline unsigned long long OrderedBits(Key key) {
  constexpr int kBits = 8 * sizeof(Key);
  constexpr unsigned long long kSign = 1ull << (kBits - 1);
  constexpr unsigned long long kAll = kBits == 64 ? ~0ull : (1ull << kBits) - 1;
  unsigned long long bits = 0;
  __builtin_memcpy(&bits, &key, sizeof(Key));
  if (static_cast<Key>(-1) > static_cast<Key>(0)) return bits;  // unsigned
  if (static_cast<Key>(0.5) == static_cast<Key>(0)) return bits ^ kSign;  // signed integer
  if (bits == kSign) bits = 0;  // -0.0
  return (bits & kSign) != 0 ? ~bits & kAll : bits | kSign;
}

}  // namespace gpucmd_detail

// Sorts a block's tile of keys (and values beside them) by the keys' bits [begin_bit,
// end_bit), stably, into a blocked or striped arrangement: the block's threads put their
// items in the TempStorage and the first thread sorts them there, digit by digit.
template <typename KeyT, int BLOCK_DIM_X, int ITEMS_PER_THREAD, typename ValueT = NullType,
          int RADIX_BITS = 4, bool MEMOIZE_OUTER_SCAN = true,
          BlockScanAlgorithm INNER_SCAN_ALGORITHM = BLOCK_SCAN_WARP_SCANS,
          cudaSharedMemConfig SMEM_CONFIG = cudaSharedMemBankSizeFourByte, int BLOCK_DIM_Y = 1,
          int BLOCK_DIM_Z = 1>
class BlockRadixSort {
  static constexpr int kThreads = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z;
  static constexpr int kTile = kThreads * ITEMS_PER_THREAD;

 public:
  struct TempStorage {
    gpucmd_detail::Items<KeyT, kTile> keys;
    gpucmd_detail::Items<ValueT, kTile> values;
    int order[2][kTile];  // the items' places, by the digits sorted so far
    int sorted;           // which of the two SortTile left sorted
  };
  __device__ BlockRadixSort() : storage_(gpucmd_detail::PrivateStorage<TempStorage>()) {}
  __device__ explicit BlockRadixSort(TempStorage& storage) : storage_(storage) {}

  __device__ void Sort(KeyT (&keys)[ITEMS_PER_THREAD], int begin_bit = 0,
                       int end_bit = sizeof(KeyT) * 8) {
    CheckKeysOnly();
    Run(keys, nullptr, begin_bit, end_bit, false, false);
  }
  __device__ void Sort(KeyT (&keys)[ITEMS_PER_THREAD], ValueT (&values)[ITEMS_PER_THREAD],
                       int begin_bit = 0, int end_bit = sizeof(KeyT) * 8) {
    Run(keys, &values, begin_bit, end_bit, false, false);
  }
  __device__ void SortDescending(KeyT (&keys)[ITEMS_PER_THREAD], int begin_bit = 0,
                                 int end_bit = sizeof(KeyT) * 8) {
    CheckKeysOnly();
    Run(keys, nullptr, begin_bit, end_bit, true, false);
  }
  __device__ void SortDescending(KeyT (&keys)[ITEMS_PER_THREAD],
                                 ValueT (&values)[ITEMS_PER_THREAD], int begin_bit = 0,
                                 int end_bit = sizeof(KeyT) * 8) {
    Run(keys, &values, begin_bit, end_bit, true, false);
  }
  __device__ void SortBlockedToStriped(KeyT (&keys)[ITEMS_PER_THREAD], int begin_bit = 0,
                                       int end_bit = sizeof(KeyT) * 8) {
    CheckKeysOnly();
    Run(keys, nullptr, begin_bit, end_bit, false, true);
  }
  __device__ void SortBlockedToStriped(KeyT (&keys)[ITEMS_PER_THREAD],
                                       ValueT (&values)[ITEMS_PER_THREAD], int begin_bit = 0,
                                       int end_bit = sizeof(KeyT) * 8) {
    Run(keys, &values, begin_bit, end_bit, false, true);
  }
  __device__ void SortDescendingBlockedToStriped(KeyT (&keys)[ITEMS_PER_THREAD],
                                                 int begin_bit = 0,
                                                 int end_bit = sizeof(KeyT) * 8) {
    CheckKeysOnly();
    Run(keys, nullptr, begin_bit, end_bit, true, true);
  }
  __device__ void SortDescendingBlockedToStriped(KeyT (&keys)[ITEMS_PER_THREAD],
                                                 ValueT (&values)[ITEMS_PER_THREAD],
                                                 int begin_bit = 0,
                                                 int end_bit = sizeof(KeyT) * 8) {
    Run(keys, &values, begin_bit, end_bit, true, true);
  }

 private:
  // As CUB's, a sort of keys alone is one declared without a ValueT.
  __device__ static void CheckKeysOnly() {
    static_assert(gpucmd_detail::Same<ValueT, NullType>::kValue,
                  "a BlockRadixSort of keys alone is declared without a ValueT");
  }
  __device__ void Run(KeyT (&keys)[ITEMS_PER_THREAD], ValueT (*values)[ITEMS_PER_THREAD],
                      int begin_bit, int end_bit, bool descending, bool to_striped) {
    const int rank = gpucmd_detail::BlockRank<BLOCK_DIM_X, BLOCK_DIM_Y>();
    for (int i = 0; i < ITEMS_PER_THREAD; ++i) {
      const int place = rank * ITEMS_PER_THREAD + i;
      storage_.keys.items()[place] = keys[i];
      if (values != nullptr) storage_.values.items()[place] = (*values)[i];
      storage_.order[0][place] = place;
    }
    __syncthreads();
    if (rank == 0) SortTile(begin_bit, end_bit, descending);
    __syncthreads();
    for (int i = 0; i < ITEMS_PER_THREAD; ++i) {
      const int place = gpucmd_detail::PlaceIn<kThreads, ITEMS_PER_THREAD>(
          to_striped ? gpucmd_detail::Arrangement::kStriped : gpucmd_detail::Arrangement::kBlocked,
          rank, i);
      const int from = storage_.order[storage_.sorted][place];
      keys[i] = storage_.keys.items()[from];
      if (values != nullptr) (*values)[i] = storage_.values.items()[from];
    }
  }

  // A stable counting sort of order[0] per RADIX_BITS digit of the keys' ordered bits (all
  // flipped when `descending`) in [begin_bit, end_bit), lowest first; the result in
  // order[sorted].
  __device__ void SortTile(int begin_bit, int end_bit, bool descending) {
    const KeyT* tile_keys = storage_.keys.items();
    auto digit = [&](int place, int shift, unsigned long long mask) {
      const unsigned long long bits = gpucmd_detail::OrderedBits(tile_keys[place]);
      return static_cast<int>(((descending ? ~bits : bits) >> shift) & mask);
    };
    int from = 0;
    for (int shift = begin_bit; shift < end_bit; shift += RADIX_BITS) {
      const int width = end_bit - shift < RADIX_BITS ? end_bit - shift : RADIX_BITS;
      const unsigned long long mask = (1ull << width) - 1;
      int starts[(1 << RADIX_BITS) + 1] = {};
      for (int p = 0; p < kTile; ++p) ++starts[digit(storage_.order[from][p], shift, mask) + 1];
      for (int d = 1; d <= (1 << RADIX_BITS); ++d) starts[d] += starts[d - 1];
      for (int p = 0; p < kTile; ++p) {
        const int place = storage_.order[from][p];
        storage_.order[1 - from][starts[digit(place, shift, mask)]++] = place;
      }
      from = 1 - from;
    }
    storage_.sorted = from;
  }

  TempStorage& storage_;
};


// Rearranges a block's tile between blocked, striped and warp-striped arrangements, or
// from ranks each thread gives its items, through the TempStorage.
template <typename T, int BLOCK_DIM_X, int ITEMS_PER_THREAD, bool WARP_TIME_SLICING = false,
          int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1>
class BlockExchange {
  static constexpr int kThreads = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z;
  static constexpr const int* kNoRanks = nullptr;
  using Arrangement = gpucmd_detail::Arrangement;

 public:
  struct TempStorage : gpucmd_detail::Items<T, kThreads * ITEMS_PER_THREAD> {};
  __device__ BlockExchange() : storage_(gpucmd_detail::PrivateStorage<TempStorage>()) {}
  __device__ explicit BlockExchange(TempStorage& storage) : storage_(storage) {}

  template <typename OutputT>
  __device__ void BlockedToStriped(const T (&input)[ITEMS_PER_THREAD],
                                   OutputT (&output)[ITEMS_PER_THREAD]) {
    Exchange(input, output, Arrangement::kBlocked, kNoRanks, Arrangement::kStriped);
  }
  template <typename OutputT>
  __device__ void StripedToBlocked(const T (&input)[ITEMS_PER_THREAD],
                                   OutputT (&output)[ITEMS_PER_THREAD]) {
    Exchange(input, output, Arrangement::kStriped, kNoRanks, Arrangement::kBlocked);
  }
  template <typename OutputT>
  __device__ void BlockedToWarpStriped(const T (&input)[ITEMS_PER_THREAD],
                                       OutputT (&output)[ITEMS_PER_THREAD]) {
    Exchange(input, output, Arrangement::kBlocked, kNoRanks, Arrangement::kWarpStriped);
  }
  template <typename OutputT>
  __device__ void WarpStripedToBlocked(const T (&input)[ITEMS_PER_THREAD],
                                       OutputT (&output)[ITEMS_PER_THREAD]) {
    Exchange(input, output, Arrangement::kWarpStriped, kNoRanks, Arrangement::kBlocked);
  }
  template <typename OutputT, typename OffsetT>
  __device__ void ScatterToBlocked(const T (&input)[ITEMS_PER_THREAD],
                                   OutputT (&output)[ITEMS_PER_THREAD],
                                   OffsetT (&ranks)[ITEMS_PER_THREAD]) {
    Exchange(input, output, Arrangement::kBlocked, ranks, Arrangement::kBlocked);
  }
  template <typename OutputT, typename OffsetT>
  __device__ void ScatterToStriped(const T (&input)[ITEMS_PER_THREAD],
                                   OutputT (&output)[ITEMS_PER_THREAD],
                                   OffsetT (&ranks)[ITEMS_PER_THREAD]) {
    Exchange(input, output, Arrangement::kBlocked, ranks, Arrangement::kStriped);
  }

 private:
  // Each item put at its place in `from` (or at its rank, given `ranks`), then taken from
  // its place in `to`.
  template <typename OutputT, typename OffsetT>
  __device__ void Exchange(const T (&input)[ITEMS_PER_THREAD], OutputT (&output)[ITEMS_PER_THREAD],
                           Arrangement from, const OffsetT* ranks, Arrangement to) {
    const int rank = gpucmd_detail::BlockRank<BLOCK_DIM_X, BLOCK_DIM_Y>();
    T* items = storage_.items();
    for (int i = 0; i < ITEMS_PER_THREAD; ++i) {
      const int place = ranks != nullptr ? static_cast<int>(ranks[i])
                                         : gpucmd_detail::PlaceIn<kThreads, ITEMS_PER_THREAD>(
                                               from, rank, i);
      items[place] = input[i];
    }
    __syncthreads();
    for (int i = 0; i < ITEMS_PER_THREAD; ++i) {
      output[i] = items[gpucmd_detail::PlaceIn<kThreads, ITEMS_PER_THREAD>(to, rank, i)];
    }
  }

  TempStorage& storage_;
};

enum BlockHistogramAlgorithm { BLOCK_HISTO_SORT, BLOCK_HISTO_ATOMIC };

// Counts a block's items (each one a bin's index) into a histogram in shared or device
// memory, with atomic additions.
template <typename T, int BLOCK_DIM_X, int ITEMS_PER_THREAD, int BINS,
          BlockHistogramAlgorithm ALGORITHM = BLOCK_HISTO_SORT, int BLOCK_DIM_Y = 1,
          int BLOCK_DIM_Z = 1>
class BlockHistogram {
  static constexpr int kThreads = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z;

 public:
  struct TempStorage : gpucmd_detail::NoStorage {};
  __device__ BlockHistogram() {}
  __device__ explicit BlockHistogram(TempStorage&) {}

  // Zeroes the bins, the block's threads taking them in turn (no barrier).
  template <typename CounterT>
  __device__ void InitHistogram(CounterT histogram[BINS]) {
    for (int bin = gpucmd_detail::BlockRank<BLOCK_DIM_X, BLOCK_DIM_Y>(); bin < BINS;
         bin += kThreads) {
      histogram[bin] = 0;
    }
  }
  // The items counted into bins zeroed first.
  template <typename CounterT>
  __device__ void Histogram(T (&items)[ITEMS_PER_THREAD], CounterT histogram[BINS]) {
    InitHistogram(histogram);
    __syncthreads();
    Composite(items, histogram);
  }
  // The items counted into the bins as they are.
  template <typename CounterT>
  __device__ void Composite(T (&items)[ITEMS_PER_THREAD], CounterT histogram[BINS]) {
    for (int i = 0; i < ITEMS_PER_THREAD; ++i) {
      atomicAdd(&histogram[static_cast<int>(items[i])], CounterT(1));
    }
  }
};

namespace gpucmd_detail {
// A discontinuity operator's verdict on neighbours a and b, given b's place in the tile
// when it takes one.
template <typename Op, typename T>
__device__ inline auto Flag(Op& op, const T& a, const T& b, int place, int)
    -> decltype(static_cast<bool>(op(a, b, place))) {
  return static_cast<bool>(op(a, b, place));
}
template <typename Op, typename T>
__device__ inline bool Flag(Op& op, const T& a, const T& b, int, long) {
  return static_cast<bool>(op(a, b));
}
}  // namespace gpucmd_detail

// Flags the items of a block's blocked tile that differ from their predecessor (heads) or
// successor (tails) by `flag_op`; the tile's first (last) item is flagged, or compared with
// the given item before (after) the tile.
template <typename T, int BLOCK_DIM_X, int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1>
class BlockDiscontinuity {
  static constexpr int kThreads = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z;

 public:
  struct TempStorage : gpucmd_detail::Items<T, 2 * kThreads> {};
  __device__ BlockDiscontinuity() : storage_(gpucmd_detail::PrivateStorage<TempStorage>()) {}
  __device__ explicit BlockDiscontinuity(TempStorage& storage) : storage_(storage) {}

  template <int ITEMS_PER_THREAD, typename FlagT, typename FlagOp>
  __device__ void FlagHeads(FlagT (&head_flags)[ITEMS_PER_THREAD], T (&input)[ITEMS_PER_THREAD],
                            FlagOp flag_op) {
    Flags<ITEMS_PER_THREAD, FlagT>(&head_flags, nullptr, nullptr, nullptr, input, flag_op);
  }
  template <int ITEMS_PER_THREAD, typename FlagT, typename FlagOp>
  __device__ void FlagHeads(FlagT (&head_flags)[ITEMS_PER_THREAD], T (&input)[ITEMS_PER_THREAD],
                            FlagOp flag_op, T tile_predecessor_item) {
    Flags<ITEMS_PER_THREAD, FlagT>(&head_flags, &tile_predecessor_item, nullptr, nullptr, input,
                                   flag_op);
  }
  template <int ITEMS_PER_THREAD, typename FlagT, typename FlagOp>
  __device__ void FlagTails(FlagT (&tail_flags)[ITEMS_PER_THREAD], T (&input)[ITEMS_PER_THREAD],
                            FlagOp flag_op) {
    Flags<ITEMS_PER_THREAD, FlagT>(nullptr, nullptr, &tail_flags, nullptr, input, flag_op);
  }
  template <int ITEMS_PER_THREAD, typename FlagT, typename FlagOp>
  __device__ void FlagTails(FlagT (&tail_flags)[ITEMS_PER_THREAD], T (&input)[ITEMS_PER_THREAD],
                            FlagOp flag_op, T tile_successor_item) {
    Flags<ITEMS_PER_THREAD, FlagT>(nullptr, nullptr, &tail_flags, &tile_successor_item, input,
                                   flag_op);
  }
  template <int ITEMS_PER_THREAD, typename FlagT, typename FlagOp>
  __device__ void FlagHeadsAndTails(FlagT (&head_flags)[ITEMS_PER_THREAD],
                                    FlagT (&tail_flags)[ITEMS_PER_THREAD],
                                    T (&input)[ITEMS_PER_THREAD], FlagOp flag_op) {
    Flags<ITEMS_PER_THREAD, FlagT>(&head_flags, nullptr, &tail_flags, nullptr, input, flag_op);
  }
  template <int ITEMS_PER_THREAD, typename FlagT, typename FlagOp>
  __device__ void FlagHeadsAndTails(FlagT (&head_flags)[ITEMS_PER_THREAD],
                                    FlagT (&tail_flags)[ITEMS_PER_THREAD], T tile_successor_item,
                                    T (&input)[ITEMS_PER_THREAD], FlagOp flag_op) {
    Flags<ITEMS_PER_THREAD, FlagT>(&head_flags, nullptr, &tail_flags, &tile_successor_item, input,
                                   flag_op);
  }
  template <int ITEMS_PER_THREAD, typename FlagT, typename FlagOp>
  __device__ void FlagHeadsAndTails(FlagT (&head_flags)[ITEMS_PER_THREAD],
                                    T tile_predecessor_item, FlagT (&tail_flags)[ITEMS_PER_THREAD],
                                    T (&input)[ITEMS_PER_THREAD], FlagOp flag_op) {
    Flags<ITEMS_PER_THREAD, FlagT>(&head_flags, &tile_predecessor_item, &tail_flags, nullptr, input,
                                   flag_op);
  }
  template <int ITEMS_PER_THREAD, typename FlagT, typename FlagOp>
  __device__ void FlagHeadsAndTails(FlagT (&head_flags)[ITEMS_PER_THREAD],
                                    T tile_predecessor_item, FlagT (&tail_flags)[ITEMS_PER_THREAD],
                                    T tile_successor_item, T (&input)[ITEMS_PER_THREAD],
                                    FlagOp flag_op) {
    Flags<ITEMS_PER_THREAD, FlagT>(&head_flags, &tile_predecessor_item, &tail_flags,
                                   &tile_successor_item, input, flag_op);
  }

 private:
  // The heads' and the tails' flags, where asked for: each thread's first and last items
  // meet in the TempStorage, where the neighbouring threads read them.
  template <int kItems, typename FlagT, typename FlagOp>
  __device__ void Flags(FlagT (*heads)[kItems], const T* predecessor, FlagT (*tails)[kItems],
                        const T* successor, T (&input)[kItems], FlagOp& flag_op) {
    const int rank = gpucmd_detail::BlockRank<BLOCK_DIM_X, BLOCK_DIM_Y>();
    T* ends = storage_.items();  // [2r]: thread r's first item, [2r + 1]: its last
    ends[2 * rank] = input[0];
    ends[2 * rank + 1] = input[kItems - 1];
    __syncthreads();
    const int first = rank * kItems;
    for (int i = 0; i < kItems && heads != nullptr; ++i) {
      const T* before = i > 0 ? &input[i - 1] : rank > 0 ? &ends[2 * rank - 1] : predecessor;
      (*heads)[i] = before == nullptr ? FlagT(1)
                                      : FlagT(gpucmd_detail::Flag(flag_op, *before, input[i],
                                                                  first + i, 0));
    }
    for (int i = 0; i < kItems && tails != nullptr; ++i) {
      const T* after = i + 1 < kItems      ? &input[i + 1]
                       : rank + 1 < kThreads ? &ends[2 * rank + 2]
                                             : successor;
      (*tails)[i] = after == nullptr ? FlagT(1)
                                     : FlagT(gpucmd_detail::Flag(flag_op, input[i], *after,
                                                                 first + i + 1, 0));
    }
  }

  TempStorage& storage_;
};

namespace gpucmd_detail {

// The sorts CUB's BlockMergeSort and WarpMergeSort share: a tile of kParticipants x kItems
// keys (and values beside them), blocked, sorted stably by `compare_op` (a strict "less")
// where the participants meet: they put their items in the TempStorage, the first one
// merge-sorts the items' places, and each takes its items back in sorted order. With
// `valid_items`, the tile's items from that place on are `oob_default` first.
template <typename KeyT, typename ValueT, int kItems, int kParticipants, typename Meet>
class MergeSorts {
  static constexpr int kTile = kParticipants * kItems;

 public:
  struct TempStorage {
    Items<KeyT, kTile> keys;
    Items<ValueT, kTile> values;
    int order[kTile];
    int scratch[kTile];
  };

  template <typename CompareOp>
  __device__ void Sort(KeyT (&keys)[kItems], CompareOp compare_op) {
    Run(keys, nullptr, compare_op, kTile, nullptr);
  }
  template <typename CompareOp>
  __device__ void Sort(KeyT (&keys)[kItems], CompareOp compare_op, int valid_items,
                       KeyT oob_default) {
    Run(keys, nullptr, compare_op, valid_items, &oob_default);
  }
  template <typename CompareOp>
  __device__ void Sort(KeyT (&keys)[kItems], ValueT (&values)[kItems], CompareOp compare_op) {
    Run(keys, &values, compare_op, kTile, nullptr);
  }
  template <typename CompareOp>
  __device__ void Sort(KeyT (&keys)[kItems], ValueT (&values)[kItems], CompareOp compare_op,
                       int valid_items, KeyT oob_default) {
    Run(keys, &values, compare_op, valid_items, &oob_default);
  }
  // CUB's merge sorts are stable either way.
  template <typename... Args>
  __device__ void StableSort(Args&&... args) {
    Sort(args...);
  }

 protected:
  __device__ MergeSorts(TempStorage& storage, int rank) : storage_(storage), rank_(rank) {}

 private:
  template <typename CompareOp>
  __device__ void Run(KeyT (&keys)[kItems], ValueT (*values)[kItems], CompareOp& compare_op,
                      int valid_items, const KeyT* oob_default) {
    KeyT* tile_keys = storage_.keys.items();
    ValueT* tile_values = storage_.values.items();
    for (int i = 0; i < kItems; ++i) {
      const int place = rank_ * kItems + i;
      tile_keys[place] = oob_default != nullptr && place >= valid_items ? *oob_default : keys[i];
      if (values != nullptr) tile_values[place] = (*values)[i];
      storage_.order[place] = place;
    }
    Meet()();
    if (rank_ == 0) SortPlaces(tile_keys, compare_op);
    Meet()();
    for (int i = 0; i < kItems; ++i) {
      const int from = storage_.order[rank_ * kItems + i];
      keys[i] = tile_keys[from];
      if (values != nullptr) (*values)[i] = tile_values[from];
    }
  }

  // A bottom-up merge sort of the places in storage_.order by their keys: an item goes
  // before an equal one of the run after its own, so the sort is stable.
  template <typename CompareOp>
  __device__ void SortPlaces(const KeyT* tile_keys, CompareOp& less) {
    int* from = storage_.order;
    int* to = storage_.scratch;
    for (int width = 1; width < kTile; width *= 2) {
      for (int begin = 0; begin < kTile; begin += 2 * width) {
        const int middle = begin + width < kTile ? begin + width : kTile;
        const int end = begin + 2 * width < kTile ? begin + 2 * width : kTile;
        int left = begin, right = middle;
        for (int out = begin; out < end; ++out) {
          const bool take_right =
              left == middle ||
              (right < end && less(tile_keys[from[right]], tile_keys[from[left]]));
          to[out] = take_right ? from[right++] : from[left++];
        }
      }
      int* swap = from;
      from = to;
      to = swap;
    }
    if (from != storage_.order) {
      for (int place = 0; place < kTile; ++place) storage_.order[place] = from[place];
    }
  }

  TempStorage& storage_;
  const int rank_;
};

}  // namespace gpucmd_detail

template <typename KeyT, int BLOCK_DIM_X, int ITEMS_PER_THREAD, typename ValueT = NullType,
          int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1>
class BlockMergeSort
    : public gpucmd_detail::MergeSorts<KeyT, ValueT, ITEMS_PER_THREAD,
                                       BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z,
                                       gpucmd_detail::BlockBarrier> {
  using Base = gpucmd_detail::MergeSorts<KeyT, ValueT, ITEMS_PER_THREAD,
                                         BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z,
                                         gpucmd_detail::BlockBarrier>;

 public:
  using TempStorage = typename Base::TempStorage;
  __device__ BlockMergeSort()
      : Base(gpucmd_detail::PrivateStorage<TempStorage>(),
             gpucmd_detail::BlockRank<BLOCK_DIM_X, BLOCK_DIM_Y>()) {}
  __device__ explicit BlockMergeSort(TempStorage& storage)
      : Base(storage, gpucmd_detail::BlockRank<BLOCK_DIM_X, BLOCK_DIM_Y>()) {}
};

template <typename KeyT, int ITEMS_PER_THREAD, int LOGICAL_WARP_THREADS = 32,
          typename ValueT = NullType>
class WarpMergeSort
    : public gpucmd_detail::MergeSorts<KeyT, ValueT, ITEMS_PER_THREAD, LOGICAL_WARP_THREADS,
                                       gpucmd_detail::WarpBarrier> {
  using Base = gpucmd_detail::MergeSorts<KeyT, ValueT, ITEMS_PER_THREAD, LOGICAL_WARP_THREADS,
                                         gpucmd_detail::WarpBarrier>;

 public:
  using TempStorage = typename Base::TempStorage;
  __device__ explicit WarpMergeSort(TempStorage& storage)
      : Base(storage, gpucmd_detail::LaneRank<LOGICAL_WARP_THREADS>()) {}
};

}  // namespace cub
#endif  // GPUCMD_CUB_COLLECTIVES_
)CUB";

}  // namespace

const std::vector<std::pair<std::string, std::string>>& CubHeaders() {
  static const auto* const kHeaders = [] {
    // The collectives once, in a header of their own that each of CUB's names includes.
    auto* headers =
        new std::vector<std::pair<std::string, std::string>>{{kCollectivesHeader, kCollectives}};
    for (const char* name : {
             "cub/block/block_discontinuity.cuh",
             "cub/block/block_exchange.cuh",
             "cub/block/block_histogram.cuh",
             "cub/block/block_load.cuh",
             "cub/block/block_merge_sort.cuh",
             "cub/block/block_radix_sort.cuh",
             "cub/block/block_reduce.cuh",
             "cub/block/block_scan.cuh",
             "cub/block/block_store.cuh",
             "cub/warp/warp_merge_sort.cuh",
             "cub/warp/warp_reduce.cuh",
             "cub/warp/warp_scan.cuh",
         }) {
      headers->emplace_back(name,
                            absl::StrCat("#pragma once\n#include <", kCollectivesHeader, ">\n"));
    }
    return headers;
  }();
  return *kHeaders;
}

}  // namespace gpucmd
