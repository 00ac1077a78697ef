#ifndef GPUCMDD_BASE_FREED_MEMORY_H_
#define GPUCMDD_BASE_FREED_MEMORY_H_

// Note [Freed memory goes back]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Memory fresh from the system costs a page fault per 4 KiB on first touch, which for
// bulk transfers costs more than copying the bytes (Note [Payload pool]). So the daemon
// keeps what it frees: blocks below 32 MiB come from malloc's heaps and go back to them
// (KeepFreedMemory). But malloc gives memory back to the system only from the top of its
// main heap: after one burst (a client that read gigabytes through unread replies, or
// many clients at once) the daemon would hold its peak for good, scattered through its
// heaps. FreedMemoryReleaser looks periodically at the bytes free inside malloc's heaps;
// when more than the daemon keeps were free at two looks in a row with nothing running
// at either, it gives the free pages back (malloc_trim). A burst that is still reusing
// its memory is left alone.
//
// Thread-safety: KeepFreedMemory before any other thread allocates; a releaser is used
// by one thread at a time.

#include <cstdint>

namespace gpucmd {

// Makes malloc keep freed blocks below 32 MiB in its heaps, and up to `keep_bytes` free
// at the top of its main heap.
void KeepFreedMemory(uint64_t keep_bytes);

class FreedMemoryReleaser {
 public:
  // `keep_bytes`: how much free memory malloc's heaps may hold for good.
  explicit FreedMemoryReleaser(uint64_t keep_bytes) : keep_bytes_(keep_bytes) {}

  // One look; `quiet`: nothing runs now. Gives the free pages of malloc's heaps back to
  // the system when more than keep_bytes were free at this look and the last one, both
  // quiet; returns whether it did.
  bool Look(bool quiet);

 private:
  const uint64_t keep_bytes_;
  bool last_look_held_too_much_ = false;  // quiet, and more than keep_bytes free
};

}  // namespace gpucmd

#endif  // GPUCMDD_BASE_FREED_MEMORY_H_
