#ifndef GPUCMDD_SERVER_UNIX_LISTENER_H_
#define GPUCMDD_SERVER_UNIX_LISTENER_H_

// A listening Unix socket and the thread that accepts its connections, handing each to
// a handler. The daemon serves its gRPC socket this way, not through gRPC's own
// listener, so that every connection's peer credentials can be read
// (server/rpc/peer_identity.h), and its descriptor socket (server/descriptor_socket.h).
// The socket is bound here or adopted from a service manager (socket activation);
// only a socket bound here is removed at the end.
//
// Thread-safety: the handler runs on the accepting thread, one connection at a time;
// Stop and destruction belong to the thread that created the listener.

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace gpucmd {

class UnixListener {
 public:
  // Takes the accepted connection (close-on-exec): closing it is the handler's part.
  using Handler = std::function<void(int connection)>;

  // Binds `path` (a socket of `type`, e.g. SOCK_STREAM) with no access for others (the
  // caller then sets its mode) and starts accepting. UNAVAILABLE when it cannot.
  static absl::StatusOr<std::unique_ptr<UnixListener>> Bind(const std::string& path, int type,
                                                            Handler handler);
  // Accepts on `listener`, a socket bound to `path` and listening already (one a
  // service manager passed); takes it.
  static absl::StatusOr<std::unique_ptr<UnixListener>> Adopt(int listener,
                                                             const std::string& path,
                                                             Handler handler);

  // Stops accepting; connections already handed over are not touched. Idempotent.
  void Stop();
  // Stops, closes the socket, and removes the path when it was bound here.
  ~UnixListener();
  UnixListener(const UnixListener&) = delete;
  UnixListener& operator=(const UnixListener&) = delete;

  const std::string& path() const { return path_; }
  bool adopted() const { return !owns_path_; }

 private:
  // Starts accepting on `listener` (taken; on error closed, and `path` removed when
  // `owns_path`).
  static absl::StatusOr<std::unique_ptr<UnixListener>> Serve(int listener,
                                                             const std::string& path,
                                                             bool owns_path, Handler handler);
  UnixListener(int listener, std::string path, bool owns_path, int stop_read, int stop_write,
               Handler handler);
  void Accept();

  const int listener_;
  const std::string path_;
  const bool owns_path_;
  const int stop_read_;  // readable once accepting is to stop
  const int stop_write_;
  const Handler handler_;
  std::thread thread_;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_UNIX_LISTENER_H_
