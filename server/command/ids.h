#ifndef GPUCMDD_SERVER_COMMAND_IDS_H_
#define GPUCMDD_SERVER_COMMAND_IDS_H_

// The numeric names the daemon's layers share. Plain integers: a session's token is
// what authenticates a client (server/core/session_registry.h); these ids are only
// meaningful inside the daemon, and every lookup checks them against the session.

#include <cstdint>

namespace gpucmd {

// A session, as the device queue and the Command know it. Ids start at 1.
using SessionId = uint64_t;
// Device work that belongs to no client session (defragmentation, reclaim).
inline constexpr SessionId kNoSession = 0;

// A buffer handle: stable for the buffer's life, never reused on its device.
using BufferId = uint64_t;

// A session's stream as the client names it; mapped onto the device's stream pool.
using LogicalStream = uint64_t;

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_COMMAND_IDS_H_
