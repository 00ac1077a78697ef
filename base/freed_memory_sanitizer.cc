// Under a sanitizer whose allocator stands in for malloc (Note [Freed memory goes
// back]): that allocator decides what it keeps.
#include "base/freed_memory.h"

namespace gpucmd {

void KeepFreedMemory() {}

bool FreedMemoryReleaser::Look(bool quiet) { return false; }

}  // namespace gpucmd
