#ifndef GPUCMDD_SERVER_COMMAND_DROP_QUEUE_H_
#define GPUCMDD_SERVER_COMMAND_DROP_QUEUE_H_

// Note [Drop queue]
// ~~~~~~~~~~~~~~~~~
// A host->device copy is enqueued, not done: its source bytes must stay alive until the
// stream has executed it. Each stream therefore has a drop queue of the Bytes its copies
// read, double-buffered:
//
//   Push   adds to `staged`.
//   Flush  waits on the fence recorded by the previous flush, frees `pending` (all of
//          its copies were enqueued before that fence, so they have completed), moves
//          `staged` to `pending`, and records a new fence on the stream.
//
// So staged bytes are freed at the earliest one flush later, and only after a fence
// that follows their copy has completed: never before the copy that reads them. A
// queue is sealed (below) when `staged` passes a count or byte threshold (64-bit
// counters); Drain (two flushes) releases everything staged so far, when the device's
// Command goes.
//
// Nothing on the device thread waits for a fence: that would block every session while
// the stream is behind (a long kernel). Synchronize never waits, a queue past its
// thresholds Seals instead of flushing (`staged` joins `pending` under a new fence
// without waiting for the previous one; a later fence on the same stream covers both),
// and ReleaseCompleted, run as upkeep between commands, frees `pending` once its fence
// completed. A queue that holds four times its thresholds, sealed or not, is full: a
// write for its stream waits for room off the device thread (FenceForRoom; Command::
// StagingRoom), which holds the stream's backlog of staged bytes to about 1 GiB (plus
// the one write that took it past the bound). An idle device seals what is staged and
// keeps releasing until nothing is held (CommandInterface::ReclaimWhenIdle), so no
// bytes wait for a next command. Flush and Drain wait: only for the Command's end.
//
// Thread-safety: owned by the device thread, which alone touches it; no lock.

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "driver/bytes.h"

namespace gpucmd {

// When a drop queue asks to be flushed.
struct DropQueueThresholds {
  uint64_t max_entries = 1024;
  uint64_t max_bytes = uint64_t{256} << 20;
};

template <typename Stream>
class DropQueue {
 public:
  using Event = typename Stream::Event;
  using Thresholds = DropQueueThresholds;

  explicit DropQueue(Thresholds thresholds) : thresholds_(thresholds) {}

  void Push(Bytes bytes) {
    staged_bytes_ += bytes.size();
    staged_.push_back(std::move(bytes));
  }

  bool ShouldFlush() const {
    return staged_.size() >= thresholds_.max_entries || staged_bytes_ >= thresholds_.max_bytes;
  }

  // After a Push: a Seal when `staged` passed the thresholds; never waits.
  void SealIfDue(Stream& stream) {
    if (ShouldFlush()) Seal(stream);
  }

  // Four times the thresholds held, sealed or not: writes wait for room.
  bool Full() const {
    return held_entries() >= 4 * thresholds_.max_entries ||
           held_bytes() >= 4 * thresholds_.max_bytes;
  }

  // Nullopt while the queue has room (it frees what completed first); when full, seals
  // what is staged and returns the fence after which ReleaseCompleted frees everything
  // held.
  std::optional<Event> FenceForRoom(Stream& stream) {
    ReleaseCompleted();
    if (!Full()) return std::nullopt;
    Seal(stream);
    return fence_;
  }

  // Waits for the previous fence, frees what it covers, and fences what is staged.
  absl::Status Flush(Stream& stream) {
    if (fence_.has_value()) {
      absl::Status waited = fence_->Wait();
      if (!waited.ok()) return waited;  // keep `pending`: its copies may still read it
    }
    pending_.clear();
    pending_bytes_ = 0;
    pending_.swap(staged_);
    pending_bytes_ = std::exchange(staged_bytes_, 0);
    fence_ = stream.RecordEvent();
    ++flushes_;
    return absl::OkStatus();
  }

  // Flush without waiting: everything staged so far waits for one new fence. With
  // nothing staged there is nothing to fence, and no event is recorded.
  void Seal(Stream& stream) {
    if (staged_.empty()) return;
    if (fence_.has_value() && !fence_->IsComplete()) {
      for (Bytes& bytes : staged_) pending_.push_back(std::move(bytes));
      staged_.clear();
      pending_bytes_ += std::exchange(staged_bytes_, 0);
    } else {
      pending_.clear();
      pending_.swap(staged_);
      pending_bytes_ = std::exchange(staged_bytes_, 0);
    }
    fence_ = stream.RecordEvent();
    ++flushes_;
  }

  // Frees `pending` if its fence has completed; never waits.
  void ReleaseCompleted() {
    if (fence_.has_value() && fence_->IsComplete()) {
      pending_.clear();
      pending_bytes_ = 0;
    }
  }

  // Two flushes: everything pushed so far is released.
  absl::Status Drain(Stream& stream) {
    absl::Status first = Flush(stream);
    if (!first.ok()) return first;
    return Flush(stream);
  }

  uint64_t staged_entries() const { return staged_.size(); }
  uint64_t held_entries() const { return staged_.size() + pending_.size(); }
  uint64_t held_bytes() const { return staged_bytes_ + pending_bytes_; }
  uint64_t flushes() const { return flushes_; }

 private:
  const Thresholds thresholds_;
  std::vector<Bytes> staged_;
  std::vector<Bytes> pending_;
  uint64_t staged_bytes_ = 0;
  uint64_t pending_bytes_ = 0;
  uint64_t flushes_ = 0;
  std::optional<Event> fence_;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_COMMAND_DROP_QUEUE_H_
