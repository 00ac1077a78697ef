#ifndef GPUCMDD_SERVER_COMMAND_PAYLOAD_POOL_H_
#define GPUCMDD_SERVER_COMMAND_PAYLOAD_POOL_H_

// Note [Payload pool]
// ~~~~~~~~~~~~~~~~~~~
// Bulk payloads (a write's inline bytes, a read's host buffer) are megabytes, and memory
// fresh from the system costs a page fault per 4 KiB page on first touch: a 16 MiB
// payload allocated per transfer spends more time faulting than copying. The pool keeps
// the strings of finished transfers, pages already touched, for the next ones: a Write's
// request message parses into one (protobuf keeps a string's capacity when it parses
// into it), the Command holds it while its copy is in flight and gives it back when the
// copy completed; a large read lands in one. It keeps at most `max_cached_bytes` of
// capacity and nothing under kMinCachedBytes (small payloads are staged in pinned memory
// and cost little); the most recently given string is taken first (its pages are the
// likeliest to be in cache).
// A payload the cache cannot hold becomes the pool's one spare instead (replacing the
// previous spare), its pages released lazily (base/huge_pages.h ReleaseLazily): they
// stay mapped, and count in the daemon's resident memory, until the kernel needs them
// (then they are taken back at no cost to the daemon), so the next transfer of that size
// finds them in place instead of faulting fresh memory in. Beyond the cache and the
// spare a payload's memory goes back to malloc, which keeps it for the next allocation
// until the daemon has been quiet a while (Note [Freed memory goes back]); memory fresh
// from the system is reserved in huge pages.
// A read's buffer takes a cached string that holds it before the spare: the spare is for
// sizes the cache cannot serve. Writing into lazily released pages again cost far more
// than into cached ones on a 2-core virtual machine (a 16 MiB read into the spare: some
// 46 ms, against 5 into a cached string), and a read that takes the spare gives it back
// released again when the cache is full (of a series of writes' payloads, say): every
// read paid that.
//
// Thread-safety: every method may be called from any thread.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "driver/bytes.h"

namespace gpucmd {

class PayloadPool {
 public:
  static constexpr uint64_t kMinCachedBytes = uint64_t{256} << 10;

  explicit PayloadPool(uint64_t max_cached_bytes) : max_cached_bytes_(max_cached_bytes) {}
  PayloadPool(const PayloadPool&) = delete;
  PayloadPool& operator=(const PayloadPool&) = delete;

  // A cached string (contents unspecified; its size is that of its last payload, so that
  // shrinking it to a new payload's size writes nothing), or an empty new one.
  std::string Take();

  // Keeps `payload`'s memory for a later Take, unless it is small; what the cache cannot
  // hold becomes the spare.
  void Give(std::string payload);

  // Gives `payload` room for `size` bytes, keeping its contents: the spare's memory when
  // it is that large (and `size` more than half of it), else new capacity reserved in
  // huge pages.
  void Grow(std::string& payload, uint64_t size);

  // `size` bytes of host memory: a cached string that holds them, else the spare as Grow
  // takes it, else the most recently cached string (grown); given back when the Bytes
  // die. Not zero-filled: the caller writes them all (a read's destination) before they
  // are read.
  Bytes TakeBytes(uint64_t size);

  // Wraps `payload` so that its memory comes back here when the Bytes die.
  Bytes Wrap(std::string payload);

  uint64_t cached_bytes() const;
  // The spare's capacity (0: none).
  uint64_t spare_bytes() const;

 private:
  // The most recently cached string that can hold `size` bytes.
  std::optional<std::string> TakeCachedHolding(uint64_t size);
  // The spare, when it can hold `size` bytes and `size` is more than half of it (a small
  // payload does not take a large spare).
  std::optional<std::string> TakeSpare(uint64_t size);

  const uint64_t max_cached_bytes_;
  mutable Mutex mutex_;
  std::vector<std::string> cached_ ABSL_GUARDED_BY(mutex_);
  uint64_t cached_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  std::string spare_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_COMMAND_PAYLOAD_POOL_H_
