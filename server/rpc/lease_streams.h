#ifndef GPUCMDD_SERVER_RPC_LEASE_STREAMS_H_
#define GPUCMDD_SERVER_RPC_LEASE_STREAMS_H_

// The open lease streams (KeepAlive), so that a daemon shutting down ends them at once
// rather than waiting for clients that hold them for as long as they live.
//
// Thread-safety: all methods may be called from any thread.

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "base/mutex.h"

namespace gpucmd {

// A stream that can be ended from outside its own callbacks.
class LeaseStream {
 public:
  virtual ~LeaseStream() = default;
  // Ends the stream with `status` unless it ended already.
  virtual void End(const absl::Status& status) = 0;
};

class LeaseStreams {
 public:
  void Add(LeaseStream* stream) {
    MutexLock lock(&mutex_);
    if (closed_) {
      stream->End(closed_status_);
      return;
    }
    streams_.insert(stream);
  }
  void Remove(LeaseStream* stream) {
    MutexLock lock(&mutex_);
    streams_.erase(stream);
  }
  // Ends every open stream with `status`, and every stream opened from now on.
  void EndAll(const absl::Status& status) {
    MutexLock lock(&mutex_);
    closed_ = true;
    closed_status_ = status;
    for (LeaseStream* stream : streams_) stream->End(status);
  }

 private:
  Mutex mutex_;
  absl::flat_hash_set<LeaseStream*> streams_ ABSL_GUARDED_BY(mutex_);
  bool closed_ ABSL_GUARDED_BY(mutex_) = false;
  absl::Status closed_status_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_RPC_LEASE_STREAMS_H_
