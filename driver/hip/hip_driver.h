#ifndef GPUCMDD_DRIVER_HIP_HIP_DRIVER_H_
#define GPUCMDD_DRIVER_HIP_HIP_DRIVER_H_

// The HIP driver (AMD GPUs, Debian's libamdhip64): a pool of streams with priorities on
// one device, device pages from hipMalloc, pinned staging memory from hipHostMalloc,
// copies with hipMemcpy{HtoD,DtoH,DtoD}Async and hipMemcpy2DAsync, and launches of
// hiprtc-built code objects (<module_directory>/<kernel id>.hsaco, the entry point in
// <kernel id>.entry) with hipModuleLaunchKernel. LaunchArgs are buffers and scalars only.
//
// Thread-safety: the backend's methods may be called from any thread (each selects the
// device on the calling thread); its Context belongs to the device thread.

#include <hip/hip_runtime_api.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "driver/device_description.h"
#include "driver/driver.h"
#include "driver/event_pool.h"
#include "driver/module_store.h"

namespace gpucmd {

using HipEventPool = EventPool<hipEvent_t>;

class HipEvent {
 public:
  HipEvent() = default;
  absl::Status Wait() const;
  bool IsComplete() const;

 private:
  friend class HipStream;
  struct Handle;
  std::shared_ptr<Handle> handle_;  // null: complete
  // Set when no event could be recorded and waiting for the stream instead failed:
  // what Wait returns.
  absl::Status error_;
};

class HipStream {
 public:
  using Event = HipEvent;
  using Signal = HipStream*;

  HipStream(int device, hipStream_t stream, std::shared_ptr<HipEventPool> events)
      : device_(device), stream_(stream), events_(std::move(events)) {}
  ~HipStream();
  HipStream(const HipStream&) = delete;
  HipStream& operator=(const HipStream&) = delete;

  Event RecordEvent();
  absl::Status WaitEvent(const Event& event);
  absl::Status Synchronize();
  Signal signal() { return this; }
  hipStream_t get() const { return stream_; }
  // Selects the stream's device on the calling thread.
  absl::Status Enter() const;

 private:
  int device_;
  hipStream_t stream_;
  std::shared_ptr<HipEventPool> events_;
};

struct HipLaunchArgs {
  explicit HipLaunchArgs(LaunchSpec spec) : spec(std::move(spec)) {}
  LaunchSpec spec;
};

struct HipContext {
  int device = 0;
  std::optional<ModuleStore> module_store;
  absl::flat_hash_map<std::string, hipFunction_t> functions;
  std::vector<hipModule_t> modules;
  // The sticky error that corrupted the device's context, once DeviceHealth saw one;
  // the backend then resets the device when it goes.
  absl::Status lost;
};

class HipBackend {
 public:
  using Stream = HipStream;

  struct Options {
    int ordinal = 0;
    int stream_count = 4;
    std::optional<ModuleStore> modules;  // required to launch kernels
  };

  // UNAVAILABLE when there is no such AMD GPU.
  static absl::StatusOr<std::unique_ptr<HipBackend>> Create(const Options& options);
  ~HipBackend();

  int stream_count() const { return static_cast<int>(streams_.size()); }
  HipStream& stream(int index) { return *streams_[index]; }
  uint64_t capacity_bytes() const { return capacity_bytes_; }
  absl::StatusOr<DeviceResource> AllocateDevice(uint64_t size_bytes);
  void FreeDevice(const DeviceResource& resource);
  absl::StatusOr<HostResource> AllocatePinned(uint64_t size_bytes);
  void FreePinned(const HostResource& resource);
  HipContext& context() { return context_; }
  const HipEventPool& event_pool() const { return *events_; }

 private:
  HipBackend() = default;

  uint64_t capacity_bytes_ = 0;
  HipContext context_;
  std::shared_ptr<HipEventPool> events_;
  std::vector<std::unique_ptr<HipStream>> streams_;
  // Pages come from the device's memory pool on this stream, synchronized before they
  // are handed out; null where the device has no memory pools (hipMalloc instead).
  hipStream_t allocation_stream_ = nullptr;
};

struct HipDriver : DriverDefaults {
  using Backend = HipBackend;
  using Stream = HipStream;
  using Context = HipContext;
  using LaunchArgs = HipLaunchArgs;

  static Bytes PinnedBytes(PinnedBinding binding, HostResource resource, uint64_t size);
  static absl::Status CopyToHost(const DeviceResource& resource, const CopyLayout& layout,
                                 Bytes& bytes, Stream& stream);
  static absl::Status CopyToDevice(const DeviceResource& resource, const CopyLayout& layout,
                                   absl::Span<const std::byte> data, Stream& stream);
  static absl::Status CopyOnDevice(const DeviceResource& source, const DeviceResource& target,
                                   Stream::Signal signal);
  // Refusals (a missing module, too many resources) come back at once. A kernel that
  // faults on the device corrupts the context instead: DeviceHealth reports it and the
  // server resets the device, so the launch's outcome is never left stale; it is not
  // set here.
  static absl::Status Launch(Context& context, Stream& stream, const KernelId& kernel,
                             Dim3 grid, LaunchArgs& args);
  // UNAVAILABLE with the sticky error once the device's context is corrupted.
  static absl::Status DeviceHealth(Context& context);
};

static_assert(Driver<HipDriver>);

// The AMD GPUs of this machine; UNAVAILABLE "no HIP device" without one.
absl::StatusOr<std::vector<DeviceDescription>> DescribeHipDevices();

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_HIP_HIP_DRIVER_H_
