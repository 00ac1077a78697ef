#ifndef GPUCMDD_SERVER_CORE_SERVER_CORE_H_
#define GPUCMDD_SERVER_CORE_SERVER_CORE_H_

// The driver-independent core the gRPC service talks to: one DeviceWorker per device,
// the session registry, and the reaper that reclaims sessions whose client went away
// (lease broken past its grace, or idle past the timeout) and, in the daemon, gives
// freed memory back (Note [Freed memory goes back] in base/freed_memory.h).
//
// Thread-safety: all methods may be called from any thread. Stop (or the destructor)
// stops the reaper, then every device, finishing queued work.

#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/freed_memory.h"
#include "base/mutex.h"
#include "server/core/byte_budget.h"
#include "server/core/descriptor_handoffs.h"
#include "server/core/device_worker.h"
#include "server/core/inline_budget.h"
#include "server/core/session_registry.h"
#include "server/command/payload_pool.h"
#include "server/core/shared_memory.h"

namespace gpucmd {

class ServerCore {
 public:
  struct Options {
    std::chrono::milliseconds idle_timeout{600'000};
    std::chrono::milliseconds lease_grace{5'000};
    std::chrono::milliseconds reap_interval{200};
    SessionLimits session_limits;
    // Inline payload bytes one session's writes and reads may hold (Note [Inline payload
    // budget]); 0: no limit.
    uint64_t inline_bytes_per_session = uint64_t{1} << 30;
    // ... and all sessions together; 0: no limit.
    uint64_t inline_bytes = uint64_t{4} << 30;
    // Bytes all Submit streams together may hold (Note [Memory the Submit streams hold]
    // in server/rpc/submit_reactor.h).
    uint64_t submit_bytes = uint64_t{1} << 30;
    SharedMemoryTable::Limits shared_memory;
    // Shared with the devices' Commands (Note [Payload pool]); null: a pool of this
    // core's own, keeping up to 64 MiB.
    std::shared_ptr<PayloadPool> payloads;
    // Set: every freed_memory_look_interval the reaper gives back the freed memory
    // malloc holds beyond this many bytes, once it stayed so with the devices quiet (Note
    // [Freed memory goes back]). Unset: the process's memory is its owner's business.
    std::optional<uint64_t> keep_freed_bytes;
    std::chrono::milliseconds freed_memory_look_interval{5'000};
  };

  ServerCore(std::vector<std::unique_ptr<DeviceWorker>> workers, const Options& options);
  ~ServerCore();
  ServerCore(const ServerCore&) = delete;
  ServerCore& operator=(const ServerCore&) = delete;

  int device_count() const { return static_cast<int>(workers_.size()); }
  DeviceWorker& worker(int device) { return *workers_[device]; }
  const DeviceWorker& worker(int device) const { return *workers_[device]; }
  SessionRegistry& sessions() { return sessions_; }
  const SessionRegistry& sessions() const { return sessions_; }
  SharedMemoryTable& shared_memory() { return shared_memory_; }
  const SharedMemoryTable& shared_memory() const { return shared_memory_; }
  // Descriptors handed over on the descriptor socket, waiting to be registered.
  DescriptorHandoffs& handoffs() { return handoffs_; }
  // Where write payloads are parsed into.
  PayloadPool& payloads() { return *payloads_; }
  // The same, for what holds pooled memory past this core's life (a read's bytes that
  // gRPC still sends).
  std::shared_ptr<PayloadPool> shared_payloads() const { return payloads_; }
  InlineBudget& inline_budget() { return inline_budget_; }
  ByteBudget& submit_budget() { return submit_budget_; }
  const ByteBudget& submit_budget() const { return submit_budget_; }

  // Frees everything `session` holds: its shared-memory regions at once, its device
  // memory on its device. Never lost: when the device's queue is full, the reaper
  // retries.
  void Reclaim(const SessionInfo& session);

  // Empty when every device is ready; otherwise what is not.
  std::string NotReadyReason() const;

  // Every device answers its queued and new work `status` without running it.
  void FailQueuedWork(const absl::Status& status);

  // Every open session with what it holds on its device, as of the device's last
  // finished task (a session that has done nothing there yet holds nothing).
  struct SessionWithUsage {
    SessionInfo info;
    SessionUsage usage;
  };
  std::vector<SessionWithUsage> SessionsWithUsage() const;

  // True when no device has work queued, running or completing.
  bool Quiet() const;

  // Empty when every device thread makes progress (DeviceWorker::MakesProgress);
  // otherwise which device does not.
  std::string WedgedDevices(std::chrono::steady_clock::duration within) const;

  void Stop();
  // Stop, waiting until `deadline` at most. False when a device was still busy then (a
  // task inside a driver call that cannot be stopped, such as a GPU kernel's
  // synchronisation): the stop goes on on a thread of its own, which destruction waits
  // for, so a caller that cannot wait exits the process instead.
  bool StopBy(std::chrono::steady_clock::time_point deadline);

 private:
  void RunReaper();
  // One look of the releaser, when one is due.
  void LookAtFreedMemory(std::chrono::steady_clock::time_point now);
  absl::Status SubmitReclaim(const SessionInfo& session);

  std::vector<std::unique_ptr<DeviceWorker>> workers_;
  const Options options_;
  SessionRegistry sessions_;
  InlineBudget inline_budget_;
  ByteBudget submit_budget_;
  SharedMemoryTable shared_memory_;
  DescriptorHandoffs handoffs_{std::chrono::seconds(30), 256, 32};
  const std::shared_ptr<PayloadPool> payloads_;
  Mutex mutex_;
  CondVar wake_;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::vector<SessionInfo> unreclaimed_ ABSL_GUARDED_BY(mutex_);
  // Used by the reaper only.
  std::optional<FreedMemoryReleaser> freed_memory_;
  std::chrono::steady_clock::time_point next_freed_memory_look_;
  std::thread reaper_;
  std::future<void> stopping_late_;  // StopBy's stop, when it outlived its deadline
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_CORE_SERVER_CORE_H_
