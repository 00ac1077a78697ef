
    #define TILE 16
    extern "C" __global__ void k(const float* A, const float* B, float* C,
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
    }