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
__host__ __device__ constexpr int tile(int n) { return n * 8; }
constexpr float kHalf = 0.5f;
const int kOffsets[2] = {1, 2};
__constant__ float kWeights[2] = {0.25f, 0.75f};
extern "C" __global__ void k(float* d) {
  constexpr int kTile = tile(4);
  auto square = [](float v) { return v * v; };
  Vec a(d[0], d[1]);
  Vec b = a;
  Vec c = twice(a + b);
  const Box<int> zero{0};
  d[2] = square(c.dot(a)) + sqrtf(d[3]) + kTile + Vec::kLanes + kHalf + kOffsets[1] +
         kWeights[0] + zero.get() + zero.as<float>();
}
