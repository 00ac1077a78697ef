#ifndef GPUCMDD_SERVER_DESCRIPTOR_SOCKET_H_
#define GPUCMDD_SERVER_DESCRIPTOR_SOCKET_H_

// The descriptor socket: how a client hands the daemon a memfd for a shared-memory
// region (Note [Shared-memory regions] in server/core/shared_memory.h). A SOCK_SEQPACKET
// Unix socket (a UnixListener, server/unix_listener.h) beside the gRPC socket; a client
// connects, sends one message carrying one descriptor (SCM_RIGHTS) and receives one
// message (Note [Descriptor socket answers]). The token is bound to the connecting user
// (SO_PEERCRED), who alone may register it. Descriptors arrive close-on-exec; one that
// is not a shared-memory object (server/core/shared_memory_object.h) is closed at once.
// A handed-over descriptor nobody registers is closed when its lifetime ends
// (DescriptorHandoffs::CloseExpired, called by the server's thread).
//
// Note [Descriptor socket answers]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// One byte says what the answer is, the rest is its text (gpucmd.proto, at
// RegisterSharedMemory, is the clients' copy of this table):
//   'T' the token RegisterSharedMemory names;
//   'I' refused, INVALID_ARGUMENT: the message did not carry exactly one descriptor, or
//       the descriptor is not a sealed memfd (the text says which);
//   'R' refused, RESOURCE_EXHAUSTED: a limit on waiting connections or handoffs;
//   'E' refused for any other reason (FAILED_PRECONDITION to clients).
//
// No connection waits behind another: the accepting thread hands each to the
// DescriptorSocketServer and goes on. A connection whose message is there is answered
// at once; one that sends nothing yet waits on the server's own thread, together with
// every other such connection, and is dropped after `Limits::silence`. Each user may
// have at most `Limits::max_waiting_per_user` connections waiting (the daemon at most
// `Limits::max_waiting`): one more is answered 'R' and closed. So a client that opens
// connections and stays silent delays no other user's handoff, and holds a bounded
// number of the daemon's descriptors while it does.
//
// Thread-safety: Serve may be called from any thread.

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "server/core/descriptor_handoffs.h"

namespace gpucmd {

// The kinds of answer (Note [Descriptor socket answers]).
inline constexpr char kToken = 'T';
inline constexpr char kRefusedInvalid = 'I';
inline constexpr char kRefusedAtLimit = 'R';
inline constexpr char kRefusedOther = 'E';

// The descriptor socket's path for the gRPC Unix socket at `grpc_socket_path`.
std::string DescriptorSocketPathFor(const std::string& grpc_socket_path);

class DescriptorSocketServer {
 public:
  struct Limits {
    std::chrono::milliseconds silence = std::chrono::seconds(1);
    size_t max_waiting = 256;
    size_t max_waiting_per_user = 8;
  };

  // Starts the thread that waits on silent connections; a descriptor handed over goes to
  // `handoffs`, which must outlive the server. UNAVAILABLE when the thread's wake-up
  // descriptor cannot be made.
  static absl::StatusOr<std::unique_ptr<DescriptorSocketServer>> Start(
      DescriptorHandoffs* handoffs, Limits limits);
  // Stops the thread and closes the connections still waiting.
  ~DescriptorSocketServer();
  DescriptorSocketServer(const DescriptorSocketServer&) = delete;
  DescriptorSocketServer& operator=(const DescriptorSocketServer&) = delete;

  // Takes `connection`, accepted on a descriptor socket, and returns without waiting for
  // it: answered now when its message has arrived, else once it does (or dropped).
  void Serve(int connection);

 private:
  struct Waiting {
    int connection;
    std::string user;  // the peer's identity key
    std::chrono::steady_clock::time_point deadline;
  };

  DescriptorSocketServer(DescriptorHandoffs* handoffs, Limits limits, int wake);
  // Waits on the silent connections until each is answered or dropped.
  void Run();
  // Receives the connection's one message without waiting and answers it; false when
  // nothing has arrived yet.
  bool TryAnswer(int connection, const std::string& user);

  DescriptorHandoffs* const handoffs_;
  const Limits limits_;
  const int wake_;  // an eventfd: readable when a connection joins or the server stops
  Mutex mutex_;
  std::vector<Waiting> waiting_ ABSL_GUARDED_BY(mutex_);
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::thread thread_;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_DESCRIPTOR_SOCKET_H_
