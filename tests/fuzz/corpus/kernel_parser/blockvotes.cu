
    extern "C" __launch_bounds__(256) __global__ void k(const int* in, int n,
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
    }