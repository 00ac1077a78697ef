#ifndef GPUCMDD_SERVER_COMMAND_FAKE_COMMAND_H_
#define GPUCMDD_SERVER_COMMAND_FAKE_COMMAND_H_

// A test double of CommandInterface: buffers are host strings, copies happen at once,
// launches run nothing (they are recorded). It keeps the rules the layers above rely on
// (sessions own their buffers, bounds, capacity), so the core and the RPC layer can be
// tested, under ThreadSanitizer too, without a driver or a daemon process.
//
// Thread-safety: as CommandInterface (device thread only); `launches()` may be read
// only while no command runs.

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "server/command/command_interface.h"

namespace gpucmd {

class FakeCommand final : public CommandInterface {
 public:
  explicit FakeCommand(uint64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}

  absl::StatusOr<BufferId> Allocate(SessionId session, uint64_t size_bytes) override {
    if (size_bytes > capacity_bytes_ - used_bytes_) {
      return absl::ResourceExhaustedError(absl::StrCat("requested ", size_bytes, " bytes, ",
                                                       capacity_bytes_ - used_bytes_,
                                                       " available"));
    }
    used_bytes_ += size_bytes;
    buffers_[next_buffer_] = {session, std::string(size_bytes, '\0')};
    return next_buffer_++;
  }

  absl::Status Free(SessionId session, BufferId buffer) override {
    absl::StatusOr<std::string*> bytes = Lookup(session, buffer);
    if (!bytes.ok()) return bytes.status();
    used_bytes_ -= (*bytes)->size();
    buffers_.erase(buffer);
    return absl::OkStatus();
  }

  absl::Status Write(SessionId session, LogicalStream stream, BufferId buffer,
                     const CopyLayout& layout, std::string data) override {
    return WriteShared(session, stream, buffer, layout, Bytes::FromString(std::move(data)));
  }

  // Host memory is the fake's device memory: reached directly.
  absl::StatusOr<HostRegistration> RegisterHost(const HostResource&) override {
    return HostRegistration();
  }

  // Copies at once.
  absl::Status WriteShared(SessionId session, LogicalStream, BufferId buffer,
                           const CopyLayout& layout, Bytes source) override {
    absl::StatusOr<std::string*> bytes = Lookup(session, buffer);
    if (!bytes.ok()) return bytes.status();
    if (absl::Status inside = CheckLayoutBounds(layout, (*bytes)->size()); !inside.ok()) {
      return inside;
    }
    for (uint64_t row = 0; row < layout.height; ++row) {
      std::memcpy((*bytes)->data() + layout.offset_bytes + row * layout.stride_bytes,
                  source.data() + row * layout.width_bytes, layout.width_bytes);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<PendingRead> Read(SessionId session, LogicalStream stream, BufferId buffer,
                                   const CopyLayout& layout) override {
    return ReadShared(session, stream, buffer, layout,
                      Bytes::FromString(std::string(layout.host_bytes(), '\0')));
  }

  absl::StatusOr<PendingRead> ReadShared(SessionId session, LogicalStream, BufferId buffer,
                                         const CopyLayout& layout, Bytes target) override {
    absl::StatusOr<std::string*> bytes = Lookup(session, buffer);
    if (!bytes.ok()) return bytes.status();
    if (absl::Status inside = CheckLayoutBounds(layout, (*bytes)->size()); !inside.ok()) {
      return inside;
    }
    for (uint64_t row = 0; row < layout.height; ++row) {
      std::memcpy(target.data() + row * layout.width_bytes,
                  (*bytes)->data() + layout.offset_bytes + row * layout.stride_bytes,
                  layout.width_bytes);
    }
    return PendingRead{std::move(target), [] { return absl::OkStatus(); }};
  }

  absl::Status CheckRange(SessionId session, BufferId buffer,
                          const CopyLayout& layout) override {
    absl::StatusOr<std::string*> bytes = Lookup(session, buffer);
    if (!bytes.ok()) return bytes.status();
    return CheckLayoutBounds(layout, (*bytes)->size());
  }

  absl::Status Copy(SessionId session, LogicalStream, BufferId source, BufferId target,
                    const DeviceCopyLayout& layout) override {
    absl::StatusOr<std::string*> from = Lookup(session, source);
    if (!from.ok()) return from.status();
    absl::StatusOr<std::string*> to = Lookup(session, target);
    if (!to.ok()) return to.status();
    if (absl::Status valid = CheckLayoutBounds(layout.source(), (*from)->size()); !valid.ok()) {
      return valid;
    }
    if (absl::Status valid = CheckLayoutBounds(layout.target(), (*to)->size()); !valid.ok()) {
      return valid;
    }
    for (uint64_t row = 0; row < layout.height; ++row) {
      std::memmove((*to)->data() + layout.target_offset_bytes + row * layout.target_stride_bytes,
                   (*from)->data() + layout.source_offset_bytes + row * layout.source_stride_bytes,
                   layout.width_bytes);
    }
    return absl::OkStatus();
  }

  absl::Status Fill(SessionId session, LogicalStream, BufferId buffer, const CopyLayout& layout,
                    FillPattern pattern) override {
    absl::StatusOr<std::string*> bytes = Lookup(session, buffer);
    if (!bytes.ok()) return bytes.status();
    if (absl::Status valid = CheckFill(pattern, layout, (*bytes)->size()); !valid.ok()) {
      return valid;
    }
    for (uint64_t row = 0; row < layout.height; ++row) {
      char* const start = (*bytes)->data() + layout.offset_bytes + row * layout.stride_bytes;
      for (uint64_t i = 0; i < layout.width_bytes; ++i) {
        start[i] = static_cast<char>(pattern.value >> (8 * (i % pattern.element_bytes)));
      }
    }
    return absl::OkStatus();
  }

  absl::Status Launch(SessionId session, LogicalStream, const KernelLaunch& launch) override {
    if (!launch.params.ok()) return absl::FailedPreconditionError("skipped");
    for (const LaunchArgument& arg : launch.args) {
      if (arg.kind == ParamKind::kScalar) continue;
      if (absl::StatusOr<std::string*> bytes = Lookup(session, arg.buffer); !bytes.ok()) {
        return bytes.status();
      }
    }
    launches_.push_back(launch);
    ++launches_by_session_[session];
    return absl::OkStatus();
  }

  // Synchronizations queued from now on wait (off the device thread, as a device's do)
  // until `release` is notified. Call while no command runs.
  void HoldSynchronizes(std::shared_ptr<absl::Notification> release) {
    hold_synchronizes_ = std::move(release);
  }

  PendingWait Synchronize(SessionId, std::optional<LogicalStream>) override {
    return [hold = hold_synchronizes_] {
      if (hold != nullptr) hold->WaitForNotification();
      return absl::OkStatus();
    };
  }
  // Copies happen at once: nothing waits for room or memory.
  PendingWait LastWorkEnd(SessionId, LogicalStream) override { return PendingWait(); }
  RoomWait StagingRoom(SessionId, LogicalStream) override { return RoomWait(); }
  RoomWait MemoryBeingFreed(uint64_t) override { return RoomWait(); }
  RoomWait StreamRoom(SessionId) override { return RoomWait(); }  // launches never wait
  // Held synchronizations cannot call back: their waits block a completion thread.
  WorkEndNotice NoticeOfWorkEnd(SessionId, const std::optional<std::vector<LogicalStream>>&) override { return nullptr; }

  std::shared_ptr<KernelOutput> KernelOutputOf(SessionId) override { return nullptr; }

  uint64_t CloseSession(SessionId session) override {
    uint64_t reclaimed = 0;
    absl::erase_if(buffers_, [&](const auto& entry) {
      if (entry.second.session != session) return false;
      reclaimed += entry.second.bytes.size();
      return true;
    });
    used_bytes_ -= reclaimed;
    launches_by_session_.erase(session);
    return reclaimed;
  }

  absl::StatusOr<RelocationReport> Relocate() override { return RelocationReport(); }
  void ReclaimFinished() override {}
  bool ReclaimWhenIdle() override { return false; }
  void AbortKernels() override {}
  bool WantsRelocation() const override { return false; }
  DeviceUsage Usage() const override {
    DeviceUsage usage;
    usage.memory_capacity_bytes = capacity_bytes_;
    usage.memory_used_bytes = used_bytes_;
    usage.memory_reserved_bytes = used_bytes_;
    for (const auto& [id, buffer] : buffers_) {
      SessionUsage& session = usage.sessions[buffer.session];
      session.memory_used_bytes += buffer.bytes.size();
      ++session.buffers;
    }
    for (const auto& [session, launches] : launches_by_session_) {
      usage.sessions[session].launches = launches;
    }
    return usage;
  }
  absl::Status DeviceHealth() override { return absl::OkStatus(); }
  DeviceLoss Abandon(const absl::Status&) override { return DeviceLoss(); }
  void Inherit(DeviceLoss) override {}

  const std::vector<KernelLaunch>& launches() const { return launches_; }

 private:
  struct Buffer {
    SessionId session;
    std::string bytes;
  };

  absl::StatusOr<std::string*> Lookup(SessionId session, BufferId buffer) {
    auto it = buffers_.find(buffer);
    if (it == buffers_.end() || it->second.session != session) {
      return absl::NotFoundError(absl::StrCat("buffer ", buffer, " not found in this session"));
    }
    return &it->second.bytes;
  }

  const uint64_t capacity_bytes_;
  uint64_t used_bytes_ = 0;
  BufferId next_buffer_ = 1;
  absl::flat_hash_map<BufferId, Buffer> buffers_;
  std::vector<KernelLaunch> launches_;
  absl::flat_hash_map<SessionId, uint64_t> launches_by_session_;
  std::shared_ptr<absl::Notification> hold_synchronizes_;  // null: they do not wait
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_COMMAND_FAKE_COMMAND_H_
