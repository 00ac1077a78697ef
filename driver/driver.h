#ifndef GPUCMDD_DRIVER_DRIVER_H_
#define GPUCMDD_DRIVER_DRIVER_H_

// The Driver concept: the device calls a Command cannot make itself, and nothing more.
//
// Everything else a command does (deciding what to stage, when to reclaim, whether a
// layout needs a 2D copy, when the drop queue may be flushed) is the same whichever
// driver is underneath, and lives in server/. Each backend leaf (driver/cpu,
// driver/cuda, driver/hip) defines one struct satisfying this concept and
// static_asserts it; the daemon instantiates its server over the one selected at
// build time.
//
// The operations, one to one with the driver trait they follow:
//   PinnedBytes(binding, host, size)       hand out `size` pinned host bytes of the
//                                          allocation `binding` names; they go back to
//                                          their owner when the Bytes die.
//   CopyToHost(device, layout, bytes, s)   enqueue device -> host on s. The caller keeps
//                                          `bytes` alive and synchronizes s before
//                                          reading them.
//   CopyToDevice(device, layout, data, s)  enqueue host -> device on s. `data` stays
//                                          alive until s is synchronized (the caller's
//                                          drop queue guarantees it).
//   CopyOnDevice(source, target, signal)   enqueue a same-size copy between two
//                                          non-overlapping live allocations: how a live
//                                          allocation is relocated off an outdated page.
//   CopyRowsOnDevice(source, target,       enqueue a pitched copy between two live
//                    layout, signal)       allocations (cuMemcpy2D between device
//                                          pointers), reading no byte it writes.
//   FillOnDevice(device, layout, pattern,  enqueue setting the layout's rows of a live
//                signal)                   allocation to a repeated 1-, 2- or 4-byte
//                                          value (cuMemsetD*, cuMemsetD2D*).
//   Launch(ctx, s, kernel, grid, args)     enqueue an already compiled kernel. Always a
//                                          compiled one: the server compiles before its
//                                          write scope and stops a skipped launch first.
//                                          The driver sets args' LaunchOutcome when the
//                                          kernel has run (or could not).
//   WaitOutsideStreams(ctx)                wait for device work enqueued outside the
//                                          command's streams (collectives) before a
//                                          relocation; DriverDefaults makes it a no-op.
//   DeviceHealth(ctx)                      OK while the device's context can serve; else
//                                          the sticky error that corrupted it
//                                          (UNAVAILABLE, naming the call and the cause).
//                                          The server then fails in-flight work and
//                                          recreates the backend (Note [Device loss] in
//                                          server/core/device_worker.h). Cheap: asked before
//                                          every command. DriverDefaults: always OK.
// Each returns the driver's refusal as a non-OK absl::Status; asynchronous failures
// surface at the stream's next Synchronize.
//
// Layouts are checked against the resources by the caller before any call here (an
// oversized copy would silently corrupt a neighbour): drivers trust them.

#include <concepts>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/countdown.h"
#include "driver/bytes.h"
#include "driver/launch.h"
#include "driver/types.h"

namespace gpucmd {

// A point in a stream's work: complete once everything enqueued before it completed.
template <typename E>
concept DeviceEvent = std::copyable<E> && requires(const E& event) {
  // Blocks the calling host thread until the event completes.
  { event.Wait() } -> std::same_as<absl::Status>;
  { event.IsComplete() } -> std::same_as<bool>;
};

// An event that can also tell when it completes (optional: a server whose driver's
// events cannot has a thread block in Wait instead). OnComplete runs the callback once,
// on the thread that completed the event's work, or at once on the calling thread when
// the event is complete already; the callback must not wait for device work.
template <typename E>
concept NotifyingEvent = DeviceEvent<E> && requires(const E& event) {
  event.OnComplete(absl::AnyInvocable<void()>());
};

// Runs `callback` once every one of `events` completed: on the thread that completed the
// last of them, or at once when all are complete already.
template <NotifyingEvent E>
void OnAllComplete(std::vector<E> events, absl::AnyInvocable<void()> callback) {
  if (events.empty()) {
    callback();
    return;
  }
  auto one_completed = CountdownTo(events.size(), std::move(callback));
  for (const E& event : events) event.OnComplete(one_completed);
}

// An in-order queue of device work.
template <typename S>
concept DeviceStream = requires(S& stream, const typename S::Event& event) {
  typename S::Event;
  // What CopyOnDevice is handed to say where the copy is enqueued.
  typename S::Signal;
  requires DeviceEvent<typename S::Event>;
  { stream.RecordEvent() } -> std::same_as<typename S::Event>;
  // Enqueues a wait: later work on this stream starts after `event` completed.
  { stream.WaitEvent(event) } -> std::same_as<absl::Status>;
  // Waits for all enqueued work; returns (and clears) the first asynchronous error.
  { stream.Synchronize() } -> std::same_as<absl::Status>;
  { stream.signal() } -> std::same_as<typename S::Signal>;
};

// The multi-stream backend of one device: its streams, its memory, its context.
template <typename B>
concept EventStreamBackend = requires(B& backend, const B& const_backend, uint64_t size,
                                      DeviceResource device, HostResource host) {
  typename B::Stream;
  requires DeviceStream<typename B::Stream>;
  { const_backend.stream_count() } -> std::same_as<int>;
  { backend.stream(0) } -> std::same_as<typename B::Stream&>;
  { const_backend.capacity_bytes() } -> std::same_as<uint64_t>;
  // RESOURCE_EXHAUSTED when the device has no room right now.
  { backend.AllocateDevice(size) } -> std::same_as<absl::StatusOr<DeviceResource>>;
  { backend.FreeDevice(device) } -> std::same_as<void>;
  { backend.AllocatePinned(size) } -> std::same_as<absl::StatusOr<HostResource>>;
  { backend.FreePinned(host) } -> std::same_as<void>;
  // Makes `host` memory the device copies from and into directly (DMA, no staging) until
  // the returned registration dies, which must be before the range is unmapped. The
  // driver's refusal when it cannot; the server then stages copies of the range through
  // pinned memory. An empty registration where any host memory is reached directly.
  { backend.RegisterHost(host) } -> std::same_as<absl::StatusOr<HostRegistration>>;
};

template <typename D>
concept Driver = EventStreamBackend<typename D::Backend> &&
    std::same_as<typename D::Backend::Stream, typename D::Stream> &&
    requires(typename D::Backend& backend, PinnedBinding binding, HostResource host, uint64_t size,
             const DeviceResource& device, const CopyLayout& layout,
             const DeviceCopyLayout& rows, Bytes& bytes,
             absl::Span<const std::byte> data, typename D::Stream& stream,
             typename D::Stream::Signal signal, typename D::Context& context,
             const KernelId& kernel, Dim3 grid, typename D::LaunchArgs& args, FillPattern pattern) {
  typename D::Context;
  typename D::LaunchArgs;
  // The server resolves a launch into a LaunchSpec; the backend says what its
  // kernels are handed.
  requires std::constructible_from<typename D::LaunchArgs, LaunchSpec>;
  { backend.context() } -> std::same_as<typename D::Context&>;
  { D::PinnedBytes(binding, host, size) } -> std::same_as<Bytes>;
  { D::CopyToHost(device, layout, bytes, stream) } -> std::same_as<absl::Status>;
  { D::CopyToDevice(device, layout, data, stream) } -> std::same_as<absl::Status>;
  { D::CopyOnDevice(device, device, signal) } -> std::same_as<absl::Status>;
  // Enqueues copying `rows` from the first resource into the second: each side checked
  // by CheckLayoutBounds, and no byte both read and written (CopyRowsOverlap).
  { D::CopyRowsOnDevice(device, device, rows, signal) } -> std::same_as<absl::Status>;
  // Enqueues setting every element of `layout`'s rows inside `device` to `pattern`
  // (FillPattern's contract; the layout was checked by CheckFill).
  { D::FillOnDevice(device, layout, pattern, signal) } -> std::same_as<absl::Status>;
  { D::Launch(context, stream, kernel, grid, args) } -> std::same_as<absl::Status>;
  { D::WaitOutsideStreams(context) } -> std::same_as<absl::Status>;
  { D::DeviceHealth(context) } -> std::same_as<absl::Status>;
  { D::AbortKernels(context) } -> std::same_as<void>;
};

// Wraps pinned memory handed out by a pool: `size` bytes of `resource`, given back to
// the owner `binding` names when the Bytes die. What a backend whose pinned memory
// needs no further bookkeeping returns from PinnedBytes.
inline Bytes PinnedPoolBytes(PinnedBinding binding, HostResource resource, uint64_t size) {
  return Bytes(resource.data, size, [binding] { binding.owner->Release(binding.allocation); })
      .MarkPinned();
}

// Provided operations; a driver inherits them and overrides what it must.
struct DriverDefaults {
  // A backend whose every device operation runs on its command streams has nothing
  // else to wait on.
  template <typename Context>
  static absl::Status WaitOutsideStreams(Context&) {
    return absl::OkStatus();
  }
  // A backend whose device cannot be lost (faults are contained below it) is always
  // healthy.
  template <typename Context>
  static absl::Status DeviceHealth(Context&) {
    return absl::OkStatus();
  }
  // Ends the kernels running now, from any thread, for a daemon that stops past its
  // drain time. A device that cannot stop a running kernel lets it run to its end.
  template <typename Context>
  static void AbortKernels(Context&) {}
};

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_DRIVER_H_
