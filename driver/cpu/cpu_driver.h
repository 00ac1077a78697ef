#ifndef GPUCMDD_DRIVER_CPU_CPU_DRIVER_H_
#define GPUCMDD_DRIVER_CPU_CPU_DRIVER_H_

// The CPU driver: a faithful model of an asynchronous device on the host, so the whole
// daemon runs and is tested without a GPU. Device memory is a memfd mapping of the
// configured capacity (CpuDeviceMemory); streams are worker threads (CpuStream); copies
// and relocations are enqueued on them, never run inline.
//
// Thread-safety: CpuBackend's streams and memory may be used from any thread; its
// Context belongs to the device thread.

#include <memory>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "driver/cpu/cpu_device_memory.h"
#include "driver/cpu/cpu_stream.h"
#include "driver/cpu/kernel_executor.h"
#include "driver/driver.h"
#include "driver/module_store.h"

namespace gpucmd {

// What a CPU launch hands a kernel: the resolved argument slots (buffer addresses and
// scalars) and the launch shape.
struct CpuLaunchArgs {
  explicit CpuLaunchArgs(LaunchSpec spec) : spec(std::move(spec)) {}
  LaunchSpec spec;
};

// Note [Launch coalescing]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// Consecutive launches of one owner on a stream, with nothing enqueued between them,
// become one work item: the stream's worker hands them to the executor in one message
// (KernelExecutor::LaunchAll), so they run back to back for one round trip. A launch
// joins the stream's open group only while that group is the stream's last work item,
// has not started and is its owner's, so stream order is kept, and a kernel that kills
// the executor costs the outcome of the launches before it in its message only to its
// own owner; an event recorded after any of its launches completes once the whole group
// ran (later, never earlier, than needed). A device task wakes the worker only once its
// launches are all queued (Note [Deferred wake-ups] in base/deferred_wakeups.h), so a
// batch's run of launches is one group rather than the few queued before the worker woke.
class PendingLaunches {
 public:
  // The group of `owner`'s launches that is the stream's work item number `position`.
  PendingLaunches(uint64_t owner, uint64_t position) : owner_(owner), position_(position) {}

  // Adds `owner`'s launch when the group is that owner's, has not started, is still the
  // stream's last work item (`stream_enqueued` is the stream's count) and has room,
  // taking `request`; false otherwise, leaving it as it was.
  bool TryAdd(uint64_t owner, uint64_t stream_enqueued, KernelExecutor::Request&& request,
              std::shared_ptr<LaunchOutcome> outcome, std::shared_ptr<KernelOutput> output);

  // Runs the group (the stream's worker): each launch's outcome is set; the first error
  // of a launch that has none, for the stream's next Synchronize (a failure with an
  // outcome is its owner's alone: LaunchOutcome in driver/launch.h).
  absl::Status Run(KernelExecutor& executor);

 private:
  const uint64_t owner_;
  const uint64_t position_;
  Mutex mutex_;
  bool started_ ABSL_GUARDED_BY(mutex_) = false;
  std::vector<KernelExecutor::Request> requests_ ABSL_GUARDED_BY(mutex_);
  std::vector<std::shared_ptr<LaunchOutcome>> outcomes_ ABSL_GUARDED_BY(mutex_);
  std::vector<std::shared_ptr<KernelOutput>> outputs_ ABSL_GUARDED_BY(mutex_);
};

// Whatever launching needs on the CPU device: the store of compiled modules (shared
// objects) and the executor processes that run them, one per stream, so that kernels
// on different streams run side by side (as a GPU runs kernels of several streams)
// and one session's long kernel does not hold up another session's stream.
struct CpuContext {
  int ordinal = 0;
  std::optional<ModuleStore> modules;
  // Modules found in the store so far: kernel id -> shared object (no file lookups on
  // the launch path once a kernel ran).
  absl::flat_hash_map<std::string, KernelExecutor::ModulePath> module_paths;
  // Per stream (started on its first launch); empty: this backend runs no kernels.
  std::vector<std::unique_ptr<KernelExecutor>> executors;
  // Per stream: its latest group of launches (Note [Launch coalescing]).
  std::vector<std::shared_ptr<PendingLaunches>> pending_launches;
};

class CpuBackend {
 public:
  using Stream = CpuStream;

  struct Options {
    int ordinal = 0;
    uint64_t capacity_bytes = uint64_t{4} << 30;
    int stream_count = 4;
    // Kernels: empty executor_path means this backend runs none.
    std::string executor_path;
    std::optional<ModuleStore> modules;  // required to run kernels
    int executor_workers = 2;
    std::chrono::milliseconds kernel_timeout{60'000};
    uint64_t executor_memory_bytes = uint64_t{2} << 30;  // beyond the device's memory
    std::optional<UnixIdentity> executor_identity;     // absent: the daemon's user
  };

  static absl::StatusOr<std::unique_ptr<CpuBackend>> Create(const Options& options);

  int stream_count() const { return static_cast<int>(streams_.size()); }
  CpuStream& stream(int index) { return *streams_[index]; }
  uint64_t capacity_bytes() const { return memory_->capacity_bytes(); }
  absl::StatusOr<DeviceResource> AllocateDevice(uint64_t size_bytes) {
    return memory_->Allocate(size_bytes);
  }
  void FreeDevice(const DeviceResource& resource) { memory_->Free(resource); }
  absl::StatusOr<HostResource> AllocatePinned(uint64_t size_bytes);
  void FreePinned(const HostResource& resource);
  // Kernels and copies run on the host: any host memory is reached directly.
  absl::StatusOr<HostRegistration> RegisterHost(const HostResource&) {
    return HostRegistration();
  }
  CpuContext& context() { return context_; }
  const CpuDeviceMemory& memory() const { return *memory_; }

 private:
  CpuBackend() = default;

  CpuContext context_;
  std::unique_ptr<CpuDeviceMemory> memory_;
  std::unique_ptr<CopyEngine> copies_;  // shared by the streams
  // Declared last: streams finish their work before the memory they copy into goes.
  std::vector<std::unique_ptr<CpuStream>> streams_;
};

struct CpuDriver : DriverDefaults {
  using Backend = CpuBackend;
  using Stream = CpuStream;
  using Context = CpuContext;
  using LaunchArgs = CpuLaunchArgs;

  static Bytes PinnedBytes(PinnedBinding binding, HostResource resource, uint64_t size);
  // Kills the executors: their kernels end, the launches waiting on them fail
  // UNAVAILABLE (the executors are created with the backend, so any thread may).
  static void AbortKernels(CpuContext& context) {
    for (const std::unique_ptr<KernelExecutor>& executor : context.executors) executor->Kill();
  }
  static absl::Status CopyToHost(const DeviceResource& resource, const CopyLayout& layout,
                                 Bytes& bytes, Stream& stream);
  static absl::Status CopyToDevice(const DeviceResource& resource, const CopyLayout& layout,
                                   absl::Span<const std::byte> data, Stream& stream);
  static absl::Status CopyOnDevice(const DeviceResource& source, const DeviceResource& target,
                                   Stream::Signal signal);
  static absl::Status CopyRowsOnDevice(const DeviceResource& source, const DeviceResource& target,
                                       const DeviceCopyLayout& rows, Stream::Signal signal);
  static absl::Status FillOnDevice(const DeviceResource& target, const CopyLayout& layout,
                                   FillPattern pattern, Stream::Signal signal);
  static absl::Status Launch(Context& context, Stream& stream, const KernelId& kernel,
                             Dim3 grid, LaunchArgs& args);
};

static_assert(Driver<CpuDriver>);
// Completions of CPU work are called back, not waited for (Note [Completions called back]
// in server/core/device_worker.h).
static_assert(NotifyingEvent<CpuStream::Event>);

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_CPU_CPU_DRIVER_H_
