#include "base/freed_memory.h"

#include <malloc.h>

#include <algorithm>
#include <climits>

namespace gpucmd {

void KeepFreedMemory(uint64_t keep_bytes) {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, static_cast<int>(std::min<uint64_t>(keep_bytes, INT_MAX)));
}

bool FreedMemoryReleaser::Look(bool quiet) {
  const bool held_too_much = quiet && mallinfo2().fordblks > keep_bytes_;
  const bool release = held_too_much && last_look_held_too_much_;
  if (release) {
    malloc_trim(keep_bytes_);
    last_look_held_too_much_ = false;
  } else {
    last_look_held_too_much_ = held_too_much;
  }
  return release;
}

}  // namespace gpucmd
