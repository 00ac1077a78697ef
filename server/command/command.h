#ifndef GPUCMDD_SERVER_COMMAND_COMMAND_H_
#define GPUCMDD_SERVER_COMMAND_COMMAND_H_

// Command<D>: everything a command does that is the same whichever driver is
// underneath — staging, bounds checks, the contiguous-versus-pitched decision, drop
// queues, memory reservation and reclaim, per-buffer stream ordering, relocation.
// Only the calls in driver/driver.h reach the device.
//
// Thread-safety: one Command per device, owned by that device's thread, which alone
// calls it (server/device_worker.h). Its state needs no lock for that reason. The
// PendingRead::wait closures it returns are the only parts used on other threads.
//
// Note [Per-buffer stream ordering]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A daemon's buffers are long-lived and rewritten from several streams, so ordering is
// tracked per buffer: the event of its last write and the events of the reads since,
// one per stream. Work on stream S that reads a buffer waits (on the device, with
// WaitEvent) for a last write made on another stream; work that writes it also waits
// for other streams' reads. A freed buffer's memory is reserved until every event that
// may still touch it completed (the deferred list), so a reader on another stream never
// sees a new owner's bytes.
//
// The device's upkeep before every task gives back what finished, so it must not cost as
// much as everything still deferred: a launch marks every buffer argument with its event,
// and a session with its queued launches can leave hundreds of thousands of freed
// buffers waiting behind one long kernel (asking each of their events before every task,
// a cuEventQuery each on a GPU, cost every session's commands 0.3 ms per 16,000 on the
// CPU driver). So each access is also numbered in its stream's order (`marks_`; work on a
// stream completes in that order), and a deferred free's accesses wait in their streams'
// heaps by that number: the upkeep asks only each stream's earliest, and stops at the
// first still running. Likewise an allocation that waits for freed memory waits for each
// stream's latest (MemoryBeingFreed), and the bytes being freed are a running count.
//
// Note [Usage reported as it changes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// After every device task the device worker publishes the device's figures, each
// session's among them, for GetStats and `/metrics`. Building every session's figures
// for that cost every task of every session as much as the sessions the device holds
// (a session is held from its first command on the device until it closes, and one
// client may open a thousand). A report (TakeUsageUpdate) holds only the sessions whose
// figures may have changed since the last one: those a command named since (StateOf),
// those closed since, and those that had work queued on streams then, whose queued count
// falls as the streams run. The device worker merges it into what it published.
//
// Note [Relocation]
// ~~~~~~~~~~~~~~~~~
// Pages the pool reports as outdated or fragmented are evacuated: every page is
// retired, then planned on its own, all or nothing (a target slice for each live slice;
// if one cannot be had, the page's targets are released and it stays). Nothing may read
// or write the memory being moved, so relocation runs only while every stream is idle:
// waiting for them on the device thread would hold every session's commands behind one
// session's long kernel. With work in flight it is put off (the device thread tries
// again at its next idle moment). Work outside the streams (WaitOutsideStreams) is waited
// for.
// All copies are enqueued with CopyOnDevice, then waited for; only then are the new
// locations committed and the old slices released. If that final wait fails, the
// targets stay reserved (leaked) rather than freed, since a copy may still write them.
// Buffer ids never change: that is the point of handles in a daemon.

#include <algorithm>
#include <deque>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "driver/driver.h"
#include "server/command/command_interface.h"
#include "server/command/command_options.h"
#include "server/command/copy_chunks.h"
#include "server/command/launch_checks.h"
#include "server/command/drop_queue.h"
#include "server/command/memory_pool.h"
#include "server/command/pinned_pool.h"

namespace gpucmd {

template <Driver D>
class Command final : public CommandInterface {
 public:
  using Backend = typename D::Backend;
  using Stream = typename D::Stream;
  using Event = typename Stream::Event;

  Command(Backend& backend, CommandOptions options)
      : backend_(backend),
        options_(options),
        pool_(PoolOptions(options, backend), [&backend](uint64_t size) {
                return backend.AllocateDevice(size);
              },
              [&backend](const DeviceResource& page) { backend.FreeDevice(page); }),
        pinned_([&backend](uint64_t size) { return backend.AllocatePinned(size); },
                [&backend](const HostResource& host) { backend.FreePinned(host); },
                options.max_cached_pinned_bytes) {
    for (int i = 0; i < backend.stream_count(); ++i) {
      drop_queues_.emplace_back(options.drop_queue);
    }
    stream_users_.assign(backend.stream_count(), 0);
    marks_.assign(backend.stream_count(), 0);
    deferred_accesses_.resize(backend.stream_count());
  }

  ~Command() override {
    // Nothing may still read or write memory the pool is about to return.
    for (int i = 0; i < backend_.stream_count(); ++i) {
      backend_.stream(i).Synchronize().IgnoreError();
      drop_queues_[i].Drain(backend_.stream(i)).IgnoreError();
    }
  }

  PinnedPool& pinned_pool() { return pinned_; }
  const MemoryPool& memory_pool() const { return pool_; }

  absl::StatusOr<BufferId> Allocate(SessionId session, uint64_t size_bytes) override {
    if (size_bytes == 0) return absl::InvalidArgumentError("size_bytes must be positive");
    // First: the pool's size arithmetic holds for sizes up to the capacity only.
    if (pool_.NeverFits(size_bytes)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "requested ", size_bytes, " bytes never fit: the device holds ",
          backend_.capacity_bytes(), " bytes, ", Available(), " available"));
    }
    SessionState& state = StateOf(session);
    uint64_t footprint = pool_.FootprintBytes(size_bytes);
    if (options_.session_quota_bytes != 0 &&
        state.used_bytes + footprint > options_.session_quota_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "session quota: requested ", size_bytes, " bytes, the session holds ",
          state.used_bytes, " of its ", options_.session_quota_bytes, " bytes"));
    }
    BufferId id = next_buffer_++;
    ASSIGN_OR_RETURN(SliceLocation location, ReserveWithRetry(size_bytes, id));
    Buffer& buffer = buffers_[id];
    buffer.session = session;
    buffer.size_bytes = size_bytes;
    buffer.footprint_bytes = footprint;
    buffer.location = location;
    state.buffers.insert(id);
    state.used_bytes += footprint;
    if (pool_.MayHoldOldBytes(location)) {
      if (absl::Status cleared = ClearOldBytes(session, id, buffer); !cleared.ok()) {
        Release(id, buffer);
        return cleared;
      }
    }
    return id;
  }

  absl::Status Free(SessionId session, BufferId id) override {
    if (auto lost = lost_.buffers.find(id);
        lost != lost_.buffers.end() && lost->second.session == session) {
      lost_.buffers.erase(lost);  // its memory went with the old context
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(Buffer * buffer, Lookup(session, id));
    Release(id, *buffer);
    return absl::OkStatus();
  }

  absl::StatusOr<HostRegistration> RegisterHost(const HostResource& host) override {
    return backend_.RegisterHost(host);
  }

  // Staged in pinned memory when small; a large payload is the daemon's own buffer, which
  // the driver copies from in place.
  absl::Status Write(SessionId session, LogicalStream logical, BufferId id,
                     const CopyLayout& layout, std::string data) override {
    const uint64_t size = data.size();
    return WriteFrom(session, logical, id, layout, size, HostAccess::kInPlace,
                     [&] { return Stage(std::move(data)); });
  }

  absl::Status WriteShared(SessionId session, LogicalStream logical, BufferId id,
                           const CopyLayout& layout, Bytes source) override {
    const uint64_t size = source.size();
    return WriteFrom(session, logical, id, layout, size, HostAccess::kPinnedOnly,
                     [&]() -> absl::StatusOr<Bytes> { return std::move(source); });
  }

  PendingWait LastWorkEnd(SessionId session, LogicalStream logical) override {
    auto state = sessions_.find(session);
    if (state == sessions_.end()) return nullptr;
    auto binding = state->second.streams.find(logical);
    if (binding == state->second.streams.end() || !binding->second.last.has_value()) {
      return nullptr;
    }
    const Event last = *binding->second.last;
    if (last.IsComplete() && last.Wait().ok()) return nullptr;  // Wait returns at once
    return [last] { return last.Wait(); };
  }

  absl::StatusOr<PendingRead> Read(SessionId session, LogicalStream logical, BufferId id,
                                   const CopyLayout& layout) override {
    return ReadInto(session, logical, id, layout, HostAccess::kInPlace,
                    [&] { return HostBuffer(layout.host_bytes()); });
  }

  absl::StatusOr<PendingRead> ReadShared(SessionId session, LogicalStream logical,
                                         BufferId id, const CopyLayout& layout,
                                         Bytes target) override {
    if (target.size() != layout.host_bytes()) {
      return absl::InvalidArgumentError(absl::StrCat("read into ", target.size(),
                                                     " bytes but its layout holds ",
                                                     layout.host_bytes()));
    }
    return ReadInto(session, logical, id, layout, HostAccess::kPinnedOnly,
                    [&]() -> absl::StatusOr<Bytes> { return std::move(target); });
  }

  absl::Status CheckRange(SessionId session, BufferId id, const CopyLayout& layout) override {
    ASSIGN_OR_RETURN(Buffer * buffer, Lookup(session, id));
    return CheckLayoutBounds(layout, buffer->size_bytes);
  }

  absl::Status Copy(SessionId session, LogicalStream logical, BufferId source_id,
                    BufferId target_id, const DeviceCopyLayout& layout) override {
    ASSIGN_OR_RETURN(Buffer * source, Lookup(session, source_id));
    ASSIGN_OR_RETURN(Buffer * target, Lookup(session, target_id));
    RETURN_IF_ERROR(CheckNotTainted(source_id, *source));
    RETURN_IF_ERROR(CheckLayoutBounds(layout.source(), source->size_bytes));
    RETURN_IF_ERROR(CheckLayoutBounds(layout.target(), target->size_bytes));
    if (layout.size_bytes() == 0) return absl::OkStatus();
    if (source_id == target_id && CopyRowsOverlap(layout)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "copy within buffer ", source_id, ": the source ", DescribeRows(layout.source()),
          " overlaps the target ", DescribeRows(layout.target())));
    }
    RETURN_IF_ERROR(AdmitToStream(StateOf(session)));
    ASSIGN_OR_RETURN(DeviceResource from, pool_.Resolve(source->location, source_id));
    ASSIGN_OR_RETURN(DeviceResource to, pool_.Resolve(target->location, target_id));
    ASSIGN_OR_RETURN(StreamBinding* const binding, StreamFor(session, logical));
    const int index = binding->index;
    Stream& stream = backend_.stream(index);
    RETURN_IF_ERROR(AwaitBeforeRead(*source, index));
    RETURN_IF_ERROR(AwaitBeforeWrite(*target, index));
    const uint64_t size = layout.size_bytes();
    RETURN_IF_ERROR(
        layout.is_contiguous()
            ? D::CopyOnDevice(DeviceResource{from.address + layout.source_offset_bytes, size},
                              DeviceResource{to.address + layout.target_offset_bytes, size},
                              stream.signal())
            : D::CopyRowsOnDevice(from, to, layout, stream.signal()));
    Event done = stream.RecordEvent();
    binding->last = done;
    StateOf(session).queued_on_streams.Add(done);
    if (source_id != target_id) MarkRead(*source, index, done);
    MarkWritten(*target, index, done);
    return absl::OkStatus();
  }

  absl::Status Fill(SessionId session, LogicalStream logical, BufferId id, const CopyLayout& layout,
                    FillPattern pattern) override {
    ASSIGN_OR_RETURN(Buffer * buffer, Lookup(session, id));
    RETURN_IF_ERROR(CheckFill(pattern, layout, buffer->size_bytes));
    if (layout.host_bytes() == 0) return absl::OkStatus();
    RETURN_IF_ERROR(AdmitToStream(StateOf(session)));
    ASSIGN_OR_RETURN(DeviceResource resource, pool_.Resolve(buffer->location, id));
    ASSIGN_OR_RETURN(StreamBinding* const binding, StreamFor(session, logical));
    const int index = binding->index;
    RETURN_IF_ERROR(AwaitBeforeWrite(*buffer, index));
    Stream& stream = backend_.stream(index);
    RETURN_IF_ERROR(D::FillOnDevice(resource, layout, pattern, stream.signal()));
    Event done = stream.RecordEvent();
    binding->last = done;
    StateOf(session).queued_on_streams.Add(done);
    MarkWritten(*buffer, index, done);
    HoldsFreshDataIfWhole(*buffer, layout);
    return absl::OkStatus();
  }

  absl::Status Launch(SessionId session, LogicalStream logical,
                      const KernelLaunch& launch) override {
    // The rule: a launch always runs a compiled kernel. One whose compile failed is
    // skipped before any resource is resolved, and its outputs are tainted with the cause.
    if (!launch.params.ok()) {
      absl::Status cause = absl::FailedPreconditionError(
          absl::StrCat("launch of kernel ", launch.kernel.hex,
                       " skipped: its compile failed: ", launch.params.status().message()));
      TaintOutputs(session, launch, cause);
      return cause;
    }
    RETURN_IF_ERROR(CheckArguments(**launch.params, launch.args, options_.launch));
    RETURN_IF_ERROR(CheckLaunchShape(launch, options_.launch));
    if (launch.grid.volume() == 0) return absl::OkStatus();
    SessionState& state = StateOf(session);  // only this session's state is touched below
    RETURN_IF_ERROR(AdmitToStream(state));

    LaunchSpec spec;
    spec.owner = session;
    spec.output = state.printed;
    spec.block = launch.block;
    spec.dynamic_shared_memory_bytes = launch.dynamic_shared_memory_bytes;
    spec.outcome = std::make_shared<LaunchOutcome>();
    std::vector<std::pair<Buffer*, BufferAccess>> touched;
    for (size_t i = 0; i < launch.args.size(); ++i) {
      const LaunchArgument& arg = launch.args[i];
      if (arg.kind == ParamKind::kScalar) {
        spec.slots.push_back(arg.bits);
        continue;
      }
      ASSIGN_OR_RETURN(Buffer * buffer, Lookup(session, arg.buffer));
      if (arg.offset_bytes > buffer->size_bytes) {
        return absl::InvalidArgumentError(absl::StrCat("argument ", i, ": offset ",
                                                       arg.offset_bytes, " is past the end of a ",
                                                       buffer->size_bytes, "-byte buffer"));
      }
      if (arg.access != BufferAccess::kWrite) RETURN_IF_ERROR(CheckNotTainted(arg.buffer, *buffer));
      ASSIGN_OR_RETURN(DeviceResource resource, pool_.Resolve(buffer->location, arg.buffer));
      const DeviceAddress address = resource.address + arg.offset_bytes;
      if (arg.kind == ParamKind::kTensorMap) {
        absl::Status valid = ValidateTensorMap(arg.tensor_map, address,
                                               buffer->size_bytes - arg.offset_bytes);
        if (!valid.ok()) {
          return absl::InvalidArgumentError(absl::StrCat("argument ", i, ": ", valid.message()));
        }
        spec.tensor_maps.push_back(ResolvedTensorMap{i, address, arg.tensor_map});
        spec.slots.push_back(0);  // the driver puts the encoded map in this argument's place
      } else {
        spec.slots.push_back(address);
      }
      spec.buffers.push_back(DeviceResource{address, buffer->size_bytes - arg.offset_bytes});
      touched.emplace_back(buffer, arg.access);
    }
    ASSIGN_OR_RETURN(StreamBinding* const binding, StreamFor(session, logical));
    const int index = binding->index;
    Stream& stream = backend_.stream(index);
    for (const auto& [buffer, access] : touched) {
      RETURN_IF_ERROR(access == BufferAccess::kRead ? AwaitBeforeRead(*buffer, index)
                                                    : AwaitBeforeWrite(*buffer, index));
    }
    std::shared_ptr<LaunchOutcome> outcome = spec.outcome;
    typename D::LaunchArgs args(std::move(spec));
    if (absl::Status launched =
            D::Launch(backend_.context(), stream, launch.kernel, launch.grid, args);
        !launched.ok()) {
      TaintOutputs(session, launch, launched);
      return launched;
    }
    Event done = stream.RecordEvent();
    binding->last = done;
    KeepUnreported(*binding, UnreportedLaunch{done, outcome});
    state.queued_on_streams.Add(done);
    ++state.launches;
    for (const auto& [buffer, access] : touched) {
      if (access == BufferAccess::kRead) {
        MarkRead(*buffer, index, done);
      } else {
        MarkWritten(*buffer, index, done);
        buffer->taint = absl::OkStatus();
        buffer->producer = outcome;
      }
    }
    return absl::OkStatus();
  }

  RoomWait StagingRoom(SessionId session, LogicalStream logical) override {
    absl::StatusOr<StreamBinding*> binding = StreamFor(session, logical);
    if (!binding.ok()) return RoomWait();  // the write fails with it
    const int index = (*binding)->index;
    std::optional<Event> fence = drop_queues_[index].FenceForRoom(backend_.stream(index));
    if (!fence.has_value()) return RoomWait();
    return RoomOnceComplete({*std::move(fence)});
  }

  RoomWait MemoryBeingFreed(uint64_t size_bytes) override {
    if (deferred_.empty() || Available() + BytesBeingFreed() < pool_.FootprintBytes(size_bytes)) {
      return RoomWait();
    }
    // Each stream's latest access: the others on its stream complete before it.
    std::vector<Event> events;
    for (const std::vector<DeferredAccess>& accesses : deferred_accesses_) {
      if (accesses.empty()) continue;
      events.push_back(std::max_element(accesses.begin(), accesses.end(),
                                        [](const DeferredAccess& a, const DeferredAccess& b) {
                                          return a.mark < b.mark;
                                        })
                           ->event);
    }
    return RoomOnceComplete(std::move(events));
  }

  RoomWait StreamRoom(SessionId session) override {
    auto state = sessions_.find(session);
    if (state == sessions_.end() || HasStreamRoom(state->second)) return RoomWait();
    return RoomOnceComplete({state->second.queued_on_streams.Oldest()});
  }

  // Waits for the logical streams' own latest work and reports their own launches'
  // failures (Note [Logical streams]).
  PendingWait Synchronize(SessionId session, std::optional<LogicalStream> logical) override {
    std::vector<StreamBinding*> bindings;
    auto& streams = StateOf(session).streams;
    if (logical.has_value()) {
      // A stream the session never used holds nothing of it.
      if (auto it = streams.find(*logical); it != streams.end()) bindings.push_back(&it->second);
    } else {
      for (auto& [unused, binding] : streams) bindings.push_back(&binding);
    }
    // A device reset took whatever the session had in flight: say so once.
    absl::Status first_error;
    if (auto unreported = lost_.unreported.find(session); unreported != lost_.unreported.end()) {
      first_error = unreported->second;
      lost_.unreported.erase(unreported);
    }
    std::vector<Event> busy;
    std::vector<UnreportedLaunch> launches;
    for (StreamBinding* binding : bindings) {
      // What was staged for the stream is freed once the stream got this far
      // (ReclaimFinished); nothing here waits.
      drop_queues_[binding->index].Seal(backend_.stream(binding->index));
      first_error.Update(std::exchange(binding->failed, absl::OkStatus()));
      for (UnreportedLaunch& launch : binding->launches) launches.push_back(std::move(launch));
      binding->launches.clear();
      if (!binding->last.has_value()) continue;
      if (binding->last->IsComplete()) {
        first_error.Update(binding->last->Wait());  // returns at once
      } else {
        busy.push_back(*binding->last);
      }
    }
    if (busy.empty()) {
      for (const UnreportedLaunch& launch : launches) first_error.Update(launch.outcome->status());
      launches.clear();
      if (first_error.ok()) {
        ReclaimFinished();
        return nullptr;  // answered at once, without a hop to a completion thread
      }
    }
    return [first_error, busy = std::move(busy), launches = std::move(launches)]() mutable {
      for (const Event& event : busy) first_error.Update(event.Wait());
      for (const UnreportedLaunch& launch : launches) first_error.Update(launch.outcome->status());
      return first_error;
    };
  }

  WorkEndNotice NoticeOfWorkEnd(
      SessionId session, const std::optional<std::vector<LogicalStream>>& streams) override {
    if constexpr (!NotifyingEvent<Event>) {
      return nullptr;
    } else {
      std::vector<Event> busy;
      auto wait_for = [&busy](const StreamBinding& binding) {
        if (binding.last.has_value() && !binding.last->IsComplete()) {
          busy.push_back(*binding.last);
        }
      };
      if (auto state = sessions_.find(session); state != sessions_.end()) {
        const auto& bindings = state->second.streams;
        if (!streams.has_value()) {
          for (const auto& [unused, binding] : bindings) wait_for(binding);
        } else {
          for (LogicalStream logical : *streams) {
            if (auto it = bindings.find(logical); it != bindings.end()) wait_for(it->second);
          }
        }
      }
      return NoticeOnceComplete(std::move(busy));
    }
  }

  std::shared_ptr<KernelOutput> KernelOutputOf(SessionId session) override {
    return StateOf(session).printed;
  }

  uint64_t CloseSession(SessionId session) override {
    lost_.unreported.erase(session);
    if (auto state = sessions_.find(session); state != sessions_.end()) {
      for (const auto& [unused, binding] : state->second.streams) --stream_users_[binding.index];
    }
    for (auto lost = lost_.buffers.begin(); lost != lost_.buffers.end();) {
      if (lost->second.session == session) {
        lost_.buffers.erase(lost++);
      } else {
        ++lost;
      }
    }
    auto it = sessions_.find(session);
    if (it == sessions_.end()) return 0;
    uint64_t reclaimed = it->second.used_bytes;
    for (BufferId id : std::vector<BufferId>(it->second.buffers.begin(),
                                             it->second.buffers.end())) {
      Release(id, buffers_.at(id));
    }
    changed_sessions_.insert(session);  // reported gone
    sessions_.erase(session);
    return reclaimed;
  }

  absl::StatusOr<RelocationReport> Relocate() override {
    RelocationReport report;
    std::vector<uint64_t> pages = pool_.PagesToEvacuate();
    if (pages.empty()) {
      pool_.CleanUp();  // an explicit request at least returns empty pages
      return report;
    }
    for (int i = 0; i < backend_.stream_count(); ++i) {
      if (!backend_.stream(i).RecordEvent().IsComplete()) {
        report.deferred = true;
        return report;
      }
    }
    RETURN_IF_ERROR(D::WaitOutsideStreams(backend_.context()));
    ReclaimFinished();

    struct Move {
      BufferId id;
      SliceLocation from;
      SliceLocation to;
    };
    std::vector<Move> moves;
    std::vector<uint64_t> planned_pages;
    for (uint64_t page : pages) pool_.SetRetired(page, true);
    for (uint64_t page : pages) {
      std::vector<Move> plan;
      bool complete = true;
      for (const auto& [slot, owner] : pool_.LiveSlices(page)) {
        absl::StatusOr<SliceLocation> target =
            pool_.Reserve(pool_.slice_bytes(page), owner, MemoryPool::Fallback::kNone);
        if (!target.ok()) {
          complete = false;
          break;
        }
        plan.push_back(Move{owner, SliceLocation{page, slot}, *target});
      }
      if (!complete) {  // all or nothing per page
        for (const Move& move : plan) pool_.Release(move.to);
        continue;
      }
      planned_pages.push_back(page);
      moves.insert(moves.end(), plan.begin(), plan.end());
    }

    Stream& stream = backend_.stream(0);
    absl::Status enqueued;
    for (const Move& move : moves) {
      absl::StatusOr<DeviceResource> from = pool_.Resolve(move.from, move.id);
      absl::StatusOr<DeviceResource> to = pool_.Resolve(move.to, move.id);
      enqueued = !from.ok() ? from.status()
                 : !to.ok() ? to.status()
                            : D::CopyOnDevice(*from, *to, stream.signal());
      if (!enqueued.ok()) break;
      report.bytes_moved += from->size_bytes;
    }
    // Whatever happens next, the pages take slices again.
    for (uint64_t page : pages) pool_.SetRetired(page, false);
    if (absl::Status copied = stream.Synchronize(); !copied.ok()) {
      // A copy may still write the targets: keep them reserved (leak) rather than free.
      return absl::InternalError(
          absl::StrCat("relocation copies failed; ", moves.size(),
                       " target slices stay reserved: ", copied.message()));
    }
    if (!enqueued.ok()) {
      // The copies that were enqueued ended: nothing moves, and the targets go back.
      for (const Move& move : moves) pool_.Release(move.to);
      return enqueued;
    }
    for (const Move& move : moves) {
      buffers_.at(move.id).location = move.to;
      pool_.Release(move.from);
    }
    pool_.CleanUp();
    if (moves.empty()) releases_at_futile_relocation_ = pool_.releases();
    report.pages_relocated = planned_pages.size();
    report.allocations_moved = moves.size();
    relocations_ += report.pages_relocated;
    return report;
  }

  void ReclaimFinished() override {
    for (DropQueue<Stream>& queue : drop_queues_) queue.ReleaseCompleted();
    // Note [Per-buffer stream ordering]: each stream's earliest access first.
    for (std::vector<DeferredAccess>& accesses : deferred_accesses_) {
      while (!accesses.empty() && accesses.front().event.IsComplete()) {
        const uint64_t freed = accesses.front().free;
        std::pop_heap(accesses.begin(), accesses.end(), LaterMark);
        accesses.pop_back();
        auto deferred = deferred_.find(freed);
        if (--deferred->second.running == 0) {
          bytes_being_freed_ -= deferred->second.slice_bytes;
          pool_.Release(deferred->second.location);
          deferred_.erase(deferred);
        }
      }
    }
  }

  bool ReclaimWhenIdle() override {
    for (int i = 0; i < backend_.stream_count(); ++i) {
      drop_queues_[i].Seal(backend_.stream(i));
    }
    ReclaimFinished();
    // Launches still running are looked at again too: what GetStats reports of them
    // follows as they end.
    return !deferred_.empty() ||
           std::any_of(drop_queues_.begin(), drop_queues_.end(),
                       [](const DropQueue<Stream>& queue) { return queue.held_entries() > 0; }) ||
           std::any_of(sessions_.begin(), sessions_.end(), [](const auto& session) {
             return session.second.queued_on_streams.Count() > 0;
           });
  }

  bool WantsRelocation() const override {
    // A relocation that could place nothing is not tried again until memory came back.
    return pool_.releases() != releases_at_futile_relocation_ &&
           !pool_.PagesToEvacuate().empty();
  }

  DeviceUsage Usage() const override {
    DeviceUsage usage = DeviceFigures();
    for (const auto& [id, state] : sessions_) {
      usage.sessions[id] = FiguresOf(state);
      usage.queued_on_streams += usage.sessions[id].queued_on_streams;
    }
    return usage;
  }

  // Note [Usage reported as it changes].
  UsageUpdate TakeUsageUpdate(bool complete) override {
    UsageUpdate update{.usage = DeviceFigures(), .complete = complete};
    if (complete) {
      for (const auto& [id, unused] : sessions_) changed_sessions_.insert(id);
    }
    changed_sessions_.insert(sessions_with_queued_work_.begin(),
                             sessions_with_queued_work_.end());
    sessions_with_queued_work_.clear();
    for (SessionId id : changed_sessions_) {
      auto state = sessions_.find(id);
      if (state == sessions_.end()) {
        if (!complete) update.gone.push_back(id);
        continue;
      }
      const SessionUsage figures = FiguresOf(state->second);
      update.usage.sessions[id] = figures;
      update.usage.queued_on_streams += figures.queued_on_streams;
      if (figures.queued_on_streams > 0) sessions_with_queued_work_.insert(id);
    }
    changed_sessions_.clear();
    return update;
  }

  absl::Status DeviceHealth() override { return D::DeviceHealth(backend_.context()); }
  void AbortKernels() override { D::AbortKernels(backend_.context()); }

  DeviceLoss Abandon(const absl::Status& cause) override {
    DeviceLoss loss = std::move(lost_);
    for (const auto& [id, buffer] : buffers_) {
      loss.buffers[id] = DeviceLoss::LostBuffer{buffer.session, cause};
    }
    for (const auto& [session, state] : sessions_) loss.unreported.try_emplace(session, cause);
    loss.next_buffer = next_buffer_;
    return loss;
  }

  void Inherit(DeviceLoss loss) override {
    lost_ = std::move(loss);
    next_buffer_ = lost_.next_buffer;
  }

 private:
  struct Access {
    int stream;
    Event event;
    uint64_t mark;  // its order among its stream's accesses (marks_)
  };

  struct Buffer {
    SessionId session = 0;
    uint64_t size_bytes = 0;
    uint64_t footprint_bytes = 0;
    SliceLocation location;
    std::optional<Access> last_write;
    std::vector<Access> reads;  // at most one per stream
    // Why the contents are not valid data (a skipped launch wrote nothing); OK if valid.
    absl::Status taint;
    // The launch that last wrote the buffer; its outcome says whether it really did.
    std::shared_ptr<LaunchOutcome> producer;
  };

  // A launch whose failure the next Synchronize of its logical stream reports.
  struct UnreportedLaunch {
    Event done;
    std::shared_ptr<LaunchOutcome> outcome;
  };

  static constexpr size_t kCompactUnreportedAt = 64;

  // Calls back once every one of `events` completed (on the thread that completed the last
  // of them); null where the driver's events cannot call back.
  static WorkEndNotice NoticeOnceComplete(std::vector<Event> events) {
    if constexpr (!NotifyingEvent<Event>) {
      return nullptr;
    } else {
      return [events = std::move(events)](absl::AnyInvocable<void()> ended) mutable {
        OnAllComplete(std::move(events), std::move(ended));
      };
    }
  }

  // Room once every one of `events` completed. Their failures are the work's own sessions'
  // to report (its Synchronize or its read), not the waiting command's.
  static RoomWait RoomOnceComplete(std::vector<Event> events) {
    WorkEndNotice notice = NoticeOnceComplete(events);
    return RoomWait{.wait = [events = std::move(events)] {
                      for (const Event& event : events) event.Wait().IgnoreError();
                      return absl::OkStatus();
                    },
                    .notice = std::move(notice)};
  }

  // A session's logical stream (Note [Logical streams]).
  struct StreamBinding {
    int index = 0;  // the device stream it is on
    // Its latest work, on whichever device stream: complete once all of it completed.
    std::optional<Event> last;
    // Its launches since its last Synchronize, and the first failure of those already
    // let go (KeepUnreported).
    std::vector<UnreportedLaunch> launches;
    absl::Status failed;
    size_t compact_at = kCompactUnreportedAt;
  };

  // Adds `launch` to the binding's unreported launches. Past compact_at of them, those
  // that ended are let go (their first failure kept), so a session that never
  // synchronizes holds a bounded number.
  static void KeepUnreported(StreamBinding& binding, UnreportedLaunch launch) {
    if (binding.launches.size() >= binding.compact_at) {
      std::erase_if(binding.launches, [&binding](const UnreportedLaunch& kept) {
        if (!kept.done.IsComplete()) return false;
        binding.failed.Update(kept.outcome->status());
        return true;
      });
      binding.compact_at = std::max(kCompactUnreportedAt, 2 * binding.launches.size());
    }
    binding.launches.push_back(std::move(launch));
  }

  // The ends of a session's launches, device copies and reads that may not have run yet,
  // oldest first. Counted from the oldest that has not run: on one stream work ends in
  // order, so the count is exact for a session on one stream (a later one that ended
  // behind an earlier one still running on another stream is counted a little longer).
  // Counting lets go of the work that ran first, so it asks the device about the work
  // that ended since the last count, not about everything queued: Usage counts every
  // session's after every device task.
  class QueuedWork {
   public:
    void Add(Event done) { events_.push_back(std::move(done)); }
    uint64_t Count() const {
      while (!events_.empty() && events_.front().IsComplete()) events_.pop_front();
      return events_.size();
    }
    // The oldest still queued; only while Count() > 0.
    const Event& Oldest() const { return events_.front(); }

   private:
    // Work that ran is dropped by the const Count: bookkeeping, not what is counted.
    mutable std::deque<Event> events_;
  };

  struct SessionState {
    absl::flat_hash_set<BufferId> buffers;
    uint64_t used_bytes = 0;
    absl::flat_hash_map<LogicalStream, StreamBinding> streams;
    QueuedWork queued_on_streams;
    uint64_t launches = 0;  // queued since it opened
    // What its kernels printed, until a Synchronize takes it.
    std::shared_ptr<KernelOutput> printed = std::make_shared<KernelOutput>(
        64 << 10, "[kernel output cut: a session keeps 64 KiB between Synchronize calls]");
  };

  // The session's state, made if new, for a change to it: its next usage report includes it.
  SessionState& StateOf(SessionId session) {
    changed_sessions_.insert(session);
    return sessions_[session];
  }

  // The device-wide figures of Usage(), without the sessions' (nor their queued work).
  DeviceUsage DeviceFigures() const {
    DeviceUsage usage;
    usage.memory_capacity_bytes = backend_.capacity_bytes();
    usage.memory_used_bytes = pool_.used_bytes();
    usage.memory_reserved_bytes = pool_.reserved_bytes();
    for (const DropQueue<Stream>& queue : drop_queues_) {
      usage.drop_queue_bytes += queue.held_bytes();
      usage.drop_queue_entries += queue.held_entries();
    }
    usage.relocations = relocations_;
    usage.pinned_outstanding_bytes = pinned_.outstanding_bytes();
    return usage;
  }

  static SessionUsage FiguresOf(const SessionState& state) {
    return SessionUsage{state.used_bytes, state.buffers.size(), state.queued_on_streams.Count(),
                        state.launches};
  }

  // Note [Stream backpressure]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~
  // A launch, a device-to-device copy and a read return once queued on a stream (a read
  // is answered later, off the device thread), so a session could queue work without end
  // while its stream is busy. Each session may have at most
  // options.session_queued_on_streams of them that have not run to their end; one more
  // is RESOURCE_EXHAUSTED (retry after a Synchronize, or once some finished), as a full
  // queue is elsewhere in the daemon. A Submit batch, whose commands the daemon holds
  // already, waits instead (StreamRoom, off the device thread) and goes on once the
  // session's oldest work on streams has run: a batch of any length runs whole. Writes
  // are bounded by their stream's drop queue instead (Note [Drop queue]).

  // True when the session may queue more work on its streams. Counts also without a
  // limit, so that what is kept stays bounded by the work actually queued.
  bool HasStreamRoom(const SessionState& state) const {
    const uint64_t queued = state.queued_on_streams.Count();
    const uint32_t limit = options_.session_queued_on_streams;
    return limit == 0 || queued < limit;
  }

  // OK when the session may queue more work on its streams; otherwise RESOURCE_EXHAUSTED
  // naming the limit.
  absl::Status AdmitToStream(const SessionState& state) const {
    if (HasStreamRoom(state)) return absl::OkStatus();
    return absl::ResourceExhaustedError(absl::StrCat(
        "the session has ", state.queued_on_streams.Count(),
        " launches, copies and reads queued on streams that have not run yet, its limit "
        "(limits.session_queued_commands): Synchronize, or retry once some have finished"));
  }

  // A freed buffer's memory, reserved while accesses to it run (Note [Per-buffer stream
  // ordering]).
  struct DeferredFree {
    SliceLocation location;
    uint64_t slice_bytes = 0;
    int running = 0;  // its accesses in `deferred_accesses_`
  };
  // One of them, in its stream's heap.
  struct DeferredAccess {
    uint64_t mark;
    Event event;
    uint64_t free;  // its DeferredFree's key
  };
  // The heaps' order: the earliest mark on top.
  static bool LaterMark(const DeferredAccess& a, const DeferredAccess& b) {
    return a.mark > b.mark;
  }

  // Note [Staging through pinned chunks]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // A shared-memory region the device registered is copied from and into in place (DMA
  // from the client's pages). One the driver refused to register is not handed to the
  // driver's asynchronous copies, which would stage it themselves, synchronously: it is
  // split into chunks of kStagingChunkBytes (between rows of a pitched layout). A write
  // copies each chunk into pinned memory and enqueues its DMA before filling the next,
  // so the host copy of one chunk overlaps the device copy of the one before; the drop
  // queue keeps each chunk until its copy completed, and bounds how many are held (Note
  // [Drop queue]). A read lands in pinned chunks that are copied into the region once
  // the read completed, off the device thread. A chunk the pinned pool cannot supply is
  // copied in place after all.
  static constexpr uint64_t kStagingChunkBytes = uint64_t{4} << 20;

  // How a copy may use the host memory it is handed when that is not pinned().
  enum class HostAccess {
    kInPlace,     // the driver copies from and into any host memory
    kPinnedOnly,  // staged through pinned chunks
  };

  // Write and WriteShared: `host` gives the `size` bytes to copy from (staged, or used
  // in place) once the write is known to be valid; they stay alive on the drop queue
  // until the copy completed.
  absl::Status WriteFrom(SessionId session, LogicalStream logical, BufferId id,
                         const CopyLayout& layout, uint64_t size, HostAccess access,
                         absl::FunctionRef<absl::StatusOr<Bytes>()> host) {
    ASSIGN_OR_RETURN(Buffer * buffer, Lookup(session, id));
    if (size != layout.host_bytes()) {
      return absl::InvalidArgumentError(absl::StrCat("write carries ", size,
                                                     " bytes but its layout needs ",
                                                     layout.host_bytes()));
    }
    RETURN_IF_ERROR(CheckLayoutBounds(layout, buffer->size_bytes));
    if (layout.host_bytes() == 0) return absl::OkStatus();
    ASSIGN_OR_RETURN(DeviceResource resource, pool_.Resolve(buffer->location, id));
    ASSIGN_OR_RETURN(Bytes staged, host());
    ASSIGN_OR_RETURN(StreamBinding* const binding, StreamFor(session, logical));
    const int index = binding->index;
    Stream& stream = backend_.stream(index);
    RETURN_IF_ERROR(AwaitBeforeWrite(*buffer, index));
    if (staged.pinned() || access == HostAccess::kInPlace) {
      RETURN_IF_ERROR(D::CopyToDevice(resource, NormalizedLayout(layout),
                                      staged.const_span(), stream));
    } else {
      RETURN_IF_ERROR(CopyThroughPinnedChunks(resource, layout, staged, index));
    }
    binding->last = stream.RecordEvent();
    MarkWritten(*buffer, index, *binding->last);
    HoldsFreshDataIfWhole(*buffer, layout);
    drop_queues_[index].Push(std::move(staged));
    drop_queues_[index].SealIfDue(stream);
    return absl::OkStatus();
  }

  // Enqueues the write of `source` per `layout` through pinned chunks (Note [Staging
  // through pinned chunks]); the caller pushes `source` on the drop queue after it.
  absl::Status CopyThroughPinnedChunks(const DeviceResource& resource, const CopyLayout& layout,
                                       const Bytes& source, int index) {
    Stream& stream = backend_.stream(index);
    for (const CopyChunk& chunk : SplitCopy(layout, kStagingChunkBytes)) {
      const uint64_t size = chunk.layout.host_bytes();
      absl::Span<const std::byte> from = source.const_span().subspan(chunk.host_offset_bytes, size);
      absl::StatusOr<PinnedPool::Lease> lease = pinned_.Acquire(size);
      if (!lease.ok()) {
        RETURN_IF_ERROR(D::CopyToDevice(resource, chunk.layout, from, stream));
        continue;
      }
      std::memcpy(lease->resource.data, from.data(), size);
      Bytes staged = D::PinnedBytes(lease->binding, lease->resource, size);
      RETURN_IF_ERROR(D::CopyToDevice(resource, chunk.layout, staged.const_span(), stream));
      drop_queues_[index].Push(std::move(staged));
      drop_queues_[index].SealIfDue(stream);
    }
    return absl::OkStatus();
  }

  // A read's pinned chunk: where its bytes go in the read's host buffer.
  struct LandedChunk {
    uint64_t host_offset_bytes;
    Bytes pinned;
  };

  // Enqueues the read per `layout` into pinned chunks, or into `out` itself where the
  // pinned pool refuses one; the chunks to copy into `out` once the read completed.
  absl::StatusOr<std::vector<LandedChunk>> ReadThroughPinnedChunks(const DeviceResource& resource,
                                                                   const CopyLayout& layout,
                                                                   const Bytes& out,
                                                                   Stream& stream) {
    std::vector<LandedChunk> landed;
    for (const CopyChunk& chunk : SplitCopy(layout, kStagingChunkBytes)) {
      const uint64_t size = chunk.layout.host_bytes();
      absl::StatusOr<PinnedPool::Lease> lease = pinned_.Acquire(size);
      Bytes into = lease.ok() ? D::PinnedBytes(lease->binding, lease->resource, size)
                              : Bytes(out.data() + chunk.host_offset_bytes, size, nullptr);
      RETURN_IF_ERROR(D::CopyToHost(resource, chunk.layout, into, stream));
      if (lease.ok()) landed.push_back(LandedChunk{chunk.host_offset_bytes, std::move(into)});
    }
    return landed;
  }

  // Read and ReadShared: `host` gives the bytes the copy lands in, once the read is
  // known to be valid.
  absl::StatusOr<PendingRead> ReadInto(SessionId session, LogicalStream logical, BufferId id,
                                       const CopyLayout& layout, HostAccess access,
                                       absl::FunctionRef<absl::StatusOr<Bytes>()> host) {
    ASSIGN_OR_RETURN(Buffer * buffer, Lookup(session, id));
    RETURN_IF_ERROR(CheckLayoutBounds(layout, buffer->size_bytes));
    RETURN_IF_ERROR(CheckNotTainted(id, *buffer));
    if (layout.host_bytes() == 0) {
      return PendingRead{Bytes(), [] { return absl::OkStatus(); }};
    }
    RETURN_IF_ERROR(AdmitToStream(StateOf(session)));
    ASSIGN_OR_RETURN(DeviceResource resource, pool_.Resolve(buffer->location, id));
    ASSIGN_OR_RETURN(Bytes out, host());
    ASSIGN_OR_RETURN(StreamBinding* const binding, StreamFor(session, logical));
    const int index = binding->index;
    Stream& stream = backend_.stream(index);
    RETURN_IF_ERROR(AwaitBeforeRead(*buffer, index));
    std::vector<LandedChunk> landed;
    if (out.pinned() || access == HostAccess::kInPlace) {
      RETURN_IF_ERROR(D::CopyToHost(resource, NormalizedLayout(layout), out, stream));
    } else {
      ASSIGN_OR_RETURN(landed, ReadThroughPinnedChunks(resource, layout, out, stream));
    }
    Event done = stream.RecordEvent();
    binding->last = done;
    StateOf(session).queued_on_streams.Add(done);
    MarkRead(*buffer, index, done);
    std::byte* into = out.data();
    return PendingRead{std::move(out), [done, id, producer = buffer->producer,
                                        landed = std::move(landed), into]() -> absl::Status {
                         RETURN_IF_ERROR(done.Wait());
                         for (const LandedChunk& chunk : landed) {
                           std::memcpy(into + chunk.host_offset_bytes, chunk.pinned.data(),
                                       chunk.pinned.size());
                         }
                         return ProducerStatus(id, producer.get());
                       }};
  }

  // `layout`'s rows of `buffer` were just overwritten (by a write or a fill): when they
  // are every byte of it, no failed launch's taint or producer is left on it.
  static void HoldsFreshDataIfWhole(Buffer& buffer, const CopyLayout& layout) {
    if (layout.offset_bytes != 0 || !layout.is_contiguous() ||
        layout.host_bytes() != buffer.size_bytes) {
      return;
    }
    buffer.taint = absl::OkStatus();
    buffer.producer.reset();
  }

  static absl::Status CheckNotTainted(BufferId id, const Buffer& buffer) {
    return buffer.taint.ok() ? absl::OkStatus() : TaintedBufferError(id, buffer.taint);
  }

  static MemoryPool::Options PoolOptions(const CommandOptions& options, const Backend& backend) {
    MemoryPool::Options pool = options.memory;
    pool.capacity_bytes = backend.capacity_bytes();
    return pool;
  }

  // A pitched layout whose rows are not padded is one linear copy.
  static CopyLayout NormalizedLayout(const CopyLayout& layout) {
    if (!layout.is_contiguous() || layout.height <= 1) return layout;
    return CopyLayout::Contiguous(layout.offset_bytes, layout.host_bytes());
  }

  // Marks the launch's write and read-write buffers (those of the session) as holding
  // no valid data because of `cause`.
  void TaintOutputs(SessionId session, const KernelLaunch& launch, const absl::Status& cause) {
    for (const LaunchArgument& arg : launch.args) {
      if (arg.kind != ParamKind::kBuffer || arg.access == BufferAccess::kRead) continue;
      absl::StatusOr<Buffer*> buffer = Lookup(session, arg.buffer);
      if (buffer.ok()) (*buffer)->taint = cause;
    }
  }

  absl::StatusOr<Buffer*> Lookup(SessionId session, BufferId id) {
    auto it = buffers_.find(id);
    if (it == buffers_.end() || it->second.session != session) {
      if (auto lost = lost_.buffers.find(id);
          lost != lost_.buffers.end() && lost->second.session == session) {
        return absl::UnavailableError(
            absl::StrCat("buffer ", id, " was lost: ", lost->second.cause.message()));
      }
      // Unknown and foreign look the same: a session learns nothing about others.
      return absl::NotFoundError(absl::StrCat("buffer ", id, " not found in this session"));
    }
    return &it->second;
  }

  // Note [Logical streams]
  // ~~~~~~~~~~~~~~~~~~~~~~
  // A session's logical streams are bound to the device's streams, which sessions share
  // once there are more logical streams than device streams. Sharing may cost a session
  // time, never what it is told:
  // - A new logical stream gets an idle device stream if there is one (on a busy one it
  //   would wait behind work not its own), and among those the one fewest logical
  //   streams share (the first of those after the last one handed out).
  // - A logical stream whose own work has all ended, on a device stream that is shared
  //   and busy with another's, moves to an idle device stream before it enqueues more.
  //   Nothing of its own is left behind, and per-buffer ordering (Note [Per-buffer
  //   stream ordering]) orders its buffers across streams anyway.
  // - A Synchronize of a logical stream waits for that stream's own latest work, not for
  //   everything on the device stream, and reports the failures of its own launches
  //   (their LaunchOutcome, driver/launch.h), each once. The device stream's own error
  //   is never asked for a session: it may be another session's.

  // The binding of a session's logical stream, made on first use; valid until the
  // session's next new logical stream. RESOURCE_EXHAUSTED past the session's limit of
  // logical streams (stream 0 is always there).
  absl::StatusOr<StreamBinding*> StreamFor(SessionId session, LogicalStream logical) {
    auto& streams = StateOf(session).streams;
    if (auto known = streams.find(logical); known != streams.end()) {
      StreamBinding& binding = known->second;
      if (stream_users_[binding.index] > 1 &&
          (!binding.last.has_value() || binding.last->IsComplete())) {
        MoveOffBusyStream(binding);
      }
      return &binding;
    }
    if (logical != 0 && streams.size() >= options_.session_max_streams) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the session uses ", streams.size(), " streams, its limit "
          "(limits.max_streams_per_session)"));
    }
    StreamBinding& binding = streams[logical];
    BindTo(binding, LeastBusyStream().index);
    return &binding;
  }

  // Puts `binding` on device stream `index` (a new binding's index is unused).
  void BindTo(StreamBinding& binding, int index) {
    ++stream_users_[index];
    last_stream_ = index;
    binding.index = index;
  }

  struct StreamChoice {
    int index;
    bool idle;
  };

  // An idle device stream if there is one, else any; among those the one fewest logical
  // streams share, the first of those after the last one handed out.
  StreamChoice LeastBusyStream() {
    const int count = backend_.stream_count();
    StreamChoice chosen{-1, false};
    for (int step = 1; step <= count; ++step) {
      const int candidate = (last_stream_ + step) % count;
      const bool idle = backend_.stream(candidate).RecordEvent().IsComplete();
      if (chosen.index < 0 || (idle && !chosen.idle) ||
          (idle == chosen.idle && stream_users_[candidate] < stream_users_[chosen.index])) {
        chosen = StreamChoice{candidate, idle};
      }
    }
    return chosen;
  }

  // Moves `binding`, whose own work has ended, off its device stream when that is busy
  // (with another's work, then) and an idle one exists.
  void MoveOffBusyStream(StreamBinding& binding) {
    if (backend_.stream(binding.index).RecordEvent().IsComplete()) return;
    const StreamChoice idle = LeastBusyStream();
    if (!idle.idle) return;
    --stream_users_[binding.index];
    BindTo(binding, idle.index);
  }

  // Note [Out of device memory]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // A reservation that finds the device full first takes back, without waiting, what
  // finished work no longer needs (freed buffers whose last users ended, empty pages,
  // cached pinned memory) and tries once more; then it is RESOURCE_EXHAUSTED. It never
  // waits for streams here, on the device thread: that would hold every session's
  // commands behind whichever kernel still uses a freed buffer. Memory freed but still
  // held for work in flight comes back when that work ends; the caller may wait for it
  // off the device thread (MemoryBeingFreed) and ask again.
  absl::StatusOr<SliceLocation> ReserveWithRetry(uint64_t size_bytes, BufferId owner) {
    absl::StatusOr<SliceLocation> location = pool_.Reserve(size_bytes, owner);
    if (location.ok() || !absl::IsResourceExhausted(location.status())) return location;
    ReleaseWhatFinished();
    location = pool_.Reserve(size_bytes, owner);
    if (location.ok()) return location;
    return absl::ResourceExhaustedError(absl::StrCat(
        "out of device memory: requested ", size_bytes, " bytes, ", Available(),
        " available of ", backend_.capacity_bytes(), " (", BytesBeingFreed(),
        " more return once the work still using freed buffers ends)"));
  }

  void ReleaseWhatFinished() {
    for (int i = 0; i < backend_.stream_count(); ++i) {
      drop_queues_[i].Seal(backend_.stream(i));
    }
    ReclaimFinished();
    pool_.CleanUp();
    pinned_.Trim();
  }

  // Bytes of freed buffers still held for work in flight (Note [Per-buffer stream
  // ordering]).
  uint64_t BytesBeingFreed() const { return bytes_being_freed_; }

  uint64_t Available() const { return backend_.capacity_bytes() - pool_.used_bytes(); }

  absl::StatusOr<Bytes> Stage(std::string data) {
    if (data.size() > options_.staging_threshold_bytes) {
      return KeepPayload(std::move(data));  // owned: safe to copy from in place
    }
    const uint64_t size = data.size();
    absl::StatusOr<PinnedPool::Lease> lease = pinned_.Acquire(size);
    if (!lease.ok()) return KeepPayload(std::move(data));
    std::memcpy(lease->resource.data, data.data(), size);
    if (options_.payloads != nullptr) options_.payloads->Give(std::move(data));
    return D::PinnedBytes(lease->binding, lease->resource, size);
  }

  // `payload` as Bytes whose memory goes back to the payload pool when they die.
  Bytes KeepPayload(std::string payload) {
    if (options_.payloads == nullptr) return Bytes::FromString(std::move(payload));
    return options_.payloads->Wrap(std::move(payload));
  }

  // Note [Fresh memory]
  // ~~~~~~~~~~~~~~~~~~~
  // A slice an earlier buffer had (of this session or another), or one on a page the
  // driver did not zero, may still hold that buffer's bytes. A new buffer must not show
  // them to its owner, through a Read or a kernel: its whole slice is filled with zeros
  // first, on the device (cuMemsetD8Async: no host memory, nothing over the bus), on the
  // stream of the session's logical stream 0 (not a stream another session's kernel may
  // be holding up) that every later use of the buffer is ordered after (Note [Per-buffer
  // stream ordering]). Pages the CPU driver hands out read as zeros already, so there only
  // reused slices pay for it.
  absl::Status ClearOldBytes(SessionId session, BufferId id, Buffer& buffer) {
    ASSIGN_OR_RETURN(DeviceResource resource, pool_.Resolve(buffer.location, id));
    ASSIGN_OR_RETURN(StreamBinding* const binding, StreamFor(session, 0));
    Stream& stream = backend_.stream(binding->index);
    RETURN_IF_ERROR(D::FillOnDevice(resource, CopyLayout::Contiguous(0, resource.size_bytes),
                                    FillPattern{.value = 0, .element_bytes = 1}, stream.signal()));
    binding->last = stream.RecordEvent();
    MarkWritten(buffer, binding->index, *binding->last);
    return absl::OkStatus();
  }

  // Host memory to copy into whole: pinned below the staging threshold, else
  // from the payload pool or the heap, not zero-filled.
  absl::StatusOr<Bytes> HostBuffer(uint64_t size) {
    if (size <= options_.staging_threshold_bytes) {
      absl::StatusOr<PinnedPool::Lease> lease = pinned_.Acquire(size);
      if (lease.ok()) return D::PinnedBytes(lease->binding, lease->resource, size);
    }
    if (options_.payloads != nullptr) return options_.payloads->TakeBytes(size);
    return Bytes::Uninitialized(size);
  }

  absl::Status AwaitBeforeRead(const Buffer& buffer, int index) {
    if (buffer.last_write && buffer.last_write->stream != index &&
        !buffer.last_write->event.IsComplete()) {
      RETURN_IF_ERROR(backend_.stream(index).WaitEvent(buffer.last_write->event));
    }
    return absl::OkStatus();
  }

  absl::Status AwaitBeforeWrite(const Buffer& buffer, int index) {
    RETURN_IF_ERROR(AwaitBeforeRead(buffer, index));
    for (const Access& read : buffer.reads) {
      if (read.stream != index && !read.event.IsComplete()) {
        RETURN_IF_ERROR(backend_.stream(index).WaitEvent(read.event));
      }
    }
    return absl::OkStatus();
  }

  // `event` was just recorded on stream `index`.
  void MarkRead(Buffer& buffer, int index, const Event& event) {
    const uint64_t mark = ++marks_[index];
    for (Access& read : buffer.reads) {
      if (read.stream == index) {
        read.event = event;
        read.mark = mark;
        return;
      }
    }
    buffer.reads.push_back(Access{index, event, mark});
  }

  // `event` was just recorded on stream `index`.
  void MarkWritten(Buffer& buffer, int index, const Event& event) {
    buffer.last_write = Access{index, event, ++marks_[index]};
    buffer.reads.clear();
  }

  // Drops the buffer; its memory is reserved until every stream that may touch it is
  // past that work (Note [Per-buffer stream ordering]).
  void Release(BufferId id, Buffer& buffer) {
    std::vector<const Access*> running;
    if (buffer.last_write && !buffer.last_write->event.IsComplete()) {
      running.push_back(&*buffer.last_write);
    }
    for (const Access& read : buffer.reads) {
      if (!read.event.IsComplete()) running.push_back(&read);
    }
    if (running.empty()) {
      pool_.Release(buffer.location);
    } else {
      const uint64_t freed = next_deferred_++;
      const uint64_t slice_bytes = pool_.slice_bytes(buffer.location.page);
      deferred_[freed] =
          DeferredFree{buffer.location, slice_bytes, static_cast<int>(running.size())};
      bytes_being_freed_ += slice_bytes;
      for (const Access* access : running) {
        std::vector<DeferredAccess>& accesses = deferred_accesses_[access->stream];
        accesses.push_back(DeferredAccess{access->mark, access->event, freed});
        std::push_heap(accesses.begin(), accesses.end(), LaterMark);
      }
    }
    SessionState& state = StateOf(buffer.session);
    state.buffers.erase(id);
    state.used_bytes -= buffer.footprint_bytes;
    buffers_.erase(id);
  }

  Backend& backend_;
  const CommandOptions options_;
  MemoryPool pool_;
  PinnedPool pinned_;
  std::vector<DropQueue<Stream>> drop_queues_;  // one per device stream
  absl::flat_hash_map<BufferId, Buffer> buffers_;
  absl::flat_hash_map<SessionId, SessionState> sessions_;
  // Note [Usage reported as it changes]: the sessions to report next, besides those that
  // had work queued on streams at the last report.
  absl::flat_hash_set<SessionId> changed_sessions_;
  absl::flat_hash_set<SessionId> sessions_with_queued_work_;
  absl::flat_hash_map<uint64_t, DeferredFree> deferred_;
  uint64_t next_deferred_ = 0;
  uint64_t bytes_being_freed_ = 0;  // their slices' bytes
  // Per device stream: the accesses deferred frees wait for, a heap by LaterMark.
  std::vector<std::vector<DeferredAccess>> deferred_accesses_;
  std::vector<uint64_t> marks_;  // per device stream: accesses marked so far
  // Handles and sessions a device reset took from a predecessor (next_buffer unused).
  DeviceLoss lost_;
  BufferId next_buffer_ = 1;
  // Per device stream: how many sessions' logical streams it carries.
  std::vector<int> stream_users_;
  int last_stream_ = -1;
  uint64_t relocations_ = 0;
  // pool_.releases() when a relocation last found no place for any slice it was to move.
  uint64_t releases_at_futile_relocation_ = ~uint64_t{0};
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_COMMAND_COMMAND_H_
