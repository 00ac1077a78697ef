#ifndef GPUCMDD_DRIVER_CUDA_CUDA_DRIVER_H_
#define GPUCMDD_DRIVER_CUDA_CUDA_DRIVER_H_

// The CUDA driver: one device's primary context, a pool of streams with priorities,
// device pages from the stream-ordered allocator (cuMemAllocAsync; cuMemAlloc where the
// device has no memory pools), pinned staging memory from cuMemAllocHost, copies with
// cuMemcpy{HtoD,DtoH,DtoD}Async and cuMemcpy2DAsync (as the Command's layout decides),
// and launches of NVRTC-built modules (<module_directory>/<kernel id>.cubin, its entry
// point in <kernel id>.entry), loaded once per context.
//
// Thread-safety: the backend's methods may be called from any thread (each makes the
// device's context current on the calling thread); its Context belongs to the device
// thread.

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "driver/cuda/cuda_api.h"
#include "driver/device_description.h"
#include "driver/driver.h"
#include "driver/event_pool.h"
#include "driver/module_store.h"

namespace gpucmd {

class CudaStream;

using CudaEventPool = EventPool<CUevent>;

// An event recorded on a CUDA stream; copies share the underlying CUevent.
class CudaEvent {
 public:
  CudaEvent() = default;
  absl::Status Wait() const;
  bool IsComplete() const;

 private:
  friend class CudaStream;
  struct Handle;
  std::shared_ptr<Handle> handle_;  // null: complete
  // Set when no event could be recorded and waiting for the stream instead failed:
  // what Wait returns.
  absl::Status error_;
};

class CudaStream {
 public:
  using Event = CudaEvent;
  using Signal = CudaStream*;

  CudaStream(const CudaApi* api, CUcontext context, CUstream stream,
             std::shared_ptr<CudaEventPool> events)
      : api_(api), context_(context), stream_(stream), events_(std::move(events)) {}
  ~CudaStream();
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  Event RecordEvent();
  absl::Status WaitEvent(const Event& event);
  absl::Status Synchronize();
  Signal signal() { return this; }
  CUstream get() const { return stream_; }
  // Makes the stream's context current on the calling thread.
  absl::Status Enter() const;
  const CudaApi& api() const { return *api_; }

 private:
  const CudaApi* api_;
  CUcontext context_;
  CUstream stream_;
  std::shared_ptr<CudaEventPool> events_;
};

struct CudaLaunchArgs {
  explicit CudaLaunchArgs(LaunchSpec spec) : spec(std::move(spec)) {}
  LaunchSpec spec;
};

struct CudaContext {
  const CudaApi* api = nullptr;
  CUcontext context = nullptr;
  std::optional<ModuleStore> module_store;
  // Loaded modules' functions by kernel id.
  absl::flat_hash_map<std::string, CUfunction> functions;
  std::vector<CUmodule> modules;
  // Where collectives run; WaitOutsideStreams waits on it.
  CUstream collectives = nullptr;
  // The sticky error that corrupted the context, once DeviceHealth saw one; the
  // backend then resets the context when it goes.
  absl::Status lost;
};

class CudaBackend {
 public:
  using Stream = CudaStream;

  struct Options {
    int ordinal = 0;
    int stream_count = 4;
    std::optional<ModuleStore> modules;  // required to launch kernels
  };

  // UNAVAILABLE when there is no driver or no such device.
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(const Options& options);
  ~CudaBackend();

  int stream_count() const { return static_cast<int>(streams_.size()); }
  CudaStream& stream(int index) { return *streams_[index]; }
  uint64_t capacity_bytes() const { return capacity_bytes_; }
  absl::StatusOr<DeviceResource> AllocateDevice(uint64_t size_bytes);
  void FreeDevice(const DeviceResource& resource);
  absl::StatusOr<HostResource> AllocatePinned(uint64_t size_bytes);
  void FreePinned(const HostResource& resource);
  CudaContext& context() { return context_; }
  const CudaEventPool& event_pool() const { return *events_; }

 private:
  CudaBackend() = default;

  const CudaApi* api_ = nullptr;
  CUdevice device_ = 0;
  uint64_t capacity_bytes_ = 0;
  CudaContext context_;
  std::shared_ptr<CudaEventPool> events_;
  // Pages come from the device's memory pool on this stream, synchronized before they
  // are handed out; null where the device has no memory pools (cuMemAlloc instead).
  CUstream allocation_stream_ = nullptr;
  std::vector<std::unique_ptr<CudaStream>> streams_;
};

struct CudaDriver {
  using Backend = CudaBackend;
  using Stream = CudaStream;
  using Context = CudaContext;
  using LaunchArgs = CudaLaunchArgs;

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
  // Waits for the collectives stream: relocation must not move memory it still uses.
  static absl::Status WaitOutsideStreams(Context& context);
  // UNAVAILABLE with the sticky error once the context is corrupted (a query of the
  // collectives stream returns it, as every call on the context then does).
  static absl::Status DeviceHealth(Context& context);
};

static_assert(Driver<CudaDriver>);

// The parameters of a 2D copy between packed host rows and a pitched device region.
CUDA_MEMCPY2D Pitched2DCopy(const DeviceResource& resource, const CopyLayout& layout,
                            const std::byte* host, bool to_device);

// The CUDA devices of this machine; UNAVAILABLE without a driver.
absl::StatusOr<std::vector<DeviceDescription>> DescribeCudaDevices();

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_CUDA_CUDA_DRIVER_H_
