#ifndef GPUCMDD_TESTS_TESTING_RANDOM_BYTES_H_
#define GPUCMDD_TESTS_TESTING_RANDOM_BYTES_H_

// Test helper: reproducible pseudo-random payloads.

#include <cstdint>
#include <random>
#include <string>

namespace gpucmd::testing {

// `size` bytes drawn from a generator seeded with `seed`.
inline std::string RandomBytes(size_t size, uint32_t seed) {
  std::mt19937 random(seed);
  std::string data(size, '\0');
  for (char& c : data) c = static_cast<char>(random());
  return data;
}

}  // namespace gpucmd::testing

#endif  // GPUCMDD_TESTS_TESTING_RANDOM_BYTES_H_
