#ifndef GPUCMDD_TESTS_KERNELS_KERNEL_SOURCES_H_
#define GPUCMDD_TESTS_KERNELS_KERNEL_SOURCES_H_

// The kernel test suite's kernels, in the one CUDA C++ dialect every driver compiles.
// The daemon tests run them on the CPU driver against references; the NVRTC and hiprtc
// tests compile them for GPUs.

#include <array>
#include <cstdint>
#include <utility>

namespace gpucmd::kernels {

inline constexpr char kVectorAdd[] = R"CUDA(
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
)CUDA";

// Spins for `ticks` of clock64() (nanoseconds on the CPU driver): a long kernel on demand.
inline constexpr char kSpin[] = R"CUDA(
    extern "C" __global__ void spin(long long ticks) {
      long long start = clock64();
      while (clock64() - start < ticks) {}
    })CUDA";

inline constexpr char kSaxpy[] = R"CUDA(
    extern "C" __global__ void saxpy(int n, float a, const float* __restrict__ x, float* y) {
      for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        y[i] = a * x[i] + y[i];
    })CUDA";

inline constexpr char kTiledMatmul[] = R"CUDA(
    #define TILE 16
    extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                      int M, int K, int N) {
      __shared__ float As[TILE][TILE];
      __shared__ float Bs[TILE][TILE];
      int row = blockIdx.y * TILE + threadIdx.y;
      int col = blockIdx.x * TILE + threadIdx.x;
      float sum = 0.0f;
      for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {
        int ak = t * TILE + threadIdx.x, bk = t * TILE + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < M && ak < K) ? A[row * K + ak] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = (bk < K && col < N) ? B[bk * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) sum += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
      }
      if (row < M && col < N) C[row * N + col] = sum;
    })CUDA";

inline constexpr char kBlockReduce[] = R"CUDA(
    extern "C" __global__ void reduce_sum(const int* in, int n, unsigned long long* total) {
      extern __shared__ int partial[];
      int tid = threadIdx.x;
      int i = blockIdx.x * blockDim.x * 2 + threadIdx.x;
      int sum = 0;
      if (i < n) sum += in[i];
      if (i + blockDim.x < n) sum += in[i + blockDim.x];
      partial[tid] = sum;
      __syncthreads();
      for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) partial[tid] += partial[tid + s];
        __syncthreads();
      }
      if (tid == 0) atomicAdd(total, (unsigned long long)(long long)partial[0]);
    })CUDA";

inline constexpr char kInclusiveScan[] = R"CUDA(
    extern "C" __global__ void inclusive_scan(const float* in, float* out, int n) {
      extern __shared__ float buffer[];
      int tid = threadIdx.x;
      int from = 0, to = 1;
      buffer[tid] = tid < n ? in[tid] : 0.0f;
      __syncthreads();
      for (int offset = 1; offset < n; offset <<= 1) {
        float value = buffer[from * n + tid];
        if (tid >= offset) value += buffer[from * n + tid - offset];
        buffer[to * n + tid] = value;
        __syncthreads();
        from = 1 - from;
        to = 1 - to;
      }
      if (tid < n) out[tid] = buffer[from * n + tid];
    })CUDA";

inline constexpr char kHistogram[] = R"CUDA(
    extern "C" __global__ void histogram(const unsigned char* data, int n, unsigned* bins) {
      __shared__ unsigned local[256];
      for (int b = threadIdx.x; b < 256; b += blockDim.x) local[b] = 0;
      __syncthreads();
      for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(&local[data[i]], 1u);
      __syncthreads();
      for (int b = threadIdx.x; b < 256; b += blockDim.x) atomicAdd(&bins[b], local[b]);
    })CUDA";

inline constexpr char kStencil[] = R"CUDA(
    extern "C" __global__ void stencil(const float* in, float* out, int width, int height,
                                       unsigned long long pitch_bytes) {
      int x = blockIdx.x * blockDim.x + threadIdx.x;
      int y = blockIdx.y * blockDim.y + threadIdx.y;
      if (x < 1 || y < 1 || x >= width - 1 || y >= height - 1) return;
      const float* row = (const float*)((const char*)in + y * pitch_bytes);
      const float* up = (const float*)((const char*)in + (y - 1) * pitch_bytes);
      const float* down = (const float*)((const char*)in + (y + 1) * pitch_bytes);
      float* target = (float*)((char*)out + y * pitch_bytes);
      target[x] = 0.5f * row[x] + 0.125f * (up[x] + down[x] + row[x - 1] + row[x + 1]);
    })CUDA";

// CUDA's atomic overloads: float and double atomicAdd, an int literal converting to
// the unsigned overload, atomicMax.
inline constexpr char kAtomicAccumulate[] = R"CUDA(
    extern "C" __global__ void accumulate(const float* x, int n, float* float_sum,
                                          double* double_sum, unsigned* count, int* last) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) {
        atomicAdd(float_sum, x[i]);
        atomicAdd(double_sum, (double)x[i]);
        atomicAdd(count, 1);
        atomicMax(last, i);
      }
    })CUDA";

// A ring of `limit + 1` slots handed out by atomicInc.
inline constexpr char kRingCounter[] = R"CUDA(
    extern "C" __global__ void ring(unsigned* counter, unsigned limit, unsigned* hits, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) {
        unsigned slot = atomicInc(counter, limit);
        atomicAdd(&hits[slot], 1u);
      }
    })CUDA";

// Doubles n floats four at a time through float4, the tail one at a time.
inline constexpr char kFloat4Copy[] = R"CUDA(
    extern "C" __global__ void double_float4(const float* in, float* out, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      int vectors = n / 4;
      if (i < vectors) {
        float4 v = reinterpret_cast<const float4*>(in)[i];
        reinterpret_cast<float4*>(out)[i] =
            make_float4(v.x * 2.0f, v.y * 2.0f, v.z * 2.0f, v.w * 2.0f);
      }
      if (i < n - vectors * 4) out[vectors * 4 + i] = __ldg(&in[vectors * 4 + i]) * 2.0f;
    })CUDA";

// Integer intrinsics on every element.
inline constexpr char kBitIntrinsics[] = R"CUDA(
    extern "C" __global__ void bits(const unsigned* in, int n, int* counts, unsigned* mixed) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) {
        unsigned v = in[i];
        counts[4 * i + 0] = __popc(v);
        counts[4 * i + 1] = __clz((int)v);
        counts[4 * i + 2] = __ffs((int)v);
        counts[4 * i + 3] = __mul24((int)v, -3);
        mixed[3 * i + 0] = __brev(v);
        mixed[3 * i + 1] = __umul24(v, v >> 8);
        mixed[3 * i + 2] = __umulhi(v, 0x9e3779b9u);
      }
    })CUDA";

// The rest of the atomics, the 64-bit and conversion intrinsics and the vector types, in
// one block of 64 threads whose outputs do not depend on the threads' order.
inline constexpr char kAtomicsAndIntrinsics[] = R"CUDA(
    extern "C" __global__ void mixed(unsigned* dec, unsigned short* cas16, float* exch,
                                     long long* min64, unsigned* masks,
                                     unsigned long long* wide) {
      static_assert(alignof(char2) == 2 && alignof(uchar4) == 4 && alignof(short4) == 8 &&
                        alignof(int2) == 8 && alignof(float2) == 8 && alignof(int4) == 16 &&
                        alignof(longlong2) == 16 && alignof(double2) == 16,
                    "vector types are aligned as CUDA aligns them");
      const int t = threadIdx.x;
      atomicDec(dec, 5u);
      unsigned short seen, old = *cas16;
      do {
        seen = old;
        old = atomicCAS(cas16, seen, (unsigned short)(seen + 1));
      } while (old != seen);
      atomicExch(exch, 2.5f);
      atomicMin(min64, -(long long)t * 1000000000LL);
      atomicOr(&masks[0], 1u << (t % 32));
      atomicAnd(&masks[1], ~(1u << (t % 32)));
      atomicXor(&masks[2], 1u << (t % 32));
      atomicAdd_block(&wide[0], 1ull);
      atomicAdd_system(&wide[1], (unsigned long long)t);
      if (t == 0) {
        wide[2] = __umul64hi(0xffffffffffffffffull, 3ull);
        wide[3] = (unsigned long long)__mul64hi(-1ll, 5ll);
        wide[4] = __popcll(0xf0f0f0f0f0f0f0f0ull) + 100 * __clzll(1ll) +
                  10000 * __ffsll(1ll << 40);
        wide[5] = __brevll(1ull);
        wide[6] = __float_as_uint(__uint_as_float(0x3f800000u)) +
                  (unsigned long long)__double_as_longlong(__longlong_as_double(7ll));
        wide[7] = (unsigned long long)(__fadd_rn(1.5f, 2.0f) * __fmul_rn(2.0f, 4.0f) +
                                       __fmaf_rn(2.0f, 3.0f, 1.0f) + __float2int_rn(2.5f) +
                                       __double2float_rn(0.5));
        char4 c = make_char4(1, 2, 3, 4);
        double2 d = make_double2(1.0, 2.0);
        wide[8] = c.x + c.y + c.z + c.w + (unsigned long long)(d.x + d.y);
      }
    })CUDA";

// Per-warp inclusive scan (__shfl_up_sync) and sum (__shfl_down_sync) over the lanes a
// warp has: blocks of 100 threads end in a warp of 4.
inline constexpr char kWarpScanReduce[] = R"CUDA(
    extern "C" __global__ void warp_scan_reduce(const int* in, int n, int* scan,
                                                int* warp_sums) {
      const int i = blockIdx.x * blockDim.x + threadIdx.x;
      const int lane = threadIdx.x % 32;
      const unsigned lanes = __activemask();
      const int width = __popc(lanes);
      int x = i < n ? in[i] : 0;
      for (int d = 1; d < 32; d <<= 1) {
        int y = __shfl_up_sync(lanes, x, d);
        if (lane >= d) x += y;
      }
      if (i < n) scan[i] = x;
      int sum = i < n ? in[i] : 0;
      for (int d = 16; d > 0; d >>= 1) {
        int y = __shfl_down_sync(lanes, sum, d);
        if (lane + d < width) sum += y;
      }
      const int warps_per_block = (blockDim.x + 31) / 32;
      if (lane == 0) warp_sums[blockIdx.x * warps_per_block + threadIdx.x / 32] = sum;
    })CUDA";

// Stream compaction: each warp votes (__ballot_sync), its first lane reserves room for
// the kept values, and every kept value goes to its place by __popc of the lanes before.
inline constexpr char kBallotCompaction[] = R"CUDA(
    extern "C" __global__ void compact_positive(const int* in, int n, int* out,
                                                unsigned* count) {
      const int i = blockIdx.x * blockDim.x + threadIdx.x;
      const int lane = threadIdx.x % 32;
      const bool keep = i < n && in[i] > 0;
      const unsigned lanes = __activemask();
      const unsigned votes = __ballot_sync(lanes, keep);
      unsigned base = 0;
      if (lane == 0) base = atomicAdd(count, (unsigned)__popc(votes));
      base = __shfl_sync(lanes, base, 0);
      if (keep) out[base + __popc(votes & ((1u << lane) - 1u))] = in[i];
    })CUDA";

// The other warp votes and shuffles, one of them by half of the warp only.
inline constexpr char kWarpVotes[] = R"CUDA(
    extern "C" __global__ void votes(const int* in, unsigned* out) {
      const int t = threadIdx.x;
      const int v = in[t];
      out[6 * t + 0] = __any_sync(0xffffffffu, v > 90);
      out[6 * t + 1] = __all_sync(0xffffffffu, v >= 0);
      out[6 * t + 2] = __match_any_sync(0xffffffffu, v % 4);
      out[6 * t + 3] = __shfl_sync(0xffffffffu, v, 3, 8);
      out[6 * t + 4] = __shfl_xor_sync(0xffffffffu, v, 1);
      __syncwarp();
      out[6 * t + 5] = t % 32 < 16 ? __ballot_sync(0x0000ffffu, v & 1) : 0u;
    })CUDA";

// cooperative_groups: tiles of 16 reduce (sum and maximum) and vote, the block sums its
// tiles' sums after a block-wide sync.
inline constexpr char kTiledReduction[] = R"CUDA(
    #include <cooperative_groups.h>
    #include <cooperative_groups/reduce.h>
    namespace cg = cooperative_groups;

    extern "C" __global__ void tile_reduce(const float* in, int n, float* block_sums,
                                           int* tile_max, unsigned* tile_votes) {
      cg::thread_block block = cg::this_thread_block();
      cg::thread_block_tile<16> tile = cg::tiled_partition<16>(block);
      const int i = blockIdx.x * blockDim.x + threadIdx.x;
      const float v = i < n ? in[i] : 0.0f;
      const float tile_sum = cg::reduce(tile, v, cg::plus<float>());
      const int biggest = cg::reduce(tile, i < n ? (int)(v * 1000.0f) : -1000000,
                                     cg::greater<int>());
      const unsigned positive = tile.ballot(v > 0.0f);
      __shared__ float partial[32];
      if (tile.thread_rank() == 0) partial[tile.meta_group_rank()] = tile_sum;
      cg::sync(block);
      const int tile_index = blockIdx.x * tile.meta_group_size() + tile.meta_group_rank();
      if (tile.thread_rank() == 0) {
        tile_max[tile_index] = biggest;
        tile_votes[tile_index] = positive;
      }
      if (block.thread_rank() == 0) {
        float sum = 0.0f;
        for (unsigned t = 0; t < tile.meta_group_size(); ++t) sum += partial[t];
        block_sums[blockIdx.x] = sum;
      }
    })CUDA";

// Half precision: products of halves (one pair at a time, and two at a time in a
// __half2) summed in float.
inline constexpr char kHalfDot[] = R"CUDA(
    #include <cuda_fp16.h>
    extern "C" __global__ void half_dot(const __half* a, const __half* b, int n, float* dot,
                                        __half* products) {
      const int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (2 * i + 1 < n) {
        const __half2 x = __halves2half2(a[2 * i], a[2 * i + 1]);
        const __half2 y = __halves2half2(b[2 * i], b[2 * i + 1]);
        const __half2 p = __hmul2(x, y);
        products[2 * i] = __low2half(p);
        products[2 * i + 1] = __high2half(p);
        atomicAdd(dot, __low2float(p) + __high2float(p));
      } else if (2 * i < n) {
        const __half p = __hfma(a[2 * i], b[2 * i], __float2half(0.0f));
        products[2 * i] = p;
        atomicAdd(dot, __half2float(p));
      }
    })CUDA";

// Doubles non-negative values; a negative one fails its assertion.
inline constexpr char kAssertingDouble[] = R"CUDA(#include <assert.h>
extern "C" __global__ void checked_double(const int* in, int n, int* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    assert(in[i] >= 0);
    out[i] = 2 * in[i];
  }
})CUDA";

// A trap (`how` 1: __trap(), 2: __brkpt()) in one thread ends the launch; with `how` 0
// each thread doubles its word.
inline constexpr char kTrapping[] = R"CUDA(
extern "C" __global__ void trapping(int how, int* out) {
  if (threadIdx.x == 5 && how == 1) __trap();
  if (threadIdx.x == 5 && how == 2) __brkpt();
  out[threadIdx.x] *= 2;
})CUDA";

// The rest of the group and half-precision API, one block of 64 threads, each writing
// eight words whose values do not depend on the threads' order.
inline constexpr char kGroupAndHalfExtras[] = R"CUDA(
    #include <cooperative_groups.h>
    #include <cooperative_groups/reduce.h>
    #include <cuda_fp16.h>
    namespace cg = cooperative_groups;

    extern "C" __global__ void extras(const int* in, unsigned* out, float* halves) {
      const int t = threadIdx.x;
      const int v = in[t];
      cg::thread_block block = cg::this_thread_block();
      cg::thread_block_tile<8> tile = cg::tiled_partition<8>(block);
      cg::thread_group dynamic = cg::tiled_partition(block, 4);
      int same = 0;
      out[8 * t + 0] = __match_all_sync(0xffffffffu, v / 1000, &same);
      out[8 * t + 1] = same;
      out[8 * t + 2] = tile.any(v > 90) + 2 * tile.all(v >= 0);
      out[8 * t + 3] = tile.shfl_up(v, 2) + 1000 * tile.shfl_down(v, 1);
      out[8 * t + 4] = tile.shfl(v, 7) + 1000 * cg::reduce(tile, v, cg::less<int>());
      out[8 * t + 5] = tile.match_any(v % 2);
      tile.sync();
      dynamic.sync();
      out[8 * t + 6] = dynamic.thread_rank() + 10 * dynamic.size() + 100 * block.size();
      out[8 * t + 7] = block.thread_rank() + 1000 * block.group_index().x;
      const __half a = __float2half(0.25f * (t % 8)), b = __float2half(-1.5f);
      const __half2 pair = __floats2half2_rn(0.5f, 2.0f);
      const float2 scaled = __half22float2(__hfma2(pair, pair, pair));
      halves[8 * t + 0] = __half2float(__hadd(a, b));
      halves[8 * t + 1] = __half2float(__hsub(a, b));
      halves[8 * t + 2] = __half2float(__hdiv(b, __float2half(2.0f)));
      halves[8 * t + 3] = __half2float(__habs(__hneg(b)));
      halves[8 * t + 4] = (__hlt(b, a) ? 1.0f : 0.0f) + (__heq(a, a) ? 2.0f : 0.0f);
      halves[8 * t + 5] = scaled.x + scaled.y;
      halves[8 * t + 6] = __half2float(hsqrt(__float2half(6.25f)));
      halves[8 * t + 7] = __half2float(a * b + a);
    })CUDA";

// __half as real kernels write it: made from floats and ints by conversion, used as a
// float, compound assignment, every comparison, and its bits. One value per thread.
inline constexpr char kHalfConversions[] = R"CUDA(
    #include <cuda_fp16.h>

    extern "C" __global__ void half_conversions(const float* in, float* out, int n) {
      const int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i >= n) return;
      const __half h = in[i];
      __half twice = h;
      twice += h;
      __half acc = 3;
      acc *= twice;
      acc -= h;
      acc /= __half(2.0f);
      const float back = h;
      out[8 * i + 0] = back;
      out[8 * i + 1] = static_cast<float>(twice);
      out[8 * i + 2] = acc;
      out[8 * i + 3] = (h != twice) + 2 * (h <= twice) + 4 * (h >= twice) + 8 * (h == h) +
                       16 * (h < twice) + 32 * (h > twice);
      out[8 * i + 4] = __hmax(h, __float2half(1.0f));
      out[8 * i + 5] = __half_as_ushort(h);
      out[8 * i + 6] = __ushort_as_half(__half_as_ushort(-h));
      out[8 * i + 7] = __hisnan(h) + 2 * (__hisinf(twice) != 0);
    })CUDA";

// Prints one line per block, from its first thread.
inline constexpr char kPrintingKernel[] = R"CUDA(#include <stdio.h>
extern "C" __global__ void report(const int* in, int n) {
  if (threadIdx.x == 0 && blockIdx.x * blockDim.x < n) {
    printf("block %d starts with %d\n", (int)blockIdx.x, in[blockIdx.x * blockDim.x]);
  }
})CUDA";

// The rest of the rounding intrinsics and the memory fences, from one thread.
inline constexpr char kRoundingAndFences[] = R"CUDA(
    extern "C" __global__ void rounding(float* out) {
      out[0] = __fsub_rn(5.5f, 2.0f);
      out[1] = __fdiv_rn(7.0f, 2.0f);
      out[2] = __frcp_rn(4.0f);
      out[3] = __fsqrt_rn(6.25f);
      out[4] = (float)__dadd_rn(1.25, 2.0);
      out[5] = (float)__dmul_rn(1.5, 3.0);
      out[6] = (float)__fma_rn(2.0, 3.0, 0.5);
      out[7] = (float)__float2int_rz(-2.7f);
      out[8] = (float)__float2uint_rn(2.5f);
      out[9] = __int2float_rn(7);
      out[11] = (float)__mulhi(-262144, 196608);
      __threadfence();
      __threadfence_block();
      __threadfence_system();
      out[10] = 1.0f;
    })CUDA";

// (entry point, source) of every kernel above.
// Sorts each block's chunk of `keys` ascending, bitonically, in dynamic shared memory
// (blockDim.x a power of two; the chunk padded with the largest key past `n`). Written
// as kernels in the wild are: a typedef'd parameter, a default argument, launch bounds,
// the shared array declared at file scope and reached through a cast, and its name
// reused for something else after the kernel.
inline constexpr char kBitonicSort[] = R"CUDA(
    typedef unsigned int uint;
    // extern __shared__ int keys_in_a_comment[];  (not a declaration)
    extern __shared__ uint sorted[];

    __device__ void exchange(uint* a, uint* b, bool ascending) {
      if ((*a > *b) == ascending) {
        uint t = *a;
        *a = *b;
        *b = t;
      }
    }

    extern "C" __global__ void __launch_bounds__(1024)
    bitonic_sort(uint* keys, const uint n, int descending = 0) {
      uint* chunk = (uint*)sorted;
      const uint base = blockIdx.x * blockDim.x;
      const uint t = threadIdx.x;
      chunk[t] = base + t < n ? keys[base + t] : 0xffffffffu;
      __syncthreads();
      for (uint size = 2; size <= blockDim.x; size <<= 1) {
        for (uint stride = size >> 1; stride > 0; stride >>= 1) {
          const uint partner = t ^ stride;
          if (partner > t) exchange(&chunk[t], &chunk[partner], ((t & size) == 0) != descending);
          __syncthreads();
        }
      }
      if (base + t < n) keys[base + t] = sorted[t];
    }

    struct Unrelated { int sorted; };
    __device__ int unrelated_use(Unrelated u) { return u.sorted; }
    )CUDA";

// Counts, per block, the threads whose value is positive (__syncthreads_count) and
// whether any or all are (__syncthreads_or/_and); the block's shared arrays declared
// `extern T __shared__` inside the kernel.
inline constexpr char kBlockVotes[] = R"CUDA(
    extern "C" __launch_bounds__(256) __global__ void block_votes(const int* in, int n,
                                                                  int* counts) {
      extern int __shared__ seen[];
      const int i = blockIdx.x * blockDim.x + threadIdx.x;
      const int positive = i < n && in[i] > 0;
      seen[threadIdx.x] = positive;
      const int count = __syncthreads_count(positive);
      const int any = __syncthreads_or(positive);
      const int all = __syncthreads_and(positive);
      if (threadIdx.x == 0) {
        int recount = 0;
        for (int t = 0; t < blockDim.x; ++t) recount += seen[t];
        counts[4 * blockIdx.x] = count;
        counts[4 * blockIdx.x + 1] = any;
        counts[4 * blockIdx.x + 2] = all;
        counts[4 * blockIdx.x + 3] = recount;
      }
    })CUDA";

// y = a x + y in bfloat16, each result rounded to the nearest bfloat16.
inline constexpr char kBfloat16Axpy[] = R"CUDA(
    #include <cuda_bf16.h>
    extern "C" __global__ void bf16_axpy(int n, float a, const __nv_bfloat16* x,
                                         __nv_bfloat16* y) {
      const int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) y[i] = __float2bfloat16(a * __bfloat162float(x[i]) + __bfloat162float(y[i]));
    })CUDA";

// The math library beyond C's: per element, sincosf, sinpif/cospif, rnorm3df, rhypotf,
// normcdff and the fast __tanf, after a short __nanosleep.
inline constexpr char kMathExtras[] = R"CUDA(
    extern "C" __global__ void math_extras(const float* in, int n, float* out) {
      const int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i >= n) return;
      __nanosleep(100);
      const float x = in[i];
      float s, c;
      sincosf(x, &s, &c);
      out[7 * i] = s;
      out[7 * i + 1] = c;
      out[7 * i + 2] = sinpif(x);
      out[7 * i + 3] = cospif(x);
      out[7 * i + 4] = rnorm3df(x, 2.0f, 3.0f);
      out[7 * i + 5] = rhypotf(x, 1.5f) + normcdff(x);
      out[7 * i + 6] = __tanf(x * 0.25f);
    })CUDA";

// Per-warp sums of ints and of floats through one __device__ template, whose shuffle's
// overload depends on its type parameter. Blocks of whole warps.
inline constexpr char kTemplatedWarpSums[] = R"CUDA(
    template <typename T>
    __device__ T warp_sum(T value) {
      for (int lane_mask = 16; lane_mask > 0; lane_mask /= 2) {
        value += __shfl_xor_sync(0xffffffffu, value, lane_mask);
      }
      return value;
    }
    extern "C" __global__ void warp_sums(const int* in, int* int_sums, float* float_sums) {
      const int i = blockIdx.x * blockDim.x + threadIdx.x;
      const int int_sum = warp_sum(in[i]);
      const float float_sum = warp_sum(static_cast<float>(in[i]) * 0.5f);
      if (threadIdx.x % 32 == 0) {
        int_sums[i / 32] = int_sum;
        float_sums[i / 32] = float_sum;
      }
    })CUDA";

// CUDA's integer and special-function intrinsics beyond the common ones, warp
// reductions, cache-hinted loads and stores, a built-in index as a dim3, and element-wise
// vector atomics (a float2, and a float4 after it): one warp, lane 0 writing most results. `in` =
// {1.0f, 3.0f, 2.0f, 0.5f}, `din` = {1.0, 3.0, 2.0, 0.5}.
inline constexpr char kMoreIntrinsics[] = R"CUDA(
extern "C" __global__ void more_intrinsics(const float* in, const double* din, unsigned* u,
                                           float* f, double* d, float2* sum) {
  const unsigned lane = threadIdx.x;
  const int value = static_cast<int>(lane) * 3 - 40;
  const int add = __reduce_add_sync(0xffffffffu, value);
  const int low = __reduce_min_sync(0xffffffffu, value);
  const int high = __reduce_max_sync(0xffffffffu, value);
  const unsigned half_or = lane < 16 ? __reduce_or_sync(0x0000ffffu, 1u << lane) : 0u;
  const unsigned all_xor = __reduce_xor_sync(0xffffffffu, lane);
  const unsigned all_and = __reduce_and_sync(0xffffffffu, lane | 0x100u);
  const unsigned add_unsigned = __reduce_add_sync(0xffffffffu, lane);
  atomicAdd(sum, make_float2(1.0f, 2.0f));
  atomicAdd(reinterpret_cast<float4*>(sum + 2), make_float4(1.0f, 2.0f, 3.0f, 4.0f));
  if (lane != 0) return;
  const dim3 block = blockDim;
  unsigned* o = u;
  *o++ = __byte_perm(0x33221100u, 0x77665544u, 0x5410u);
  *o++ = __funnelshift_l(0x89abcdefu, 0x01234567u, 8);
  *o++ = __funnelshift_l(0x89abcdefu, 0x01234567u, 40);
  *o++ = __funnelshift_lc(0x89abcdefu, 0x01234567u, 40);
  *o++ = __funnelshift_r(0x89abcdefu, 0x01234567u, 8);
  *o++ = __funnelshift_rc(0x89abcdefu, 0x01234567u, 40);
  *o++ = __sad(-5, 7, 3u);
  *o++ = __usad(2u, 9u, 1u);
  *o++ = __hadd(-7, 2);
  *o++ = __rhadd(-7, 2);
  *o++ = __uhadd(0xffffffffu, 1u);
  *o++ = __urhadd(0xffffffffu, 2u);
  *o++ = __dp4a(0x01ff0280, 0x03020104, 10);
  *o++ = __dp4a(0x01ff0280u, 0x03020104u, 10u);
  *o++ = __dp2a_lo(static_cast<int>(0xfffe0003u), 0x0702ff05, 1);
  *o++ = __dp2a_hi(static_cast<int>(0xfffe0003u), 0x0702ff05, 1);
  *o++ = __double2hiint(din[0]);
  *o++ = __double2loint(din[0]);
  *o++ = add;
  *o++ = low;
  *o++ = high;
  *o++ = half_or;
  *o++ = all_xor;
  *o++ = all_and;
  *o++ = add_unsigned;
  *o++ = threadIdx.x + 100 * block.x;
  *o++ = umin(3u, 9u) + umax(3u, 9u);
  *o++ = static_cast<unsigned>(llmin(-5ll, 3ll) + llmax(-5ll, 3ll) + 10);
  *o++ = static_cast<unsigned>(ullmin(5ull, 7ull) + ullmax(5ull, 7ull));
  *o++ = __float_as_uint(__ldcs(in + 1) + __ldcg(in + 2) + __ldca(in) + __ldlu(in) + __ldcv(in));
  float* g = f;
  *g++ = __frsqrt_rn(in[3] * 8.0f);
  *g++ = erfinvf(0.5f);
  *g++ = erfcinvf(0.1f);
  *g++ = normcdfinvf(0.975f);
  *g++ = erfcxf(30.0f);
  *g++ = cyl_bessel_i0f(in[0]);
  *g++ = cyl_bessel_i1f(-in[0]);
  __stcs(g++, in[1]);
  __stwt(g++, in[2]);
  __stwb(g++, in[3]);
  __stcg(g++, in[0]);
  double* e = d;
  *e++ = __hiloint2double(0x40000000, 0);
  *e++ = erfinv(-0.999999);
  *e++ = erfcinv(1e-300);
  *e++ = normcdfinv(0.5);
  *e++ = erfcx(1.0);
  *e++ = cyl_bessel_i0(din[2]);
  *e++ = cyl_bessel_i1(din[2]);
})CUDA";

// What NVRTC and the CPU driver build and hiprtc (HIP 5.2) lacks: arithmetic and
// conversions in each of CUDA's rounding modes, and a built-in index as a uint3. Inputs
// as kMoreIntrinsics'.
inline constexpr char kDirectedRoundings[] = R"CUDA(
extern "C" __global__ void directed_roundings(const float* in, const double* din, unsigned* u,
                                              float* f, double* d) {
  const uint3 index = threadIdx;
  unsigned* o = u;
  *o++ = __float2int_rd(-1.5f);
  *o++ = __float2int_ru(-1.5f);
  *o++ = __float2int_rn(2.5f);
  *o++ = __float2int_rz(-2.7f);
  *o++ = __float2uint_rz(-3.0f);
  *o++ = __float2int_rn(3e9f);
  *o++ = __double2int_rd(-0.5);
  *o++ = __double2uint_ru(4294967296.0);
  *o++ = static_cast<unsigned>(__double2ll_rz(-1e30) >> 32);
  *o++ = static_cast<unsigned>(__double2ull_rn(2.5));
  *o++ = static_cast<unsigned>(__float2ll_ru(1e10f) / 1000);
  *o++ = index.x + 7;
  float* g = f;
  *g++ = __fadd_rz(in[0], 1e-8f);
  *g++ = __fadd_ru(in[0], 1e-8f);
  *g++ = __fadd_rd(-in[0], -1e-8f);
  *g++ = __fsub_ru(in[0], 1e-8f);
  *g++ = __fmul_rd(in[1], 1.0f / 3.0f);
  *g++ = __fdiv_rz(in[0], in[1]);
  *g++ = __fdiv_ru(in[0], in[1]);
  *g++ = __fsqrt_rd(in[2]);
  *g++ = __fsqrt_ru(in[2]);
  *g++ = __frcp_rz(in[1]);
  *g++ = __frcp_ru(in[1]);
  *g++ = __fmaf_ru(in[0], in[0], 1e-10f);
  *g++ = __fmaf_rd(in[0], in[0], 1e-10f);
  *g++ = __int2float_rz(16777217);
  *g++ = __int2float_ru(16777217);
  *g++ = __uint2float_rd(0xffffffffu);
  *g++ = __uint2float_rn(0xffffffffu);
  *g++ = __double2float_rz(din[0] / din[1]);
  *g++ = __double2float_ru(din[0] / din[1]);
  double* e = d;
  *e++ = __dadd_ru(din[0], 1e-20);
  *e++ = __dsub_rd(din[0], 1e-20);
  *e++ = __ddiv_rd(din[0], din[1]);
  *e++ = __ddiv_ru(din[0], din[1]);
  *e++ = __dmul_rz(din[1], 1.0 / 3.0);
  *e++ = __dsqrt_rd(din[2]);
  *e++ = __dsqrt_ru(din[2]);
  *e++ = __drcp_rn(din[1]);
  *e++ = __fma_ru(din[0], din[0], 1e-30);
  *e++ = __ll2double_rd((1ll << 53) + 1);
  *e++ = __ll2double_ru((1ll << 53) + 1);
})CUDA";

// Scans over tiles of 16 (cooperative_groups/scan.h) and reductions by the bit
// operations: per tile, bits[3 t .. 3 t + 2] = the AND, OR and XOR of its values.
inline constexpr char kTileScans[] = R"CUDA(
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cooperative_groups/scan.h>
namespace cg = cooperative_groups;
extern "C" __global__ void tile_scans(const int* in, int* inclusive, int* exclusive,
                                      int* maxima, unsigned* bits) {
  const cg::thread_block_tile<16> tile = cg::tiled_partition<16>(cg::this_thread_block());
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  inclusive[i] = cg::inclusive_scan(tile, in[i]);
  exclusive[i] = cg::exclusive_scan(tile, in[i]);
  maxima[i] = cg::inclusive_scan(tile, in[i], cg::greater<int>());
  const unsigned v = static_cast<unsigned>(in[i]);
  const unsigned all = cg::reduce(tile, v, cg::bit_and<unsigned>());
  const unsigned any = cg::reduce(tile, v, cg::bit_or<unsigned>());
  const unsigned odd = cg::reduce(tile, v, cg::bit_xor<unsigned>());
  if (tile.thread_rank() == 0) {
    bits[3 * (i / 16)] = all;
    bits[3 * (i / 16) + 1] = any;
    bits[3 * (i / 16) + 2] = odd;
  }
})CUDA";

// <math_constants.h>: every CUDART_ constant the drivers share, f[i] the float ones and
// d[i] the double ones in the order of kFloatConstantBits and kDoubleConstantBits.
inline constexpr char kMathConstants[] = R"CUDA(
#include <math_constants.h>
extern "C" __global__ void math_constants(float* f, double* d) {
  f[0] = CUDART_INF_F; f[1] = CUDART_NAN_F; f[2] = CUDART_MIN_DENORM_F;
  f[3] = CUDART_MAX_NORMAL_F; f[4] = CUDART_NEG_ZERO_F; f[5] = CUDART_ZERO_F;
  f[6] = CUDART_ONE_F; f[7] = CUDART_SQRT_HALF_F; f[8] = CUDART_SQRT_TWO_F;
  f[9] = CUDART_THIRD_F; f[10] = CUDART_PIO4_F; f[11] = CUDART_PIO2_F; f[12] = CUDART_3PIO4_F;
  f[13] = CUDART_2_OVER_PI_F; f[14] = CUDART_SQRT_2_OVER_PI_F; f[15] = CUDART_PI_F;
  f[16] = CUDART_L2E_F; f[17] = CUDART_L2T_F; f[18] = CUDART_LG2_F; f[19] = CUDART_LGE_F;
  f[20] = CUDART_LN2_F; f[21] = CUDART_LNT_F; f[22] = CUDART_LNPI_F;
  f[23] = CUDART_TWO_TO_M126_F; f[24] = CUDART_TWO_TO_126_F; f[25] = CUDART_NORM_HUGE_F;
  f[26] = CUDART_TWO_TO_23_F; f[27] = CUDART_TWO_TO_24_F; f[28] = CUDART_TWO_TO_31_F;
  f[29] = CUDART_TWO_TO_32_F;
  d[0] = CUDART_INF; d[1] = CUDART_NAN; d[2] = CUDART_NEG_ZERO; d[3] = CUDART_MIN_DENORM;
  d[4] = CUDART_ZERO; d[5] = CUDART_ONE; d[6] = CUDART_SQRT_TWO; d[7] = CUDART_SQRT_HALF;
  d[8] = CUDART_THIRD; d[9] = CUDART_TWOTHIRD; d[10] = CUDART_PIO4; d[11] = CUDART_PIO2;
  d[12] = CUDART_3PIO4; d[13] = CUDART_2_OVER_PI; d[14] = CUDART_PI; d[15] = CUDART_SQRT_2PI;
  d[16] = CUDART_SQRT_PIO2; d[17] = CUDART_SQRT_2OPI; d[18] = CUDART_L2E; d[19] = CUDART_L2T;
  d[20] = CUDART_LG2; d[21] = CUDART_LGE; d[22] = CUDART_LN2; d[23] = CUDART_LNT;
  d[24] = CUDART_LNPI; d[25] = CUDART_TWO_TO_23; d[26] = CUDART_TWO_TO_52;
  d[27] = CUDART_TWO_TO_53; d[28] = CUDART_TWO_TO_54; d[29] = CUDART_TWO_TO_M54;
  d[30] = CUDART_TWO_TO_M1022;
})CUDA";

// The bits of those constants in CUDA's <math_constants.h>, in kMathConstants' order.
inline constexpr uint32_t kFloatConstantBits[] = {
    0x7f800000u, 0x7fffffffu, 0x1u,        0x7f7fffffu, 0x80000000u, 0x0u,
    0x3f800000u, 0x3f3504f3u, 0x3fb504f3u, 0x3eaaaaabu, 0x3f490fdbu, 0x3fc90fdbu,
    0x4016cbe4u, 0x3f22f983u, 0x3f4c422au, 0x40490fdbu, 0x3fb8aa3bu, 0x40549a78u,
    0x3e9a209bu, 0x3ede5bd9u, 0x3f317218u, 0x40135d8eu, 0x3f928682u, 0x800000u,
    0x7e800000u, 0x7f7fffffu, 0x4b000000u, 0x4b800000u, 0x4f000000u, 0x4f800000u,
};
inline constexpr uint64_t kDoubleConstantBits[] = {
    0x7ff0000000000000ull,
    0xfff8000000000000ull,
    0x8000000000000000ull,
    0x1ull,
    0x0ull,
    0x3ff0000000000000ull,
    0x3ff6a09e667f3bcdull,
    0x3fe6a09e667f3bcdull,
    0x3fd5555555555555ull,
    0x3fe5555555555555ull,
    0x3fe921fb54442d18ull,
    0x3ff921fb54442d18ull,
    0x4002d97c7f3321d2ull,
    0x3fe45f306dc9c883ull,
    0x400921fb54442d18ull,
    0x40040d931ff62706ull,
    0x3ff40d931ff62706ull,
    0x3fe9884533d43651ull,
    0x3ff71547652b82feull,
    0x400a934f0979a371ull,
    0x3fd34413509f79ffull,
    0x3fdbcb7b1526e50eull,
    0x3fe62e42fefa39efull,
    0x40026bb1bbb55516ull,
    0x3ff250d048e7a1bdull,
    0x4160000000000000ull,
    0x4330000000000000ull,
    0x4340000000000000ull,
    0x4350000000000000ull,
    0x3c90000000000000ull,
    0x10000000000000ull,
};

// cooperative_groups/memcpy_async.h: each block of 64 stages its values in shared memory
// with one group copy and writes them reversed; each tile of 16 then copies the first 12
// of its values over -1s (the datum form, min of the two counts).
inline constexpr char kGroupCopies[] = R"CUDA(
#include <cooperative_groups.h>
#include <cooperative_groups/memcpy_async.h>
namespace cg = cooperative_groups;
extern "C" __global__ void group_copies(const int* in, int* reversed, int* tiles) {
  __shared__ int staged[64];
  __shared__ int parts[64];
  const cg::thread_block block = cg::this_thread_block();
  const int* mine = in + blockIdx.x * 64;
  parts[threadIdx.x] = -1;
  cg::memcpy_async(block, staged, mine, sizeof(int) * 64);
  cg::wait(block);
  reversed[blockIdx.x * 64 + threadIdx.x] = staged[63 - threadIdx.x];
  const cg::thread_block_tile<16> tile = cg::tiled_partition<16>(block);
  const unsigned first = tile.meta_group_rank() * 16;
  cg::memcpy_async(tile, parts + first, 16, mine + first, 12);
  cg::wait_prior<0>(tile);
  tiles[blockIdx.x * 64 + threadIdx.x] = parts[threadIdx.x];
})CUDA";

// Half and bfloat16 math, h<name> and h2<name> as CUDA names them: thread t applies the
// t-th function of sqrt, rsqrt, rcp, exp, exp2, exp10, log, log2, log10, sin, cos,
// floor, ceil, trunc and rint to in[t] (an input whose result each type holds exactly);
// out[4 t ..] = the __half, the __half2's high half, the __nv_bfloat16, the
// __nv_bfloat162's high half.
inline constexpr char kHalfMath[] = R"CUDA(
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void half_math(const float* in, float* out) {
  const unsigned t = threadIdx.x;
  const __half x = __float2half(in[t]);
  const __half2 x2 = __halves2half2(x, x);
  const __nv_bfloat16 y = __float2bfloat16(in[t]);
  const __nv_bfloat162 y2 = __halves2bfloat162(y, y);
#define CASE(i, name)                                  \
  case i:                                              \
    out[4 * t] = __half2float(h##name(x));             \
    out[4 * t + 1] = __high2float(h2##name(x2));       \
    out[4 * t + 2] = __bfloat162float(h##name(y));     \
    out[4 * t + 3] = __high2float(h2##name(y2));       \
    break;
  switch (t) {
    CASE(0, sqrt) CASE(1, rsqrt) CASE(2, rcp) CASE(3, exp) CASE(4, exp2) CASE(5, exp10)
    CASE(6, log) CASE(7, log2) CASE(8, log10) CASE(9, sin) CASE(10, cos) CASE(11, floor)
    CASE(12, ceil) CASE(13, trunc) CASE(14, rint)
  }
#undef CASE
})CUDA";

// cooperative_groups::this_grid(): a grid-stride loop sets out[i] = 2 i for i < n, and
// shape = {size, num_blocks, is_valid, dim_threads().x, the last thread's block_rank};
// with sync_grid, grid.sync() first, which needs a cooperative launch.
inline constexpr char kGridStride[] = R"CUDA(
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void grid_stride(int sync_grid, int n, int* out,
                                       unsigned long long* shape) {
  const cg::grid_group grid = cg::this_grid();
  if (sync_grid != 0) grid.sync();
  for (unsigned long long i = grid.thread_rank(); i < n; i += grid.size()) {
    out[i] = 2 * static_cast<int>(i);
  }
  if (grid.thread_rank() == 0) {
    shape[0] = grid.size();
    shape[1] = grid.num_blocks();
    shape[2] = grid.is_valid();
    shape[3] = grid.dim_threads().x;
  }
  if (grid.thread_index().x == grid.dim_threads().x - 1) shape[4] = grid.block_rank();
})CUDA";

// __fns: out[t] = the position of the offsets[t]-th set bit of masks[t] from bases[t].
inline constexpr char kFindNthSet[] = R"CUDA(
extern "C" __global__ void find_nth_set(const unsigned* masks, const unsigned* bases,
                                        const int* offsets, unsigned* out) {
  out[threadIdx.x] = __fns(masks[threadIdx.x], bases[threadIdx.x], offsets[threadIdx.x]);
})CUDA";

// CUDA's SIMD intrinsics: for each pair (a[t], b[t]), out[t * 82 + k] is the k-th
// intrinsic, in the order listed, of a[t] (those of one argument) or of a[t] and b[t].
inline constexpr char kSimdIntrinsics[] = R"CUDA(
#define UNARY(f) *o++ = f(x);
#define BINARY(f) *o++ = f(x, y);
extern "C" __global__ void simd_intrinsics(const unsigned* a, const unsigned* b, unsigned* out) {
  const unsigned x = a[threadIdx.x], y = b[threadIdx.x];
  unsigned* o = out + threadIdx.x * 82;
  UNARY(__vabs2) UNARY(__vabs4) UNARY(__vabsss2) UNARY(__vabsss4)
  UNARY(__vneg2) UNARY(__vneg4) UNARY(__vnegss2) UNARY(__vnegss4)
  BINARY(__vadd2) BINARY(__vadd4) BINARY(__vaddss2) BINARY(__vaddss4)
  BINARY(__vaddus2) BINARY(__vaddus4) BINARY(__vsub2) BINARY(__vsub4)
  BINARY(__vsubss2) BINARY(__vsubss4) BINARY(__vsubus2) BINARY(__vsubus4)
  BINARY(__vabsdiffs2) BINARY(__vabsdiffs4) BINARY(__vabsdiffu2) BINARY(__vabsdiffu4)
  BINARY(__vavgs2) BINARY(__vavgs4) BINARY(__vavgu2) BINARY(__vavgu4)
  BINARY(__vhaddu2) BINARY(__vhaddu4) BINARY(__vmaxs2) BINARY(__vmaxs4)
  BINARY(__vmaxu2) BINARY(__vmaxu4) BINARY(__vmins2) BINARY(__vmins4)
  BINARY(__vminu2) BINARY(__vminu4) BINARY(__vsads2) BINARY(__vsads4)
  BINARY(__vsadu2) BINARY(__vsadu4)
  BINARY(__vcmpeq2) BINARY(__vcmpeq4) BINARY(__vseteq2) BINARY(__vseteq4)
  BINARY(__vcmpne2) BINARY(__vcmpne4) BINARY(__vsetne2) BINARY(__vsetne4)
  BINARY(__vcmpges2) BINARY(__vcmpges4) BINARY(__vsetges2) BINARY(__vsetges4)
  BINARY(__vcmpgeu2) BINARY(__vcmpgeu4) BINARY(__vsetgeu2) BINARY(__vsetgeu4)
  BINARY(__vcmpgts2) BINARY(__vcmpgts4) BINARY(__vsetgts2) BINARY(__vsetgts4)
  BINARY(__vcmpgtu2) BINARY(__vcmpgtu4) BINARY(__vsetgtu2) BINARY(__vsetgtu4)
  BINARY(__vcmples2) BINARY(__vcmples4) BINARY(__vsetles2) BINARY(__vsetles4)
  BINARY(__vcmpleu2) BINARY(__vcmpleu4) BINARY(__vsetleu2) BINARY(__vsetleu4)
  BINARY(__vcmplts2) BINARY(__vcmplts4) BINARY(__vsetlts2) BINARY(__vsetlts4)
  BINARY(__vcmpltu2) BINARY(__vcmpltu4) BINARY(__vsetltu2) BINARY(__vsetltu4)
})CUDA";

// Hopper's DPX intrinsics: for each triple (a[t], b[t], c[t]), out[t * 44 + k] is the
// k-th result in the order listed; each __vibmax/__vibmin result is followed by its
// predicates (for halves, the high one's times 2 plus the low one's).
inline constexpr char kDpxIntrinsics[] = R"CUDA(
#define THREE(f) *o++ = f(x, y, z);
#define TWO(f) *o++ = f(x, y);
#define PICK(f) { bool p; *o++ = f(x, y, &p); *o++ = p; }
#define PICK_HALVES(f) { bool high, low; *o++ = f(x, y, &high, &low); *o++ = high * 2 + low; }
#define ALL_SIX(f) THREE(f##_s32) THREE(f##_u32) THREE(f##_s16x2) THREE(f##_u16x2) \
                   THREE(f##_s32_relu) THREE(f##_s16x2_relu)
extern "C" __global__ void dpx_intrinsics(const unsigned* a, const unsigned* b,
                                          const unsigned* c, unsigned* out) {
  const unsigned x = a[threadIdx.x], y = b[threadIdx.x], z = c[threadIdx.x];
  unsigned* o = out + threadIdx.x * 44;
  ALL_SIX(__vimax3) ALL_SIX(__vimin3) ALL_SIX(__viaddmax) ALL_SIX(__viaddmin)
  TWO(__vimax_s32_relu) TWO(__vimax_s16x2_relu) TWO(__vimin_s32_relu) TWO(__vimin_s16x2_relu)
  PICK(__vibmax_s32) PICK(__vibmax_u32) PICK(__vibmin_s32) PICK(__vibmin_u32)
  PICK_HALVES(__vibmax_s16x2) PICK_HALVES(__vibmax_u16x2)
  PICK_HALVES(__vibmin_s16x2) PICK_HALVES(__vibmin_u16x2)
})CUDA";

// CUB's collectives over blocks of 128 threads, each thread with one item x and four
// x..x+3: per thread (out[i * 17 + k]) the block's exclusive sum of x and its aggregate,
// inclusive max scan, exclusive sum of the four items, a 16-lane warp's inclusive sum,
// its aggregate, lane 3's x, an exclusive max scan from -1000, the warp's exclusive sum,
// inclusive max scan from 50 and exclusive max scan, the inclusive sum of the four items
// (the last one's), their exclusive max scan from -1000 (the first one's), and the
// aggregate of an inclusive max scan; per block (block_out[b * 10 + k]) the sum, the
// max, the first 100 threads' sum, each 32-lane warp's sum, warp 0's first 10 lanes'
// sum, and the sum and max of all the four items.
inline constexpr char kCubCollectives[] = R"CUDA(
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/warp/warp_reduce.cuh>
#include <cub/warp/warp_scan.cuh>
struct Larger {
  __device__ int operator()(int a, int b) const { return a < b ? b : a; }
};
extern "C" __global__ void cub_collectives(const int* in, int* out, int* block_out) {
  using BlockReduce = cub::BlockReduce<int, 128>;
  using BlockScan = cub::BlockScan<int, 128>;
  using WarpReduce = cub::WarpReduce<int>;
  using HalfWarpScan = cub::WarpScan<int, 16>;
  __shared__ typename BlockReduce::TempStorage reduce_storage;
  __shared__ typename BlockScan::TempStorage scan_storage;
  __shared__ typename WarpReduce::TempStorage warp_reduce_storage[4];
  __shared__ typename HalfWarpScan::TempStorage warp_scan_storage[8];
  const int t = threadIdx.x, i = blockIdx.x * 128 + t;
  const int x = in[i];
  int* o = out + i * 17;
  int* b = block_out + blockIdx.x * 10;
  const int sum = BlockReduce().Sum(x);  // its own TempStorage
  __syncthreads();
  const int largest = BlockReduce(reduce_storage).Reduce(x, Larger());
  __syncthreads();
  const int first_100 = BlockReduce(reduce_storage).Sum(x, 100);
  __syncthreads();
  int items[4] = {x, x + 1, x + 2, x + 3};
  const int items_sum = BlockReduce(reduce_storage).Sum(items);
  __syncthreads();
  const int items_largest = BlockReduce(reduce_storage).Reduce(items, Larger());
  if (t == 0) {
    b[0] = sum;
    b[1] = largest;
    b[2] = first_100;
    b[8] = items_sum;
    b[9] = items_largest;
  }
  BlockScan(scan_storage).ExclusiveSum(x, o[0], o[1]);
  __syncthreads();
  BlockScan(scan_storage).InclusiveScan(x, o[2], Larger());
  __syncthreads();
  BlockScan(scan_storage).ExclusiveSum(items, items);
  for (int k = 0; k < 4; ++k) o[3 + k] = items[k];
  __syncthreads();
  BlockScan(scan_storage).ExclusiveScan(x, o[10], -1000, Larger());
  __syncthreads();
  int more[4] = {x, x + 1, x + 2, x + 3};
  BlockScan(scan_storage).InclusiveSum(more, more);
  o[14] = more[3];
  __syncthreads();
  int again[4] = {x, x + 1, x + 2, x + 3};
  BlockScan(scan_storage).ExclusiveScan(again, again, -1000, Larger());
  o[15] = again[0];
  __syncthreads();
  int ignored;
  BlockScan().InclusiveScan(x, ignored, Larger(), o[16]);  // its own TempStorage
  const int warp_sum = WarpReduce(warp_reduce_storage[t / 32]).Sum(x);
  __syncwarp();
  const int warp_first_10 = WarpReduce(warp_reduce_storage[t / 32]).Sum(x, 10);
  if (t % 32 == 0) b[3 + t / 32] = warp_sum;
  if (t == 0) b[7] = warp_first_10;
  HalfWarpScan(warp_scan_storage[t / 16]).InclusiveSum(x, o[7], o[8]);
  __syncwarp();
  o[9] = HalfWarpScan(warp_scan_storage[t / 16]).Broadcast(x, 3);
  __syncwarp();
  HalfWarpScan(warp_scan_storage[t / 16]).ExclusiveSum(x, o[11]);
  __syncwarp();
  HalfWarpScan(warp_scan_storage[t / 16]).InclusiveScan(x, o[12], 50, Larger());
  __syncwarp();
  HalfWarpScan(warp_scan_storage[t / 16]).ExclusiveScan(x, o[13], Larger());
})CUDA";

// CUB's tile loads, stores and radix sorts over blocks of 64 threads with 4 items each (a
// tile of 256 per block): int keys sorted with their positions in the tile as values,
// floats sorted descending, the keys sorted by their low 4 bits only, and the keys sorted
// into a striped arrangement; every output written in tile order.
inline constexpr char kCubSorts[] = R"CUDA(
#include <cub/block/block_load.cuh>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_store.cuh>
extern "C" __global__ void cub_sorts(const int* keys_in, const float* floats_in,
                                     int* sorted_keys, int* sorted_positions,
                                     float* sorted_floats, int* low_bits_sorted,
                                     int* striped_keys) {
  using Load = cub::BlockLoad<int, 64, 4, cub::BLOCK_LOAD_TRANSPOSE>;
  using LoadStriped = cub::BlockLoad<float, 64, 4, cub::BLOCK_LOAD_STRIPED>;
  using Sort = cub::BlockRadixSort<int, 64, 4, int>;
  using SortKeys = cub::BlockRadixSort<int, 64, 4>;
  using SortFloats = cub::BlockRadixSort<float, 64, 4>;
  using Store = cub::BlockStore<int, 64, 4, cub::BLOCK_STORE_WARP_TRANSPOSE>;
  using StoreStriped = cub::BlockStore<int, 64, 4, cub::BLOCK_STORE_STRIPED>;
  __shared__ typename Load::TempStorage load_storage;
  __shared__ typename Sort::TempStorage sort_storage;
  __shared__ typename SortKeys::TempStorage keys_storage;
  __shared__ typename Store::TempStorage store_storage;
  const int tile = blockIdx.x * 256;
  int keys[4], positions[4];
  Load(load_storage).Load(keys_in + tile, keys);
  for (int i = 0; i < 4; ++i) positions[i] = threadIdx.x * 4 + i;
  __syncthreads();
  Sort(sort_storage).Sort(keys, positions);
  __syncthreads();
  Store(store_storage).Store(sorted_keys + tile, keys);
  __syncthreads();
  Store(store_storage).Store(sorted_positions + tile, positions);
  float floats[4];
  LoadStriped().Load(floats_in + tile, floats);
  SortFloats().SortDescending(floats);
  cub::StoreDirectBlocked(threadIdx.x, sorted_floats + tile, floats);
  int low[4];
  cub::LoadDirectBlocked(threadIdx.x, keys_in + tile, low);
  SortKeys(keys_storage).Sort(low, 0, 4);
  cub::StoreDirectBlocked(threadIdx.x, low_bits_sorted + tile, low);
  int striped[4];
  __syncthreads();
  Load(load_storage).Load(keys_in + tile, striped);
  __syncthreads();
  SortKeys(keys_storage).SortBlockedToStriped(striped);
  StoreStriped().Store(striped_keys + tile, striped);
})CUDA";

// CUB's exchanges, histogram and discontinuity flags over one block of 64 threads with 4
// items each (thread t's are in[4t..4t+3]); per thread, out[t * 52 + 4k + i] holds item i
// of: the tile striped, striped back to blocked, warp-striped, scattered to ranks that
// reverse the tile, its heads (differing from the item before), its tails with -1 after
// the tile, heads by an operator that also takes the item's place (a change, or place
// 100), heads and tails with 7 before and after the tile, heads and tails alone, the tile
// scattered to the reversing ranks into a striped arrangement, and the tile's first 100
// loaded with -5 for the rest; histogram the counts of the items' low 4 bits; partial the
// tile's first 100 stored striped (the rest left as they were).
inline constexpr char kCubExchanges[] = R"CUDA(
#include <cub/block/block_discontinuity.cuh>
#include <cub/block/block_exchange.cuh>
#include <cub/block/block_histogram.cuh>
#include <cub/block/block_load.cuh>
#include <cub/block/block_store.cuh>
struct Differ {
  __device__ bool operator()(int a, int b) const { return a != b; }
};
struct DifferOrAt100 {
  __device__ bool operator()(int a, int b, int place) const { return a != b || place == 100; }
};
extern "C" __global__ void cub_exchanges(const int* in, int* out, unsigned* histogram,
                                         int* partial) {
  using Exchange = cub::BlockExchange<int, 64, 4>;
  using Histogram = cub::BlockHistogram<unsigned char, 64, 4, 16>;
  using Discontinuity = cub::BlockDiscontinuity<int, 64>;
  __shared__ typename Exchange::TempStorage exchange_storage;
  __shared__ typename Discontinuity::TempStorage discontinuity_storage;
  __shared__ unsigned bins[16];
  const int t = threadIdx.x;
  int* o = out + t * 52;
  int items[4], moved[4];
  cub::LoadDirectBlocked(t, in, items);
  Exchange(exchange_storage).BlockedToStriped(items, moved);
  for (int i = 0; i < 4; ++i) o[i] = moved[i];
  __syncthreads();
  Exchange(exchange_storage).StripedToBlocked(moved, moved);
  for (int i = 0; i < 4; ++i) o[4 + i] = moved[i];
  __syncthreads();
  Exchange(exchange_storage).BlockedToWarpStriped(items, moved);
  for (int i = 0; i < 4; ++i) o[8 + i] = moved[i];
  int ranks[4];
  for (int i = 0; i < 4; ++i) ranks[i] = 255 - (t * 4 + i);
  __syncthreads();
  Exchange(exchange_storage).ScatterToBlocked(items, moved, ranks);
  for (int i = 0; i < 4; ++i) o[12 + i] = moved[i];
  int heads[4], tails[4];
  Discontinuity(discontinuity_storage).FlagHeads(heads, items, Differ());
  for (int i = 0; i < 4; ++i) o[16 + i] = heads[i];
  __syncthreads();
  Discontinuity(discontinuity_storage).FlagTails(tails, items, Differ(), -1);
  for (int i = 0; i < 4; ++i) o[20 + i] = tails[i];
  __syncthreads();
  Discontinuity(discontinuity_storage).FlagHeads(heads, items, DifferOrAt100());
  for (int i = 0; i < 4; ++i) o[24 + i] = heads[i];
  __syncthreads();
  Discontinuity(discontinuity_storage).FlagHeadsAndTails(heads, 7, tails, 7, items, Differ());
  for (int i = 0; i < 4; ++i) {
    o[28 + i] = heads[i];
    o[32 + i] = tails[i];
  }
  __syncthreads();
  Discontinuity(discontinuity_storage).FlagHeadsAndTails(heads, tails, items, Differ());
  for (int i = 0; i < 4; ++i) {
    o[36 + i] = heads[i];
    o[40 + i] = tails[i];
  }
  unsigned char low[4];
  for (int i = 0; i < 4; ++i) low[i] = static_cast<unsigned char>(items[i] & 15);
  Histogram().Histogram(low, bins);
  __syncthreads();
  if (t < 16) histogram[t] = bins[t];
  __syncthreads();
  Exchange(exchange_storage).ScatterToStriped(items, moved, ranks);
  for (int i = 0; i < 4; ++i) o[44 + i] = moved[i];
  cub::BlockLoad<int, 64, 4>().Load(in, moved, 100, -5);
  for (int i = 0; i < 4; ++i) o[48 + i] = moved[i];
  int striped[4];
  cub::LoadDirectStriped<64>(t, in, striped);
  cub::BlockStore<int, 64, 4, cub::BLOCK_STORE_STRIPED>().Store(partial, striped, 100);
})CUDA";

// CUB's merge sorts over one block of 64 threads with 4 items each: per thread,
// out[t * 20 + 4k + i] holds item i of: the block's keys sorted, their places in the tile
// (the values sorted beside them), the floats' first 200 sorted with +inf for the rest,
// each 16-lane warp's keys sorted largest first, and their places in the warp's tile.
inline constexpr char kCubMergeSorts[] = R"CUDA(
#include <cub/block/block_merge_sort.cuh>
#include <cub/warp/warp_merge_sort.cuh>
struct Less {
  template <typename T>
  __device__ bool operator()(const T& a, const T& b) const { return a < b; }
};
struct Greater {
  __device__ bool operator()(int a, int b) const { return a > b; }
};
extern "C" __global__ void cub_merge_sorts(const int* keys_in, const float* floats_in, int* out) {
  using BlockSort = cub::BlockMergeSort<int, 64, 4, int>;
  using FloatSort = cub::BlockMergeSort<float, 64, 4>;
  using WarpSort = cub::WarpMergeSort<int, 4, 16, int>;
  __shared__ typename BlockSort::TempStorage block_storage;
  __shared__ typename WarpSort::TempStorage warp_storage[4];
  const int t = threadIdx.x;
  int* o = out + t * 20;
  int keys[4], places[4];
  float floats[4];
  for (int i = 0; i < 4; ++i) {
    keys[i] = keys_in[t * 4 + i];
    places[i] = t * 4 + i;
    floats[i] = floats_in[t * 4 + i];
  }
  BlockSort(block_storage).Sort(keys, places, Less());
  for (int i = 0; i < 4; ++i) {
    o[i] = keys[i];
    o[4 + i] = places[i];
  }
  FloatSort().StableSort(floats, Less(), 200, __int_as_float(0x7f800000));
  for (int i = 0; i < 4; ++i) o[8 + i] = __float_as_int(floats[i]);
  for (int i = 0; i < 4; ++i) {
    keys[i] = keys_in[t * 4 + i];
    places[i] = t % 16 * 4 + i;
  }
  WarpSort(warp_storage[t / 16]).Sort(keys, places, Greater());
  for (int i = 0; i < 4; ++i) {
    o[12 + i] = keys[i];
    o[16 + i] = places[i];
  }
})CUDA";

// Warp-aggregated appends over __activemask in a branch: per warp, the lanes with
// in[i] > 0 reserve their places in `kept` with one atomicAdd, and masks[i] records the
// lanes that took the branch with lane i (0 for the others).
inline constexpr char kActiveMaskAppend[] = R"CUDA(
extern "C" __global__ void active_mask_append(const int* in, unsigned* count, int* kept,
                                              unsigned* masks) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned lane = threadIdx.x % 32;
  masks[i] = 0;
  if (in[i] > 0) {
    const unsigned mask = __activemask();
    const int leader = __ffs(mask) - 1;
    unsigned first = 0;
    if (lane == static_cast<unsigned>(leader)) first = atomicAdd(count, __popc(mask));
    first = __shfl_sync(mask, first, leader);
    kept[first + __popc(mask & ((1u << lane) - 1u))] = static_cast<int>(i);
    masks[i] = mask;
  }
})CUDA";

// Coalesced groups (cooperative_groups::coalesced_threads, labeled_partition,
// binary_partition): per thread i of a block of 64,
// - its index appended to `kept` when in[i] > 0, by one atomicAdd per group of lanes
//   that took that branch together (warp-aggregated atomics);
// - in `shape` [4 i .. 4 i + 3], the size and rank of its branch's group (lanes that are
//   multiples of 3, or the rest; 100 added in the second), of its part of the warp by
//   in[i] & 3, and that part's ballot of in[i] > 0;
// - in `sums` [3 i .. 3 i + 2], the branch group's sum (multiples of 3) or inclusive scan
//   (the rest), the part's maximum, and the part's exclusive scan;
// - in `sides` [i], the size of its warp's side by in[i] > 0 (binary_partition) times 32
//   plus its rank there;
// - in `votes` [2 i], the same of its part of that side by in[i] & 1 (labeled_partition
//   of a coalesced group), and in [2 i + 1] that part's any(in > 25) (bit 0), all(in % 3
//   == 0) (bit 1), and how many of it share in[i] / 10 (match_any, from bit 2).
inline constexpr char kCoalescedGroups[] = R"CUDA(
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cooperative_groups/scan.h>
namespace cg = cooperative_groups;
__device__ unsigned append_slot(unsigned* count) {
  const cg::coalesced_group active = cg::coalesced_threads();
  unsigned first = 0;
  if (active.thread_rank() == 0) first = atomicAdd(count, active.size());
  return active.shfl(first, 0) + active.thread_rank();
}
extern "C" __global__ void coalesced_groups(const int* in, unsigned* count, int* kept,
                                            unsigned* shape, int* sums, unsigned* sides,
                                            unsigned* votes) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned lane = threadIdx.x % 32;
  if (in[i] > 0) kept[append_slot(count)] = static_cast<int>(i);
  if (lane % 3 == 0) {
    const cg::coalesced_group branch = cg::coalesced_threads();
    shape[4 * i] = branch.size();
    shape[4 * i + 1] = branch.thread_rank();
    sums[3 * i] = cg::reduce(branch, in[i], cg::plus<int>());
  } else {
    const cg::coalesced_group branch = cg::coalesced_threads();
    shape[4 * i] = branch.size() + 100;
    shape[4 * i + 1] = branch.thread_rank();
    sums[3 * i] = cg::inclusive_scan(branch, in[i]);
  }
  const cg::thread_block_tile<32> warp = cg::tiled_partition<32>(cg::this_thread_block());
  const cg::coalesced_group part = cg::labeled_partition(warp, in[i] & 3);
  shape[4 * i + 2] = part.size() * 32 + part.thread_rank();
  shape[4 * i + 3] = part.ballot(in[i] > 0);
  sums[3 * i + 1] = cg::reduce(part, in[i], cg::greater<int>());
  sums[3 * i + 2] = cg::exclusive_scan(part, in[i]);
  const cg::coalesced_group side = cg::binary_partition(warp, in[i] > 0);
  sides[i] = side.size() * 32 + side.thread_rank();
  const cg::coalesced_group parity = cg::labeled_partition(side, in[i] & 1);
  parity.sync();
  votes[2 * i] = parity.size() * 32 + parity.thread_rank();
  votes[2 * i + 1] = (parity.any(in[i] > 25) ? 1u : 0u) | (parity.all(in[i] % 3 == 0) ? 2u : 0u) |
                     static_cast<unsigned>(__popc(parity.match_any(in[i] / 10))) << 2;
})CUDA";

// Half precision beyond the common API, which hiprtc (HIP 5.2) lacks: directed
// roundings to and from halves, saturating conversions, __half2 comparisons, and
// atomicAdd on a __half, a __half2, a __nv_bfloat16 and a __nv_bfloat162 (each element
// atomic on its own).
// One warp; `in` = {1.0f, 3.0f}.
inline constexpr char kHalfExtras[] = R"CUDA(
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void half_extras(const float* in, unsigned* u, float* f, __half* h,
                                       __nv_bfloat16* b) {
  atomicAdd(h, __float2half(1.0f));
  atomicAdd(reinterpret_cast<__half2*>(h + 2), __floats2half2_rn(1.0f, 0.5f));
  atomicAdd(b, __float2bfloat16(1.0f));
  atomicAdd(reinterpret_cast<__nv_bfloat162*>(b + 2), __floats2bfloat162_rn(1.0f, 0.5f));
  if (threadIdx.x != 0) return;
  const float third = in[0] / in[1];
  u[0] = __half_as_ushort(__float2half_rz(third));
  u[1] = __half_as_ushort(__float2half_ru(third));
  u[2] = __half_as_ushort(__float2half_rd(-third));
  u[3] = __half_as_ushort(__float2half_rz(70000.0f));
  u[4] = __half_as_ushort(__float2half_ru(70000.0f));
  u[5] = __half2int_rd(__float2half(-2.5f));
  u[6] = __half2int_ru(__float2half(-2.5f));
  u[7] = __half2int_rn(__float2half(2.5f));
  u[8] = __half2uint_rz(__float2half(-7.0f));
  u[9] = __half_as_ushort(__int2half_rz(2049));
  u[10] = __half_as_ushort(__int2half_ru(2049));
  const __half2 a = __floats2half2_rn(1.0f, 2.0f), c = __floats2half2_rn(1.0f, 3.0f);
  u[11] = __hbeq2(a, a) + 2 * __hbeq2(a, c) + 4 * __hble2(a, c) + 8 * __hblt2(a, c);
  const __half2 equal = __heq2(a, c);
  f[0] = __low2float(equal);
  f[1] = __high2float(equal);
  const __half2 g = __float22half2_rn(make_float2(in[0], in[1]));
  f[2] = __low2float(g) + __high2float(g);
})CUDA";

// libcu++ (<cuda/std/...>, <cuda/atomic>), which hiprtc (HIP 5.2) lacks: per thread i
// (in[i] in [0, 1000)), atomics on `total` (the sum), tallies (the maximum, the minimum,
// the count, twice the count, the maximum again) and halves (0.5 per thread); out[3 i] =
// the digit sum * 1000 + the popcount, out[3 i + 1] = in[i] when even (else -1) + 31 +
// its leading zeros * 10000 + float(in[i])'s exponent bits * 1000000, out[3 i + 2] =
// d^2 - 1 (the real part of the complex (d, 1) squared, d the last digit) + the bit width
// * 1000 + the trailing zeros of in[i] | 1024 * 100000; spans[i], over a span of the
// block's values, the size of its subspan from thread i * 1000000 + its second value *
// 1000 + its last value.
inline constexpr char kLibcudacxx[] = R"CUDA(
#include <cuda/atomic>
#include <cuda/std/array>
#include <cuda/std/atomic>
#include <cuda/std/bit>
#include <cuda/std/cassert>
#include <cuda/std/cfloat>
#include <cuda/std/climits>
#include <cuda/std/cmath>
#include <cuda/std/complex>
#include <cuda/std/cstddef>
#include <cuda/std/cstdint>
#include <cuda/std/cstdlib>
#include <cuda/std/cstring>
#include <cuda/std/functional>
#include <cuda/std/initializer_list>
#include <cuda/std/iterator>
#include <cuda/std/limits>
#include <cuda/std/numeric>
#include <cuda/std/optional>
#include <cuda/std/ratio>
#include <cuda/std/span>
#include <cuda/std/tuple>
#include <cuda/std/type_traits>
#include <cuda/std/utility>
#include <cuda/std/variant>
static_assert(cuda::std::is_same<cuda::std::int32_t, int>::value, "int32_t is int");
static_assert(cuda::std::gcd(12, 18) == 6, "gcd");
static_assert(cuda::std::ratio_add<cuda::std::ratio<1, 2>, cuda::std::ratio<1, 3>>::num == 5,
              "ratio");
static_assert(cuda::std::variant_size<cuda::std::variant<int, float>>::value == 2, "variant");
extern "C" __global__ void libcudacxx(const int* in, int* out, unsigned long long* total,
                                      int* tallies, float* halves, int* spans) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  cuda::atomic_ref<unsigned long long, cuda::thread_scope_device> sum(*total);
  sum.fetch_add(static_cast<unsigned long long>(in[i]), cuda::std::memory_order_relaxed);
  cuda::atomic_ref<int, cuda::thread_scope_device>(tallies[0]).fetch_max(in[i]);
  cuda::atomic_ref<int, cuda::thread_scope_block>(tallies[1]).fetch_min(in[i]);
  cuda::std::atomic_ref<int> count(tallies[2]);
  ++count;
  cuda::std::atomic_ref<float>(*halves).fetch_add(0.5f);
  reinterpret_cast<cuda::std::atomic<int>*>(tallies + 3)->fetch_add(2);
  reinterpret_cast<cuda::atomic<int, cuda::thread_scope_device>*>(tallies + 4)->fetch_max(in[i]);
  const cuda::std::array<cuda::std::int32_t, 3> digits{in[i] / 100, in[i] / 10 % 10,
                                                       in[i] % 10};
  const unsigned bits = static_cast<unsigned>(in[i]);
  const cuda::std::tuple<int, int> t =
      cuda::std::make_tuple(digits[0] + digits[1] + digits[2], cuda::std::popcount(bits));
  const cuda::std::optional<int> even =
      in[i] % 2 == 0 ? cuda::std::optional<int>(in[i]) : cuda::std::nullopt;
  const cuda::std::complex<float> z(static_cast<float>(digits[2]), 1.0f);
  const cuda::std::pair<int, int> widths(cuda::std::bit_width(bits),
                                         cuda::std::countr_zero(bits | 1024u));
  out[3 * i] = cuda::std::get<0>(t) * 1000 + cuda::std::get<1>(t);
  const unsigned exponent = cuda::std::bit_cast<unsigned>(static_cast<float>(in[i])) >> 23;
  out[3 * i + 1] =
      cuda::std::plus<int>()(even.value_or(-1), cuda::std::numeric_limits<int>::digits) +
      cuda::std::countl_zero(bits) * 10000 + static_cast<int>(exponent) * 1000000;
  out[3 * i + 2] = static_cast<int>((z * z).real()) + widths.first * 1000 + widths.second * 100000;
  const cuda::std::span<const int> block(in + blockIdx.x * blockDim.x, blockDim.x);
  const cuda::std::span<const int, 2> two = block.first<2>();
  static_assert(decltype(cuda::std::as_bytes(two))::extent == 2 * sizeof(int), "8 bytes");
  spans[i] = static_cast<int>(block.subspan(threadIdx.x).size()) * 1000000 + two.back() * 1000 +
             block.last(1).front();
})CUDA";

// Kernels NVRTC and the CPU driver build and hiprtc (HIP 5.2) cannot: it lacks what they
// use.
// libcu++'s integer arithmetic and function objects: per thread of one block of 64
// (out[t * 6 + k]) ceil_div, round_up, round_down of a[t] by b[t], ilog2 and ilog10 of
// a[t] (-1 for 0), and maximum minus minimum of the two; block_out the block's largest and
// smallest a[t] through CUB with cuda::maximum and cuda::minimum, two ceil_divs whose
// a + b - 1 would overflow, and ilog2(2^40).
inline constexpr char kLibcudacxxArithmetic[] = R"CUDA(
#include <cub/block/block_reduce.cuh>
#include <cuda/cmath>
#include <cuda/functional>
extern "C" __global__ void libcudacxx_arithmetic(const int* a, const int* b, int* out,
                                                 unsigned* block_out) {
  const int t = threadIdx.x, x = a[t], y = b[t];
  int* o = out + t * 6;
  o[0] = cuda::ceil_div(x, y);
  o[1] = cuda::round_up(x, y);
  o[2] = cuda::round_down(x, y);
  o[3] = x > 0 ? cuda::ilog2(x) : -1;
  o[4] = x > 0 ? cuda::ilog10(x) : -1;
  o[5] = cuda::maximum<>{}(x, y) - cuda::minimum<int>{}(x, y);
  using BlockReduce = cub::BlockReduce<int, 64>;
  __shared__ typename BlockReduce::TempStorage storage;
  const int largest = BlockReduce(storage).Reduce(x, cuda::maximum<>{});
  __syncthreads();
  const int smallest = BlockReduce(storage).Reduce(x, cuda::minimum<>{});
  if (t == 0) {
    block_out[0] = largest;
    block_out[1] = smallest;
    block_out[2] = cuda::ceil_div(4294967295u, 4294967295u);
    block_out[3] = cuda::ceil_div(4294967295u, 2u);
    block_out[4] = cuda::ilog2(1ull << 40);
  }
})CUDA";

inline constexpr std::array<std::pair<const char*, const char*>, 5> kBeyondHiprtc = {{
    {"directed_roundings", kDirectedRoundings},
    {"trapping", kTrapping},
    {"half_extras", kHalfExtras},
    {"libcudacxx", kLibcudacxx},
    {"libcudacxx_arithmetic", kLibcudacxxArithmetic},
}};

// Code NVRTC refuses in a kernel's source that a host compiler takes, the entry point "k"
// of each: host functions and variables (not allowed in its JIT mode; a variable
// template's where device code uses it) and thread-local storage. Every driver's kernel
// front end refuses each too, at the declaration's (or the use's) `line`, saying
// `refusal`. hiprtc refuses those that device code uses (`hiprtc`).
enum class Hiprtc {
  kTakes,
  kRefuses,
  // Its LLVM aborts the process: thread-local storage has no lowering for AMD GPUs
  // ("Cannot select: GlobalTLSAddress").
  kAborts,
};
struct HostCode {
  const char* source;
  int line;
  const char* refusal;
  Hiprtc hiprtc;
};
inline constexpr HostCode kHostCode[] = {
    {R"CUDA(float twice(float x) { return 2 * x; }
extern "C" __global__ void k(float* d) { d[0] = twice(d[0]); })CUDA",
     1, "function twice is host code", Hiprtc::kRefuses},
    // Called by no device code.
    {R"CUDA(int host_only(int x) { return x * 3; }
extern "C" __global__ void k(int* d) { d[0] = 1; })CUDA",
     1, "function host_only is host code", Hiprtc::kTakes},
    {R"CUDA(__device__ int scale(int x) { return x * 3; }
__host__ int host_scale(int x) { return x * 3; }
extern "C" __global__ void k(int* d) { d[0] = scale(1); })CUDA",
     2, "function host_scale is host code", Hiprtc::kTakes},
    // Through a __host__ __device__ function.
    {R"CUDA(int host_only(int x) { return x * 3; }
__host__ __device__ int both(int x) { return host_only(x); }
extern "C" __global__ void k(int* d) { d[0] = both(d[0]); })CUDA",
     1, "function host_only is host code", Hiprtc::kRefuses},
    {R"CUDA(struct Accumulator {
  float total = 0;
  void add(float x) { total += x; }
};
extern "C" __global__ void k(float* d) { Accumulator a; a.add(d[0]); d[0] = a.total; })CUDA",
     3, "function add is host code", Hiprtc::kRefuses},
    {R"CUDA(struct Pair {
  __device__ Pair(int a, int b) : first(a), second(b) {}
  ~Pair() {}
  int first, second;
};
extern "C" __global__ void k(int* d) { Pair p(d[0], d[1]); d[2] = p.first + p.second; })CUDA",
     3, "function ~Pair is host code", Hiprtc::kRefuses},
    {R"CUDA(struct V { float x; };
V operator+(V a, V b) { return {a.x + b.x}; }
extern "C" __global__ void k(float* d) { V v = V{d[0]} + V{d[1]}; d[2] = v.x; })CUDA",
     2, "function operator+ is host code", Hiprtc::kRefuses},
    {R"CUDA(template <typename T> T host_twice(T x) { return x + x; }
extern "C" __global__ void k(int* d) { d[0] = host_twice(d[0]); })CUDA",
     1, "function host_twice is host code", Hiprtc::kRefuses},
    // A member of a class local to the kernel.
    {R"CUDA(extern "C" __global__ void k(int* d) {
  struct Local { int one() { return 1; } };
  d[0] = Local().one();
})CUDA",
     2, "function one is host code", Hiprtc::kRefuses},
    // constexpr does not make a function __device__ (without --expt-relaxed-constexpr,
    // which no driver passes); hiprtc takes it for __host__ __device__.
    {R"CUDA(constexpr int tile(int n) { return n * 8; }
extern "C" __global__ void k(int* d) { constexpr int kTile = tile(4); d[0] = kTile; })CUDA",
     1, "function tile is host code", Hiprtc::kTakes},
    {R"CUDA(int counter = 0;
extern "C" __global__ void k(int* d) { d[0] = counter; })CUDA",
     1, "variable counter is host code", Hiprtc::kRefuses},
    {R"CUDA(extern "C" __global__ void k(int* d) { d[0] = 1; }
struct Tally { static int count; };)CUDA",
     2, "static data member count is host code", Hiprtc::kTakes},
    {R"CUDA(extern "C" {
int calls;
__global__ void k(int* d) { d[0] = 1; }
})CUDA",
     2, "variable calls is host code", Hiprtc::kTakes},
    {R"CUDA(struct Tally { __device__ static int count; };
extern "C" __global__ void k(int* d) { d[0] = 1; })CUDA",
     1, "static data member count is host code", Hiprtc::kTakes},
    // Where device code uses it (an unused one passes).
    {R"CUDA(template <typename T> T scale = T(2);
extern "C" __global__ void k(int* d) { d[0] = scale<int>; })CUDA",
     2, "variable template scale, used here, is host code", Hiprtc::kRefuses},
    {R"CUDA(struct Pair { int a, b; };
constexpr Pair kPair{1, 2};
auto [first, second] = kPair;
extern "C" __global__ void k(int* d) { d[0] = 1; })CUDA",
     3, "structured binding [first, second] is host code", Hiprtc::kTakes},
    {R"CUDA(__device__ thread_local int calls;
extern "C" __global__ void k(int* d) { d[0] = calls; })CUDA",
     1, "variable calls is thread_local", Hiprtc::kAborts},
    {R"CUDA(extern "C" __global__ void k(int* d) {
  static thread_local int calls = 0;
  d[0] = ++calls;
})CUDA",
     2, "variable calls is thread_local", Hiprtc::kAborts},
};

// Device code of every kind NVRTC takes in a kernel's source: __device__ and
// __host__ __device__ functions, members, operators and templates, defaulted members,
// deduction guides, lambdas, structured bindings in functions, const, constexpr and
// __constant__ data, __device__ variable templates, and a host one no device code uses.
inline constexpr char kDeviceCodeOfEveryKind[] = R"CUDA(
struct Vec {
  float x, y;
  Vec() = default;
  Vec(const Vec&) = default;
  __device__ Vec(float x_, float y_) : x(x_), y(y_) {}
  __host__ __device__ float dot(const Vec& o) const { return x * o.x + y * o.y; }
  static constexpr int kLanes = 2;
};
__device__ Vec operator+(Vec a, Vec b) { return Vec(a.x + b.x, a.y + b.y); }
template <typename T> __device__ T twice(T v) { return v + v; }
template <typename T> struct Box {
  T value;
  __device__ T get() const { return value; }
  template <typename U> __host__ __device__ U as() const { return static_cast<U>(value); }
};
template <typename T> struct Two {
  T first, second;
  __device__ Two(T a, T b) : first(a), second(b) {}
};
template <typename T> Two(T, T) -> Two<T>;
__host__ __device__ constexpr int tile(int n) { return n * 8; }
constexpr float kHalf = 0.5f;
const int kOffsets[2] = {1, 2};
__constant__ float kWeights[2] = {0.25f, 0.75f};
template <typename T> __device__ T kScale = T(3);
template <typename T> T kHostOnly = T(7);
extern "C" __global__ void device_code(float* d) {
  constexpr int kTile = tile(4);
  auto square = [](float v) { return v * v; };
  Vec a(d[0], d[1]);
  Vec b = a;
  Vec c = twice(a + b);
  const Box<int> zero{0};
  Two pair(1.0f, 2.0f);
  auto [one, two] = pair;
  d[2] = square(c.dot(a)) + sqrtf(d[3]) + kTile + Vec::kLanes + kHalf + kOffsets[1] +
         kWeights[0] + zero.get() + zero.as<float>() + kScale<float> + one + two;
})CUDA";

inline constexpr std::array<std::pair<const char*, const char*>, 43> kSuite = {{
    {"vector_add", kVectorAdd},
    {"saxpy", kSaxpy},
    {"matmul", kTiledMatmul},
    {"reduce_sum", kBlockReduce},
    {"inclusive_scan", kInclusiveScan},
    {"histogram", kHistogram},
    {"stencil", kStencil},
    {"accumulate", kAtomicAccumulate},
    {"ring", kRingCounter},
    {"double_float4", kFloat4Copy},
    {"bits", kBitIntrinsics},
    {"mixed", kAtomicsAndIntrinsics},
    {"warp_scan_reduce", kWarpScanReduce},
    {"compact_positive", kBallotCompaction},
    {"votes", kWarpVotes},
    {"tile_reduce", kTiledReduction},
    {"half_dot", kHalfDot},
    {"half_conversions", kHalfConversions},
    {"checked_double", kAssertingDouble},
    {"extras", kGroupAndHalfExtras},
    {"report", kPrintingKernel},
    {"rounding", kRoundingAndFences},
    {"bitonic_sort", kBitonicSort},
    {"block_votes", kBlockVotes},
    {"bf16_axpy", kBfloat16Axpy},
    {"math_extras", kMathExtras},
    {"warp_sums", kTemplatedWarpSums},
    {"more_intrinsics", kMoreIntrinsics},
    {"tile_scans", kTileScans},
    {"coalesced_groups", kCoalescedGroups},
    {"active_mask_append", kActiveMaskAppend},
    {"math_constants", kMathConstants},
    {"group_copies", kGroupCopies},
    {"half_math", kHalfMath},
    {"grid_stride", kGridStride},
    {"find_nth_set", kFindNthSet},
    {"simd_intrinsics", kSimdIntrinsics},
    {"dpx_intrinsics", kDpxIntrinsics},
    {"cub_collectives", kCubCollectives},
    {"cub_sorts", kCubSorts},
    {"cub_exchanges", kCubExchanges},
    {"cub_merge_sorts", kCubMergeSorts},
    {"device_code", kDeviceCodeOfEveryKind},
}};

}  // namespace gpucmd::kernels

#endif  // GPUCMDD_TESTS_KERNELS_KERNEL_SOURCES_H_
