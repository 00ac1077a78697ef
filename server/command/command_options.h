#ifndef GPUCMDD_SERVER_COMMAND_COMMAND_OPTIONS_H_
#define GPUCMDD_SERVER_COMMAND_COMMAND_OPTIONS_H_

// The knobs of one device's Command<D>: the daemon's limits and the device's own. A
// plain value; the composition root fills it from the config and the device description.

#include <cstdint>
#include <memory>

#include "server/command/drop_queue.h"
#include "server/command/memory_pool.h"
#include "server/command/payload_pool.h"

namespace gpucmd {

// What a device accepts in a launch, checked before anything is resolved.
struct LaunchLimits {
  uint32_t max_threads_per_block = 1024;
  uint32_t max_block_z = 64;
  uint32_t max_dynamic_shared_memory_bytes = 48 << 10;
  // Tensor-map arguments need a driver that encodes them (CUDA).
  bool accepts_tensor_maps = false;
};

struct CommandOptions {
  // Host payloads up to this size are staged in pinned memory; larger ones are copied
  // from the request's own (owned) buffer in place.
  uint64_t staging_threshold_bytes = uint64_t{1} << 20;
  uint64_t max_cached_pinned_bytes = uint64_t{64} << 20;
  // 0: no per-session limit.
  uint64_t session_quota_bytes = 0;
  // Launches, device copies and reads one session may have on the device's streams, not
  // yet run to their end; one more is RESOURCE_EXHAUSTED until some finish (Note [Stream
  // backpressure] in server/command/command.h). 0: no limit.
  uint32_t session_queued_on_streams = 1024;
  // Logical streams one session may use.
  uint32_t session_max_streams = 256;
  LaunchLimits launch;
  MemoryPool::Options memory;  // capacity_bytes is taken from the backend
  DropQueueThresholds drop_queue;
  // Where large payloads come from and go back to (Note [Payload pool]); shared with the
  // RPC layer, which parses writes into its strings. Null: fresh memory each time.
  std::shared_ptr<PayloadPool> payloads;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_COMMAND_COMMAND_OPTIONS_H_
