#ifndef GPUCMDD_DRIVER_CPU_EXECUTOR_PROTOCOL_H_
#define GPUCMDD_DRIVER_CPU_EXECUTOR_PROTOCOL_H_

// Messages between the daemon and a device's kernel executor process, one per datagram
// on a SOCK_SEQPACKET socket pair: the daemon sends a LaunchMessage, the executor runs
// the kernel to completion and answers with a LaunchReply. Both sides are built from
// this header, so plain fixed-size structs suffice.

#include <cstdint>

#include "driver/cpu/kernel_abi.h"

namespace gpucmd {

inline constexpr uint32_t kExecutorMagic = 0x67707563;  // "gpuc"
inline constexpr int kMaxKernelArgs = 64;
inline constexpr int kMaxModulePathBytes = 1024;

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
};

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_CPU_EXECUTOR_PROTOCOL_H_
