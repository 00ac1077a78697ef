#ifndef GPUCMDD_DRIVER_LAUNCH_H_
#define GPUCMDD_DRIVER_LAUNCH_H_

// What the server hands a driver for a launch, and how the driver reports its end.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "driver/tensor_map.h"
#include "driver/types.h"

namespace gpucmd {

// What kernels printed (printf): a launch's, in the CPU driver's executor; a
// session's, as the driver adds each launch's when it completes, until the session's
// next Synchronize takes it. Keeps at most `max_bytes`, the last line then saying that
// more was cut.
//
// Thread-safety: every method may be called from any thread.
class KernelOutput {
 public:
  KernelOutput(size_t max_bytes, std::string cut_note)
      : max_bytes_(max_bytes), cut_note_("\n" + std::move(cut_note) + "\n") {}

  void Append(absl::string_view text) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (text.empty() || cut_) return;
    if (text_.size() + text.size() + cut_note_.size() > max_bytes_) {
      text_.append(cut_note_);
      cut_ = true;
      return;
    }
    text_.append(text.data(), text.size());
  }

  // What was printed, and starts afresh.
  std::string Take() {
    std::lock_guard<std::mutex> lock(mutex_);
    cut_ = false;
    return std::exchange(text_, std::string());
  }

 private:
  const size_t max_bytes_;
  const std::string cut_note_;
  std::mutex mutex_;
  std::string text_;
  bool cut_ = false;
};

// How an enqueued launch ended, filled in by the driver when the kernel completes (or
// cannot run). The server keeps it with the launch's output buffers, so a later read
// reports a failed launch instead of returning stale bytes, and with the launch's
// logical stream, whose next Synchronize reports it. A driver that sets it reports the
// failure there only, not at the stream's Synchronize: a stream that several sessions
// share must not hand one session's failure to another. (A driver whose failures
// corrupt the whole context, as a GPU's do, sets none: DeviceHealth reports those.)
//
// Thread-safety: Set from the driver's stream thread, read from any thread.
class LaunchOutcome {
 public:
  void Set(absl::Status status) {
    std::lock_guard<std::mutex> lock(mutex_);
    status_ = std::move(status);
  }
  absl::Status status() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return status_;
  }

 private:
  mutable std::mutex mutex_;
  absl::Status status_;
};

// A launch with every handle resolved: what a driver's LaunchArgs is built from.
// `slots` holds one 8-byte value per kernel parameter (a device address, or a scalar in
// its low bytes), as CUDA's kernelParams do.
struct LaunchSpec {
  // Who asked for the launch (the server's session). A driver that hands several
  // launches to the device as one unit, whose failure costs them all their outcome (the
  // CPU driver's executor messages), groups only one owner's.
  uint64_t owner = 0;
  Dim3 block;
  uint32_t dynamic_shared_memory_bytes = 0;
  std::vector<uint64_t> slots;
  // The argument buffers, each from its argument's offset to the buffer's end: all of
  // device memory the launch is entitled to touch (the CPU driver lets it touch nothing
  // else).
  std::vector<DeviceResource> buffers;
  // Tensor-map arguments (CUDA): the driver encodes each into its argument's place.
  std::vector<ResolvedTensorMap> tensor_maps;
  std::shared_ptr<LaunchOutcome> outcome;
  // Where what the kernel prints goes (null: nowhere); drivers that collect it add it.
  std::shared_ptr<KernelOutput> output;
};

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_LAUNCH_H_
