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
// Beyond the cache a payload's memory is fresh again, and reserved in huge pages
// (base/huge_pages.h).
//
// Thread-safety: every method may be called from any thread.

#include <cstdint>
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

  // Keeps `payload`'s memory for a later Take, unless it is small or the pool is full.
  void Give(std::string payload);

  // `size` bytes of host memory from a cached string (not zero-filled where it already
  // held that many), given back when the Bytes die.
  Bytes TakeBytes(uint64_t size);

  // Wraps `payload` so that its memory comes back here when the Bytes die.
  Bytes Wrap(std::string payload);

  uint64_t cached_bytes() const;

 private:
  const uint64_t max_cached_bytes_;
  mutable Mutex mutex_;
  std::vector<std::string> cached_ ABSL_GUARDED_BY(mutex_);
  uint64_t cached_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_COMMAND_PAYLOAD_POOL_H_
