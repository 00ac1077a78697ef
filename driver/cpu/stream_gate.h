#ifndef GPUCMDD_DRIVER_CPU_STREAM_GATE_H_
#define GPUCMDD_DRIVER_CPU_STREAM_GATE_H_

// Test helper: a gate that holds a CPU stream's worker until opened, so tests control
// when device work completes.
//
// Thread-safety: Block and Open from any thread. Destroying the gate opens it and waits
// until the work items it blocked are past it.

#include "base/mutex.h"
#include "driver/cpu/cpu_stream.h"

namespace gpucmd {

class StreamGate {
 public:
  // Enqueues a work item on `stream` that waits for the gate.
  void Block(CpuStream& stream) {
    {
      MutexLock lock(&mutex_);
      ++blocked_;
    }
    stream.Enqueue([this] {
      Wait();
      MutexLock lock(&mutex_);
      --blocked_;
      opened_.NotifyAll();
      return absl::OkStatus();
    });
  }

  ~StreamGate() {
    Open();
    MutexLock lock(&mutex_);
    opened_.Await(&mutex_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return blocked_ == 0; });
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
  int blocked_ ABSL_GUARDED_BY(mutex_) = 0;  // work items not past the gate yet
};

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_CPU_STREAM_GATE_H_
