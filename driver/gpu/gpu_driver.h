#ifndef GPUCMDD_DRIVER_GPU_GPU_DRIVER_H_
#define GPUCMDD_DRIVER_GPU_GPU_DRIVER_H_

// Note [One GPU driver]
// ~~~~~~~~~~~~~~~~~~~~~
// The CUDA and HIP drivers are the same logic over two vendor APIs: one device context,
// a pool of streams with priorities (stream 0 highest: it carries relocation copies),
// events from a per-context pool, device pages from the stream-ordered allocator on an
// allocation stream (or the plain allocator where the device has no memory pools, with
// the pool keeping freed pages for reuse), pinned staging memory, contiguous and pitched
// copies as the Command's layout decides, modules loaded from the module store once per
// context, a collectives stream that WaitOutsideStreams waits for, and device health
// read from it (a sticky error corrupts the context; the backend resets it when it
// goes). GpuDriver<V> is that logic, written once; V, a vendor leaf (driver/cuda,
// driver/hip), wraps its API's calls one by one and is the only code that sees the
// vendor's headers. Each leaf names its driver: `using CudaDriver = GpuDriver<CudaVendor>`.
//
// Note [Waiting for the GPU without spinning]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The server's waits are called back (Note [Completions called back on a GPU]); a thread
// that still waits for an event (a drop queue's flush, a test) blocks. A thread that
// synchronizes with an event busy-waits, by default, until the device gets
// there (cuEventSynchronize, as CUDA documents; hipEventSynchronize, whose blocking flag
// HIP documents as "waiting will yield CPU"): a completion thread waiting for a
// session's 50 ms kernel would burn a CPU for 50 ms, one per session waiting, taking the
// CPUs the daemon's other threads and the clients need. So the vendors create events for
// blocking waits (CU_EVENT_BLOCKING_SYNC, hipEventBlockingSync), where the thread sleeps
// until the device wakes it. Being woken adds latency (an interrupt and a wake-up), so
// GpuEvent::Wait first polls the event for kPollBeforeSleeping: a wait that ends sooner
// (a Synchronize with little or nothing queued, a copy of a few MiB) is answered as fast
// as a busy-wait would, and a longer one costs that much CPU before it sleeps, paying the
// wake-up on top of a wait several times its length. Whole-stream synchronizations (an
// allocation, a relocation's copies) are brief and the device thread's own; they wait as
// the context schedules them.
//
// Note [Completions called back on a GPU]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A wait for the device need not hold a thread at all: GpuEvent::OnComplete has the
// runtime say when the event completed, so the server's completions are called back
// (Note [Completions called back] in server/core/device_worker.h) as the CPU driver's
// are, and however many sessions wait on long kernels, no completion thread is held by
// one. Each stream has a notice stream beside it, which waits for the event
// (cuStreamWaitEvent) and then runs a runtime callback (cuStreamAddCallback,
// hipStreamAddCallback): the stream's own work never waits for a callback, nor a callback
// for work queued after its event. The runtime calls back on a thread of its own that
// must not call the API, so the callback only relays to the backend's notice thread
// (driver/gpu/notice_thread.h), which runs what the server hooked on the event. The
// runtime calls back after a device error too; the completion's wait then reports it.
// The price is latency on brief waits: the runtime's callback thread and the notice
// thread each wake once the event completed, where a completion thread polling the event
// saw it at once (cuda_bench's BM_AgainstEchoLaunchThenSynchronize measures a launch and
// its Synchronize on a GPU).
//
// Thread-safety: the backend's methods may be called from any thread (each enters the
// device on the calling thread); its Context belongs to the device thread; events may
// be waited for and dropped on any thread, and hooked (OnComplete) while their stream
// lives.

#include <chrono>
#include <concepts>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "base/file.h"
#include "base/status_macros.h"
#include "driver/driver.h"
#include "driver/event_pool.h"
#include "driver/gpu/notice_thread.h"
#include "driver/module_store.h"

namespace gpucmd {

// A pitched copy between packed host rows and a region of device memory.
struct PitchedCopy {
  std::byte* host = nullptr;
  DeviceAddress device = 0;
  uint64_t width_bytes = 0;
  uint64_t height = 0;
  uint64_t device_stride_bytes = 0;
  bool to_device = false;
};

// A pitched copy between two regions of device memory: `height` rows of `width_bytes`,
// each side's rows its own stride apart.
struct DeviceRowsCopy {
  DeviceAddress source = 0;
  uint64_t source_stride_bytes = 0;
  DeviceAddress target = 0;
  uint64_t target_stride_bytes = 0;
  uint64_t width_bytes = 0;
  uint64_t height = 0;
};

// The heap half of a vendor's AddCallback: HoldCallback moves `callback` to the heap for
// the runtime; RunHeldCallback<Args...>, a function of the runtime's callback signature
// (its Args, then the data pointer), runs and frees it; UnholdCallback gives it back
// when the runtime refused it.
using HeldCallback = absl::AnyInvocable<void()>;

inline void* HoldCallback(HeldCallback& callback) { return new HeldCallback(std::move(callback)); }

inline void UnholdCallback(void* held, HeldCallback& callback) {
  std::unique_ptr<HeldCallback> taken(static_cast<HeldCallback*>(held));
  callback = std::move(*taken);
}

template <typename... Ignored>
void RunHeldCallback(Ignored..., void* held) {
  std::unique_ptr<HeldCallback> taken(static_cast<HeldCallback*>(held));
  (*taken)();
}

// The stream and event priorities a device offers: numerically, least and greatest.
struct StreamPriorities {
  int least = 0;
  int greatest = 0;
};

// What a vendor leaf provides: one device of its API, as a cheap copyable value (copies
// name the same device). Every call but Open and Enter assumes the device was entered
// on the calling thread; each returns the vendor's error as a Status (one conversion per
// vendor), sticky errors as UNAVAILABLE.
template <typename V>
concept GpuVendor = std::copyable<V> &&
    requires(const V& vendor, typename V::StreamHandle stream, typename V::EventHandle event,
             typename V::ModuleHandle module, typename V::FunctionHandle function, int ordinal,
             int priority, uint64_t size, DeviceAddress address, std::byte* host,
             const std::string& text, const PitchedCopy& pitched, const DeviceRowsCopy& rows,
             Dim3 grid, const LaunchSpec& spec,
             std::vector<void*>& params, bool reset, absl::AnyInvocable<void()>& callback,
             FillPattern pattern, const CopyLayout& layout) {
  { V::Open(ordinal) } -> std::same_as<absl::StatusOr<V>>;
  { vendor.memory_capacity_bytes() } -> std::same_as<uint64_t>;
  { vendor.Enter() } -> std::same_as<absl::Status>;
  // Streams and events.
  { vendor.StreamPriorityRange() } -> std::same_as<absl::StatusOr<StreamPriorities>>;
  { vendor.CreateStream(priority) } -> std::same_as<absl::StatusOr<typename V::StreamHandle>>;
  vendor.DestroyStream(stream);
  { vendor.SynchronizeStream(stream) } -> std::same_as<absl::Status>;
  // OK, or the sticky error that corrupted the context (UNAVAILABLE).
  { vendor.StickyError(stream) } -> std::same_as<absl::Status>;
  // An event for blocking waits (Note [Waiting for the GPU without spinning]).
  { vendor.CreateEvent() } -> std::same_as<absl::StatusOr<typename V::EventHandle>>;
  vendor.DestroyEvent(event);
  { vendor.RecordEvent(event, stream) } -> std::same_as<absl::Status>;
  { vendor.StreamWaitEvent(stream, event) } -> std::same_as<absl::Status>;
  { vendor.SynchronizeEvent(event) } -> std::same_as<absl::Status>;
  { vendor.EventDone(event) } -> std::same_as<bool>;
  // Has the runtime call `callback` once the work enqueued on `stream` so far ran, or
  // failed, on a thread of its own where it must not call the API; on an error the
  // callback is left in `callback`, not called (HoldCallback and its kin).
  { vendor.AddCallback(stream, callback) } -> std::same_as<absl::Status>;
  // Memory.
  { vendor.MemoryPoolsSupported() } -> std::same_as<absl::StatusOr<bool>>;
  { vendor.KeepPoolMemory() } -> std::same_as<absl::Status>;
  { vendor.Allocate(size) } -> std::same_as<absl::StatusOr<DeviceAddress>>;
  { vendor.AllocateAsync(size, stream) } -> std::same_as<absl::StatusOr<DeviceAddress>>;
  vendor.Free(address);
  vendor.FreeAsync(address, stream);
  { vendor.AllocateHost(size) } -> std::same_as<absl::StatusOr<std::byte*>>;
  vendor.FreeHost(host);
  // Page-locks `size` bytes at `host` for every context and maps them for DMA, until
  // UnregisterHost(host).
  { vendor.RegisterHost(host, size) } -> std::same_as<absl::Status>;
  vendor.UnregisterHost(host);
  // Copies, enqueued on `stream`.
  { vendor.CopyToDevice(address, host, size, stream) } -> std::same_as<absl::Status>;
  { vendor.CopyToHost(host, address, size, stream) } -> std::same_as<absl::Status>;
  { vendor.CopyPitched(pitched, stream) } -> std::same_as<absl::Status>;
  { vendor.CopyOnDevice(address, address, size, stream) } -> std::same_as<absl::Status>;
  { vendor.CopyRowsOnDevice(rows, stream) } -> std::same_as<absl::Status>;
  // `layout`'s rows from `address` set to `pattern`, enqueued on `stream`.
  { vendor.Fill(address, layout, pattern, stream) } -> std::same_as<absl::Status>;
  // Modules and launches. `params` point at the launch's slots; a vendor may put
  // its own argument encodings (CUDA's tensor maps) in their place.
  { vendor.LoadModule(text) } -> std::same_as<absl::StatusOr<typename V::ModuleHandle>>;
  { vendor.GetFunction(module, text) } -> std::same_as<absl::StatusOr<typename V::FunctionHandle>>;
  vendor.UnloadModule(module);
  { vendor.Launch(function, grid, spec, params, stream) } -> std::same_as<absl::Status>;
  // Lets the device go (the last backend on it is gone): `reset` when its context is
  // corrupted, so that the next backend gets a fresh one.
  vendor.Release(reset);
};

template <GpuVendor V>
class GpuStream;

// An event recorded on a GPU stream; copies share the underlying vendor event, which
// goes back to its pool with the last copy.
template <GpuVendor V>
class GpuEvent {
 public:
  GpuEvent() = default;

  // How long Wait polls before it sleeps (Note [Waiting for the GPU without spinning]).
  static constexpr std::chrono::microseconds kPollBeforeSleeping{200};

  absl::Status Wait() const {
    if (handle_ == nullptr) return error_;
    RETURN_IF_ERROR(handle_->vendor.Enter());
    const auto sleep_from = std::chrono::steady_clock::now() + kPollBeforeSleeping;
    do {
      if (handle_->vendor.EventDone(handle_->event)) return absl::OkStatus();
    } while (std::chrono::steady_clock::now() < sleep_from);
    // Sleeps until the device completes the event, or returns its error.
    return handle_->vendor.SynchronizeEvent(handle_->event);
  }

  bool IsComplete() const {
    if (handle_ == nullptr) return true;
    return handle_->vendor.Enter().ok() && handle_->vendor.EventDone(handle_->event);
  }

  // Runs `callback` on the backend's notice thread once the event completed or its device
  // failed, or at once on the calling thread when it is complete (or cannot be entered,
  // which its Wait then reports). Note [Completions called back on a GPU].
  void OnComplete(absl::AnyInvocable<void()> callback) const {
    if (handle_ == nullptr || !handle_->vendor.Enter().ok() ||
        handle_->vendor.EventDone(handle_->event)) {
      callback();
      return;
    }
    const Handle& handle = *handle_;
    absl::AnyInvocable<void()> report = handle.notices->Relay(std::move(callback));
    if (!handle.vendor.StreamWaitEvent(handle.notice_stream, handle.event).ok() ||
        !handle.vendor.AddCallback(handle.notice_stream, report).ok()) {
      report();  // the callback's wait reports why
    }
  }

 private:
  friend class GpuStream<V>;
  using Pool = EventPool<typename V::EventHandle>;

  struct Handle {
    Handle(V vendor, typename V::EventHandle event, std::shared_ptr<Pool> pool,
           typename V::StreamHandle notice_stream, NoticeThread* notices)
        : vendor(std::move(vendor)),
          event(event),
          pool(std::move(pool)),
          notice_stream(notice_stream),
          notices(notices) {}
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    ~Handle() { pool->Give(event); }

    const V vendor;
    const typename V::EventHandle event;
    const std::shared_ptr<Pool> pool;
    // The recording stream's notice stream, and where its callbacks run.
    const typename V::StreamHandle notice_stream;
    NoticeThread* const notices;
  };

  std::shared_ptr<Handle> handle_;  // null: complete
  // Set when no event could be recorded and waiting for the stream instead failed:
  // what Wait returns.
  absl::Status error_;
};

template <GpuVendor V>
class GpuStream {
 public:
  using Event = GpuEvent<V>;
  using Signal = GpuStream*;
  using Handle = typename V::StreamHandle;

  // `notice_stream` (the stream's own, destroyed with it) and `notices` carry its events'
  // OnComplete (Note [Completions called back on a GPU]); `notices` outlives the stream.
  GpuStream(V vendor, Handle stream, std::shared_ptr<typename Event::Pool> events,
            Handle notice_stream, NoticeThread* notices)
      : vendor_(std::move(vendor)),
        stream_(stream),
        events_(std::move(events)),
        notice_stream_(notice_stream),
        notices_(notices) {}
  ~GpuStream() {
    if (Enter().ok()) {
      for (Handle stream : {stream_, notice_stream_}) {
        vendor_.SynchronizeStream(stream).IgnoreError();  // nobody to report to
        vendor_.DestroyStream(stream);
      }
    }
  }
  GpuStream(const GpuStream&) = delete;
  GpuStream& operator=(const GpuStream&) = delete;

  Event RecordEvent() {
    Event event;
    if (Enter().ok()) {
      if (absl::StatusOr<typename V::EventHandle> raw = events_->Take(); raw.ok()) {
        if (vendor_.RecordEvent(*raw, stream_).ok()) {
          event.handle_ = std::make_shared<typename Event::Handle>(vendor_, *raw, events_,
                                                                   notice_stream_, notices_);
          return event;
        }
        events_->Give(*raw);
      }
    }
    // No event to wait on later: wait for the stream now, so that the event returned is
    // complete for real (or carries the error), never falsely.
    event.error_ = Synchronize();
    return event;
  }

  absl::Status WaitEvent(const Event& event) {
    if (event.handle_ == nullptr) return absl::OkStatus();
    RETURN_IF_ERROR(Enter());
    return vendor_.StreamWaitEvent(stream_, event.handle_->event);
  }

  absl::Status Synchronize() {
    RETURN_IF_ERROR(Enter());
    return vendor_.SynchronizeStream(stream_);
  }

  Signal signal() { return this; }
  Handle get() const { return stream_; }
  // Enters the stream's device on the calling thread.
  absl::Status Enter() const { return vendor_.Enter(); }
  const V& vendor() const { return vendor_; }

 private:
  const V vendor_;
  const Handle stream_;
  const std::shared_ptr<typename Event::Pool> events_;
  const Handle notice_stream_;
  NoticeThread* const notices_;
};

template <GpuVendor V>
struct GpuLaunchArgs {
  explicit GpuLaunchArgs(LaunchSpec spec) : spec(std::move(spec)) {}
  LaunchSpec spec;
};

// Whatever launching needs on one device; the device thread's.
template <GpuVendor V>
struct GpuContext {
  explicit GpuContext(V vendor) : vendor(std::move(vendor)) {}

  V vendor;
  std::optional<ModuleStore> module_store;
  // Loaded modules' functions by kernel id.
  absl::flat_hash_map<std::string, typename V::FunctionHandle> functions;
  std::vector<typename V::ModuleHandle> modules;
  // Where collectives run; WaitOutsideStreams waits on it, DeviceHealth queries it.
  typename V::StreamHandle collectives{};
  // The sticky error that corrupted the context, once DeviceHealth saw one; the
  // backend then resets the context when it goes.
  absl::Status lost;
};

template <GpuVendor V>
class GpuBackend {
 public:
  using Stream = GpuStream<V>;
  using EventPoolType = EventPool<typename V::EventHandle>;

  struct Options {
    int ordinal = 0;
    int stream_count = 4;
    std::optional<ModuleStore> modules;  // required to launch kernels
  };

  // UNAVAILABLE when there is no driver or no such device.
  static absl::StatusOr<std::unique_ptr<GpuBackend>> Create(const Options& options) {
    ASSIGN_OR_RETURN(V vendor, V::Open(options.ordinal));
    std::unique_ptr<GpuBackend> backend(new GpuBackend(vendor));
    backend->context_.module_store = options.modules;
    RETURN_IF_ERROR(vendor.Enter());
    backend->events_ = std::make_shared<EventPoolType>(
        [vendor]() -> absl::StatusOr<typename V::EventHandle> {
          RETURN_IF_ERROR(vendor.Enter());
          return vendor.CreateEvent();
        },
        [vendor](typename V::EventHandle event) {
          if (vendor.Enter().ok()) vendor.DestroyEvent(event);
        });
    ASSIGN_OR_RETURN(StreamPriorities priorities, vendor.StreamPriorityRange());
    backend->notices_ =
        std::make_unique<NoticeThread>(absl::StrCat("gpucmd-notices", options.ordinal));
    for (int i = 0; i < options.stream_count; ++i) {
      // Stream 0 gets the highest priority: it carries relocation copies.
      ASSIGN_OR_RETURN(typename V::StreamHandle stream,
                       vendor.CreateStream(i == 0 ? priorities.greatest : priorities.least));
      absl::StatusOr<typename V::StreamHandle> notice_stream =
          vendor.CreateStream(priorities.greatest);
      if (!notice_stream.ok()) {
        vendor.DestroyStream(stream);
        return notice_stream.status();
      }
      backend->streams_.push_back(std::make_unique<Stream>(
          vendor, stream, backend->events_, *notice_stream, backend->notices_.get()));
    }
    ASSIGN_OR_RETURN(backend->context_.collectives, vendor.CreateStream(priorities.least));
    ASSIGN_OR_RETURN(bool memory_pools, vendor.MemoryPoolsSupported());
    if (memory_pools) {
      // Freed pages stay in the pool for the next allocation instead of going back to the
      // system: the server's own pool decides how much the device holds.
      RETURN_IF_ERROR(vendor.KeepPoolMemory());
      ASSIGN_OR_RETURN(backend->allocation_stream_, vendor.CreateStream(priorities.greatest));
    }
    return backend;
  }

  ~GpuBackend() {
    streams_.clear();
    // After the streams, whose synchronization let the runtime call back what it will.
    notices_.reset();
    // Every event is back by now (the Command and its reads went first).
    if (events_ != nullptr) events_->DestroyIdle();
    const V& vendor = context_.vendor;
    // A context that cannot be entered still goes (reset if it is corrupted): the next
    // backend on this device must not inherit it.
    if (vendor.Enter().ok()) {
      if (allocation_stream_ != typename V::StreamHandle{}) {
        vendor.DestroyStream(allocation_stream_);
      }
      if (context_.collectives != typename V::StreamHandle{}) {
        vendor.DestroyStream(context_.collectives);
      }
      for (typename V::ModuleHandle module : context_.modules) vendor.UnloadModule(module);
    }
    vendor.Release(/*reset=*/!context_.lost.ok());
  }

  GpuBackend(const GpuBackend&) = delete;
  GpuBackend& operator=(const GpuBackend&) = delete;

  int stream_count() const { return static_cast<int>(streams_.size()); }
  Stream& stream(int index) { return *streams_[index]; }
  uint64_t capacity_bytes() const { return context_.vendor.memory_capacity_bytes(); }

  // With memory pools, a page is allocated and freed in stream order: unlike a plain
  // free, the asynchronous one does not wait for the whole device. The server frees a
  // page only when no enqueued work touches it any more, so ordering it on its own
  // stream is enough.
  absl::StatusOr<DeviceResource> AllocateDevice(uint64_t size_bytes) {
    const V& vendor = context_.vendor;
    RETURN_IF_ERROR(vendor.Enter());
    if (allocation_stream_ == typename V::StreamHandle{}) {
      ASSIGN_OR_RETURN(DeviceAddress address, vendor.Allocate(size_bytes));
      return DeviceResource{address, size_bytes};
    }
    ASSIGN_OR_RETURN(DeviceAddress address, vendor.AllocateAsync(size_bytes, allocation_stream_));
    // Every stream may use the page once its allocation completed.
    if (absl::Status allocated = vendor.SynchronizeStream(allocation_stream_); !allocated.ok()) {
      vendor.FreeAsync(address, allocation_stream_);
      return allocated;
    }
    return DeviceResource{address, size_bytes};
  }

  void FreeDevice(const DeviceResource& resource) {
    const V& vendor = context_.vendor;
    if (!vendor.Enter().ok()) return;
    if (allocation_stream_ == typename V::StreamHandle{}) {
      vendor.Free(resource.address);
    } else {
      vendor.FreeAsync(resource.address, allocation_stream_);
    }
  }

  absl::StatusOr<HostResource> AllocatePinned(uint64_t size_bytes) {
    RETURN_IF_ERROR(context_.vendor.Enter());
    ASSIGN_OR_RETURN(std::byte * data, context_.vendor.AllocateHost(size_bytes));
    return HostResource{data, size_bytes};
  }

  void FreePinned(const HostResource& resource) {
    if (context_.vendor.Enter().ok()) context_.vendor.FreeHost(resource.data);
  }

  // The registration ends on whichever thread drops it. After a device loss it ends on
  // the device's new context, which never had it: the vendor's refusal then is moot.
  absl::StatusOr<HostRegistration> RegisterHost(const HostResource& host) {
    const V& vendor = context_.vendor;
    RETURN_IF_ERROR(vendor.Enter());
    RETURN_IF_ERROR(vendor.RegisterHost(host.data, host.size_bytes));
    return HostRegistration([vendor, data = host.data] {
      if (vendor.Enter().ok()) vendor.UnregisterHost(data);
    });
  }

  GpuContext<V>& context() { return context_; }
  const EventPoolType& event_pool() const { return *events_; }

 private:
  explicit GpuBackend(V vendor) : context_(std::move(vendor)) {}

  GpuContext<V> context_;
  std::shared_ptr<EventPoolType> events_;
  // Runs the events' OnComplete callbacks; before the streams, which use it.
  std::unique_ptr<NoticeThread> notices_;
  // Pages come from the device's memory pool on this stream, synchronized before they
  // are handed out; null where the device has no memory pools (plain allocation).
  typename V::StreamHandle allocation_stream_{};
  std::vector<std::unique_ptr<Stream>> streams_;
};

// A GPU's running kernels cannot be stopped from the host: AbortKernels is the default
// (they run to their end).
template <GpuVendor V>
struct GpuDriver : DriverDefaults {
  using Backend = GpuBackend<V>;
  using Stream = GpuStream<V>;
  using Context = GpuContext<V>;
  using LaunchArgs = GpuLaunchArgs<V>;

  static Bytes PinnedBytes(PinnedBinding binding, HostResource resource, uint64_t size) {
    return PinnedPoolBytes(binding, resource, size);
  }

  static absl::Status CopyToHost(const DeviceResource& resource, const CopyLayout& layout,
                                 Bytes& bytes, Stream& stream) {
    RETURN_IF_ERROR(stream.Enter());
    const DeviceAddress device = resource.address + layout.offset_bytes;
    if (layout.is_contiguous()) {
      return stream.vendor().CopyToHost(bytes.data(), device, layout.host_bytes(), stream.get());
    }
    return stream.vendor().CopyPitched(Pitched(device, layout, bytes.data(), false),
                                       stream.get());
  }

  static absl::Status CopyToDevice(const DeviceResource& resource, const CopyLayout& layout,
                                   absl::Span<const std::byte> data, Stream& stream) {
    RETURN_IF_ERROR(stream.Enter());
    const DeviceAddress device = resource.address + layout.offset_bytes;
    auto* host = const_cast<std::byte*>(data.data());  // read only: the copy's source
    if (layout.is_contiguous()) {
      return stream.vendor().CopyToDevice(device, host, layout.host_bytes(), stream.get());
    }
    return stream.vendor().CopyPitched(Pitched(device, layout, host, true), stream.get());
  }

  static absl::Status CopyOnDevice(const DeviceResource& source, const DeviceResource& target,
                                   typename Stream::Signal signal) {
    if (source.size_bytes != target.size_bytes) {
      return absl::InvalidArgumentError("relocation copy between different sizes");
    }
    RETURN_IF_ERROR(signal->Enter());
    return signal->vendor().CopyOnDevice(target.address, source.address, source.size_bytes,
                                         signal->get());
  }

  static absl::Status CopyRowsOnDevice(const DeviceResource& source, const DeviceResource& target,
                                       const DeviceCopyLayout& rows,
                                       typename Stream::Signal signal) {
    RETURN_IF_ERROR(signal->Enter());
    return signal->vendor().CopyRowsOnDevice(
        DeviceRowsCopy{.source = source.address + rows.source_offset_bytes,
                       .source_stride_bytes = rows.source_stride_bytes,
                       .target = target.address + rows.target_offset_bytes,
                       .target_stride_bytes = rows.target_stride_bytes,
                       .width_bytes = rows.width_bytes,
                       .height = rows.height},
        signal->get());
  }

  static absl::Status FillOnDevice(const DeviceResource& target, const CopyLayout& layout,
                                   FillPattern pattern, typename Stream::Signal signal) {
    RETURN_IF_ERROR(signal->Enter());
    return signal->vendor().Fill(target.address, layout, pattern, signal->get());
  }

  // Refusals (a missing module, too many resources) come back at once. A kernel that
  // faults on the device corrupts the context instead: DeviceHealth reports it and the
  // server resets the device, so the launch's outcome is never left stale; it is not
  // set here.
  static absl::Status Launch(Context& context, Stream& stream, const KernelId& kernel,
                             Dim3 grid, LaunchArgs& args) {
    RETURN_IF_ERROR(stream.Enter());
    const V& vendor = context.vendor;
    auto found = context.functions.find(kernel.hex);
    if (found == context.functions.end()) {
      ASSIGN_OR_RETURN(ModuleStore::Module stored, FindModule(context.module_store, kernel));
      ASSIGN_OR_RETURN(typename V::ModuleHandle module,
                       vendor.LoadModule(ReadFileOrEmpty(stored.artifact_path)));
      context.modules.push_back(module);
      ASSIGN_OR_RETURN(typename V::FunctionHandle function,
                       vendor.GetFunction(module, stored.entry_point));
      found = context.functions.emplace(kernel.hex, function).first;
    }
    // Each parameter points at its 8-byte slot; they live until the launch returns (the
    // vendor copies them).
    std::vector<void*> params;
    for (const uint64_t& slot : args.spec.slots) params.push_back(const_cast<uint64_t*>(&slot));
    return vendor.Launch(found->second, grid, args.spec, params, stream.get());
  }

  // Waits for the collectives stream: relocation must not move memory it still uses.
  static absl::Status WaitOutsideStreams(Context& context) {
    RETURN_IF_ERROR(context.vendor.Enter());
    return context.vendor.SynchronizeStream(context.collectives);
  }

  // UNAVAILABLE with the sticky error once the context is corrupted (a query of the
  // collectives stream returns it, as every call on the context then does).
  static absl::Status DeviceHealth(Context& context) {
    if (!context.lost.ok()) return context.lost;
    if (absl::Status entered = context.vendor.Enter(); !entered.ok()) {
      context.lost = absl::UnavailableError(entered.message());  // nothing can run on it
      return context.lost;
    }
    context.lost = context.vendor.StickyError(context.collectives);
    return context.lost;
  }

 private:
  static PitchedCopy Pitched(DeviceAddress device, const CopyLayout& layout, std::byte* host,
                             bool to_device) {
    return PitchedCopy{.host = host,
                       .device = device,
                       .width_bytes = layout.width_bytes,
                       .height = layout.height,
                       .device_stride_bytes = layout.stride_bytes,
                       .to_device = to_device};
  }
};

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_GPU_GPU_DRIVER_H_
