#ifndef GPUCMDD_TESTS_KERNELS_KERNEL_SOURCES_H_
#define GPUCMDD_TESTS_KERNELS_KERNEL_SOURCES_H_

// The kernel test suite's kernels, in the one CUDA C++ dialect every driver compiles.
// The daemon tests run them on the CPU driver against references; the NVRTC and hiprtc
// tests compile them for GPUs.

#include <array>
#include <utility>

namespace gpucmd::kernels {

inline constexpr char kVectorAdd[] = R"CUDA(
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
)CUDA";

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

// (entry point, source) of every kernel above.
inline constexpr std::array<std::pair<const char*, const char*>, 7> kSuite = {{
    {"vector_add", kVectorAdd},
    {"saxpy", kSaxpy},
    {"matmul", kTiledMatmul},
    {"reduce_sum", kBlockReduce},
    {"inclusive_scan", kInclusiveScan},
    {"histogram", kHistogram},
    {"stencil", kStencil},
}};

}  // namespace gpucmd::kernels

#endif  // GPUCMDD_TESTS_KERNELS_KERNEL_SOURCES_H_
