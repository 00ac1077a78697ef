#ifndef GPUCMDD_BASE_SEND_DESCRIPTOR_H_
#define GPUCMDD_BASE_SEND_DESCRIPTOR_H_

// Passing a descriptor to another process: one message of one byte (`tag`) carrying `fd`
// (SCM_RIGHTS) on the connected Unix socket `connection`.
//
// Thread-safety: a free function; the caller owns both descriptors.

#include "absl/status/status.h"

namespace gpucmd {

// UNAVAILABLE, with the system's words, when the message cannot be sent.
absl::Status SendDescriptor(int connection, int fd, char tag = 'R');

}  // namespace gpucmd

#endif  // GPUCMDD_BASE_SEND_DESCRIPTOR_H_
