__managed__ int m;
extern "C" __global__ void k(float* x, cudaTextureObject_t t) {
  asm volatile("membar.gl;");
  x[0] = tex1Dfetch<float>(t, 0);
  k<<<1, 1>>>(x, t);
}
