
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
    k(uint* keys, const uint n, int descending = 0) {
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
    