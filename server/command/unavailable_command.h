#ifndef GPUCMDD_SERVER_COMMAND_UNAVAILABLE_COMMAND_H_
#define GPUCMDD_SERVER_COMMAND_UNAVAILABLE_COMMAND_H_

// What a device thread serves with when its device could not be brought up (or back
// after a reset): every command answers UNAVAILABLE with the reason, so work queued
// before the failure still gets its reply.
//
// Thread-safety: as CommandInterface (device thread only).

#include "server/command/command_interface.h"

namespace gpucmd {

class UnavailableCommand final : public CommandInterface {
 public:
  // `reason` must be UNAVAILABLE.
  explicit UnavailableCommand(absl::Status reason) : reason_(std::move(reason)) {}

  absl::StatusOr<BufferId> Allocate(SessionId, uint64_t) override { return reason_; }
  absl::Status Free(SessionId, BufferId) override { return reason_; }
  absl::Status Write(SessionId, LogicalStream, BufferId, const CopyLayout&,
                     std::string) override {
    return reason_;
  }
  absl::StatusOr<HostRegistration> RegisterHost(const HostResource&) override {
    return reason_;
  }
  absl::Status WriteShared(SessionId, LogicalStream, BufferId, const CopyLayout&,
                           Bytes) override {
    return reason_;
  }
  PendingWait LastWorkEnd(SessionId, LogicalStream) override { return PendingWait(); }
  absl::StatusOr<PendingRead> Read(SessionId, LogicalStream, BufferId,
                                   const CopyLayout&) override {
    return reason_;
  }
  absl::StatusOr<PendingRead> ReadShared(SessionId, LogicalStream, BufferId, const CopyLayout&,
                                         Bytes) override {
    return reason_;
  }
  absl::Status CheckRange(SessionId, BufferId, const CopyLayout&) override { return reason_; }
  absl::Status Copy(SessionId, LogicalStream, BufferId, BufferId,
                    const DeviceCopyLayout&) override {
    return reason_;
  }
  absl::Status Fill(SessionId, LogicalStream, BufferId, const CopyLayout&, FillPattern) override {
    return reason_;
  }
  absl::Status Launch(SessionId, LogicalStream, const KernelLaunch&) override { return reason_; }
  PendingWait Synchronize(SessionId, std::optional<LogicalStream>) override {
    return [reason = reason_] { return reason; };
  }
  RoomWait StagingRoom(SessionId, LogicalStream) override { return RoomWait(); }
  RoomWait MemoryBeingFreed(uint64_t) override { return RoomWait(); }
  RoomWait StreamRoom(SessionId) override { return RoomWait(); }  // launches fail at once
  WorkEndNotice NoticeOfWorkEnd(SessionId, const std::optional<std::vector<LogicalStream>>&) override { return nullptr; }  // waits return at once
  std::shared_ptr<KernelOutput> KernelOutputOf(SessionId) override { return nullptr; }
  uint64_t CloseSession(SessionId) override { return 0; }
  absl::StatusOr<RelocationReport> Relocate() override { return reason_; }
  void ReclaimFinished() override {}
  bool ReclaimWhenIdle() override { return false; }
  void AbortKernels() override {}
  bool WantsRelocation() const override { return false; }
  DeviceUsage Usage() const override { return DeviceUsage(); }
  // Already down: nothing more to lose.
  absl::Status DeviceHealth() override { return absl::OkStatus(); }
  DeviceLoss Abandon(const absl::Status&) override { return DeviceLoss(); }
  void Inherit(DeviceLoss) override {}

 private:
  const absl::Status reason_;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_COMMAND_UNAVAILABLE_COMMAND_H_
