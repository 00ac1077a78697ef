#ifndef GPUCMDD_DRIVER_CPU_STREAM_GATE_H_
#define GPUCMDD_DRIVER_CPU_STREAM_GATE_H_

// Test helper: a gate that holds a CPU stream's worker until opened, so tests control
// when device work completes.
//
// Thread-safety: Block and Open from any thread.

#include "base/mutex.h"
#include "driver/cpu/cpu_stream.h"

namespace gpucmd {

class StreamGate {
 public:
  // Enqueues a work item on `stream` that waits for the gate.
  void Block(CpuStream& stream) {
    stream.Enqueue([this] {
      Wait();
      return absl::OkStatus();
    });
  }

  // Waits on the calling thread until the gate opens.
  void Wait() {
    MutexLock lock(&mutex_);
    opened_.Await(&mutex_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return open_; });
  }

  void Open() {
    MutexLock lock(&mutex_);
    open_ = true;
    opened_.NotifyAll();
  }

 private:
  Mutex mutex_;
  CondVar opened_;
  bool open_ ABSL_GUARDED_BY(mutex_) = false;
};

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_CPU_STREAM_GATE_H_
