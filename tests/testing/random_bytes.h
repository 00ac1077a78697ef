#ifndef GPUCMDD_TESTS_TESTING_RANDOM_BYTES_H_
#define GPUCMDD_TESTS_TESTING_RANDOM_BYTES_H_

// Test helper: reproducible pseudo-random payloads and values.

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace gpucmd::testing {

// `size` bytes drawn from a generator seeded with `seed`.
inline std::string RandomBytes(size_t size, uint32_t seed) {
  std::mt19937 random(seed);
  std::string data(size, '\0');
  for (char& c : data) c = static_cast<char>(random());
  return data;
}

// `count` floats uniform in [-1, 1), from a generator seeded with `seed`.
inline std::vector<float> RandomFloats(size_t count, uint32_t seed) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float& value : values) value = uniform(random);
  return values;
}

}  // namespace gpucmd::testing

#endif  // GPUCMDD_TESTS_TESTING_RANDOM_BYTES_H_
