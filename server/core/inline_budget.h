#ifndef GPUCMDD_SERVER_CORE_INLINE_BUDGET_H_
#define GPUCMDD_SERVER_CORE_INLINE_BUDGET_H_

// Note [Inline payload budget]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A write's inline payload is held by the daemon from the moment its bytes arrive until
// the write has run (then the drop queue, with its own thresholds, holds what is still
// being copied); a read's bytes from its copy until they are handed to gRPC for the
// client. Without a bound, a session could keep any number of streamed Writes, Reads
// and Submit batches open and hold their bytes: the inline bytes one session's writes
// and reads hold at once are bounded by limits.max_inline_bytes_per_session, and those
// of all sessions together by limits.max_inline_bytes (a client may open many sessions,
// and its reads need no device memory of their own: every one may read the same small
// buffer, many times over). A streamed
// Write reserves its declared size when its header arrives, before any payload is kept;
// a streamed Read its size when it starts; a Submit batch each write's and read's bytes
// when it is read. One past either limit is RESOURCE_EXHAUSTED naming it, once the device
// found the copy itself valid (a copy past its buffer's end, or of a buffer the session
// does not own, says so instead: WriteOp::over_budget in server/core/operation.h). The
// reservation ends with the write's call or batch, and with a read's last chunk or the
// response that ends its batch (Note [Replies the client does not read] in
// server/rpc/submit_reactor.h).
//
// Thread-safety: all methods may be called from any thread.

#include <cstdint>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "server/command/ids.h"

namespace gpucmd {

class InlineBudget {
 public:
  // Bytes held for one session until it ends; releases them when it goes.
  class Reservation {
   public:
    Reservation(Reservation&& other) noexcept
        : budget_(std::exchange(other.budget_, nullptr)),
          session_(other.session_),
          bytes_(other.bytes_) {}
    Reservation& operator=(Reservation&& other) noexcept {
      std::swap(budget_, other.budget_);
      std::swap(session_, other.session_);
      std::swap(bytes_, other.bytes_);
      return *this;
    }
    ~Reservation() {
      if (budget_ != nullptr) budget_->Release(session_, bytes_);
    }

   private:
    friend class InlineBudget;
    Reservation(InlineBudget* budget, SessionId session, uint64_t bytes)
        : budget_(budget), session_(session), bytes_(bytes) {}
    InlineBudget* budget_;
    SessionId session_;
    uint64_t bytes_;
  };

  // `per_session`: the most bytes a session may hold; `all_sessions`: the most all
  // sessions together may hold; 0: no limit.
  InlineBudget(uint64_t per_session, uint64_t all_sessions)
      : per_session_(per_session), all_sessions_(all_sessions) {}

  absl::StatusOr<Reservation> Reserve(SessionId session, uint64_t bytes) {
    MutexLock lock(&mutex_);
    auto it = held_.find(session);
    const uint64_t by_session = it == held_.end() ? 0 : it->second;
    if (PassesLimit(per_session_, by_session, bytes)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the session's writes and reads hold ", by_session, " inline bytes; ", bytes,
          " more would pass its limit (limits.max_inline_bytes_per_session)"));
    }
    if (PassesLimit(all_sessions_, held_by_all_, bytes)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the writes and reads of all sessions hold ", held_by_all_, " inline bytes; ",
          bytes, " more would pass the daemon's limit (limits.max_inline_bytes)"));
    }
    held_[session] += bytes;
    held_by_all_ += bytes;
    return Reservation(this, session, bytes);
  }

  // Inline bytes all sessions' writes and reads hold now.
  uint64_t HeldByAll() const {
    MutexLock lock(&mutex_);
    return held_by_all_;
  }

  // Inline bytes `session`'s writes and reads hold now.
  uint64_t HeldBy(SessionId session) const {
    MutexLock lock(&mutex_);
    auto it = held_.find(session);
    return it == held_.end() ? 0 : it->second;
  }

 private:
  static bool PassesLimit(uint64_t limit, uint64_t held, uint64_t bytes) {
    return limit != 0 && bytes > limit - std::min(held, limit);
  }

  void Release(SessionId session, uint64_t bytes) {
    MutexLock lock(&mutex_);
    auto it = held_.find(session);
    if (it == held_.end()) return;
    const uint64_t released = std::min(bytes, it->second);
    it->second -= released;
    held_by_all_ -= released;
    if (it->second == 0) held_.erase(it);
  }

  const uint64_t per_session_;
  const uint64_t all_sessions_;
  mutable Mutex mutex_;
  absl::flat_hash_map<SessionId, uint64_t> held_ ABSL_GUARDED_BY(mutex_);
  uint64_t held_by_all_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_CORE_INLINE_BUDGET_H_
