#ifndef GPUCMDD_BASE_ROUND_UP_H_
#define GPUCMDD_BASE_ROUND_UP_H_

#include <cstdint>

namespace gpucmd {

// The least multiple of `granularity` (positive) that is `value` or more.
constexpr uint64_t RoundUp(uint64_t value, uint64_t granularity) {
  return (value + granularity - 1) / granularity * granularity;
}

}  // namespace gpucmd

#endif  // GPUCMDD_BASE_ROUND_UP_H_
