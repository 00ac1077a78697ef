
    extern "C" __global__ void k(const int* in, int n, int* scan,
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
    }