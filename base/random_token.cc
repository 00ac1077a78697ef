#include "base/random_token.h"

#include <cstdint>
#include <random>

#include "absl/strings/str_format.h"

namespace gpucmd {

std::string RandomToken() {
  static thread_local std::random_device device;
  uint64_t high = (uint64_t{device()} << 32) | device();
  uint64_t low = (uint64_t{device()} << 32) | device();
  return absl::StrFormat("%016x%016x", high, low);
}

}  // namespace gpucmd
