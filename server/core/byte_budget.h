#ifndef GPUCMDD_SERVER_CORE_BYTE_BUDGET_H_
#define GPUCMDD_SERVER_CORE_BYTE_BUDGET_H_

// A daemon-wide bound on the bytes of one kind of holding (e.g. what all Submit streams
// hold: Note [Memory the Submit streams hold] in server/rpc/submit_reactor.h). Each
// holder reserves its bytes before it keeps them and gives them back by dropping its
// Reservation; a reservation that would pass the limit is RESOURCE_EXHAUSTED naming the
// limit's configuration field.
//
// Thread-safety: all methods may be called from any thread; a Reservation may be dropped
// on any thread, and must be dropped before the budget is destroyed.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace gpucmd {

class ByteBudget {
 public:
  // Bytes held until the reservation is dropped (or moved from).
  class Reservation {
   public:
    Reservation(Reservation&& other) noexcept
        : budget_(std::exchange(other.budget_, nullptr)), bytes_(other.bytes_) {}
    Reservation& operator=(Reservation&& other) noexcept {
      std::swap(budget_, other.budget_);
      std::swap(bytes_, other.bytes_);
      return *this;
    }
    ~Reservation() {
      if (budget_ != nullptr) budget_->held_.fetch_sub(bytes_, std::memory_order_relaxed);
    }
    uint64_t bytes() const { return budget_ == nullptr ? 0 : bytes_; }

   private:
    friend class ByteBudget;
    Reservation(ByteBudget* budget, uint64_t bytes) : budget_(budget), bytes_(bytes) {}
    ByteBudget* budget_;
    uint64_t bytes_;
  };

  // `limit`: the most bytes held at once, all holders together; `limit_name`: the
  // configuration field that sets it, named in refusals; `holders`: who holds them, as
  // refusals say it (e.g. "Submit streams").
  ByteBudget(uint64_t limit, std::string limit_name, std::string holders)
      : limit_(limit), limit_name_(std::move(limit_name)), holders_(std::move(holders)) {}
  ByteBudget(const ByteBudget&) = delete;
  ByteBudget& operator=(const ByteBudget&) = delete;

  // `bytes` more for `what` (e.g. "this batch"), or RESOURCE_EXHAUSTED when they would
  // pass the limit; nothing is reserved then.
  absl::StatusOr<Reservation> Reserve(uint64_t bytes, absl::string_view what) {
    uint64_t held = held_.load(std::memory_order_relaxed);
    do {
      if (bytes > limit_ - std::min(held, limit_)) {
        return absl::ResourceExhaustedError(
            absl::StrCat(holders_, " hold ", held, " bytes in the daemon; ", what, "'s ",
                         bytes, " more would pass ", limit_name_, " (", limit_, ")"));
      }
    } while (!held_.compare_exchange_weak(held, held + bytes, std::memory_order_relaxed));
    return Reservation(this, bytes);
  }

  // Bytes held now, all holders together.
  uint64_t held() const { return held_.load(std::memory_order_relaxed); }

 private:
  const uint64_t limit_;
  const std::string limit_name_;
  const std::string holders_;
  std::atomic<uint64_t> held_{0};
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_CORE_BYTE_BUDGET_H_
