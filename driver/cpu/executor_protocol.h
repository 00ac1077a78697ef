#ifndef GPUCMDD_DRIVER_CPU_EXECUTOR_PROTOCOL_H_
#define GPUCMDD_DRIVER_CPU_EXECUTOR_PROTOCOL_H_

// Messages between the daemon and a device's kernel executor process, on a
// SOCK_SEQPACKET socket pair. The daemon sends a datagram of up to
// kMaxLaunchesPerMessage launches, queued back to back on one stream; the executor runs
// them in order, each to completion, and answers with datagrams of replies in the same
// order: one once all have run, and, before it starts a launch when `reply_within_ms`
// passed since it last answered, one with those run so far, and before a reply that
// would take a datagram past kMaxReplyDatagramBytes. So consecutive launches cost one
// round trip, and the daemon, which stops an executor silent for its kernel time limit,
// hears from it at most `reply_within_ms` before any launch starts.
//
// Both are packed: a launch is a LaunchHeader, its module path (path_bytes, no NUL),
// its arguments (arg_count 8-byte slots) and its ranges (range_count DeviceRanges),
// padded to a multiple of 8 bytes; a reply is a LaunchReply, its message and the output
// the launch printed. A datagram carries only the bytes its launches use (an empty
// launch is about a hundred bytes, not the several kilobytes its largest form takes).
// Both sides are built from this header and its codec.
//
// Thread-safety: plain functions over the caller's buffers.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "driver/cpu/kernel_abi.h"

namespace gpucmd {

inline constexpr uint32_t kExecutorMagic = 0x67707563;  // "gpuc"
inline constexpr int kMaxKernelArgs = 64;
inline constexpr int kMaxModulePathBytes = 1024;  // with its NUL, where one is needed
inline constexpr int kMaxLaunchesPerMessage = 64;
// What one launch's printf output keeps; more is cut, saying so.
inline constexpr uint32_t kMaxLaunchOutputBytes = 16 << 10;
// What one reply's message keeps; more is cut.
inline constexpr uint32_t kMaxReplyMessageBytes = 511;

struct DeviceRange {
  uint64_t address;
  uint64_t size;
};

struct LaunchHeader {
  uint32_t magic;
  uint32_t path_bytes;   // less than kMaxModulePathBytes
  uint32_t arg_count;    // at most kMaxKernelArgs
  uint32_t range_count;  // at most kMaxKernelArgs
  KernelDim3 grid;
  KernelDim3 block;
  uint32_t dynamic_shared_memory_bytes;
  uint32_t reply_within_ms;
};

struct LaunchReply {
  uint32_t magic;
  int32_t code;            // absl::StatusCode
  uint32_t message_bytes;  // at most kMaxReplyMessageBytes, right after this struct
  uint32_t output_bytes;   // at most kMaxLaunchOutputBytes, right after the message
};

// The bytes one launch takes in a datagram.
constexpr size_t LaunchBytes(size_t path_bytes, size_t arg_count, size_t range_count) {
  return sizeof(LaunchHeader) + (path_bytes + 7) / 8 * 8 + arg_count * sizeof(uint64_t) +
         range_count * sizeof(DeviceRange);
}

// The largest datagram of launches, and of replies (those of several launches, or one
// with all its output).
inline constexpr size_t kMaxLaunchDatagramBytes =
    kMaxLaunchesPerMessage * LaunchBytes(kMaxModulePathBytes - 1, kMaxKernelArgs, kMaxKernelArgs);
inline constexpr size_t kMaxReplyDatagramBytes =
    4 * (sizeof(LaunchReply) + kMaxReplyMessageBytes + kMaxLaunchOutputBytes);
// What each end of the socket must be able to send at once: a datagram goes whole or not
// at all, and the kernel refuses one larger than the sender's buffer (EMSGSIZE).
inline constexpr size_t kExecutorSocketBufferBytes =
    2 * (kMaxLaunchDatagramBytes > kMaxReplyDatagramBytes ? kMaxLaunchDatagramBytes
                                                          : kMaxReplyDatagramBytes);

// One launch of a datagram, its parts pointing into the datagram.
struct PackedLaunch {
  LaunchHeader header;
  absl::string_view module_path;
  absl::Span<const uint64_t> args;
  absl::Span<const DeviceRange> ranges;
};

// Appends a launch to `datagram`. The caller keeps within the header's limits.
void AppendLaunch(const LaunchHeader& header, absl::string_view module_path,
                  absl::Span<const uint64_t> args, absl::Span<const DeviceRange> ranges,
                  std::string& datagram);

// The launches of a received datagram, or false when it breaks the protocol: a wrong
// magic, a count or length past its limit, bytes cut short or left over, more than
// kMaxLaunchesPerMessage launches, or a datagram not stored 8-byte aligned (the launches
// point into it).
bool ParseLaunches(absl::Span<const std::byte> datagram, std::vector<PackedLaunch>& launches);

// Appends a reply (the message cut to kMaxReplyMessageBytes, the output to
// kMaxLaunchOutputBytes) to `datagram`.
void AppendReply(int32_t code, absl::string_view message, absl::string_view output,
                 std::string& datagram);

// The bytes AppendReply appends for `message` and `output`.
size_t ReplyBytes(absl::string_view message, absl::string_view output);

// One reply of a datagram, its parts pointing into the datagram.
struct PackedReply {
  int32_t code;
  absl::string_view message;
  absl::string_view output;
};

// The replies of a received datagram, or false when it breaks the protocol or holds
// more than `at_most`.
bool ParseReplies(absl::Span<const std::byte> datagram, size_t at_most,
                  std::vector<PackedReply>& replies);

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_CPU_EXECUTOR_PROTOCOL_H_
