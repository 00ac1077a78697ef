#ifndef GPUCMDD_SERVER_DESCRIPTOR_SOCKET_H_
#define GPUCMDD_SERVER_DESCRIPTOR_SOCKET_H_

// The descriptor socket: how a client hands the daemon a memfd for a shared-memory
// region (Note [Shared-memory regions] in server/core/shared_memory.h). A SOCK_SEQPACKET
// Unix socket; a client connects, sends one message carrying one descriptor
// (SCM_RIGHTS) and receives one message: "T" and the token it then names in
// RegisterSharedMemory, or "E" and why not. A connection that sends nothing within a
// second is dropped. Descriptors arrive close-on-exec.
//
// Thread-safety: one thread serves the socket; construction and destruction belong to
// the daemon's thread.

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "server/core/descriptor_handoffs.h"

namespace gpucmd {

class DescriptorSocket {
 public:
  // The socket's path for the gRPC Unix socket at `grpc_socket_path`.
  static std::string PathFor(const std::string& grpc_socket_path);

  // Binds `path` (no access for others until the caller sets it) and starts serving;
  // handed-over descriptors go to `handoffs`, which must outlive this.
  static absl::StatusOr<std::unique_ptr<DescriptorSocket>> Listen(const std::string& path,
                                                                  DescriptorHandoffs* handoffs);
  // Stops serving and removes the socket.
  ~DescriptorSocket();
  DescriptorSocket(const DescriptorSocket&) = delete;
  DescriptorSocket& operator=(const DescriptorSocket&) = delete;

  const std::string& path() const { return path_; }

 private:
  DescriptorSocket(std::string path, int listener, int stop_read, int stop_write,
                   DescriptorHandoffs* handoffs);
  void Serve();
  void ServeConnection(int connection);

  const std::string path_;
  const int listener_;
  const int stop_read_;   // readable once the socket is to stop
  const int stop_write_;
  DescriptorHandoffs* const handoffs_;
  std::thread thread_;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_DESCRIPTOR_SOCKET_H_
