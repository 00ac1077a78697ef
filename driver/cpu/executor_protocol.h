#ifndef GPUCMDD_DRIVER_CPU_EXECUTOR_PROTOCOL_H_
#define GPUCMDD_DRIVER_CPU_EXECUTOR_PROTOCOL_H_

// Messages between the daemon and a device's kernel executor process, on a
// SOCK_SEQPACKET socket pair. The daemon sends a datagram of up to
// kMaxLaunchesPerMessage LaunchMessages, launches queued back to back on one stream;
// the executor runs them in order, each to completion, and answers with datagrams of
// replies in the same order: one once all have run, and, before it starts a launch
// when `reply_within_ms` passed since it last answered, one with those run so far, and
// before a reply that would take a datagram past kMaxReplyDatagramBytes. A
// reply is a LaunchReply followed by the `output_bytes` the launch printed. So
// consecutive launches cost one round trip, and the daemon, which stops an executor
// silent for its kernel time limit, hears from it at most `reply_within_ms` before any
// launch starts. Both sides are built from this header, so plain fixed-size structs
// suffice.

#include <cstdint>

#include "driver/cpu/kernel_abi.h"

namespace gpucmd {

inline constexpr uint32_t kExecutorMagic = 0x67707563;  // "gpuc"
inline constexpr int kMaxKernelArgs = 64;
inline constexpr int kMaxModulePathBytes = 1024;
inline constexpr int kMaxLaunchesPerMessage = 64;
// What one launch's printf output keeps; more is cut, saying so.
inline constexpr uint32_t kMaxLaunchOutputBytes = 16 << 10;

struct DeviceRange {
  uint64_t address;
  uint64_t size;
};

struct LaunchMessage {
  uint32_t magic;
  uint32_t arg_count;
  KernelDim3 grid;
  KernelDim3 block;
  uint32_t dynamic_shared_memory_bytes;
  uint32_t reply_within_ms;
  char module_path[kMaxModulePathBytes];  // NUL-terminated
  uint64_t args[kMaxKernelArgs];          // one 8-byte slot per argument
  // The device memory the launch may touch: [address, address + size) per buffer
  // argument. Everything else of the device mapping stays inaccessible.
  uint32_t range_count;
  DeviceRange ranges[kMaxKernelArgs];
};

struct LaunchReply {
  uint32_t magic;
  int32_t code;  // absl::StatusCode
  char message[512];
  uint32_t output_bytes;  // at most kMaxLaunchOutputBytes, right after this struct
};

// The largest datagram of launches, and of replies (those of several launches, or one
// with all its output).
inline constexpr size_t kMaxLaunchDatagramBytes = kMaxLaunchesPerMessage * sizeof(LaunchMessage);
inline constexpr size_t kMaxReplyDatagramBytes = 4 * (sizeof(LaunchReply) + kMaxLaunchOutputBytes);
// What each end of the socket must be able to send at once: a datagram goes whole or not
// at all, and the kernel refuses one larger than the sender's buffer (EMSGSIZE).
inline constexpr size_t kExecutorSocketBufferBytes =
    2 * (kMaxLaunchDatagramBytes > kMaxReplyDatagramBytes ? kMaxLaunchDatagramBytes
                                                          : kMaxReplyDatagramBytes);

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_CPU_EXECUTOR_PROTOCOL_H_
