int counter = 0;
struct Pair {
  Pair(int a, int b) : first(a), second(b) {}
  ~Pair() {}
  int first, second;
  static int made;
};
template <typename T> T host_twice(T x) { return x + x; }
constexpr int tile(int n) { return n * 8; }
extern "C" __global__ void k(int* d) { Pair p(d[0], host_twice(d[1])); d[2] = p.first + counter; }
