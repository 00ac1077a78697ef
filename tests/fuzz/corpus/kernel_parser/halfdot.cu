
    #include <cuda_fp16.h>
    extern "C" __global__ void k(const __half* a, const __half* b, int n, float* dot,
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
    }