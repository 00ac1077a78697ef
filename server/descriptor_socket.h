#ifndef GPUCMDD_SERVER_DESCRIPTOR_SOCKET_H_
#define GPUCMDD_SERVER_DESCRIPTOR_SOCKET_H_

// The descriptor socket: how a client hands the daemon a memfd for a shared-memory
// region (Note [Shared-memory regions] in server/core/shared_memory.h). A SOCK_SEQPACKET
// Unix socket (a UnixListener, server/unix_listener.h) beside the gRPC socket; a client
// connects, sends one message carrying one descriptor (SCM_RIGHTS) and receives one
// message: "T" and the token it then names in RegisterSharedMemory, or "E" and why not.
// The token is bound to the connecting user (SO_PEERCRED), who alone may register it.
// A connection that sends nothing within a second is dropped. Descriptors arrive
// close-on-exec.
//
// Thread-safety: ServeDescriptorHandoff may run on any thread; `handoffs` is.

#include <string>

#include "server/core/descriptor_handoffs.h"

namespace gpucmd {

// The descriptor socket's path for the gRPC Unix socket at `grpc_socket_path`.
std::string DescriptorSocketPathFor(const std::string& grpc_socket_path);

// Serves one connection to the descriptor socket, then closes it; a descriptor handed
// over goes to `handoffs`.
void ServeDescriptorHandoff(int connection, DescriptorHandoffs& handoffs);

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_DESCRIPTOR_SOCKET_H_
