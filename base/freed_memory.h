#ifndef GPUCMDD_BASE_FREED_MEMORY_H_
#define GPUCMDD_BASE_FREED_MEMORY_H_

// Note [Freed memory goes back]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The daemon's malloc is TCMalloc (this library links it, and it then stands in for
// glibc's malloc in the whole process): a Submit batch makes many small allocations on
// a gRPC thread that another thread frees, which TCMalloc's per-thread caches serve at a
// fraction of glibc's cost (docs/BENCHMARKS.md, "The daemon's malloc").
//
// Memory fresh from the system costs a page fault per 4 KiB on first touch, which for
// bulk transfers costs more than copying the bytes (Note [Payload pool]). So the daemon
// keeps what it frees: KeepFreedMemory turns off TCMalloc's gradual return of freed
// pages, and the next transfer of that size reuses them. But then after one burst (a
// client that read gigabytes through unread replies, or many clients at once) the
// daemon would hold its peak for good. FreedMemoryReleaser looks periodically at the
// freed pages TCMalloc holds; when more than the daemon keeps were held at two looks in
// a row with nothing running at either, it gives them back to the system. A burst that
// is still reusing its memory is left alone.
//
// Under AddressSanitizer and ThreadSanitizer, whose allocator stands in for malloc,
// TCMalloc is not linked, and neither does anything (freed_memory_sanitizer.cc).
//
// Thread-safety: KeepFreedMemory before any other thread allocates; a releaser is used
// by one thread at a time.

#include <cstdint>

namespace gpucmd {

// Makes malloc keep the pages of every block freed from now on, until a releaser gives
// them back.
void KeepFreedMemory();

class FreedMemoryReleaser {
 public:
  // `keep_bytes`: how much freed memory malloc may hold for good.
  explicit FreedMemoryReleaser(uint64_t keep_bytes) : keep_bytes_(keep_bytes) {}

  // One look; `quiet`: nothing runs now. Gives the freed pages malloc holds back to the
  // system when more than keep_bytes were held at this look and the last one, both
  // quiet; returns whether it did.
  bool Look(bool quiet);

 private:
  const uint64_t keep_bytes_;
  bool last_look_held_too_much_ = false;  // quiet, and more than keep_bytes held
};

}  // namespace gpucmd

#endif  // GPUCMDD_BASE_FREED_MEMORY_H_
