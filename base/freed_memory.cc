#include "base/freed_memory.h"

#include "gperftools/malloc_extension.h"

#include <cstddef>

namespace gpucmd {

void KeepFreedMemory() { MallocExtension::instance()->SetMemoryReleaseRate(0); }

bool FreedMemoryReleaser::Look(bool quiet) {
  MallocExtension& allocator = *MallocExtension::instance();
  size_t held_bytes = 0;
  const bool held_too_much =
      quiet && allocator.GetNumericProperty("tcmalloc.pageheap_free_bytes", &held_bytes) &&
      held_bytes > keep_bytes_;
  const bool release = held_too_much && last_look_held_too_much_;
  if (release) {
    allocator.ReleaseFreeMemory();
    last_look_held_too_much_ = false;
  } else {
    last_look_held_too_much_ = held_too_much;
  }
  return release;
}

}  // namespace gpucmd
